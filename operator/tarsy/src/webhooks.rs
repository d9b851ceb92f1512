//! `tarsy webhooks`: the Alertmanager bridge and the validating admission
//! webhook, served over HTTPS (and the bridge optionally over plain HTTP).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use tarsy_webhooks::{
    AdmissionConfig, AdmissionState, BridgeAuth, BridgeConfig, BridgeState, KubeAlertSink,
    KubeResources, ReferencePolicy, ServeConfig, TlsFiles,
};

/// Arguments of `tarsy webhooks`.
#[derive(Debug, clap::Args)]
pub struct WebhooksArgs {
    /// HTTPS address: `/validate`, `/alertmanager`, `/healthz`.
    #[arg(long, default_value = "0.0.0.0:8443")]
    https_addr: SocketAddr,
    /// Optional plain-HTTP address for the Alertmanager bridge only.
    #[arg(long)]
    http_addr: Option<SocketAddr>,
    /// Directory holding `tls.crt` and `tls.key` (a mounted TLS Secret).
    #[arg(long, default_value = "/tls")]
    tls_dir: PathBuf,
    /// Namespace Alerts are created in and objects are validated against.
    #[arg(long, env = "TARSY_NAMESPACE")]
    namespace: String,
    /// File holding the bearer token Alertmanager must send.
    #[arg(long)]
    bridge_token_file: Option<PathBuf>,
    /// Environment variable holding the bearer token (when no file is given).
    #[arg(long, default_value = "TARSY_BRIDGE_TOKEN")]
    bridge_token_env: String,
    /// Alertmanager label whose value is the alert type.
    #[arg(long, default_value = "alertname")]
    alert_type_label: String,
    /// Cancel the investigation when Alertmanager reports the alert resolved.
    #[arg(long)]
    cancel_on_resolve: bool,
    /// Alert type of alerts without the alert-type label (default: refuse them).
    #[arg(long)]
    default_alert_type: Option<String>,
    /// Refuse alerts that no Chain, or several Chains, would run (default:
    /// create the Alert, which then fails with a clear condition).
    #[arg(long)]
    require_chain: bool,
    /// Missing references in Chains, Agents, MCPServers, LLMProviders: deny or warn.
    #[arg(long, default_value = "deny")]
    reference_policy: String,
    /// Do not serve the Alertmanager bridge.
    #[arg(long)]
    no_bridge: bool,
    /// Do not serve the admission webhook.
    #[arg(long)]
    no_admission: bool,
}

/// Serves until SIGTERM or Ctrl-C.
pub async fn run(args: WebhooksArgs) -> anyhow::Result<()> {
    if args.no_bridge && args.no_admission {
        return Err(anyhow!(
            "--no-bridge and --no-admission leave nothing to serve"
        ));
    }
    let reference_policy: ReferencePolicy = args
        .reference_policy
        .parse()
        .map_err(|e| anyhow!("--reference-policy: {e}"))?;
    let client = kube::Client::try_default()
        .await
        .context("connecting to the Kubernetes API")?;
    let (resources, watch) = KubeResources::start(client.clone(), Some(&args.namespace));
    tokio::spawn(watch);

    let bridge = if args.no_bridge {
        None
    } else {
        let token = tarsy_webhooks::load_token(
            args.bridge_token_file.as_deref(),
            Some(&args.bridge_token_env),
        )
        .context("loading the bridge bearer token")?;
        let mut config = BridgeConfig::new(&args.namespace);
        config.alert_type_label = args.alert_type_label.clone();
        config.cancel_on_resolve = args.cancel_on_resolve;
        config.default_alert_type = args
            .default_alert_type
            .clone()
            .filter(|t| !t.trim().is_empty());
        config.require_chain = args.require_chain;
        let sink = Arc::new(KubeAlertSink::new(client.clone(), &args.namespace));
        Some(
            BridgeState::new(config, BridgeAuth::Bearer(token), sink)
                .with_resources(Arc::new(resources.clone())),
        )
    };

    let admission = if args.no_admission {
        None
    } else {
        Some(AdmissionState::new(
            AdmissionConfig {
                builtins: Default::default(),
                defaults: crate::process::defaults_from_env()?,
                reference_policy,
            },
            Arc::new(resources),
        ))
    };

    let config = ServeConfig {
        https_addr: args.https_addr,
        http_addr: args.http_addr,
        tls: TlsFiles::in_dir(&args.tls_dir),
        tls_reload_interval: Duration::from_secs(10),
    };
    tarsy_webhooks::serve(config, bridge, admission, crate::process::stop_requested())
        .await
        .context("serving webhooks")
}
