//! An evaluation case on disk: `case.yaml` (what is expected), the alert,
//! the recorded fixture its tools answer from, and the canned answers a
//! scripted provider replays.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tarsy_replay::FixtureSet;

use crate::error::EvalError;
use crate::rubric::{Rubric, RubricSpec};

/// The file that makes a directory a case.
pub const CASE_FILE: &str = "case.yaml";

/// `case.yaml` as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    /// Case name (default: the directory name).
    #[serde(default)]
    pub name: Option<String>,
    /// What the case is about (shown nowhere but kept with the case).
    #[serde(default)]
    pub description: Option<String>,
    /// The Alert manifest, relative to the case directory.
    #[serde(default = "default_alert")]
    pub alert: String,
    /// The fixture directory, relative to the case directory.
    #[serde(default = "default_fixture")]
    pub fixture: String,
    /// Canned answers for scripted providers, relative to the case
    /// directory (default `script.yaml` when it exists).
    #[serde(default)]
    pub script: Option<String>,
    /// Run this chain instead of the one the alert type selects.
    #[serde(default)]
    pub chain: Option<String>,
    /// The expected findings.
    pub expect: RubricSpec,
}

fn default_alert() -> String {
    "alert.yaml".into()
}

fn default_fixture() -> String {
    "fixture".into()
}

/// A loaded, checked case.
#[derive(Debug, Clone)]
pub struct Case {
    /// Case name.
    pub name: String,
    /// The case directory.
    pub dir: PathBuf,
    /// The alert to submit.
    pub alert: tarsy_config::Named<tarsy_config::model::AlertSpec>,
    /// The fixture directory.
    pub fixture_dir: PathBuf,
    /// The recorded servers.
    pub fixture: FixtureSet,
    /// Canned answers for scripted providers, when the case has them.
    pub script: Option<PathBuf>,
    /// An explicit chain.
    pub chain: Option<String>,
    /// The compiled expectations.
    pub rubric: Rubric,
}

impl Case {
    /// Loads the case in `dir`; every error names the case and the file.
    pub fn load(dir: &Path) -> Result<Self, EvalError> {
        let dir_name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| dir.display().to_string());
        let invalid = |problem: String| EvalError::Case {
            case: dir_name.clone(),
            problem,
        };
        let file = dir.join(CASE_FILE);
        let text = std::fs::read_to_string(&file)
            .map_err(|e| invalid(format!("cannot read {}: {e}", file.display())))?;
        let spec: CaseSpec =
            serde_yaml::from_str(&text).map_err(|e| invalid(format!("{}: {e}", file.display())))?;
        let name = spec.name.clone().unwrap_or_else(|| dir_name.clone());
        let invalid = |problem: String| EvalError::Case {
            case: name.clone(),
            problem,
        };
        let alert_path = dir.join(&spec.alert);
        let alert = tarsy_config::load_alert_file(&alert_path, &|_| None).map_err(|errors| {
            let list: Vec<String> = errors.0.iter().map(ToString::to_string).collect();
            invalid(format!(
                "{} is not a valid Alert: {}",
                alert_path.display(),
                list.join("; ")
            ))
        })?;
        let fixture_dir = dir.join(&spec.fixture);
        let fixture =
            FixtureSet::load(&fixture_dir).map_err(|e| invalid(format!("fixture: {e}")))?;
        let script = match &spec.script {
            Some(s) => {
                let path = dir.join(s);
                if !path.is_file() {
                    return Err(invalid(format!("script {} does not exist", path.display())));
                }
                Some(path)
            }
            None => Some(dir.join("script.yaml")).filter(|p| p.is_file()),
        };
        let rubric =
            Rubric::compile(&spec.expect).map_err(|e| invalid(format!("{CASE_FILE}: {e}")))?;
        Ok(Case {
            name,
            dir: dir.to_owned(),
            alert,
            fixture_dir,
            fixture,
            script,
            chain: spec.chain,
            rubric,
        })
    }
}

/// The case directories under `dir`: `dir` itself when it holds a
/// `case.yaml`, else its subdirectories that do (in name order), looking
/// into `dir/cases` when it exists.
pub fn discover(dir: &Path) -> Result<Vec<PathBuf>, EvalError> {
    if dir.join(CASE_FILE).is_file() {
        return Ok(vec![dir.to_owned()]);
    }
    let root = if dir.join("cases").is_dir() {
        dir.join("cases")
    } else {
        dir.to_owned()
    };
    let read = |e: std::io::Error| EvalError::Io {
        path: root.clone(),
        source: e,
    };
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(&root).map_err(read)? {
        let path = entry.map_err(read)?.path();
        if path.join(CASE_FILE).is_file() {
            cases.push(path);
        }
    }
    cases.sort();
    if cases.is_empty() {
        return Err(EvalError::NoCases(root));
    }
    Ok(cases)
}
