//! The four data layers of a session as the REST API shows them (session
//! detail with stages and executions, timeline, trace list, every LLM and
//! MCP interaction detail) and the WebSocket events, gathered into one
//! document with stable names for every id and a deterministic order where
//! parallel agents make the arrival order vary.

use serde_json::{Map, Value, json};

use crate::golden::Normalizer;
use crate::harness::TestApp;

/// The session's layers, normalised, plus the normaliser that names its ids
/// (to normalise WebSocket events with the same names).
pub struct LayerSnapshot {
    /// `{session, timeline, trace, llm_interactions, mcp_interactions}`.
    pub document: Value,
    /// Names given to the session's ids.
    pub names: Normalizer,
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// Reads every layer of session `id` over REST.
pub async fn snapshot(app: &TestApp, id: &str) -> LayerSnapshot {
    let mut n = Normalizer::new();
    n.name(id, "session");
    let detail = app.session(id).await;
    n.name(s(&detail["chat"]["chat_id"]), "chat");
    // stage id → (stage_index, agent_index of each execution).
    let mut exec_order: Vec<(String, (i64, i64))> = Vec::new();
    for stage in detail["stages"].as_array().into_iter().flatten() {
        let si = stage["stage_index"].as_i64().unwrap_or(-1);
        n.name(s(&stage["id"]), format!("stage:{si}"));
        n.name(
            s(&stage["chat_user_message_id"]),
            format!("chat_message:{si}"),
        );
        for e in stage["executions"].as_array().into_iter().flatten() {
            let ai = e["agent_index"].as_i64().unwrap_or(-1);
            n.name(s(&e["id"]), format!("exec:{si}.{ai}"));
            exec_order.push((s(&e["id"]).to_string(), (si, ai)));
        }
    }
    let key_of = |exec: &Value| -> (i64, i64) {
        exec_order
            .iter()
            .find(|(id, _)| id == s(exec))
            .map(|(_, k)| *k)
            .unwrap_or((i64::MAX, 0))
    };

    // Timeline: per execution in its own order (deterministic), executions
    // by (stage, agent); session-level events in their own list.
    let timeline = app.get_ok(&format!("/api/v1/sessions/{id}/timeline")).await;
    let events = timeline.as_array().cloned().unwrap_or_default();
    let mut per_exec: Vec<((i64, i64), Value)> = Vec::new();
    let mut session_events = Vec::new();
    let mut counters: std::collections::HashMap<String, usize> = Default::default();
    for e in &events {
        let exec = s(&e["execution_id"]).to_string();
        let c = counters.entry(exec.clone()).or_default();
        *c += 1;
        let label = if exec.is_empty() {
            format!("event:session.{c}")
        } else {
            format!(
                "event:{}.{c}",
                n.label(&exec).unwrap_or("?").trim_matches(['<', '>'])
            )
        };
        n.name(s(&e["id"]), label);
        let mut e = e.clone();
        // A per-session counter: parallel agents interleave it.
        if let Some(o) = e.as_object_mut() {
            o.remove("sequence_number");
        }
        if exec.is_empty() {
            session_events.push(e);
        } else {
            per_exec.push((key_of(&Value::String(exec)), e));
        }
    }
    per_exec.sort_by_key(|(k, _)| *k);

    // Trace list, then every interaction's detail.
    let trace = app.get_ok(&format!("/api/v1/sessions/{id}/trace")).await;
    let mut llm_ids = Vec::new();
    let mut mcp_ids = Vec::new();
    for stage in trace["stages"].as_array().into_iter().flatten() {
        for e in stage["executions"].as_array().into_iter().flatten() {
            let exec = n
                .label(s(&e["execution_id"]))
                .unwrap_or("<?>")
                .trim_matches(['<', '>'])
                .to_string();
            for (i, l) in e["llm_interactions"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                let label = format!("llm:{exec}.{}", i + 1);
                n.name(s(&l["id"]), label.clone());
                llm_ids.push((label, s(&l["id"]).to_string()));
            }
            for (i, m) in e["mcp_interactions"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                let label = format!("mcp:{exec}.{}", i + 1);
                n.name(s(&m["id"]), label.clone());
                mcp_ids.push((label, s(&m["id"]).to_string()));
            }
        }
    }
    for (i, l) in trace["session_interactions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let label = format!("llm:session.{}", i + 1);
        n.name(s(&l["id"]), label.clone());
        llm_ids.push((label, s(&l["id"]).to_string()));
    }
    let mut llm = Map::new();
    for (label, iid) in &llm_ids {
        let d = app
            .get_ok(&format!("/api/v1/sessions/{id}/trace/llm/{iid}"))
            .await;
        n.name(s(&d["last_message_id"]), format!("message:{label}"));
        llm.insert(label.clone(), d);
    }
    let mut mcp = Map::new();
    for (label, iid) in &mcp_ids {
        let d = app
            .get_ok(&format!("/api/v1/sessions/{id}/trace/mcp/{iid}"))
            .await;
        mcp.insert(label.clone(), d);
    }

    let document = json!({
        "session": detail,
        "timeline": {
            "executions": per_exec.into_iter().map(|(_, e)| e).collect::<Vec<_>>(),
            "session_level": session_events,
        },
        "trace": trace,
        "llm_interactions": llm,
        "mcp_interactions": mcp,
    });
    LayerSnapshot {
        document: n.apply(&document),
        names: n,
    }
}

/// WebSocket events normalised with the session's names: `stream.chunk`
/// dropped (transient, chunking varies), grouped by execution (arrival
/// order kept inside a group; parallel executions interleave), session,
/// stage and chat events in arrival order (a chat question is published
/// before its answer's stage starts).
pub fn ws_sequence(names: &Normalizer, events: &[Value]) -> Value {
    let mut groups: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    for e in events {
        if e["type"] == "stream.chunk" {
            continue;
        }
        let group = match e["execution_id"].as_str() {
            Some(x) => names.text(x),
            None => "session".to_string(),
        };
        let mut e = e.clone();
        if let Some(o) = e.as_object_mut() {
            o.remove("sequence_number");
        }
        groups.entry(group).or_default().push(names.apply(&e));
    }
    json!(groups)
}
