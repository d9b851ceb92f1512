//! Investigation memories on both backends: writing, reading, changing and
//! deleting them within a scope (never across one); recall — the floors
//! (often nothing), the ranking by overlap, confidence and age, vectors
//! without words in common, only what accurate sessions taught —; review
//! effects, reinforcement, injections; the search over past sessions; full
//! text kept in step with updates and deletions; import and export.
//! Every test runs on SQLite and on Postgres and expects the same answers.

mod common;

use chrono::{Duration, SubsecRound, Utc};
use common::session;
use tarsy_core::{MemoryCategory, MemoryValence, ReviewRating, SessionStatus};
use tarsy_store::{
    Memory, MemoryChange, MemoryFilter, NewMemory, RecallQuery, ReviewChange, SessionOutcome,
    SessionSearch, Store, StoreError,
};

on_both_backends!(
    memories_are_written_read_listed_changed_and_deleted,
    invalid_memories_are_refused,
    scopes_are_never_crossed,
    deprecated_memories_are_never_recalled,
    unrelated_text_recalls_nothing,
    more_overlap_then_more_confidence_ranks_first,
    an_old_unreinforced_memory_decays_below_a_fresh_one,
    the_same_alert_type_breaks_a_tie,
    vectors_recall_without_shared_words_and_fuse_with_words,
    reviewed_only_recalls_what_accurate_sessions_taught,
    reviews_change_what_a_session_taught,
    reinforcement_counts_raises_confidence_and_restarts_the_age,
    injections_are_recorded_in_order_once,
    past_sessions_are_searched_within_the_scope,
    past_session_filters_and_ranking,
    full_text_follows_updates_and_deletes,
    a_memory_outlives_its_session,
    import_keeps_ids_and_export_returns_embeddings,
    live_memories_are_counted_by_scope_and_category,
    words_split_alike_and_odd_text_is_harmless,
    many_memories_and_sessions_are_searched_exactly,
    candidates_are_the_most_recently_reinforced_matches,
);

const PROD: &str = "prod/payments";
const STAGING: &str = "staging/payments";

fn new(scope: &str, content: &str) -> NewMemory {
    NewMemory {
        scope: scope.into(),
        content: content.into(),
        category: MemoryCategory::Procedure,
        valence: MemoryValence::Helped,
        confidence: 0.8,
        alert_type: None,
        chain_id: None,
        source_session_id: None,
        embedding: None,
    }
}

async fn write(store: &Store, scope: &str, content: &str) -> Memory {
    store.create_memory(new(scope, content)).await.unwrap()
}

fn query(scope: &str, text: &str) -> RecallQuery {
    RecallQuery {
        limit: 10,
        ..RecallQuery::new(scope, text)
    }
}

async fn recall_ids(store: &Store, q: &RecallQuery) -> Vec<String> {
    store
        .recall_memories(q)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.memory.id)
        .collect()
}

fn filter(scope: &str) -> MemoryFilter {
    MemoryFilter {
        scope: scope.into(),
        ..MemoryFilter::default()
    }
}

/// A finished session of `scope` (its memory scope) with this analysis.
async fn finished(store: &Store, id: &str, scope: &str, alert_type: &str, analysis: &str) {
    let mut s = session(id);
    s.alert_type = alert_type.into();
    s.memory_scope = Some(scope.into());
    store.create_session(s).await.unwrap();
    store
        .finish_session(
            id,
            SessionOutcome {
                status: SessionStatus::Completed,
                final_analysis: Some(analysis.into()),
                executive_summary: None,
                executive_summary_error: None,
                error_message: None,
                end_reason: None,
            },
        )
        .await
        .unwrap();
}

fn search(scope: &str, text: &str) -> SessionSearch {
    SessionSearch {
        scope: scope.into(),
        text: text.into(),
        limit: 10,
        ..SessionSearch::default()
    }
}

async fn search_ids(store: &Store, s: &SessionSearch) -> Vec<String> {
    store
        .search_past_sessions(s)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.session_id)
        .collect()
}

async fn memories_are_written_read_listed_changed_and_deleted(store: Store) {
    let mut m = new(PROD, "  Check the connection pool of payments-api first  ");
    m.category = MemoryCategory::Fact;
    m.valence = MemoryValence::Misled;
    m.confidence = 0.6;
    m.alert_type = Some("HighErrorRate".into());
    m.chain_id = Some("k8s-chain".into());
    m.source_session_id = Some("gone-session".into());
    let created = store.create_memory(m).await.unwrap();
    assert_eq!(
        created.content,
        "Check the connection pool of payments-api first"
    );
    assert_eq!(
        (
            created.category,
            created.valence,
            created.confidence,
            created.seen_count
        ),
        (MemoryCategory::Fact, MemoryValence::Misled, 0.6, 1)
    );
    assert_eq!(created.alert_type.as_deref(), Some("HighErrorRate"));
    assert_eq!(created.chain_id.as_deref(), Some("k8s-chain"));
    assert_eq!(created.source_session_id.as_deref(), Some("gone-session"));
    assert!(!created.deprecated);
    assert_eq!(created.created_at, created.last_reinforced_at);
    assert_eq!(store.get_memory(PROD, &created.id).await.unwrap(), created);

    let other = write(
        &store,
        PROD,
        "Disk usage on db-0 grows 2% per day: expected",
    )
    .await;
    let (page, total) = store.list_memories(&filter(PROD)).await.unwrap();
    assert_eq!(total, 2);
    assert_eq!(page.len(), 2);
    let (page, total) = store
        .list_memories(&MemoryFilter {
            limit: Some(1),
            offset: Some(1),
            ..filter(PROD)
        })
        .await
        .unwrap();
    assert_eq!((page.len(), total), (1, 2), "a page and the total");
    let only = |f: MemoryFilter| {
        let store = store.clone();
        async move {
            let (page, total) = store.list_memories(&f).await.unwrap();
            assert_eq!(page.len() as i64, total);
            page.into_iter().map(|m| m.id).collect::<Vec<_>>()
        }
    };
    assert_eq!(
        only(MemoryFilter {
            category: Some(MemoryCategory::Fact),
            ..filter(PROD)
        })
        .await,
        [created.id.as_str()]
    );
    assert_eq!(
        only(MemoryFilter {
            valence: Some(MemoryValence::Helped),
            ..filter(PROD)
        })
        .await,
        [other.id.as_str()]
    );
    assert_eq!(
        only(MemoryFilter {
            text: Some("POOL connection".into()),
            ..filter(PROD)
        })
        .await,
        [created.id.as_str()],
        "every word of the text"
    );
    assert!(
        only(MemoryFilter {
            text: Some("pool disk".into()),
            ..filter(PROD)
        })
        .await
        .is_empty()
    );
    assert_eq!(
        only(MemoryFilter {
            text: Some("the of".into()),
            ..filter(PROD)
        })
        .await
        .len(),
        2,
        "no searchable word: no text filter"
    );

    let changed = store
        .update_memory(
            PROD,
            &created.id,
            &MemoryChange {
                content: Some("Check the connection pool size of payments-api".into()),
                valence: Some(MemoryValence::Helped),
                confidence: Some(0.9),
                ..MemoryChange::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        changed.content,
        "Check the connection pool size of payments-api"
    );
    assert_eq!(
        (changed.category, changed.valence, changed.confidence),
        (MemoryCategory::Fact, MemoryValence::Helped, 0.9)
    );
    assert!(changed.updated_at >= created.updated_at);
    assert_eq!(changed.created_at, created.created_at);
    let deprecated = store
        .update_memory(
            PROD,
            &created.id,
            &MemoryChange {
                deprecated: Some(true),
                ..MemoryChange::default()
            },
        )
        .await
        .unwrap();
    assert!(deprecated.deprecated);
    assert_eq!(deprecated.content, changed.content, "the rest is kept");
    assert_eq!(
        only(MemoryFilter {
            deprecated: Some(true),
            ..filter(PROD)
        })
        .await,
        [created.id.as_str()]
    );
    assert_eq!(
        only(MemoryFilter {
            deprecated: Some(false),
            ..filter(PROD)
        })
        .await,
        [other.id.as_str()]
    );

    store.delete_memory(PROD, &created.id).await.unwrap();
    assert!(
        store
            .get_memory(PROD, &created.id)
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        store
            .delete_memory(PROD, &created.id)
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        store
            .update_memory(PROD, "nope", &MemoryChange::default())
            .await
            .unwrap_err()
            .is_not_found()
    );
}

async fn invalid_memories_are_refused(store: Store) {
    let invalid = |r: Result<Memory, StoreError>| {
        assert!(
            matches!(r, Err(StoreError::InvalidInput(_))),
            "expected invalid input, got {r:?}"
        )
    };
    invalid(store.create_memory(new(PROD, "   ")).await);
    invalid(store.create_memory(new("", "content")).await);
    invalid(store.create_memory(new(PROD, &"x ".repeat(5000))).await);
    for confidence in [-0.1, 1.1, f64::NAN] {
        invalid(
            store
                .create_memory(NewMemory {
                    confidence,
                    ..new(PROD, "content")
                })
                .await,
        );
    }
    for embedding in [vec![], vec![f32::NAN]] {
        invalid(
            store
                .create_memory(NewMemory {
                    embedding: Some(embedding),
                    ..new(PROD, "content")
                })
                .await,
        );
    }
    let m = write(&store, PROD, "content").await;
    invalid(
        store
            .update_memory(
                PROD,
                &m.id,
                &MemoryChange {
                    confidence: Some(2.0),
                    ..MemoryChange::default()
                },
            )
            .await,
    );
    assert!(matches!(
        store
            .list_memories(&MemoryFilter {
                limit: Some(0),
                ..filter(PROD)
            })
            .await,
        Err(StoreError::InvalidInput(_))
    ));
    assert!(matches!(
        store.recall_memories(&query("", "pool")).await,
        Err(StoreError::InvalidInput(_))
    ));
}

async fn scopes_are_never_crossed(store: Store) {
    let prod = write(
        &store,
        PROD,
        "payments-api connection pool exhausted under load",
    )
    .await;
    let staging = write(
        &store,
        STAGING,
        "payments-api connection pool exhausted under load",
    )
    .await;

    assert!(
        store
            .get_memory(STAGING, &prod.id)
            .await
            .unwrap_err()
            .is_not_found()
    );
    let (page, total) = store.list_memories(&filter(STAGING)).await.unwrap();
    assert_eq!(
        (page.iter().map(|m| &m.id).collect::<Vec<_>>(), total),
        (vec![&staging.id], 1)
    );
    assert_eq!(
        recall_ids(
            &store,
            &query(STAGING, "payments-api connection pool exhausted")
        )
        .await,
        [staging.id.as_str()]
    );
    assert!(
        recall_ids(
            &store,
            &query("other", "payments-api connection pool exhausted")
        )
        .await
        .is_empty()
    );
    // Changes through another scope touch nothing.
    assert!(
        store
            .update_memory(
                STAGING,
                &prod.id,
                &MemoryChange {
                    content: Some("hijacked".into()),
                    ..MemoryChange::default()
                },
            )
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        store
            .delete_memory(STAGING, &prod.id)
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert_eq!(
        store
            .reinforce_memories(STAGING, &[&prod.id])
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .deprecate_memories(STAGING, &[&prod.id])
            .await
            .unwrap(),
        0
    );
    assert_eq!(store.get_memory(PROD, &prod.id).await.unwrap(), prod);
    // An import cannot move a memory into another scope.
    let moved = Memory {
        scope: STAGING.into(),
        ..prod.clone()
    };
    assert!(
        store
            .import_memory(&moved, None)
            .await
            .unwrap_err()
            .is_conflict()
    );
    assert_eq!(store.get_memory(PROD, &prod.id).await.unwrap(), prod);
    assert_eq!(store.all_memories(STAGING).await.unwrap().len(), 1);

    // Past sessions too.
    finished(
        &store,
        "s-prod",
        PROD,
        "HighErrorRate",
        "connection pool exhausted",
    )
    .await;
    finished(
        &store,
        "s-staging",
        STAGING,
        "HighErrorRate",
        "connection pool exhausted",
    )
    .await;
    assert_eq!(
        search_ids(&store, &search(STAGING, "connection pool")).await,
        ["s-staging"]
    );
    assert!(
        search_ids(&store, &search("other", "connection pool"))
            .await
            .is_empty()
    );
}

async fn deprecated_memories_are_never_recalled(store: Store) {
    let a = write(&store, PROD, "restart the payments worker after a deploy").await;
    let b = write(&store, PROD, "payments worker needs a restart after deploy").await;
    let text = "payments worker restart after deploy";
    assert_eq!(recall_ids(&store, &query(PROD, text)).await.len(), 2);
    assert_eq!(
        store
            .deprecate_memories(PROD, &[&a.id, &a.id])
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        recall_ids(&store, &query(PROD, text)).await,
        [b.id.as_str()]
    );
    assert_eq!(store.deprecate_memories(PROD, &[&a.id]).await.unwrap(), 0);
    // With vectors too.
    let mut q = query(PROD, "");
    q.vector = Some(vec![1.0, 0.0]);
    store
        .update_memory(
            PROD,
            &a.id,
            &MemoryChange {
                embedding: Some(vec![1.0, 0.0]),
                ..MemoryChange::default()
            },
        )
        .await
        .unwrap();
    assert!(recall_ids(&store, &q).await.is_empty());
    // Restored, it is recalled again.
    store
        .update_memory(
            PROD,
            &a.id,
            &MemoryChange {
                deprecated: Some(false),
                ..MemoryChange::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(recall_ids(&store, &q).await, [a.id.as_str()]);
}

async fn unrelated_text_recalls_nothing(store: Store) {
    write(
        &store,
        PROD,
        "The payments-api connection pool is exhausted when batch jobs run at midnight",
    )
    .await;
    write(
        &store,
        PROD,
        "Disk usage on db-0 grows 2% per day: expected",
    )
    .await;
    // Shares "pod" only: 1 of the memory's many words is below the floor.
    write(
        &store,
        PROD,
        "kafka broker partition leader election storm lags consumer pod",
    )
    .await;
    for text in [
        "PodCrashLooping pod web-frontend in namespace shop restarting",
        "the of and to in",
        "",
        "x y z",
    ] {
        assert!(
            recall_ids(&store, &query(PROD, text)).await.is_empty(),
            "{text:?} recalls nothing"
        );
    }
    // A vector far from every embedding (none here) recalls nothing either.
    let mut q = query(PROD, "");
    q.vector = Some(vec![0.0, 1.0]);
    assert!(recall_ids(&store, &q).await.is_empty());
    let mut q = query(PROD, "payments connection pool exhausted");
    q.limit = 0;
    assert!(recall_ids(&store, &q).await.is_empty(), "limit 0");
}

async fn more_overlap_then_more_confidence_ranks_first(store: Store) {
    let text = "HighErrorRate payments-api connection pool exhausted database timeout";
    // 5 of 5 words, 4 of 6, 2 of 5 in common with the query.
    let full = write(&store, PROD, "payments-api connection pool exhausted").await;
    let most = write(
        &store,
        PROD,
        "payments-api connection pool saturated nightly",
    )
    .await;
    let some = write(
        &store,
        PROD,
        "database timeout during nightly backup window",
    )
    .await;
    let recalled = store.recall_memories(&query(PROD, text)).await.unwrap();
    let ids: Vec<&str> = recalled.iter().map(|r| r.memory.id.as_str()).collect();
    assert_eq!(ids, [&full.id, &most.id, &some.id]);
    assert_eq!(recalled[0].lexical, 1.0);
    assert!((recalled[1].lexical - 4.0 / 6.0).abs() < 1e-9);
    assert!((recalled[2].lexical - 0.4).abs() < 1e-9);
    assert!(recalled.iter().all(|r| r.cosine.is_none()));
    assert!(recalled.windows(2).all(|w| w[0].score > w[1].score));

    // At equal overlap the more confident one first.
    let sure = store
        .create_memory(NewMemory {
            confidence: 0.95,
            ..new(STAGING, "retry budget of checkout exceeded")
        })
        .await
        .unwrap();
    let unsure = store
        .create_memory(NewMemory {
            confidence: 0.4,
            ..new(STAGING, "checkout retry budget exceeded")
        })
        .await
        .unwrap();
    assert_eq!(
        recall_ids(&store, &query(STAGING, "checkout retry budget exceeded")).await,
        [sure.id.clone(), unsure.id.clone()]
    );
    let mut q = query(STAGING, "checkout retry budget exceeded");
    q.limit = 1;
    assert_eq!(recall_ids(&store, &q).await, [sure.id]);
}

async fn an_old_unreinforced_memory_decays_below_a_fresh_one(store: Store) {
    let fresh = store
        .create_memory(NewMemory {
            confidence: 0.5,
            ..new(PROD, "redis eviction storm slows checkout")
        })
        .await
        .unwrap();
    let old_at = Utc::now() - Duration::days(180);
    let old = store
        .import_memory(
            &Memory {
                id: "old-memory".into(),
                confidence: 0.9,
                content: "checkout slows during redis eviction storm".into(),
                created_at: old_at,
                updated_at: old_at,
                last_reinforced_at: old_at,
                ..fresh.clone()
            },
            None,
        )
        .await
        .unwrap();
    let text = "checkout slows redis eviction storm";
    // Same overlap; 0.9 × 0.25 (two half-lives) < 0.5.
    assert_eq!(
        recall_ids(&store, &query(PROD, text)).await,
        [fresh.id.clone(), old.id.clone()]
    );
    // Reinforced, its age restarts and its confidence wins.
    store.reinforce_memories(PROD, &[&old.id]).await.unwrap();
    assert_eq!(
        recall_ids(&store, &query(PROD, text)).await,
        [old.id, fresh.id]
    );
}

async fn the_same_alert_type_breaks_a_tie(store: Store) {
    let a = store
        .create_memory(NewMemory {
            alert_type: Some("DiskFillingUp".into()),
            ..new(PROD, "log rotation stopped on ingest nodes")
        })
        .await
        .unwrap();
    let b = store
        .create_memory(NewMemory {
            alert_type: Some("HighLatency".into()),
            ..new(PROD, "ingest nodes log rotation stopped")
        })
        .await
        .unwrap();
    let text = "ingest nodes log rotation stopped";
    let mut q = query(PROD, text);
    q.alert_type = Some("HighLatency".into());
    let recalled = store.recall_memories(&q).await.unwrap();
    assert_eq!(recalled[0].memory.id, b.id);
    assert!((recalled[0].score / recalled[1].score - 1.05).abs() < 1e-6);
    q.alert_type = Some("DiskFillingUp".into());
    assert_eq!(recall_ids(&store, &q).await, [a.id, b.id]);
}

async fn vectors_recall_without_shared_words_and_fuse_with_words(store: Store) {
    let with = |content: &str, embedding: Vec<f32>| NewMemory {
        embedding: Some(embedding),
        ..new(PROD, content)
    };
    // No word in common with the query, close in meaning (cosine 0.98).
    let meaning = store
        .create_memory(with(
            "kubelet evicts workloads when nodes run short of RAM",
            vec![1.0, 0.2, 0.0],
        ))
        .await
        .unwrap();
    // Far in meaning (cosine 0).
    store
        .create_memory(with("certificate renewal cron job", vec![0.0, 0.0, 1.0]))
        .await
        .unwrap();
    // Words and meaning (cosine 0.89).
    let both = store
        .create_memory(with("oomkilled pods memory limit", vec![1.0, 0.5, 0.0]))
        .await
        .unwrap();
    // Words only, no embedding.
    let words = write(&store, PROD, "oomkilled pods memory limit raised").await;

    let mut q = query(PROD, "OOMKilled pods memory limit");
    q.vector = Some(vec![1.0, 0.0, 0.0]);
    let recalled = store.recall_memories(&q).await.unwrap();
    let ids: Vec<&str> = recalled.iter().map(|r| r.memory.id.as_str()).collect();
    // both: 1/61 (words) + 1/62 (cosine); meaning: 1/61 (cosine); words: 1/62.
    assert_eq!(ids, [&both.id, &meaning.id, &words.id]);
    let meaning_hit = &recalled[1];
    assert_eq!(meaning_hit.lexical, 0.0);
    assert!(meaning_hit.cosine.unwrap() > 0.97);
    assert_eq!(recalled[2].cosine, None, "no embedding, no cosine");

    // Above the cosine floor only when the floor allows it.
    q.min_similarity = 0.99;
    let ids = recall_ids(&store, &q).await;
    assert!(!ids.contains(&meaning.id));
    // A vector of another length is no match.
    let mut q = query(PROD, "");
    q.vector = Some(vec![1.0, 0.0]);
    assert!(recall_ids(&store, &q).await.is_empty());
    // A new content without a new embedding drops the old embedding.
    store
        .update_memory(
            PROD,
            &meaning.id,
            &MemoryChange {
                content: Some("eviction threshold of kubelet".into()),
                ..MemoryChange::default()
            },
        )
        .await
        .unwrap();
    let mut q = query(PROD, "");
    q.vector = Some(vec![1.0, 0.0, 0.0]);
    assert_eq!(recall_ids(&store, &q).await, [both.id.as_str()]);
}

async fn reviewed_only_recalls_what_accurate_sessions_taught(store: Store) {
    for (id, rating) in [
        ("s-accurate", Some(ReviewRating::Accurate)),
        ("s-inaccurate", Some(ReviewRating::Inaccurate)),
        ("s-unreviewed", None),
    ] {
        finished(&store, id, PROD, "HighErrorRate", "done").await;
        if let Some(rating) = rating {
            store
                .change_review(
                    id,
                    "alice",
                    &ReviewChange::Complete {
                        rating,
                        action_taken: None,
                        feedback: None,
                    },
                )
                .await
                .unwrap();
        }
    }
    let mut ids = Vec::new();
    for source in [
        Some("s-accurate"),
        Some("s-inaccurate"),
        Some("s-unreviewed"),
        None,
    ] {
        let m = store
            .create_memory(NewMemory {
                source_session_id: source.map(String::from),
                embedding: Some(vec![1.0, 0.0]),
                ..new(PROD, "grpc deadline exceeded between cart and pricing")
            })
            .await
            .unwrap();
        ids.push(m.id);
    }
    let mut q = query(PROD, "grpc deadline exceeded cart pricing");
    assert_eq!(recall_ids(&store, &q).await.len(), 4);
    q.reviewed_only = true;
    assert_eq!(recall_ids(&store, &q).await, [ids[0].as_str()]);
    let mut q = query(PROD, "");
    q.vector = Some(vec![1.0, 0.0]);
    q.reviewed_only = true;
    assert_eq!(recall_ids(&store, &q).await, [ids[0].as_str()]);
}

async fn reviews_change_what_a_session_taught(store: Store) {
    finished(&store, "s1", PROD, "HighErrorRate", "done").await;
    let mut taught = Vec::new();
    for (content, confidence) in [
        ("first lesson learned", 0.5),
        ("second lesson learned", 0.95),
    ] {
        let m = store
            .create_memory(NewMemory {
                confidence,
                source_session_id: Some("s1".into()),
                ..new(PROD, content)
            })
            .await
            .unwrap();
        taught.push(m);
    }
    let unrelated = write(&store, PROD, "third lesson learned").await;
    let learned: Vec<String> = store
        .learned_memories("s1")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(learned, [taught[0].id.clone(), taught[1].id.clone()]);

    assert_eq!(
        store
            .adjust_session_memories_confidence("s1", 0.1)
            .await
            .unwrap(),
        2
    );
    let confidences = |store: Store| async move {
        store
            .learned_memories("s1")
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.confidence)
            .collect::<Vec<_>>()
    };
    let after = confidences(store.clone()).await;
    assert!((after[0] - 0.6).abs() < 1e-9);
    assert_eq!(after[1], 1.0, "capped at 1");
    store
        .adjust_session_memories_confidence("s1", -0.7)
        .await
        .unwrap();
    let after = confidences(store.clone()).await;
    assert_eq!(after[0], 0.0, "kept at 0");
    assert!((after[1] - 0.3).abs() < 1e-9);
    assert_eq!(
        store
            .get_memory(PROD, &unrelated.id)
            .await
            .unwrap()
            .confidence,
        0.8,
        "other sessions' memories untouched"
    );
    // Confidence 0: never recalled.
    assert!(
        !recall_ids(&store, &query(PROD, "first lesson learned"))
            .await
            .contains(&taught[0].id)
    );

    assert_eq!(store.deprecate_session_memories("s1").await.unwrap(), 2);
    assert!(
        store
            .learned_memories("s1")
            .await
            .unwrap()
            .iter()
            .all(|m| m.deprecated)
    );
    assert_eq!(
        recall_ids(&store, &query(PROD, "lesson learned")).await,
        [unrelated.id]
    );
    assert!(store.learned_memories("nobody").await.unwrap().is_empty());
}

async fn reinforcement_counts_raises_confidence_and_restarts_the_age(store: Store) {
    let old_at = Utc::now() - Duration::days(30);
    let template = write(&store, PROD, "template").await;
    let old = store
        .import_memory(
            &Memory {
                id: "m-old".into(),
                content: "queue depth alarm is noise on weekends".into(),
                confidence: 0.95,
                created_at: old_at,
                updated_at: old_at,
                last_reinforced_at: old_at,
                ..template.clone()
            },
            None,
        )
        .await
        .unwrap();
    let low = store
        .create_memory(NewMemory {
            confidence: 0.3,
            ..new(PROD, "another lesson")
        })
        .await
        .unwrap();
    let n = store
        .reinforce_memories(
            PROD,
            &[old.id.as_str(), low.id.as_str(), "unknown", old.id.as_str()],
        )
        .await
        .unwrap();
    assert_eq!(n, 2);
    let old = store.get_memory(PROD, "m-old").await.unwrap();
    assert_eq!((old.seen_count, old.confidence), (2, 1.0));
    assert!(old.last_reinforced_at > old_at + Duration::days(29));
    assert_eq!(old.created_at, old_at.trunc_subsecs(6));
    let low = store.get_memory(PROD, &low.id).await.unwrap();
    assert_eq!(low.seen_count, 2);
    assert!((low.confidence - 0.4).abs() < 1e-9);

    store.deprecate_memories(PROD, &[&low.id]).await.unwrap();
    assert_eq!(store.reinforce_memories(PROD, &[&low.id]).await.unwrap(), 0);
    assert_eq!(
        store.reinforce_memories::<&str>(PROD, &[]).await.unwrap(),
        0
    );
}

async fn injections_are_recorded_in_order_once(store: Store) {
    finished(&store, "s1", PROD, "HighErrorRate", "done").await;
    let a = write(&store, PROD, "lesson a").await;
    let b = write(&store, PROD, "lesson b").await;
    let c = write(&store, PROD, "lesson c").await;
    store
        .record_injections(
            "s1",
            &[&c.id, &a.id, &c.id, &"deleted-memory".to_string(), &b.id],
        )
        .await
        .unwrap();
    let ids = |store: Store| async move {
        store
            .injected_memories("s1")
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(store.clone()).await,
        [c.id.clone(), a.id.clone(), b.id.clone()]
    );
    // Recording again changes nothing.
    store
        .record_injections("s1", &[&b.id, &a.id])
        .await
        .unwrap();
    assert_eq!(
        ids(store.clone()).await,
        [c.id.clone(), a.id.clone(), b.id.clone()]
    );
    assert!(
        store
            .record_injections("unknown-session", &[&a.id])
            .await
            .unwrap_err()
            .is_not_found()
    );
    store.record_injections::<&str>("s1", &[]).await.unwrap();
    // A deleted memory leaves the record.
    store.delete_memory(PROD, &a.id).await.unwrap();
    assert_eq!(ids(store.clone()).await, [c.id, b.id]);
    assert!(store.injected_memories("s2").await.unwrap().is_empty());
}

async fn past_sessions_are_searched_within_the_scope(store: Store) {
    finished(
        &store,
        "s-pool",
        PROD,
        "HighErrorRate",
        &format!(
            "## Root cause\nThe payments-api connection pool was exhausted by batch jobs. {}",
            "More detail. ".repeat(100)
        ),
    )
    .await;
    finished(
        &store,
        "s-disk",
        PROD,
        "DiskFillingUp",
        "Log rotation stopped on ingest-2",
    )
    .await;
    // Still running: not a past session.
    let mut running = session("s-running");
    running.alert_type = "HighErrorRate".into();
    running.memory_scope = Some(PROD.into());
    store.create_session(running).await.unwrap();
    // No memory scope.
    store.create_session(session("s-unscoped")).await.unwrap();
    store
        .finish_session(
            "s-unscoped",
            SessionOutcome {
                status: SessionStatus::Failed,
                final_analysis: Some("connection pool".into()),
                executive_summary: None,
                executive_summary_error: None,
                error_message: None,
                end_reason: None,
            },
        )
        .await
        .unwrap();

    let found = store
        .search_past_sessions(&search(PROD, "payments connection pool exhausted"))
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    let hit = &found[0];
    assert_eq!(
        (hit.session_id.as_str(), hit.alert_type.as_str(), hit.status),
        ("s-pool", "HighErrorRate", SessionStatus::Completed)
    );
    assert_eq!(hit.overlap, 1.0);
    assert_eq!(hit.score, None);
    let excerpt = hit.final_analysis.as_deref().unwrap();
    assert!(excerpt.starts_with("## Root cause"));
    assert!(excerpt.chars().count() <= 600);
    // The alert is searched too (the fixture's alert data names pod api-7).
    assert_eq!(
        search_ids(&store, &search(PROD, "DiskFillingUp")).await,
        ["s-disk"]
    );
    assert!(search_ids(&store, &search(PROD, "the of")).await.is_empty());
    // A scored session shows its score.
    let attempt = store
        .start_score_attempt("s-disk", None, None)
        .await
        .unwrap();
    store
        .complete_score(
            &attempt.id,
            &tarsy_store::ScoreResult {
                score: 72,
                outcome: "ok".into(),
                failure_tags: vec![],
                assessment: "fine".into(),
                tool_report: None,
            },
        )
        .await
        .unwrap();
    let found = store
        .search_past_sessions(&search(PROD, "rotation"))
        .await
        .unwrap();
    assert_eq!(found[0].score, Some(72));
}

async fn past_session_filters_and_ranking(store: Store) {
    finished(&store, "s-a", PROD, "HighErrorRate", "redis eviction storm").await;
    finished(
        &store,
        "s-b",
        PROD,
        "HighLatency",
        "redis eviction storm slowed checkout",
    )
    .await;
    finished(&store, "s-c", PROD, "HighLatency", "redis failover").await;
    let text = "redis eviction storm checkout";
    // Most words first (s-b: 4 of 4, s-a: 3, s-c: 1), then the newest.
    assert_eq!(
        search_ids(&store, &search(PROD, text)).await,
        ["s-b", "s-a", "s-c"]
    );
    assert_eq!(
        search_ids(&store, &search(PROD, "redis")).await,
        ["s-c", "s-b", "s-a"],
        "equal overlap: newest first"
    );
    let typed = SessionSearch {
        alert_type: Some("HighLatency".into()),
        ..search(PROD, text)
    };
    assert_eq!(search_ids(&store, &typed).await, ["s-b", "s-c"]);
    let limited = SessionSearch {
        limit: 1,
        ..search(PROD, text)
    };
    assert_eq!(search_ids(&store, &limited).await, ["s-b"]);
    // Created within the last day: all; within the last 0 days (since
    // now): none.
    let recent = SessionSearch {
        days_back: Some(1),
        ..search(PROD, text)
    };
    assert_eq!(search_ids(&store, &recent).await.len(), 3);
    let none = SessionSearch {
        days_back: Some(0),
        ..search(PROD, text)
    };
    assert!(search_ids(&store, &none).await.is_empty());
    // Soft-deleted sessions are not found.
    store.soft_delete_session("s-b").await.unwrap();
    assert_eq!(
        search_ids(&store, &search(PROD, text)).await,
        ["s-a", "s-c"]
    );
}

async fn full_text_follows_updates_and_deletes(store: Store) {
    let m = write(&store, PROD, "zookeeper session expired on broker").await;
    let found = |text: &'static str| {
        let store = store.clone();
        async move { recall_ids(&store, &query(PROD, text)).await }
    };
    assert_eq!(
        found("zookeeper session expired broker").await,
        [m.id.as_str()]
    );
    store
        .update_memory(
            PROD,
            &m.id,
            &MemoryChange {
                content: Some("etcd quorum lost after node drain".into()),
                ..MemoryChange::default()
            },
        )
        .await
        .unwrap();
    assert!(found("zookeeper session expired broker").await.is_empty());
    assert_eq!(found("etcd quorum lost node drain").await, [m.id.as_str()]);
    let (page, _) = store
        .list_memories(&MemoryFilter {
            text: Some("zookeeper".into()),
            ..filter(PROD)
        })
        .await
        .unwrap();
    assert!(page.is_empty());
    // An import replacing the memory replaces its words.
    let replaced = Memory {
        content: "vault token expired for ci runner".into(),
        ..store.get_memory(PROD, &m.id).await.unwrap()
    };
    store.import_memory(&replaced, None).await.unwrap();
    assert!(found("etcd quorum lost node drain").await.is_empty());
    assert_eq!(found("vault token expired runner").await, [m.id.as_str()]);
    store.delete_memory(PROD, &m.id).await.unwrap();
    assert!(found("vault token expired runner").await.is_empty());

    // Sessions: the final analysis is written when the session ends.
    let mut s = session("s1");
    s.alert_type = "HighErrorRate".into();
    s.memory_scope = Some(PROD.into());
    store.create_session(s).await.unwrap();
    store
        .finish_session(
            "s1",
            SessionOutcome {
                status: SessionStatus::Completed,
                final_analysis: Some("A flapping readiness probe on checkout".into()),
                executive_summary: None,
                executive_summary_error: None,
                error_message: None,
                end_reason: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        search_ids(&store, &search(PROD, "flapping readiness probe")).await,
        ["s1"]
    );
}

async fn a_memory_outlives_its_session(store: Store) {
    finished(
        &store,
        "s1",
        PROD,
        "HighErrorRate",
        "noisy neighbour on node-7",
    )
    .await;
    let m = store
        .create_memory(NewMemory {
            source_session_id: Some("s1".into()),
            ..new(PROD, "noisy neighbour on node-7 steals cpu")
        })
        .await
        .unwrap();
    store.record_injections("s1", &[&m.id]).await.unwrap();
    store.soft_delete_session("s1").await.unwrap();
    let purged = store
        .purge_deleted_sessions(Utc::now() + Duration::days(1))
        .await
        .unwrap();
    assert_eq!(purged, 1);
    assert!(
        search_ids(&store, &search(PROD, "noisy neighbour"))
            .await
            .is_empty()
    );
    assert!(store.injected_memories("s1").await.unwrap().is_empty());
    let kept = store.get_memory(PROD, &m.id).await.unwrap();
    assert_eq!(kept.source_session_id.as_deref(), Some("s1"));
    assert_eq!(
        recall_ids(&store, &query(PROD, "noisy neighbour node steals cpu")).await,
        [m.id]
    );
    // A new session with the same words is found (the search index
    // follows deletions).
    finished(&store, "s2", PROD, "HighErrorRate", "noisy neighbour again").await;
    assert_eq!(
        search_ids(&store, &search(PROD, "noisy neighbour")).await,
        ["s2"]
    );
}

async fn import_keeps_ids_and_export_returns_embeddings(store: Store) {
    let original = store
        .create_memory(NewMemory {
            embedding: Some(vec![0.25, -1.5, 3.0]),
            alert_type: Some("HighLatency".into()),
            ..new(PROD, "slow dns lookups from sidecars")
        })
        .await
        .unwrap();
    let plain = write(&store, PROD, "plain lesson").await;
    store.deprecate_memories(PROD, &[&plain.id]).await.unwrap();
    let exported = store.all_memories(PROD).await.unwrap();
    assert_eq!(exported.len(), 2, "deprecated ones too");
    assert_eq!(exported[0].0, original);
    assert_eq!(exported[0].1.as_deref(), Some(&[0.25f32, -1.5, 3.0][..]));
    assert_eq!(exported[1].1, None);

    // Into an empty scope of another store: the same records.
    let at = Utc::now() - Duration::days(10);
    let imported = store
        .import_memory(
            &Memory {
                id: "imported-1".into(),
                scope: STAGING.into(),
                seen_count: 4,
                deprecated: true,
                created_at: at,
                updated_at: at,
                last_reinforced_at: at,
                ..original.clone()
            },
            Some(&[1.0, 2.0]),
        )
        .await
        .unwrap();
    assert_eq!(imported.id, "imported-1");
    assert_eq!((imported.seen_count, imported.deprecated), (4, true));
    assert_eq!(imported.created_at, at.trunc_subsecs(6));
    let again = store
        .import_memory(&imported, Some(&[1.0, 2.0]))
        .await
        .unwrap();
    assert_eq!(again, imported, "an import is idempotent");
    let exported = store.all_memories(STAGING).await.unwrap();
    assert_eq!(exported, vec![(imported, Some(vec![1.0, 2.0]))]);
    // The embedding never goes out with the memory itself.
    let json = serde_json::to_value(&original).unwrap();
    assert!(json.get("embedding").is_none());
    assert_eq!(json["category"], "procedure");
}

async fn live_memories_are_counted_by_scope_and_category(store: Store) {
    write(&store, PROD, "one").await;
    write(&store, PROD, "two").await;
    let fact = store
        .create_memory(NewMemory {
            category: MemoryCategory::Fact,
            ..new(PROD, "three")
        })
        .await
        .unwrap();
    write(&store, STAGING, "four").await;
    let gone = write(&store, STAGING, "five").await;
    store
        .deprecate_memories(STAGING, &[&gone.id])
        .await
        .unwrap();
    assert_eq!(
        store.memory_counts().await.unwrap(),
        vec![
            (PROD.to_string(), MemoryCategory::Fact, 1),
            (PROD.to_string(), MemoryCategory::Procedure, 2),
            (STAGING.to_string(), MemoryCategory::Procedure, 1),
        ]
    );
    store.delete_memory(PROD, &fact.id).await.unwrap();
    assert_eq!(store.memory_counts().await.unwrap().len(), 2);
}

async fn words_split_alike_and_odd_text_is_harmless(store: Store) {
    // Host names, paths, versions, hyphens and underscores are split into
    // words by both backends, and case does not matter.
    let m = write(
        &store,
        PROD,
        "payments-api.prod.svc timeout_ms=/var/log/app v1.2.3 Café",
    )
    .await;
    for text in ["svc prod", "timeout log var", "api payments", "CAFÉ"] {
        let mut q = query(PROD, text);
        q.min_lexical = 0.01;
        assert_eq!(recall_ids(&store, &q).await, [m.id.as_str()], "{text:?}");
        let (page, _) = store
            .list_memories(&MemoryFilter {
                text: Some(text.into()),
                ..filter(PROD)
            })
            .await
            .unwrap();
        assert_eq!(page.len(), 1, "{text:?}");
    }
    // Text that would be syntax to either full text or to SQL is words.
    for text in [
        "'; DROP TABLE memories; --",
        "\"unbalanced NEAR(a b) * ^col: -x",
        "a & b | !c <-> d:*",
        "\0 nul",
    ] {
        assert!(recall_ids(&store, &query(PROD, text)).await.is_empty());
        assert!(search_ids(&store, &search(PROD, text)).await.is_empty());
        store
            .list_memories(&MemoryFilter {
                text: Some(text.into()),
                ..filter(PROD)
            })
            .await
            .unwrap();
    }
    assert_eq!(store.list_memories(&filter(PROD)).await.unwrap().1, 1);
}

async fn many_memories_and_sessions_are_searched_exactly(store: Store) {
    // 600 memories reinforced at the same time (ties broken by id): recall
    // reads the newest a page at a time while a word of the query is
    // common, and asks full text once it proves rare.
    let at = Utc::now() - Duration::hours(1);
    let template = write(&store, STAGING, "template").await;
    for i in 0..600 {
        let content = match i {
            123 | 345 | 555 | 456 => format!("zeppelin outage {i}"),
            i if i % 10 == 0 && i < 500 => format!("kestrel nest blocks drain pipe number {i}"),
            i if i % 10 == 0 => "kestrel sighting".to_string(),
            _ => format!("filler lesson about queue depth {i}"),
        };
        store
            .import_memory(
                &Memory {
                    id: format!("m-{i:03}"),
                    scope: PROD.into(),
                    content,
                    created_at: at,
                    updated_at: at,
                    last_reinforced_at: at,
                    ..template.clone()
                },
                None,
            )
            .await
            .unwrap();
    }
    store.deprecate_memories(PROD, &["m-456"]).await.unwrap();
    write(&store, STAGING, "zeppelin outage elsewhere").await;

    // Common ("kestrel" in one memory of ten): the second page holds the
    // memories that fit best.
    let mut q = query(PROD, "kestrel sighting");
    q.limit = 20;
    let expected: Vec<String> = (500..600)
        .step_by(10)
        .map(|i| format!("m-{i:03}"))
        .collect();
    assert_eq!(recall_ids(&store, &q).await, expected);
    // Rare ("zeppelin" in three live memories of the scope).
    let mut q = query(PROD, "zeppelin outage");
    q.min_lexical = 0.5;
    assert_eq!(recall_ids(&store, &q).await, ["m-123", "m-345", "m-555"]);
    let (page, total) = store
        .list_memories(&MemoryFilter {
            text: Some("zeppelin outage".into()),
            limit: Some(2),
            ..filter(PROD)
        })
        .await
        .unwrap();
    assert_eq!((page.len(), total), (2, 4), "deprecated ones are listed");

    // 130 finished sessions: "heron" in every third, "zeppelin" in two.
    for i in 0..130 {
        let analysis = match i {
            7 | 77 => format!("zeppelin outage {i}"),
            i if i % 3 == 0 => format!("heron on the roof {i}"),
            _ => format!("routine check {i}"),
        };
        finished(
            &store,
            &format!("s-{i:03}"),
            PROD,
            "HighErrorRate",
            &analysis,
        )
        .await;
    }
    let mut s = search(PROD, "zeppelin");
    assert_eq!(search_ids(&store, &s).await, ["s-077", "s-007"]);
    s.text = "heron roof".into();
    s.limit = 20;
    let found = search_ids(&store, &s).await;
    let expected: Vec<String> = (0..130)
        .rev()
        .filter(|i| i % 3 == 0)
        .take(20)
        .map(|i| format!("s-{i:03}"))
        .collect();
    assert_eq!(found, expected, "the newest first");
}

async fn candidates_are_the_most_recently_reinforced_matches(store: Store) {
    // The best fit, reinforced long ago, behind 250 newer matches: not
    // among the 200 candidates until it is reinforced again.
    let old_at = Utc::now() - Duration::days(30);
    let template = write(&store, STAGING, "template").await;
    let old = store
        .import_memory(
            &Memory {
                id: "old".into(),
                scope: PROD.into(),
                content: "alpha beta gamma".into(),
                created_at: old_at,
                updated_at: old_at,
                last_reinforced_at: old_at,
                ..template
            },
            None,
        )
        .await
        .unwrap();
    for i in 0..250 {
        write(&store, PROD, &format!("alpha filler {i:03}")).await;
    }
    let q = query(PROD, "alpha beta gamma");
    let recalled = recall_ids(&store, &q).await;
    assert_eq!(recalled.len(), 10);
    assert!(!recalled.contains(&old.id));
    store.reinforce_memories(PROD, &[&old.id]).await.unwrap();
    assert_eq!(recall_ids(&store, &q).await[0], old.id);
    // Moved back in time by an import, it drops out again.
    let mut back = store.get_memory(PROD, &old.id).await.unwrap();
    back.last_reinforced_at = old_at;
    store.import_memory(&back, None).await.unwrap();
    assert!(!recall_ids(&store, &q).await.contains(&old.id));
}

/// Sessions stored before migration 0018 are searchable after it (SQLite
/// fills its full-text table in the migration; Postgres indexes them).
mod sessions_stored_before_the_migration {
    use sqlx::migrate::Migrator;
    use tarsy_store::testing::{TempSqlite, TestDatabase};
    use tarsy_store::{SessionSearch, Store};

    const BEFORE_MEMORIES: i64 = 17;
    const INSERT: &str = "INSERT INTO alert_sessions (id, alert_data, alert_type, chain_id, \
         status, final_analysis, created_at) VALUES ('old', '{\"pod\": \"api-7\"}', \
         'HighErrorRate', 'k8s-chain', 'completed', 'The ingress controller dropped websockets', \
         '2026-01-01T00:00:00Z')";

    async fn migrator(backend: &str) -> Migrator {
        let dir = format!("{}/migrations/{backend}", env!("CARGO_MANIFEST_DIR"));
        Migrator::new(std::path::Path::new(&dir)).await.unwrap()
    }

    /// A session stored before has no memory scope: given one (as an
    /// operator could, by hand), its old text is found.
    const SCOPE_IT: &str =
        "UPDATE alert_sessions SET memory_scope = 'prod/payments' WHERE id = 'old'";

    async fn searchable(store: Store) {
        let found = store
            .search_past_sessions(&SessionSearch {
                scope: super::PROD.into(),
                text: "ingress websockets".into(),
                limit: 5,
                ..SessionSearch::default()
            })
            .await
            .unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].session_id, "old");
        assert_eq!(found[0].overlap, 1.0);
        store.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        let db = TempSqlite::new("tarsy_memories_migration");
        let options = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(db.url().trim_start_matches("sqlite:"))
            .create_if_missing(true);
        let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
        migrator("sqlite")
            .await
            .run_to(BEFORE_MEMORIES, &pool)
            .await
            .unwrap();
        sqlx::raw_sql(INSERT).execute(&pool).await.unwrap();
        migrator("sqlite").await.run(&pool).await.unwrap();
        sqlx::raw_sql(SCOPE_IT).execute(&pool).await.unwrap();
        pool.close().await;
        searchable(Store::connect(&db.url()).await.unwrap()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        let db = TestDatabase::create("tarsy_test")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
        migrator("postgres")
            .await
            .run_to(BEFORE_MEMORIES, &pool)
            .await
            .unwrap();
        sqlx::raw_sql(INSERT).execute(&pool).await.unwrap();
        migrator("postgres").await.run(&pool).await.unwrap();
        sqlx::raw_sql(SCOPE_IT).execute(&pool).await.unwrap();
        pool.close().await;
        searchable(Store::connect(db.url()).await.unwrap()).await;
        db.drop_database().await.unwrap_or_else(|e| panic!("{e}"));
    }
}
