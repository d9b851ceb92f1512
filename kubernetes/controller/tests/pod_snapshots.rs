//! Golden-file tests of the investigation pod. Set `TARSY_UPDATE_SNAPSHOTS=1`
//! to rewrite the files after an intended change, then review the diff.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Pod;
use kube::api::ObjectMeta;
use tarsy_controller::pod::{PodError, PodInputs, PodSettings, build_pod};
use tarsy_crds::{
    AgentExecution, AgentExecutionSpec, Backend, ContainerSpec, EnvVarSource, EnvVarSpec,
    ExecutionKind, IterationStrategy, MCPServerSpec, ResolvedConfigSpec, SecretKeyRef, StageRef,
    StdioSpec, TlsSpec,
};

fn execution() -> AgentExecution {
    let mut ae = AgentExecution::new(
        "pod-crash-s1-kubernetesagent",
        AgentExecutionSpec {
            session_id: "0b7c1f2e-3c4d-4e5f-8a9b-0c1d2e3f4a5b".into(),
            alert_name: "pod-crash".into(),
            chain: "kubernetes".into(),
            stage: StageRef {
                index: 1,
                name: "investigate".into(),
                id: None,
            },
            agent_name: "KubernetesAgent".into(),
            display_name: "KubernetesAgent".into(),
            agent_index: 1,
            kind: ExecutionKind::Investigation,
            resolved: ResolvedConfigSpec {
                iteration_strategy: IterationStrategy::NativeThinking,
                backend: Backend::GoogleNative,
                llm_provider: "google-default".into(),
                max_iterations: 20,
                iteration_timeout: "120s".into(),
                mcp_servers: vec!["kubernetes-server".into()],
                tool_filter: BTreeMap::new(),
                custom_instructions: String::new(),
                native_tools_override: None,
                fail_on_unavailable_server: false,
                budget: None,
            },
            chat: None,
            deadline: None,
        },
    );
    ae.metadata = ObjectMeta {
        name: Some("pod-crash-s1-kubernetesagent".into()),
        namespace: Some("tarsy".into()),
        uid: Some("5e8a1d7c-0000-4000-8000-000000000001".into()),
        ..ObjectMeta::default()
    };
    ae
}

fn secret_env(name: &str, secret: &str, key: &str) -> EnvVarSpec {
    EnvVarSpec {
        name: name.into(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: SecretKeyRef {
                name: secret.into(),
                key: key.into(),
            },
        }),
    }
}

fn empty_server() -> MCPServerSpec {
    serde_json::from_value(serde_json::json!({})).unwrap()
}

fn container_server() -> MCPServerSpec {
    MCPServerSpec {
        container: Some(ContainerSpec {
            image: "ghcr.io/example/prometheus-mcp:1.2".into(),
            command: None,
            args: vec!["--listen=:8080".into()],
            env: vec![
                EnvVarSpec {
                    name: "PROM_URL".into(),
                    value: Some("http://prometheus:9090".into()),
                    value_from: None,
                },
                secret_env("PROM_TOKEN", "prometheus-creds", "token"),
            ],
            port: 8080,
            path: None,
        }),
        ..empty_server()
    }
}

fn stdio_server() -> MCPServerSpec {
    MCPServerSpec {
        stdio: Some(StdioSpec {
            command: "npx".into(),
            args: vec!["-y".into(), "kubernetes-mcp-server@latest".into()],
            env: vec![secret_env("API_TOKEN", "kube-mcp", "api-token")],
            image: Some("node:22-slim".into()),
        }),
        ..empty_server()
    }
}

fn url_server() -> MCPServerSpec {
    MCPServerSpec {
        url: Some("https://mcp.example/mcp".into()),
        bearer_token_secret_ref: Some(SecretKeyRef {
            name: "remote-mcp".into(),
            key: "bearer".into(),
        }),
        tls: Some(TlsSpec {
            insecure_skip_verify: None,
            ca_secret_ref: Some(SecretKeyRef {
                name: "remote-ca".into(),
                key: "ca.pem".into(),
            }),
            ca_file: None,
        }),
        ..empty_server()
    }
}

fn render(servers: &BTreeMap<String, MCPServerSpec>, sa: Option<&str>) -> Pod {
    let ae = execution();
    let inputs = PodInputs {
        execution: &ae,
        alert_name: "pod-crash",
        servers,
        service_account: sa,
        deadline_seconds: 900,
    };
    build_pod(&inputs, &PodSettings::new("ghcr.io/tarsy-dev/tarsy:0.1.0")).unwrap()
}

fn check_snapshot(name: &str, pod: &Pod) {
    let yaml = serde_yaml::to_string(pod).unwrap();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(format!("{name}.yaml"));
    if std::env::var_os("TARSY_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &yaml).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing snapshot {}; run with TARSY_UPDATE_SNAPSHOTS=1",
            path.display()
        )
    });
    assert_eq!(
        yaml, expected,
        "pod {name} differs from its snapshot; rerun with TARSY_UPDATE_SNAPSHOTS=1 if intended"
    );
}

#[test]
fn pod_with_every_kind_of_mcp_server() {
    let servers = BTreeMap::from([
        ("kubernetes-server".to_string(), stdio_server()),
        ("prometheus".to_string(), container_server()),
        ("remote".to_string(), url_server()),
    ]);
    let pod = render(&servers, Some("team-a-investigator"));
    check_snapshot("pod_all_server_kinds", &pod);
}

#[test]
fn pod_without_mcp_servers_has_only_the_runner() {
    let pod = render(&BTreeMap::new(), None);
    let spec = pod.spec.as_ref().unwrap();
    assert!(spec.init_containers.is_none());
    assert!(spec.volumes.is_none());
    assert_eq!(
        spec.service_account_name.as_deref(),
        Some("tarsy-investigator")
    );
    check_snapshot("pod_runner_only", &pod);
}

#[test]
fn sidecars_are_native_and_probed() {
    let servers = BTreeMap::from([
        ("kubernetes-server".to_string(), stdio_server()),
        ("prometheus".to_string(), container_server()),
    ]);
    let pod = render(&servers, None);
    let spec = pod.spec.unwrap();
    let inits = spec.init_containers.unwrap();
    // The binary copy runs first so that the bridge finds it.
    assert_eq!(inits[0].name, "tarsy-bin");
    assert!(inits[0].restart_policy.is_none());
    for sidecar in &inits[1..] {
        assert_eq!(sidecar.restart_policy.as_deref(), Some("Always"));
        let probe = sidecar.readiness_probe.as_ref().unwrap();
        let port = &probe.tcp_socket.as_ref().unwrap().port;
        let listen = sidecar.ports.as_ref().unwrap()[0].container_port;
        assert_eq!(
            *port,
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(listen)
        );
    }
    let bridge = inits
        .iter()
        .find(|c| c.name == "mcp-kubernetes-server")
        .unwrap();
    assert_eq!(
        bridge.command.as_deref(),
        Some(&["/tarsy-bin/tarsy".to_string()][..])
    );
    let args = bridge.args.as_ref().unwrap();
    assert_eq!(
        &args[..6],
        ["mcp-bridge", "--listen", "0.0.0.0", "--port", "9100", "--"]
    );
    assert_eq!(&args[6..], ["npx", "-y", "kubernetes-mcp-server@latest"]);
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(spec.active_deadline_seconds, Some(900));
}

#[test]
fn no_secret_value_is_inlined() {
    let servers = BTreeMap::from([
        ("kubernetes-server".to_string(), stdio_server()),
        ("prometheus".to_string(), container_server()),
        ("remote".to_string(), url_server()),
    ]);
    let pod = render(&servers, None);
    let spec = pod.spec.unwrap();
    let all = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    let mut secret_refs = 0;
    for c in all {
        for e in c.env.iter().flatten() {
            if e.value_from
                .as_ref()
                .is_some_and(|f| f.secret_key_ref.is_some())
            {
                assert!(e.value.is_none());
                secret_refs += 1;
            }
        }
    }
    // database URL, PROM_TOKEN, API_TOKEN, the remote bearer token.
    assert_eq!(secret_refs, 4);
}

/// The runbook token reaches the runner from its Secret, never as a value.
#[test]
fn the_runbook_token_comes_from_its_secret() {
    let ae = execution();
    let mut settings = PodSettings::new("img");
    settings.runbook_token_secret = Some(SecretKeyRef {
        name: "runbook-token".into(),
        key: "token".into(),
    });
    let servers = BTreeMap::new();
    let pod = build_pod(
        &PodInputs {
            execution: &ae,
            alert_name: "pod-crash",
            servers: &servers,
            service_account: None,
            deadline_seconds: 60,
        },
        &settings,
    )
    .unwrap();
    let env = pod.spec.unwrap().containers[0].env.clone().unwrap();
    let token = env
        .iter()
        .find(|e| e.name == "TARSY_RUNBOOK_GITHUB_TOKEN")
        .expect("runbook token variable");
    assert!(token.value.is_none());
    let from = token
        .value_from
        .as_ref()
        .unwrap()
        .secret_key_ref
        .as_ref()
        .unwrap();
    assert_eq!(
        (from.name.as_str(), from.key.as_str()),
        ("runbook-token", "token")
    );
}

#[test]
fn owner_reference_and_labels_link_pod_to_execution() {
    let pod = render(&BTreeMap::new(), None);
    let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.kind, "AgentExecution");
    assert_eq!(owner.uid, "5e8a1d7c-0000-4000-8000-000000000001");
    assert_eq!(owner.controller, Some(true));
    let labels = pod.metadata.labels.unwrap();
    assert_eq!(labels["tarsy.dev/alert"], "pod-crash");
    assert_eq!(
        labels["tarsy.dev/execution"],
        "pod-crash-s1-kubernetesagent"
    );
    assert_eq!(
        labels["tarsy.dev/session"],
        "0b7c1f2e-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
    );
}

#[test]
fn conflicting_ports_are_rejected() {
    let servers = BTreeMap::from([
        ("a".to_string(), container_server()),
        ("b".to_string(), container_server()),
    ]);
    let ae = execution();
    let err = build_pod(
        &PodInputs {
            execution: &ae,
            alert_name: "pod-crash",
            servers: &servers,
            service_account: None,
            deadline_seconds: 60,
        },
        &PodSettings::new("img"),
    )
    .unwrap_err();
    assert_eq!(
        err,
        PodError::PortConflict {
            first: "a".into(),
            second: "b".into(),
            port: 8080
        }
    );
}

#[test]
fn bridge_ports_skip_container_ports() {
    let mut c = container_server();
    c.container.as_mut().unwrap().port = 9100;
    let servers = BTreeMap::from([
        ("a-stdio".to_string(), stdio_server()),
        ("b-container".to_string(), c),
    ]);
    let ports = tarsy_controller::pod::assign_ports(&servers, 9100).unwrap();
    assert_eq!(ports["b-container"], 9100);
    assert_eq!(ports["a-stdio"], 9101);
}

/// The built-in KubernetesAgent, with no resources in the namespace, gets a
/// working toolset: the built-in `kubernetes-server` runs as a sidecar of
/// the upstream image (read-only), reached by the runner on localhost, under
/// the investigator service account — not the stdio form, whose `npx` the
/// tarsy image does not have.
#[test]
fn builtin_kubernetes_agent_gets_the_kubernetes_sidecar() {
    let defaults = tarsy_config::Defaults {
        kubernetes_mcp_image: "mirror.example.com/kubernetes-mcp-server:v0.0.67".into(),
        ..Default::default()
    };
    let config = tarsy_crds::config::from_resources(defaults, &[], &[], &[], &[]);
    let agent = config.agent("KubernetesAgent").expect("built-in agent");
    let names = agent.spec.mcp_servers.clone().unwrap_or_default();
    assert_eq!(names, ["kubernetes-server"]);
    let servers = tarsy_controller::resources::execution_servers(&config, &names).unwrap();

    let pod = render(&servers, None);
    check_snapshot("pod_builtin_kubernetes_agent", &pod);
    let spec = pod.spec.unwrap();
    assert_eq!(
        spec.service_account_name.as_deref(),
        Some("tarsy-investigator")
    );
    let inits = spec.init_containers.unwrap();
    // No stdio server: no binary copy, no bridge.
    assert_eq!(inits.len(), 1, "{inits:?}");
    let sidecar = &inits[0];
    assert_eq!(sidecar.name, "mcp-kubernetes-server");
    assert_eq!(
        sidecar.image.as_deref(),
        Some("mirror.example.com/kubernetes-mcp-server:v0.0.67")
    );
    assert_eq!(sidecar.restart_policy.as_deref(), Some("Always"));
    let args = sidecar.args.clone().unwrap();
    assert!(args.contains(&"--read-only".to_string()), "{args:?}");
    assert!(args.contains(&"--disable-destructive".to_string()));
    let port = sidecar.ports.as_ref().unwrap()[0].container_port;
    assert!(
        args.windows(2)
            .any(|w| w[0] == "--port" && w[1] == port.to_string())
    );
    let runner = &spec.containers[0];
    let endpoints = runner
        .env
        .iter()
        .flatten()
        .find(|e| e.name == tarsy_crds::contract::runner_env::MCP_ENDPOINTS)
        .and_then(|e| e.value.clone())
        .unwrap();
    assert_eq!(
        endpoints,
        format!("kubernetes-server=http://127.0.0.1:{port}/mcp")
    );

    // Local mode keeps the stdio form.
    let local = tarsy_config::Config::builtin(tarsy_config::Defaults::default());
    let server = local.mcp_server("kubernetes-server").unwrap();
    assert!(server.spec.container.is_none());
    assert_eq!(server.spec.stdio.as_ref().unwrap().command, "npx");
}
