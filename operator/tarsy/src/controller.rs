//! `tarsy controller`: the Kubernetes operator (reconcilers, investigation
//! pods, leader election, metrics). The logic lives in `tarsy-controller` (`kubernetes/controller`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use tarsy_controller::{LeaderElection, PodSettings, Settings};
use tarsy_crds::SecretKeyRef;

/// Flags of `tarsy controller` (each also read from its environment variable).
#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// Postgres URL of the session store.
    #[arg(long, env = "TARSY_DATABASE_URL")]
    database_url: String,
    /// The tarsy image (runner, bridge binary).
    #[arg(long, env = "TARSY_IMAGE")]
    image: String,
    /// Image of stdio MCP servers that name none (default: the tarsy image).
    #[arg(long, env = "TARSY_MCP_RUNTIME_IMAGE")]
    mcp_runtime_image: Option<String>,
    /// Image pull policy of investigation pods.
    #[arg(long, env = "TARSY_IMAGE_PULL_POLICY")]
    image_pull_policy: Option<String>,
    /// Service account of investigation pods when the chain names none.
    #[arg(
        long,
        env = "TARSY_INVESTIGATOR_SERVICE_ACCOUNT",
        default_value = "tarsy-investigator"
    )]
    investigator_service_account: String,
    /// Secret holding the Postgres URL for runners, as NAME/KEY.
    #[arg(
        long,
        env = "TARSY_DATABASE_SECRET",
        default_value = "tarsy-database/url"
    )]
    database_secret: String,
    /// Secret holding the runbook token (private runbook repositories) as
    /// NAME/KEY, passed to investigation pods from the Secret (which must
    /// exist in every namespace investigations run in).
    #[arg(long, env = "TARSY_RUNBOOK_TOKEN_SECRET")]
    runbook_token_secret: Option<String>,
    /// Address of the LLM service, as runners and the operator's own
    /// executive summary calls reach it.
    #[arg(
        long,
        env = "TARSY_LLM_SERVICE_ADDR",
        default_value = "http://tarsy-llm-service:50051"
    )]
    llm_service_addr: String,
    /// Directory relative `scripted` LLMProvider scripts are read from (the
    /// executive summary of chains whose summary provider is `scripted`;
    /// tests and demos only).
    #[arg(long, env = "TARSY_SCRIPT_DIR", default_value = ".")]
    script_dir: PathBuf,
    /// Seconds the executive summary call may take before the session
    /// completes without one.
    #[arg(long, env = "TARSY_SUMMARY_TIMEOUT_SECONDS", default_value_t = 120)]
    summary_timeout_seconds: u64,
    /// Seconds a pod may fail to start (image pull, bad config) before its execution fails.
    #[arg(long, env = "TARSY_POD_START_TIMEOUT_SECONDS", default_value_t = 300)]
    pod_start_timeout_seconds: u64,
    /// Replacement pods an execution may get when its pod is lost before
    /// the runner records a result (eviction, OOM kill, node loss); the
    /// replacement resumes the execution. 0: fail at the first loss.
    #[arg(long, env = "TARSY_POD_RESTART_LIMIT", default_value_t = 2)]
    pod_restart_limit: u32,
    /// Seconds before the first replacement pod; doubled for each further
    /// one (at most 5 minutes).
    #[arg(long, env = "TARSY_POD_RESTART_BACKOFF_SECONDS", default_value_t = 5)]
    pod_restart_backoff_seconds: u64,
    /// Watch only this namespace (default: all).
    #[arg(long, env = "TARSY_WATCH_NAMESPACE")]
    namespace: Option<String>,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "TARSY_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Take a Lease before acting (required with more than one replica).
    #[arg(long, env = "TARSY_LEADER_ELECTION")]
    leader_election: bool,
    /// Name of the Lease.
    #[arg(long, env = "TARSY_LEASE_NAME", default_value = "tarsy-operator")]
    lease_name: String,
    /// Namespace of the Lease (default: the pod's namespace).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    lease_namespace: String,
    /// This replica's identity in the Lease (default: the pod name).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// A finished Alert is deleted this long after its terminal phase (Go
    /// duration, like a Job's ttlSecondsAfterFinished; 0: kept forever);
    /// its session stays listed.
    #[arg(long, env = "TARSY_ALERT_TTL", default_value = "168h")]
    alert_ttl: String,
    /// How long sessions and live events are kept.
    #[command(flatten)]
    retention: crate::retention::RetentionArgs,
    /// Slack notifications.
    #[command(flatten)]
    notify: crate::notify::NotifyArgs,
}

/// Runs the operator until it fails or loses leadership.
pub async fn run(args: ControllerArgs) -> anyhow::Result<()> {
    let defaults = crate::process::defaults_from_env()?;
    tarsy_pricing::install_catalog(defaults.pricing.catalog_url.as_deref()).await;

    let mut pod = PodSettings::new(args.image.clone());
    if let Some(img) = args.mcp_runtime_image {
        pod.mcp_runtime_image = img;
    }
    pod.image_pull_policy = args.image_pull_policy;
    pod.default_service_account = args.investigator_service_account;
    pod.database_url_secret = secret_key_ref("--database-secret", &args.database_secret)?;
    pod.llm_service_addr = args.llm_service_addr;
    // Empty: no token (the chart passes the flag only with a Secret, but an
    // empty environment variable means the same).
    pod.runbook_token_secret = args
        .runbook_token_secret
        .filter(|r| !r.trim().is_empty())
        .map(|r| secret_key_ref("--runbook-token-secret", &r))
        .transpose()?;

    let retention = args.retention.retention(&defaults)?;
    let slack = args.notify.slack(&defaults.notifications)?;
    let identity = args
        .identity
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| format!("tarsy-operator-{}", std::process::id()));
    let settings = Settings {
        pod,
        max_concurrent_sessions: Some(defaults.max_concurrent_sessions as usize),
        defaults,
        pod_start_timeout: Duration::from_secs(args.pod_start_timeout_seconds),
        pod_restart_limit: args.pod_restart_limit,
        pod_restart_backoff: Duration::from_secs(args.pod_restart_backoff_seconds),
        namespace: args.namespace,
        http_addr: Some(args.metrics_addr),
        leader_election: args.leader_election.then_some(LeaderElection {
            lease_name: args.lease_name,
            namespace: args.lease_namespace,
            identity,
            lease_seconds: 15,
        }),
        reporter: "tarsy-operator".into(),
        script_dir: args.script_dir,
        summary_timeout: Duration::from_secs(args.summary_timeout_seconds),
        alert_ttl: crate::retention::optional("--alert-ttl", &args.alert_ttl)?,
        retention: Some(retention),
        slack,
    };

    let store = tarsy_store::Store::connect(&args.database_url)
        .await
        .context("connecting to the session store")?;
    let client = kube::Client::try_default()
        .await
        .context("connecting to the Kubernetes API")?;
    tarsy_controller::run(client, store, settings)
        .await
        .context("operator stopped")
}

/// A `NAME/KEY` flag value as a Secret key reference.
fn secret_key_ref(flag: &str, value: &str) -> anyhow::Result<SecretKeyRef> {
    match value.trim().split_once('/') {
        Some((name, key)) if !name.is_empty() && !key.is_empty() && !key.contains('/') => {
            Ok(SecretKeyRef {
                name: name.to_string(),
                key: key.to_string(),
            })
        }
        _ => anyhow::bail!("{flag} must be NAME/KEY, not {value:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::secret_key_ref;

    #[test]
    fn secret_flags_are_name_slash_key() {
        let r = secret_key_ref("--runbook-token-secret", "runbook-token/token").unwrap();
        assert_eq!(
            (r.name.as_str(), r.key.as_str()),
            ("runbook-token", "token")
        );
        for bad in ["runbook-token", "/token", "runbook-token/", "a/b/c"] {
            assert!(
                secret_key_ref("--runbook-token-secret", bad).is_err(),
                "{bad}"
            );
        }
    }
}
