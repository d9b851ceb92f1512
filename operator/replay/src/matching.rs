//! Which recorded result answers a call.
//!
//! A recorded call matches a call when every argument it records is in the
//! call with an equal value; the call may carry more arguments (models add
//! optional ones freely) unless the recorded call is `exact`. Arguments the
//! call sends as `null` count as absent. Values are compared loosely where
//! models are inconsistent: `"100"` equals `100`, `"true"` equals `true`;
//! objects and arrays are compared element by element with the same rule.
//!
//! When several recorded calls match, the most specific one wins (the most
//! recorded arguments; `exact` before not at equal counts; then the first
//! in the file). Recorded calls with the same arguments form a sequence:
//! the first matching call gets the first, the next call the next, and the
//! last one repeats — so a tool polled twice can answer differently.
//! A call nothing matches gets the tool's `default`, if it has one.

use serde_json::Value;

use crate::fixture::{JsonObject, ToolFixture};

/// Recorded calls of one tool grouped into sequences of equal arguments.
#[derive(Debug, Clone)]
pub struct ToolIndex {
    groups: Vec<Group>,
}

#[derive(Debug, Clone)]
struct Group {
    arguments: JsonObject,
    exact: bool,
    /// Indexes into the tool's `calls`, in file order.
    calls: Vec<usize>,
}

/// The outcome of matching one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// `calls[index]` answers (`group` identifies its sequence).
    Call {
        /// The sequence the call belongs to (for the per-session counter).
        group: usize,
        /// Index into the tool's `calls`.
        index: usize,
    },
    /// The tool's default answers.
    Default,
    /// Nothing answers.
    Unmatched,
}

impl ToolIndex {
    /// Groups the tool's recorded calls.
    pub fn new(tool: &ToolFixture) -> Self {
        let mut groups: Vec<Group> = Vec::new();
        for (i, call) in tool.calls.iter().enumerate() {
            match groups
                .iter_mut()
                .find(|g| g.exact == call.exact && g.arguments == call.arguments)
            {
                Some(g) => g.calls.push(i),
                None => groups.push(Group {
                    arguments: call.arguments.clone(),
                    exact: call.exact,
                    calls: vec![i],
                }),
            }
        }
        Self { groups }
    }

    /// Chooses the answer to a call with `arguments`; `served(group)` says
    /// how many calls of that sequence this session was already given.
    pub fn choose(
        &self,
        tool: &ToolFixture,
        arguments: &JsonObject,
        served: impl Fn(usize) -> usize,
    ) -> Choice {
        let best = self
            .groups
            .iter()
            .enumerate()
            .filter(|(_, g)| matches(&g.arguments, g.exact, arguments))
            // max_by_key keeps the last maximum: iterate in reverse so that
            // the first group in the file wins ties.
            .rev()
            .max_by_key(|(_, g)| (g.arguments.len(), g.exact));
        match best {
            Some((group, g)) => {
                let n = served(group).min(g.calls.len() - 1);
                Choice::Call {
                    group,
                    index: g.calls[n],
                }
            }
            None if tool.default.is_some() => Choice::Default,
            None => Choice::Unmatched,
        }
    }
}

/// Whether a call with `call` arguments matches recorded `recorded` ones.
pub fn matches(recorded: &JsonObject, exact: bool, call: &JsonObject) -> bool {
    let present = |v: &&Value| !v.is_null();
    for (key, want) in recorded {
        match call.get(key).filter(present) {
            Some(got) if values_equal(want, got) => {}
            // A recorded null means "absent".
            None if want.is_null() => {}
            _ => return false,
        }
    }
    if exact {
        let extra = call
            .iter()
            .filter(|(_, v)| present(v))
            .any(|(k, _)| recorded.get(k).is_none_or(|v| v.is_null()));
        if extra {
            return false;
        }
    }
    true
}

/// Loose equality: scalars by their text (`"100"` = `100`, `"true"` =
/// `true`, `1.0` = `1`), objects and arrays element by element.
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| values_equal(v, w))
        }
        (Value::Null, Value::Null) => true,
        (Value::Null, _) | (_, Value::Null) => false,
        (Value::Object(_) | Value::Array(_), _) | (_, Value::Object(_) | Value::Array(_)) => false,
        _ => {
            let (x, y) = (scalar_text(a), scalar_text(b));
            if x == y {
                return true;
            }
            match (x.trim().parse::<f64>(), y.trim().parse::<f64>()) {
                (Ok(p), Ok(q)) => p == q,
                _ => false,
            }
        }
    }
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::fixture::{RecordedCall, RecordedResult, any_object_schema};

    fn obj(v: Value) -> JsonObject {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    fn call(arguments: Value, text: &str) -> RecordedCall {
        RecordedCall {
            arguments: obj(arguments),
            exact: false,
            text: text.into(),
            is_error: false,
        }
    }

    fn tool(calls: Vec<RecordedCall>, default: Option<&str>) -> ToolFixture {
        ToolFixture {
            name: "pods_log".into(),
            description: String::new(),
            input_schema: any_object_schema(),
            calls,
            default: default.map(|t| RecordedResult {
                text: t.into(),
                is_error: false,
            }),
        }
    }

    fn answer(t: &ToolFixture, args: Value) -> Option<String> {
        let index = ToolIndex::new(t);
        match index.choose(t, &obj(args), |_| 0) {
            Choice::Call { index, .. } => Some(t.calls[index].text.clone()),
            Choice::Default => t.default.as_ref().map(|d| d.text.clone()),
            Choice::Unmatched => None,
        }
    }

    #[test]
    fn recorded_arguments_must_be_present_and_extra_ones_are_allowed() {
        let t = tool(
            vec![call(
                json!({"namespace": "shop", "name": "web-0"}),
                "web-0 logs",
            )],
            None,
        );
        assert_eq!(
            answer(
                &t,
                json!({"namespace": "shop", "name": "web-0", "tail": 50})
            )
            .as_deref(),
            Some("web-0 logs")
        );
        assert_eq!(answer(&t, json!({"namespace": "shop"})), None);
        assert_eq!(
            answer(&t, json!({"namespace": "shop", "name": "web-1"})),
            None
        );
    }

    #[test]
    fn exact_calls_refuse_extra_arguments_but_not_nulls() {
        let mut c = call(json!({"name": "web-0"}), "exact");
        c.exact = true;
        let t = tool(vec![c], Some("fallback"));
        assert_eq!(
            answer(&t, json!({"name": "web-0", "previous": null})).as_deref(),
            Some("exact")
        );
        assert_eq!(
            answer(&t, json!({"name": "web-0", "previous": true})).as_deref(),
            Some("fallback")
        );
    }

    #[test]
    fn the_most_specific_match_wins_then_the_first() {
        let t = tool(
            vec![
                call(json!({"namespace": "shop"}), "namespace"),
                call(json!({"namespace": "shop", "name": "web-0"}), "pod"),
                call(json!({"namespace": "shop"}), "namespace again"),
                call(json!({}), "anything"),
            ],
            None,
        );
        assert_eq!(
            answer(&t, json!({"namespace": "shop", "name": "web-0"})).as_deref(),
            Some("pod")
        );
        assert_eq!(
            answer(&t, json!({"namespace": "shop", "name": "web-1"})).as_deref(),
            Some("namespace")
        );
        assert_eq!(
            answer(&t, json!({"namespace": "other"})).as_deref(),
            Some("anything")
        );
    }

    #[test]
    fn equal_arguments_are_served_in_order_and_the_last_repeats() {
        let t = tool(
            vec![
                call(json!({"name": "web-0"}), "first"),
                call(json!({"name": "web-1"}), "other"),
                call(json!({"name": "web-0"}), "second"),
            ],
            None,
        );
        let index = ToolIndex::new(&t);
        let args = obj(json!({"name": "web-0"}));
        let texts: Vec<&str> = (0..3)
            .map(|n| match index.choose(&t, &args, |_| n) {
                Choice::Call { index, .. } => t.calls[index].text.as_str(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(texts, ["first", "second", "second"]);
    }

    #[test]
    fn loose_scalars_strict_structures() {
        assert!(values_equal(&json!("100"), &json!(100)));
        assert!(values_equal(&json!(1.0), &json!(1)));
        assert!(values_equal(&json!("true"), &json!(true)));
        assert!(!values_equal(&json!("web"), &json!("Web")));
        assert!(!values_equal(&json!(null), &json!("null")));
        assert!(!values_equal(&json!(["a"]), &json!("a")));
        assert!(values_equal(
            &json!({"a": [1, "2"]}),
            &json!({"a": ["1", 2]})
        ));
        assert!(!values_equal(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    }

    #[test]
    fn without_a_match_the_default_answers_and_else_nothing() {
        let t = tool(vec![call(json!({"name": "a"}), "a")], Some("no such pod"));
        assert_eq!(
            answer(&t, json!({"name": "b"})).as_deref(),
            Some("no such pod")
        );
        let t = tool(vec![], None);
        assert_eq!(answer(&t, json!({})), None);
    }
}
