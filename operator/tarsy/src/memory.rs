//! `tarsy memory export` / `import`: a scope's investigation memories as
//! YAML, to review them in Git or move them between installs.
//!
//! Embeddings are not exported (they belong to one embedding model; an
//! imported memory is found by full text until it is learned again), and
//! every imported text is masked again: a file edited by hand never brings
//! a secret into a prompt.

use std::path::PathBuf;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tarsy_store::{Memory, Store};

/// The export format's `kind`.
const KIND: &str = "MemoryExport";
/// The export format's `apiVersion`.
const API_VERSION: &str = "tarsy.dev/v1alpha1";

/// `tarsy memory`.
#[derive(Debug, clap::Args)]
pub struct MemoryArgs {
    /// Database: `postgres://…`, `sqlite:PATH`. Default: `tarsy serve`'s
    /// SQLite file in --data-dir.
    #[arg(long, env = "DATABASE_URL", global = true)]
    database_url: Option<String>,
    /// Directory of the default SQLite database.
    #[arg(long, env = "TARSY_DATA_DIR", global = true)]
    data_dir: Option<PathBuf>,
    #[command(subcommand)]
    action: MemoryAction,
}

#[derive(Debug, clap::Subcommand)]
enum MemoryAction {
    /// Write a scope's memories (deprecated ones too) as YAML to stdout.
    Export {
        /// The scope: a project (local mode) or `namespace[/project]`.
        #[arg(long, default_value = tarsy_config::defaults::DEFAULT_MEMORY_PROJECT)]
        scope: String,
    },
    /// Read memories from a YAML export: each is created, or replaced when
    /// its id exists. Their text is masked again.
    Import {
        /// The export file.
        file: PathBuf,
        /// Put them into this scope instead of the file's.
        #[arg(long)]
        scope: Option<String>,
    },
}

/// The file: a scope's memories.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MemoryExport {
    api_version: String,
    kind: String,
    /// The scope they were exported from.
    scope: String,
    memories: Vec<Memory>,
}

/// Runs `tarsy memory`.
pub async fn run(args: MemoryArgs) -> anyhow::Result<()> {
    let url = crate::serve::database_url(args.database_url, args.data_dir)?;
    let store = Store::connect(&url)
        .await
        .context("connecting to the session store")?;
    match args.action {
        MemoryAction::Export { scope } => {
            let memories = store
                .all_memories(&scope)
                .await?
                .into_iter()
                .map(|(m, _)| m)
                .collect();
            let export = MemoryExport {
                api_version: API_VERSION.into(),
                kind: KIND.into(),
                scope,
                memories,
            };
            print!("{}", serde_yaml::to_string(&export)?);
        }
        MemoryAction::Import { file, scope } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let export: MemoryExport = serde_yaml::from_str(&text)
                .with_context(|| format!("{} is not a memory export", file.display()))?;
            anyhow::ensure!(
                export.kind == KIND && export.api_version == API_VERSION,
                "{}: expected kind {KIND} of {API_VERSION}, found {} of {}",
                file.display(),
                export.kind,
                export.api_version
            );
            let mut imported = 0;
            for mut memory in export.memories {
                if let Some(s) = &scope {
                    memory.scope = s.clone();
                }
                memory.content = tarsy_masking::mask_memory_text(&memory.content)
                    .with_context(|| format!("memory {} could not be masked", memory.id))?;
                store
                    .import_memory(&memory, None)
                    .await
                    .with_context(|| format!("memory {}", memory.id))?;
                imported += 1;
            }
            eprintln!("imported {imported} memories");
        }
    }
    Ok(())
}
