//! The fixture format (version 1): one YAML file per MCP server, holding the
//! server's tools (name, description, input schema) and their recorded
//! results. See the crate's README for the format as users write it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The fixture format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// A JSON object (tool arguments, input schemas).
pub type JsonObject = Map<String, Value>;

/// One recorded MCP server: what `tarsy mcp-replay` serves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerFixture {
    /// Format version; must be [`FORMAT_VERSION`].
    pub version: u32,
    /// The MCP server's name (as TARSy's MCPServer resources name it).
    pub server: String,
    /// Where the recording comes from (free text, e.g. the session id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_from: Option<String>,
    /// Instructions the replay server announces at initialisation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// The tools, in the order `tools/list` returns them.
    #[serde(default)]
    pub tools: Vec<ToolFixture>,
}

/// One tool and its recorded results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolFixture {
    /// Tool name as the server lists it.
    pub name: String,
    /// Description shown to the model.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments (an object schema); default: any object.
    #[serde(default = "any_object_schema")]
    pub input_schema: JsonObject,
    /// Recorded calls, matched by arguments (see [`crate::matching`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<RecordedCall>,
    /// The result of a call no recorded call matches; without one such a
    /// call gets an error result naming the recorded arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<RecordedResult>,
}

/// A recorded call: the arguments it matches and the result it returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedCall {
    /// Arguments to match. By default every argument given here must be in
    /// the call with an equal value, and the call may carry more.
    #[serde(default)]
    pub arguments: JsonObject,
    /// Match only calls with exactly these arguments (no extra ones).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exact: bool,
    /// The result text.
    pub text: String,
    /// Whether the tool reported an error.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

/// A result without arguments: a tool's `default`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedResult {
    /// The result text.
    pub text: String,
    /// Whether the tool reported an error.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

/// `{"type": "object"}`: the schema of a tool whose schema was not recorded.
pub fn any_object_schema() -> JsonObject {
    let mut schema = Map::new();
    schema.insert("type".into(), Value::String("object".into()));
    schema
}

/// Why a fixture cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// A file or directory could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The path.
        path: PathBuf,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not valid YAML of the fixture format.
    #[error("{}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said (with line and column).
        message: String,
    },
    /// A file parses but breaks a rule of the format.
    #[error("{}: {at}: {problem}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where in the file (`tools[2].calls[0].arguments`).
        at: String,
        /// What is wrong.
        problem: String,
    },
    /// A directory holds no fixture file.
    #[error("{} holds no fixture file (*.yaml)", path.display())]
    Empty {
        /// The directory.
        path: PathBuf,
    },
    /// Two files record the same server.
    #[error("MCP server {server:?} is recorded twice: in {} and in {}", first.display(), second.display())]
    DuplicateServer {
        /// Server name.
        server: String,
        /// The first file.
        first: PathBuf,
        /// The second file.
        second: PathBuf,
    },
    /// The asked-for server is not in the fixture.
    #[error("{} has no fixture for MCP server {server:?} (it has: {available})", path.display())]
    UnknownServer {
        /// The fixture path.
        path: PathBuf,
        /// Server asked for.
        server: String,
        /// Servers present.
        available: String,
    },
    /// A directory with several servers was given without naming one.
    #[error("{} records several MCP servers ({available}): name one with --server", path.display())]
    AmbiguousServer {
        /// The fixture directory.
        path: PathBuf,
        /// Servers present.
        available: String,
    },
    /// A fixture could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The path.
        path: PathBuf,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// A fixture could not be serialized.
    #[error("cannot serialize the fixture of MCP server {server:?}: {message}")]
    Serialize {
        /// Server name.
        server: String,
        /// What failed.
        message: String,
    },
}

impl ServerFixture {
    /// An empty fixture of `server`.
    pub fn new(server: impl Into<String>) -> Self {
        Self {
            version: FORMAT_VERSION,
            server: server.into(),
            recorded_from: None,
            instructions: None,
            tools: Vec::new(),
        }
    }

    /// Parses and validates one fixture file's text; `path` is only used in
    /// error messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, FixtureError> {
        let parse_error = |e: serde_yaml::Error| FixtureError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        };
        // The version is read first, so that a file of a newer format says
        // so instead of failing on fields this build does not know.
        #[derive(Deserialize)]
        struct Version {
            version: Option<serde_yaml::Value>,
        }
        let raw: Version = serde_yaml::from_str(text).map_err(parse_error)?;
        let invalid = |at: &str, problem: String| FixtureError::Invalid {
            path: path.to_owned(),
            at: at.to_owned(),
            problem,
        };
        match &raw.version {
            None => {
                return Err(invalid(
                    "version",
                    format!("missing; this build reads version {FORMAT_VERSION}"),
                ));
            }
            Some(v) if v.as_u64() == Some(u64::from(FORMAT_VERSION)) => {}
            Some(v) => {
                let shown = serde_yaml::to_string(v)
                    .map(|s| s.trim().to_owned())
                    .unwrap_or_else(|_| "?".into());
                return Err(invalid(
                    "version",
                    format!(
                        "unsupported version {shown}; this build reads version {FORMAT_VERSION}"
                    ),
                ));
            }
        }
        // Parsed again from the text: errors then carry lines and columns.
        let fixture: ServerFixture = serde_yaml::from_str(text).map_err(parse_error)?;
        fixture.validate(path)?;
        Ok(fixture)
    }

    /// Reads and validates one fixture file.
    pub fn load(path: &Path) -> Result<Self, FixtureError> {
        let text = std::fs::read_to_string(path).map_err(|source| FixtureError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Checks the rules serde cannot: names present and unique, object
    /// schemas, and arguments whose values a call can match.
    pub fn validate(&self, path: &Path) -> Result<(), FixtureError> {
        let invalid = |at: String, problem: &str| FixtureError::Invalid {
            path: path.to_owned(),
            at,
            problem: problem.to_owned(),
        };
        if self.server.trim().is_empty() {
            return Err(invalid("server".into(), "must not be empty"));
        }
        let mut seen = BTreeSet::new();
        for (i, tool) in self.tools.iter().enumerate() {
            let at = format!("tools[{i}]");
            if tool.name.trim().is_empty() {
                return Err(invalid(format!("{at}.name"), "must not be empty"));
            }
            if !seen.insert(tool.name.as_str()) {
                return Err(invalid(
                    format!("{at}.name"),
                    &format!("tool {:?} is listed twice", tool.name),
                ));
            }
            match tool.input_schema.get("type") {
                Some(Value::String(t)) if t == "object" => {}
                _ => {
                    return Err(invalid(
                        format!("{at}.input_schema"),
                        "must be an object schema (type: object)",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The tool named `name`.
    pub fn tool(&self, name: &str) -> Option<&ToolFixture> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The fixture as YAML text, with a header comment.
    pub fn to_yaml(&self) -> Result<String, FixtureError> {
        let body = serde_yaml::to_string(self).map_err(|e| FixtureError::Serialize {
            server: self.server.clone(),
            message: e.to_string(),
        })?;
        Ok(format!(
            "# Recorded tools of MCP server {:?}, served by `tarsy mcp-replay`.\n\
             # Fixture format version {FORMAT_VERSION}: see operator/replay/README.md.\n{body}",
            self.server
        ))
    }
}

/// The fixture of every recorded server of one directory (or one file).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FixtureSet {
    /// Fixtures by server name.
    pub servers: BTreeMap<String, ServerFixture>,
    /// The file each server was read from.
    pub files: BTreeMap<String, PathBuf>,
}

fn is_fixture_file(path: &Path) -> bool {
    path.is_file()
        && matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        )
}

impl FixtureSet {
    /// Reads a fixture directory (every `*.yaml` / `*.yml` file in it is one
    /// server) or a single fixture file.
    pub fn load(path: &Path) -> Result<Self, FixtureError> {
        let read_error = |source| FixtureError::Read {
            path: path.to_owned(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(read_error)?;
        let files: Vec<PathBuf> = if meta.is_dir() {
            let mut files = Vec::new();
            for entry in std::fs::read_dir(path).map_err(read_error)? {
                let entry = entry.map_err(read_error)?;
                if is_fixture_file(&entry.path()) {
                    files.push(entry.path());
                }
            }
            files.sort();
            if files.is_empty() {
                return Err(FixtureError::Empty {
                    path: path.to_owned(),
                });
            }
            files
        } else {
            vec![path.to_owned()]
        };
        let mut set = FixtureSet::default();
        for file in files {
            let fixture = ServerFixture::load(&file)?;
            if let Some(first) = set.files.get(&fixture.server) {
                return Err(FixtureError::DuplicateServer {
                    server: fixture.server,
                    first: first.clone(),
                    second: file,
                });
            }
            set.files.insert(fixture.server.clone(), file);
            set.servers.insert(fixture.server.clone(), fixture);
        }
        Ok(set)
    }

    /// Server names, sorted.
    pub fn server_names(&self) -> Vec<&str> {
        self.servers.keys().map(String::as_str).collect()
    }

    /// The fixture of `server`, or the only one when `server` is `None`;
    /// `path` names the fixture in errors.
    pub fn select(
        &self,
        server: Option<&str>,
        path: &Path,
    ) -> Result<&ServerFixture, FixtureError> {
        let available = || self.server_names().join(", ");
        match server {
            Some(name) => self
                .servers
                .get(name)
                .ok_or_else(|| FixtureError::UnknownServer {
                    path: path.to_owned(),
                    server: name.to_owned(),
                    available: available(),
                }),
            None => {
                let mut all = self.servers.values();
                match (all.next(), all.next()) {
                    (Some(only), None) => Ok(only),
                    _ => Err(FixtureError::AmbiguousServer {
                        path: path.to_owned(),
                        available: available(),
                    }),
                }
            }
        }
    }

    /// Writes one `<server>.yaml` per server into `dir` (created when
    /// missing); returns the files written.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, FixtureError> {
        std::fs::create_dir_all(dir).map_err(|source| FixtureError::Write {
            path: dir.to_owned(),
            source,
        })?;
        let mut written = Vec::new();
        for fixture in self.servers.values() {
            let path = dir.join(format!("{}.yaml", file_stem(&fixture.server)));
            std::fs::write(&path, fixture.to_yaml()?).map_err(|source| FixtureError::Write {
                path: path.clone(),
                source,
            })?;
            written.push(path);
        }
        Ok(written)
    }
}

/// A file name for a server name: anything but ASCII letters, digits, `-`
/// and `_` becomes `_`, so that a name never escapes the directory.
fn file_stem(server: &str) -> String {
    let stem: String = server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if stem.is_empty() { "_".into() } else { stem }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ServerFixture, FixtureError> {
        ServerFixture::parse(text, Path::new("k8s.yaml"))
    }

    #[test]
    fn a_minimal_fixture_gets_defaults() {
        let f = parse("version: 1\nserver: k8s\ntools:\n- name: pods_list\n").unwrap();
        assert_eq!(f.tools[0].input_schema, any_object_schema());
        assert!(f.tools[0].calls.is_empty());
        assert!(f.tools[0].default.is_none());
    }

    #[test]
    fn versions_other_than_one_are_refused_by_name() {
        let e = parse("version: 2\nserver: k8s\nnew_field: x\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "k8s.yaml: version: unsupported version 2; this build reads version 1"
        );
        let e = parse("server: k8s\n").unwrap_err();
        assert!(e.to_string().contains("version: missing"), "{e}");
    }

    #[test]
    fn unknown_fields_and_bad_types_name_the_place() {
        let e = parse("version: 1\nserver: k8s\ntools:\n- name: a\n  reslt: x\n").unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("k8s.yaml: "), "{text}");
        assert!(text.contains("unknown field `reslt`"), "{text}");
        let e = parse("version: 1\nserver: k8s\ntools:\n- name: a\n  calls:\n  - arguments: [1]\n    text: x\n")
            .unwrap_err();
        assert!(e.to_string().contains("line"), "{e}");
    }

    #[test]
    fn duplicate_tools_and_non_object_schemas_are_refused() {
        let e = parse("version: 1\nserver: k8s\ntools:\n- name: a\n- name: a\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "k8s.yaml: tools[1].name: tool \"a\" is listed twice"
        );
        let e =
            parse("version: 1\nserver: k8s\ntools:\n- name: a\n  input_schema: {type: string}\n")
                .unwrap_err();
        assert_eq!(
            e.to_string(),
            "k8s.yaml: tools[0].input_schema: must be an object schema (type: object)"
        );
        let e = parse("version: 1\nserver: ' '\n").unwrap_err();
        assert_eq!(e.to_string(), "k8s.yaml: server: must not be empty");
    }

    #[test]
    fn yaml_round_trip_keeps_multi_line_text_readable() {
        let mut f = ServerFixture::new("kubernetes");
        f.tools.push(ToolFixture {
            name: "pods_log".into(),
            description: "Logs of a pod".into(),
            input_schema: any_object_schema(),
            calls: vec![RecordedCall {
                arguments: serde_json::from_str(r#"{"name": "web-0", "tail": 2}"#).unwrap(),
                exact: false,
                text: "line one\nline two\n".into(),
                is_error: false,
            }],
            default: None,
        });
        let yaml = f.to_yaml().unwrap();
        assert!(yaml.contains("text: |"), "{yaml}");
        assert_eq!(parse(&yaml).unwrap(), f);
    }

    #[test]
    fn file_stems_never_leave_the_directory() {
        assert_eq!(file_stem("../etc/passwd"), "___etc_passwd");
        assert_eq!(file_stem("kubernetes-server"), "kubernetes-server");
        assert_eq!(file_stem(""), "_");
    }
}
