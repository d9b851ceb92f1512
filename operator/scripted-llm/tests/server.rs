//! The scripted server through a plain gRPC client.

use std::time::Duration;

use tarsy_proto::v1::generate_response::Content;
use tarsy_proto::v1::llm_service_client::LlmServiceClient;
use tarsy_proto::v1::{ConversationMessage, GenerateRequest};
use tarsy_scripted_llm::{ScriptFile, ScriptedLlm, ScriptedLlmServer, ScriptedResponse};

fn request(system: &str) -> GenerateRequest {
    GenerateRequest {
        session_id: "s".into(),
        messages: vec![ConversationMessage {
            role: "system".into(),
            content: system.into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

async fn texts(
    client: &mut LlmServiceClient<tonic::transport::Channel>,
    system: &str,
) -> Vec<String> {
    let mut stream = client.generate(request(system)).await.unwrap().into_inner();
    let mut out = Vec::new();
    while let Some(msg) = stream.message().await.unwrap() {
        match msg.content {
            Some(Content::Text(t)) => out.push(t.content),
            Some(Content::Error(e)) => out.push(format!("error:{}", e.code)),
            _ => {}
        }
        if msg.is_final {
            break;
        }
    }
    out
}

#[tokio::test]
async fn routes_prefer_the_longest_matching_agent_name_then_fall_back_to_the_queue() {
    let script = ScriptedLlm::new();
    script.push_route("Agent-1", ScriptedResponse::text("one"));
    script.push_route("Agent-10", ScriptedResponse::text("ten"));
    script.push(ScriptedResponse::text("sequential"));
    let server = ScriptedLlmServer::start(script.clone()).await.unwrap();
    let mut client = LlmServiceClient::connect(server.endpoint()).await.unwrap();

    assert_eq!(texts(&mut client, "You are Agent-10.").await, vec!["ten"]);
    assert_eq!(texts(&mut client, "You are Agent-1.").await, vec!["one"]);
    // Route exhausted: the sequential queue answers.
    assert_eq!(
        texts(&mut client, "You are Agent-1.").await,
        vec!["sequential"]
    );
    // Everything exhausted: a clear error, not a hang.
    assert_eq!(texts(&mut client, "anyone").await, vec!["error:internal"]);

    let reqs = script.requests();
    assert_eq!(reqs.len(), 4);
    assert_eq!(reqs[0].route.as_deref(), Some("Agent-10"));
    assert_eq!(reqs[2].route, None);
    assert!(!reqs[3].scripted);
    assert_eq!(script.remaining(), 0);
}

#[tokio::test]
async fn hanging_responses_notice_the_client_going_away() {
    let script = ScriptedLlm::new();
    script.push(ScriptedResponse::text("partial").then_hang());
    let server = ScriptedLlmServer::start(script.clone()).await.unwrap();
    let mut client = LlmServiceClient::connect(server.endpoint()).await.unwrap();
    let mut stream = client.generate(request("x")).await.unwrap().into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert!(!first.is_final);
    assert_eq!(script.cancellations(), 0);
    drop(stream);
    assert!(
        script
            .wait_for_cancellations(1, Duration::from_secs(5))
            .await
    );
}

#[tokio::test]
async fn scripts_load_from_json_files() {
    let file: ScriptFile = serde_json::from_str(
        r#"{
          "sequential": [
            {"chunks": [{"kind": "thinking", "content": "hm"}, {"kind": "text", "content": "hello"}]},
            {"chunks": [{"kind": "error", "message": "slow down", "code": "max_retries", "retryable": true}]}
          ],
          "routes": {"SynthesisAgent": [{"chunks": [{"kind": "text", "content": "synth"}]}]}
        }"#,
    )
    .unwrap();
    let script = ScriptedLlm::from_file(file);
    let server = ScriptedLlmServer::start(script.clone()).await.unwrap();
    let mut client = LlmServiceClient::connect(server.endpoint()).await.unwrap();
    assert_eq!(
        texts(&mut client, "You are SynthesisAgent").await,
        vec!["synth"]
    );
    assert_eq!(texts(&mut client, "x").await, vec!["hello"]);
    assert_eq!(texts(&mut client, "x").await, vec!["error:max_retries"]);
}

#[tokio::test]
async fn grpc_errors_end_the_stream_with_a_status() {
    let script = ScriptedLlm::new();
    script.push(ScriptedResponse::grpc_error(14, "restarting"));
    let server = ScriptedLlmServer::start(script.clone()).await.unwrap();
    let mut client = LlmServiceClient::connect(server.endpoint()).await.unwrap();
    let mut stream = client.generate(request("x")).await.unwrap().into_inner();
    let err = stream.message().await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable);
    assert_eq!(err.message(), "restarting");
}
