//! Investigation memory, without IO: what TARSy learns from a scored and
//! reviewed investigation and recalls in the next one.
//!
//! The store keeps memories, finds and ranks candidates; this crate holds
//! the rules both modes share:
//!
//! - [`reflect`]: what the reflector agent is told and shown after an
//!   investigation is scored (or reviewed), and how its answer (memories to
//!   create, reinforce, deprecate) is read, leniently;
//! - [`inject`]: how recalled memories are shown in an investigating
//!   agent's prompt, with their provenance;
//! - [`tools`]: the two built-in tools every investigating agent gets
//!   (recall memories, search past sessions): definitions, arguments,
//!   rendered results;
//! - [`embed`]: the [`Embedder`] seam (vectors for similarity, optional).

pub mod embed;
pub mod inject;
pub mod reflect;
pub mod review;
mod text;
pub mod tools;

pub use embed::{EmbedError, Embedder};
pub use inject::{MAX_INJECTED, SECTION_TITLE, ShownMemory, memory_section};
pub use reflect::{
    FEEDBACK_INSTRUCTIONS, KnownMemory, MemoryDraft, REFLECTOR_INSTRUCTIONS, Reflection,
    ReflectionError, ReflectionInput, ToolCallSummary, parse_reflection, reflection_prompt,
};
pub use review::{ReviewEffect, review_effect};
pub use tools::{
    BuiltinTool, PastSessionHit, RECALL_TOOL, RecallArgs, SEARCH_TOOL, SearchArgs, ToolArgsError,
    definitions, parse_recall_args, parse_search_args, render_past_sessions, render_recalled,
};
