//! The judge of a finished investigation, without IO: what it is asked,
//! in which words, and how its answers are read.
//!
//! A scoring execution is two turns. In the first, the judge reads the
//! whole investigation and assesses five [`Dimension`]s, each citing
//! evidence from the timeline, then gives a verdict on the outcome
//! ([`Outcome`]), the [`FailureTag`]s that apply and one score from 0 to
//! 100 inside the range the outcome sets. In the second it reports the
//! tools that were missing and the ones that were hard to use.
//!
//! The failure tags are one vocabulary ([`FAILURE_TAGS`]): the prompt is
//! written from it and the assessment is read back with it, so a tag the
//! judge is told about is a tag the parser knows. [`parse_assessment`]
//! refuses an answer without a usable score (no score, a score out of
//! 0–100, or one outside its verdict's range) rather than store half of it.

mod parse;
mod prompt;
mod vocabulary;

pub use parse::{Assessment, ParseError, ToolReport, parse_assessment, parse_tool_report};
pub use prompt::{TOOL_REPORT_REQUEST, assessment_request, judge_instructions};
pub use vocabulary::{DIMENSIONS, Dimension, FAILURE_TAGS, FailureTag, OUTCOMES, Outcome};
