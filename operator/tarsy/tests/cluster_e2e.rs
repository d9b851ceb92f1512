//! Cluster mode end to end with the real binaries: the `tarsy controller`
//! process reconciles Alerts; every investigation pod runs the real
//! `tarsy runner` (and the `tarsy mcp-bridge` sidecar in front of the real
//! third-party `mcp-server-time`); Postgres is real; the LLM is a `scripted`
//! LLMProvider whose script each runner replays (answers routed by a marker
//! in each agent's instructions).
//!
//! Scenarios: an applied Alert runs two stages (two parallel agents and
//! their synthesis, then an agent calling an MCP tool) to Completed;
//! cancellation; session timeout; a pod killed by the OOM killer; the
//! operator killed and restarted mid-session; Postgres restarted
//! mid-session.
//!
//! Where the Kubernetes API comes from:
//!
//! | variable | effect |
//! |---|---|
//! | (none) | the project's emulator (`e2e/kube`) with its kubelet, which runs pods as local processes; a missing emulator venv is a FAILURE: `eval "$(e2e/kube/install.sh)"` |
//! | `KUBECONFIG` | a real cluster (unless its current context is the emulator's `kubeemu`): CRDs must be installed and no other TARSy operator may watch the namespace (the test runs its own); scenarios run one at a time; emulator-only steps (OOM simulation) are skipped with a printed reason |
//! | `TARSY_E2E_REQUIRE_CLUSTER=1` | fail unless `KUBECONFIG` is set |
//! | `TARSY_E2E_NAMESPACE` | namespace used on a real cluster (default `tarsy-e2e`; created if missing) |
//! | `TARSY_E2E_IMAGE` | tarsy image of investigation pods on a real cluster (required there) |
//! | `TARSY_E2E_DATABASE_URL` | Postgres URL as pods reach it on a real cluster (required there; the test and the operator use `TARSY_TEST_DATABASE_URL`, which must be the same database) |
//! | `TARSY_E2E_SCRIPT_DIR` | directory the LLM scripts are written to, which pods must see at the same path (real cluster only, e.g. a kind `extraMounts` host path) |
//! | `TARSY_E2E_MCP_TIME_COMMAND` | `mcp-server-time` executable inside the MCP runtime image (real cluster; default `mcp-server-time`) |
//! | `TARSY_TEST_DATABASE_URL` | Postgres server (default the one `scripts/postgres.sh` starts); the emulator mode makes one database per scenario |
//! | `TARSY_PEERS_DIR` | where `e2e/install-mcp-peers.sh` installed `mcp-server-time` (default `~/.cache/tarsy/mcp-peers`) |
//!
//! Every wait is bounded; a timeout fails with the Alert, its executions,
//! pods and the operator's log.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{Controller, ControllerConfig, apply_yaml, poll};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use tarsy_core::{ExecutionStatus, SessionStatus, TimelineEventType};
use tarsy_crds::{AgentExecution, Alert, AlertPhase, ExecutionPhase, MCPServer};
use tarsy_kube_harness::Emulator;
use tarsy_store::Store;
use tarsy_store::testing::TestDatabase;

/// Scenarios against a real cluster share its namespace: one at a time.
static CLUSTER_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Where the scenario runs.
enum Backend {
    /// The project's emulator with its kubelet.
    Emulator(Emulator),
    /// A real cluster (`KUBECONFIG`).
    Cluster,
}

/// One scenario's world: API, operator, database.
struct Run {
    // Dropped first (fields drop in order): an operator still watching
    // would hold the emulator's shutdown up.
    controller: Option<Controller>,
    name: &'static str,
    started: std::time::Instant,
    backend: Backend,
    dir: PathBuf,
    kubeconfig: PathBuf,
    client: Client,
    ns: String,
    image: String,
    db_url: String,
    db: Option<TestDatabase>,
    store: Store,
    /// Where the LLM scripts are (pods read them at the same path).
    script_dir: PathBuf,
    /// The operator's environment besides the defaults of every scenario.
    controller_env: Vec<(String, String)>,
    _lock: Option<tokio::sync::MutexGuard<'static, ()>>,
}

/// (first LLM request, MCP init) in ms from a runner's "execution finished"
/// log line (text or JSON).
fn startup_figures(line: &str) -> Option<(f64, f64)> {
    if !line.contains("execution finished") {
        return None;
    }
    // Without the terminal colour codes the text log carries.
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    let line = plain.as_str();
    let field = |name: &str| -> Option<f64> {
        let rest = &line[line.find(name)? + name.len()..];
        let rest = rest.trim_start_matches(['"', ':', '=', ' ']);
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        rest[..end].parse().ok()
    };
    Some((
        field("first_llm_request_ms")?,
        field("mcp_init_ms").unwrap_or(0.0),
    ))
}

/// `KUBECONFIG`, unless it points at the emulator (context `kubeemu`).
fn real_cluster_kubeconfig() -> Option<PathBuf> {
    let raw = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty())?;
    let first = std::env::split_paths(&raw).next()?;
    let text = std::fs::read_to_string(&first).unwrap_or_default();
    let is_emulator = text.lines().any(|l| l.trim() == "current-context: kubeemu");
    if is_emulator {
        println!(
            "KUBECONFIG points at a kube emulator ({}): starting this test's own",
            first.display()
        );
        return None;
    }
    Some(first)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn require_env(name: &str) -> String {
    env(name).unwrap_or_else(|| panic!("{name} must be set to run the e2e tests on a real cluster"))
}

/// The host's `mcp-server-time` (installed by e2e/install-mcp-peers.sh).
fn host_mcp_time() -> String {
    let dir = env("TARSY_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/tarsy/mcp-peers")
        });
    let exe = dir.join("venv/bin/mcp-server-time");
    assert!(
        exe.exists(),
        "mcp-server-time is not installed at {}: run `bash e2e/install-mcp-peers.sh`",
        exe.display()
    );
    exe.display().to_string()
}

impl Run {
    /// Starts the API (emulator or cluster), a database, the operator, and
    /// applies the scenario's configuration; `script` is its LLM script and
    /// `manifests` its Agents and Chains (`{ns}`, `{provider}`, `{p}` are
    /// replaced: namespace, LLMProvider name, resource prefix).
    async fn start(name: &'static str, script: &str, manifests: &str) -> Run {
        Self::start_with(name, script, manifests, &[]).await
    }

    /// [`Run::start`] with extra environment for the operator (which hands
    /// its defaults on to the runners).
    async fn start_with(
        name: &'static str,
        script: &str,
        manifests: &str,
        controller_env: &[(&str, &str)],
    ) -> Run {
        Self::start_full(name, script, manifests, controller_env, None).await
    }

    /// [`Run::start`] on the emulator with the database at `db_url` (the
    /// test's own server) instead of a fresh database on the shared one.
    async fn start_on(name: &'static str, script: &str, manifests: &str, db_url: String) -> Run {
        Self::start_full(name, script, manifests, &[], Some(db_url)).await
    }

    async fn start_full(
        name: &'static str,
        script: &str,
        manifests: &str,
        controller_env: &[(&str, &str)],
        own_database: Option<String>,
    ) -> Run {
        let require = env("TARSY_E2E_REQUIRE_CLUSTER").as_deref() == Some("1");
        let cluster = real_cluster_kubeconfig();
        assert!(
            !(require && cluster.is_none()),
            "TARSY_E2E_REQUIRE_CLUSTER=1 but KUBECONFIG is not set (or points at the emulator): \
             these e2e tests must run against a real cluster"
        );
        let started = std::time::Instant::now();
        let dir = common::scratch_dir(&format!("e2e-{name}"));
        let (lock, backend, kubeconfig, ns, image, db, db_url, pods_db_url, script_dir, mcp_time) =
            match cluster {
                Some(kc) => {
                    let lock = CLUSTER_LOCK.lock().await;
                    let url = common::postgres_server_url();
                    (
                        Some(lock),
                        Backend::Cluster,
                        kc,
                        env("TARSY_E2E_NAMESPACE").unwrap_or_else(|| "tarsy-e2e".into()),
                        require_env("TARSY_E2E_IMAGE"),
                        None,
                        url,
                        require_env("TARSY_E2E_DATABASE_URL"),
                        PathBuf::from(require_env("TARSY_E2E_SCRIPT_DIR")),
                        env("TARSY_E2E_MCP_TIME_COMMAND")
                            .unwrap_or_else(|| "mcp-server-time".into()),
                    )
                }
                None => {
                    let emu = common::start_emulator(&dir, true);
                    let kc = emu.kubeconfig().to_path_buf();
                    let (db, url) = match own_database {
                        Some(url) => (None, url),
                        None => {
                            let db = common::test_database("tarsy_cluster_e2e").await;
                            let url = db.url().to_string();
                            (Some(db), url)
                        }
                    };
                    (
                        None,
                        Backend::Emulator(emu),
                        kc,
                        "e2e".to_string(),
                        "tarsy:e2e".to_string(),
                        db,
                        url.clone(),
                        url,
                        dir.clone(),
                        host_mcp_time(),
                    )
                }
            };
        let client = common::client(&kubeconfig).await;
        let store = Store::connect(&db_url)
            .await
            .unwrap_or_else(|e| panic!("cannot open the session store at {db_url}: {e}"));
        std::fs::create_dir_all(&script_dir).unwrap();
        let script_path = script_dir.join(format!("cluster-e2e-{name}.yaml"));
        std::fs::write(&script_path, script).unwrap();

        let provider = format!("scripted-{name}");
        let base = format!(
            r#"
apiVersion: v1
kind: Namespace
metadata: {{name: {ns}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: tarsy-database}}
stringData: {{url: "{pods_db_url}"}}
---
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {{name: {provider}}}
spec:
  type: scripted
  model: scripted-e2e
  script: "{script}"
  pricing: {{inputPerMillion: 1.0, outputPerMillion: 2.0}}
---
apiVersion: tarsy.dev/v1alpha1
kind: MCPServer
metadata: {{name: time}}
spec:
  stdio:
    command: "{mcp_time}"
    args: ["--local-timezone", "UTC"]
  instructions: Current time and time zone conversion.
"#,
            script = script_path.display(),
        );
        apply_yaml(&client, &ns, &base).await;
        let manifests = manifests
            .replace("{ns}", &ns)
            .replace("{provider}", &provider)
            .replace("{p}", name);
        apply_yaml(&client, &ns, &manifests).await;

        let mut run = Run {
            name,
            started,
            backend,
            dir,
            kubeconfig,
            client,
            ns,
            image,
            db_url,
            db,
            store,
            script_dir,
            controller_env: controller_env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            controller: None,
            _lock: lock,
        };
        run.start_controller();
        run
    }

    /// A progress line (shown when the test fails).
    /// Prints what each runner logged as its start-up figure (process start
    /// → first LLM request, MCP initialisation excluded; budget ≤ 100 ms in
    /// release, measured figures in `README.md#what-is-built`). Printed, not
    /// asserted: a figure, not a test. Pods' logs are files under the
    /// scratch directory on the emulator; on a real cluster they are not
    /// read here.
    fn print_runner_startup(&self) {
        let mut figures = Vec::new();
        let mut dirs = vec![self.dir.join("kubelet")];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if let Ok(text) = std::fs::read_to_string(&path) {
                    figures.extend(text.lines().filter_map(startup_figures));
                }
            }
        }
        if figures.is_empty() {
            println!(
                "[{}] runner start → first LLM request: no runner log found",
                self.name
            );
            return;
        }
        figures.sort_by(|a, b| a.0.total_cmp(&b.0));
        let list: Vec<String> = figures
            .iter()
            .map(|(first, mcp)| format!("{first:.1} ms (+ MCP init {mcp:.1} ms)"))
            .collect();
        println!(
            "[{}] runner start → first LLM request ({} build), per pod: {}",
            self.name,
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
            list.join(", ")
        );
    }

    fn step(&self, what: &str) {
        println!(
            "[{} +{:.1}s] {what}",
            self.name,
            self.started.elapsed().as_secs_f64()
        );
    }

    fn start_controller(&mut self) {
        self.step("starting tarsy controller");
        self.controller = Some(Controller::start(&ControllerConfig {
            kubeconfig: self.kubeconfig.clone(),
            database_url: self.db_url.clone(),
            image: self.image.clone(),
            namespace: self.ns.clone(),
            env: [
                (
                    "TARSY_MAX_CONCURRENT_SESSIONS".to_string(),
                    "20".to_string(),
                ),
                // Replacement pods without a long wait.
                ("TARSY_POD_RESTART_BACKOFF_SECONDS".into(), "1".into()),
            ]
            .into_iter()
            .chain(self.controller_env.iter().cloned())
            .collect(),
            llm_service_addr: None,
            log: self.dir.join("controller.log"),
        }));
    }

    /// Writes another LLM script where pods read them; returns its path.
    fn write_script(&self, file: &str, content: &str) -> PathBuf {
        let path = self
            .script_dir
            .join(format!("cluster-e2e-{}-{file}", self.name));
        std::fs::write(&path, content).unwrap();
        path
    }

    fn alerts(&self) -> Api<Alert> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn executions(&self) -> Api<AgentExecution> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// Creates an Alert named `{scenario}-{suffix}` of `alert_type`.
    async fn create_alert(&self, suffix: &str, alert_type: &str) -> String {
        let name = format!("{}-{suffix}", self.name);
        // A leftover from an earlier run on a real cluster.
        if matches!(self.backend, Backend::Cluster) {
            let _ = self.alerts().delete(&name, &DeleteParams::default()).await;
            let _ = poll(60, async || {
                self.alerts()
                    .get_opt(&name)
                    .await
                    .ok()?
                    .is_none()
                    .then_some(())
            })
            .await;
        }
        apply_yaml(
            &self.client,
            &self.ns,
            &format!(
                "apiVersion: tarsy.dev/v1alpha1\nkind: Alert\nmetadata: {{name: {name}}}\n\
                 spec: {{alertType: {alert_type}, author: e2e, data: \"disk /var on node-7 is 97% full; token: hunter2-secret\"}}"
            ),
        )
        .await;
        name
    }

    /// Everything a failing wait should show.
    async fn diagnose(&self, alert: &str) -> String {
        let mut out = String::new();
        if let Ok(a) = self.alerts().get(alert).await {
            out += &format!(
                "alert {alert}: {}\n",
                serde_json::to_string_pretty(&a.status).unwrap()
            );
        }
        let lp = ListParams::default().labels(&format!("tarsy.dev/alert={alert}"));
        if let Ok(list) = self.executions().list(&lp).await {
            for ae in list {
                let st = ae.status.clone().unwrap_or_default();
                out += &format!(
                    "execution {}: {:?} error={:?}\n",
                    ae.name_any(),
                    st.phase,
                    st.error
                );
            }
        }
        if let Ok(list) = self.pods().list(&lp).await {
            for p in list {
                let st = p.status.clone().unwrap_or_default();
                out += &format!(
                    "pod {}: {:?} {:?}\n",
                    p.name_any(),
                    st.phase,
                    st.container_statuses
                        .unwrap_or_default()
                        .iter()
                        .map(|c| format!("{}={:?}", c.name, c.state))
                        .collect::<Vec<_>>()
                );
            }
        }
        if let Some(c) = &self.controller {
            out += &format!("--- operator log (tail)\n{}\n", common::tail(&c.log, 30));
        }
        out += &format!("(scratch dir with pod logs: {})", self.dir.display());
        out
    }

    /// Waits (bounded) for `f`, failing with the diagnostics of `alert`.
    async fn wait<T>(
        &self,
        what: &str,
        alert: &str,
        secs: u64,
        f: impl AsyncFnMut() -> Option<T>,
    ) -> T {
        match poll(secs, f).await {
            Ok(v) => v,
            Err(()) => panic!(
                "[{}] timed out after {secs} s waiting for {what}\n{}",
                self.name,
                self.diagnose(alert).await
            ),
        }
    }

    async fn wait_phase(&self, alert: &str, phase: AlertPhase, secs: u64) -> Alert {
        self.step(&format!("waiting for {alert} {phase:?}"));
        let alerts = self.alerts();
        self.wait(
            &format!("Alert {alert} to be {phase:?}"),
            alert,
            secs,
            async || {
                let a = alerts.get(alert).await.ok()?;
                (a.status.as_ref()?.phase? == phase).then_some(a)
            },
        )
        .await
    }

    async fn wait_execution(&self, alert: &str, name: &str, phase: ExecutionPhase) {
        self.step(&format!("waiting for {name} {phase:?}"));
        let api = self.executions();
        self.wait(
            &format!("AgentExecution {name} to be {phase:?}"),
            alert,
            60,
            async || (api.get(name).await.ok()?.status?.phase? == phase).then_some(()),
        )
        .await;
    }

    async fn children(&self, alert: &str) -> Vec<AgentExecution> {
        self.executions()
            .list(&ListParams::default().labels(&format!("tarsy.dev/alert={alert}")))
            .await
            .unwrap()
            .items
    }

    /// Reasons of the Events about `name`, each repeated as often as it
    /// happened (the recorder folds repeats into one Event's series).
    async fn event_reasons(&self, name: &str) -> Vec<String> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), &self.ns);
        let mut out = Vec::new();
        for e in api.list(&ListParams::default()).await.unwrap().items {
            if e.regarding.as_ref().and_then(|r| r.name.as_deref()) != Some(name) {
                continue;
            }
            let times = e
                .series
                .as_ref()
                .map(|s| s.count)
                .or(e.deprecated_count)
                .unwrap_or(1)
                .max(1);
            if let Some(reason) = e.reason {
                out.extend(std::iter::repeat_n(reason, times as usize));
            }
        }
        out
    }

    /// Command lines of live `tarsy runner` processes of `alert` (emulator:
    /// they are this host's processes).
    fn runner_processes(&self, alert: &str) -> Vec<String> {
        let mut found = Vec::new();
        let needle = format!("{}/{alert}-", self.ns);
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            let cmd = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmd.contains(" runner ") && cmd.contains(&needle) {
                found.push(cmd);
            }
        }
        found
    }

    async fn finish(mut self) {
        self.step("cleaning up");
        if matches!(self.backend, Backend::Cluster) {
            // Delete this scenario's Alerts while the operator runs (finalizer).
            let prefix = format!("{}-", self.name);
            for a in self.alerts().list(&ListParams::default()).await.unwrap() {
                if a.name_any().starts_with(&prefix) {
                    let _ = self
                        .alerts()
                        .delete(&a.name_any(), &DeleteParams::default())
                        .await;
                }
            }
        }
        if let Some(mut c) = self.controller.take() {
            c.kill();
        }
        self.store.close().await;
        // Stops the emulator and the pods it runs.
        self.backend = Backend::Cluster;
        if let Some(db) = self.db.take() {
            let _ = db.drop_database().await;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Two parallel agents and their synthesis, then an agent that calls the
/// real MCP server through the bridge sidecar; executive summary routed by
/// its system prompt.
const HAPPY_SCRIPT: &str = r#"
routes:
  RouteAlpha:
  - chunks:
    - {kind: thinking, content: "Checking disk usage trends."}
    - {kind: text, content: "Alpha finding: /var is full of rotated logs."}
    - {kind: usage, input_tokens: 100, output_tokens: 10}
  RouteBeta:
  - chunks:
    - {kind: text, content: "Beta finding: logrotate stopped on Tuesday."}
    - {kind: usage, input_tokens: 110, output_tokens: 11}
  RouteGamma:
  - chunks:
    - {kind: tool_call, id: call-1, name: time__get_current_time, arguments: '{"timezone": "UTC"}'}
    - {kind: usage, input_tokens: 120, output_tokens: 12}
  - chunks:
    - {kind: text, content: "Gamma conclusion: restart logrotate and prune /var/log now."}
    - {kind: usage, input_tokens: 130, output_tokens: 13}
  executive summaries:
  - chunks:
    - {kind: text, content: "Executive summary: stopped log rotation filled /var on node-7."}
    - {kind: usage, input_tokens: 50, output_tokens: 9}
sequential:
- chunks:
  - {kind: text, content: "Synthesis: logrotate stopped, so rotated logs filled /var."}
  - {kind: usage, input_tokens: 140, output_tokens: 14}
"#;

const HAPPY_MANIFESTS: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: alpha}
spec: {description: disk, customInstructions: "You are RouteAlpha."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: beta}
spec: {description: logs, customInstructions: "You are RouteBeta."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: gamma}
spec: {description: acts, customInstructions: "You are RouteGamma.", mcpServers: [time]}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: "{p}-chain"}
spec:
  alertTypes: [DiskFull]
  llmProvider: "{provider}"
  iterationStrategy: langchain
  executiveSummaryProvider: "{provider}"
  sessionTimeout: 5m
  stages:
  - name: investigate
    agents: [{name: alpha}, {name: beta}]
    synthesis: {llmProvider: "{provider}"}
  - name: act
    agents: [{name: gamma}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applied_alert_runs_to_completed_through_real_runners() {
    let run = Run::start("happy", HAPPY_SCRIPT, HAPPY_MANIFESTS).await;
    let alert = run.create_alert("a1", "DiskFull").await;
    let done = run.wait_phase(&alert, AlertPhase::Completed, 120).await;
    let uid = done.uid().unwrap();
    let diag = run.diagnose(&alert).await;
    let status = done.status.clone().unwrap();

    // Alert status.
    assert_eq!(status.session_id.as_deref(), Some(uid.as_str()), "{diag}");
    assert_eq!(status.chain.as_deref(), Some("happy-chain"));
    let stages: Vec<(&str, ExecutionPhase, usize)> = status
        .stages
        .iter()
        .map(|s| (s.name.as_str(), s.phase, s.executions.len()))
        .collect();
    assert_eq!(
        stages,
        [
            ("investigate", ExecutionPhase::Completed, 2),
            ("investigate - Synthesis", ExecutionPhase::Completed, 1),
            ("act", ExecutionPhase::Completed, 1),
        ],
        "{diag}"
    );
    assert_eq!(
        status.final_analysis.as_deref(),
        Some("Gamma conclusion: restart logrotate and prune /var/log now."),
        "{diag}"
    );

    run.step("checking executions and pods");
    // AgentExecutions and their pods.
    let children = run.children(&alert).await;
    assert_eq!(children.len(), 4, "{diag}");
    for ae in &children {
        let st = ae.status.clone().unwrap();
        assert_eq!(
            st.phase,
            Some(ExecutionPhase::Completed),
            "{}: {st:?}",
            ae.name_any()
        );
        let tokens = st.tokens.clone().expect("token usage in status");
        assert!(tokens.input >= 100 && tokens.output >= 10, "{tokens:?}");
        // The runner's own call counts, for the operator to export.
        let calls = st.calls.clone().expect("call counts in status");
        assert!(calls.llm >= 1 && calls.llm_errors == 0, "{calls:?}");
        assert!(
            st.recent_timeline
                .iter()
                .any(|t| t.event_type == "final_analysis"),
            "{}: {:?}",
            ae.name_any(),
            st.recent_timeline
        );
        let pod_name = st.pod_name.clone().expect("podName");
        // The runner has exited; sidecars are stopped after it.
        let pods = run.pods();
        run.wait(
            &format!("pod {pod_name} Succeeded"),
            &alert,
            30,
            async || {
                let pod = pods.get(&pod_name).await.ok()?;
                (pod.status?.phase.as_deref() == Some("Succeeded")).then_some(())
            },
        )
        .await;
    }
    let gamma = children
        .iter()
        .find(|a| a.spec.agent_name == "gamma")
        .expect("gamma execution");
    let gamma_status = gamma.status.clone().unwrap();
    assert!(gamma_status.iteration.unwrap_or(0) >= 2, "{gamma_status:?}");
    // The runner reports connecting to its stdio server (through the
    // bridge sidecar); the operator turns that into the MCPServer's health.
    let outcomes: Vec<(&str, bool)> = gamma_status
        .mcp_servers
        .iter()
        .map(|o| (o.name.as_str(), o.healthy))
        .collect();
    assert_eq!(outcomes, [("time", true)], "{gamma_status:?}");
    run.step("checking MCPServer lastHealth");
    let servers: Api<MCPServer> = Api::namespaced(run.client.clone(), &run.ns);
    let health = run
        .wait(
            "MCPServer time lastHealth healthy",
            &alert,
            30,
            async || {
                let s = servers.get("time").await.ok()?;
                s.status?.last_health.filter(|h| h.healthy)
            },
        )
        .await;
    assert_eq!(health.message, None, "{health:?}");
    // The tools the runner saw, which the cluster API checks selections
    // against.
    assert!(
        health.tools.iter().any(|t| t == "get_current_time"),
        "{health:?}"
    );
    let gamma_calls = gamma_status.calls.clone().unwrap_or_default();
    assert!(
        gamma_calls.tools >= 1,
        "gamma called the time tool: {gamma_calls:?}"
    );
    assert_eq!(
        health.checked_at.as_ref(),
        Some(&gamma_status.mcp_servers[0].checked_at),
        "the only execution using it reported this check: {health:?}"
    );
    let time_server = servers.get("time").await.unwrap();
    assert!(
        time_server
            .status
            .as_ref()
            .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Ready")),
        "the health write keeps the Ready condition: {time_server:?}"
    );

    run.print_runner_startup();

    run.step("checking Postgres");
    // Postgres: session, stages, executions, timeline, interactions.
    let session = run.store.get_session(&uid).await.unwrap();
    assert_eq!(session.status, SessionStatus::Completed);
    assert!(
        !session.alert_data.contains("hunter2-secret"),
        "alert data must be stored masked: {}",
        session.alert_data
    );
    assert_eq!(
        session.final_analysis.as_deref(),
        status.final_analysis.as_deref()
    );
    let stage_rows = run.store.list_stages(&uid).await.unwrap();
    assert_eq!(stage_rows.len(), 3);
    let exec_rows = run.store.list_session_executions(&uid).await.unwrap();
    assert_eq!(exec_rows.len(), 4);
    assert!(
        exec_rows
            .iter()
            .all(|e| e.status == ExecutionStatus::Completed)
    );
    let timeline = run.store.session_timeline(&uid).await.unwrap();
    let finals = timeline
        .iter()
        .filter(|e| e.event_type == TimelineEventType::FinalAnalysis)
        .count();
    assert_eq!(finals, 4, "one final analysis per execution: {timeline:#?}");
    assert!(
        timeline
            .iter()
            .any(|e| e.content.contains("Synthesis: logrotate stopped")),
        "{timeline:#?}"
    );
    let trace = run.store.session_trace(&uid).await.unwrap();
    // What the session cost: the runners priced each call as they recorded
    // it (the operator the executive summary's), and the Alert says the sum.
    let priced: Vec<Option<f64>> = trace
        .stages
        .iter()
        .flat_map(|s| &s.executions)
        .flat_map(|e| &e.llm_interactions)
        .chain(&trace.session_interactions)
        .map(|i| i.cost_usd)
        .collect();
    assert!(priced.iter().all(Option::is_some), "{priced:?}");
    let sum: f64 = priced.iter().flatten().sum();
    let cost = run.store.session_cost(&uid).await.unwrap().expect("a cost");
    assert!(
        (cost.usd - sum).abs() < 1e-9 && sum > 0.0,
        "{cost:?} vs {sum}"
    );
    assert!(!cost.partial, "{cost:?}");
    let shown = tarsy_core::cost::usd(cost.usd);
    let alerts = run.alerts();
    run.wait("the Alert's status.cost", &alert, 30, async || {
        let a = alerts.get(&alert).await.ok()?;
        let c = a.status?.cost?;
        (c.usd == shown && !c.partial).then_some(())
    })
    .await;
    let llm_calls: usize = trace
        .stages
        .iter()
        .flat_map(|s| &s.executions)
        .map(|e| e.llm_interactions.len())
        .sum();
    assert!(llm_calls >= 5, "LLM interactions recorded: {trace:#?}");
    // Kubernetes Events for the stage transitions.
    let reasons = run.event_reasons(&alert).await;
    assert!(
        reasons.iter().filter(|r| *r == "StageStarted").count() >= 3,
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r == "SessionCompleted"),
        "{reasons:?}"
    );

    let mcp: Vec<_> = trace
        .stages
        .iter()
        .flat_map(|s| &s.executions)
        .flat_map(|e| &e.mcp_interactions)
        .filter(|m| m.tool_name == "get_current_time")
        .collect();
    assert_eq!(
        mcp.len(),
        1,
        "the gamma agent must call mcp-server-time through the bridge sidecar once; \
         MCP interactions: {trace:#?}\ntimeline: {timeline:#?}\n{diag}"
    );
    let call = run.store.get_mcp_interaction(&mcp[0].id).await.unwrap();
    assert!(call.error_message.is_none(), "{call:?}");
    assert_eq!(call.server_name, "time");
    let result = call.tool_result.to_string();
    assert!(
        result.contains("UTC") && result.contains("datetime"),
        "the real server's answer: {result}"
    );
    assert!(
        timeline
            .iter()
            .any(|e| e.event_type == TimelineEventType::LlmToolCall
                && e.content.contains("datetime")),
        "tool result in the timeline: {timeline:#?}"
    );

    // Executive summary, written by the operator (fail-open), in status and row.
    assert_eq!(
        status.executive_summary.as_deref(),
        Some("Executive summary: stopped log rotation filled /var on node-7."),
        "executive summary in Alert status (error: {:?})",
        status.executive_summary_error
    );
    assert_eq!(session.executive_summary, status.executive_summary);

    // Lifecycle events for the API's WebSocket clients (stored + NOTIFY-ed):
    // the session's status changes and every stage's start and end.
    let channel = format!("session:{}", session.id);
    let events = run.store.events_since(&channel, 0, 1000).await.unwrap();
    let lifecycle: Vec<String> = events
        .iter()
        .filter(|e| {
            matches!(
                e.payload["type"].as_str(),
                Some("session.status" | "stage.status")
            )
        })
        .map(|e| {
            format!(
                "{} {} {}",
                e.payload["type"].as_str().unwrap_or_default(),
                e.payload["stage_name"].as_str().unwrap_or("-"),
                e.payload["status"].as_str().unwrap_or_default()
            )
        })
        .collect();
    // The operator publishes the session as it writes its row (pending),
    // then its start.
    assert_eq!(
        lifecycle
            .iter()
            .take(2)
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["session.status - pending", "session.status - in_progress"]
    );
    assert_eq!(
        lifecycle.last().map(String::as_str),
        Some("session.status - completed")
    );
    let stage_events = lifecycle
        .iter()
        .filter(|l| l.starts_with("stage.status"))
        .count();
    assert_eq!(
        stage_events, 6,
        "three stages (incl. synthesis) started and ended: {lifecycle:#?}"
    );

    run.finish().await;
}

/// Agents whose LLM answers never end (until the runner is stopped).
const HANG_SCRIPT: &str = r#"
routes:
  RouteSleeper:
  - ending: {kind: hang}
    chunks:
    - {kind: thinking, content: "Thinking very slowly..."}
  RouteSteady:
  - chunks:
    - {kind: text, content: "Steady finding: nothing unusual."}
    - {kind: usage, input_tokens: 10, output_tokens: 5}
"#;

const HANG_MANIFESTS: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: sleeper}
spec: {description: slow, customInstructions: "You are RouteSleeper."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: steady}
spec: {description: quick, customInstructions: "You are RouteSteady."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: "{p}-slow"}
spec:
  alertTypes: [Slow]
  llmProvider: "{provider}"
  iterationStrategy: langchain
  sessionTimeout: 5m
  stages:
  - name: wait
    agents: [{name: sleeper}]
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: "{p}-short"}
spec:
  alertTypes: [Short]
  llmProvider: "{provider}"
  iterationStrategy: langchain
  sessionTimeout: 6s
  stages:
  - name: wait
    agents: [{name: sleeper}]
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: "{p}-strict"}
spec:
  alertTypes: [Strict]
  llmProvider: "{provider}"
  iterationStrategy: langchain
  sessionTimeout: 5m
  stages:
  - name: both
    successPolicy: all
    agents: [{name: steady}, {name: sleeper}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_the_running_agent() {
    let run = Run::start("cancel", HANG_SCRIPT, HANG_MANIFESTS).await;
    let alert = run.create_alert("a1", "Slow").await;
    let exec = format!("{alert}-s1-sleeper");
    run.wait_execution(&alert, &exec, ExecutionPhase::Active)
        .await;
    // Mid-run: the runner is waiting on the LLM's (never ending) answer.
    tokio::time::sleep(Duration::from_secs(1)).await;
    run.alerts()
        .patch(
            &alert,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"cancel": true}})),
        )
        .await
        .unwrap();
    let done = run.wait_phase(&alert, AlertPhase::Cancelled, 60).await;
    let ae = run.executions().get(&exec).await.unwrap();
    assert_eq!(
        ae.status.unwrap().phase,
        Some(ExecutionPhase::Cancelled),
        "{}",
        run.diagnose(&alert).await
    );
    let uid = done.uid().unwrap();
    let session = run.store.get_session(&uid).await.unwrap();
    assert_eq!(session.status, SessionStatus::Cancelled);
    let rows = run.store.list_session_executions(&uid).await.unwrap();
    assert!(
        rows.iter().all(|r| r.status == ExecutionStatus::Cancelled),
        "{rows:?}"
    );
    if matches!(run.backend, Backend::Emulator(_)) {
        run.wait("the runner process to be gone", &alert, 30, async || {
            run.runner_processes(&alert).is_empty().then_some(())
        })
        .await;
    }
    run.wait("the pod to stop", &alert, 60, async || {
        match run.pods().get_opt(&exec).await.ok()? {
            None => Some(()),
            Some(p) => {
                matches!(p.status?.phase.as_deref(), Some("Succeeded" | "Failed")).then_some(())
            }
        }
    })
    .await;
    run.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_timeout_times_the_alert_out() {
    let run = Run::start("timeout", HANG_SCRIPT, HANG_MANIFESTS).await;
    let alert = run.create_alert("a1", "Short").await;
    let done = run.wait_phase(&alert, AlertPhase::TimedOut, 60).await;
    let exec = format!("{alert}-s1-sleeper");
    let diag = run.diagnose(&alert).await;
    let phase = run
        .executions()
        .get(&exec)
        .await
        .unwrap()
        .status
        .and_then(|s| s.phase);
    // The operator stops the execution at the session deadline (`tarsy.dev/stop:
    // timed_out`); the pod's own activeDeadlineSeconds is only a later backstop.
    assert_eq!(phase, Some(ExecutionPhase::TimedOut), "{diag}");
    println!("[timeout] the execution ended {phase:?}");
    let session = run.store.get_session(&done.uid().unwrap()).await.unwrap();
    assert_eq!(session.status, SessionStatus::TimedOut);
    run.finish().await;
}

/// Without replacement pods (`--pod-restart-limit 0`), an OOM kill fails
/// the execution with the reason, and a strict stage with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oom_killed_pod_fails_its_execution_and_the_strict_stage() {
    let run = Run::start_with(
        "oom",
        HANG_SCRIPT,
        HANG_MANIFESTS,
        &[("TARSY_POD_RESTART_LIMIT", "0")],
    )
    .await;
    let Backend::Emulator(emu) = &run.backend else {
        println!("SKIPPED on a real cluster: OOM simulation is an emulator-only control");
        run.finish().await;
        return;
    };
    let url = emu.url().to_string();
    let alert = run.create_alert("a1", "Strict").await;
    let hog = format!("{alert}-s1-sleeper");
    let steady = format!("{alert}-s1-steady");
    run.wait_execution(&alert, &steady, ExecutionPhase::Completed)
        .await;
    run.wait_execution(&alert, &hog, ExecutionPhase::Active)
        .await;
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let reply = common::http(
        "127.0.0.1",
        port,
        "POST",
        &format!("/kubeemu/v1/namespaces/{}/pods/{hog}/oom", run.ns),
        Some(r#"{"container": "runner"}"#),
    )
    .unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let done = run.wait_phase(&alert, AlertPhase::Failed, 60).await;
    let diag = run.diagnose(&alert).await;
    let st = run.executions().get(&hog).await.unwrap().status.unwrap();
    assert_eq!(st.phase, Some(ExecutionPhase::Failed), "{diag}");
    assert!(
        st.error
            .as_deref()
            .unwrap_or_default()
            .contains("OOMKilled"),
        "{st:?}"
    );
    // successPolicy all: one failed agent fails the stage and the session.
    let status = done.status.clone().unwrap();
    assert_eq!(status.stages[0].phase, ExecutionPhase::Failed, "{diag}");
    assert!(
        status
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("OOMKilled"),
        "{status:?}"
    );
    let session = run.store.get_session(&done.uid().unwrap()).await.unwrap();
    assert_eq!(session.status, SessionStatus::Failed);
    let reasons = run.event_reasons(&hog).await;
    assert!(!reasons.is_empty(), "a Warning Event on the execution");
    run.finish().await;
}

/// Stage one takes a few seconds (slow chunks), so the operator can be
/// killed while it runs.
const RESTART_SCRIPT: &str = r#"
routes:
  RouteSlow:
  - chunk_delay_ms: 1000
    chunks:
    - {kind: thinking, content: "Step one. "}
    - {kind: thinking, content: "Step two. "}
    - {kind: thinking, content: "Step three. "}
    - {kind: text, content: "Slow finding: the node's disk is failing."}
    - {kind: usage, input_tokens: 10, output_tokens: 5}
  RouteAfter:
  - chunks:
    - {kind: text, content: "After finding: replace the disk."}
    - {kind: usage, input_tokens: 10, output_tokens: 5}
"#;

const RESTART_MANIFESTS: &str = r#"
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: slow}
spec: {description: slow, customInstructions: "You are RouteSlow."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {name: after}
spec: {description: after, customInstructions: "You are RouteAfter."}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {name: "{p}-chain"}
spec:
  alertTypes: [Restart]
  llmProvider: "{provider}"
  iterationStrategy: langchain
  sessionTimeout: 5m
  stages:
  - name: first
    agents: [{name: slow}]
  - name: second
    agents: [{name: after}]
"#;

/// A runner pod killed in the middle of stage one (OOM kill on the
/// emulator, pod deletion on a real cluster) is replaced; the replacement
/// resumes the execution from its stored conversation and the session
/// completes, the cause visible in status and Events, nothing duplicated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_pod_killed_mid_execution_is_replaced_and_the_session_completes() {
    let run = Run::start("replace", RESTART_SCRIPT, RESTART_MANIFESTS).await;
    let alert = run.create_alert("a1", "Restart").await;
    let first = format!("{alert}-s1-slow");
    run.wait_execution(&alert, &first, ExecutionPhase::Active)
        .await;
    // Part of the answer is stored before the kill.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    match &run.backend {
        Backend::Emulator(emu) => {
            let port: u16 = emu.url().rsplit(':').next().unwrap().parse().unwrap();
            let reply = common::http(
                "127.0.0.1",
                port,
                "POST",
                &format!("/kubeemu/v1/namespaces/{}/pods/{first}/oom", run.ns),
                Some(r#"{"container": "runner"}"#),
            )
            .unwrap();
            assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        }
        Backend::Cluster => {
            run.pods()
                .delete(&first, &DeleteParams::default())
                .await
                .unwrap();
        }
    }
    let done = run.wait_phase(&alert, AlertPhase::Completed, 120).await;
    let diag = run.diagnose(&alert).await;
    let st = run.executions().get(&first).await.unwrap().status.unwrap();
    assert_eq!(st.phase, Some(ExecutionPhase::Completed), "{diag}");
    assert_eq!(st.pod_restarts, Some(1), "{diag}");
    let reasons = run.event_reasons(&first).await;
    assert!(reasons.iter().any(|r| r == "PodReplaced"), "{reasons:?}");
    let status = done.status.unwrap();
    assert_eq!(
        status.final_analysis.as_deref(),
        Some("After finding: replace the disk."),
        "{diag}"
    );
    let uid = done.metadata.uid.clone().unwrap();
    let timeline = run.store.session_timeline(&uid).await.unwrap();
    let mut keys: Vec<(String, i64)> = timeline
        .iter()
        .map(|e| {
            (
                e.scope.execution_id.clone().unwrap_or_default(),
                e.sequence_number,
            )
        })
        .collect();
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n, "duplicate timeline events: {timeline:#?}");
    assert!(
        timeline
            .iter()
            .all(|e| e.status != tarsy_core::TimelineEventStatus::Streaming),
        "{timeline:#?}"
    );
    let finals = timeline
        .iter()
        .filter(|e| e.event_type == TimelineEventType::FinalAnalysis)
        .count();
    assert_eq!(finals, 2, "{timeline:#?}");
    // Resumed, not started over: one conversation, begun once.
    let rows = run.store.list_session_executions(&uid).await.unwrap();
    let slow = rows.iter().find(|r| r.agent_name == "slow").unwrap();
    let messages = run.store.list_messages(&slow.id).await.unwrap();
    let system = messages
        .iter()
        .filter(|m| m.role == tarsy_core::MessageRole::System)
        .count();
    assert_eq!(system, 1, "{messages:#?}");
    run.finish().await;
}

/// Postgres stopped as a managed database's failover stops it (`pg_ctl
/// stop -m fast`) while stage one streams, and started again 10 s later:
/// the runner's writes wait it out, the operator's reconciles are retried,
/// and the session completes with nothing duplicated and nothing left open.
/// The emulator only: the test stops a Postgres of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_restart_mid_session_is_waited_out() {
    if real_cluster_kubeconfig().is_some() {
        println!("skipped on a real cluster: this scenario stops the test's own Postgres");
        return;
    }
    let pg = tarsy_store::testing::faults::PrivatePostgres::start();
    // The schema, as the operator would apply it.
    Store::connect(&pg.url()).await.unwrap().close().await;
    let run = Run::start_on("pgrestart", RESTART_SCRIPT, RESTART_MANIFESTS, pg.url()).await;
    let alert = run.create_alert("a1", "Restart").await;
    let first = format!("{alert}-s1-slow");
    run.wait_execution(&alert, &first, ExecutionPhase::Active)
        .await;
    // Part of the answer is stored, the rest streams during the outage.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    run.step("stopping Postgres");
    let pg = tokio::task::spawn_blocking(move || {
        pg.stop();
        pg
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    run.step("starting Postgres again");
    let pg = tokio::task::spawn_blocking(move || {
        pg.resume();
        pg
    })
    .await
    .unwrap();

    let done = run.wait_phase(&alert, AlertPhase::Completed, 180).await;
    let diag = run.diagnose(&alert).await;
    let status = done.status.clone().unwrap();
    assert_eq!(
        status.final_analysis.as_deref(),
        Some("After finding: replace the disk."),
        "{diag}"
    );
    let uid = done.metadata.uid.clone().unwrap();
    let session = run.store.get_session(&uid).await.unwrap();
    assert_eq!(session.status, SessionStatus::Completed, "{diag}");
    let timeline = run.store.session_timeline(&uid).await.unwrap();
    let mut keys: Vec<(String, i64)> = timeline
        .iter()
        .map(|e| {
            (
                e.scope.execution_id.clone().unwrap_or_default(),
                e.sequence_number,
            )
        })
        .collect();
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n, "duplicate timeline events: {timeline:#?}");
    let finals = timeline
        .iter()
        .filter(|e| e.event_type == TimelineEventType::FinalAnalysis)
        .count();
    assert_eq!(finals, 2, "{timeline:#?}");
    let open = run.store.open_records_in_terminal_sessions().await.unwrap();
    assert!(open.is_empty(), "records left open: {open:?}");
    // Waited out, not started over: one conversation, begun once.
    let rows = run.store.list_session_executions(&uid).await.unwrap();
    let slow = rows.iter().find(|r| r.agent_name == "slow").unwrap();
    let messages = run.store.list_messages(&slow.id).await.unwrap();
    let system = messages
        .iter()
        .filter(|m| m.role == tarsy_core::MessageRole::System)
        .count();
    assert_eq!(system, 1, "{messages:#?}");
    run.finish().await;
    drop(pg);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_restart_mid_session_completes_without_duplicates() {
    let mut run = Run::start("restart", RESTART_SCRIPT, RESTART_MANIFESTS).await;
    let alert = run.create_alert("a1", "Restart").await;
    let first = format!("{alert}-s1-slow");
    run.wait_execution(&alert, &first, ExecutionPhase::Active)
        .await;
    run.controller.as_mut().unwrap().kill();
    // Stage one finishes while no operator runs: nobody may start stage two.
    run.wait_execution(&alert, &first, ExecutionPhase::Completed)
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        run.children(&alert).await.len(),
        1,
        "no operator, no stage two"
    );
    run.start_controller();
    let done = run.wait_phase(&alert, AlertPhase::Completed, 90).await;
    let diag = run.diagnose(&alert).await;
    let uid = done.uid().unwrap();
    let status = done.status.unwrap();
    assert_eq!(status.stages.len(), 2, "{diag}");
    assert_eq!(
        status.final_analysis.as_deref(),
        Some("After finding: replace the disk.")
    );
    assert_eq!(run.children(&alert).await.len(), 2, "{diag}");
    assert_eq!(run.store.list_stages(&uid).await.unwrap().len(), 2);
    let rows = run.store.list_session_executions(&uid).await.unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let timeline = run.store.session_timeline(&uid).await.unwrap();
    let mut keys: Vec<(String, i64)> = timeline
        .iter()
        .map(|e| {
            (
                e.scope.execution_id.clone().unwrap_or_default(),
                e.sequence_number,
            )
        })
        .collect();
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n, "duplicate timeline events: {timeline:#?}");
    let finals = timeline
        .iter()
        .filter(|e| e.event_type == TimelineEventType::FinalAnalysis)
        .count();
    assert_eq!(finals, 2, "{timeline:#?}");
    run.finish().await;
}

/// The fallback provider's answers (the scenario's `{provider}`): every
/// session replays its script from the start.
const BREAKER_SCRIPT: &str = r#"
sequential:
- chunks:
  - {kind: text, content: "Backup provider: the disk filled with rotated logs."}
  - {kind: usage, input_tokens: 40, output_tokens: 8}
"#;

/// A primary provider that fails every call with a retryable error.
const FLAKY_SCRIPT: &str = r#"
sequential:
- chunks:
  - {kind: error, message: "provider overloaded", code: max_retries, retryable: true}
- chunks:
  - {kind: error, message: "provider overloaded", code: max_retries, retryable: true}
"#;

/// Two consecutive executions in separate runner pods: the first sees the
/// primary provider fail (and falls back), which opens its circuit in the
/// shared store; the second goes straight to the fallback provider without
/// calling the primary at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_circuit_opened_by_one_runner_sends_the_next_straight_to_the_fallback() {
    let run = Run::start_with(
        "breaker",
        BREAKER_SCRIPT,
        "",
        &[("TARSY_CIRCUIT_BREAKER_THRESHOLD", "1")],
    )
    .await;
    let flaky = run.write_script("flaky.yaml", FLAKY_SCRIPT);
    let manifests = format!(
        r#"
apiVersion: tarsy.dev/v1alpha1
kind: LLMProvider
metadata: {{name: breaker-flaky}}
spec: {{type: scripted, model: flaky-model, script: "{flaky}", fallback: [scripted-breaker]}}
---
apiVersion: tarsy.dev/v1alpha1
kind: Agent
metadata: {{name: looker}}
spec: {{description: looks, customInstructions: "Find the cause."}}
---
apiVersion: tarsy.dev/v1alpha1
kind: Chain
metadata: {{name: breaker-chain}}
spec:
  alertTypes: [Flaky]
  llmProvider: breaker-flaky
  executiveSummaryProvider: scripted-breaker
  iterationStrategy: langchain
  sessionTimeout: 5m
  stages:
  - name: look
    agents: [{{name: looker}}]
"#,
        flaky = flaky.display()
    );
    apply_yaml(&run.client, &run.ns, &manifests).await;

    let providers_called = async |uid: &str| -> Vec<String> {
        let trace = run.store.session_trace(uid).await.unwrap();
        trace
            .stages
            .iter()
            .flat_map(|s| &s.executions)
            .flat_map(|e| &e.llm_interactions)
            .map(|i| i.provider.clone())
            .collect()
    };
    let fallbacks = async |uid: &str| -> Vec<String> {
        run.store
            .session_timeline(uid)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.event_type == TimelineEventType::ProviderFallback)
            .map(|e| e.content)
            .collect()
    };

    let first = run.create_alert("a1", "Flaky").await;
    let done = run.wait_phase(&first, AlertPhase::Completed, 120).await;
    let uid = done.uid().unwrap();
    assert_eq!(
        providers_called(&uid).await,
        ["breaker-flaky", "scripted-breaker"],
        "{}",
        run.diagnose(&first).await
    );
    let moves = fallbacks(&uid).await;
    assert_eq!(moves.len(), 1, "{moves:?}");
    assert!(moves[0].contains("provider overloaded"), "{moves:?}");
    let open = tarsy_exec::breakers::open_circuits(&run.store)
        .await
        .unwrap();
    assert_eq!(
        open.iter()
            .map(|c| (c.scope.as_str(), c.provider.as_str()))
            .collect::<Vec<_>>(),
        [(run.ns.as_str(), "breaker-flaky")],
        "the first execution opened the shared circuit"
    );

    let second = run.create_alert("a2", "Flaky").await;
    let done = run.wait_phase(&second, AlertPhase::Completed, 120).await;
    let uid = done.uid().unwrap();
    assert_eq!(
        providers_called(&uid).await,
        ["scripted-breaker"],
        "the second execution must not call the open provider: {}",
        run.diagnose(&second).await
    );
    let moves = fallbacks(&uid).await;
    assert_eq!(moves.len(), 1, "{moves:?}");
    assert!(moves[0].contains("circuit breaker open"), "{moves:?}");
    assert_eq!(
        done.status.unwrap().final_analysis.as_deref(),
        Some("Backup provider: the disk filled with rotated logs.")
    );
    run.finish().await;
}
