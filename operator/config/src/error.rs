//! Configuration errors. Every error says where: the file (local mode), the
//! object (`Kind "name"`) and the field path, then what is wrong, e.g.
//! `chains.yaml: Chain "pod-health": spec.stages[2].agents[0].name: unknown agent "metrics-validator"`.

use std::fmt;

/// Where a configuration problem is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    /// File the object came from (local mode), as given to the loader.
    pub file: Option<String>,
    /// The object: kind and name.
    pub object: Option<ObjectRef>,
    /// Field path inside the object, e.g. `spec.stages[2].agents[0].name`.
    pub field: Option<String>,
}

/// Kind and name of a configuration object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    /// Kind, e.g. `Chain`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
}

impl ObjectRef {
    /// A reference to `kind` `name`.
    pub fn new(kind: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}", self.kind, self.name)
    }
}

impl Location {
    /// A location in `file` (no object yet).
    pub fn file(file: impl Into<String>) -> Self {
        Self {
            file: Some(file.into()),
            ..Self::default()
        }
    }

    /// This location narrowed to `object`.
    pub fn object(mut self, object: ObjectRef) -> Self {
        self.object = Some(object);
        self
    }

    /// This location narrowed to `field`.
    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if let Some(file) = &self.file {
            parts.push(file.clone());
        }
        if let Some(object) = &self.object {
            parts.push(object.to_string());
        }
        if let Some(field) = &self.field {
            parts.push(field.clone());
        }
        f.write_str(&parts.join(": "))
    }
}

/// What is wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    /// The file could not be read.
    #[error("cannot read: {0}")]
    Io(#[source] std::io::Error),
    /// The YAML does not parse.
    #[error("invalid YAML: {0}")]
    Yaml(String),
    /// `${VAR}` names an unset environment variable.
    #[error(
        "line {line}: environment variable {name:?} is not set (write $${{{name}}} for a literal)"
    )]
    UnsetVariable {
        /// Variable name.
        name: String,
        /// 1-based line.
        line: usize,
    },
    /// `${` without a closing `}` or with an invalid name.
    #[error("line {line}: malformed variable reference {text:?} (expected ${{NAME}})")]
    BadVariable {
        /// The offending text.
        text: String,
        /// 1-based line.
        line: usize,
    },
    /// A document has no `kind`, or a kind this loader does not take.
    #[error("{0}")]
    Kind(String),
    /// The object breaks its CRD schema or CEL rules (what the API server would reject).
    #[error("{0}")]
    Schema(String),
    /// Two objects of the same kind share a name.
    #[error("duplicate {kind} name {name:?} (first defined in {first})")]
    Duplicate {
        /// Kind.
        kind: String,
        /// Name.
        name: String,
        /// Where the first one is.
        first: String,
    },
    /// A reference to an agent that does not exist.
    #[error("unknown agent {name:?} (known: {known})")]
    UnknownAgent {
        /// The name.
        name: String,
        /// Known names, comma separated.
        known: String,
    },
    /// A reference to an MCP server that does not exist.
    #[error("unknown MCP server {name:?} (known: {known})")]
    UnknownMcpServer {
        /// The name.
        name: String,
        /// Known names, comma separated.
        known: String,
    },
    /// A reference to an LLM provider that does not exist.
    #[error("unknown LLM provider {name:?} (known: {known})")]
    UnknownLlmProvider {
        /// The name.
        name: String,
        /// Known names, comma separated.
        known: String,
    },
    /// An alert type claimed by two chains.
    #[error("alert type {alert_type:?} is also claimed by Chain {other:?}")]
    AlertTypeClaimed {
        /// The alert type.
        alert_type: String,
        /// The other chain.
        other: String,
    },
    /// A strategy that cannot run where it is used.
    #[error("{0}")]
    BadStrategy(String),
    /// A chain without stages, a stage without agents.
    #[error("{0}")]
    Empty(String),
    /// A bad duration.
    #[error(transparent)]
    Duration(#[from] crate::model::DurationError),
    /// A bad masking block.
    #[error(transparent)]
    Masking(#[from] tarsy_masking::MaskingError),
    /// A secret could not be resolved.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// Anything else, described.
    #[error("{0}")]
    Invalid(String),
}

/// One configuration error: where and what.
#[derive(Debug, thiserror::Error)]
#[error("{}", render(.location, .problem))]
pub struct ConfigError {
    /// Where.
    pub location: Location,
    /// What.
    #[source]
    pub problem: Problem,
}

fn render(location: &Location, problem: &Problem) -> String {
    let at = location.to_string();
    if at.is_empty() {
        problem.to_string()
    } else {
        format!("{at}: {problem}")
    }
}

impl ConfigError {
    /// An error at `location`.
    pub fn new(location: Location, problem: Problem) -> Self {
        Self { location, problem }
    }
}

/// Every error found in a configuration (validation reports all, not the first).
#[derive(Debug, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "{one}"),
            many => {
                write!(f, "{} configuration errors:", many.len())?;
                for e in many {
                    write!(f, "\n  {e}")?;
                }
                Ok(())
            }
        }
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        Self(vec![e])
    }
}

/// A secret the caller could not supply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// The Secret or key does not exist.
    #[error("secret {name:?} has no key {key:?}")]
    NotFound {
        /// Secret name.
        name: String,
        /// Key.
        key: String,
    },
    /// An environment variable holding a secret is unset.
    #[error("environment variable {0:?} is not set")]
    EnvUnset(String),
    /// The resolver failed otherwise.
    #[error("{0}")]
    Other(String),
}

/// An error of hierarchy resolution (a reference that does not resolve at
/// run time, e.g. after a configuration change).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// No such agent.
    #[error("agent {0:?} not found")]
    AgentNotFound(String),
    /// No such LLM provider.
    #[error("LLM provider {0:?} not found")]
    ProviderNotFound(String),
    /// No such MCP server.
    #[error("MCP server {0:?} not found")]
    McpServerNotFound(String),
    /// No such chain.
    #[error("chain {0:?} not found")]
    ChainNotFound(String),
    /// No chain handles the alert type.
    #[error("no chain handles alert type {0:?}")]
    NoChainForAlertType(String),
    /// Several chains claim the alert type.
    #[error("alert type {alert_type:?} is claimed by several chains: {chains}")]
    AmbiguousAlertType {
        /// The alert type.
        alert_type: String,
        /// The chains, comma separated.
        chains: String,
    },
    /// Chat is disabled for the chain.
    #[error("chat is disabled for chain {0:?}")]
    ChatDisabled(String),
    /// The MCP selection is invalid.
    #[error(transparent)]
    Selection(#[from] SelectionError),
    /// A duration field does not parse.
    #[error("{field}: {source}")]
    Duration {
        /// Field path.
        field: String,
        /// Parse error.
        #[source]
        source: crate::model::DurationError,
    },
    /// A secret could not be resolved.
    #[error("MCP server {server:?}: {field}: {source}")]
    Secret {
        /// Server.
        server: String,
        /// Field path.
        field: String,
        /// Cause.
        #[source]
        source: SecretError,
    },
    /// The MCP server cannot run in this placement.
    #[error("MCP server {server:?}: {reason}")]
    Placement {
        /// Server.
        server: String,
        /// Why.
        reason: String,
    },
}

/// A per-alert MCP selection that cannot be applied (`tarsy-core`'s: the MCP
/// client checks selections too).
pub use tarsy_core::SelectionError;
