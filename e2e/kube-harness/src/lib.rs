//! The Kubernetes API emulator of `e2e/kube` (kmock-based API server plus a
//! process "kubelet"), started from Rust tests and benchmarks.
//!
//! ```no_run
//! # async fn demo() -> Result<(), tarsy_kube_harness::HarnessError> {
//! let dir = std::env::temp_dir().join("my-test");
//! let emulator = tarsy_kube_harness::Emulator::start(
//!     tarsy_kube_harness::EmulatorOptions::new(&dir).with_kubelet(),
//! )?;
//! let client = emulator.client().await?;
//! # let _ = client; Ok(()) }
//! ```
//!
//! The emulator's Python comes from `TARSY_KUBE_PYTHON` or the default venv
//! that `e2e/kube/install.sh` creates; without it [`Emulator::start`] fails
//! with the install command (tests fail, they never skip).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Why the emulator or a client for it could not be had.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// No Python environment with the emulator installed.
    #[error(
        "the Kubernetes API emulator is not installed: run `eval \"$(e2e/kube/install.sh)\"` \
         (it exports TARSY_KUBE_PYTHON) and run the tests again"
    )]
    NotInstalled,
    /// The emulator process could not be started or did not come up.
    #[error("the Kubernetes API emulator did not start: {0}")]
    Start(String),
    /// Its kubeconfig could not be turned into a client.
    #[error("no client for the emulator's kubeconfig {path}: {cause}")]
    Client {
        /// The kubeconfig.
        path: PathBuf,
        /// What failed.
        cause: String,
    },
    /// A file of the harness could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// The repository root (this crate lives in `e2e/kube-harness`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python that runs the emulator: `TARSY_KUBE_PYTHON`, else the default
/// venv of `e2e/kube/install.sh`.
pub fn emulator_python() -> Result<PathBuf, HarnessError> {
    if let Some(p) = std::env::var_os("TARSY_KUBE_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    let venv = std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".cache/tarsy/kube-venv/bin/python"))
        .filter(|v| v.exists());
    venv.ok_or(HarnessError::NotInstalled)
}

/// How to start the emulator.
#[derive(Debug, Clone)]
pub struct EmulatorOptions {
    dir: PathBuf,
    kubelet: bool,
    image_map: BTreeMap<String, serde_json::Value>,
    env: Vec<(OsString, OsString)>,
    pass_env: Vec<String>,
    log: Option<PathBuf>,
}

impl EmulatorOptions {
    /// Options writing the kubeconfig (and the kubelet's pod directories)
    /// under `dir`, which is created.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            kubelet: false,
            image_map: BTreeMap::new(),
            env: Vec::new(),
            pass_env: Vec::new(),
            log: None,
        }
    }

    /// Writes the emulator's (and its pods') stderr to `path` instead of
    /// the test's stderr.
    pub fn with_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.log = Some(path.into());
        self
    }

    /// Also run the kubelet: pods become local processes.
    pub fn with_kubelet(mut self) -> Self {
        self.kubelet = true;
        self
    }

    /// Pods with an image matching `glob` run `executable` (their command
    /// and args appended).
    pub fn with_image(mut self, glob: impl Into<String>, executable: impl AsRef<Path>) -> Self {
        self.image_map.insert(
            glob.into(),
            serde_json::Value::String(executable.as_ref().display().to_string()),
        );
        self
    }

    /// Sets an environment variable of the emulator process (e.g.
    /// `TARSY_BIN`, which maps `tarsy` images to a local binary).
    pub fn with_env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Passes the emulator's own variable `name` on to every pod process.
    pub fn with_pass_env(mut self, name: impl Into<String>) -> Self {
        self.pass_env.push(name.into());
        self
    }
}

/// A running emulator, stopped (with the pods it runs) when dropped.
#[derive(Debug)]
pub struct Emulator {
    child: Child,
    kubeconfig: PathBuf,
    url: String,
}

impl Emulator {
    /// Starts the emulator with the repository's CRDs registered and waits
    /// until it accepts requests.
    pub fn start(options: EmulatorOptions) -> Result<Self, HarnessError> {
        let python = emulator_python()?;
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| HarnessError::Io { path, source }
        };
        std::fs::create_dir_all(&options.dir).map_err(io(&options.dir))?;
        let kubeconfig = options.dir.join("kubeconfig");
        let mut command = Command::new(&python);
        command
            .args(["-m", "tarsy_kube_emulator", "--port", "0"])
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .arg("--crds")
            .arg(repo_root().join("kubernetes/crds/manifests"))
            .env("PYTHONPATH", repo_root().join("e2e/kube"))
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(log) = &options.log {
            let file = std::fs::File::create(log).map_err(io(log))?;
            command.stderr(file);
        }
        if options.kubelet {
            command
                .arg("--kubelet")
                .arg("--kubelet-root")
                .arg(options.dir.join("kubelet"));
        }
        if !options.image_map.is_empty() {
            let map = options.dir.join("images.json");
            let json = serde_json::Value::Object(options.image_map.into_iter().collect());
            std::fs::write(&map, json.to_string()).map_err(io(&map))?;
            command.arg("--image-map").arg(map);
        }
        for name in &options.pass_env {
            command.arg("--pass-env").arg(name);
        }
        let mut child = command
            .spawn()
            .map_err(|e| HarnessError::Start(format!("{}: {e}", python.display())))?;
        // The first stdout line is the URL, printed once it accepts requests.
        let mut line = String::new();
        let read = child
            .stdout
            .take()
            .map(|out| BufReader::new(out).read_line(&mut line));
        let emulator = Emulator {
            child,
            kubeconfig,
            url: line.trim().to_string(),
        };
        match read {
            Some(Ok(_)) if emulator.url.starts_with("http") => Ok(emulator),
            Some(Err(e)) => Err(HarnessError::Start(e.to_string())),
            _ => Err(HarnessError::Start(format!(
                "it printed {line:?} instead of its URL (see its stderr{})",
                options
                    .log
                    .as_ref()
                    .map_or(String::new(), |l| format!(" in {}", l.display()))
            ))),
        }
    }

    /// The kubeconfig pointing at it (context `kubeemu`, namespace `default`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Its base URL (`http://127.0.0.1:PORT`); `/kubeemu/v1/...` holds the
    /// test controls.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The process id (e.g. to measure its CPU time).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A client for it.
    pub async fn client(&self) -> Result<Client, HarnessError> {
        client_for(&self.kubeconfig).await
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        // SIGTERM (not SIGKILL) lets it stop the pod processes it runs; it
        // exits on its own within 8 s at worst, the wait is a backstop.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client for the cluster a kubeconfig file names.
pub async fn client_for(kubeconfig: &Path) -> Result<Client, HarnessError> {
    let err = |cause: String| HarnessError::Client {
        path: kubeconfig.to_path_buf(),
        cause,
    };
    let kc = Kubeconfig::read_from(kubeconfig).map_err(|e| err(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| err(e.to_string()))?;
    Client::try_from(config).map_err(|e| err(e.to_string()))
}

/// Polls `probe` every 100 ms until it returns `Some`, for at most
/// `timeout`; panics naming `what` when time runs out (tests only).
pub async fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
