//! Micro-benchmark of the store's progressive writes: what one streamed
//! timeline event (create + append + complete) and one message cost on SQLite
//! (file, WAL, as local mode runs it) and on Postgres.
//!
//! ```text
//! cargo run -p tarsy-store --example bench_store [-- ITERATIONS]
//! ```
//!
//! Postgres is taken from `TARSY_TEST_DATABASE_URL` (default: the test
//! server); a scratch database is created and dropped. If it is unreachable
//! only SQLite is measured.

use std::time::{Duration, Instant};

use serde_json::json;
use tarsy_core::{
    ExecutionKind, IterationStrategy, MessageRole, NewMessage, NewTimelineEvent, RecordScope,
    TimelineEventStatus, TimelineEventType,
};
use tarsy_store::{ConnectOptions, NewAgentExecution, NewSession, NewStage, Store};

struct Stats {
    name: &'static str,
    samples: Vec<Duration>,
}

impl Stats {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            samples: Vec::new(),
        }
    }

    fn print(&mut self, backend: &str) {
        self.samples.sort();
        let n = self.samples.len().max(1);
        let total: Duration = self.samples.iter().sum();
        let pick = |q: f64| {
            self.samples
                .get(((n as f64 - 1.0) * q) as usize)
                .copied()
                .unwrap_or_default()
        };
        println!(
            "{backend:<9} {:<44} n={:<5} mean={:>8.1}µs p50={:>8.1}µs p99={:>8.1}µs",
            self.name,
            self.samples.len(),
            total.as_secs_f64() * 1e6 / n as f64,
            pick(0.5).as_secs_f64() * 1e6,
            pick(0.99).as_secs_f64() * 1e6,
        );
    }
}

async fn run(
    store: &Store,
    backend: &str,
    iterations: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let session_id = format!("bench-{}", uuid::Uuid::new_v4().simple());
    store
        .create_session(NewSession {
            id: session_id.clone(),
            alert_data: "bench".into(),
            alert_type: "Bench".into(),
            chain_id: "bench".into(),
            author: None,
            runbook_url: None,
            mcp_selection: None,
            memory_scope: None,
        })
        .await?;
    let stage = store
        .create_stage(NewStage {
            id: None,
            session_id: session_id.clone(),
            stage_name: "bench".into(),
            kind: tarsy_core::StageKind::Investigation,
            stage_index: 0,
            expected_agent_count: 1,
            parallel_type: None,
            success_policy: None,
            chat_id: None,
            chat_user_message_id: None,
        })
        .await?;
    let execution = store
        .create_agent_execution(NewAgentExecution {
            id: None,
            stage_id: stage.id.clone(),
            session_id: session_id.clone(),
            agent_name: "BenchAgent".into(),
            agent_index: 1,
            kind: ExecutionKind::Investigation,
            iteration_strategy: IterationStrategy::NativeThinking,
            llm_provider: None,
        })
        .await?;
    let scope = RecordScope {
        session_id,
        stage_id: Some(stage.id),
        execution_id: Some(execution.id),
    };

    let mut create = Stats::new("create_timeline_event");
    let mut append = Stats::new("append_timeline_content");
    let mut complete = Stats::new("complete_timeline_event (+metadata)");
    let mut streamed = Stats::new("streamed event: create+append+complete");
    let mut message = Stats::new("create_message");
    for i in 0..iterations {
        let t0 = Instant::now();
        let ev = store
            .create_timeline_event(NewTimelineEvent {
                scope: scope.clone(),
                sequence_number: i as i64,
                event_type: TimelineEventType::LlmResponse,
                status: TimelineEventStatus::Streaming,
                content: String::new(),
                metadata: json!({"source": "native"}),
            })
            .await?;
        let t1 = Instant::now();
        store
            .append_timeline_content(&ev.id, "a chunk of streamed model output ")
            .await?;
        let t2 = Instant::now();
        store
            .complete_timeline_event(
                &ev.id,
                "a chunk of streamed model output",
                TimelineEventStatus::Completed,
                Some(json!({"tokens": 7})),
            )
            .await?;
        let t3 = Instant::now();
        store
            .create_message(NewMessage {
                scope: scope.clone(),
                sequence_number: i as i64 + 1,
                role: MessageRole::Assistant,
                content: "a model answer of moderate length".into(),
                tool_calls: vec![],
                tool_call_id: None,
                tool_name: None,
            })
            .await?;
        let t4 = Instant::now();
        create.samples.push(t1 - t0);
        append.samples.push(t2 - t1);
        complete.samples.push(t3 - t2);
        streamed.samples.push(t3 - t0);
        message.samples.push(t4 - t3);
    }
    for s in [
        &mut create,
        &mut append,
        &mut complete,
        &mut streamed,
        &mut message,
    ] {
        s.print(backend);
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iterations: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(500);
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!("{iterations} iterations per operation ({profile} build)");

    let path =
        std::env::temp_dir().join(format!("tarsy_bench_{}.db", uuid::Uuid::new_v4().simple()));
    let sqlite = Store::connect(&format!("sqlite:{}", path.display())).await?;
    run(&sqlite, "sqlite", iterations).await?;
    sqlite.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }

    let db = match tarsy_store::testing::TestDatabase::create("tarsy_bench").await {
        Ok(db) => db,
        Err(e) => {
            println!("postgres  skipped: {e}");
            return Ok(());
        }
    };
    let postgres = Store::connect_with(
        db.url(),
        ConnectOptions {
            max_connections: 2,
            ..ConnectOptions::default()
        },
    )
    .await?;
    let result = run(&postgres, "postgres", iterations).await;
    postgres.close().await;
    db.drop_database().await?;
    result
}
