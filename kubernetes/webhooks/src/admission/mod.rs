//! Validating admission webhook (`POST /validate`, AdmissionReview v1) for
//! Chain, Agent, MCPServer, LLMProvider and Alert.
//!
//! It checks what CEL rules cannot, because it needs other objects (see
//! [`checks`]). Denials carry a precise `status.message`; soft issues come back
//! as warnings (kubectl prints them). When the namespace's objects cannot be
//! read the webhook answers HTTP 500, so that the API server applies the
//! configuration's `failurePolicy` (see the README for the chosen policies).

pub mod checks;

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::response::Status;
use serde::de::DeserializeOwned;
use tarsy_crds::{Agent, Alert, Chain, LLMProvider, MCPServer};

use crate::builtins::Builtins;
use crate::error::error;
use crate::resources::{ReadError, ResourceReader};
pub use checks::{Findings, ReferencePolicy, Snapshot};
use checks::{Reviewed, config_findings};

/// Path of the admission endpoint.
pub const VALIDATE_PATH: &str = "/validate";

/// `apiVersion` of the reviews this webhook understands.
pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";

/// Largest accepted AdmissionReview: an object (≤ 1.5 MiB in etcd) plus its
/// old version, with room for JSON overhead.
pub const MAX_REVIEW_BYTES: usize = 8 * 1024 * 1024;

/// Admission settings.
#[derive(Debug, Clone, Default)]
pub struct AdmissionConfig {
    /// Names that exist without a resource.
    pub builtins: Builtins,
    /// The operator's defaults (`tarsy_config::DefaultsSpec::from_env`: give
    /// the webhook the same `TARSY_DEFAULT_*` environment as the operator),
    /// which decide e.g. whether a strategy fits a provider.
    pub defaults: tarsy_config::Defaults,
    /// Missing references in GitOps objects: deny (default) or warn.
    pub reference_policy: ReferencePolicy,
}

/// Shared state of the admission handler.
#[derive(Clone)]
pub struct AdmissionState {
    config: Arc<AdmissionConfig>,
    reader: Arc<dyn ResourceReader>,
}

impl AdmissionState {
    /// State reading the namespace's objects through `reader`.
    pub fn new(config: AdmissionConfig, reader: Arc<dyn ResourceReader>) -> Self {
        Self {
            config: Arc::new(config),
            reader,
        }
    }
}

/// The admission routes: `POST /validate`.
pub fn router(state: AdmissionState) -> Router {
    Router::new()
        .route(VALIDATE_PATH, post(validate))
        .layer(DefaultBodyLimit::max(MAX_REVIEW_BYTES))
        .with_state(state)
}

async fn validate(State(state): State<AdmissionState>, body: Bytes) -> Response {
    let mut de = serde_json::Deserializer::from_slice(&body);
    let review: AdmissionReview<DynamicObject> = match serde_path_to_error::deserialize(&mut de) {
        Ok(r) => r,
        Err(e) => {
            let path = crate::alertmanager::payload::clean_path(&e.path().to_string());
            return error(
                StatusCode::BAD_REQUEST,
                format!("malformed AdmissionReview at `{path}`: {}", e.into_inner()),
            );
        }
    };
    if review.types.api_version != ADMISSION_API_VERSION || review.types.kind != "AdmissionReview" {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "expected an AdmissionReview of apiVersion {ADMISSION_API_VERSION}, got kind {:?} apiVersion {:?}",
                review.types.kind, review.types.api_version
            ),
        );
    }
    let request: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(r) => r,
        Err(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "the AdmissionReview has no request",
            );
        }
    };
    match review_request(&state, &request).await {
        Ok(response) => Json(response.into_review()).into_response(),
        Err(e) => {
            tracing::error!(uid = %request.uid, error = %e, "admission review failed; the API server applies the failurePolicy");
            error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    }
}

/// Decides one admission request. `Err` means the decision could not be made
/// (the namespace's objects could not be read).
pub async fn review_request(
    state: &AdmissionState,
    request: &AdmissionRequest<DynamicObject>,
) -> Result<AdmissionResponse, ReadError> {
    let allowed = AdmissionResponse::from(request);
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return Ok(allowed);
    }
    if request.kind.group != tarsy_crds::GROUP {
        return Ok(allowed);
    }
    let Some(object) = &request.object else {
        return Ok(deny(allowed, "the request carries no object"));
    };
    let name = object
        .metadata
        .name
        .clone()
        .or_else(|| (!request.name.is_empty()).then(|| request.name.clone()))
        .unwrap_or_default();
    let namespace = request
        .namespace
        .clone()
        .or_else(|| object.metadata.namespace.clone())
        .unwrap_or_else(|| "default".into());
    let kind = request.kind.kind.as_str();
    let cfg = &state.config;
    let reader = &state.reader;
    let mut snap = Snapshot::default();
    if kind == "Alert" {
        // Only creation is checked: the spec is immutable apart from
        // `cancel`, and cancelling (or annotating) an Alert must work even
        // after its Chain is gone.
        if request.operation != Operation::Create {
            return Ok(allowed);
        }
        let alert: Alert = match decode(object, kind) {
            Ok(a) => a,
            Err(msg) => return Ok(deny(allowed, msg)),
        };
        snap.chains = reader.chains(&namespace).await?;
        if alert.spec.mcp_selection.is_some() {
            snap.mcp_servers = reader.mcp_servers(&namespace).await?;
        }
        let findings = checks::check_alert(&alert, &snap, &cfg.defaults);
        return Ok(respond(allowed, kind, &namespace, &name, findings));
    }
    if !matches!(kind, "Chain" | "Agent" | "MCPServer" | "LLMProvider") {
        return Ok(allowed);
    }
    // GitOps kinds: the whole namespace, with tarsy-config's validation.
    snap.chains = reader.chains(&namespace).await?;
    snap.agents = reader.agents(&namespace).await?;
    snap.mcp_servers = reader.mcp_servers(&namespace).await?;
    snap.llm_providers = reader.llm_providers(&namespace).await?;
    let policy = cfg.reference_policy;
    let findings = match kind {
        "Chain" => match decode::<Chain>(object, kind) {
            Ok(chain) => {
                let mut f = checks::check_chain(&chain, &name, &snap);
                f.extend(config_findings(
                    Reviewed::Chain(&chain),
                    &name,
                    &snap,
                    &cfg.defaults,
                    policy,
                ));
                f
            }
            Err(msg) => return Ok(deny(allowed, msg)),
        },
        "Agent" => match decode::<Agent>(object, kind) {
            Ok(agent) => {
                let mut f =
                    config_findings(Reviewed::Agent(&agent), &name, &snap, &cfg.defaults, policy);
                f.extend(checks::check_agent(&agent, &name, &cfg.builtins));
                f
            }
            Err(msg) => return Ok(deny(allowed, msg)),
        },
        "MCPServer" => match decode::<MCPServer>(object, kind) {
            Ok(server) => {
                let mut f = config_findings(
                    Reviewed::McpServer(&server),
                    &name,
                    &snap,
                    &cfg.defaults,
                    policy,
                );
                f.extend(checks::check_mcp_server(&server, &name, &cfg.builtins));
                f
            }
            Err(msg) => return Ok(deny(allowed, msg)),
        },
        _ => match decode::<LLMProvider>(object, kind) {
            Ok(provider) => {
                let mut f = config_findings(
                    Reviewed::LlmProvider(&provider),
                    &name,
                    &snap,
                    &cfg.defaults,
                    policy,
                );
                f.extend(checks::check_llm_provider(&provider, &name, &snap));
                f
            }
            Err(msg) => return Ok(deny(allowed, msg)),
        },
    };
    Ok(respond(allowed, kind, &namespace, &name, findings))
}

fn decode<K: DeserializeOwned>(object: &DynamicObject, kind: &str) -> Result<K, String> {
    serde_json::to_value(object)
        .and_then(serde_json::from_value)
        .map_err(|e| format!("cannot decode the {kind}: {e}"))
}

/// Admission warnings longer than this may be truncated by the API server.
const MAX_WARNING_CHARS: usize = 256;

fn deny(response: AdmissionResponse, message: impl Into<String>) -> AdmissionResponse {
    let message = message.into();
    let mut response = response.deny(&message);
    response.result = Status::failure(&message, "Forbidden").with_code(403);
    response
}

fn respond(
    response: AdmissionResponse,
    kind: &str,
    namespace: &str,
    name: &str,
    findings: Findings,
) -> AdmissionResponse {
    let mut response = if findings.errors.is_empty() {
        response
    } else {
        let n = findings.errors.len();
        let message = format!(
            "{kind} {namespace}/{name} has {n} problem{}: {}",
            if n == 1 { "" } else { "s" },
            findings.errors.join("; ")
        );
        deny(response, message)
    };
    if !findings.warnings.is_empty() {
        response.warnings = Some(
            findings
                .warnings
                .iter()
                .map(|w| tarsy_crds::clip(w, MAX_WARNING_CHARS))
                .collect(),
        );
    }
    response
}
