//! `tarsy memory export` / `import` as a user runs them: a scope's
//! memories to YAML and back, ids kept, into another install (scope
//! changed), with a secret added to the file by hand masked on import.

use std::process::Command;

use tarsy_core::{MemoryCategory, MemoryValence};
use tarsy_store::{MemoryFilter, NewMemory, Store};

fn tarsy(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tarsy"))
        .args(args)
        .env_remove("DATABASE_URL")
        .output()
        .expect("run tarsy");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn memory(scope: &str, content: &str) -> NewMemory {
    NewMemory {
        scope: scope.into(),
        content: content.into(),
        category: MemoryCategory::Procedure,
        valence: MemoryValence::Helped,
        confidence: 0.7,
        alert_type: Some("PoolExhausted".into()),
        chain_id: Some("pool".into()),
        source_session_id: None,
        embedding: None,
    }
}

#[tokio::test]
async fn a_scope_round_trips_through_yaml() {
    let dir = tempfile_dir();
    let from = format!("sqlite:{}", dir.join("from.db").display());
    let to = format!("sqlite:{}", dir.join("to.db").display());
    let store = Store::connect(&from).await.unwrap();
    let kept = store
        .create_memory(memory("shop", "check the connection pool first"))
        .await
        .unwrap();
    store
        .create_memory(memory("billing", "a memory of another project"))
        .await
        .unwrap();
    store.close().await;

    let (ok, yaml, err) = tarsy(&[
        "memory",
        "export",
        "--scope",
        "shop",
        "--database-url",
        &from,
    ]);
    assert!(ok, "{err}");
    assert!(yaml.contains("kind: MemoryExport"), "{yaml}");
    assert!(
        yaml.contains(&kept.id) && yaml.contains("connection pool"),
        "{yaml}"
    );
    assert!(
        !yaml.contains("another project"),
        "only the scope's: {yaml}"
    );

    // Someone edits the file in Git and pastes a credential into it.
    let edited = yaml.replace(
        "check the connection pool first",
        "check the connection pool first (db password=hunter2-very-secret)",
    );
    let file = dir.join("memories.yaml");
    std::fs::write(&file, edited).unwrap();
    let path = file.display().to_string();
    let (ok, _, err) = tarsy(&[
        "memory",
        "import",
        &path,
        "--scope",
        "shop-eu",
        "--database-url",
        &to,
    ]);
    assert!(ok, "{err}");
    assert!(err.contains("imported 1 memories"), "{err}");

    let store = Store::connect(&to).await.unwrap();
    let imported = store.get_memory("shop-eu", &kept.id).await.unwrap();
    assert!(
        imported
            .content
            .starts_with("check the connection pool first")
    );
    assert!(
        !imported.content.contains("hunter2"),
        "{}",
        imported.content
    );
    let (none, _) = store
        .list_memories(&MemoryFilter {
            scope: "shop".into(),
            ..MemoryFilter::default()
        })
        .await
        .unwrap();
    assert!(none.is_empty(), "imported into the scope asked for only");
    store.close().await;

    // A file that is not an export is refused, saying what was expected.
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: tarsy.dev/v1alpha1\nkind: Chain\nscope: x\nmemories: []\n",
    )
    .unwrap();
    let (ok, _, err) = tarsy(&[
        "memory",
        "import",
        &bad.display().to_string(),
        "--database-url",
        &to,
    ]);
    assert!(!ok);
    assert!(err.contains("expected kind MemoryExport"), "{err}");
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tarsy-memory-cli-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
