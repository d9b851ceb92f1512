//! Local-mode loading: the example manifests load and resolve; malformed
//! input produces errors naming the file, the object and the field.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tarsy_config::{
    Config, ConfigErrors, DefaultsSpec, Placement, Problem, build_config, load_alert_file,
    load_dir_with, load_files_with, parse_config,
};
use tarsy_core::{Backend, IterationStrategy, McpTransport, SuccessPolicy};

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../kubernetes/crds/examples")
}

fn no_env(_: &str) -> Option<String> {
    None
}

/// A fresh directory under the system temp dir with `files` written into it.
fn temp_dir(files: &[(&str, &str)]) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "tarsy-config-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir
}

fn load(files: &[(&str, &str)]) -> Result<Config, ConfigErrors> {
    load_dir_with(&temp_dir(files), &DefaultsSpec::default(), &no_env)
}

fn errors(files: &[(&str, &str)]) -> Vec<String> {
    match load(files) {
        Ok(_) => panic!("configuration was accepted"),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}

fn example_config() -> Config {
    let files: Vec<PathBuf> = [
        "llmproviders.yaml",
        "mcpservers.yaml",
        "agents.yaml",
        "chains.yaml",
    ]
    .iter()
    .map(|f| examples().join(f))
    .collect();
    load_files_with(&files, &DefaultsSpec::default(), &no_env).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn example_manifests_load_and_resolve() {
    let c = example_config();
    let chain = c.chain("pod-health").unwrap();
    assert_eq!(
        chain.origin.to_string(),
        examples().join("chains.yaml").display().to_string()
    );
    let spec = &chain.spec;

    // investigation: data-collector, chain provider and strategy.
    let s0 = &spec.stages[0];
    let e = c.stage_executions(s0);
    let r = c
        .resolve_agent(spec, s0, &e[0].stage_agent, &e[0].display_name)
        .unwrap();
    assert_eq!(r.iteration_strategy, IterationStrategy::NativeThinking);
    assert_eq!(r.backend, Backend::GoogleNative);
    assert_eq!(r.llm_provider.name, "gemini-pro");
    assert_eq!(
        r.llm_provider.api_key_env.as_deref(),
        Some("GEMINI_API_KEY")
    );
    assert_eq!(r.llm_provider.fallback[0].name, "openai-main");
    assert_eq!(r.mcp_servers, ["kubernetes", "prometheus"]);
    assert_eq!(r.max_iterations, 20);
    assert_eq!(r.iteration_timeout.as_secs(), 120);

    // remediation: built-in KubernetesAgent overridden to react on openai.
    let s1 = &spec.stages[1];
    let e = c.stage_executions(s1);
    let r = c
        .resolve_agent(spec, s1, &e[0].stage_agent, &e[0].display_name)
        .unwrap();
    assert_eq!(r.agent_name, "kubernetes-agent");
    assert_eq!(r.display_name, "KubernetesAgent");
    assert_eq!(r.iteration_strategy, IterationStrategy::React);
    assert_eq!(r.backend, Backend::Langchain);
    assert_eq!(r.llm_provider.name, "openai-main");
    assert_eq!(
        r.mcp_servers,
        ["kubernetes-server"],
        "built-in agent, built-in server"
    );

    // validation: two agents, policy all, synthesis on Gemini thinking.
    let s2 = &spec.stages[2];
    assert_eq!(c.resolve_success_policy(s2), SuccessPolicy::All);
    let e = c.stage_executions(s2);
    let r = c
        .resolve_agent(spec, s2, &e[1].stage_agent, &e[1].display_name)
        .unwrap();
    assert_eq!(r.max_iterations, 1, "stage-agent override");
    assert_eq!(
        r.iteration_strategy,
        IterationStrategy::NativeThinking,
        "chain beats agent"
    );
    let syn = c.resolve_synthesis(spec, s2).unwrap();
    assert_eq!(syn.agent_name, "synthesis-agent");
    assert_eq!(syn.display_name, "SynthesisAgent");
    assert_eq!(
        syn.iteration_strategy,
        IterationStrategy::SynthesisNativeThinking
    );

    // scaling-review: two replicas.
    let s3 = &spec.stages[3];
    assert_eq!(c.resolve_success_policy(s3), SuccessPolicy::Any);
    let e = c.stage_executions(s3);
    assert_eq!(
        e.iter()
            .map(|x| x.display_name.as_str())
            .collect::<Vec<_>>(),
        ["scaling-reviewer-1", "scaling-reviewer-2"]
    );
    let r = c
        .resolve_agent(spec, s3, &e[1].stage_agent, &e[1].display_name)
        .unwrap();
    assert_eq!(r.max_iterations, 8, "stage maxIterations");

    // chat: ChatAgent gets the union of the stages' servers.
    let chat = c.resolve_chat("pod-health", spec, None).unwrap();
    assert_eq!(
        chat.mcp_servers,
        ["kubernetes", "prometheus", "kubernetes-server", "github"]
    );

    // node-pressure: chain servers and chat overrides.
    let np = &c.chain("node-pressure").unwrap().spec;
    let chat = c.resolve_chat("node-pressure", np, None).unwrap();
    assert_eq!(chat.mcp_servers, ["kubernetes", "prometheus"]);
    assert_eq!(chat.max_iterations, 5);
    assert_eq!(chat.llm_provider.name, "vertex-claude");
    assert_eq!(
        c.chain_for_alert("KubeNodeMemoryPressure", None)
            .unwrap()
            .name,
        "node-pressure"
    );

    // Executive summary.
    let sum = c.resolve_executive_summary(spec).unwrap();
    assert_eq!(sum.llm_provider.name, "gemini-pro");
    assert_eq!(sum.backend, Backend::GoogleNative);

    // Masking blocks reach tarsy-masking's shape.
    let m = c.masking_config("kubernetes").unwrap();
    assert!(m.enabled);
    assert_eq!(m.pattern_groups, ["kubernetes", "security"]);
    assert_eq!(m.custom_patterns[0].replacement, "[MASKED_TICKET_TOKEN]");
    assert!(c.masking_configs().contains_key("kubernetes-server"));
    tarsy_masking::MaskingService::new(c.masking_configs(), c.defaults.alert_masking.clone())
        .expect("the example masking configuration builds a masking service");
}

#[test]
fn example_alert_file_parses() {
    let err = load_alert_file(&examples().join("alerts.yaml"), &no_env).unwrap_err();
    assert!(
        err.to_string()
            .contains("expected exactly one Alert, found 2"),
        "{err}"
    );
    let dir = temp_dir(&[(
        "alert.yaml",
        "apiVersion: tarsy.dev/v1alpha1\nkind: Alert\nmetadata: {name: a}\nspec:\n  alertType: ${TYPE}\n  data: 'pod: web-0'\n",
    )]);
    let env = |n: &str| (n == "TYPE").then(|| "KubePodCrashLooping".to_string());
    let alert = load_alert_file(&dir.join("alert.yaml"), &env).unwrap();
    assert_eq!(alert.spec.alert_type, "KubePodCrashLooping");
    let err = load_alert_file(&dir.join("alert.yaml"), &no_env).unwrap_err();
    assert!(err.to_string().contains("\"TYPE\" is not set"), "{err}");
}

const PROVIDER: &str = "apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: gemini}
spec: {type: google, model: gemini-2.5-pro, apiKeyEnv: GOOGLE_API_KEY}
";

const CHAIN_WITH_UNKNOWN_AGENT: &str = "apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: pod-health}
spec:
  alertTypes: [PodCrash]
  llmProvider: gemini
  stages:
  - {name: a, agent: KubernetesAgent}
  - {name: b, agent: KubernetesAgent}
  - name: c
    agents: [{name: metrics-validator}]
";

#[test]
fn unknown_agent_error_names_file_object_and_field() {
    let errs = errors(&[
        ("providers.yaml", PROVIDER),
        ("chains.yaml", CHAIN_WITH_UNKNOWN_AGENT),
    ]);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with(
            "chains.yaml: Chain \"pod-health\": spec.stages[2].agents[0].name: unknown agent \"metrics-validator\" (known: "
        ),
        "{}",
        errs[0]
    );
}

#[test]
fn every_reference_is_checked() {
    let chain = "apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: refs}
spec:
  llmProvider: nope-chain
  executiveSummaryProvider: nope-summary
  mcpServers: [nope-server]
  stages:
  - name: s
    agents: [{name: KubernetesAgent, llmProvider: nope-agent, mcpServers: [kubernetes-server, nope-agent-server]}, {name: a2}]
    synthesis: {agent: nope-synth, llmProvider: nope-synth-provider}
  - {name: t, agent: nope-replica, replicas: 2}
  chat: {agent: nope-chat, llmProvider: nope-chat-provider, mcpServers: [nope-chat-server]}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: a2}
spec: {mcpServers: [nope-agent-def-server]}
---
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: p}
spec: {type: openai, model: m, fallback: [nope-fallback]}
";
    let errs = errors(&[("all.yaml", chain)]);
    let expected = [
        "all.yaml: Agent \"a2\": spec.mcpServers[0]: unknown MCP server \"nope-agent-def-server\"",
        "all.yaml: LLMProvider \"p\": spec.fallback[0]: unknown LLM provider \"nope-fallback\"",
        "all.yaml: Chain \"refs\": spec.llmProvider: unknown LLM provider \"nope-chain\"",
        "all.yaml: Chain \"refs\": spec.executiveSummaryProvider: unknown LLM provider \"nope-summary\"",
        "all.yaml: Chain \"refs\": spec.mcpServers[0]: unknown MCP server \"nope-server\"",
        "all.yaml: Chain \"refs\": spec.stages[0].agents[0].llmProvider: unknown LLM provider \"nope-agent\"",
        "all.yaml: Chain \"refs\": spec.stages[0].agents[0].mcpServers[1]: unknown MCP server \"nope-agent-server\"",
        "all.yaml: Chain \"refs\": spec.stages[0].synthesis.agent: unknown agent \"nope-synth\"",
        "all.yaml: Chain \"refs\": spec.stages[0].synthesis.llmProvider: unknown LLM provider \"nope-synth-provider\"",
        "all.yaml: Chain \"refs\": spec.stages[1].agent: unknown agent \"nope-replica\"",
        "all.yaml: Chain \"refs\": spec.chat.agent: unknown agent \"nope-chat\"",
        "all.yaml: Chain \"refs\": spec.chat.llmProvider: unknown LLM provider \"nope-chat-provider\"",
        "all.yaml: Chain \"refs\": spec.chat.mcpServers[0]: unknown MCP server \"nope-chat-server\"",
    ];
    for e in expected {
        assert!(
            errs.iter().any(|x| x.starts_with(e)),
            "missing {e:?} in {errs:#?}"
        );
    }
    assert_eq!(errs.len(), expected.len(), "{errs:#?}");
}

#[test]
fn schema_and_cel_errors_are_path_qualified() {
    let doc = "apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: bad}
spec:
  sessionTimeout: soon
  stages:
  - {name: s, agents: [{name: KubernetesAgent, iterationStrategy: reactive}]}
  - {name: t}
  - {name: u, agent: KubernetesAgent, replicas: 0}
";
    let errs = errors(&[("chains.yaml", doc)]);
    let expected = [
        "chains.yaml: Chain \"bad\": spec.stages[0].agents[0].iterationStrategy: unsupported value \"reactive\"; expected one of: native-thinking, langchain, react, synthesis, synthesis-native-thinking, single-call",
    ];
    for e in expected {
        assert!(errs.iter().any(|x| x == e), "missing {e:?} in {errs:#?}");
    }
    // Structure errors stop CEL evaluation of that object; fix the enum and
    // the CEL rules report.
    let errs = errors(&[("chains.yaml", &doc.replace("reactive", "react"))]);
    for e in [
        "chains.yaml: Chain \"bad\": spec.sessionTimeout: sessionTimeout must be a positive duration such as 15m",
        "chains.yaml: Chain \"bad\": spec.stages[1]: a stage needs either agents or agent, not both",
        "chains.yaml: Chain \"bad\": spec.stages[2].replicas: replicas must be at least 1",
    ] {
        assert!(errs.iter().any(|x| x == e), "missing {e:?} in {errs:#?}");
    }
}

#[test]
fn replicas_of_a_listed_agent_as_the_reference_writes_them() {
    let chain = "apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: scaling}
spec:
  alertTypes: [Scaling]
  stages:
  - name: scaling-review
    replicas: 2
    agents: [{name: KubernetesAgent, maxIterations: 3}]
";
    let config = load(&[("chains.yaml", chain)]).unwrap_or_else(|e| panic!("{e}"));
    let stage = &config.chain("scaling").unwrap().spec.stages[0];
    assert_eq!(
        config
            .stage_executions(stage)
            .iter()
            .map(|e| e.display_name.as_str())
            .collect::<Vec<_>>(),
        ["KubernetesAgent-1", "KubernetesAgent-2"]
    );

    // Replicas of several different agents mean nothing: rejected.
    let two = chain.replace(
        "agents: [{name: KubernetesAgent, maxIterations: 3}]",
        "agents: [{name: KubernetesAgent}, {name: ChatAgent}]",
    );
    let errs = errors(&[("chains.yaml", &two)]);
    let expected = "chains.yaml: Chain \"scaling\": spec.stages[0].replicas: replicas needs a single agent: agent, or agents with one entry";
    assert!(errs.iter().any(|e| e == expected), "{errs:#?}");
}

#[test]
fn interpolation_and_escapes() {
    let provider = "apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: ${NAME}}
spec: {type: openai, model: '${MODEL}', baseUrl: 'http://${HOST}/v1', apiKeyEnv: KEY}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: literal}
spec: {customInstructions: 'use $${HOME} literally; costs $5'}
";
    let dir = temp_dir(&[("p.yaml", provider)]);
    let env = |n: &str| -> Option<String> {
        match n {
            "NAME" => Some("local-llm".into()),
            "MODEL" => Some("llama-3".into()),
            "HOST" => Some("localhost:8000".into()),
            _ => None,
        }
    };
    let c = load_dir_with(&dir, &DefaultsSpec::default(), &env).unwrap();
    let p = c.llm_provider_config("local-llm").unwrap();
    assert_eq!(p.model, "llama-3");
    assert_eq!(p.base_url.as_deref(), Some("http://localhost:8000/v1"));
    assert_eq!(
        c.agent("literal")
            .unwrap()
            .spec
            .custom_instructions
            .as_deref(),
        Some("use ${HOME} literally; costs $5")
    );

    // Unset variables: every one is reported with file and line.
    let errs = load_dir_with(&dir, &DefaultsSpec::default(), &no_env)
        .unwrap_err()
        .0
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>();
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert!(
        errs[0].starts_with("p.yaml: line 3: environment variable \"NAME\" is not set"),
        "{}",
        errs[0]
    );
    assert!(errs[1].contains("line 4") && errs[1].contains("\"MODEL\""));
    assert!(errs[2].contains("line 4") && errs[2].contains("\"HOST\""));
}

#[test]
fn duplicates_across_files_name_both_places() {
    let agent = "apiVersion: tarsy.dev/v1alpha1\nkind: Agent\nmetadata: {name: twin}\nspec: {}\n";
    let errs = errors(&[("a.yaml", agent), ("b.yaml", agent)]);
    assert_eq!(
        errs,
        [
            "b.yaml: Agent \"twin\": metadata.name: duplicate Agent name \"twin\" (first defined in a.yaml)"
        ]
    );
}

#[test]
fn alert_type_claimed_twice() {
    let chains = "apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: first}
spec: {alertTypes: [A, Shared], stages: [{name: s, agent: KubernetesAgent}]}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: second}
spec: {alertTypes: [Shared], stages: [{name: s, agent: KubernetesAgent}]}
";
    let errs = errors(&[("chains.yaml", chains)]);
    assert_eq!(
        errs,
        [
            "chains.yaml: Chain \"second\": spec.alertTypes[0]: alert type \"Shared\" is also claimed by Chain \"first\""
        ]
    );
}

#[test]
fn strategies_must_fit_their_provider_and_role() {
    let docs = "apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: gpt}
spec: {type: openai, model: gpt-5, apiKeyEnv: OPENAI_API_KEY}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: c}
spec:
  llmProvider: gpt
  iterationStrategy: langchain
  chat: {enabled: false}
  stages:
  - name: s
    agents: [{name: KubernetesAgent, iterationStrategy: native-thinking}, {name: SynthesisAgent, iterationStrategy: synthesis}]
";
    let errs = errors(&[("c.yaml", docs)]);
    assert!(
        errs.iter().any(|e| e.starts_with("c.yaml: Chain \"c\": spec.stages[0].agents[0]: strategy native-thinking runs on the google-native backend, which needs a google or vertexai provider, but LLM provider \"gpt\" is openai")),
        "{errs:#?}"
    );
    assert!(
        errs.iter().any(|e| e.starts_with("c.yaml: Chain \"c\": spec.stages[0].agents[1]: strategy synthesis only runs a stage's synthesis")),
        "{errs:#?}"
    );
    // A SynthesisAgent redefined with a tool strategy cannot synthesize.
    let override_synth = "apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: synthesis-agent}
spec: {iterationStrategy: langchain}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: c}
spec:
  iterationStrategy: langchain
  llmProvider: openai-default
  stages: [{name: s, agents: [{name: KubernetesAgent}, {name: KubernetesAgent, llmProvider: anthropic-default}]}]
";
    let errs = errors(&[("c.yaml", override_synth)]);
    assert!(
        errs.iter().any(|e| e
            .contains("spec.stages[0].agents[1].name: agent \"KubernetesAgent\" is listed twice")),
        "{errs:#?}"
    );
    assert!(errs.iter().any(|e| e.contains("spec.stages[0].synthesis: synthesis agent \"synthesis-agent\" resolves to strategy langchain, which calls tools")), "{errs:#?}");
}

#[test]
fn a_judge_must_exist_and_be_tool_less() {
    let docs = "apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: tooled-judge}
spec: {iterationStrategy: langchain}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: c}
spec:
  llmProvider: openai-default
  scoring: {enabled: true, agent: tooled-judge}
  iterationStrategy: langchain
  stages: [{name: s, agent: kubernetes-agent}]
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: d}
spec:
  alertTypes: [D]
  scoring: {agent: no-such-judge, llmProvider: no-such-provider}
  stages: [{name: s, agent: kubernetes-agent}]
";
    let errs = errors(&[("c.yaml", docs)]);
    assert!(
        errs.iter().any(|e| e.contains("Chain \"c\": spec.scoring: scoring agent \"tooled-judge\" resolves to strategy langchain, which calls tools")),
        "{errs:#?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("Chain \"d\": spec.scoring.agent") && e.contains("no-such-judge")),
        "{errs:#?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("Chain \"d\": spec.scoring.llmProvider")
                && e.contains("no-such-provider")),
        "{errs:#?}"
    );
}

#[test]
fn builtins_can_be_overridden() {
    let docs = "apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: kubernetes-agent}
spec: {customInstructions: mine, mcpServers: [kubernetes-server]}
---
apiVersion: tarsy.dev/v1alpha1
kind: MCPServer
metadata: {name: kubernetes-server}
spec: {url: 'http://k8s-mcp:8080/mcp'}
";
    let c = load(&[("o.yaml", docs)]).unwrap();
    assert_eq!(
        c.agent("KubernetesAgent")
            .unwrap()
            .spec
            .custom_instructions
            .as_deref(),
        Some("mine")
    );
    let m = c
        .mcp_server_config(
            "kubernetes-server",
            &tarsy_config::MapSecretResolver::default(),
            &Placement::Local,
        )
        .unwrap();
    assert!(matches!(m.transport, McpTransport::Http(ref h) if h.url == "http://k8s-mcp:8080/mcp"));
    // Untouched built-ins remain.
    assert!(c.agent("ChatAgent").is_some() && c.llm_provider("google-default").is_some());
}

#[test]
fn defaults_document_and_overrides() {
    let defaults = "apiVersion: tarsy.dev/v1alpha1
kind: Defaults
metadata: {name: defaults}
spec:
  llmProvider: openai-default
  iterationStrategy: langchain
  maxIterations: 9
  successPolicy: all
  sessionTimeout: 30m
  alertMasking: {patternGroup: basic}
";
    let c = load(&[("defaults.yaml", defaults)]).unwrap();
    assert_eq!(c.defaults.llm_provider, "openai-default");
    assert_eq!(c.defaults.max_iterations, 9);
    assert_eq!(c.defaults.success_policy, Some(SuccessPolicy::All));
    assert_eq!(c.defaults.session_timeout.as_secs(), 1800);
    assert_eq!(c.defaults.alert_masking.pattern_group, "basic");
    assert!(c.defaults.alert_masking.enabled);

    // The environment layer wins over the file.
    let overrides = DefaultsSpec {
        max_iterations: Some(4),
        ..DefaultsSpec::default()
    };
    let c = load_dir_with(
        &temp_dir(&[("defaults.yaml", defaults)]),
        &overrides,
        &no_env,
    )
    .unwrap();
    assert_eq!(c.defaults.max_iterations, 4);
    assert_eq!(c.defaults.llm_provider, "openai-default");

    // Bad defaults are located.
    let errs = errors(&[(
        "defaults.yaml",
        "apiVersion: tarsy.dev/v1alpha1\nkind: Defaults\nmetadata: {name: d}\nspec: {llmProvider: ghost, maxIterations: 0, alertMasking: {patternGroup: nope}}\n",
    )]);
    assert!(
        errs.iter()
            .any(|e| e == "defaults.yaml: Defaults \"d\": spec.maxIterations: must be at least 1"),
        "{errs:#?}"
    );
    assert!(
        errs.iter()
            .any(|e| e
                .starts_with("Defaults \"defaults\": llmProvider: unknown LLM provider \"ghost\"")),
        "{errs:#?}"
    );
    assert!(
        errs.iter().any(|e| e.starts_with(
            "Defaults \"defaults\": alertMasking.patternGroup: unknown masking group \"nope\""
        )),
        "{errs:#?}"
    );
    let errs = errors(&[(
        "defaults.yaml",
        "apiVersion: tarsy.dev/v1alpha1\nkind: Defaults\nmetadata: {name: d}\nspec: {maxIteration: 3}\n",
    )]);
    assert!(
        errs[0].starts_with("defaults.yaml: Defaults \"d\": spec: unknown field `maxIteration`"),
        "{errs:#?}"
    );
}

#[test]
fn defaults_document_sets_retention_and_notifications() {
    let defaults = "apiVersion: tarsy.dev/v1alpha1
kind: Defaults
metadata: {name: defaults}
spec:
  retention: {hideAfter: 720h, purgeAfter: '0', eventTtl: 2h, interval: 10m}
  notifications:
    dashboardUrl: https://tarsy.example.com/
    slack: {channel: '#sre-incidents', notifyStart: true}
";
    let c = load(&[("defaults.yaml", defaults)]).unwrap();
    let d = &c.defaults;
    assert_eq!(
        d.retention.hide_after,
        Some(Duration::from_secs(720 * 3600))
    );
    assert_eq!(d.retention.purge_after, None, "0 keeps forever");
    assert_eq!(d.retention.event_ttl, Some(Duration::from_secs(7200)));
    assert_eq!(d.retention_interval, Duration::from_secs(600));
    let n = &d.notifications;
    assert_eq!(n.slack_channel.as_deref(), Some("#sre-incidents"));
    assert!(n.slack_notify_start);
    assert_eq!(n.slack_api_url, tarsy_config::DEFAULT_SLACK_API_URL);
    assert_eq!(
        n.dashboard_url.as_deref(),
        Some("https://tarsy.example.com")
    );

    // Without the document: the built-in retention, no notifications.
    let c = load(&[]).unwrap();
    assert_eq!(c.defaults.retention, tarsy_config::Retention::default());
    assert_eq!(c.defaults.notifications.slack_channel, None);

    // The environment wins over the document, as for every default.
    let env = |name: &str| match name {
        "TARSY_SLACK_CHANNEL" => Some("#other".to_string()),
        "TARSY_RETENTION_INTERVAL" => Some("5m".to_string()),
        _ => None,
    };
    let overrides = DefaultsSpec::from_env(&env).unwrap();
    let c = load_dir_with(
        &temp_dir(&[("defaults.yaml", defaults)]),
        &overrides,
        &no_env,
    )
    .unwrap();
    assert_eq!(
        c.defaults.notifications.slack_channel.as_deref(),
        Some("#other")
    );
    assert_eq!(c.defaults.retention_interval, Duration::from_secs(300));
    assert!(c.defaults.notifications.slack_notify_start);

    // Bad values are located.
    let errs = errors(&[(
        "defaults.yaml",
        "apiVersion: tarsy.dev/v1alpha1\nkind: Defaults\nmetadata: {name: d}\nspec: {retention: {hideAfter: soon, interval: '0'}, notifications: {dashboardUrl: tarsy.local, slack: {channnel: x}}}\n",
    )]);
    assert!(
        errs[0].contains("unknown field `channnel`, expected one of `channel`"),
        "{errs:#?}"
    );
    let errs = errors(&[(
        "defaults.yaml",
        "apiVersion: tarsy.dev/v1alpha1\nkind: Defaults\nmetadata: {name: d}\nspec: {retention: {hideAfter: soon, interval: '0'}, notifications: {dashboardUrl: tarsy.local}}\n",
    )]);
    for field in [
        "spec.retention.hideAfter",
        "spec.retention.interval: must be positive",
        "spec.notifications.dashboardUrl: \"tarsy.local\" is not an http(s) URL",
    ] {
        assert!(errs.iter().any(|e| e.contains(field)), "{field}: {errs:#?}");
    }
}

#[test]
fn malformed_input_never_panics_and_is_located() {
    let cases: [(&str, &str); 6] = [
        ("bad.yaml", "kind: Chain\nmetadata: {name: x\n"),
        (
            "nokind.yaml",
            "apiVersion: tarsy.dev/v1alpha1\nmetadata: {name: x}\n",
        ),
        (
            "alien.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
        ),
        (
            "alert.yaml",
            "apiVersion: tarsy.dev/v1alpha1\nkind: Alert\nmetadata: {name: x}\nspec: {alertType: A, data: d}\n",
        ),
        (
            "version.yaml",
            "apiVersion: tarsy.dev/v1\nkind: Agent\nmetadata: {name: x}\nspec: {}\n",
        ),
        ("scalar.yaml", "just a string\n"),
    ];
    let expected = [
        "bad.yaml: invalid YAML: document 1:",
        "nokind.yaml: <no kind> \"x\": kind: missing kind",
        "alien.yaml: ConfigMap \"x\": kind: unsupported kind \"ConfigMap\"; expected one of: Chain, Agent, MCPServer, LLMProvider, Defaults",
        "alert.yaml: Alert \"x\": Alert is not configuration",
        "version.yaml: Agent \"x\": apiVersion: expected \"tarsy.dev/v1alpha1\", found \"tarsy.dev/v1\"",
        "scalar.yaml: <no kind> \"<no name>\": kind: missing kind",
    ];
    for ((file, text), want) in cases.iter().zip(expected) {
        let errs = errors(&[(file, text)]);
        assert!(
            errs.iter().any(|e| e.starts_with(want)),
            "{file}: want {want:?}, got {errs:#?}"
        );
    }
    // Missing directory.
    let err = load_dir_with(
        Path::new("/nonexistent/tarsy"),
        &DefaultsSpec::default(),
        &no_env,
    )
    .unwrap_err();
    assert!(matches!(err.0[0].problem, Problem::Io(_)), "{err}");
}

#[test]
fn masking_blocks_are_validated_by_the_masking_crate() {
    let docs = "apiVersion: tarsy.dev/v1alpha1
kind: MCPServer
metadata: {name: m}
spec:
  url: https://m.example/mcp
  dataMasking:
    patternGroups: [security, secrest]
    customPatterns: [{name: t, regex: '(unclosed'}]
";
    let errs = errors(&[("m.yaml", docs)]);
    assert!(
        errs.iter().any(|e| e.starts_with("m.yaml: MCPServer \"m\": spec.dataMasking.patternGroups[1]: unknown pattern group \"secrest\"")),
        "{errs:#?}"
    );
}

#[test]
fn parse_then_build_equals_load() {
    let text = std::fs::read_to_string(examples().join("agents.yaml")).unwrap();
    let objects = parse_config("agents.yaml", &text, &no_env).unwrap();
    assert_eq!(objects.len(), 4);
    let err = build_config(objects, &DefaultsSpec::default()).unwrap_err();
    // Alone, the agents reference servers that are not defined.
    assert!(err.to_string().contains("agents.yaml: Agent \"config-validator\": spec.mcpServers[0]: unknown MCP server \"kubernetes\""), "{err}");
}

#[test]
fn names_follow_the_kubernetes_rule_in_local_mode_too() {
    let camel = "apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: DataCollector}
spec: {}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: Pod_Alerts}
spec: {stages: [{name: s, agent: kubernetes-agent}]}
";
    let errs = errors(&[("a.yaml", camel)]);
    assert_eq!(
        errs,
        [
            "a.yaml: Agent \"DataCollector\": metadata.name: \"DataCollector\": an object name must be \
             lowercase letters, digits, '-' or '.', starting and ending with a letter or digit (the \
             rule Kubernetes applies); e.g. \"data-collector\" (prompts and records can keep calling \
             it \"DataCollector\": `spec.displayName: DataCollector`)",
            "a.yaml: Chain \"Pod_Alerts\": metadata.name: \"Pod_Alerts\": an object name must be \
             lowercase letters, digits, '-' or '.', starting and ending with a letter or digit (the \
             rule Kubernetes applies); e.g. \"pod-alerts\"",
        ]
    );
}

#[test]
fn agents_are_labelled_by_display_name_and_built_ins_keep_their_old_names_as_aliases() {
    let docs = "apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: data-collector}
spec: {displayName: DataCollector}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: c}
spec:
  stages:
  - {name: collect, agent: data-collector, replicas: 2}
  - {name: old-name, agent: KubernetesAgent}
  - {name: new-name, agent: kubernetes-agent}
";
    let c = load(&[("c.yaml", docs)]).unwrap_or_else(|e| panic!("{e}"));
    let chain = &c.chain("c").unwrap().spec;
    let labels = |i: usize| -> Vec<String> {
        c.stage_executions(&chain.stages[i])
            .into_iter()
            .map(|e| e.display_name)
            .collect()
    };
    assert_eq!(labels(0), ["DataCollector-1", "DataCollector-2"]);
    assert_eq!(labels(1), ["KubernetesAgent"]);
    assert_eq!(labels(2), ["KubernetesAgent"]);
    for i in [1, 2] {
        let stage = &chain.stages[i];
        let e = &c.stage_executions(stage)[0];
        let r = c
            .resolve_agent(chain, stage, &e.stage_agent, &e.display_name)
            .unwrap();
        assert_eq!(r.agent_name, "kubernetes-agent", "stage {i}");
    }

    // Two agents of one stage may not share a label.
    let twins = "apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: logs}
spec: {displayName: Collector}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: metrics}
spec: {displayName: Collector}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: c}
spec: {stages: [{name: s, agents: [{name: logs}, {name: metrics}]}]}
";
    let errs = errors(&[("t.yaml", twins)]);
    assert!(
        errs.iter().any(|e| e.contains(
            "spec.stages[0].agents[1].name: agent \"metrics\" is labelled \"Collector\" like another agent of the stage"
        )),
        "{errs:#?}"
    );
}

#[test]
fn the_memory_embedding_provider_must_exist_and_embed() {
    let defaults = |provider: &str| {
        format!(
            "apiVersion: tarsy.dev/v1alpha1\nkind: Defaults\nmetadata: {{name: defaults}}\n\
             spec:\n  memory: {{enabled: true, embedding: {{llmProvider: {provider}, model: m}}}}\n"
        )
    };
    let unknown = errors(&[
        ("providers.yaml", PROVIDER),
        ("defaults.yaml", &defaults("nope")),
    ]);
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert!(
        unknown[0].contains("memory.embedding.llmProvider: unknown LLM provider \"nope\""),
        "{}",
        unknown[0]
    );
    let anthropic = errors(&[
        ("providers.yaml", PROVIDER),
        ("defaults.yaml", &defaults("anthropic-default")),
    ]);
    assert!(
        anthropic[0].contains("is of type anthropic, which has no embeddings"),
        "{anthropic:?}"
    );
    let config = load(&[
        ("providers.yaml", PROVIDER),
        ("defaults.yaml", &defaults("google-default")),
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        config.defaults.memory.embedding.map(|e| e.llm_provider),
        Some("google-default".to_string())
    );
}
