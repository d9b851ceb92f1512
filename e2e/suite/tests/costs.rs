//! What an investigation costs, as a user reads it in local mode: the
//! session's cost in the API is the sum of its calls' estimates (the
//! investigation's and the executive summary's), per execution too; the
//! usage summary and the cost metric say the same; a model without a price
//! makes the cost partial, never a silent zero; the Slack message says what
//! a priced investigation cost. A chain's budget of a few cents stops an
//! investigation mid-stage: the agent concludes without more tools, the
//! next stage does not start, the executive summary is written, and the
//! session ends `budget_exhausted`. A project that spent its day's budget
//! holds new sessions `pending`, saying why, until the limit is raised.

use std::time::Duration;

use serde_json::Value;
use tarsy_core::SecretValue;
use tarsy_e2e::fake_slack::FakeSlack;
use tarsy_e2e::harness::{Peers, TestApp};
use tarsy_e2e::on_both_backends;
use tarsy_exec::notify::SlackSettings;
use tarsy_scripted_llm::{ScriptedLlm, ScriptedResponse};

const CHAINS: &str = r##"
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: priced-llm}
spec:
  type: google
  model: priced-model
  apiKeyEnv: TEST_KEY
  pricing: {inputPerMillion: 2.0, outputPerMillion: 10.0, thinkingPerMillion: 20.0, cachedInputPerMillion: 0.5}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: priced}
spec:
  alertTypes: [Priced]
  llmProvider: priced-llm
  iterationStrategy: native-thinking
  stages:
  - name: look
    agent: alpha
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: capped}
spec:
  alertTypes: [Capped]
  llmProvider: priced-llm
  iterationStrategy: native-thinking
  budget: {maxCostUsd: 0.03}
  stages:
  - name: look
    agent: alpha
  - name: act
    agent: bravo
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: unpriced}
spec:
  alertTypes: [Unpriced]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  stages:
  - name: look
    agent: alpha
"##;

on_both_backends!(
    a_session_costs_what_its_calls_cost,
    a_budget_stops_the_investigation_mid_stage,
    a_spent_day_holds_new_sessions_until_the_limit_is_raised,
);

fn usage(input: i32, cached: i32, output: i32, thinking: i32) -> tarsy_scripted_llm::ScriptedChunk {
    tarsy_scripted_llm::ScriptedChunk::Usage {
        input_tokens: input,
        output_tokens: output,
        thinking_tokens: thinking,
        cached_input_tokens: cached,
    }
}

fn usd(v: &Value) -> f64 {
    v["usd"].as_f64().unwrap_or_else(|| panic!("no usd in {v}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

async fn a_session_costs_what_its_calls_cost(db_url: String) {
    let slack = FakeSlack::start().await;
    let script = ScriptedLlm::new();
    script
        .push_route(
            "Alpha",
            ScriptedResponse::tool_call("c1", "testmcp__echo", r#"{"text":"hello"}"#)
                .then(usage(10_000, 4_000, 200, 1_000)),
        )
        .push_route(
            "Alpha",
            ScriptedResponse::text("FINAL: the pod is OOMKilled.").then(usage(12_000, 0, 300, 0)),
        )
        .push(ScriptedResponse::text("The pod is OOMKilled.").then(usage(2_000, 0, 50, 0)))
        .push_route(
            "Alpha",
            ScriptedResponse::text("FINAL: quiet.").then(usage(5_000, 0, 100, 0)),
        )
        .push(ScriptedResponse::text("Nothing to do.").then(usage(1_000, 0, 20, 0)));
    let peers = Peers::start(script).await;
    let mut options = peers.options(peers.config(CHAINS), &db_url);
    options.slack = Some(SlackSettings {
        token: SecretValue::new("xoxb-test"),
        channel: "#sre".into(),
        api_url: slack.api_url(),
        dashboard_url: None,
        notify_start: false,
        timeout: Duration::from_secs(5),
    });
    let app = TestApp::start(options).await;

    let id = app.submit("Priced", "pod: web-0").await;
    assert_eq!(app.finish(&id).await["status"], "completed");
    let session = app.session(&id).await;
    let cost = &session["cost"];
    // At the provider's prices, per million: 6,000 fresh + 4,000 cached
    // prompt tokens, 200 answer and 1,000 thinking tokens; then 12,000 +
    // 300; the executive summary 2,000 + 50.
    let expected = (6_000.0 * 2.0
        + 4_000.0 * 0.5
        + 200.0 * 10.0
        + 1_000.0 * 20.0
        + 12_000.0 * 2.0
        + 300.0 * 10.0
        + 2_000.0 * 2.0
        + 50.0 * 10.0)
        / 1e6;
    assert!(close(usd(cost), expected), "{cost} vs {expected}");
    assert_eq!(cost["partial"], false);
    assert_eq!(cost["calls"], 3);
    assert_eq!(cost["tokens"]["cached_input_tokens"], 4_000);

    // The sum of the calls' estimates, as the trace lists them.
    let trace = app.get_ok(&format!("/api/v1/sessions/{id}/trace")).await;
    let mut calls: Vec<&Value> = trace["stages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["executions"].as_array().unwrap())
        .flat_map(|e| e["llm_interactions"].as_array().unwrap())
        .collect();
    let in_execution: f64 = calls.iter().map(|c| c["cost_usd"].as_f64().unwrap()).sum();
    calls.extend(trace["session_interactions"].as_array().unwrap());
    let sum: f64 = calls.iter().map(|c| c["cost_usd"].as_f64().unwrap()).sum();
    assert!(close(sum, usd(cost)), "{sum} vs {cost}");
    // The stage and its execution: the investigation's calls.
    let stage = &session["stages"][0];
    assert!(close(usd(&stage["cost"]), in_execution));
    assert!(close(usd(&stage["executions"][0]["cost"]), in_execution));
    // The session list says the same.
    let list = app.get_ok("/api/v1/sessions").await;
    let listed = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id.as_str())
        .unwrap();
    assert!(close(usd(&listed["cost"]), usd(cost)));

    // A model without a price: no estimate, and the cost says so.
    let unpriced = app.submit("Unpriced", "pod: web-1").await;
    app.finish(&unpriced).await;
    let other = app.session(&unpriced).await;
    assert_eq!(other["cost"]["partial"], true, "{}", other["cost"]);
    assert_eq!(other["cost"]["unpriced_calls"], 2);
    assert!(close(usd(&other["cost"]), 0.0));

    // The usage page's summary of today: both sessions, by chain and model.
    let usage = app.get_ok("/api/v1/usage").await;
    assert_eq!(usage["sessions"], 2);
    assert!(close(usd(&usage["cost"]), usd(cost)));
    assert_eq!(usage["cost"]["partial"], true);
    assert_eq!(usage["cost"]["unpriced_calls"], 2);
    let priced = usage["by_chain"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["key"] == "priced")
        .unwrap();
    assert!(close(usd(&priced["cost"]), usd(cost)));
    assert_eq!(usage["by_model"][0]["key"], "priced-model");
    assert_eq!(usage["top_sessions"][0]["session_id"], id.as_str());
    let (status, body) = app.get("/api/v1/usage?from=yesterday").await;
    assert_eq!(status, 400, "{body}");

    // The metric counts the same dollars, by provider, model and chain.
    let metrics = app
        .http
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = metrics
        .lines()
        .find(|l| {
            l.starts_with("tarsy_llm_cost_usd_total{")
                && l.contains("provider=\"priced-llm\"")
                && l.contains("chain=\"priced\"")
        })
        .unwrap_or_else(|| panic!("no cost sample in:\n{metrics}"));
    let value: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(close(value, usd(cost)), "{line}");

    // The end of the priced investigation says what it cost; the unpriced
    // one says nothing of it.
    let posted = slack.wait_for(2).await;
    let priced_end = posted.iter().find(|p| p.text.contains("*Priced*")).unwrap();
    assert!(
        priced_end
            .text
            .contains(&format!("(cost ${})", tarsy_core::cost::usd(usd(cost)))),
        "{}",
        priced_end.text
    );
    let unpriced_end = posted
        .iter()
        .find(|p| p.text.contains("*Unpriced*"))
        .unwrap();
    assert!(!unpriced_end.text.contains("cost"), "{}", unpriced_end.text);
    app.shutdown().await;
}

async fn a_budget_stops_the_investigation_mid_stage(db_url: String) {
    let script = ScriptedLlm::new();
    // The first call costs $0.04 (20,000 prompt tokens at $2 per million):
    // past the chain's $0.03 before the second iteration.
    script
        .push_route(
            "Alpha",
            ScriptedResponse::tool_call("c1", "testmcp__echo", r#"{"text":"hello"}"#)
                .then(usage(20_000, 0, 0, 0)),
        )
        .push_route(
            "Alpha",
            ScriptedResponse::text("The pod is OOMKilled; the limit was not checked.")
                .then(usage(1_000, 0, 100, 0)),
        )
        .push_route("Bravo", ScriptedResponse::text("FINAL: never asked."))
        .push(ScriptedResponse::text("OOMKilled; partly checked.").then(usage(500, 0, 20, 0)));
    let peers = Peers::start(script).await;
    let options = peers.options(peers.config(CHAINS), &db_url);
    let app = TestApp::start(options).await;

    let id = app.submit("Capped", "pod: web-0").await;
    let done = app.finish(&id).await;
    assert_eq!(done["status"], "completed", "{done}");
    let session = app.session(&id).await;
    assert_eq!(session["end_reason"], "budget_exhausted", "{session}");
    assert_eq!(session["executive_summary"], "OOMKilled; partly checked.");
    assert_eq!(
        session["final_analysis"],
        "The pod is OOMKilled; the limit was not checked."
    );
    let stages = session["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 1, "the act stage never starts: {session}");
    // The agent's second call was the tool-less conclusion, and says why.
    let requests = peers.script().requests();
    let conclusion = requests
        .iter()
        .filter(|r| r.system_prompt().contains("Alpha"))
        .nth(1)
        .expect("a second Alpha call");
    assert!(conclusion.request.tools.is_empty());
    assert!(
        conclusion
            .last_message()
            .contains("budget of $0.0300 is spent"),
        "{}",
        conclusion.last_message()
    );
    assert!(!requests.iter().any(|r| r.system_prompt().contains("Bravo")));
    let timeline = app.get_ok(&format!("/api/v1/sessions/{id}/timeline")).await;
    let last = timeline
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event_type"] == "final_analysis")
        .unwrap();
    assert_eq!(last["metadata"]["budget_exhausted"], true, "{last}");
    // The list says why too.
    let list = app.get_ok("/api/v1/sessions").await;
    assert_eq!(list["sessions"][0]["end_reason"], "budget_exhausted");
    app.shutdown().await;
}

async fn a_spent_day_holds_new_sessions_until_the_limit_is_raised(db_url: String) {
    let script = ScriptedLlm::new();
    for _ in 0..2 {
        script
            .push_route(
                "Alpha",
                ScriptedResponse::text("FINAL: OOMKilled.").then(usage(20_000, 0, 0, 0)),
            )
            .push(ScriptedResponse::text("OOMKilled.").then(usage(100, 0, 10, 0)));
    }
    let peers = Peers::start(script).await;
    let options = |limit: f64| {
        let mut config = peers.config(CHAINS);
        config.defaults.max_cost_usd_per_day = Some(limit);
        peers.options(config, &db_url)
    };
    let app = TestApp::start(options(0.01)).await;
    // The first session of the day starts: nothing is spent yet.
    let first = app.submit("Priced", "pod: web-0").await;
    assert_eq!(app.finish(&first).await["status"], "completed");
    // It spent $0.04: the next one waits, and says why.
    let second = app.submit("Priced", "pod: web-1").await;
    let held = app
        .wait_session(&second, "the hold reason", |s| !s["hold_reason"].is_null())
        .await;
    assert_eq!(held["status"], "pending", "{held}");
    let why = held["hold_reason"].as_str().unwrap();
    assert!(why.contains("$0.0100/day"), "{why}");
    let list = app.get_ok("/api/v1/sessions?status=pending").await;
    assert_eq!(list["sessions"][0]["hold_reason"], why);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(app.session(&second).await["status"], "pending");
    app.shutdown().await;

    // A higher limit admits it.
    let app = TestApp::start(options(1.0)).await;
    let done = app.finish(&second).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(app.session(&second).await["hold_reason"].is_null());
    app.shutdown().await;
}
