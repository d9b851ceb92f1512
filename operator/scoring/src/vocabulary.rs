//! The words of a score: dimensions, outcomes and failure tags.

use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};

/// What the judge assesses, each in its own section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    /// Whether the conclusion is right.
    Outcome,
    /// Whether the conclusion rests on what the tools returned.
    Evidence,
    /// Whether the right tools were called, with the right arguments.
    ToolUse,
    /// Whether each step follows from the previous ones.
    Reasoning,
    /// Whether anything the alert called for was left out.
    Completeness,
}

/// Every dimension, in the order the judge writes them.
pub const DIMENSIONS: [Dimension; 5] = [
    Dimension::Outcome,
    Dimension::Evidence,
    Dimension::ToolUse,
    Dimension::Reasoning,
    Dimension::Completeness,
];

impl Dimension {
    /// The section heading the judge writes (`## Tool use`).
    pub fn heading(self) -> &'static str {
        match self {
            Dimension::Outcome => "Outcome",
            Dimension::Evidence => "Evidence",
            Dimension::ToolUse => "Tool use",
            Dimension::Reasoning => "Reasoning",
            Dimension::Completeness => "Completeness",
        }
    }

    /// What the judge is asked to look at.
    pub fn question(self) -> &'static str {
        match self {
            Dimension::Outcome => {
                "Is the root cause right, and does the conclusion answer the alert?"
            }
            Dimension::Evidence => {
                "Does every claim rest on something a tool returned? Quote or point to it."
            }
            Dimension::ToolUse => {
                "Were the available tools the right ones, called with sensible arguments, \
                 and were their results read correctly?"
            }
            Dimension::Reasoning => {
                "Does each step follow from what was seen before it; were alternatives ruled out?"
            }
            Dimension::Completeness => {
                "Was anything the alert or the runbook called for left unexamined?"
            }
        }
    }
}

/// The judge's verdict on the outcome, which sets the range of the score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Correct and supported by evidence.
    Correct,
    /// Partly correct, or correct but weakly supported.
    Partial,
    /// Wrong, or not supported at all.
    Wrong,
}

/// Every outcome, best first.
pub const OUTCOMES: [Outcome; 3] = [Outcome::Correct, Outcome::Partial, Outcome::Wrong];

impl Outcome {
    /// The word the judge writes after `VERDICT:`.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Correct => "correct",
            Outcome::Partial => "partial",
            Outcome::Wrong => "wrong",
        }
    }

    /// What the verdict means.
    pub fn meaning(self) -> &'static str {
        match self {
            Outcome::Correct => "correct and supported by the evidence gathered",
            Outcome::Partial => "partly correct, or correct but weakly supported",
            Outcome::Wrong => "wrong, or not supported by the evidence",
        }
    }

    /// The scores this verdict allows.
    pub fn range(self) -> RangeInclusive<u8> {
        match self {
            Outcome::Correct => 60..=100,
            Outcome::Partial => 35..=59,
            Outcome::Wrong => 0..=34,
        }
    }

    /// The verdict whose range holds `score` (0–100).
    pub fn for_score(score: u8) -> Outcome {
        OUTCOMES
            .into_iter()
            .find(|o| o.range().contains(&score))
            .unwrap_or(Outcome::Correct)
    }
}

/// Why an investigation fell short: the one vocabulary the prompt is
/// written with and the assessment is read with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureTag {
    /// It concluded before the evidence was in.
    PrematureConclusion,
    /// A tool that would have settled a question was available and not used.
    MissedAvailableTool,
    /// It sounded more certain than its evidence allows.
    UnsupportedConfidence,
    /// It left gaps in the evidence it gathered.
    IncompleteEvidence,
    /// It cited evidence no tool returned.
    HallucinatedEvidence,
    /// Its conclusion is wrong.
    WrongConclusion,
}

/// Every failure tag.
pub const FAILURE_TAGS: [FailureTag; 6] = [
    FailureTag::PrematureConclusion,
    FailureTag::MissedAvailableTool,
    FailureTag::UnsupportedConfidence,
    FailureTag::IncompleteEvidence,
    FailureTag::HallucinatedEvidence,
    FailureTag::WrongConclusion,
];

impl FailureTag {
    /// The tag as written and stored (`missed-available-tool`).
    pub fn slug(self) -> &'static str {
        match self {
            FailureTag::PrematureConclusion => "premature-conclusion",
            FailureTag::MissedAvailableTool => "missed-available-tool",
            FailureTag::UnsupportedConfidence => "unsupported-confidence",
            FailureTag::IncompleteEvidence => "incomplete-evidence",
            FailureTag::HallucinatedEvidence => "hallucinated-evidence",
            FailureTag::WrongConclusion => "wrong-conclusion",
        }
    }

    /// When the tag applies (shown to the judge and in the dashboard).
    pub fn meaning(self) -> &'static str {
        match self {
            FailureTag::PrematureConclusion => "it concluded before the evidence was in",
            FailureTag::MissedAvailableTool => {
                "a tool that would have settled a question was available and not used"
            }
            FailureTag::UnsupportedConfidence => "it sounded more certain than its evidence allows",
            FailureTag::IncompleteEvidence => "it left gaps in the evidence it gathered",
            FailureTag::HallucinatedEvidence => "it cited evidence that no tool returned",
            FailureTag::WrongConclusion => "its conclusion is wrong",
        }
    }

    /// The tag whose slug is `slug`, ignoring case, spaces for hyphens and
    /// surrounding punctuation (`Missed available tool` counts).
    pub fn from_slug(slug: &str) -> Option<FailureTag> {
        let normal: String = slug
            .trim()
            .trim_matches(|c: char| !c.is_alphanumeric())
            .chars()
            .map(|c| match c {
                ' ' | '_' => '-',
                c => c.to_ascii_lowercase(),
            })
            .collect();
        FAILURE_TAGS.into_iter().find(|t| t.slug() == normal)
    }
}

impl std::fmt::Display for FailureTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.slug())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_ranges_cover_0_to_100_without_overlap() {
        for score in 0..=100u8 {
            let holding: Vec<_> = OUTCOMES
                .into_iter()
                .filter(|o| o.range().contains(&score))
                .collect();
            assert_eq!(holding.len(), 1, "score {score}: {holding:?}");
            assert_eq!(Outcome::for_score(score), holding[0]);
        }
    }

    #[test]
    fn tags_read_back_from_their_slugs_and_phrases() {
        for tag in FAILURE_TAGS {
            assert_eq!(FailureTag::from_slug(tag.slug()), Some(tag));
            let phrase = tag.slug().replace('-', " ").to_uppercase();
            assert_eq!(FailureTag::from_slug(&format!("`{phrase}`,")), Some(tag));
        }
        assert_eq!(FailureTag::from_slug("none"), None);
    }
}
