//! Reading the judge's answers back. An assessment without a usable score
//! is an error, never a half-stored score; everything else (sections, tags)
//! is read as far as the judge followed the form.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::vocabulary::{DIMENSIONS, Dimension, FAILURE_TAGS, FailureTag, Outcome};

/// A judge's first answer, read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assessment {
    /// 0–100, inside the range of `outcome`.
    pub score: u8,
    /// The verdict (from the judge's `VERDICT:` line, else the score's range).
    pub outcome: Outcome,
    /// The failure tags that apply, in vocabulary order, each once.
    pub failure_tags: Vec<FailureTag>,
    /// The text of each dimension's section the judge wrote.
    pub dimensions: BTreeMap<Dimension, String>,
}

/// Why an assessment cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// No `SCORE:` line.
    #[error("the judge gave no score (expected a line `SCORE: <0-100>`)")]
    NoScore,
    /// A score above 100.
    #[error("the judge's score {0} is not between 0 and 100")]
    OutOfRange(u64),
    /// A score outside the range its verdict allows.
    #[error(
        "the judge's score {score} is outside the {low}–{high} range of its verdict `{verdict}`"
    )]
    Inconsistent {
        /// The score given.
        score: u8,
        /// The verdict given.
        verdict: &'static str,
        /// Lowest score of the verdict.
        low: u8,
        /// Highest score of the verdict.
        high: u8,
    },
}

// A labelled line, with the markdown a model may wrap it in
// (`**SCORE:** 72`, `- Score = 72/100`).
static SCORE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?im)^[\s>*_#-]*score[\s*_]*[:=][\s*_]*(\d+)").expect("valid regex")
});
static VERDICT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?im)^[\s>*_#-]*(?:verdict|outcome)[\s*_]*[:=][\s*_]*([a-z][a-z ]*)")
        .expect("valid regex")
});
static TAGS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?im)^[\s>*_#-]*failure[\s_-]*tags[\s*_]*[:=](.*)$").expect("valid regex")
});
static HEADING: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*#{1,6}\s*(.+?)\s*#*\s*$").expect("valid regex"));

/// Reads the judge's first answer.
pub fn parse_assessment(text: &str) -> Result<Assessment, ParseError> {
    // The last score counts: a judge that restates its score ends with it.
    let raw = SCORE
        .captures_iter(text)
        .last()
        .and_then(|c| c.get(1))
        .ok_or(ParseError::NoScore)?
        .as_str();
    let value: u64 = raw.parse().unwrap_or(u64::MAX);
    let score = u8::try_from(value)
        .ok()
        .filter(|s| *s <= 100)
        .ok_or(ParseError::OutOfRange(value))?;
    let outcome = match VERDICT
        .captures_iter(text)
        .last()
        .and_then(|c| verdict(&c[1]))
    {
        Some(verdict) => {
            let range = verdict.range();
            if !range.contains(&score) {
                return Err(ParseError::Inconsistent {
                    score,
                    verdict: verdict.word(),
                    low: *range.start(),
                    high: *range.end(),
                });
            }
            verdict
        }
        None => Outcome::for_score(score),
    };
    Ok(Assessment {
        score,
        outcome,
        failure_tags: failure_tags(text),
        dimensions: sections(text),
    })
}

fn verdict(word: &str) -> Option<Outcome> {
    let w = word.trim().to_ascii_lowercase();
    // "partly correct" and "incorrect" both contain "correct".
    if w.starts_with("partial") || w.starts_with("partly") {
        Some(Outcome::Partial)
    } else if w.starts_with("wrong") || w.starts_with("incorrect") {
        Some(Outcome::Wrong)
    } else if w.starts_with("correct") {
        Some(Outcome::Correct)
    } else {
        None
    }
}

/// The tags of the `FAILURE TAGS:` line; without one, every tag whose slug
/// the text uses.
fn failure_tags(text: &str) -> Vec<FailureTag> {
    let mut tags: Vec<FailureTag> = match TAGS.captures_iter(text).last() {
        Some(line) => line[1]
            .split([',', ';'])
            .filter_map(FailureTag::from_slug)
            .collect(),
        None => {
            let lower = text.to_ascii_lowercase();
            FAILURE_TAGS
                .into_iter()
                .filter(|t| lower.contains(t.slug()))
                .collect()
        }
    };
    tags.sort();
    tags.dedup();
    tags
}

/// The text under each dimension's heading, up to the next heading or
/// labelled line.
fn sections(text: &str) -> BTreeMap<Dimension, String> {
    let mut out: BTreeMap<Dimension, String> = BTreeMap::new();
    let mut current: Option<Dimension> = None;
    for line in text.lines() {
        if let Some(h) = HEADING.captures(line) {
            let title = h[1].trim_matches(|c: char| !c.is_alphanumeric());
            current = DIMENSIONS
                .into_iter()
                .find(|d| d.heading().eq_ignore_ascii_case(title));
            continue;
        }
        if SCORE.is_match(line) || VERDICT.is_match(line) || TAGS.is_match(line) {
            current = None;
            continue;
        }
        if let Some(d) = current {
            let section = out.entry(d).or_default();
            if !section.is_empty() || !line.trim().is_empty() {
                section.push_str(line);
                section.push('\n');
            }
        }
    }
    out.into_iter()
        .map(|(d, s)| (d, s.trim().to_string()))
        .filter(|(_, s)| !s.is_empty())
        .collect()
}

/// A judge's second answer, read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolReport {
    /// Tools that would have answered what the investigation could not.
    pub missing: Vec<String>,
    /// Existing tools that were hard to use, and why.
    pub hard_to_use: Vec<String>,
}

/// Reads the judge's second answer: the bullet lines under `MISSING TOOLS:`
/// and `HARD TO USE:` (`none` lists nothing).
pub fn parse_tool_report(text: &str) -> ToolReport {
    let mut report = ToolReport::default();
    let mut list: Option<&mut Vec<String>> = None;
    for line in text.lines() {
        let bare = line
            .trim()
            .trim_matches(|c: char| c == '*' || c == '#' || c == '_')
            .trim();
        let upper = bare.to_ascii_uppercase();
        if upper.starts_with("MISSING TOOLS") {
            list = Some(&mut report.missing);
            continue;
        }
        if upper.starts_with("HARD TO USE") {
            list = Some(&mut report.hard_to_use);
            continue;
        }
        let Some(items) = list.as_deref_mut() else {
            continue;
        };
        let item = bare
            .strip_prefix(['-', '*', '•'])
            .map(str::trim)
            .unwrap_or_default();
        if !item.is_empty() && !item.eq_ignore_ascii_case("none") {
            items.push(item.to_string());
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
## Outcome
The OOM kill is the root cause: `pods_get` returned `OOMKilled` (iteration 2).

## Evidence
Memory at the limit per `prometheus.query` at 10:02.

## Tool use
Did not read the previous container's logs although `pods_log` was available.

## Reasoning
Sound.

## Completeness
The deployment's recent rollout was not examined.

**VERDICT:** correct
FAILURE TAGS: missed-available-tool, Incomplete evidence
**SCORE:** 72
";

    #[test]
    fn a_well_formed_assessment_is_read_whole() {
        let a = parse_assessment(GOOD).unwrap();
        assert_eq!(a.score, 72);
        assert_eq!(a.outcome, Outcome::Correct);
        assert_eq!(
            a.failure_tags,
            [
                FailureTag::MissedAvailableTool,
                FailureTag::IncompleteEvidence
            ]
        );
        assert_eq!(a.dimensions.len(), 5);
        assert!(a.dimensions[&Dimension::ToolUse].contains("`pods_log` was available"));
        assert_eq!(a.dimensions[&Dimension::Reasoning], "Sound.");
    }

    #[test]
    fn scores_are_read_through_markdown_and_restatements() {
        assert_eq!(parse_assessment("Score = 40/100").unwrap().score, 40);
        assert_eq!(parse_assessment("- **Score**: 12").unwrap().score, 12);
        let restated = "SCORE: 50\nOn reflection the evidence is weaker.\nSCORE: 45";
        assert_eq!(parse_assessment(restated).unwrap().score, 45);
        // Without a verdict the score's range is the verdict.
        assert_eq!(
            parse_assessment("SCORE: 45").unwrap().outcome,
            Outcome::Partial
        );
        assert_eq!(
            parse_assessment("VERDICT: partly correct\nSCORE: 45")
                .unwrap()
                .outcome,
            Outcome::Partial
        );
        assert_eq!(
            parse_assessment("Verdict: incorrect\nSCORE: 10")
                .unwrap()
                .outcome,
            Outcome::Wrong
        );
    }

    #[test]
    fn an_answer_without_a_usable_score_is_refused() {
        assert_eq!(
            parse_assessment("The investigation was fine."),
            Err(ParseError::NoScore)
        );
        assert_eq!(
            parse_assessment("SCORE: 101"),
            Err(ParseError::OutOfRange(101))
        );
        assert_eq!(
            parse_assessment("SCORE: 99999999999999999999999"),
            Err(ParseError::OutOfRange(u64::MAX))
        );
        let e = parse_assessment("VERDICT: wrong\nSCORE: 80").unwrap_err();
        assert_eq!(
            e.to_string(),
            "the judge's score 80 is outside the 0–34 range of its verdict `wrong`"
        );
    }

    #[test]
    fn tags_come_from_the_tags_line_else_from_slugs_in_the_text() {
        let a = parse_assessment("FAILURE TAGS: none\nSCORE: 90").unwrap();
        assert!(a.failure_tags.is_empty());
        let a = parse_assessment(
            "It shows hallucinated-evidence twice and a wrong-conclusion.\nSCORE: 5",
        )
        .unwrap();
        assert_eq!(
            a.failure_tags,
            [
                FailureTag::HallucinatedEvidence,
                FailureTag::WrongConclusion
            ]
        );
    }

    #[test]
    fn the_tool_report_lists_both_kinds() {
        let r = parse_tool_report(
            "**MISSING TOOLS:**\n- node pressure history: was the node out of memory?\n\n\
             HARD TO USE:\n- kubernetes-server.pods_log: no way to ask for the previous container\n",
        );
        assert_eq!(
            r.missing,
            ["node pressure history: was the node out of memory?"]
        );
        assert_eq!(
            r.hard_to_use,
            ["kubernetes-server.pods_log: no way to ask for the previous container"]
        );
        assert_eq!(
            parse_tool_report("MISSING TOOLS:\nnone\nHARD TO USE:\n- none"),
            ToolReport::default()
        );
    }
}
