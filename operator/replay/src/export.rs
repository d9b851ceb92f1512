//! A session's MCP interactions as a fixture: the tools each server listed
//! and the results of the calls the agents made. The records are already
//! masked (masking runs before anything is recorded), so a fixture holds
//! only what the model saw.

use std::collections::BTreeMap;

use serde_json::Value;
use tarsy_core::McpInteractionType;
use tarsy_store::{McpInteraction, Store, StoreError};

use crate::fixture::{
    FixtureSet, JsonObject, RecordedCall, ServerFixture, ToolFixture, any_object_schema,
};

/// What an export produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Export {
    /// One fixture per MCP server the session used.
    pub fixtures: FixtureSet,
    /// Tool calls recorded into the fixtures.
    pub calls: usize,
    /// Interactions left out, each with the reason.
    pub skipped: Vec<String>,
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The store could not be read (or the session does not exist).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The session made no MCP call and listed no tool.
    #[error("session {0} has no MCP interactions to export")]
    Empty(String),
}

/// Exports the MCP interactions of `session_id`.
pub async fn export_session(store: &Store, session_id: &str) -> Result<Export, ExportError> {
    let interactions = store.session_mcp_interactions(session_id).await?;
    let export = from_interactions(&format!("session {session_id}"), &interactions);
    if export.fixtures.servers.is_empty() {
        return Err(ExportError::Empty(session_id.to_owned()));
    }
    Ok(export)
}

/// Builds fixtures from interaction records in recording order. Tools come
/// from the `tools/list` records (the first listing of a tool wins); a tool
/// that was called but never listed gets an any-object schema. Failed
/// interactions (no result reached the model from the server) are skipped.
/// Identical calls with identical results are kept once; equal arguments
/// with different results are kept in order (replayed as a sequence).
pub fn from_interactions(recorded_from: &str, interactions: &[McpInteraction]) -> Export {
    let mut servers: BTreeMap<String, ServerFixture> = BTreeMap::new();
    let mut export = Export::default();
    for record in interactions {
        let server = record.server_name.as_str();
        let describe = || {
            if record.tool_name.is_empty() {
                format!("{server} tools/list")
            } else {
                format!("{server}.{}", record.tool_name)
            }
        };
        if server.is_empty() {
            export.skipped.push(format!(
                "a call of {:?} that named no known server",
                record.tool_name
            ));
            continue;
        }
        if let Some(error) = &record.error_message {
            export
                .skipped
                .push(format!("{} (it failed: {error})", describe()));
            continue;
        }
        match record.interaction_type {
            McpInteractionType::ToolList => {
                let f = server_entry(&mut servers, server, recorded_from);
                for listed in record.available_tools.as_array().into_iter().flatten() {
                    let Some(name) = listed.get("name").and_then(Value::as_str) else {
                        continue;
                    };
                    if f.tool(name).is_some() {
                        continue;
                    }
                    let description = listed
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    // Records made before input schemas were kept have none.
                    let input_schema = match listed.get("input_schema") {
                        Some(Value::Object(schema)) => schema.clone(),
                        _ => any_object_schema(),
                    };
                    f.tools.push(ToolFixture {
                        name: name.to_owned(),
                        description,
                        input_schema,
                        calls: Vec::new(),
                        default: None,
                    });
                }
            }
            McpInteractionType::ToolCall => {
                let Some(text) = record.tool_result.get("content").and_then(Value::as_str) else {
                    export
                        .skipped
                        .push(format!("{} (no result was recorded)", describe()));
                    continue;
                };
                let is_error = record
                    .tool_result
                    .get("is_error")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let arguments: JsonObject = match &record.tool_arguments {
                    Value::Object(map) => map.clone(),
                    _ => JsonObject::new(),
                };
                let f = server_entry(&mut servers, server, recorded_from);
                if f.tool(&record.tool_name).is_none() {
                    f.tools.push(ToolFixture {
                        name: record.tool_name.clone(),
                        description: String::new(),
                        input_schema: any_object_schema(),
                        calls: Vec::new(),
                        default: None,
                    });
                }
                let Some(tool) = f.tools.iter_mut().find(|t| t.name == record.tool_name) else {
                    continue;
                };
                let call = RecordedCall {
                    arguments,
                    exact: false,
                    text: text.to_owned(),
                    is_error,
                };
                if !tool.calls.contains(&call) {
                    tool.calls.push(call);
                    export.calls += 1;
                }
            }
        }
    }
    for (name, f) in servers {
        export
            .fixtures
            .files
            .insert(name.clone(), format!("{name}.yaml").into());
        export.fixtures.servers.insert(name, f);
    }
    export
}

/// The fixture of `name`, created on first use.
fn server_entry<'a>(
    servers: &'a mut BTreeMap<String, ServerFixture>,
    name: &str,
    recorded_from: &str,
) -> &'a mut ServerFixture {
    servers.entry(name.to_owned()).or_insert_with(|| {
        let mut f = ServerFixture::new(name);
        f.recorded_from = Some(recorded_from.to_owned());
        f
    })
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use serde_json::json;
    use tarsy_core::RecordScope;

    use super::*;

    fn record(
        kind: McpInteractionType,
        server: &str,
        tool: &str,
        arguments: Value,
        result: Value,
        available: Value,
        error: Option<&str>,
    ) -> McpInteraction {
        McpInteraction {
            id: "id".into(),
            scope: RecordScope::default(),
            interaction_type: kind,
            server_name: server.into(),
            tool_name: tool.into(),
            tool_arguments: arguments,
            tool_result: result,
            available_tools: available,
            duration_ms: 1,
            error_message: error.map(str::to_owned),
            created_at: Utc::now(),
        }
    }

    fn list(server: &str, tools: Value) -> McpInteraction {
        record(
            McpInteractionType::ToolList,
            server,
            "",
            Value::Null,
            Value::Null,
            tools,
            None,
        )
    }

    fn call(server: &str, tool: &str, args: Value, text: &str) -> McpInteraction {
        record(
            McpInteractionType::ToolCall,
            server,
            tool,
            args,
            json!({"content": text, "is_error": false}),
            Value::Null,
            None,
        )
    }

    #[test]
    fn tools_and_calls_become_one_fixture_per_server() {
        let records = vec![
            list(
                "kubernetes",
                json!([
                    {"name": "pods_get", "description": "A pod", "input_schema": {"type": "object", "required": ["name"]}},
                    {"name": "events_list", "description": "Events"}
                ]),
            ),
            call(
                "kubernetes",
                "pods_get",
                json!({"name": "web-0"}),
                "phase: Running",
            ),
            call(
                "kubernetes",
                "pods_get",
                json!({"name": "web-0"}),
                "phase: Running",
            ),
            call(
                "kubernetes",
                "pods_get",
                json!({"name": "web-0"}),
                "phase: Failed",
            ),
            call("prometheus", "query", json!({"q": "up"}), "1"),
            record(
                McpInteractionType::ToolCall,
                "kubernetes",
                "pods_log",
                json!({"name": "web-0"}),
                Value::Null,
                Value::Null,
                Some("timed out after 90s"),
            ),
            record(
                McpInteractionType::ToolCall,
                "",
                "nope",
                json!({"raw": "{}"}),
                Value::Null,
                Value::Null,
                Some("unknown tool"),
            ),
        ];
        let export = from_interactions("session s-1", &records);
        assert_eq!(export.fixtures.server_names(), ["kubernetes", "prometheus"]);
        let k8s = &export.fixtures.servers["kubernetes"];
        assert_eq!(k8s.recorded_from.as_deref(), Some("session s-1"));
        assert_eq!(
            k8s.tools
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>(),
            ["pods_get", "events_list"]
        );
        let pods = &k8s.tools[0];
        assert_eq!(pods.input_schema["required"], json!(["name"]));
        assert_eq!(
            pods.calls
                .iter()
                .map(|c| c.text.as_str())
                .collect::<Vec<_>>(),
            ["phase: Running", "phase: Failed"]
        );
        assert_eq!(k8s.tools[1].input_schema, any_object_schema());
        // Called, never listed: present with an any-object schema.
        let prom = &export.fixtures.servers["prometheus"];
        assert_eq!(prom.tools[0].name, "query");
        assert_eq!(prom.tools[0].input_schema, any_object_schema());
        assert_eq!(export.calls, 3);
        assert_eq!(export.skipped.len(), 2, "{:?}", export.skipped);
        assert!(export.skipped[0].contains("kubernetes.pods_log (it failed: timed out"));
        // Every exported fixture passes the loader's rules.
        for f in export.fixtures.servers.values() {
            f.validate(std::path::Path::new("x.yaml")).unwrap();
        }
    }
}
