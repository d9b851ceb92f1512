//! `${VAR}` environment interpolation of manifest text (local mode).
//!
//! `${NAME}` is replaced by the variable's value; an unset variable is an
//! error (never an empty string: a silently empty API key or URL is worse
//! than a clear failure). `$${` produces a literal `${`. A `$` not followed
//! by `{` is kept. Full-line YAML comments are left alone.

use crate::error::Problem;

/// Replaces every `${NAME}` in `text` using `lookup`. Returns every problem
/// found (all unset variables, not just the first).
pub fn interpolate(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, Vec<Problem>> {
    let mut out = String::with_capacity(text.len());
    let mut problems = Vec::new();
    for (index, line) in text.split_inclusive('\n').enumerate() {
        if line.trim_start().starts_with('#') {
            out.push_str(line);
            continue;
        }
        interpolate_line(line, index + 1, lookup, &mut out, &mut problems);
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

fn interpolate_line(
    line: &str,
    line_no: usize,
    lookup: &dyn Fn(&str) -> Option<String>,
    out: &mut String,
    problems: &mut Vec<Problem>,
) {
    let mut rest = line;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos..];
        if let Some(tail) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = tail;
        } else if let Some(tail) = after.strip_prefix("${") {
            match tail.find('}') {
                Some(end) if is_var_name(&tail[..end]) => {
                    let name = &tail[..end];
                    match lookup(name) {
                        Some(value) => out.push_str(&value),
                        None => problems.push(Problem::UnsetVariable {
                            name: name.to_string(),
                            line: line_no,
                        }),
                    }
                    rest = &tail[end + 1..];
                }
                _ => {
                    let text: String = after.chars().take_while(|c| *c != '\n').take(40).collect();
                    problems.push(Problem::BadVariable {
                        text: text.trim_end().to_string(),
                        line: line_no,
                    });
                    out.push_str("${");
                    rest = tail;
                }
            }
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
}

fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOST" => Some("prom.svc".into()),
            "PORT" => Some("9090".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn replaces_and_escapes() {
        let out = interpolate(
            "url: http://${HOST}:${PORT}/mcp\nx: '$${HOST}' $5 ${EMPTY}end\n",
            &env,
        )
        .unwrap();
        assert_eq!(out, "url: http://prom.svc:9090/mcp\nx: '${HOST}' $5 end\n");
    }

    #[test]
    fn unset_variables_are_all_reported_with_lines() {
        let err = interpolate("a: ${HOST}\nb: ${NOPE}\nc: ${ALSO_NOPE}\n", &env).unwrap_err();
        let text: Vec<String> = err.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 2);
        assert!(
            text[0].contains("line 2") && text[0].contains("\"NOPE\""),
            "{text:?}"
        );
        assert!(
            text[1].contains("line 3") && text[1].contains("ALSO_NOPE"),
            "{text:?}"
        );
    }

    #[test]
    fn malformed_references_are_errors() {
        for bad in ["a: ${HOST\n", "a: ${1X}\n", "a: ${}\n", "a: ${A-B}\n"] {
            let err = interpolate(bad, &env).unwrap_err();
            assert!(
                matches!(err[0], Problem::BadVariable { line: 1, .. }),
                "{bad:?}: {err:?}"
            );
        }
    }

    #[test]
    fn comment_lines_are_left_alone() {
        let out = interpolate("# uses ${UNSET}\nkey: v\n", &env).unwrap();
        assert_eq!(out, "# uses ${UNSET}\nkey: v\n");
    }
}
