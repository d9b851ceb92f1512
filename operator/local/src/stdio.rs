//! How local mode runs stdio MCP servers: relative paths start from the
//! configuration directory (the servers run there), the command `tarsy` is
//! the running TARSy executable (so a manifest can serve recorded fixtures
//! with `tarsy mcp-replay` and nothing installed), and a command that does
//! not exist stops local mode before anything runs, with one line saying
//! which server, which command, and what to do about it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tarsy_config::{Config, Origin};
use tarsy_core::{McpServerConfig, McpTransport};

/// The command that names the running TARSy executable.
pub const SELF_COMMAND: &str = "tarsy";

/// A stdio server whose command cannot be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct MissingCommand {
    /// Server name.
    pub server: String,
    /// The command as configured.
    pub command: String,
    /// Whether the command was looked up on PATH (no `/` in it).
    pub on_path: bool,
    /// The manifest file that defines the server (`None`: built in).
    pub defined_in: Option<String>,
    /// Chains that use the server.
    pub chains: Vec<String>,
}

impl MissingCommand {
    fn message(&self) -> String {
        let problem = if self.on_path {
            format!("command {:?} is not on PATH", self.command)
        } else {
            format!(
                "command {:?} does not exist or is not executable",
                self.command
            )
        };
        let install = match &self.defined_in {
            Some(file) => format!("install it (see {file}, which defines the server)"),
            None if self.on_path => format!("install it so that {:?} is on PATH", self.command),
            None => "install it there".to_owned(),
        };
        let remove = match self.chains.as_slice() {
            [] => format!("remove {:?} from the configuration", self.server),
            [one] => format!("remove {:?} from chain {one:?}", self.server),
            many => format!(
                "remove {:?} from chains {}",
                self.server,
                many.iter()
                    .map(|c| format!("{c:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        format!(
            "MCP server {:?} cannot start: {problem}; {install}, or {remove}",
            self.server
        )
    }
}

/// Applies local mode's rules to a stdio server: runs in `config_dir`,
/// resolves a relative command path from there, and runs `tarsy_exe` for
/// the command [`SELF_COMMAND`] when it is known.
pub fn localize(
    mut server: McpServerConfig,
    config_dir: &Path,
    tarsy_exe: Option<&Path>,
) -> McpServerConfig {
    if let McpTransport::Stdio { command, cwd, .. } = &mut server.transport {
        let dir = std::path::absolute(config_dir).unwrap_or_else(|_| config_dir.to_owned());
        if command == SELF_COMMAND {
            if let Some(exe) = tarsy_exe {
                *command = exe.display().to_string();
            }
        } else if command.contains('/') && Path::new(command.as_str()).is_relative() {
            *command = dir.join(command.as_str()).display().to_string();
        }
        *cwd = Some(dir);
    }
    server
}

/// Finds every used stdio server whose command cannot be started, in name
/// order; manifest files are named from `config_dir`.
pub fn missing_commands(
    config: &Config,
    config_dir: &Path,
    servers: &BTreeMap<String, McpServerConfig>,
    used: &[String],
) -> Vec<MissingCommand> {
    let mut missing = Vec::new();
    for name in used {
        let Some(McpTransport::Stdio {
            command, env, cwd, ..
        }) = servers.get(name).map(|s| &s.transport)
        else {
            continue;
        };
        let path_var = env
            .get("PATH")
            .cloned()
            .or_else(|| std::env::var("PATH").ok())
            .unwrap_or_default();
        if command_exists(command, cwd.as_deref(), &path_var) {
            continue;
        }
        let defined_in = config.mcp_server(name).and_then(|s| match &s.origin {
            // The loader names files relative to the directory it read.
            Origin::File(file) if Path::new(file).is_relative() => {
                Some(config_dir.join(file).display().to_string())
            }
            Origin::File(file) => Some(file.clone()),
            Origin::Builtin | Origin::Cluster => None,
        });
        missing.push(MissingCommand {
            server: name.clone(),
            command: original_command(config, name).unwrap_or_else(|| command.clone()),
            on_path: !command.contains('/'),
            defined_in,
            chains: chains_using(config, name),
        });
    }
    missing
}

/// The command as the manifest wrote it (before relative paths were
/// resolved), for messages.
fn original_command(config: &Config, server: &str) -> Option<String> {
    config
        .mcp_server(server)
        .and_then(|s| s.spec.stdio.as_ref())
        .map(|s| s.command.clone())
}

/// The chains whose agents, stages or chat use `server`.
pub fn chains_using(config: &Config, server: &str) -> Vec<String> {
    config
        .chains()
        .filter(|chain| {
            let spec = &chain.spec;
            spec.mcp_servers.iter().flatten().any(|s| s == server)
                || config
                    .aggregate_chain_mcp_servers(spec)
                    .iter()
                    .any(|s| s == server)
                || spec
                    .chat
                    .as_ref()
                    .and_then(|c| c.mcp_servers.as_ref())
                    .is_some_and(|list| list.iter().any(|s| s == server))
        })
        .map(|chain| chain.name.clone())
        .collect()
}

/// Whether `command` names an executable file: a path (relative ones from
/// `cwd`), or a name found in one of `path_var`'s directories.
pub fn command_exists(command: &str, cwd: Option<&Path>, path_var: &str) -> bool {
    if command.contains('/') {
        let path = Path::new(command);
        let path: PathBuf = match cwd {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path.to_owned(),
        };
        return is_executable(&path);
    }
    !command.is_empty()
        && std::env::split_paths(path_var)
            .filter(|dir| !dir.as_os_str().is_empty())
            .any(|dir| is_executable(&dir.join(command)))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tarsy_core::SummarizationConfig;

    fn stdio(command: &str) -> McpServerConfig {
        McpServerConfig {
            name: "k8s".into(),
            transport: McpTransport::Stdio {
                command: command.into(),
                args: vec!["serve".into()],
                env: BTreeMap::new(),
                cwd: None,
            },
            instructions: String::new(),
            summarization: SummarizationConfig::default(),
        }
    }

    fn transport(c: &McpServerConfig) -> (String, Option<PathBuf>) {
        match &c.transport {
            McpTransport::Stdio { command, cwd, .. } => (command.clone(), cwd.clone()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn servers_run_in_the_config_dir_and_tarsy_is_this_executable() {
        let dir = Path::new("/etc/tarsy");
        let exe = Path::new("/opt/bin/tarsy-1.2");
        assert_eq!(
            transport(&localize(stdio("tarsy"), dir, Some(exe))),
            ("/opt/bin/tarsy-1.2".into(), Some(dir.into()))
        );
        assert_eq!(transport(&localize(stdio("tarsy"), dir, None)).0, "tarsy");
        assert_eq!(
            transport(&localize(stdio("./bin/server"), dir, None)).0,
            "/etc/tarsy/./bin/server"
        );
        assert_eq!(transport(&localize(stdio("npx"), dir, None)).0, "npx");
        assert_eq!(
            transport(&localize(stdio("/usr/bin/env"), dir, None)).0,
            "/usr/bin/env"
        );
    }

    #[test]
    fn commands_are_found_on_path_or_as_files() {
        assert!(command_exists("sh", None, "/nonexistent:/bin:/usr/bin"));
        assert!(!command_exists("sh", None, "/nonexistent"));
        assert!(!command_exists("sh", None, ""));
        assert!(command_exists("/bin/sh", None, ""));
        assert!(!command_exists("sh", Some(Path::new("/bin")), ""));
        assert!(command_exists("./sh", Some(Path::new("/bin")), ""));
        // A directory or a non-executable file is not a command.
        assert!(!command_exists("/bin", None, ""));
        let file = std::env::temp_dir().join(format!("tarsy-not-a-command-{}", std::process::id()));
        std::fs::write(&file, "data").unwrap();
        let found = command_exists(&file.display().to_string(), None, "");
        let _ = std::fs::remove_file(&file);
        assert!(!found);
    }

    #[test]
    fn the_message_is_one_line_naming_server_command_and_both_ways_out() {
        let m = MissingCommand {
            server: "time".into(),
            command: "mcp-server-time".into(),
            on_path: true,
            defined_in: Some("peers/mcp-servers.yaml".into()),
            chains: vec!["pod-crashloop".into()],
        };
        assert_eq!(
            m.to_string(),
            "MCP server \"time\" cannot start: command \"mcp-server-time\" is not on PATH; \
             install it (see peers/mcp-servers.yaml, which defines the server), \
             or remove \"time\" from chain \"pod-crashloop\""
        );
        let m = MissingCommand {
            on_path: false,
            command: "/opt/x".into(),
            defined_in: None,
            chains: vec!["a".into(), "b".into()],
            ..m
        };
        let text = m.to_string();
        assert!(!text.contains('\n'));
        assert!(text.contains("command \"/opt/x\" does not exist or is not executable; install it there, or remove \"time\" from chains \"a\", \"b\""), "{text}");
    }
}
