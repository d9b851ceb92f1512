//! Slack notifications as an on-call engineer sees them, against a local
//! fake of the Slack Web API: start and end of an investigation in one
//! thread, in the chain's channel, with the summary and a dashboard link;
//! every episode of an Alertmanager alert in the alert's thread; 429
//! `Retry-After` honoured; a Slack outage never touches an investigation.

use std::time::Duration;

use tarsy_core::SecretValue;
use tarsy_e2e::fake_slack::{FakeSlack, Trouble};
use tarsy_e2e::harness::{Peers, TestApp};
use tarsy_e2e::on_both_backends;
use tarsy_exec::notify::{Notice, SlackNotifier, SlackSettings};
use tarsy_scripted_llm::{ScriptedLlm, ScriptedResponse};
use tarsy_store::{NewSession, Store};

const CHAINS: &str = r##"
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: paged}
spec:
  alertTypes: [Paged]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  slackChannel: "#payments-oncall"
  stages:
  - name: look
    agent: alpha
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: quiet}
spec:
  alertTypes: [Quiet]
  llmProvider: test-llm
  iterationStrategy: native-thinking
  stages:
  - name: look
    agent: alpha
"##;

const TOKEN: &str = "xoxb-test-token-0000";

fn settings(slack: &FakeSlack, notify_start: bool) -> SlackSettings {
    SlackSettings {
        token: SecretValue::new(TOKEN),
        channel: "#sre-alerts".into(),
        api_url: slack.api_url(),
        dashboard_url: Some("https://tarsy.example.com".into()),
        notify_start,
        timeout: Duration::from_secs(5),
    }
}

/// Start and end of one investigation: the start opens the thread in the
/// chain's channel, the end replies in it with the executive summary and a
/// link; a chain without its own channel uses the default.
async fn start_and_end_in_one_thread(db_url: String) {
    let slack = FakeSlack::start().await;
    let script = ScriptedLlm::new();
    script
        .push_route(
            "Alpha",
            ScriptedResponse::text("FINAL: the pod is OOMKilled."),
        )
        .push(ScriptedResponse::text(
            "Pod web-0 is OOMKilled at its 256Mi limit.",
        ))
        .push_route("Alpha", ScriptedResponse::text("FINAL: quiet."))
        .push(ScriptedResponse::text("Nothing to do."));
    let peers = Peers::start(script).await;
    let mut options = peers.options(peers.config(CHAINS), &db_url);
    options.slack = Some(settings(&slack, true));
    let app = TestApp::start(options).await;

    let id = app.submit("Paged", "pod: web-0").await;
    assert_eq!(app.finish(&id).await["status"], "completed");
    let posted = slack.wait_for(2).await;
    let (start, end) = (&posted[0], &posted[1]);
    assert_eq!(start.authorization, format!("Bearer {TOKEN}"));
    assert_eq!(start.channel, "#payments-oncall");
    assert!(start.text.contains("*Paged* started"), "{}", start.text);
    assert_eq!(start.thread_ts, None, "the first message opens the thread");
    assert_eq!(end.channel, "#payments-oncall");
    assert_eq!(end.thread_ts.as_deref(), Some(start.ts.as_str()));
    assert!(end.text.contains("*Paged* completed"), "{}", end.text);
    assert!(
        end.text
            .contains("Pod web-0 is OOMKilled at its 256Mi limit."),
        "{}",
        end.text
    );
    assert!(
        end.text.contains(&format!(
            "<https://tarsy.example.com/ui/sessions/{id}|open in TARSy>"
        )),
        "{}",
        end.text
    );

    let quiet = app.submit("Quiet", "pod: web-1").await;
    app.finish(&quiet).await;
    let posted = slack.wait_for(4).await;
    assert!(
        posted[2..].iter().all(|p| p.channel == "#sre-alerts"),
        "{posted:?}"
    );
    assert_eq!(
        posted[2].thread_ts, None,
        "a new investigation, a new thread"
    );
    assert_eq!(posted[3].thread_ts.as_deref(), Some(posted[2].ts.as_str()));
    app.shutdown().await;
}

/// Slack refusing (and 429 beyond the attempts) never touches the
/// investigation: it completes, and the failure is counted.
async fn an_outage_never_touches_the_investigation(db_url: String) {
    let slack = FakeSlack::start().await;
    slack.push_trouble(Trouble::Refuse("channel_not_found"));
    let script = ScriptedLlm::new();
    script
        .push_route("Alpha", ScriptedResponse::text("FINAL: done."))
        .push(ScriptedResponse::text("Summary."));
    let peers = Peers::start(script).await;
    let mut options = peers.options(peers.config(CHAINS), &db_url);
    options.slack = Some(settings(&slack, false));
    let app = TestApp::start(options).await;
    let id = app.submit("Quiet", "pod: web-0").await;
    assert_eq!(app.finish(&id).await["status"], "completed");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, _) = app.get("/health").await;
        let text = app
            .http
            .get(format!("{}/metrics", app.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if text.contains("tarsy_notifications_total{channel=\"slack\",outcome=\"failed\"}") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the failure was not counted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(slack.posted().is_empty());
    app.shutdown().await;
}

/// The judge's score arrives after the end notice and is replied in the
/// investigation's thread, with its tags, the missing tools and a link to
/// the assessment.
async fn the_score_is_replied_in_the_thread(db_url: String) {
    let slack = FakeSlack::start().await;
    let script = ScriptedLlm::new();
    script
        .push_route(
            "Alpha",
            ScriptedResponse::text("FINAL: the pod is OOMKilled."),
        )
        .push(ScriptedResponse::text("Pod web-0 is OOMKilled."))
        .push_route(
            "ScoringAgent",
            ScriptedResponse::text(
                "VERDICT: correct\nFAILURE TAGS: incomplete-evidence\nSCORE: 77",
            ),
        )
        .push_route(
            "ScoringAgent",
            ScriptedResponse::text("MISSING TOOLS:\n- node memory: was the node short?"),
        );
    let peers = Peers::start(script).await;
    let scored = CHAINS.replace(
        "slackChannel: \"#payments-oncall\"",
        "slackChannel: \"#payments-oncall\"\n  scoring: {enabled: true}",
    );
    let mut options = peers.options(peers.config(&scored), &db_url);
    options.slack = Some(settings(&slack, false));
    let app = TestApp::start(options).await;
    let id = app.submit("Paged", "pod: web-0").await;
    assert_eq!(app.finish(&id).await["status"], "completed");
    let posted = slack.wait_for(2).await;
    let (end, score) = (&posted[0], &posted[1]);
    assert!(end.text.contains("*Paged* completed"), "{}", end.text);
    assert_eq!(
        score.thread_ts.as_deref(),
        Some(end.ts.as_str()),
        "replied in the thread"
    );
    assert_eq!(score.channel, "#payments-oncall");
    assert!(
        score
            .text
            .contains("scored this investigation *77/100* (incomplete-evidence)"),
        "{}",
        score.text
    );
    assert!(
        score
            .text
            .contains("Missing tools: node memory: was the node short?"),
        "{}",
        score.text
    );
    assert!(
        score.text.contains(&format!(
            "<https://tarsy.example.com/ui/sessions/{id}/scoring|the assessment>"
        )),
        "{}",
        score.text
    );
    app.shutdown().await;
}

on_both_backends!(
    start_and_end_in_one_thread,
    an_outage_never_touches_the_investigation,
    the_score_is_replied_in_the_thread
);

fn session(id: &str) -> NewSession {
    NewSession {
        id: id.into(),
        alert_data: "x".into(),
        alert_type: "KubePodCrashLooping".into(),
        chain_id: "c".into(),
        author: None,
        runbook_url: None,
        mcp_selection: None,
        memory_scope: None,
    }
}

/// Cluster mode threads by the Alertmanager fingerprint: a new firing
/// episode (a new session) replies in the alert's thread; a 429 is waited
/// out as `Retry-After` says.
#[tokio::test]
async fn episodes_of_one_alert_share_its_thread_and_429_is_honoured() {
    let slack = FakeSlack::start().await;
    let store = Store::sqlite_in_memory().await.unwrap();
    let notifier = SlackNotifier::new(settings(&slack, false), store.clone());
    for id in ["episode-1", "episode-2"] {
        store.create_session(session(id)).await.unwrap();
    }
    // Both sessions are episodes of the alert with fingerprint 3f2a….
    let notice = |session| Notice {
        session,
        channel: None,
        thread_key: Some("3f2a9c1e".into()),
        score: None,
    };
    let first = store.get_session("episode-1").await.unwrap();
    notifier.send(notice(first));
    let opened = slack.wait_for(1).await;
    assert_eq!(opened[0].thread_ts, None);

    slack.push_trouble(Trouble::RateLimited(1));
    let started = tokio::time::Instant::now();
    let second = store.get_session("episode-2").await.unwrap();
    notifier.send(notice(second));
    let posted = slack.wait_for(2).await;
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After was not waited"
    );
    assert_eq!(posted[1].thread_ts.as_deref(), Some(posted[0].ts.as_str()));
}
