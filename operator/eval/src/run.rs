//! Running one case: its fixture served by replay MCP servers, the
//! configuration pointed at them (and at the chosen provider), the alert
//! investigated in a private local mode, the result graded.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::Serialize;
use serde_json::{Value, json};
use tarsy_config::{Config, Named, Origin};
use tarsy_core::{ConversationMessage, McpInteractionType, SessionStatus, TokenUsage};
use tarsy_engine::LlmClient;
use tarsy_engine::llm::{Chunk, GenerateInput};
use tarsy_exec::LlmRouter;
use tarsy_local::{LocalApp, LocalOptions};
use tarsy_replay::RunningHttp;
use tarsy_store::Store;

use crate::case::Case;
use crate::error::EvalError;

/// Agent name the judge's system prompt carries (scripted providers route
/// its answer by it).
pub const JUDGE_AGENT: &str = "EvalJudge";

/// How to run cases.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// The configuration the cases run with (chains, agents, providers);
    /// the runner adds each case's MCP servers.
    pub config: Config,
    /// Its directory (relative script paths start there).
    pub config_dir: PathBuf,
    /// Run every LLM call with this provider of the configuration.
    pub provider: Option<String>,
    /// The LLM service, for every provider but `scripted` ones.
    pub llm_addr: String,
    /// Ask the judge of the cases that have one.
    pub judge: bool,
    /// Also have TARSy's scoring judge score each completed investigation
    /// (reported beside the rubric's results; it does not pass or fail a
    /// case).
    pub scoring: bool,
    /// Longest an investigation may take.
    pub timeout: Duration,
}

/// Tokens of a case.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    /// Prompt tokens.
    pub input: i64,
    /// Completion tokens.
    pub output: i64,
    /// Native thinking tokens.
    pub thinking: i64,
}

impl Tokens {
    /// Everything.
    pub fn total(&self) -> i64 {
        self.input + self.output + self.thinking
    }

    fn add(&mut self, usage: &TokenUsage) {
        self.input += usage.input_tokens;
        self.output += usage.output_tokens;
        self.thinking += usage.thinking_tokens;
    }

    /// The sum of two counts.
    pub fn plus(self, other: Tokens) -> Tokens {
        Tokens {
            input: self.input + other.input,
            output: self.output + other.output,
            thinking: self.thinking + other.thinking,
        }
    }
}

/// One graded expectation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// `status`, `required`, `forbidden`, `tool`, `tool_errors` or `judge`.
    pub kind: String,
    /// What was checked.
    pub name: String,
    /// Whether it held.
    pub passed: bool,
    /// Why it failed (or the judge's reason).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// One tool call of the investigation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallRecord {
    /// `server.tool`.
    pub tool: String,
    /// Arguments sent.
    pub arguments: Value,
    /// Whether it failed.
    pub is_error: bool,
}

/// The outcome of one case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    /// Case name.
    pub name: String,
    /// Every check held and the case ran.
    pub passed: bool,
    /// The session's status (`None`: it never ran).
    pub status: Option<String>,
    /// The session id.
    pub session_id: Option<String>,
    /// Wall time of the investigation (and the judge).
    pub duration_ms: u64,
    /// Tokens of the investigation.
    pub tokens: Tokens,
    /// Tokens of the judge.
    pub judge_tokens: Tokens,
    /// Tool calls in order.
    pub tool_calls: Vec<ToolCallRecord>,
    /// How many of them failed.
    pub tool_errors: usize,
    /// Every check.
    pub checks: Vec<Check>,
    /// Why the case could not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The analysis graded (final analysis and executive summary).
    pub analysis: String,
    /// The scoring judge's verdict, when asked for (`--judge scoring`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<CaseScore>,
}

/// The scoring judge's verdict on a case's investigation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CaseScore {
    /// 0–100, when the judge gave a usable score.
    pub score: Option<u8>,
    /// Its verdict on the outcome (`correct`, `partial`, `wrong`).
    pub outcome: Option<String>,
    /// Its failure tags.
    pub failure_tags: Vec<String>,
    /// The tools its report says were missing.
    pub missing_tools: Vec<String>,
    /// Why there is no score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl CaseResult {
    fn broken(name: &str, error: String, duration: Duration) -> Self {
        CaseResult {
            name: name.to_owned(),
            passed: false,
            status: None,
            session_id: None,
            duration_ms: millis(duration),
            tokens: Tokens::default(),
            judge_tokens: Tokens::default(),
            tool_calls: Vec::new(),
            tool_errors: 0,
            checks: Vec::new(),
            error: Some(error),
            analysis: String::new(),
            score: None,
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Runs `case`; a case that cannot run is a failed result, not an error.
pub async fn run_case(case: &Case, options: &EvalOptions) -> CaseResult {
    let started = Instant::now();
    let servers = match serve_fixture(case).await {
        Ok(s) => s,
        Err(e) => return CaseResult::broken(&case.name, e.to_string(), started.elapsed()),
    };
    let outcome = investigate(case, options, &servers).await;
    for (_, server) in servers {
        server.stop().await;
    }
    match outcome {
        Ok(result) => CaseResult {
            duration_ms: millis(started.elapsed()),
            ..result
        },
        Err(e) => CaseResult::broken(&case.name, e.to_string(), started.elapsed()),
    }
}

/// One streamable HTTP replay server per recorded MCP server of the case,
/// in process: each agent execution opens its own MCP session and replays
/// the recording from its start.
async fn serve_fixture(case: &Case) -> Result<Vec<(String, RunningHttp)>, EvalError> {
    let mut running = Vec::new();
    for (name, fixture) in &case.fixture.servers {
        let server = tarsy_replay::spawn_http(fixture.clone(), ([127, 0, 0, 1], 0).into())
            .await
            .map_err(|e| EvalError::Case {
                case: case.name.clone(),
                problem: format!("cannot serve the fixture of {name:?}: {e}"),
            })?;
        running.push((name.clone(), server));
    }
    Ok(running)
}

/// The configuration of one case: the fixture's servers, every provider the
/// chains name turned into `options.provider` when given, and scripted
/// providers replaying the case's script.
fn case_config(
    case: &Case,
    options: &EvalOptions,
    servers: &[(String, RunningHttp)],
) -> Result<Config, EvalError> {
    let invalid = |problem: String| EvalError::Case {
        case: case.name.clone(),
        problem,
    };
    let mut config = options.config.clone();
    let origin = Origin::File(format!("{} (fixture)", case.fixture_dir.display()));
    for (name, server) in servers {
        let instructions = case.fixture.servers[name].instructions.clone();
        let spec =
            serde_json::from_value(json!({"url": server.url(), "instructions": instructions}))
                .map_err(|e| invalid(format!("MCP server {name:?}: {e}")))?;
        config.insert_mcp_server(Named::new(name.clone(), spec, origin.clone()));
    }
    if let Some(chosen) = &options.provider {
        let spec = config
            .llm_provider(chosen)
            .map(|p| p.spec.clone())
            .ok_or_else(|| {
                EvalError::Config(format!(
                    "--provider {chosen:?}: no such LLMProvider in the configuration"
                ))
            })?;
        for name in referenced_providers(&config) {
            config.insert_llm_provider(Named::new(name, spec.clone(), Origin::Builtin));
        }
    }
    let scripted: Vec<String> = config
        .llm_providers()
        .filter(|p| p.spec.provider_type == tarsy_core::ProviderType::Scripted)
        .map(|p| p.name.clone())
        .collect();
    for name in scripted {
        let Some(mut provider) = config.llm_provider(&name).cloned() else {
            continue;
        };
        provider.spec.script = match &case.script {
            Some(script) => Some(absolute(script).display().to_string()),
            None if referenced_providers(&config).contains(&name) => {
                return Err(invalid(format!(
                    "LLMProvider {name:?} is scripted but the case has no script.yaml"
                )));
            }
            None => continue,
        };
        config.insert_llm_provider(provider);
    }
    if options.scoring {
        let chains: Vec<_> = config.chains().cloned().collect();
        for mut chain in chains {
            let scoring = chain.spec.scoring.get_or_insert_with(Default::default);
            scoring.enabled = Some(true);
            config.insert_chain(chain);
        }
    }
    let missing = crate::config::placeholder_servers(&config);
    if !missing.is_empty() {
        return Err(invalid(format!(
            "the chain uses MCP server(s) {} that the fixture does not record",
            missing.join(", ")
        )));
    }
    let errors = config.validate();
    if !errors.is_empty() {
        let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
        return Err(invalid(format!(
            "the configuration does not fit the case: {}",
            list.join("; ")
        )));
    }
    Ok(config)
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// Every provider name the chains (and the defaults) use.
fn referenced_providers(config: &Config) -> BTreeSet<String> {
    let mut names = BTreeSet::from([config.defaults.llm_provider.clone()]);
    for chain in config.chains() {
        let spec = &chain.spec;
        names.extend(spec.llm_provider.clone());
        names.extend(spec.executive_summary_provider.clone());
        for stage in &spec.stages {
            names.extend(
                stage
                    .agents
                    .iter()
                    .flatten()
                    .filter_map(|a| a.llm_provider.clone()),
            );
            names.extend(
                stage
                    .synthesis
                    .as_ref()
                    .and_then(|s| s.llm_provider.clone()),
            );
        }
        names.extend(spec.chat.as_ref().and_then(|c| c.llm_provider.clone()));
        names.extend(spec.scoring.as_ref().and_then(|s| s.llm_provider.clone()));
    }
    names
}

async fn investigate(
    case: &Case,
    options: &EvalOptions,
    servers: &[(String, RunningHttp)],
) -> Result<CaseResult, EvalError> {
    let config = case_config(case, options, servers)?;
    let mut local = LocalOptions::new(config.clone(), &options.config_dir);
    local.llm_addr = options.llm_addr.clone();
    local.recover = false;
    local.pod_id = format!("eval-{}", case.name);
    let app = LocalApp::start(local).await?;
    let outcome = drive(case, options, &config, &app).await;
    app.shutdown().await;
    outcome
}

async fn drive(
    case: &Case,
    options: &EvalOptions,
    config: &Config,
    app: &LocalApp,
) -> Result<CaseResult, EvalError> {
    let mut alert = case.alert.spec.submission("tarsy-eval");
    if case.chain.is_some() {
        alert.chain = case.chain.clone();
    }
    let accepted = app
        .control()
        .submit_alert(alert)
        .await
        .map_err(|e| EvalError::Case {
            case: case.name.clone(),
            problem: format!("the alert was refused: {e}"),
        })?;
    let session = app
        .wait_for_terminal(&accepted.session_id, options.timeout)
        .await?;
    let store = app.store();
    let tool_calls = tool_calls(store, &session.id).await?;
    let tokens = session_tokens(store, &session.id).await?;
    let analysis = format!(
        "{}\n\n{}",
        session.final_analysis.as_deref().unwrap_or_default(),
        session.executive_summary.as_deref().unwrap_or_default()
    )
    .trim()
    .to_owned();
    let mut checks = grade(case, &session.status, &analysis, &tool_calls);
    let mut judge_tokens = Tokens::default();
    if let (Some(judge), true) = (&case.rubric.judge, options.judge) {
        let verdict = ask_judge(
            config,
            options,
            &accepted.chain_id,
            judge,
            &session.id,
            &analysis,
        )
        .await;
        let check = match verdict {
            Ok((passed, reason, tokens)) => {
                judge_tokens = tokens;
                Check {
                    kind: "judge".into(),
                    name: "LLM judge".into(),
                    passed,
                    detail: Some(reason),
                }
            }
            Err(e) => Check {
                kind: "judge".into(),
                name: "LLM judge".into(),
                passed: false,
                detail: Some(e),
            },
        };
        checks.push(check);
    }
    let score = match options.scoring {
        true => Some(scored(store, &session, options.timeout).await),
        false => None,
    };
    let tool_errors = tool_calls.iter().filter(|c| c.is_error).count();
    Ok(CaseResult {
        name: case.name.clone(),
        passed: checks.iter().all(|c| c.passed),
        status: Some(session.status.to_string()),
        session_id: Some(session.id.clone()),
        duration_ms: 0,
        tokens,
        judge_tokens,
        tool_calls,
        tool_errors,
        checks,
        error: None,
        analysis,
        score,
    })
}

/// The scoring judge's verdict on a finished session: local mode started it
/// when the session completed (the case's chain scores sessions under
/// `--judge scoring`); waits for it within `timeout`.
async fn scored(store: &Store, session: &tarsy_store::Session, timeout: Duration) -> CaseScore {
    let none = |error: String| CaseScore {
        score: None,
        outcome: None,
        failure_tags: Vec::new(),
        missing_tools: Vec::new(),
        error: Some(error),
    };
    if session.score.is_none() {
        return none(format!("not scored: the session ended {}", session.status));
    }
    let deadline = Instant::now() + timeout;
    loop {
        match store.running_score(&session.id).await {
            Ok(None) => break,
            Ok(Some(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(Some(_)) => return none("the judge did not finish in time".into()),
            Err(e) => return none(format!("cannot read the score: {e}")),
        }
    }
    match store.session_scores(&session.id).await {
        Ok(attempts) => match attempts.into_iter().next() {
            Some(a) => CaseScore {
                score: a.score,
                outcome: a.outcome,
                failure_tags: a.failure_tags,
                missing_tools: a
                    .tool_report
                    .as_deref()
                    .map(|r| tarsy_scoring::parse_tool_report(r).missing)
                    .unwrap_or_default(),
                error: a.error,
            },
            None => none("no scoring attempt".into()),
        },
        Err(e) => none(format!("cannot read the score: {e}")),
    }
}

async fn tool_calls(store: &Store, session_id: &str) -> Result<Vec<ToolCallRecord>, EvalError> {
    Ok(store
        .session_mcp_interactions(session_id)
        .await?
        .into_iter()
        .filter(|i| i.interaction_type == McpInteractionType::ToolCall)
        .map(|i| ToolCallRecord {
            tool: format!("{}.{}", i.server_name, i.tool_name),
            is_error: i.error_message.is_some()
                || i.tool_result
                    .get("is_error")
                    .and_then(Value::as_bool)
                    .unwrap_or(true),
            arguments: i.tool_arguments,
        })
        .collect())
}

async fn session_tokens(store: &Store, session_id: &str) -> Result<Tokens, EvalError> {
    let trace = store.session_trace(session_id).await?;
    let mut tokens = Tokens::default();
    let executions = trace.stages.iter().flat_map(|s| &s.executions);
    let calls = executions
        .flat_map(|e| &e.llm_interactions)
        .chain(&trace.session_interactions);
    for usage in calls.filter_map(|c| c.usage.as_ref()) {
        tokens.add(usage);
    }
    Ok(tokens)
}

/// Grades everything but the judge.
pub fn grade(
    case: &Case,
    status: &SessionStatus,
    analysis: &str,
    tool_calls: &[ToolCallRecord],
) -> Vec<Check> {
    let rubric = &case.rubric;
    let mut checks = vec![Check {
        kind: "status".into(),
        name: format!("the session ends {}", rubric.status),
        passed: status.to_string() == rubric.status,
        detail: (status.to_string() != rubric.status).then(|| format!("it ended {status}")),
    }];
    for s in &rubric.required {
        let missing = s.missing(analysis);
        checks.push(Check {
            kind: "required".into(),
            name: s.name.clone(),
            passed: missing.is_none(),
            detail: missing,
        });
    }
    for s in &rubric.forbidden {
        let made = s.missing(analysis).is_none();
        checks.push(Check {
            kind: "forbidden".into(),
            name: s.name.clone(),
            passed: !made,
            detail: made.then(|| format!("the analysis says it ({})", s.evidence(analysis))),
        });
    }
    for tool in &rubric.tools {
        let called = tool_calls.iter().any(|c| &c.tool == tool && !c.is_error);
        checks.push(Check {
            kind: "tool".into(),
            name: format!("calls {tool}"),
            passed: called,
            detail: (!called).then(|| "never called successfully".to_owned()),
        });
    }
    if let Some(max) = rubric.max_tool_errors {
        let failed: Vec<&str> = tool_calls
            .iter()
            .filter(|c| c.is_error)
            .map(|c| c.tool.as_str())
            .collect();
        checks.push(Check {
            kind: "tool_errors".into(),
            name: format!("at most {max} failed tool call(s)"),
            passed: failed.len() <= max,
            detail: (failed.len() > max)
                .then(|| format!("{} failed: {}", failed.len(), failed.join(", "))),
        });
    }
    checks
}

/// The judge's instructions; its verdict is the first word of its answer.
fn judge_prompt(criteria: &str, analysis: &str) -> (String, String) {
    let system = format!(
        "You are {JUDGE_AGENT}, who grades the analysis of an incident investigation. \
         Decide whether the analysis meets every criterion. Answer with PASS or FAIL as the \
         first word, then one short paragraph with the reason."
    );
    let user = format!(
        "## Criteria\n\n{}\n\n## Analysis to grade\n\n{}",
        criteria.trim(),
        analysis
    );
    (system, user)
}

async fn ask_judge(
    config: &Config,
    options: &EvalOptions,
    chain_id: &str,
    judge: &crate::rubric::JudgeSpec,
    session_id: &str,
    analysis: &str,
) -> Result<(bool, String, Tokens), String> {
    let chain = config
        .chain(chain_id)
        .ok_or_else(|| format!("chain {chain_id:?} is gone"))?;
    let mut resolved = config
        .resolve_executive_summary(&chain.spec)
        .map_err(|e| format!("judge provider: {e}"))?;
    if let Some(name) = judge.provider.as_ref().or(options.provider.as_ref()) {
        resolved.llm_provider = config
            .llm_provider_config(name)
            .map_err(|e| format!("judge provider: {e}"))?;
    }
    let router = LlmRouter::new(&options.llm_addr, &options.config_dir)
        .map_err(|e| format!("judge: {e}"))?;
    let (system, user) = judge_prompt(&judge.criteria, analysis);
    let input = GenerateInput {
        session_id: format!("{session_id}-judge"),
        execution_id: format!("{session_id}-judge"),
        messages: vec![
            ConversationMessage::system(system),
            ConversationMessage::user(user),
        ],
        provider: resolved.llm_provider,
        native_tools_override: None,
        backend: resolved.backend,
        tools: Vec::new(),
        clear_cache: false,
    };
    let call = async {
        let mut stream = router
            .generate(input)
            .await
            .map_err(|e| format!("judge: {e}"))?;
        let mut text = String::new();
        let mut tokens = Tokens::default();
        while let Some(chunk) = stream.next().await {
            match chunk {
                Chunk::Text(t) => text.push_str(&t),
                Chunk::Usage(u) => tokens.add(&u),
                Chunk::Error(e) => return Err(format!("judge: {}", e.message)),
                _ => {}
            }
        }
        Ok((text, tokens))
    };
    let (text, tokens) = tokio::time::timeout(options.timeout, call)
        .await
        .map_err(|_| format!("judge: no answer within {}s", options.timeout.as_secs()))??;
    router.stop();
    let verdict = parse_verdict(&text)?;
    Ok((verdict.0, verdict.1, tokens))
}

/// `PASS`/`FAIL` as the first word (markdown emphasis allowed), and the
/// rest as the reason.
pub fn parse_verdict(text: &str) -> Result<(bool, String), String> {
    let trimmed = text.trim_start();
    let word: String = trimmed
        .trim_start_matches(['*', '#', '_', ' '])
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    let passed = match word.to_ascii_uppercase().as_str() {
        "PASS" => true,
        "FAIL" => false,
        _ => {
            let start: String = trimmed.chars().take(80).collect();
            return Err(format!(
                "the judge answered neither PASS nor FAIL: {start:?}"
            ));
        }
    };
    let reason = trimmed
        .trim_start_matches(['*', '#', '_', ' '])
        .get(word.len()..)
        .unwrap_or_default()
        .trim_start_matches(['*', '_', ':', '.', '-', ' ', '\n'])
        .trim()
        .to_owned();
    Ok((passed, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_read_from_the_first_word() {
        assert_eq!(
            parse_verdict("PASS\nThe analysis names the OOM kill.").unwrap(),
            (true, "The analysis names the OOM kill.".into())
        );
        assert_eq!(
            parse_verdict("**FAIL**: misses the tag").unwrap(),
            (false, "misses the tag".into())
        );
        assert!(parse_verdict("I think it passes").is_err());
        assert!(parse_verdict("").is_err());
    }
}
