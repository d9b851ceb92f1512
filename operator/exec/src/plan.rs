//! From configuration to what the state machine and the engine need: the
//! chain plan, and each execution's resolved agent configuration.

use tarsy_chain::{ChainPlan, ExecutionPlan, StagePlan};
use tarsy_config::model::{ChainSpec, StageSpec};
use tarsy_config::{Config, Named, parallel_type};
use tarsy_core::{McpSelection, ResolvedAgentConfig, StageKind};

use crate::error::{ExecError, Result};

/// The chain flattened for [`tarsy_chain::decide`]: every stage with its
/// executions expanded (multi-agent entries, or `{agent}-N` replicas).
pub fn chain_plan(config: &Config, chain: &Named<ChainSpec>) -> ChainPlan {
    let stages = chain
        .spec
        .stages
        .iter()
        .map(|stage| StagePlan {
            name: stage.name.clone(),
            success_policy: config.resolve_success_policy(stage),
            parallel_type: parallel_type(stage),
            executions: config
                .stage_executions(stage)
                .into_iter()
                .map(|e| ExecutionPlan {
                    agent_name: e.stage_agent.name.clone(),
                    display_name: e.display_name,
                })
                .collect(),
            synthesis: synthesis_plan(config, stage),
        })
        .collect();
    ChainPlan {
        chain: chain.name.clone(),
        stages,
        budget: config.session_budget(&chain.spec),
    }
}

/// The agent that synthesizes `stage`: `synthesis.agent`, else the
/// built-in one.
fn synthesis_plan(config: &Config, stage: &StageSpec) -> ExecutionPlan {
    let agent_name = stage
        .synthesis
        .as_ref()
        .and_then(|s| s.agent.clone())
        .unwrap_or_else(|| tarsy_config::builtin::SYNTHESIS_AGENT.to_string());
    ExecutionPlan {
        display_name: config.agent_label(&agent_name),
        agent_name,
    }
}

/// The resolved configuration of one execution of a stage record: the
/// `index`-th (1-based) agent of chain stage `config_index`, or the stage's
/// synthesis. The alert's MCP selection, if any, replaces the servers of
/// investigation agents (synthesis is tool-less). Chat answers resolve with
/// [`Config::resolve_chat`].
pub fn resolve_execution(
    config: &Config,
    chain: &ChainSpec,
    config_index: usize,
    kind: StageKind,
    index: u32,
    selection: Option<&McpSelection>,
) -> Result<ResolvedAgentConfig> {
    if matches!(
        kind,
        StageKind::Chat | StageKind::Scoring | StageKind::Memory
    ) {
        return Err(ExecError::Invalid(format!(
            "a {kind} execution is not an execution of a chain stage"
        )));
    }
    let stage = chain.stages.get(config_index).ok_or_else(|| {
        ExecError::Invalid(format!(
            "the chain has no stage {} any more (configuration changed?)",
            config_index + 1
        ))
    })?;
    match kind {
        StageKind::Synthesis | StageKind::Chat | StageKind::Scoring | StageKind::Memory => {
            Ok(config.resolve_synthesis(chain, stage)?)
        }
        StageKind::Investigation => {
            let execution = config
                .stage_executions(stage)
                .into_iter()
                .find(|e| e.agent_index == index)
                .ok_or_else(|| {
                    ExecError::Invalid(format!(
                        "stage {:?} has no agent #{index} any more (configuration changed?)",
                        stage.name
                    ))
                })?;
            let mut resolved = config.resolve_agent(
                chain,
                stage,
                &execution.stage_agent,
                &execution.display_name,
            )?;
            if let Some(selection) = selection {
                config
                    .apply_mcp_selection(&mut resolved, selection)
                    .map_err(|e| ExecError::Invalid(format!("mcp selection: {e}")))?;
            }
            Ok(resolved)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tarsy_config::{DefaultsSpec, build_config, parse_config};
    use tarsy_core::{IterationStrategy, ParallelType, SuccessPolicy};

    const CONFIG: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {name: p}
spec: {type: google, model: m, apiKeyEnv: K}
---
apiVersion: tarsy.dev/v1alpha1
kind: MCPServer
metadata: {name: srv}
spec: {url: "http://127.0.0.1:1/mcp"}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: a}
spec: {displayName: A, mcpServers: [srv]}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: b}
spec: {displayName: B}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: c}
spec:
  alertTypes: [T]
  llmProvider: p
  stages:
  - name: one
    agent: a
  - name: many
    successPolicy: all
    agents: [{name: a}, {name: b, iterationStrategy: react}]
    synthesis: {agent: b}
  - name: copies
    agent: b
    replicas: 3
"#;

    fn config() -> Config {
        let objects = parse_config("t.yaml", CONFIG, &|_| None).unwrap();
        build_config(objects, &DefaultsSpec::default()).unwrap()
    }

    #[test]
    fn stages_expand_agents_and_replicas() {
        let config = config();
        let chain = config.chain("c").unwrap();
        let plan = chain_plan(&config, chain);
        assert_eq!(plan.chain, "c");
        let names = |i: usize| -> Vec<&str> {
            plan.stages[i]
                .executions
                .iter()
                .map(|e| e.display_name.as_str())
                .collect()
        };
        assert_eq!(names(0), ["A"]);
        assert_eq!(names(1), ["A", "B"]);
        assert_eq!(names(2), ["B-1", "B-2", "B-3"]);
        assert_eq!(plan.stages[2].executions[1].agent_name, "b");
        assert_eq!(plan.stages[0].parallel_type, None);
        assert_eq!(plan.stages[1].parallel_type, Some(ParallelType::MultiAgent));
        assert_eq!(plan.stages[2].parallel_type, Some(ParallelType::Replica));
        assert_eq!(plan.stages[0].success_policy, SuccessPolicy::Any);
        assert_eq!(plan.stages[1].success_policy, SuccessPolicy::All);
        assert_eq!(plan.stages[0].synthesis.agent_name, "synthesis-agent");
        assert_eq!(plan.stages[0].synthesis.display_name, "SynthesisAgent");
        assert_eq!(plan.stages[1].synthesis.agent_name, "b");
        assert_eq!(plan.stages[1].synthesis.display_name, "B");
    }

    #[test]
    fn executions_resolve_with_overrides_and_selection() {
        let config = config();
        let chain = &config.chain("c").unwrap().spec;
        let b = resolve_execution(&config, chain, 1, StageKind::Investigation, 2, None).unwrap();
        assert_eq!(b.iteration_strategy, IterationStrategy::React);
        let replica =
            resolve_execution(&config, chain, 2, StageKind::Investigation, 3, None).unwrap();
        assert_eq!(replica.display_name, "B-3");
        assert_eq!(replica.agent_name, "b");
        let synthesis =
            resolve_execution(&config, chain, 1, StageKind::Synthesis, 1, None).unwrap();
        assert!(synthesis.mcp_servers.is_empty());

        let selection: McpSelection = serde_json::from_value(
            serde_json::json!({"servers": [{"name": "srv", "tools": ["x"]}]}),
        )
        .unwrap();
        let a = resolve_execution(
            &config,
            chain,
            0,
            StageKind::Investigation,
            1,
            Some(&selection),
        )
        .unwrap();
        assert_eq!(a.mcp_servers, ["srv"]);
        assert_eq!(a.tool_filter["srv"], ["x"]);

        let missing = resolve_execution(&config, chain, 7, StageKind::Investigation, 1, None);
        assert!(matches!(missing, Err(ExecError::Invalid(m)) if m.contains("no stage 8")));
        let missing = resolve_execution(&config, chain, 0, StageKind::Investigation, 4, None);
        assert!(matches!(missing, Err(ExecError::Invalid(m)) if m.contains("no agent #4")));
    }
}
