//! Investigation memory end to end in local mode, with scripted answers:
//! an investigation is scored, the reflector learns from it (a planted
//! secret stored masked), the next alert of the same type gets the memory
//! in its prompt and recalls it with the tool, an inaccurate review
//! deprecates it and its feedback teaches a memory, and a third alert gets
//! none. Scopes never mix. (`operator/tarsy/tests/cluster_memory.rs` runs
//! the same scenario in cluster mode.)

use std::time::Duration;

use tarsy_e2e::harness::{Peers, TestApp};
use tarsy_e2e::memory_scenario::{
    ALERT, CHAIN, assert_corrected, assert_learned, assert_recalled, investigation_prompt,
    reflected, review, script,
};
use tarsy_e2e::on_both_backends;
use tarsy_store::MemoryFilter;

/// How long a reflector may take here.
const WITHIN: Duration = Duration::from_secs(30);

async fn learn_recall_and_forget(db_url: String) {
    scenario(db_url, false).await;
}

/// The same with an embedding provider: vectors from the LLM service's
/// `Embed` (the scripted server's embedder, over gRPC) fused with full text.
async fn learn_recall_and_forget_with_embeddings(db_url: String) {
    scenario(db_url, true).await;
}

async fn scenario(db_url: String, embeddings: bool) {
    let peers = Peers::start(script()).await;
    let mut config = peers.config(CHAIN);
    config.defaults.memory.enabled = true;
    config.defaults.memory.project = "payments".into();
    if embeddings {
        config.defaults.memory.embedding = Some(tarsy_config::EmbeddingSettings {
            llm_provider: "test-llm".into(),
            model: "test-embedding".into(),
        });
    }
    let app = TestApp::start(peers.options(config, &db_url)).await;
    let store = app.app.store().clone();

    // 1. An investigation, scored, learned from.
    let first = app.submit("PoolExhausted", ALERT).await;
    assert_eq!(app.finish(&first).await["status"], "completed");
    reflected(&store, &first, WITHIN).await;
    let lesson = assert_learned(&store, &first, "payments").await;
    // With an embedding provider, every text recall read was embedded by
    // the LLM service, with the configured model.
    let embedded = peers.script().embed_requests();
    assert_eq!(!embedded.is_empty(), embeddings, "{embedded:?}");
    assert!(embedded.iter().all(|r| {
        r.llm_config
            .as_ref()
            .is_some_and(|c| c.model == "test-embedding")
    }));
    // Nothing was injected into the first: there was nothing to recall.
    assert!(
        !investigation_prompt(&store, &first)
            .await
            .contains("Lessons from past investigations")
    );

    // 2. The same alert again: the lesson is in the prompt, with its
    //    provenance, recorded as injected, and the recall tool finds it.
    let second = app.submit("PoolExhausted", ALERT).await;
    assert_eq!(app.finish(&second).await["status"], "completed");
    assert_recalled(&store, &second, &first, &lesson).await;
    reflected(&store, &second, WITHIN).await;
    assert!(store.learned_memories(&second).await.unwrap().is_empty());

    // 3. A person rates the first investigation inaccurate, with feedback:
    //    what it taught is deprecated, the feedback teaches one memory, and
    //    the next alert gets nothing.
    let (status, body) = app
        .post(&format!("/api/v1/sessions/{first}/review"), Some(review()))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_corrected(&store, peers.script(), &first, WITHIN).await;
    let third = app.submit("PoolExhausted", ALERT).await;
    assert_eq!(app.finish(&third).await["status"], "completed");
    assert!(
        !investigation_prompt(&store, &third)
            .await
            .contains("Lessons from past investigations")
    );
    assert!(store.injected_memories(&third).await.unwrap().is_empty());
    reflected(&store, &third, WITHIN).await;

    // No memory of this project is visible from another.
    let (elsewhere, total) = store
        .list_memories(&MemoryFilter {
            scope: "other-project".into(),
            ..MemoryFilter::default()
        })
        .await
        .unwrap();
    assert!(elsewhere.is_empty() && total == 0);
    app.shutdown().await;
}

on_both_backends!(
    learn_recall_and_forget,
    learn_recall_and_forget_with_embeddings
);
