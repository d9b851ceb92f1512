//! `tarsy eval`: runs investigation cases and grades them.
//!
//! A case is a directory with `case.yaml` (the expected findings), an alert,
//! a recorded fixture (what the MCP servers answer, see `tarsy-replay`) and,
//! for scripted providers, canned answers. Each case runs in a private
//! local mode (in-memory SQLite) against replay MCP servers served in
//! process, with the configured chain and the chosen LLM provider; the
//! analysis is graded by keyword/regex statements, the tools it called and,
//! optionally, an LLM judge. With the scripted provider the run is a smoke
//! test of the whole path; with a real provider it measures quality.
//!
//! | module | what |
//! |---|---|
//! | [`case`] | the case format and its discovery |
//! | [`config`] | the configuration cases run with (servers the cases provide) |
//! | [`rubric`] | expected findings and their matching |
//! | [`run`] | running and grading one case |
//! | [`report`] | per-case lines, summary table, JSON |

pub mod case;
pub mod config;
pub mod error;
pub mod report;
pub mod rubric;
pub mod run;

use std::path::Path;

pub use case::{Case, discover};
pub use config::load_config;
pub use error::EvalError;
pub use report::{Report, Summary, case_lines};
pub use run::{CaseResult, CaseScore, EvalOptions, run_case};

/// Loads every case under `dir` (all of them first, so a malformed case
/// stops the run before anything runs) and keeps those whose name contains
/// one of `only` (all when empty).
pub fn load_cases(dir: &Path, only: &[String]) -> Result<Vec<Case>, EvalError> {
    let mut cases = Vec::new();
    for path in discover(dir)? {
        let case = Case::load(&path)?;
        if only.is_empty() || only.iter().any(|o| case.name.contains(o.as_str())) {
            cases.push(case);
        }
    }
    if cases.is_empty() {
        return Err(EvalError::Case {
            case: only.join(", "),
            problem: format!("no case of {} matches", dir.display()),
        });
    }
    Ok(cases)
}

/// Runs `cases` one after the other; `on_case` sees each result as it
/// comes.
pub async fn run_cases(
    cases: &[Case],
    options: &EvalOptions,
    mut on_case: impl FnMut(&CaseResult),
) -> Report {
    let mut results = Vec::new();
    for case in cases {
        let result = run_case(case, options).await;
        on_case(&result);
        results.push(result);
    }
    Report::new(results)
}
