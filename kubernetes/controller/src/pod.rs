//! The investigation pod of one AgentExecution (created by the execution
//! reconcile, [`crate::execution`]; see `docs/architecture.md#cluster-mode`).
//! Pure: the same inputs always give the same Pod, so it is snapshot-tested.
//!
//! Layout:
//! - init container `tarsy-bin` (only when a stdio server is used): copies
//!   the `tarsy` binary into the shared `emptyDir` mounted at `/tarsy-bin`;
//! - one native sidecar (init container with `restartPolicy: Always` and a
//!   TCP readiness probe) per MCP server: `container` servers run their own
//!   image, `stdio` servers run `/tarsy-bin/tarsy mcp-bridge --port N --
//!   CMD ARGS` in their image; remote `url` servers need none;
//! - container `runner`: `tarsy runner --execution NAMESPACE/NAME`.
//!
//! Secret values never appear: environment variables use `secretKeyRef`,
//! CA bundles are Secret volumes.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource, KeyToPath,
    ObjectFieldSelector, Pod, PodSpec, Probe, ResourceRequirements, SecretKeySelector,
    SecretVolumeSource, TCPSocketAction, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;
use tarsy_crds::{AgentExecution, EnvVarSpec, MCPServerSpec, SecretKeyRef};

use tarsy_crds::contract::runner_env as env;
use tarsy_crds::contract::{
    LABEL_ALERT, LABEL_EXECUTION, LABEL_MANAGED_BY, LABEL_SESSION, MANAGED_BY, dns_label,
    label_value, secret_env_name,
};

/// Name of the runner container.
pub const RUNNER_CONTAINER: &str = "runner";
/// Name of the init container that copies the `tarsy` binary.
pub const BIN_COPY_CONTAINER: &str = "tarsy-bin";
/// Where the shared `emptyDir` with the `tarsy` binary is mounted.
pub const BIN_DIR: &str = "/tarsy-bin";
const BIN_VOLUME: &str = "tarsy-bin";

/// Where the CA bundle of a remote server's `tls.caSecretRef` is mounted
/// (`{dir}/{server}/{key}`), as `tarsy-config` expects.
pub use tarsy_config::convert::POD_CA_DIR;

/// Operator-wide settings of investigation pods.
#[derive(Debug, Clone, PartialEq)]
pub struct PodSettings {
    /// The `tarsy` image: runs the runner and provides the bridge binary.
    pub tarsy_image: String,
    /// Image pull policy of every container (`None`: the cluster default).
    pub image_pull_policy: Option<String>,
    /// Default image of stdio servers that name none.
    pub mcp_runtime_image: String,
    /// Service account when the chain names none (the investigator account).
    pub default_service_account: String,
    /// Secret key holding the Postgres URL.
    pub database_url_secret: SecretKeyRef,
    /// Secret key holding the runbook token (private runbook repositories);
    /// it must exist in every namespace investigations run in.
    pub runbook_token_secret: Option<SecretKeyRef>,
    /// Address of the LLM service, e.g. `http://tarsy-llm:50051`.
    pub llm_service_addr: String,
    /// First port given to stdio bridges (ports used by container servers are skipped).
    pub bridge_port_base: u16,
    /// Command of the init container, run in `tarsy_image`, that copies the
    /// binary to `/tarsy-bin/tarsy`.
    pub bin_copy_command: Vec<String>,
    /// Resources of the runner container.
    pub runner_resources: Option<ResourceRequirements>,
    /// Resources of each MCP sidecar.
    pub sidecar_resources: Option<ResourceRequirements>,
    /// The operator's defaults, as the runner reads them from its
    /// environment (`tarsy_config::Defaults::to_env`): runbook hosts,
    /// masking, the session timeout of executions without a deadline.
    pub runner_defaults: Vec<(String, String)>,
}

impl PodSettings {
    /// Settings with the given image and defaults for the rest.
    pub fn new(tarsy_image: impl Into<String>) -> Self {
        let tarsy_image = tarsy_image.into();
        Self {
            mcp_runtime_image: tarsy_image.clone(),
            tarsy_image,
            image_pull_policy: None,
            default_service_account: "tarsy-investigator".into(),
            database_url_secret: SecretKeyRef {
                name: "tarsy-database".into(),
                key: "url".into(),
            },
            runbook_token_secret: None,
            llm_service_addr: "http://tarsy-llm-service:50051".into(),
            bridge_port_base: 9100,
            bin_copy_command: vec![
                "cp".into(),
                "/usr/local/bin/tarsy".into(),
                format!("{BIN_DIR}/tarsy"),
            ],
            runner_resources: None,
            sidecar_resources: None,
            runner_defaults: Vec::new(),
        }
    }
}

/// What one pod needs besides the settings.
#[derive(Debug, Clone, Copy)]
pub struct PodInputs<'a> {
    /// The execution to run (must carry name, namespace and uid).
    pub execution: &'a AgentExecution,
    /// Name of the owning Alert (label).
    pub alert_name: &'a str,
    /// The MCP servers the execution uses, by name, already resolved.
    pub servers: &'a BTreeMap<String, MCPServerSpec>,
    /// The chain's investigator service account, if it names one.
    pub service_account: Option<&'a str>,
    /// `activeDeadlineSeconds`: the time left of the session timeout.
    pub deadline_seconds: i64,
}

/// Why a pod cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodError {
    /// The execution lacks metadata the pod needs (it was never stored).
    #[error("AgentExecution has no {0}")]
    MissingMetadata(&'static str),
    /// Two sidecars would listen on the same port.
    #[error("MCP servers {first:?} and {second:?} both listen on port {port}")]
    PortConflict {
        /// First server.
        first: String,
        /// Second server.
        second: String,
        /// The port.
        port: u16,
    },
    /// No free port is left for a stdio bridge.
    #[error("no free port left for the mcp-bridge of {0:?}")]
    NoBridgePort(String),
    /// A server has no transport (validation should have caught it).
    #[error("MCP server {0:?} sets none of container, stdio or url")]
    NoTransport(String),
}

/// The ports a pod's MCP servers listen on: container servers on their own
/// port, stdio servers on bridge ports assigned in name order from
/// `base`, skipping taken ports. Deterministic, so the runner (given the
/// same map through [`env::BRIDGE_PORTS`]) and the pod always agree.
pub fn assign_ports(
    servers: &BTreeMap<String, MCPServerSpec>,
    base: u16,
) -> Result<BTreeMap<String, u16>, PodError> {
    let mut taken: BTreeMap<u16, String> = BTreeMap::new();
    let mut ports = BTreeMap::new();
    for (name, spec) in servers {
        if let Some(c) = &spec.container {
            if let Some(first) = taken.insert(c.port, name.clone()) {
                return Err(PodError::PortConflict {
                    first,
                    second: name.clone(),
                    port: c.port,
                });
            }
            ports.insert(name.clone(), c.port);
        }
    }
    let mut next = base;
    for (name, spec) in servers {
        if spec.stdio.is_some() {
            while taken.contains_key(&next) {
                next = next
                    .checked_add(1)
                    .ok_or_else(|| PodError::NoBridgePort(name.clone()))?;
            }
            taken.insert(next, name.clone());
            ports.insert(name.clone(), next);
        }
    }
    Ok(ports)
}

/// Builds the investigation pod of `inputs.execution`.
pub fn build_pod(inputs: &PodInputs<'_>, settings: &PodSettings) -> Result<Pod, PodError> {
    let ae = inputs.execution;
    let meta = ae.meta();
    let name = meta.name.clone().ok_or(PodError::MissingMetadata("name"))?;
    let namespace = meta
        .namespace
        .clone()
        .ok_or(PodError::MissingMetadata("namespace"))?;
    let uid = meta.uid.clone().ok_or(PodError::MissingMetadata("uid"))?;

    let ports = assign_ports(inputs.servers, settings.bridge_port_base)?;
    let uses_stdio = inputs.servers.values().any(|s| s.stdio.is_some());

    let mut init_containers = Vec::new();
    let mut volumes = Vec::new();
    if uses_stdio {
        volumes.push(Volume {
            name: BIN_VOLUME.into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        });
        init_containers.push(Container {
            name: BIN_COPY_CONTAINER.into(),
            image: Some(settings.tarsy_image.clone()),
            image_pull_policy: settings.image_pull_policy.clone(),
            command: Some(settings.bin_copy_command.clone()),
            volume_mounts: Some(vec![bin_mount(false)]),
            ..Container::default()
        });
    }

    let mut runner_env = vec![
        plain_env(env::EXECUTION, format!("{namespace}/{name}")),
        secret_env(env::DATABASE_URL, &settings.database_url_secret),
        plain_env(env::LLM_SERVICE, settings.llm_service_addr.clone()),
        field_env(env::POD_NAME, "metadata.name"),
        field_env(env::POD_NAMESPACE, "metadata.namespace"),
    ];
    if let Some(r) = &settings.runbook_token_secret {
        runner_env.push(secret_env(env::RUNBOOK_TOKEN, r));
    }
    let mut runner_mounts = Vec::new();
    let mut endpoints = Vec::new();
    let mut bridge_ports = Vec::new();

    for (server, spec) in inputs.servers {
        if let Some(c) = &spec.container {
            let port = c.port;
            init_containers.push(Container {
                name: sidecar_name(server),
                image: Some(c.image.clone()),
                image_pull_policy: settings.image_pull_policy.clone(),
                command: c.command.clone(),
                args: (!c.args.is_empty()).then(|| c.args.clone()),
                env: env_list(&c.env),
                ports: Some(vec![container_port(port)]),
                readiness_probe: Some(tcp_probe(port)),
                startup_probe: Some(startup_probe(port)),
                resources: settings.sidecar_resources.clone(),
                restart_policy: Some("Always".into()),
                ..Container::default()
            });
            let path = c
                .path
                .as_deref()
                .unwrap_or(tarsy_config::convert::DEFAULT_MCP_PATH);
            endpoints.push(format!("{server}=http://127.0.0.1:{port}{path}"));
        } else if let Some(stdio) = &spec.stdio {
            let port = *ports
                .get(server)
                .ok_or_else(|| PodError::NoBridgePort(server.clone()))?;
            // The kubelet probes the pod IP, so the bridge listens on all
            // interfaces; the chart's NetworkPolicy keeps others out.
            let mut args = vec![
                "mcp-bridge".to_string(),
                "--listen".to_string(),
                "0.0.0.0".to_string(),
                "--port".to_string(),
                port.to_string(),
                "--".to_string(),
                stdio.command.clone(),
            ];
            args.extend(stdio.args.iter().cloned());
            init_containers.push(Container {
                name: sidecar_name(server),
                image: Some(
                    stdio
                        .image
                        .clone()
                        .unwrap_or_else(|| settings.mcp_runtime_image.clone()),
                ),
                image_pull_policy: settings.image_pull_policy.clone(),
                command: Some(vec![format!("{BIN_DIR}/tarsy")]),
                args: Some(args),
                env: env_list(&stdio.env),
                ports: Some(vec![container_port(port)]),
                readiness_probe: Some(tcp_probe(port)),
                startup_probe: Some(startup_probe(port)),
                resources: settings.sidecar_resources.clone(),
                restart_policy: Some("Always".into()),
                volume_mounts: Some(vec![bin_mount(true)]),
                ..Container::default()
            });
            bridge_ports.push(format!("{server}={port}"));
            endpoints.push(format!(
                "{server}=http://127.0.0.1:{port}{}",
                tarsy_config::convert::DEFAULT_MCP_PATH
            ));
        } else if spec.url.is_some() {
            if let Some(r) = &spec.bearer_token_secret_ref {
                runner_env.push(secret_env(&secret_env_name(r), r));
            }
            if let Some(r) = spec.tls.as_ref().and_then(|t| t.ca_secret_ref.as_ref()) {
                let volume = dns_label(&format!("ca-{server}"));
                volumes.push(Volume {
                    name: volume.clone(),
                    secret: Some(SecretVolumeSource {
                        secret_name: Some(r.name.clone()),
                        items: Some(vec![KeyToPath {
                            key: r.key.clone(),
                            path: r.key.clone(),
                            mode: None,
                        }]),
                        ..SecretVolumeSource::default()
                    }),
                    ..Volume::default()
                });
                runner_mounts.push(VolumeMount {
                    name: volume,
                    mount_path: format!("{POD_CA_DIR}/{server}"),
                    read_only: Some(true),
                    ..VolumeMount::default()
                });
            }
        } else {
            return Err(PodError::NoTransport(server.clone()));
        }
    }
    if !bridge_ports.is_empty() {
        runner_env.push(plain_env(env::BRIDGE_PORTS, bridge_ports.join(",")));
    }
    if !endpoints.is_empty() {
        runner_env.push(plain_env(env::MCP_ENDPOINTS, endpoints.join(",")));
    }
    for (name, value) in &settings.runner_defaults {
        runner_env.push(plain_env(name, value.clone()));
    }

    let runner = Container {
        name: RUNNER_CONTAINER.into(),
        image: Some(settings.tarsy_image.clone()),
        image_pull_policy: settings.image_pull_policy.clone(),
        command: Some(vec!["tarsy".into()]),
        args: Some(vec![
            "runner".into(),
            "--execution".into(),
            format!("{namespace}/{name}"),
        ]),
        env: Some(runner_env),
        resources: settings.runner_resources.clone(),
        volume_mounts: (!runner_mounts.is_empty()).then_some(runner_mounts),
        ..Container::default()
    };

    let labels = BTreeMap::from([
        (LABEL_ALERT.to_string(), label_value(inputs.alert_name)),
        (LABEL_EXECUTION.to_string(), label_value(&name)),
        (LABEL_SESSION.to_string(), label_value(&ae.spec.session_id)),
        (LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string()),
    ]);

    Ok(Pod {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace),
            labels: Some(labels),
            owner_references: Some(vec![OwnerReference {
                api_version: tarsy_crds::API_VERSION.into(),
                kind: "AgentExecution".into(),
                name,
                uid,
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            active_deadline_seconds: Some(inputs.deadline_seconds.max(1)),
            service_account_name: Some(
                inputs
                    .service_account
                    .unwrap_or(&settings.default_service_account)
                    .to_string(),
            ),
            init_containers: (!init_containers.is_empty()).then_some(init_containers),
            containers: vec![runner],
            volumes: (!volumes.is_empty()).then_some(volumes),
            ..PodSpec::default()
        }),
        status: None,
    })
}

/// Every Secret key `(name, key)` a server references (its Ready condition
/// checks that they exist).
pub fn referenced_secrets(spec: &MCPServerSpec) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    let env = spec
        .container
        .as_ref()
        .map(|c| c.env.as_slice())
        .into_iter()
        .chain(spec.stdio.as_ref().map(|s| s.env.as_slice()))
        .flatten();
    for var in env {
        if let Some(from) = &var.value_from {
            out.insert(key_of(&from.secret_key_ref));
        }
    }
    if let Some(r) = &spec.bearer_token_secret_ref {
        out.insert(key_of(r));
    }
    if let Some(r) = spec.tls.as_ref().and_then(|t| t.ca_secret_ref.as_ref()) {
        out.insert(key_of(r));
    }
    out
}

fn key_of(r: &SecretKeyRef) -> (String, String) {
    (r.name.clone(), r.key.clone())
}

fn sidecar_name(server: &str) -> String {
    dns_label(&format!("mcp-{server}"))
}

fn bin_mount(read_only: bool) -> VolumeMount {
    VolumeMount {
        name: BIN_VOLUME.into(),
        mount_path: BIN_DIR.into(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

fn container_port(port: u16) -> ContainerPort {
    ContainerPort {
        container_port: i32::from(port),
        name: None,
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    }
}

fn tcp_probe(port: u16) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction {
            host: None,
            port: IntOrString::Int(i32::from(port)),
        }),
        period_seconds: Some(2),
        failure_threshold: Some(30),
        ..Probe::default()
    }
}

/// Native sidecars hold back the next container only until their startup
/// probe passes (readiness is not waited for): without it the runner could
/// start before its MCP servers listen.
fn startup_probe(port: u16) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction {
            host: None,
            port: IntOrString::Int(i32::from(port)),
        }),
        period_seconds: Some(1),
        failure_threshold: Some(120),
        ..Probe::default()
    }
}

fn plain_env(name: &str, value: String) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value),
        value_from: None,
    }
}

fn secret_env(name: &str, r: &SecretKeyRef) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: r.name.clone(),
                key: r.key.clone(),
                optional: None,
            }),
            ..EnvVarSource::default()
        }),
    }
}

fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: path.into(),
            }),
            ..EnvVarSource::default()
        }),
    }
}

fn env_list(vars: &[EnvVarSpec]) -> Option<Vec<EnvVar>> {
    if vars.is_empty() {
        return None;
    }
    Some(
        vars.iter()
            .map(|v| match &v.value_from {
                Some(from) => secret_env(&v.name, &from.secret_key_ref),
                None => plain_env(&v.name, v.value.clone().unwrap_or_default()),
            })
            .collect(),
    )
}
