//! Stage context: previous stages' final analyses for the next stage.

pub use tarsy_core::StageResult;

/// Opens the previous-stages block.
pub const CHAIN_CONTEXT_START: &str = "<!-- CHAIN_CONTEXT_START -->";
/// Closes the previous-stages block.
pub const CHAIN_CONTEXT_END: &str = "<!-- CHAIN_CONTEXT_END -->";
/// Opens the parallel-investigations block of a synthesis prompt.
pub const STAGE_CONTEXT_START: &str = "<!-- STAGE_CONTEXT_START -->";
/// Closes the parallel-investigations block of a synthesis prompt.
pub const STAGE_CONTEXT_END: &str = "<!-- STAGE_CONTEXT_END -->";
/// Opens the session history block of a chat prompt.
pub const INVESTIGATION_HISTORY_START: &str = "<!-- INVESTIGATION_HISTORY_START -->";
/// Closes the session history block of a chat prompt.
pub const INVESTIGATION_HISTORY_END: &str = "<!-- INVESTIGATION_HISTORY_END -->";

/// Formats completed stages for the next stage's prompt: each stage's name
/// and final analysis, in order, inside the chain context markers. Empty
/// when there are no stages (the first stage has no previous context).
pub fn build_stage_context(stages: &[StageResult]) -> String {
    if stages.is_empty() {
        return String::new();
    }
    let mut out = format!("{CHAIN_CONTEXT_START}\n\n");
    for (i, stage) in stages.iter().enumerate() {
        out.push_str(&format!(
            "### Stage {}: {}\n\n",
            i + 1,
            escape_comment_markers(stage.stage_name.trim())
        ));
        let analysis = stage.final_analysis.trim();
        if analysis.is_empty() {
            out.push_str("(No final analysis produced)");
        } else {
            out.push_str(&escape_comment_markers(analysis));
        }
        out.push_str("\n\n");
    }
    out.push_str(CHAIN_CONTEXT_END);
    out
}

/// Neutralizes HTML comment delimiters in content placed inside a context
/// block: `<!--` becomes `&lt;!--` and `-->` becomes `--&gt;`. Readable for
/// the model, but never a block marker.
pub fn escape_comment_markers(text: &str) -> String {
    if !text.contains("<!--") && !text.contains("-->") {
        return text.to_string();
    }
    text.replace("<!--", "&lt;!--").replace("-->", "--&gt;")
}
