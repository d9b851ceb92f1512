//! Shared plumbing of the cluster-mode e2e tests and the operator bench:
//! where the Kubernetes API comes from (the project's emulator, or a real
//! cluster through `KUBECONFIG`), the real `tarsy controller` as a child
//! process, throw-away Postgres databases, server-side apply of YAML
//! manifests, bounded waits.

// Each user (test file, bench) uses a different part of this module.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use tarsy_kube_harness::{Emulator, EmulatorOptions};
use tarsy_store::testing::TestDatabase;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `tarsy` binary the processes run: the one built with these tests,
/// or `TARSY_E2E_BIN` (e.g. a release build, to measure start-up figures).
pub fn tarsy_bin() -> PathBuf {
    std::env::var_os("TARSY_E2E_BIN")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_tarsy")))
}

/// A scratch directory for one test run (kubeconfig, logs, scripts, pods).
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tarsy-{name}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts the emulator; with `kubelet`, `tarsy` images run the binary under
/// test (`TARSY_BIN`) and pods' logs land under `dir/kubelet`. Its stderr
/// goes to `dir/emulator.log`. A missing emulator is a failure with the
/// install hint, never a skip.
pub fn start_emulator(dir: &Path, kubelet: bool) -> Emulator {
    let mut options = EmulatorOptions::new(dir)
        .with_env("TARSY_BIN", tarsy_bin())
        .with_log(dir.join("emulator.log"));
    if kubelet {
        options = options.with_kubelet().with_pass_env("RUST_LOG");
    }
    Emulator::start(options)
        .unwrap_or_else(|e| panic!("{e} (or set KUBECONFIG to run against a real cluster)"))
}

/// A client for `kubeconfig` (its current context).
pub async fn client(kubeconfig: &Path) -> Client {
    tarsy_kube_harness::client_for(kubeconfig)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A port free right now on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// How the operator under test is started.
pub struct ControllerConfig {
    /// Kubeconfig it uses.
    pub kubeconfig: PathBuf,
    /// Postgres URL (as this host reaches it).
    pub database_url: String,
    /// Image of investigation pods.
    pub image: String,
    /// Namespace it watches.
    pub namespace: String,
    /// Extra environment (defaults such as `TARSY_MAX_CONCURRENT_SESSIONS`).
    pub env: Vec<(String, String)>,
    /// The LLM service the operator and its runners call (`None`: nothing
    /// listens there; every provider of such a test is scripted).
    pub llm_service_addr: Option<String>,
    /// Where its log goes.
    pub log: PathBuf,
}

/// `tarsy controller` as a child process.
pub struct Controller {
    child: Option<Child>,
    /// Port of /metrics, /healthz, /readyz.
    pub metrics_port: u16,
    /// Its log file.
    pub log: PathBuf,
}

impl Controller {
    /// Starts the operator and waits until it answers /healthz.
    pub fn start(cfg: &ControllerConfig) -> Controller {
        let metrics_port = free_port();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&cfg.log)
            .unwrap();
        let child = Command::new(tarsy_bin())
            .arg("controller")
            .args(["--database-url", &cfg.database_url])
            .args(["--image", &cfg.image])
            .args(["--namespace", &cfg.namespace])
            .args(["--metrics-addr", &format!("127.0.0.1:{metrics_port}")])
            .args(["--database-secret", "tarsy-database/url"])
            .args([
                "--llm-service-addr",
                cfg.llm_service_addr
                    .as_deref()
                    .unwrap_or("http://127.0.0.1:9"),
            ])
            .args(["--pod-start-timeout-seconds", "60"])
            .envs(cfg.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("KUBECONFIG", &cfg.kubeconfig)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("starting tarsy controller");
        let mut c = Controller {
            child: Some(child),
            metrics_port,
            log: cfg.log.clone(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(Ok(reply)) = std::net::TcpStream::connect(("127.0.0.1", metrics_port))
                .ok()
                .map(|_| http("127.0.0.1", metrics_port, "GET", "/healthz", None))
                && reply.starts_with("HTTP/1.1 200")
            {
                break;
            }
            if let Some(status) = c.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "tarsy controller exited at start ({status}):\n{}",
                    tail(&c.log, 40)
                );
            }
            assert!(
                Instant::now() < deadline,
                "tarsy controller did not answer /healthz within 30 s:\n{}",
                tail(&c.log, 40)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        c
    }

    /// Process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Kills the process at once (SIGKILL: no graceful shutdown).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// GET /metrics.
    pub fn metrics(&self) -> String {
        http("127.0.0.1", self.metrics_port, "GET", "/metrics", None).unwrap_or_default()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `n` lines of a file (diagnostics).
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// One HTTP/1.1 request with a bounded wait; returns the whole response.
pub fn http(
    host: &str,
    port: u16,
    method: &str,
    path: &str,
    json_body: Option<&str>,
) -> std::io::Result<String> {
    let mut s = std::net::TcpStream::connect((host, port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.set_write_timeout(Some(Duration::from_secs(10)))?;
    let body = json_body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// The Postgres server tests use.
pub fn postgres_server_url() -> String {
    tarsy_store::testing::server_url()
}

/// A database created for one test (dropped afterwards, also on failure).
pub async fn test_database(prefix: &str) -> TestDatabase {
    TestDatabase::create(prefix)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Server-side applies every document of a multi-document YAML string
/// (namespaced objects go to `namespace` unless they name one).
pub async fn apply_yaml(client: &Client, namespace: &str, yaml: &str) {
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let value: serde_json::Value = serde::Deserialize::deserialize(doc).unwrap();
        if value.is_null() {
            continue;
        }
        let obj: DynamicObject = serde_json::from_value(value.clone()).unwrap();
        let types = obj.types.clone().expect("apiVersion and kind");
        let gvk = GroupVersionKind::try_from(&types).unwrap();
        let (ar, namespaced) = resource_of(&gvk);
        let name = obj.metadata.name.clone().expect("metadata.name");
        let api: Api<DynamicObject> = if namespaced {
            let ns = obj.metadata.namespace.as_deref().unwrap_or(namespace);
            Api::namespaced_with(client.clone(), ns, &ar)
        } else {
            Api::all_with(client.clone(), &ar)
        };
        api.patch(
            &name,
            &PatchParams::apply("tarsy-e2e").force(),
            &Patch::Apply(&value),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {} {name}: {e}", gvk.kind));
    }
}

/// The plural and scope of the kinds these tests apply (no discovery round
/// trip, so an unknown kind fails loudly here).
fn resource_of(gvk: &GroupVersionKind) -> (ApiResource, bool) {
    let (plural, namespaced) = match gvk.kind.as_str() {
        "Namespace" => ("namespaces", false),
        "Secret" => ("secrets", true),
        "LLMProvider" => ("llmproviders", true),
        "MCPServer" => ("mcpservers", true),
        "Agent" => ("agents", true),
        "Chain" => ("chains", true),
        "Alert" => ("alerts", true),
        other => panic!("apply_yaml does not know kind {other}"),
    };
    (ApiResource::from_gvk_with_plural(gvk, plural), namespaced)
}

/// Polls `f` every 200 ms until it returns `Some`, at most `secs` seconds;
/// `Err(())` on timeout (the caller adds diagnostics).
pub async fn poll<T>(secs: u64, mut f: impl AsyncFnMut() -> Option<T>) -> Result<T, ()> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            return Err(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Peak and current resident set size of a process, in KiB (VmHWM, VmRSS).
pub fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse::<u64>()
            .ok()
    };
    Some((field("VmHWM:")?, field("VmRSS:")?))
}

/// CPU time (user + system) a process has used so far, in clock ticks
/// converted to seconds (Linux: 100 ticks a second).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// One cluster-mode scenario's world: the emulator with its kubelet (or
/// the real cluster `KUBECONFIG` names), a database, and the namespace
/// with the database Secret investigation pods read. On a real cluster:
/// `TARSY_E2E_NAMESPACE`, `TARSY_E2E_IMAGE` and `TARSY_E2E_DATABASE_URL`
/// (see `cluster_e2e.rs`).
pub struct ClusterScene {
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub client: Client,
    pub ns: String,
    pub image: String,
    pub db: TestDatabase,
    pub store: tarsy_store::Store,
    emulator: Option<Emulator>,
}

impl ClusterScene {
    /// A scene named `name` (its scratch directory, database prefix and,
    /// on the emulator, its namespace).
    pub async fn start(name: &str) -> ClusterScene {
        let dir = scratch_dir(name);
        let real_cluster = std::env::var("KUBECONFIG").is_ok_and(|v| !v.is_empty());
        let emulator = (!real_cluster).then(|| start_emulator(&dir, true));
        let kubeconfig = match &emulator {
            Some(emu) => emu.kubeconfig().to_path_buf(),
            None => std::env::var("KUBECONFIG").unwrap().into(),
        };
        let env = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
        let ns = env("TARSY_E2E_NAMESPACE").unwrap_or_else(|| name.to_string());
        let image = env("TARSY_E2E_IMAGE").unwrap_or_else(|| "tarsy:e2e".into());
        let db = test_database(&format!("tarsy_{}", name.replace('-', "_"))).await;
        let pods_db_url = env("TARSY_E2E_DATABASE_URL").unwrap_or_else(|| db.url().to_string());
        let client = client(&kubeconfig).await;
        let store = tarsy_store::Store::connect(db.url()).await.unwrap();
        apply_yaml(
            &client,
            &ns,
            &format!(
                "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\n\
                 apiVersion: v1\nkind: Secret\nmetadata: {{name: tarsy-database}}\n\
                 stringData: {{url: \"{pods_db_url}\"}}\n"
            ),
        )
        .await;
        ClusterScene {
            dir,
            kubeconfig,
            client,
            ns,
            image,
            db,
            store,
            emulator,
        }
    }

    /// The operator on this scene, with `env` and the LLM service at
    /// `llm_service_addr`.
    pub fn controller(&self, env: Vec<(String, String)>, llm_service_addr: String) -> Controller {
        Controller::start(&ControllerConfig {
            kubeconfig: self.kubeconfig.clone(),
            database_url: self.db.url().to_string(),
            image: self.image.clone(),
            namespace: self.ns.clone(),
            env,
            llm_service_addr: Some(llm_service_addr),
            log: self.dir.join("controller.log"),
        })
    }

    /// Stops the operator first (one still watching would hold the
    /// emulator's shutdown up), then the emulator; drops the database.
    pub async fn finish(self, controller: Controller) {
        drop(controller);
        drop(self.emulator);
        self.store.close().await;
        let _ = self.db.drop_database().await;
    }
}
