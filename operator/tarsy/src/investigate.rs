//! `tarsy investigate ALERT_FILE --config DIR`: one alert, in process, with
//! live progress (stages, agents, iterations, tool calls) then the final
//! analysis and executive summary — and, when the chain scores its
//! sessions, the judge's score once it has it — all on stdout, or one JSON
//! object with `--json`. Logs go to stderr, so they never break into the display.
//! Exits non-zero unless the investigation completed.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};
use tarsy_api::NewAlert;
use tarsy_core::recorder::session_channel;
use tarsy_core::{Cost, ScoreStatus, SessionStatus};
use tarsy_events::ClientMessage;
use tarsy_exec::DEFAULT_LLM_ADDR;
use tarsy_local::{LocalApp, LocalOptions};
use tarsy_store::{Session, SessionScore, Store};

use crate::serve::load_config;

/// Arguments of `tarsy investigate`.
#[derive(Debug, clap::Args)]
pub struct InvestigateArgs {
    /// Alert manifest (`kind: Alert`) to investigate.
    pub alert_file: PathBuf,
    /// Configuration directory: Chain, Agent, MCPServer and LLMProvider
    /// manifests (`*.yaml`), with `${VAR}` environment interpolation.
    #[arg(long, env = "TARSY_CONFIG_DIR")]
    pub config: PathBuf,
    /// Print one JSON object (session_id, status, final_analysis,
    /// executive_summary, ...) on stdout instead of the report.
    #[arg(long)]
    pub json: bool,
    /// Keep the records in this database instead of a private in-memory
    /// one (`sqlite:PATH` or `postgres://…`; use one no other TARSy drives).
    #[arg(long)]
    pub database_url: Option<String>,
    /// The LLM service (gRPC) for every provider but `scripted` ones.
    #[arg(long, env = "TARSY_LLM_ADDR", default_value = DEFAULT_LLM_ADDR)]
    pub llm_addr: String,
    /// No progress: only the report.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Runs the command; true when the investigation completed (the caller
/// exits non-zero otherwise).
pub async fn run(args: InvestigateArgs, started: std::time::Instant) -> anyhow::Result<bool> {
    let config = load_config(&args.config)?;
    tarsy_pricing::install_catalog(config.defaults.pricing.catalog_url.as_deref()).await;
    tracing::debug!(ms = ms(started), "configuration loaded");
    let alert = tarsy_config::load_alert_file(&args.alert_file, &tarsy_config::loader::process_env)
        .map_err(|errors| {
            let list: Vec<String> = errors.0.iter().map(|e| format!("  - {e}")).collect();
            anyhow::anyhow!(
                "{} is not a valid Alert:\n{}",
                args.alert_file.display(),
                list.join("\n")
            )
        })?;
    let mut options = LocalOptions::new(config, &args.config);
    options.llm_addr = args.llm_addr;
    options.recover = false;
    options.max_connections = tarsy_store::ONE_EXECUTION_POOL;
    options.pod_id = format!("investigate-{}", std::process::id());
    options.tarsy_exe = std::env::current_exe().ok();
    if let Some(url) = args.database_url {
        options.database_url = url;
    }
    let app = LocalApp::start(options)
        .await
        .context("starting local mode")?;
    tracing::debug!(ms = ms(started), "local mode started");
    let outcome = follow(
        &app,
        alert.spec.submission("tarsy-cli"),
        args.quiet || args.json,
        started,
    )
    .await;
    let session = match outcome {
        Ok(s) => s,
        Err(e) => {
            app.shutdown().await;
            return Err(e);
        }
    };
    // The latest attempt, when the session was scored.
    let score = match session.score {
        Some(_) => app
            .store()
            .session_scores(&session.id)
            .await
            .ok()
            .and_then(|a| a.into_iter().next()),
        None => None,
    };
    let cost = app.store().session_cost(&session.id).await.ok().flatten();
    let report = if args.json {
        serde_json::to_string_pretty(
            &json_report(app.store(), &session, score.as_ref(), cost.as_ref()).await,
        )?
    } else {
        text_report(&session, score.as_ref(), cost.as_ref())
    };
    app.shutdown().await;
    let mut out = std::io::stdout().lock();
    if !(args.quiet || args.json) {
        writeln!(out)?;
    }
    writeln!(out, "{report}")?;
    Ok(session.status == SessionStatus::Completed)
}

/// Submits the alert and shows its progress until it ends.
async fn follow(
    app: &LocalApp,
    alert: NewAlert,
    quiet: bool,
    started: std::time::Instant,
) -> anyhow::Result<Session> {
    let mut calls = app.llm_calls();
    let accepted = app
        .control()
        .submit_alert(alert)
        .await
        .map_err(|e| anyhow::anyhow!("the alert was refused: {e}"))?;
    let session_id = accepted.session_id;
    tracing::debug!(ms = ms(started), "alert submitted");
    let mut progress = Progress::new(app.store().clone(), quiet);
    progress.line(format!(
        "investigating with chain {} (session {session_id})",
        accepted.chain_id
    ));
    for w in app.warnings() {
        progress.line(format!("warning: {w}"));
    }
    let mut conn = app.hub().connection();
    let mut watch = Watch {
        session_id: &session_id,
        conn: &mut conn,
        calls: &mut calls,
        progress: &mut progress,
        started,
        ended: false,
    };
    for msg in watch
        .conn
        .handle_client(ClientMessage::Subscribe {
            channel: session_channel(&session_id),
            last_event_id: None,
        })
        .await
    {
        watch.progress.event(&msg).await;
        if is_terminal_status(&msg) {
            watch.ended = true;
        }
    }
    let store = app.store().clone();
    let id = session_id.clone();
    watch
        .until(is_terminal_status, || async {
            Ok(store.get_session(&id).await?.status.is_terminal())
        })
        .await?;
    // The driver may still be finishing its last writes; this returns as
    // soon as it lets go of the session (a judge, if any, has started).
    let session = app
        .wait_for_terminal(&session_id, Duration::from_secs(30))
        .await?;
    if session
        .score
        .as_ref()
        .is_some_and(|s| s.status == ScoreStatus::InProgress)
    {
        watch.ended = false;
        watch
            .until(is_score_end, || async {
                Ok(store
                    .get_session(&id)
                    .await?
                    .score
                    .is_none_or(|s| s.status != ScoreStatus::InProgress))
            })
            .await?;
        return Ok(store.get_session(&session_id).await?);
    }
    Ok(session)
}

/// What `follow` shows while it waits.
struct Watch<'a> {
    session_id: &'a str,
    conn: &'a mut tarsy_events::Connection,
    calls: &'a mut tokio::sync::broadcast::Receiver<tarsy_exec::LlmCallNotice>,
    progress: &'a mut Progress,
    started: std::time::Instant,
    ended: bool,
}

impl Watch<'_> {
    /// Shows the session's events until one satisfies `ends`; `done` (the
    /// store, read now and then) covers an event the subscription could
    /// have dropped (overflow).
    async fn until<F, Fut>(&mut self, ends: fn(&Value) -> bool, done: F) -> anyhow::Result<()>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<bool>>,
    {
        let mut poll = tokio::time::interval(FALLBACK_POLL);
        poll.tick().await;
        while !self.ended {
            tokio::select! {
                item = self.conn.recv_bus() => {
                    if let Some(item) = item {
                        for msg in self.conn.handle_bus(item).await {
                            self.ended |= ends(&msg);
                            self.progress.event(&msg).await;
                        }
                    }
                }
                notice = self.calls.recv() => {
                    if let Ok(n) = notice
                        && n.session_id == self.session_id
                    {
                        tracing::debug!(ms = ms(self.started), "LLM call");
                        self.progress.llm_call(&n.execution_id).await;
                    }
                }
                _ = poll.tick() => {
                    self.ended = done().await?;
                }
            }
        }
        Ok(())
    }
}

/// Milliseconds since `started` (start-up phases in the debug log).
fn ms(started: std::time::Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

/// How often the session is read while waiting for its terminal event.
const FALLBACK_POLL: Duration = Duration::from_secs(2);

/// A `session.score` event that ends an attempt.
fn is_score_end(msg: &Value) -> bool {
    msg.get("type").and_then(Value::as_str) == Some("session.score")
        && msg.get("status").and_then(Value::as_str) != Some(ScoreStatus::InProgress.as_str())
}

/// A `session.status` event with a terminal status (the subscription is to
/// this session's channel only).
fn is_terminal_status(msg: &Value) -> bool {
    msg.get("type").and_then(Value::as_str) == Some("session.status")
        && msg
            .get("status")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<SessionStatus>().ok())
            .is_some_and(|s| s.is_terminal())
}

/// Live progress on stdout, one whole line at a time.
struct Progress {
    store: Store,
    quiet: bool,
    agents: HashMap<String, String>,
    iterations: HashMap<String, u32>,
    /// Iteration headers not printed yet: a model call's notice comes at
    /// once, while the previous iteration's last events (its tool result)
    /// are published only when stored; the header waits for the iteration's
    /// first new event so that the lines read in order.
    headers: HashMap<String, String>,
}

fn clip(text: &str, max: usize) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        let cut: String = one_line.chars().take(max).collect();
        format!("{cut}…")
    }
}

impl Progress {
    fn new(store: Store, quiet: bool) -> Self {
        Self {
            store,
            quiet,
            agents: HashMap::new(),
            iterations: HashMap::new(),
            headers: HashMap::new(),
        }
    }

    fn line(&self, text: String) {
        if !self.quiet {
            let mut out = std::io::stdout().lock();
            // A closed stdout (`| head`) must not stop the investigation.
            let _ = writeln!(out, "{text}");
        }
    }

    async fn agent(&mut self, execution_id: &str) -> String {
        if let Some(name) = self.agents.get(execution_id) {
            return name.clone();
        }
        let name = self
            .store
            .get_agent_execution(execution_id)
            .await
            .map(|e| e.agent_name)
            .unwrap_or_else(|_| "agent".into());
        self.agents.insert(execution_id.to_string(), name.clone());
        name
    }

    async fn llm_call(&mut self, execution_id: &str) {
        if execution_id.is_empty() {
            self.line("▶ executive summary".into());
            return;
        }
        let n = self.iterations.entry(execution_id.to_string()).or_default();
        *n += 1;
        let n = *n;
        let agent = self.agent(execution_id).await;
        self.headers.insert(
            execution_id.to_string(),
            format!("  {agent} · iteration {n}"),
        );
    }

    async fn event(&mut self, msg: &Value) {
        let text = |k: &str| msg.get(k).and_then(Value::as_str).unwrap_or_default();
        match text("type") {
            "stage.status" => {
                let index = msg.get("stage_index").and_then(Value::as_i64).unwrap_or(0);
                let name = text("stage_name");
                match text("status") {
                    "started" => self.line(format!("▶ stage {index}: {name}")),
                    status => self.line(format!("  stage {index}: {name} {status}")),
                }
            }
            "session.score" => {
                let tags = msg
                    .get("failure_tags")
                    .and_then(Value::as_array)
                    .map(|t| {
                        t.iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .filter(|t| !t.is_empty())
                    .unwrap_or_else(|| "none".into());
                match text("status") {
                    "completed" => self.line(format!(
                        "★ score {}/100 · failure tags: {tags}",
                        msg.get("score").and_then(Value::as_u64).unwrap_or_default()
                    )),
                    "failed" => self.line("! the scoring attempt failed".into()),
                    _ => {}
                }
            }
            "session.status" => {
                let status = text("status");
                if status != "pending" && status != "in_progress" {
                    self.line(format!("■ session {status}"));
                }
            }
            "timeline_event.created" | "timeline_event.completed" => {
                self.timeline(msg).await;
            }
            _ => {}
        }
    }

    async fn timeline(&mut self, msg: &Value) {
        let text = |k: &str| msg.get(k).and_then(Value::as_str).unwrap_or_default();
        let created = text("type") == "timeline_event.created";
        let status = text("status");
        let finished = status != "streaming";
        let content = text("content");
        let execution_id = text("execution_id").to_string();
        let agent = if execution_id.is_empty() {
            String::new()
        } else {
            self.agent(&execution_id).await
        };
        if created && let Some(header) = self.headers.remove(&execution_id) {
            self.line(header);
        }
        let meta = msg.get("metadata").cloned().unwrap_or(Value::Null);
        let meta_text = |k: &str| {
            meta.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        match text("event_type") {
            "llm_tool_call" if created => {
                let server = meta_text("server_name");
                let tool = meta_text("tool_name");
                let name = if server.is_empty() || tool.starts_with(&format!("{server}.")) {
                    tool
                } else {
                    format!("{server}.{tool}")
                };
                let args = match meta.get("arguments") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(v) => v.to_string(),
                };
                self.line(format!("    ⚙ {agent} calls {name}({})", clip(&args, 120)));
            }
            "llm_tool_call" if finished => {
                self.line(format!("      → {}", clip(content, 160)));
            }
            "llm_thinking" if finished && !content.is_empty() => {
                self.line(format!("    … {}", clip(content, 160)));
            }
            "final_analysis" if finished => {
                self.line(format!(
                    "    ✓ {agent} concluded ({} characters)",
                    content.chars().count()
                ));
            }
            "mcp_tool_summary" if finished => {
                self.line(format!("      (summarized) {}", clip(content, 120)));
            }
            "error" if finished => self.line(format!("    ! {agent}: {}", clip(content, 200))),
            "executive_summary" if finished => {
                self.line("  executive summary written".into());
            }
            "provider_fallback" => self.line(format!("    ! {}", clip(content, 160))),
            _ => {}
        }
    }
}

fn text_report(session: &Session, score: Option<&SessionScore>, cost: Option<&Cost>) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# Investigation {} — {}\n\n",
        session.id, session.status
    ));
    if let Some(cost) = cost {
        out.push_str(&format!("**Cost:** {}\n\n", cost_text(cost)));
    }
    if let Some(e) = &session.error_message {
        out.push_str(&format!("**Error:** {e}\n\n"));
    }
    out.push_str("## Executive summary\n\n");
    match (&session.executive_summary, &session.executive_summary_error) {
        (Some(s), _) => out.push_str(s.trim()),
        (None, Some(e)) => out.push_str(&format!("(not available: {e})")),
        (None, None) => out.push_str("(none)"),
    }
    out.push_str("\n\n## Final analysis\n\n");
    out.push_str(
        session
            .final_analysis
            .as_deref()
            .map(str::trim)
            .unwrap_or("(none)"),
    );
    if let Some(attempt) = score {
        out.push_str("\n\n## Score\n\n");
        out.push_str(&score_text(attempt));
    }
    out
}

/// A session's cost as the report shows it: the estimate (a lower bound when
/// some calls have no price), the calls and tokens.
fn cost_text(cost: &Cost) -> String {
    let calls = cost.calls;
    let tokens = cost.tokens.total_tokens;
    let usd = tarsy_core::cost::usd(cost.usd);
    match (cost.usd > 0.0, cost.partial) {
        (_, false) => format!("${usd} ({calls} LLM calls, {tokens} tokens)"),
        (true, true) => format!(
            "at least ${usd} ({calls} LLM calls, {tokens} tokens; {} calls without a price)",
            cost.unpriced_calls
        ),
        (false, true) => {
            format!("unknown: no price for its model ({calls} LLM calls, {tokens} tokens)")
        }
    }
}

/// The judge's verdict as the report shows it: the score and tags, or why
/// the attempt failed, then the tool report.
fn score_text(attempt: &SessionScore) -> String {
    match (attempt.status, attempt.score) {
        (ScoreStatus::Completed, Some(score)) => {
            let tags = if attempt.failure_tags.is_empty() {
                "none".to_string()
            } else {
                attempt.failure_tags.join(", ")
            };
            let mut text = format!(
                "**{score}/100** ({}) · failure tags: {tags}",
                attempt.outcome.as_deref().unwrap_or("no verdict")
            );
            if let Some(report) = &attempt.tool_report {
                text.push_str("\n\n");
                text.push_str(report.trim());
            }
            text
        }
        (ScoreStatus::InProgress, _) => "(the judge is still at work)".into(),
        _ => format!(
            "(no score: {})",
            attempt.error.as_deref().unwrap_or("the attempt failed")
        ),
    }
}

async fn json_report(
    store: &Store,
    session: &Session,
    score: Option<&SessionScore>,
    cost: Option<&Cost>,
) -> Value {
    let mut stages = Vec::new();
    if let Ok(list) = store.list_stages(&session.id).await {
        for stage in list {
            let executions: Vec<Value> = store
                .list_agent_executions(&stage.id)
                .await
                .unwrap_or_default()
                .into_iter()
                .map(|e| {
                    json!({
                        "agent": e.agent_name,
                        "status": e.status,
                        "error": e.error_message,
                    })
                })
                .collect();
            stages.push(json!({
                "name": stage.stage_name,
                "index": stage.stage_index,
                "status": stage.status,
                "error": stage.error_message,
                "executions": executions,
            }));
        }
    }
    // Every tool call with its outcome (not its result: that can be large).
    let tool_calls: Vec<Value> = store
        .session_mcp_interactions(&session.id)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|i| i.interaction_type == tarsy_core::McpInteractionType::ToolCall)
        .map(|i| {
            let is_error = i.error_message.is_some()
                || i.tool_result
                    .get("is_error")
                    .and_then(Value::as_bool)
                    .unwrap_or(true);
            json!({
                "server": i.server_name,
                "tool": i.tool_name,
                "arguments": i.tool_arguments,
                "is_error": is_error,
                "error": i.error_message,
            })
        })
        .collect();
    json!({
        "session_id": session.id,
        "status": session.status,
        "chain": session.chain_id,
        "alert_type": session.alert_type,
        "final_analysis": session.final_analysis,
        "executive_summary": session.executive_summary,
        "executive_summary_error": session.executive_summary_error,
        "error": session.error_message,
        "stages": stages,
        "tool_calls": tool_calls,
        "cost": cost,
        "score": score.map(|a| json!({
            "status": a.status,
            "score": a.score,
            "outcome": a.outcome,
            "failure_tags": a.failure_tags,
            "assessment": a.assessment,
            "tool_report": a.tool_report,
            "error": a.error,
            "attempt": a.attempt,
        })),
        "started_at": session.started_at,
        "completed_at": session.completed_at,
    })
}
