//! Hierarchy resolution: the configuration of an investigation agent, a
//! chat agent, a synthesis agent and the executive summary, the success
//! policy of a stage and the names of replicas. Which level wins for each
//! field is tabled in the crate docs (`operator/config/src/lib.rs`).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::model::{AgentSpec, ChainSpec, McpUnavailablePolicy, StageAgentSpec, StageSpec};
use tarsy_core::{
    Backend, Budget, IterationStrategy, LlmProviderConfig, McpSelection, ParallelType,
    ResolvedAgentConfig, SuccessPolicy,
};

use crate::alert::ChainMiss;
use crate::builtin::{CHAT_AGENT, MEMORY_REFLECTOR, SCORING_AGENT, SYNTHESIS_AGENT};
use crate::defaults::Defaults;
use crate::error::{ResolveError, SelectionError};
use crate::registry::{Config, Named};

/// One execution of a stage: which stage-agent config runs, under which
/// display name, at which 1-based position.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionConfig {
    /// The stage-agent configuration (base agent name + overrides).
    pub stage_agent: StageAgentSpec,
    /// Name for records and logs: the agent name, or `{Base}-N` for replicas.
    pub display_name: String,
    /// 1-based launch position within the stage.
    pub agent_index: u32,
}

/// Display name of replica `n` (1-based) of `base`: `{base}-{n}`.
pub fn replica_name(base: &str, n: u32) -> String {
    format!("{base}-{n}")
}

/// The agent a stage replicates: `agent`, or the single entry of `agents`
/// (with its overrides). `None` when the stage lists several agents (or
/// none).
fn single_agent(stage: &StageSpec) -> Option<StageAgentSpec> {
    match (stage.agents.as_deref(), &stage.agent) {
        (Some([only]), _) => Some(only.clone()),
        (Some([_, _, ..]), _) => None,
        (_, Some(name)) => Some(StageAgentSpec::named(name.clone())),
        _ => None,
    }
}

/// How a stage's executions relate: several different agents → multi_agent,
/// one agent with replicas > 1 → replica, a single execution → none.
pub fn parallel_type(stage: &StageSpec) -> Option<ParallelType> {
    match stage.execution_count() {
        0 | 1 => None,
        _ if single_agent(stage).is_some() => Some(ParallelType::Replica),
        _ => Some(ParallelType::MultiAgent),
    }
}

/// Success policy of a stage: stage → defaults → `any`.
pub fn resolve_success_policy(defaults: &Defaults, stage: &StageSpec) -> SuccessPolicy {
    stage
        .success_policy
        .or(defaults.success_policy)
        .unwrap_or(SuccessPolicy::Any)
}

/// Whether a chain accepts follow-up chat (enabled unless `chat.enabled: false`).
pub fn chat_enabled(chain: &ChainSpec) -> bool {
    chain.chat.as_ref().and_then(|c| c.enabled).unwrap_or(true)
}

/// LLM provider and backend of a chain's executive summary.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutiveSummaryConfig {
    /// Provider: chain.executiveSummaryProvider → chain.llmProvider → defaults.
    pub llm_provider: LlmProviderConfig,
    /// Backend from chain.iterationStrategy → defaults.iterationStrategy.
    pub backend: Backend,
}

/// A list counts as set only when non-empty: an empty list at a level does
/// not override the level below.
fn non_empty(list: &Option<Vec<String>>) -> Option<&Vec<String>> {
    list.as_ref().filter(|l| !l.is_empty())
}

/// Whether the chain fails an execution whose MCP servers cannot all be used.
fn fails_on_unavailable_server(chain: &ChainSpec) -> bool {
    chain.on_mcp_server_unavailable == Some(McpUnavailablePolicy::Fail)
}

/// Later levels win: the last `Some` of `levels`, else `base`.
fn cascade<T: Clone>(base: T, levels: &[Option<T>]) -> T {
    levels.iter().flatten().last().cloned().unwrap_or(base)
}

impl Config {
    /// The executions a stage launches, in order, under their labels: the
    /// stage's single agent (`agent`, or `agents` with one entry) × `replicas`
    /// (labelled `{label}-1` … `{label}-N` when N > 1), or every entry of
    /// `agents` (validation rejects `replicas` there). A single-agent stage is
    /// N = 1, not a special case. Labels come from [`Config::agent_label`].
    pub fn stage_executions(&self, stage: &StageSpec) -> Vec<ExecutionConfig> {
        if let Some(agent) = single_agent(stage) {
            let replicas = stage.replicas_count().max(1);
            let label = self.agent_label(&agent.name);
            return (1..=replicas)
                .map(|n| ExecutionConfig {
                    display_name: if replicas > 1 {
                        replica_name(&label, n)
                    } else {
                        label.clone()
                    },
                    stage_agent: agent.clone(),
                    agent_index: n,
                })
                .collect();
        }
        stage
            .agents
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, a)| ExecutionConfig {
                stage_agent: a.clone(),
                display_name: self.agent_label(&a.name),
                agent_index: i as u32 + 1,
            })
            .collect()
    }

    fn agent_def(&self, name: &str) -> Result<&Named<AgentSpec>, ResolveError> {
        self.agent(name)
            .ok_or_else(|| ResolveError::AgentNotFound(name.to_string()))
    }

    fn iteration_timeout(&self, chain: &ChainSpec) -> Result<Duration, ResolveError> {
        match &chain.iteration_timeout {
            Some(t) => crate::model::parse_duration(t).map_err(|source| ResolveError::Duration {
                field: "spec.iterationTimeout".into(),
                source,
            }),
            None => Ok(self.defaults.iteration_timeout),
        }
    }

    /// Session timeout of a chain: chain.sessionTimeout → defaults.
    pub fn session_timeout(&self, chain: &ChainSpec) -> Result<Duration, ResolveError> {
        match &chain.session_timeout {
            Some(t) => crate::model::parse_duration(t).map_err(|source| ResolveError::Duration {
                field: "spec.sessionTimeout".into(),
                source,
            }),
            None => Ok(self.defaults.session_timeout),
        }
    }

    /// Success policy of a stage: stage → defaults → `any`.
    pub fn resolve_success_policy(&self, stage: &StageSpec) -> SuccessPolicy {
        resolve_success_policy(&self.defaults, stage)
    }

    /// Resolves one investigation agent of a stage, per field:
    ///
    /// | field | order (later wins) |
    /// |---|---|
    /// | iteration strategy | defaults → agent → chain → stage agent |
    /// | LLM provider | defaults → chain → stage agent |
    /// | max iterations | defaults → agent → chain → stage → stage agent |
    /// | MCP servers | agent → chain → stage agent (non-empty lists only) |
    /// | iteration timeout | defaults → chain |
    /// | instructions | agent |
    /// | backend | from the resolved strategy |
    ///
    /// `stage_agent.name` is the registry key (the base name for replicas);
    /// `display_name` only labels records and logs.
    pub fn resolve_agent(
        &self,
        chain: &ChainSpec,
        stage: &StageSpec,
        stage_agent: &StageAgentSpec,
        display_name: &str,
    ) -> Result<ResolvedAgentConfig, ResolveError> {
        let d = &self.defaults;
        let definition = self.agent_def(&stage_agent.name)?;
        let agent = &definition.spec;
        let strategy: IterationStrategy = cascade(
            d.iteration_strategy,
            &[
                agent.iteration_strategy,
                chain.iteration_strategy,
                stage_agent.iteration_strategy,
            ],
        );
        let provider = cascade(
            d.llm_provider.clone(),
            &[chain.llm_provider.clone(), stage_agent.llm_provider.clone()],
        );
        let max_iterations = cascade(
            d.max_iterations,
            &[
                agent.max_iterations,
                chain.max_iterations,
                stage.max_iterations,
                stage_agent.max_iterations,
            ],
        );
        let mcp_servers = cascade(
            Vec::new(),
            &[
                non_empty(&agent.mcp_servers).cloned(),
                non_empty(&chain.mcp_servers).cloned(),
                non_empty(&stage_agent.mcp_servers).cloned(),
            ],
        );
        Ok(ResolvedAgentConfig {
            agent_name: definition.name.clone(),
            display_name: display_name.to_string(),
            iteration_strategy: strategy,
            backend: strategy.backend(),
            llm_provider: self.llm_provider_config(&provider)?,
            max_iterations,
            iteration_timeout: self.iteration_timeout(chain)?,
            mcp_servers,
            tool_filter: Default::default(),
            custom_instructions: agent.custom_instructions.clone().unwrap_or_default(),
            native_tools_override: None,
            fail_on_unavailable_server: fails_on_unavailable_server(chain),
            budget: self.session_budget(chain),
        })
    }

    /// What a chain's sessions may spend: `budget`, else the defaults';
    /// none when neither sets a limit.
    pub fn session_budget(&self, chain: &ChainSpec) -> Option<Budget> {
        chain
            .budget
            .or(Some(self.defaults.budget))
            .filter(|b| !b.is_unlimited())
    }

    /// Resolves the synthesis of a stage with several executions:
    ///
    /// | field | order (later wins) |
    /// |---|---|
    /// | agent | `synthesis-agent` → synthesis.agent |
    /// | iteration strategy | `synthesis` → agent → synthesis.iterationStrategy (chain and defaults are not used: they name tool strategies) |
    /// | LLM provider | defaults → chain → synthesis.llmProvider |
    /// | max iterations | defaults → agent → chain → stage |
    /// | MCP servers | none (synthesis is tool-less) |
    pub fn resolve_synthesis(
        &self,
        chain: &ChainSpec,
        stage: &StageSpec,
    ) -> Result<ResolvedAgentConfig, ResolveError> {
        let d = &self.defaults;
        let synthesis = stage.synthesis.clone().unwrap_or_default();
        let reference = synthesis.agent.as_deref().unwrap_or(SYNTHESIS_AGENT);
        let definition = self.agent_def(reference)?;
        let agent = &definition.spec;
        let strategy: IterationStrategy = cascade(
            IterationStrategy::Synthesis,
            &[agent.iteration_strategy, synthesis.iteration_strategy],
        );
        let provider = cascade(
            d.llm_provider.clone(),
            &[chain.llm_provider.clone(), synthesis.llm_provider.clone()],
        );
        let max_iterations = cascade(
            d.max_iterations,
            &[
                agent.max_iterations,
                chain.max_iterations,
                stage.max_iterations,
            ],
        );
        let mut resolved = self.tool_less(
            reference,
            definition,
            strategy,
            &provider,
            max_iterations,
            chain,
        )?;
        // A synthesis is part of its stage's investigation.
        resolved.budget = self.session_budget(chain);
        Ok(resolved)
    }

    /// Whether a chain's completed sessions are scored: `scoring.enabled`,
    /// else the defaults' `scoring.enabled`.
    pub fn scoring_enabled(&self, chain: &ChainSpec) -> bool {
        chain
            .scoring
            .as_ref()
            .and_then(|s| s.enabled)
            .unwrap_or(self.defaults.scoring_enabled)
    }

    /// Resolves the judge that scores a chain's sessions (whether or not
    /// scoring is on: a session may be re-scored on request):
    ///
    /// | field | order (later wins) |
    /// |---|---|
    /// | agent | `scoring-agent` → scoring.agent |
    /// | iteration strategy | `synthesis` → agent (a judge is tool-less) |
    /// | LLM provider | defaults → chain → scoring.llmProvider |
    /// | max iterations | defaults → agent → chain |
    /// | MCP servers | none |
    pub fn resolve_scoring(&self, chain: &ChainSpec) -> Result<ResolvedAgentConfig, ResolveError> {
        let d = &self.defaults;
        let scoring = chain.scoring.clone().unwrap_or_default();
        let reference = scoring.agent.as_deref().unwrap_or(SCORING_AGENT);
        let definition = self.agent_def(reference)?;
        let agent = &definition.spec;
        let strategy: IterationStrategy =
            cascade(IterationStrategy::Synthesis, &[agent.iteration_strategy]);
        let provider = cascade(
            d.llm_provider.clone(),
            &[chain.llm_provider.clone(), scoring.llm_provider.clone()],
        );
        let max_iterations = cascade(
            d.max_iterations,
            &[agent.max_iterations, chain.max_iterations],
        );
        self.tool_less(
            reference,
            definition,
            strategy,
            &provider,
            max_iterations,
            chain,
        )
    }

    /// Resolves the reflector that learns memories from a chain's scored
    /// sessions: the built-in `memory-reflector` (tool-less), on the
    /// chain's LLM provider (else the defaults').
    pub fn resolve_reflector(
        &self,
        chain: &ChainSpec,
    ) -> Result<ResolvedAgentConfig, ResolveError> {
        let d = &self.defaults;
        let definition = self.agent_def(MEMORY_REFLECTOR)?;
        let provider = cascade(
            d.llm_provider.clone(),
            std::slice::from_ref(&chain.llm_provider),
        );
        self.tool_less(
            MEMORY_REFLECTOR,
            definition,
            IterationStrategy::Synthesis,
            &provider,
            1,
            chain,
        )
    }

    /// A tool-less agent (a synthesis, a judge, the reflector) as it runs.
    fn tool_less(
        &self,
        reference: &str,
        definition: &Named<AgentSpec>,
        strategy: IterationStrategy,
        provider: &str,
        max_iterations: u32,
        chain: &ChainSpec,
    ) -> Result<ResolvedAgentConfig, ResolveError> {
        Ok(ResolvedAgentConfig {
            display_name: self.agent_label(reference),
            agent_name: definition.name.clone(),
            iteration_strategy: strategy,
            backend: strategy.backend(),
            llm_provider: self.llm_provider_config(provider)?,
            max_iterations,
            iteration_timeout: self.iteration_timeout(chain)?,
            mcp_servers: Vec::new(),
            tool_filter: Default::default(),
            custom_instructions: definition
                .spec
                .custom_instructions
                .clone()
                .unwrap_or_default(),
            native_tools_override: None,
            // No MCP server to be unavailable.
            fail_on_unavailable_server: false,
            budget: None,
        })
    }

    /// The union of the MCP servers a chain's stage agents use, in first-use
    /// order (stage-agent list, else the agent's own list). Unknown agents
    /// are skipped (validation reports them).
    pub fn aggregate_chain_mcp_servers(&self, chain: &ChainSpec) -> Vec<String> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for stage in &chain.stages {
            for exec in self.stage_executions(stage) {
                let servers = non_empty(&exec.stage_agent.mcp_servers)
                    .cloned()
                    .or_else(|| {
                        self.agent(&exec.stage_agent.name)
                            .and_then(|a| non_empty(&a.spec.mcp_servers).cloned())
                    });
                for s in servers.into_iter().flatten() {
                    if seen.insert(s.clone()) {
                        out.push(s);
                    }
                }
            }
        }
        out
    }

    /// Resolves the chat agent of a chain:
    ///
    /// | field | order (later wins) |
    /// |---|---|
    /// | agent | `chat-agent` → chat.agent |
    /// | iteration strategy | defaults → agent → chain → chat |
    /// | LLM provider | defaults → chain → chat |
    /// | max iterations | defaults → agent → chain → chat |
    /// | MCP servers | agent → chain (else the union of the stages' servers) → chat → the session's `mcpSelection` |
    /// | iteration timeout | defaults → chain |
    ///
    /// `session_selection` is the original alert's MCP selection: it replaces
    /// the servers entirely (with its tool filter and native tools override).
    pub fn resolve_chat(
        &self,
        chain_name: &str,
        chain: &ChainSpec,
        session_selection: Option<&McpSelection>,
    ) -> Result<ResolvedAgentConfig, ResolveError> {
        if !chat_enabled(chain) {
            return Err(ResolveError::ChatDisabled(chain_name.to_string()));
        }
        let d = &self.defaults;
        let chat = chain.chat.clone().unwrap_or_default();
        let reference = chat.agent.as_deref().unwrap_or(CHAT_AGENT);
        let definition = self.agent_def(reference)?;
        let agent = &definition.spec;
        let strategy: IterationStrategy = cascade(
            d.iteration_strategy,
            &[
                agent.iteration_strategy,
                chain.iteration_strategy,
                chat.iteration_strategy,
            ],
        );
        let provider = cascade(
            d.llm_provider.clone(),
            &[chain.llm_provider.clone(), chat.llm_provider.clone()],
        );
        let max_iterations = cascade(
            d.max_iterations,
            &[
                agent.max_iterations,
                chain.max_iterations,
                chat.max_iterations,
            ],
        );
        let chain_level = non_empty(&chain.mcp_servers)
            .cloned()
            .or_else(|| Some(self.aggregate_chain_mcp_servers(chain)).filter(|s| !s.is_empty()));
        let mcp_servers = cascade(
            Vec::new(),
            &[
                non_empty(&agent.mcp_servers).cloned(),
                chain_level,
                non_empty(&chat.mcp_servers).cloned(),
            ],
        );
        let mut resolved = ResolvedAgentConfig {
            display_name: self.agent_label(reference),
            agent_name: definition.name.clone(),
            iteration_strategy: strategy,
            backend: strategy.backend(),
            llm_provider: self.llm_provider_config(&provider)?,
            max_iterations,
            iteration_timeout: self.iteration_timeout(chain)?,
            mcp_servers,
            tool_filter: Default::default(),
            custom_instructions: agent.custom_instructions.clone().unwrap_or_default(),
            native_tools_override: None,
            fail_on_unavailable_server: fails_on_unavailable_server(chain),
            budget: None,
        };
        if let Some(selection) = session_selection {
            self.apply_mcp_selection(&mut resolved, selection)?;
        }
        Ok(resolved)
    }

    /// Provider and backend of a chain's executive summary:
    /// provider chain.executiveSummaryProvider → chain.llmProvider →
    /// defaults.llmProvider; backend from chain.iterationStrategy →
    /// defaults.iterationStrategy.
    pub fn resolve_executive_summary(
        &self,
        chain: &ChainSpec,
    ) -> Result<ExecutiveSummaryConfig, ResolveError> {
        let provider = chain
            .executive_summary_provider
            .clone()
            .or_else(|| chain.llm_provider.clone())
            .unwrap_or_else(|| self.defaults.llm_provider.clone());
        let strategy: IterationStrategy = chain
            .iteration_strategy
            .unwrap_or(self.defaults.iteration_strategy);
        Ok(ExecutiveSummaryConfig {
            llm_provider: self.llm_provider_config(&provider)?,
            backend: strategy.backend(),
        })
    }

    /// Checks a per-alert MCP selection against the configured MCP servers
    /// ([`McpSelection::validate`]). Alerts are checked at submission
    /// ([`Config::check_alert`]) and again when an agent is resolved.
    pub fn validate_mcp_selection(&self, selection: &McpSelection) -> Result<(), SelectionError> {
        selection.validate(self.mcp_servers.keys().map(String::as_str))
    }

    /// Applies a per-alert MCP selection to a resolved configuration: the
    /// selection's servers REPLACE the resolved ones (never merge), its tool
    /// lists become the tool filter, and its native tools (if any) override
    /// the provider's.
    pub fn apply_mcp_selection(
        &self,
        resolved: &mut ResolvedAgentConfig,
        selection: &McpSelection,
    ) -> Result<(), SelectionError> {
        self.validate_mcp_selection(selection)?;
        resolved.mcp_servers = selection.server_names();
        resolved.tool_filter = selection.tool_filter();
        if let Some(native) = &selection.native_tools {
            resolved.native_tools_override = Some(native.clone());
        }
        Ok(())
    }

    /// The chain for an alert: `chain_ref` if given, else the one chain
    /// whose alertTypes contain `alert_type` (none or several is an error).
    /// Submissions are checked with [`Config::check_alert`], which words the
    /// same failures for the submitter.
    pub fn chain_for_alert(
        &self,
        alert_type: &str,
        chain_ref: Option<&str>,
    ) -> Result<&Named<ChainSpec>, ResolveError> {
        self.find_alert_chain(alert_type, chain_ref)
            .map_err(|miss| match miss {
                ChainMiss::NotFound(name) => ResolveError::ChainNotFound(name),
                ChainMiss::NoneForType => ResolveError::NoChainForAlertType(alert_type.to_string()),
                ChainMiss::Ambiguous(chains) => ResolveError::AmbiguousAlertType {
                    alert_type: alert_type.to_string(),
                    chains: chains.join(", "),
                },
            })
    }

    /// Every alert type some chain handles, sorted.
    pub fn alert_types(&self) -> Vec<String> {
        let set: BTreeSet<&String> = self.chains().flat_map(|c| &c.spec.alert_types).collect();
        set.into_iter().cloned().collect()
    }
}
