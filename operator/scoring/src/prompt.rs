//! What the judge is told, written from the vocabulary so that the words
//! it is asked to use are the words the parser reads.

use std::fmt::Write as _;

use crate::vocabulary::{DIMENSIONS, FAILURE_TAGS, OUTCOMES};

/// The judge's instructions (a scoring agent's custom instructions).
pub fn judge_instructions() -> String {
    let mut s = String::from(
        "You review investigations that an SRE agent made of production alerts. You judge \
         the investigation, not the incident: whether its conclusion is right and whether \
         the evidence it gathered supports it. Be specific and cite the timeline (a tool \
         call, its arguments, what it returned, a sentence of the analysis) for every \
         judgement. Never invent evidence that the timeline does not contain.\n\n\
         Assess these dimensions, each in its own section:\n",
    );
    for d in DIMENSIONS {
        let _ = writeln!(s, "- {}: {}", d.heading(), d.question());
    }
    s.push_str("\nThen give a verdict on the outcome, which sets the range of the score:\n");
    for o in OUTCOMES {
        let range = o.range();
        let _ = writeln!(
            s,
            "- {}: {} (score {}–{})",
            o.word(),
            o.meaning(),
            range.start(),
            range.end()
        );
    }
    s.push_str("\nFailure tags (list every one that applies, or none):\n");
    for t in FAILURE_TAGS {
        let _ = writeln!(s, "- {}: {}", t.slug(), t.meaning());
    }
    s
}

/// The first turn: the investigation to judge, and the answer's format.
pub fn assessment_request(investigation: &str) -> String {
    let mut s = String::from("Judge this investigation.\n\n<investigation>\n");
    s.push_str(investigation.trim());
    s.push_str("\n</investigation>\n\nAnswer in exactly this form:\n\n");
    for d in DIMENSIONS {
        let _ = writeln!(
            s,
            "## {}\n<your assessment, citing the timeline>\n",
            d.heading()
        );
    }
    let verdicts: Vec<&str> = OUTCOMES.iter().map(|o| o.word()).collect();
    let _ = writeln!(s, "VERDICT: <{}>", verdicts.join(" | "));
    s.push_str("FAILURE TAGS: <comma-separated tags from the list, or none>\n");
    s.push_str("SCORE: <a whole number in the verdict's range>\n");
    s
}

/// The second turn: the tools that were missing or hard to use.
pub const TOOL_REPORT_REQUEST: &str = "Now report on the tools. Which tools were missing — a \
tool that would have answered a question the investigation could not answer? Which existing \
tools were hard to use — confusing arguments, output that was hard to read or too large, a \
description that misled? Answer in exactly this form, one line per tool, or `none` under a \
heading:\n\nMISSING TOOLS:\n- <what the tool would do>: <the question it would have \
answered>\n\nHARD TO USE:\n- <server.tool>: <what made it hard>\n";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FailureTag, Outcome};

    #[test]
    fn instructions_name_every_dimension_outcome_and_tag() {
        let text = judge_instructions();
        for d in DIMENSIONS {
            assert!(text.contains(d.heading()), "{d:?}");
        }
        assert!(
            text.contains(
                "- correct: correct and supported by the evidence gathered (score 60–100)"
            )
        );
        assert!(text.contains("(score 35–59)") && text.contains("(score 0–34)"));
        for t in FAILURE_TAGS {
            assert!(text.contains(&format!("- {}: ", t.slug())), "{t}");
        }
        let _ = (FailureTag::WrongConclusion, Outcome::Wrong);
    }

    #[test]
    fn the_request_carries_the_investigation_and_the_form() {
        let r = assessment_request("  stage 1: pods_list → OOMKilled  ");
        assert!(r.contains("<investigation>\nstage 1: pods_list → OOMKilled\n</investigation>"));
        assert!(r.contains("## Tool use\n"));
        assert!(r.contains("VERDICT: <correct | partial | wrong>"));
        assert!(r.ends_with("SCORE: <a whole number in the verdict's range>\n"));
    }
}
