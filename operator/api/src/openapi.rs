//! The OpenAPI 3.1 document of the REST API, served at
//! `GET /api/v1/openapi.json`.
//!
//! It is generated from the code: each handler's `#[utoipa::path]` and the
//! `ToSchema` of the types it serializes. The router is built from the same
//! registrations (`utoipa_axum`), so a route cannot exist without its
//! operation in the document. The WebSocket (`/api/v1/ws`) and the dashboard
//! (`/ui`) are outside it.

use std::sync::OnceLock;

use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::{AppState, handlers, memories, quality, review, usage};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "TARSy API",
        description = "REST API of TARSy, the Kubernetes-native alert investigator, as served \
            by `tarsy serve` (local mode) and `tarsy api` (cluster mode). Every error answers \
            `{error, message}` (`ErrorBody`). Live events go over the WebSocket at \
            `/api/v1/ws`, which this document does not describe (see API.md).",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    tags(
        (name = "alerts", description = "Submitting alerts"),
        (name = "sessions", description = "Investigation sessions"),
        (name = "chat", description = "Follow-up questions about a finished investigation"),
        (name = "scoring", description = "The judge's scores of finished investigations"),
        (name = "review", description = "People's reviews of finished investigations"),
        (name = "memory", description = "What TARSy learned from scored investigations and \
            puts into later investigations' prompts"),
        (name = "trace", description = "The LLM and MCP calls of a session"),
        (name = "system", description = "Health, metrics, configuration and this document"),
    )
)]
struct ApiDoc;

/// The REST routes, each registered with its operation in the document.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(handlers::health))
        .routes(routes!(handlers::submit_alert))
        .routes(routes!(handlers::list_sessions))
        .routes(routes!(handlers::get_session))
        .routes(routes!(handlers::cancel_session))
        .routes(routes!(handlers::send_chat_message))
        .routes(routes!(handlers::rescore_session))
        .routes(routes!(handlers::session_scores))
        .routes(routes!(review::get_review, review::change_review))
        .routes(routes!(review::bulk_review))
        .routes(routes!(review::triage))
        .routes(routes!(quality::quality))
        .routes(routes!(usage::usage))
        .routes(routes!(memories::list_memories))
        .routes(routes!(
            memories::get_memory,
            memories::update_memory,
            memories::delete_memory
        ))
        .routes(routes!(memories::deprecate_memory))
        .routes(routes!(memories::session_memories))
        .routes(routes!(handlers::timeline))
        .routes(routes!(handlers::trace))
        .routes(routes!(handlers::llm_interaction))
        .routes(routes!(handlers::mcp_interaction))
        .routes(routes!(handlers::system_configuration))
        .routes(routes!(handlers::metrics))
        .routes(routes!(openapi_document))
}

/// The OpenAPI document of the REST API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = routes().into_openapi();
    document_refusals(&mut doc);
    doc
}

/// Why a state-changing request gets 403 (`cross_site.rs`).
const CROSS_SITE: &str = "A browser's request from an origin that is neither this server's nor \
                          an allowed one (`--allowed-origin`): cross-site requests are refused.";

/// Every state-changing operation may be refused as cross-site (403) or
/// for a body that is not JSON (415): one rule for all of them
/// (`cross_site.rs`), documented on each here.
fn document_refusals(doc: &mut utoipa::openapi::OpenApi) {
    let error = |description: &str| {
        utoipa::openapi::RefOr::T(
            utoipa::openapi::ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    utoipa::openapi::Content::new(Some(utoipa::openapi::Ref::from_schema_name(
                        "ErrorBody",
                    ))),
                )
                .build(),
        )
    };
    for item in doc.paths.paths.values_mut() {
        let writes = [
            &mut item.post,
            &mut item.put,
            &mut item.patch,
            &mut item.delete,
        ];
        for op in writes.into_iter().flatten() {
            let responses = &mut op.responses.responses;
            match responses.get_mut("403") {
                // The operation's own 403 (a memory scope) gains the rule.
                Some(utoipa::openapi::RefOr::T(own)) => {
                    own.description = format!("{} {CROSS_SITE}", own.description);
                }
                _ => {
                    responses.insert("403".into(), error(CROSS_SITE));
                }
            }
            responses.insert(
                "415".into(),
                error("A request body that is not JSON (`content-type: application/json`)."),
            );
        }
    }
}

/// [`openapi`] as the pretty-printed JSON committed beside the dashboard
/// (`dashboard/openapi.json`), with a final newline.
pub fn openapi_json() -> String {
    let mut json = openapi()
        .to_pretty_json()
        .expect("the OpenAPI document serializes");
    json.push('\n');
    json
}

/// `GET /api/v1/openapi.json`.
#[utoipa::path(
    get,
    path = "/api/v1/openapi.json",
    tag = "system",
    summary = "This document",
    responses(
        (status = 200, description = "The OpenAPI 3.1 document of this API.", body = Object,
            content_type = "application/json"),
    )
)]
async fn openapi_document() -> Response {
    // The document depends on the code only: build it once per process.
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    let json = DOCUMENT.get_or_init(openapi_json);
    ([(CONTENT_TYPE, "application/json")], json.as_str()).into_response()
}
