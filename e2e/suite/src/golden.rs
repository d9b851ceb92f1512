//! Golden files: JSON documents compared after normalisation.
//!
//! Ids are replaced by names the test gives them ([`Normalizer::name`],
//! e.g. `<stage:1>`), leftover UUIDs by `<uuid>`, times by `<time>` and
//! durations by `<ms>`, so a golden file says what a user would see and
//! nothing that changes between runs. `TARSY_UPDATE_GOLDEN=1` rewrites the
//! files instead of comparing.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|\b[0-9a-f]{32}\b")
        .expect("valid regex")
});
static TIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?")
        .expect("valid regex")
});

/// Replaces run-specific values by stable placeholders.
#[derive(Debug, Default, Clone)]
pub struct Normalizer {
    names: HashMap<String, String>,
}

impl Normalizer {
    /// An empty normaliser.
    pub fn new() -> Self {
        Self::default()
    }

    /// Gives `id` the placeholder `<label>` wherever it appears (whole
    /// values and inside text). Empty ids are ignored; the first name
    /// given to an id wins.
    pub fn name(&mut self, id: &str, label: impl Into<String>) {
        if !id.is_empty() {
            self.names
                .entry(id.to_string())
                .or_insert_with(|| format!("<{}>", label.into()));
        }
    }

    /// The placeholder of `id`, if named.
    pub fn label(&self, id: &str) -> Option<&str> {
        self.names.get(id).map(String::as_str)
    }

    /// Normalises a string: named ids, other UUIDs, times.
    pub fn text(&self, s: &str) -> String {
        if let Some(l) = self.names.get(s) {
            return l.clone();
        }
        let replaced = UUID.replace_all(s, |c: &regex::Captures<'_>| {
            self.names
                .get(&c[0])
                .cloned()
                .unwrap_or_else(|| "<uuid>".to_string())
        });
        TIME.replace_all(&replaced, "<time>").into_owned()
    }

    /// Normalises a document: strings as [`Normalizer::text`], `*_ms`
    /// durations → `<ms>`, WebSocket cursors (`db_event_id`) dropped.
    pub fn apply(&self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.apply(x)).collect()),
            Value::Object(o) => {
                let mut out = Map::new();
                for (k, x) in o {
                    if k == "db_event_id" {
                        continue;
                    }
                    let nx = if (k == "duration_ms" || k.ends_with("_ms")) && x.is_number() {
                        Value::String("<ms>".into())
                    } else {
                        self.apply(x)
                    };
                    out.insert(self.text(k), nx);
                }
                Value::Object(out)
            }
            other => other.clone(),
        }
    }
}

/// Path of the golden file `name` (`testdata/golden/NAME.json`).
pub fn golden_path(name: &str) -> PathBuf {
    crate::harness::testdata(&format!("golden/{name}.json"))
}

/// True when golden files are being rewritten (`TARSY_UPDATE_GOLDEN=1`).
pub fn updating() -> bool {
    std::env::var("TARSY_UPDATE_GOLDEN").is_ok_and(|v| v == "1" || v == "true")
}

/// Compares `actual` with the golden file `name`, or rewrites it when
/// [`updating`]. On a difference, panics showing the first differing
/// lines.
pub fn assert_golden(name: &str, actual: &Value) {
    let path = golden_path(name);
    let text = serde_json::to_string_pretty(actual).expect("JSON values serialise") + "\n";
    if updating() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        }
        std::fs::write(&path, &text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "golden file {} is missing ({e}); run with TARSY_UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    if expected == text {
        return;
    }
    let actual_path = path.with_extension("actual.json");
    let _ = std::fs::write(&actual_path, &text);
    panic!(
        "{} differs from the golden file {} (actual written to {}):\n{}",
        name,
        path.display(),
        actual_path.display(),
        diff(&expected, &text)
    );
}

/// The first few differing lines of two texts, with line numbers.
fn diff(expected: &str, actual: &str) -> String {
    let e: Vec<&str> = expected.lines().collect();
    let a: Vec<&str> = actual.lines().collect();
    let mut out = String::new();
    let mut shown = 0;
    for i in 0..e.len().max(a.len()) {
        let (x, y) = (e.get(i), a.get(i));
        if x != y {
            out.push_str(&format!(
                "line {}:\n  - {}\n  + {}\n",
                i + 1,
                x.unwrap_or(&"<none>"),
                y.unwrap_or(&"<none>")
            ));
            shown += 1;
            if shown == 8 {
                out.push_str("  …\n");
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalises_ids_times_and_durations() {
        let mut n = Normalizer::new();
        n.name("0b7c0000-1111-4222-8333-944445555666", "session");
        let v = json!({
            "id": "0b7c0000-1111-4222-8333-944445555666",
            "other": "ffffffff-1111-4222-8333-944445555666",
            "text": "session 0b7c0000-1111-4222-8333-944445555666 at 2026-11-22T01:00:00.123Z",
            "duration_ms": 812,
            "db_event_id": 4,
            "count": 3
        });
        assert_eq!(
            n.apply(&v),
            json!({"id": "<session>", "other": "<uuid>",
                   "text": "session <session> at <time>", "duration_ms": "<ms>", "count": 3})
        );
    }
}
