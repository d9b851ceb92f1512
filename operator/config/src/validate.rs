//! Cross-object validation: references resolve, names are unambiguous,
//! strategies fit where they are used. (What one object can check alone is
//! in the CRDs' schema and CEL rules, see [`crate::schema`].)

use std::collections::{BTreeMap, BTreeSet};

use crate::model::ChainSpec;
use tarsy_core::{Backend, IterationStrategy, ProviderType};
use tarsy_masking::MaskingError;

use crate::error::{ConfigError, Location, ObjectRef, Problem};
use crate::registry::{Config, Named};

struct Report<'a> {
    config: &'a Config,
    errors: Vec<ConfigError>,
}

impl Report<'_> {
    fn push(&mut self, at: Location, problem: Problem) {
        self.errors.push(ConfigError::new(at, problem));
    }

    fn agent_ref(&mut self, at: &Location, field: String, name: &str) {
        if self.config.agent(name).is_none() {
            let known = self.config.known_agents();
            self.push(
                at.clone().field(field),
                Problem::UnknownAgent {
                    name: name.into(),
                    known,
                },
            );
        }
    }

    fn provider_ref(&mut self, at: &Location, field: String, name: &str) {
        if self.config.llm_provider(name).is_none() {
            let known = self.config.known_llm_providers();
            self.push(
                at.clone().field(field),
                Problem::UnknownLlmProvider {
                    name: name.into(),
                    known,
                },
            );
        }
    }

    fn server_refs(&mut self, at: &Location, field: &str, names: Option<&Vec<String>>) {
        for (i, name) in names.into_iter().flatten().enumerate() {
            if self.config.mcp_server(name).is_none() {
                let known = self.config.known_mcp_servers();
                self.push(
                    at.clone().field(format!("{field}[{i}]")),
                    Problem::UnknownMcpServer {
                        name: name.clone(),
                        known,
                    },
                );
            }
        }
    }

    fn duration(&mut self, at: &Location, field: &str, value: Option<&String>) {
        if let Some(v) = value {
            match crate::model::parse_duration(v) {
                Ok(d) if d.is_zero() => self.push(
                    at.clone().field(field),
                    Problem::Invalid("must be positive".into()),
                ),
                Ok(_) => {}
                Err(e) => self.push(at.clone().field(field), Problem::Duration(e)),
            }
        }
    }

    /// A google-native strategy needs a provider the google-genai SDK serves.
    fn backend_fits(&mut self, at: Location, strategy: IterationStrategy, provider: &str) {
        let Some(p) = self.config.llm_provider(provider) else {
            return; // reported as an unknown reference
        };
        let provider_type: ProviderType = p.spec.provider_type;
        let google = matches!(
            provider_type,
            ProviderType::Google | ProviderType::Vertexai | ProviderType::Scripted
        );
        if strategy.backend() == Backend::GoogleNative && !google {
            self.push(
                at,
                Problem::BadStrategy(format!(
                    "strategy {strategy} runs on the google-native backend, which needs a google or vertexai provider, but LLM provider {provider:?} is {provider_type}"
                )),
            );
        }
    }
}

fn is_synthesis(s: IterationStrategy) -> bool {
    matches!(
        s,
        IterationStrategy::Synthesis | IterationStrategy::SynthesisNativeThinking
    )
}

impl Config {
    /// Every cross-object problem in the configuration (empty when valid).
    /// Errors are ordered by kind and name.
    pub fn validate(&self) -> Vec<ConfigError> {
        let mut r = Report {
            config: self,
            errors: Vec::new(),
        };
        self.validate_defaults(&mut r);
        for p in self.llm_providers() {
            let at = p.location("LLMProvider");
            for (i, fb) in p.spec.fallback.iter().flatten().enumerate() {
                r.provider_ref(&at, format!("spec.fallback[{i}]"), fb);
            }
        }
        for s in self.mcp_servers() {
            let at = s.location("MCPServer");
            r.duration(&at, "spec.timeout", s.spec.timeout.as_ref());
            if let Some(m) = &s.spec.data_masking
                && let Err(e) = crate::convert::written_masking_config(m).validate(&s.name)
            {
                let (field, problem) = masking_problem(e);
                let path = if field.is_empty() {
                    "spec.dataMasking".to_string()
                } else {
                    format!("spec.dataMasking.{field}")
                };
                r.push(at.clone().field(path), problem);
            }
        }
        for a in self.agents() {
            let at = a.location("Agent");
            r.server_refs(&at, "spec.mcpServers", a.spec.mcp_servers.as_ref());
        }
        let mut claimed: BTreeMap<&str, &str> = BTreeMap::new();
        for c in self.chains() {
            self.validate_chain(&mut r, c, &mut claimed);
        }
        r.errors
    }

    fn validate_defaults(&self, r: &mut Report<'_>) {
        let at = Location::default().object(ObjectRef::new("Defaults", "defaults"));
        r.provider_ref(&at, "llmProvider".into(), &self.defaults.llm_provider);
        let group = &self.defaults.alert_masking.pattern_group;
        if tarsy_masking::builtin::group(group).is_none() {
            let known: Vec<&str> = tarsy_masking::builtin::GROUPS
                .iter()
                .map(|(g, _)| *g)
                .collect();
            r.push(
                at.clone().field("alertMasking.patternGroup"),
                Problem::Invalid(format!(
                    "unknown masking group {group:?} (known: {})",
                    known.join(", ")
                )),
            );
        }
        if let Some(e) = &self.defaults.memory.embedding {
            let field = "memory.embedding.llmProvider";
            r.provider_ref(&at, field.into(), &e.llm_provider);
            // The LLM service embeds for these types; `scripted` gives the
            // deterministic test vectors.
            let usable = [
                ProviderType::Google,
                ProviderType::Openai,
                ProviderType::Scripted,
            ];
            if let Some(p) = self.llm_provider(&e.llm_provider)
                && !usable.contains(&p.spec.provider_type)
            {
                r.push(
                    at.clone().field(field),
                    Problem::Invalid(format!(
                        "LLM provider {:?} is of type {}, which has no embeddings (use a google or openai provider)",
                        e.llm_provider, p.spec.provider_type
                    )),
                );
            }
        }
        r.backend_fits(
            at.field("iterationStrategy"),
            self.defaults.iteration_strategy,
            &self.defaults.llm_provider,
        );
    }

    fn validate_chain<'a>(
        &self,
        r: &mut Report<'_>,
        c: &'a Named<ChainSpec>,
        claimed: &mut BTreeMap<&'a str, &'a str>,
    ) {
        let at = c.location("Chain");
        let spec = &c.spec;
        for (i, t) in spec.alert_types.iter().enumerate() {
            match claimed.get(t.as_str()) {
                Some(other) => r.push(
                    at.clone().field(format!("spec.alertTypes[{i}]")),
                    Problem::AlertTypeClaimed {
                        alert_type: t.clone(),
                        other: other.to_string(),
                    },
                ),
                None => {
                    claimed.insert(t, &c.name);
                }
            }
        }
        if let Some(p) = &spec.llm_provider {
            r.provider_ref(&at, "spec.llmProvider".into(), p);
        }
        if let Some(p) = &spec.executive_summary_provider {
            r.provider_ref(&at, "spec.executiveSummaryProvider".into(), p);
        }
        r.server_refs(&at, "spec.mcpServers", spec.mcp_servers.as_ref());
        r.duration(
            &at,
            "spec.iterationTimeout",
            spec.iteration_timeout.as_ref(),
        );
        r.duration(&at, "spec.sessionTimeout", spec.session_timeout.as_ref());
        if spec.stages.is_empty() {
            r.push(
                at.clone().field("spec.stages"),
                Problem::Empty("a chain needs at least one stage".into()),
            );
        }
        let mut stage_names = BTreeSet::new();
        for (si, stage) in spec.stages.iter().enumerate() {
            let sp = format!("spec.stages[{si}]");
            if !stage_names.insert(stage.name.as_str()) {
                r.push(
                    at.clone().field(format!("{sp}.name")),
                    Problem::Invalid(format!("duplicate stage name {:?}", stage.name)),
                );
            }
            let execs = self.stage_executions(stage);
            if execs.is_empty() {
                r.push(
                    at.clone().field(sp.clone()),
                    Problem::Empty("a stage needs agents or agent".into()),
                );
            }
            if let Some(agent) = &stage.agent {
                r.agent_ref(&at, format!("{sp}.agent"), agent);
            }
            let mut seen = BTreeSet::new();
            for (ai, sa) in stage.agents.iter().flatten().enumerate() {
                let ap = format!("{sp}.agents[{ai}]");
                r.agent_ref(&at, format!("{ap}.name"), &sa.name);
                // Executions are told apart by their labels (records,
                // prompts, AgentExecution names): one label per stage.
                let label = self.agent_label(&sa.name);
                if !seen.insert(label.clone()) {
                    let problem = if label == sa.name {
                        format!(
                            "agent {:?} is listed twice in the stage; use agent + replicas to run it several times",
                            sa.name
                        )
                    } else {
                        format!(
                            "agent {:?} is labelled {label:?} like another agent of the stage; use agent + replicas to run one agent several times, or give each its own displayName",
                            sa.name
                        )
                    };
                    r.push(
                        at.clone().field(format!("{ap}.name")),
                        Problem::Invalid(problem),
                    );
                }
                if let Some(p) = &sa.llm_provider {
                    r.provider_ref(&at, format!("{ap}.llmProvider"), p);
                }
                r.server_refs(&at, &format!("{ap}.mcpServers"), sa.mcp_servers.as_ref());
            }
            // Strategy checks on the resolved configuration of each execution.
            for (ei, exec) in execs.iter().enumerate() {
                let field = if stage.agents.is_some() {
                    format!("{sp}.agents[{ei}]")
                } else {
                    format!("{sp}.agent")
                };
                if let Ok(resolved) =
                    self.resolve_agent(spec, stage, &exec.stage_agent, &exec.display_name)
                {
                    if is_synthesis(resolved.iteration_strategy) {
                        r.push(
                            at.clone().field(field.clone()),
                            Problem::BadStrategy(format!(
                                "strategy {} only runs a stage's synthesis; use single-call for a tool-less agent",
                                resolved.iteration_strategy
                            )),
                        );
                    }
                    r.backend_fits(
                        at.clone().field(field),
                        resolved.iteration_strategy,
                        &resolved.llm_provider.name,
                    );
                }
                if stage.agents.as_ref().is_none_or(|a| a.len() <= 1) {
                    break; // replicas share one configuration
                }
            }
            if let Some(syn) = &stage.synthesis {
                let yp = format!("{sp}.synthesis");
                if let Some(a) = &syn.agent {
                    r.agent_ref(&at, format!("{yp}.agent"), a);
                }
                if let Some(p) = &syn.llm_provider {
                    r.provider_ref(&at, format!("{yp}.llmProvider"), p);
                }
            }
            if execs.len() > 1
                && let Ok(resolved) = self.resolve_synthesis(spec, stage)
            {
                let field = format!("{sp}.synthesis");
                if resolved.iteration_strategy.uses_tools() {
                    r.push(
                        at.clone().field(field.clone()),
                        Problem::BadStrategy(format!(
                            "synthesis agent {:?} resolves to strategy {}, which calls tools; synthesis must be tool-less (synthesis, synthesis-native-thinking or single-call)",
                            resolved.agent_name, resolved.iteration_strategy
                        )),
                    );
                }
                r.backend_fits(
                    at.clone().field(field),
                    resolved.iteration_strategy,
                    &resolved.llm_provider.name,
                );
            }
        }
        if let Some(chat) = &spec.chat {
            if let Some(a) = &chat.agent {
                r.agent_ref(&at, "spec.chat.agent".into(), a);
            }
            if let Some(p) = &chat.llm_provider {
                r.provider_ref(&at, "spec.chat.llmProvider".into(), p);
            }
            r.server_refs(&at, "spec.chat.mcpServers", chat.mcp_servers.as_ref());
        }
        if crate::resolve::chat_enabled(spec)
            && let Ok(resolved) = self.resolve_chat(&c.name, spec, None)
        {
            if is_synthesis(resolved.iteration_strategy) {
                r.push(
                    at.clone().field("spec.chat"),
                    Problem::BadStrategy(format!(
                        "chat resolves to strategy {}, which only runs a stage's synthesis",
                        resolved.iteration_strategy
                    )),
                );
            }
            r.backend_fits(
                at.clone().field("spec.chat"),
                resolved.iteration_strategy,
                &resolved.llm_provider.name,
            );
        }
        if let Some(scoring) = &spec.scoring {
            if let Some(a) = &scoring.agent {
                r.agent_ref(&at, "spec.scoring.agent".into(), a);
            }
            if let Some(p) = &scoring.llm_provider {
                r.provider_ref(&at, "spec.scoring.llmProvider".into(), p);
            }
        }
        if let Ok(resolved) = self.resolve_scoring(spec) {
            let field = "spec.scoring";
            if resolved.iteration_strategy.uses_tools() {
                r.push(
                    at.clone().field(field),
                    Problem::BadStrategy(format!(
                        "scoring agent {:?} resolves to strategy {}, which calls tools; a judge is tool-less (synthesis, synthesis-native-thinking or single-call)",
                        resolved.agent_name, resolved.iteration_strategy
                    )),
                );
            }
            r.backend_fits(
                at.clone().field(field),
                resolved.iteration_strategy,
                &resolved.llm_provider.name,
            );
        }
    }
}

/// Maps a masking error onto (field inside `dataMasking`, problem) without
/// repeating the server name the location already carries.
fn masking_problem(e: MaskingError) -> (String, Problem) {
    match e {
        MaskingError::UnknownGroup {
            field, name, known, ..
        } => (
            field,
            Problem::Invalid(format!("unknown pattern group {name:?} (known: {known})")),
        ),
        MaskingError::UnknownPattern {
            field, name, known, ..
        } => (
            field,
            Problem::Invalid(format!("unknown pattern {name:?} (known: {known})")),
        ),
        MaskingError::InvalidRegex {
            field,
            name,
            source,
            ..
        } => (
            field,
            Problem::Invalid(format!(
                "custom pattern {name:?} has an invalid regex: {source}"
            )),
        ),
        MaskingError::InvalidCustomPattern { field, reason, .. } => {
            (field, Problem::Invalid(reason))
        }
        other => (String::new(), Problem::Masking(other)),
    }
}
