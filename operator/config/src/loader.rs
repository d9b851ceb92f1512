//! Local mode: configuration from a directory of multi-document YAML
//! manifests of the cluster kinds (Chain, Agent, MCPServer, LLMProvider),
//! plus an optional `kind: Defaults` document, with `${VAR}` interpolation.
//! Each object is checked exactly as the API server would check it (its
//! name, CRD schema and CEL rules), then the whole set is cross-validated.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::defaults::{Defaults, DefaultsSpec};
use crate::error::{ConfigError, ConfigErrors, Location, ObjectRef, Problem};
use crate::interpolate::interpolate;
use crate::model::{AgentSpec, AlertSpec, ChainSpec, LLMProviderSpec, MCPServerSpec};
use crate::registry::{Config, Named, Origin};

/// Kind of the local-mode defaults document.
pub const DEFAULTS_KIND: &str = "Defaults";

/// Kinds a configuration directory may hold.
pub const CONFIG_KINDS: [&str; 5] = ["Chain", "Agent", "MCPServer", "LLMProvider", DEFAULTS_KIND];

/// One parsed, schema-checked configuration object.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigObject {
    /// A Chain.
    Chain(Named<ChainSpec>),
    /// An Agent.
    Agent(Named<AgentSpec>),
    /// An MCPServer (boxed: by far the largest spec).
    McpServer(Box<Named<MCPServerSpec>>),
    /// An LLMProvider.
    LlmProvider(Named<LLMProviderSpec>),
    /// The defaults document (boxed: the largest spec after MCPServer's).
    Defaults(Box<Named<DefaultsSpec>>),
}

impl ConfigObject {
    fn key(&self) -> (&'static str, &str) {
        match self {
            ConfigObject::Chain(n) => ("Chain", &n.name),
            ConfigObject::Agent(n) => ("Agent", &n.name),
            ConfigObject::McpServer(n) => ("MCPServer", &n.name),
            ConfigObject::LlmProvider(n) => ("LLMProvider", &n.name),
            ConfigObject::Defaults(n) => (DEFAULTS_KIND, &n.name),
        }
    }

    fn origin(&self) -> &Origin {
        match self {
            ConfigObject::Chain(n) => &n.origin,
            ConfigObject::Agent(n) => &n.origin,
            ConfigObject::McpServer(n) => &n.origin,
            ConfigObject::LlmProvider(n) => &n.origin,
            ConfigObject::Defaults(n) => &n.origin,
        }
    }
}

/// Reads the process environment (what `${VAR}` uses by default).
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Splits `text` (already interpolated) into JSON documents, skipping empty
/// ones. Each comes with its 0-based position.
fn documents(file: &str, text: &str) -> Result<Vec<Value>, ConfigErrors> {
    let mut docs = Vec::new();
    for (i, de) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let yaml: serde_yaml::Value = serde::Deserialize::deserialize(de).map_err(|e| {
            ConfigErrors::from(ConfigError::new(
                Location::file(file),
                Problem::Yaml(format!("document {}: {e}", i + 1)),
            ))
        })?;
        if yaml.is_null() {
            continue;
        }
        let json = serde_json::to_value(&yaml).map_err(|e| {
            ConfigErrors::from(ConfigError::new(
                Location::file(file),
                Problem::Yaml(format!("document {}: {e}", i + 1)),
            ))
        })?;
        docs.push(json);
    }
    Ok(docs)
}

fn interpolated(
    file: &str,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ConfigErrors> {
    interpolate(text, env).map_err(|problems| {
        ConfigErrors(
            problems
                .into_iter()
                .map(|p| ConfigError::new(Location::file(file), p))
                .collect(),
        )
    })
}

fn object_location(file: &str, doc: &Value) -> Location {
    let kind = doc
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("<no kind>");
    let name = doc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("<no name>");
    Location::file(file).object(ObjectRef::new(kind, name))
}

/// Checks a document against its kind's schema (structure + CEL) and
/// deserializes its spec.
fn spec<T: DeserializeOwned>(file: &str, doc: &Value) -> Result<T, Vec<ConfigError>> {
    let at = object_location(file, doc);
    crate::schema::validate_object(doc, None).map_err(|violations| {
        violations
            .into_iter()
            .map(|v| {
                let loc = if v.path.is_empty() {
                    at.clone()
                } else {
                    at.clone().field(v.path)
                };
                ConfigError::new(loc, Problem::Schema(v.message))
            })
            .collect::<Vec<_>>()
    })?;
    let spec = doc.get("spec").cloned().unwrap_or(Value::Null);
    serde_json::from_value(spec).map_err(|e| {
        vec![ConfigError::new(
            at.field("spec"),
            Problem::Schema(e.to_string()),
        )]
    })
}

fn name_of(doc: &Value) -> String {
    doc.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The object's name, if Kubernetes would accept it (the rule both modes
/// share, [`crate::model::object_name_problem`]), and its checked spec.
fn named_spec<T: DeserializeOwned>(
    file: &str,
    doc: &Value,
) -> Result<(String, T), Vec<ConfigError>> {
    let name = name_of(doc);
    let name_error = crate::model::object_name_problem(&name).map(|mut problem| {
        if doc.get("kind").and_then(Value::as_str) == Some("Agent") && !name.is_empty() {
            problem.push_str(&format!(
                " (prompts and records can keep calling it {name:?}: `spec.displayName: {name}`)"
            ));
        }
        ConfigError::new(
            object_location(file, doc).field("metadata.name"),
            Problem::Schema(problem),
        )
    });
    match (spec::<T>(file, doc), name_error) {
        (Ok(spec), None) => Ok((name, spec)),
        (Ok(_), Some(e)) => Err(vec![e]),
        (Err(errors), e) => Err(e.into_iter().chain(errors).collect()),
    }
}

fn parse_defaults(file: &str, doc: &Value) -> Result<ConfigObject, Vec<ConfigError>> {
    let at = object_location(file, doc);
    if doc.get("apiVersion").and_then(Value::as_str) != Some(crate::model::API_VERSION) {
        return Err(vec![ConfigError::new(
            at.field("apiVersion"),
            Problem::Schema(format!("expected {:?}", crate::model::API_VERSION)),
        )]);
    }
    let spec = doc
        .get("spec")
        .cloned()
        .unwrap_or(Value::Object(Default::default()));
    let spec: DefaultsSpec = serde_json::from_value(spec).map_err(|e| {
        vec![ConfigError::new(
            at.clone().field("spec"),
            Problem::Schema(e.to_string()),
        )]
    })?;
    let name = Some(name_of(doc))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "defaults".into());
    Ok(ConfigObject::Defaults(Box::new(Named::new(
        name,
        spec,
        Origin::File(file.to_string()),
    ))))
}

/// Parses the configuration objects of one file's text. `file` labels errors.
pub fn parse_config(
    file: &str,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<ConfigObject>, ConfigErrors> {
    let text = interpolated(file, text, env)?;
    let docs = documents(file, &text)?;
    let mut objects = Vec::new();
    let mut errors = Vec::new();
    let origin = || Origin::File(file.to_string());
    for doc in &docs {
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
        let parsed = match kind {
            "Chain" => named_spec::<ChainSpec>(file, doc)
                .map(|(n, c)| ConfigObject::Chain(Named::new(n, c, origin()))),
            "Agent" => named_spec::<AgentSpec>(file, doc)
                .map(|(n, a)| ConfigObject::Agent(Named::new(n, a, origin()))),
            "MCPServer" => named_spec::<MCPServerSpec>(file, doc)
                .map(|(n, m)| ConfigObject::McpServer(Box::new(Named::new(n, m, origin())))),
            "LLMProvider" => named_spec::<LLMProviderSpec>(file, doc)
                .map(|(n, p)| ConfigObject::LlmProvider(Named::new(n, p, origin()))),
            DEFAULTS_KIND => parse_defaults(file, doc),
            "Alert" | "AgentExecution" => Err(vec![ConfigError::new(
                object_location(file, doc),
                Problem::Kind(format!(
                    "{kind} is not configuration; submit alerts with `tarsy investigate FILE` or the API"
                )),
            )]),
            "" => Err(vec![ConfigError::new(
                object_location(file, doc).field("kind"),
                Problem::Kind("missing kind".into()),
            )]),
            other => Err(vec![ConfigError::new(
                object_location(file, doc).field("kind"),
                Problem::Kind(format!(
                    "unsupported kind {other:?}; expected one of: {}",
                    CONFIG_KINDS.join(", ")
                )),
            )]),
        };
        match parsed {
            Ok(o) => objects.push(o),
            Err(e) => errors.extend(e),
        }
    }
    if errors.is_empty() {
        Ok(objects)
    } else {
        Err(ConfigErrors(errors))
    }
}

/// Builds and validates a configuration from parsed objects (built-ins
/// included; an object named like a built-in replaces it). Defaults are the
/// built-ins, then the objects' Defaults document, then `overrides` (the
/// environment). Two objects of one kind with one name, or two Defaults
/// documents, are errors.
pub fn build_config(
    objects: Vec<ConfigObject>,
    overrides: &DefaultsSpec,
) -> Result<Config, ConfigErrors> {
    let mut errors = Vec::new();
    let mut seen: BTreeMap<(&'static str, String), Origin> = BTreeMap::new();
    let mut defaults_spec: Option<Named<DefaultsSpec>> = None;
    let mut config = Config::builtin(Defaults::default());
    for object in objects {
        let (kind, name) = object.key();
        let key = if kind == DEFAULTS_KIND {
            (kind, String::new())
        } else {
            (kind, name.to_string())
        };
        if let Some(first) = seen.get(&key) {
            let at = match object.origin() {
                Origin::File(f) => Location::file(f.clone()),
                _ => Location::default(),
            }
            .object(ObjectRef::new(kind, name))
            .field("metadata.name");
            errors.push(ConfigError::new(
                at,
                Problem::Duplicate {
                    kind: kind.to_string(),
                    name: name.to_string(),
                    first: first.to_string(),
                },
            ));
            continue;
        }
        seen.insert(key, object.origin().clone());
        match object {
            ConfigObject::Chain(c) => {
                config.insert_chain(c);
            }
            ConfigObject::Agent(a) => {
                config.insert_agent(a);
            }
            ConfigObject::McpServer(m) => {
                config.insert_mcp_server(*m);
            }
            ConfigObject::LlmProvider(p) => {
                config.insert_llm_provider(p);
            }
            ConfigObject::Defaults(d) => defaults_spec = Some(*d),
        }
    }
    if let Some(d) = &defaults_spec
        && let Err(problems) = config.defaults.apply(&d.spec)
    {
        for (field, problem) in problems {
            errors.push(ConfigError::new(
                d.location(DEFAULTS_KIND).field(format!("spec.{field}")),
                problem,
            ));
        }
    }
    if let Err(problems) = config.defaults.apply(overrides) {
        for (field, problem) in problems {
            errors.push(ConfigError::new(
                Location::default()
                    .object(ObjectRef::new(DEFAULTS_KIND, "environment"))
                    .field(field),
                problem,
            ));
        }
    }
    errors.extend(config.validate());
    if errors.is_empty() {
        Ok(config)
    } else {
        Err(ConfigErrors(errors))
    }
}

fn read(path: &Path, label: &str) -> Result<String, ConfigErrors> {
    std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(Location::file(label), Problem::Io(e)).into())
}

/// The `*.yaml` / `*.yml` files of `dir`, sorted by name (not recursive).
pub fn manifest_files(dir: &Path) -> Result<Vec<PathBuf>, ConfigErrors> {
    let label = dir.display().to_string();
    let entries = std::fs::read_dir(dir).map_err(|e| {
        ConfigErrors::from(ConfigError::new(Location::file(&label), Problem::Io(e)))
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| {
            ConfigErrors::from(ConfigError::new(Location::file(&label), Problem::Io(e)))
        })?;
        let path = entry.path();
        let is_yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
        if is_yaml && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

fn load_paths(
    paths: Vec<(PathBuf, String)>,
    overrides: &DefaultsSpec,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigErrors> {
    let mut objects = Vec::new();
    let mut errors = Vec::new();
    for (path, label) in paths {
        match read(&path, &label).and_then(|text| parse_config(&label, &text, env)) {
            Ok(o) => objects.extend(o),
            Err(e) => errors.extend(e.0),
        }
    }
    if !errors.is_empty() {
        return Err(ConfigErrors(errors));
    }
    build_config(objects, overrides)
}

/// Loads the configuration directory `dir`, using `env` for `${VAR}` and
/// `overrides` on top of the directory's defaults. Errors name files
/// relative to `dir`.
pub fn load_dir_with(
    dir: &Path,
    overrides: &DefaultsSpec,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigErrors> {
    let paths = manifest_files(dir)?
        .into_iter()
        .map(|p| {
            let label = p.strip_prefix(dir).unwrap_or(&p).display().to_string();
            (p, label)
        })
        .collect();
    load_paths(paths, overrides, env)
}

/// Loads `files` (labelled as given) like [`load_dir_with`].
pub fn load_files_with(
    files: &[PathBuf],
    overrides: &DefaultsSpec,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigErrors> {
    let paths = files
        .iter()
        .map(|p| (p.clone(), p.display().to_string()))
        .collect();
    load_paths(paths, overrides, env)
}

/// Loads the configuration directory with the process environment, the
/// `TARSY_*` default overrides included (see [`crate::defaults`]).
pub fn load_dir(dir: &Path) -> Result<Config, ConfigErrors> {
    let overrides = DefaultsSpec::from_env(&process_env).map_err(|errs| {
        ConfigErrors(
            errs.into_iter()
                .map(|(l, p)| ConfigError::new(l, p))
                .collect(),
        )
    })?;
    load_dir_with(dir, &overrides, &process_env)
}

/// Parses the Alert documents in `text` (schema + CEL checked).
fn parse_alerts(
    file: &str,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Named<AlertSpec>>, ConfigErrors> {
    let text = interpolated(file, text, env)?;
    let mut alerts = Vec::new();
    let mut errors = Vec::new();
    for doc in documents(file, &text)? {
        match doc.get("kind").and_then(Value::as_str) {
            // An alert file may leave its name out (a cluster would then
            // need generateName); a name it gives follows the one rule.
            Some("Alert") if name_of(&doc).is_empty() => match spec::<AlertSpec>(file, &doc) {
                Ok(a) => alerts.push(Named::new("", a, Origin::File(file.to_string()))),
                Err(e) => errors.extend(e),
            },
            Some("Alert") => match named_spec::<AlertSpec>(file, &doc) {
                Ok((n, a)) => alerts.push(Named::new(n, a, Origin::File(file.to_string()))),
                Err(e) => errors.extend(e),
            },
            other => errors.push(ConfigError::new(
                object_location(file, &doc).field("kind"),
                Problem::Kind(format!(
                    "expected an Alert, found {:?}",
                    other.unwrap_or_default()
                )),
            )),
        }
    }
    if errors.is_empty() {
        Ok(alerts)
    } else {
        Err(ConfigErrors(errors))
    }
}

/// Reads a file holding exactly one Alert document (`tarsy investigate FILE`).
pub fn load_alert_file(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Named<AlertSpec>, ConfigErrors> {
    let label = path.display().to_string();
    let text = read(path, &label)?;
    let mut alerts = parse_alerts(&label, &text, env)?;
    match alerts.len() {
        1 => Ok(alerts.remove(0)),
        n => Err(ConfigError::new(
            Location::file(label),
            Problem::Invalid(format!("expected exactly one Alert, found {n}")),
        )
        .into()),
    }
}
