//! The real LLM service (`tarsy-llm-service`, the Python gRPC proxy) as a
//! child process of the test.
//!
//! The console script comes from the service's virtualenv, which
//! `bash llm-service/ci.sh` creates. Where to find it, first match wins:
//!
//! 1. `TARSY_LLM_SERVICE_BIN` (when set, the only candidate: an explicit
//!    choice never silently falls back to another build);
//! 2. `$TARSY_VENV_DIR/bin/tarsy-llm-service`;
//! 3. `$HOME/.cache/tarsy/llm-venv/bin/tarsy-llm-service` (ci.sh's default).
//!
//! A missing script is an error telling how to build it: end-to-end tests
//! must fail, not skip, when a real part is absent.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::Value;

/// Environment variable naming the console script explicitly.
pub const BIN_ENV: &str = "TARSY_LLM_SERVICE_BIN";
/// Environment variable naming the virtualenv (shared with `ci.sh`).
pub const VENV_ENV: &str = "TARSY_VENV_DIR";
/// Name of the console script inside a virtualenv's `bin/`.
pub const SCRIPT_NAME: &str = "tarsy-llm-service";
/// How long the service may take to import its providers and bind.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the service could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LlmServiceError {
    /// No console script at any candidate path.
    #[error(
        "tarsy-llm-service not found (tried: {tried}). Create its virtualenv with \
         `bash llm-service/ci.sh` from the repository root, or set {BIN_ENV} to the \
         console script"
    )]
    NotFound {
        /// The paths looked at, comma separated.
        tried: String,
    },
    /// The process could not be spawned.
    #[error("cannot start {path}: {source}")]
    Spawn {
        /// The console script.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The process ended before logging that it listens.
    #[error("tarsy-llm-service exited before it was ready ({status}); its log:\n{log}")]
    Exited {
        /// Exit status as text.
        status: String,
        /// Everything it wrote to stderr.
        log: String,
    },
    /// The process did not log that it listens in time.
    #[error("tarsy-llm-service not ready after {waited:?}; its log:\n{log}")]
    NotReady {
        /// How long we waited.
        waited: Duration,
        /// Everything it wrote to stderr so far.
        log: String,
    },
}

/// The candidate paths of the console script, in lookup order, for the given
/// environment lookup (a parameter so the order is testable without touching
/// the process environment).
pub fn candidates(env: impl Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    if let Some(bin) = set(BIN_ENV) {
        return vec![PathBuf::from(bin)];
    }
    let mut out = Vec::new();
    if let Some(venv) = set(VENV_ENV) {
        out.push(Path::new(&venv).join("bin").join(SCRIPT_NAME));
    }
    if let Some(home) = set("HOME") {
        out.push(
            Path::new(&home)
                .join(".cache/tarsy/llm-venv/bin")
                .join(SCRIPT_NAME),
        );
    }
    out
}

/// The console script to run, from the process environment.
pub fn locate() -> Result<PathBuf, LlmServiceError> {
    let tried = candidates(|name| std::env::var(name).ok());
    tried
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| LlmServiceError::NotFound {
            tried: if tried.is_empty() {
                format!("nothing: neither {BIN_ENV}, {VENV_ENV} nor HOME is set")
            } else {
                tried
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        })
}

type LogLines = Arc<Mutex<Vec<String>>>;
type EnvKey = Vec<(String, String)>;

/// The instance [`LlmService::shared`] hands out while someone holds it.
static SHARED: tokio::sync::Mutex<Option<(EnvKey, Weak<LlmService>)>> =
    tokio::sync::Mutex::const_new(None);

/// A running `tarsy-llm-service` on a free loopback port. Dropping it kills
/// the process.
///
/// Plain `std` process and thread, not tokio's: a shared instance outlives
/// the runtime of the test that started it, and its stderr must keep being
/// drained (a full pipe would block the service's logging).
pub struct LlmService {
    child: Child,
    address: String,
    log: LogLines,
}

impl LlmService {
    /// Starts the service found by [`locate`] on `127.0.0.1:0` with the extra
    /// environment `env` (API keys the requests' `api_key_env` name), and
    /// waits until it logs the address it listens on; it logs that only
    /// after the gRPC server runs and health reports SERVING.
    pub async fn start(env: &[(&str, &str)]) -> Result<Self, LlmServiceError> {
        Self::start_at(&locate()?, env).await
    }

    /// One process for every test of a binary that asks with the same `env`
    /// while another holds it: the service is stateless and each request
    /// names its provider endpoint, so tests can share it, and Python
    /// start-up is the slow part of these tests. The process is killed when
    /// the last holder drops it.
    pub async fn shared(env: &[(&str, &str)]) -> Result<Arc<Self>, LlmServiceError> {
        let key: EnvKey = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut slot = SHARED.lock().await;
        if let Some((k, weak)) = slot.as_ref()
            && *k == key
            && let Some(running) = weak.upgrade()
        {
            return Ok(running);
        }
        let started = Arc::new(Self::start(env).await?);
        *slot = Some((key, Arc::downgrade(&started)));
        Ok(started)
    }

    /// Like [`LlmService::start`] with an explicit console script.
    pub async fn start_at(script: &Path, env: &[(&str, &str)]) -> Result<Self, LlmServiceError> {
        Self::spawn(script, "127.0.0.1:0", env).await
    }

    /// Like [`LlmService::start`] on a given `host:port`: a replacement for
    /// a stopped instance on the address clients already use (a restart).
    pub async fn start_on(listen: &str, env: &[(&str, &str)]) -> Result<Self, LlmServiceError> {
        Self::spawn(&locate()?, listen, env).await
    }

    async fn spawn(
        script: &Path,
        listen: &str,
        env: &[(&str, &str)],
    ) -> Result<Self, LlmServiceError> {
        let mut cmd = Command::new(script);
        cmd.args(["--listen", listen])
            // The command line wins anyway; removing it keeps the log honest.
            .env_remove("TARSY_LLM_LISTEN")
            // Provider calls go to loopback fakes, never through a proxy.
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost")
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().map_err(|source| LlmServiceError::Spawn {
            path: script.to_path_buf(),
            source,
        })?;
        let log: LogLines = Arc::default();
        let Some(stderr) = child.stderr.take() else {
            // Unreachable with Stdio::piped(), but no reason to panic.
            let _ = child.kill();
            let _ = child.wait();
            return Err(LlmServiceError::Exited {
                status: "stderr not captured".into(),
                log: String::new(),
            });
        };
        let (ready_tx, ready_rx) = mpsc::channel();
        let sink = log.clone();
        // Ends at EOF, i.e. when the process is gone.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let address = listening_address(&line);
                push(&sink, line);
                if let Some(a) = address {
                    let _ = ready_tx.send(a);
                }
            }
        });
        let waited = tokio::task::spawn_blocking(move || ready_rx.recv_timeout(READY_TIMEOUT))
            .await
            .unwrap_or(Err(RecvTimeoutError::Disconnected));
        match waited {
            Ok(address) => Ok(Self {
                child,
                address,
                log,
            }),
            Err(RecvTimeoutError::Disconnected) => {
                let status = match child.wait() {
                    Ok(s) => s.to_string(),
                    Err(e) => format!("status unknown: {e}"),
                };
                Err(LlmServiceError::Exited {
                    status,
                    log: joined(&log),
                })
            }
            Err(RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(LlmServiceError::NotReady {
                    waited: READY_TIMEOUT,
                    log: joined(&log),
                })
            }
        }
    }

    /// `host:port` the service listens on.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The gRPC endpoint, for `GrpcLlmClient::connect`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Every stderr line so far.
    pub fn log_lines(&self) -> Vec<String> {
        lock(&self.log).clone()
    }

    /// The stderr lines that are JSON log records.
    pub fn log_records(&self) -> Vec<Value> {
        self.log_lines()
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Process id (for diagnostics).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL (a crash, an OOM kill): the process ends at once, cutting
    /// the calls it is serving. Returns once it is reaped.
    pub fn kill(&mut self) -> std::io::Result<ExitStatus> {
        self.child.kill()?;
        self.child.wait()
    }

    /// SIGTERM (a rollout, a node drain): the service drains, letting the
    /// calls it is serving finish. Does not wait; see
    /// [`LlmService::wait_exit`].
    pub fn terminate(&self) -> std::io::Result<()> {
        // `kill(1)` rather than a libc binding: one signal, no new dependency.
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .stdin(Stdio::null())
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(std::io::Error::other(format!("kill -TERM: {status}")))
        }
    }

    /// The exit status once the process has ended, or `None` if it still
    /// runs after `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok(None) | Err(_) => return None,
            }
        }
    }
}

impl Drop for LlmService {
    fn drop(&mut self) {
        // SIGKILL: tests need no graceful drain and must not wait for one;
        // reaping right after is immediate.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The bound address from the service's `"msg":"listening"` JSON log line.
pub fn listening_address(line: &str) -> Option<String> {
    let record: Value = serde_json::from_str(line).ok()?;
    if record.get("msg")?.as_str()? != "listening" {
        return None;
    }
    let address = record.get("address")?.as_str()?;
    // Port 0 in the log would mean the bind address was echoed, not the port.
    (!address.ends_with(":0")).then(|| address.to_string())
}

fn lock(log: &LogLines) -> std::sync::MutexGuard<'_, Vec<String>> {
    log.lock().unwrap_or_else(|e| e.into_inner())
}

fn push(log: &LogLines, line: String) {
    lock(log).push(line);
}

fn joined(log: &LogLines) -> String {
    lock(log).join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn explicit_binary_is_the_only_candidate() {
        let c = candidates(env(&[
            (BIN_ENV, "/opt/svc"),
            (VENV_ENV, "/v"),
            ("HOME", "/h"),
        ]));
        assert_eq!(c, vec![PathBuf::from("/opt/svc")]);
    }

    #[test]
    fn venv_then_home_default() {
        let c = candidates(env(&[(VENV_ENV, "/v"), ("HOME", "/h"), (BIN_ENV, " ")]));
        assert_eq!(
            c,
            vec![
                PathBuf::from("/v/bin/tarsy-llm-service"),
                PathBuf::from("/h/.cache/tarsy/llm-venv/bin/tarsy-llm-service"),
            ]
        );
    }

    #[tokio::test]
    async fn missing_script_fails_with_the_build_command() {
        let err = LlmService::start_at(Path::new("/nonexistent/tarsy-llm-service"), &[])
            .await
            .err()
            .map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("cannot start /nonexistent/tarsy-llm-service")),
            "{err:?}"
        );
        let not_found = LlmServiceError::NotFound { tried: "x".into() }.to_string();
        assert!(not_found.contains("bash llm-service/ci.sh"), "{not_found}");
    }

    #[test]
    fn listening_line_gives_the_bound_address() {
        assert_eq!(
            listening_address(r#"{"msg":"listening","address":"127.0.0.1:41234"}"#).as_deref(),
            Some("127.0.0.1:41234")
        );
        assert_eq!(
            listening_address(r#"{"msg":"listening","address":"127.0.0.1:0"}"#),
            None
        );
        assert_eq!(
            listening_address(r#"{"msg":"stopped","address":"127.0.0.1:1"}"#),
            None
        );
        assert_eq!(
            listening_address("Traceback (most recent call last):"),
            None
        );
    }
}
