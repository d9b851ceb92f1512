//! Construction errors. Masking itself never returns an error to callers:
//! tool results fail closed and alert data fails open.

/// Invalid masking configuration, naming the server and field at fault.
#[derive(Debug, thiserror::Error)]
pub enum MaskingError {
    /// A `patternGroups` entry names no built-in group.
    #[error(
        "MCP server '{server}': {field}: unknown pattern group '{name}' (known groups: {known})"
    )]
    UnknownGroup {
        /// MCP server name.
        server: String,
        /// Field path, e.g. `patternGroups[1]`.
        field: String,
        /// The unknown name.
        name: String,
        /// Comma-separated known names.
        known: String,
    },
    /// A `patterns` entry names no built-in pattern or code masker.
    #[error("MCP server '{server}': {field}: unknown pattern '{name}' (known patterns: {known})")]
    UnknownPattern {
        /// MCP server name.
        server: String,
        /// Field path, e.g. `patterns[0]`.
        field: String,
        /// The unknown name.
        name: String,
        /// Comma-separated known names.
        known: String,
    },
    /// A custom pattern's regex does not compile.
    #[error(
        "MCP server '{server}': {field}: custom pattern '{name}' has an invalid regex: {source}"
    )]
    InvalidRegex {
        /// MCP server name.
        server: String,
        /// Field path, e.g. `customPatterns[0].regex`.
        field: String,
        /// Custom pattern name.
        name: String,
        /// Compiler message.
        #[source]
        source: regex::Error,
    },
    /// A custom pattern is otherwise unusable (empty name, duplicate name,
    /// regex matching the empty string...).
    #[error("MCP server '{server}': {field}: {reason}")]
    InvalidCustomPattern {
        /// MCP server name.
        server: String,
        /// Field path, e.g. `customPatterns[2].name`.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// `alertMasking.patternGroup` names no built-in group.
    #[error("alert masking: patternGroup: unknown pattern group '{name}' (known groups: {known})")]
    UnknownAlertGroup {
        /// The unknown name.
        name: String,
        /// Comma-separated known names.
        known: String,
    },
    /// A built-in pattern failed to compile (a bug in this crate).
    #[error("built-in masking pattern '{name}' does not compile: {source}")]
    Builtin {
        /// Pattern name.
        name: String,
        /// Compiler message.
        #[source]
        source: regex::Error,
    },
}
