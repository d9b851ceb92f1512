//! The chart's Grafana dashboard (`charts/tarsy/dashboards/tarsy.json`)
//! queries only metrics that TARSy exposes.
//!
//! Every metric name in a panel query or a variable query must be a sample
//! name of some `/metrics` page: this crate's registry (encoded after one
//! observation of every family), the scrape-time metrics `tarsy api` appends
//! (read from its source), or the operator's own registry (an explicit list
//! below, checked against the operator's source). Each selector must also
//! filter on the dashboard's `namespace` variable, and every query use the
//! `datasource` variable.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tarsy_telemetry::{LlmCall, McpOutcome, SessionScored};

/// The operator's metrics (`kubernetes/controller/src/metrics.rs`, registry
/// prefix `tarsy_operator`): the operator crate is too heavy a dependency
/// for this test, so they are listed here as (registered name, type). The
/// test checks that each one is still registered there; add new ones here
/// before a dashboard uses them.
const OPERATOR_METRICS: &[(&str, &str)] = &[
    ("execution_calls", "gauge"),
    ("reconciles", "counter"),
    ("reconcile_errors", "counter"),
    ("sessions", "gauge"),
    ("llm_tokens", "gauge"),
    ("execution_duration_seconds", "histogram"),
];
const OPERATOR_PREFIX: &str = "tarsy_operator";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    let path = repo_root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The sample names (what Prometheus stores) of a family of `kind`.
fn sample_names(family: &str, kind: &str) -> Vec<String> {
    match kind {
        "counter" => vec![format!("{family}_total")],
        "histogram" => ["bucket", "sum", "count"]
            .iter()
            .map(|s| format!("{family}_{s}"))
            .collect(),
        "gauge" => vec![family.to_string()],
        other => panic!("{family}: unexpected metric type {other}"),
    }
}

/// Records one observation of every family of the process registry and
/// returns the sample names of its exposition.
fn telemetry_samples() -> BTreeSet<String> {
    let t = tarsy_telemetry::global();
    t.llm_call(LlmCall {
        provider_type: "openai",
        provider: "gpt",
        model: "gpt-5",
        elapsed: Duration::from_millis(300),
        error: None,
        tokens: Some((100, 10)),
    });
    t.llm_fallback("gpt", "gemini");
    t.llm_circuit("gpt", true);
    t.mcp_call(
        "kubernetes",
        "pods_list",
        Duration::from_millis(5),
        McpOutcome::Ok,
    );
    t.mcp_health("kubernetes", true);
    t.http_request("GET", "/health", 200, Duration::from_millis(1));
    let _ws = t.ws_connection();
    t.session_finished("completed", Some(Duration::from_secs(60)));
    t.stage_finished("completed", Duration::from_secs(30));
    t.webhook_alert(tarsy_telemetry::BridgeOutcome::Created);
    t.slack_notification(true);
    t.session_scored(SessionScored {
        chain: "kubernetes",
        alert_type: "PodCrashLooping",
        score: 80,
        failure_tags: &["incomplete-evidence".to_string()],
    });
    t.scoring_failed();
    t.session_reviewed("accurate", Some(Duration::from_secs(600)));
    let text = t.encode("");

    let mut families = BTreeMap::new();
    let mut samples = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split_whitespace();
            if let (Some(name), Some(kind)) = (it.next(), it.next()) {
                families.insert(name.to_string(), kind.to_string());
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            samples.insert(line[..end].to_string());
        }
    }
    assert!(!families.is_empty(), "no metric families in:\n{text}");
    // Every family got an observation, so the sample set is complete: a
    // family added to the registry must be recorded above.
    for (family, kind) in &families {
        for name in sample_names(family, kind) {
            assert!(
                samples.contains(&name),
                "family {family} ({kind}) has no sample {name}: record one in telemetry_samples()\n{text}"
            );
        }
    }
    samples
}

/// Metrics `tarsy api` computes at scrape time (`# TYPE` lines written by
/// its `/metrics` handler).
fn api_scrape_time_samples() -> BTreeSet<String> {
    let src = read("operator/api/src/handlers.rs");
    let mut out = BTreeSet::new();
    for (i, _) in src.match_indices("# TYPE ") {
        let rest = &src[i + "# TYPE ".len()..];
        let line = rest.split(['\\', '"']).next().unwrap_or_default();
        let mut it = line.split_whitespace();
        if let (Some(name), Some(kind)) = (it.next(), it.next()) {
            out.extend(sample_names(name, kind));
        }
    }
    assert!(
        out.contains("tarsy_sessions"),
        "tarsy_sessions no longer found in operator/api/src/handlers.rs: {out:?}"
    );
    out
}

/// The names registered in the operator's metrics source: the first string
/// literal after each `.register(`.
fn operator_registered_names() -> BTreeSet<String> {
    let src = read("kubernetes/controller/src/metrics.rs");
    assert!(
        src.contains(&format!("Registry::with_prefix(\"{OPERATOR_PREFIX}\")")),
        "kubernetes/controller/src/metrics.rs no longer uses the prefix {OPERATOR_PREFIX}"
    );
    src.match_indices(".register(")
        .filter_map(|(i, _)| {
            let rest = &src[i..];
            let open = rest.find('"')?;
            let len = rest[open + 1..].find('"')?;
            Some(rest[open + 1..open + 1 + len].to_string())
        })
        .collect()
}

fn operator_samples() -> BTreeSet<String> {
    let registered = operator_registered_names();
    let mut out = BTreeSet::new();
    for (name, kind) in OPERATOR_METRICS {
        assert!(
            registered.contains(*name),
            "OPERATOR_METRICS lists {name}, which kubernetes/controller/src/metrics.rs no longer registers ({registered:?})"
        );
        out.extend(sample_names(&format!("{OPERATOR_PREFIX}_{name}"), kind));
    }
    out
}

/// Every sample name some TARSy `/metrics` page exposes.
fn exposed() -> BTreeSet<String> {
    let mut all = telemetry_samples();
    all.extend(api_scrape_time_samples());
    all.extend(operator_samples());
    all
}

/// A metric selector in a PromQL expression: the metric name and its label
/// matchers (the text between the braces, empty without braces).
#[derive(Debug, PartialEq, Eq)]
struct Selector {
    name: String,
    matchers: String,
}

const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];
/// Keywords followed by a parenthesised label list.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];
const KEYWORDS: &[&str] = &[
    "and", "or", "unless", "offset", "bool", "atan2", "inf", "nan",
];

/// Index just past the bracket closing the one at `open` (strings skipped).
fn skip_group(b: &[u8], open: usize, close: u8) -> Result<usize, String> {
    let mut i = open + 1;
    while i < b.len() {
        match b[i] {
            q @ (b'"' | b'\'' | b'`') => i = skip_string(b, i, q)?,
            c if c == close => return Ok(i + 1),
            _ => i += 1,
        }
    }
    Err(format!("unclosed {}", b[open] as char))
}

/// Index just past the string literal starting at `open`.
fn skip_string(b: &[u8], open: usize, quote: u8) -> Result<usize, String> {
    let mut i = open + 1;
    while i < b.len() {
        match b[i] {
            b'\\' if quote != b'`' => i += 2,
            c if c == quote => return Ok(i + 1),
            _ => i += 1,
        }
    }
    Err("unclosed string".to_string())
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b':'
}

fn is_ident(c: u8) -> bool {
    is_ident_start(c) || c.is_ascii_digit()
}

/// The metric selectors of a PromQL expression (with Grafana variables).
/// Errors on what it cannot read, so that no metric goes unchecked.
fn selectors(expr: &str) -> Result<Vec<Selector>, String> {
    let b = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if matches!(c, b'"' | b'\'' | b'`') {
            i = skip_string(b, i, c)?;
        } else if c == b'[' {
            // Range or subquery durations.
            i = skip_group(b, i, b']')?;
        } else if c == b'{' {
            return Err(format!("selector without a metric name at {i}: {expr}"));
        } else if c == b'$' {
            // A Grafana variable: $name or ${name}.
            i += 1;
            if b.get(i) == Some(&b'{') {
                i = skip_group(b, i, b'}')?;
            } else {
                while i < b.len() && is_ident(b[i]) {
                    i += 1;
                }
            }
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                i += 1;
            }
        } else if is_ident_start(c) {
            let start = i;
            while i < b.len() && is_ident(b[i]) {
                i += 1;
            }
            let ident = &expr[start..i];
            let mut j = i;
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            let next = b.get(j).copied();
            if LABEL_LISTS.contains(&ident) {
                if next == Some(b'(') {
                    i = skip_group(b, j, b')')?;
                }
            } else if AGGREGATIONS.contains(&ident)
                || KEYWORDS.contains(&ident.to_ascii_lowercase().as_str())
                || next == Some(b'(')
            {
                // An operator, or a function whose arguments are read next.
            } else {
                let mut matchers = String::new();
                if next == Some(b'{') {
                    let end = skip_group(b, j, b'}')?;
                    matchers = expr[j + 1..end - 1].to_string();
                    i = end;
                }
                out.push(Selector {
                    name: ident.to_string(),
                    matchers,
                });
            }
        } else {
            i += 1;
        }
    }
    Ok(out)
}

/// A query found in the dashboard: where, and its PromQL.
struct Query {
    place: String,
    expr: String,
}

/// Every query of the dashboard: panel targets (rows' nested panels too) and
/// query variables (`label_values(<selector>, <label>)` only).
fn queries(dashboard: &Value) -> Result<Vec<Query>, String> {
    fn panels(list: &Value, out: &mut Vec<Query>) -> Result<(), String> {
        for p in list.as_array().into_iter().flatten() {
            let title = p["title"].as_str().unwrap_or("?");
            if let Some(nested) = p.get("panels") {
                panels(nested, out)?;
            }
            let Some(targets) = p.get("targets") else {
                continue;
            };
            check_datasource(&p["datasource"], title)?;
            for t in targets.as_array().into_iter().flatten() {
                check_datasource(&t["datasource"], title)?;
                let expr = t["expr"]
                    .as_str()
                    .filter(|e| !e.trim().is_empty())
                    .ok_or_else(|| format!("panel {title:?}: a target without expr"))?;
                out.push(Query {
                    place: format!("panel {title:?}"),
                    expr: expr.to_string(),
                });
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    panels(&dashboard["panels"], &mut out)?;
    for v in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if v["type"] != "query" {
            continue;
        }
        let name = v["name"].as_str().unwrap_or("?");
        check_datasource(&v["datasource"], name)?;
        let q = match &v["query"] {
            Value::String(s) => s.as_str(),
            q => q["query"].as_str().unwrap_or_default(),
        };
        let inner = q
            .trim()
            .strip_prefix("label_values(")
            .and_then(|s| s.strip_suffix(')'))
            .and_then(|s| s.rsplit_once(','))
            .map(|(selector, _label)| selector)
            .ok_or_else(|| {
                format!("variable {name}: only label_values(<selector>, <label>) is checked: {q}")
            })?;
        out.push(Query {
            place: format!("variable {name}"),
            expr: inner.to_string(),
        });
    }
    Ok(out)
}

fn check_datasource(ds: &Value, place: &str) -> Result<(), String> {
    if ds["uid"] == "${datasource}" {
        Ok(())
    } else {
        Err(format!(
            "{place}: datasource must be ${{datasource}}, is {ds}"
        ))
    }
}

/// What is wrong with the dashboard: unknown metrics, selectors without the
/// namespace filter, unreadable queries.
fn problems(dashboard: &Value, exposed: &BTreeSet<String>) -> Vec<String> {
    let queries = match queries(dashboard) {
        Ok(q) => q,
        Err(e) => return vec![e],
    };
    let mut out = Vec::new();
    if queries.is_empty() {
        out.push("the dashboard has no queries".to_string());
    }
    for q in &queries {
        let sels = match selectors(&q.expr) {
            Ok(s) => s,
            Err(e) => {
                out.push(format!("{}: {e}", q.place));
                continue;
            }
        };
        if sels.is_empty() {
            out.push(format!("{}: no metric in {}", q.place, q.expr));
        }
        for s in sels {
            if !exposed.contains(&s.name) {
                out.push(format!(
                    "{}: {} is not a metric TARSy exposes",
                    q.place, s.name
                ));
            }
            let is_variable = q.place.starts_with("variable ");
            if !is_variable && !s.matchers.contains("namespace=~\"$namespace\"") {
                out.push(format!(
                    "{}: {} does not filter on namespace=~\"$namespace\"",
                    q.place, s.name
                ));
            }
        }
    }
    out
}

fn dashboard() -> Value {
    serde_json::from_str(&read("charts/tarsy/dashboards/tarsy.json"))
        .expect("charts/tarsy/dashboards/tarsy.json is not JSON")
}

#[test]
fn dashboard_queries_only_exposed_metrics() {
    let dashboard = dashboard();
    let exposed = exposed();
    let problems = problems(&dashboard, &exposed);
    assert!(
        problems.is_empty(),
        "charts/tarsy/dashboards/tarsy.json:\n  {}\nexposed: {exposed:?}",
        problems.join("\n  ")
    );
    // The check saw the whole dashboard.
    let queries = queries(&dashboard).unwrap();
    assert!(queries.len() >= 20, "only {} queries found", queries.len());
}

#[test]
fn dashboard_has_the_datasource_and_namespace_variables() {
    let dashboard = dashboard();
    let vars: BTreeMap<&str, &Value> = dashboard["templating"]["list"]
        .as_array()
        .expect("templating.list")
        .iter()
        .map(|v| (v["name"].as_str().unwrap_or_default(), v))
        .collect();
    assert_eq!(vars["datasource"]["type"], "datasource");
    assert_eq!(vars["datasource"]["query"], "prometheus");
    assert_eq!(vars["namespace"]["type"], "query");
    let mut ids = BTreeSet::new();
    fn walk(list: &Value, ids: &mut BTreeSet<i64>) {
        for p in list.as_array().into_iter().flatten() {
            let id = p["id"].as_i64().expect("panel id");
            assert!(ids.insert(id), "duplicate panel id {id}");
            walk(&p["panels"], ids);
        }
    }
    walk(&dashboard["panels"], &mut ids);
}

#[test]
fn an_unknown_metric_is_reported() {
    let exposed = exposed();
    let dashboard = serde_json::json!({
        "panels": [{
            "title": "typo",
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "targets": [
                {"datasource": {"uid": "${datasource}"},
                 "expr": "sum(rate(tarsy_http_requests_total{namespace=~\"$namespace\"}[5m]))"},
                {"datasource": {"uid": "${datasource}"},
                 "expr": "sum(rate(tarsy_http_request_total{namespace=~\"$namespace\"}[5m]))"},
                {"datasource": {"uid": "${datasource}"},
                 "expr": "tarsy_sessions"}
            ]
        }],
        "templating": {"list": []}
    });
    let problems = problems(&dashboard, &exposed);
    assert_eq!(
        problems,
        vec![
            "panel \"typo\": tarsy_http_request_total is not a metric TARSy exposes".to_string(),
            "panel \"typo\": tarsy_sessions does not filter on namespace=~\"$namespace\""
                .to_string(),
        ]
    );
}

#[test]
fn selectors_skip_functions_labels_and_variables() {
    let expr = "histogram_quantile(0.95, sum by (le, server) (rate(tarsy_mcp_tool_call_duration_seconds_bucket{namespace=~\"$namespace\", server!=\"a{b}\"}[$__rate_interval]))) / on (pod) group_left(x) max without (y) (up) or vector(1e3) > bool 0.5";
    let found = selectors(expr).unwrap();
    assert_eq!(
        found,
        vec![
            Selector {
                name: "tarsy_mcp_tool_call_duration_seconds_bucket".into(),
                matchers: "namespace=~\"$namespace\", server!=\"a{b}\"".into(),
            },
            Selector {
                name: "up".into(),
                matchers: String::new(),
            },
        ]
    );
    assert!(selectors("{__name__=~\"tarsy_.*\"}").is_err());
    assert!(selectors("sum(x{a=\"b\"").is_err());
}
