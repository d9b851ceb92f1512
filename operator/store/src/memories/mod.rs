//! Investigation memories: short lessons a reflector writes after a session
//! is scored (facts, experiences, procedures; whether following them
//! helped or misled), recalled into the prompts of later investigations.
//!
//! A memory belongs to one scope — a namespace[/project] in cluster mode, a
//! project in local mode — and no call crosses it: a memory of another
//! scope is not found, listed, recalled or changed. Its content is masked
//! by the caller. Recall finds candidates in the database (the most recently
//! reinforced memories with a word of the query, and the most recently
//! reinforced memories with an embedding when the query has a vector) and
//! ranks them in Rust ([`rank`]), so both backends recall the same memories
//! in the same order. The same words find past sessions
//! ([`Store::search_past_sessions`]).
//!
//! Finding the most recent records with a word of a query stays cheap at
//! any size and word frequency: SQLite's full text keys memories by recency
//! (see its migration) and reads the newest matches first; on Postgres
//! (and for sessions on both) the newest records are read a page at a time
//! while matches are common, full text finds them once they prove rare
//! ([`Store::most_recent_matching`]).

mod rank;

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use chrono::{DateTime, Datelike, Utc};
use serde::{Deserialize, Serialize};
use tarsy_core::{MemoryCategory, MemoryValence, ReviewRating, SessionStatus, UnknownValue};

use crate::Store;
use crate::db::{Arg, BackendKind, Record, Sql, new_id, normalize_time, now};
use crate::error::{Result, StoreError, is_foreign_key_violation};

const MEMORY: &str = "memory";

/// The default least cosine similarity of a recalled memory.
pub const DEFAULT_MIN_SIMILARITY: f64 = 0.75;

/// The default least lexical overlap of a recalled memory.
pub const DEFAULT_MIN_LEXICAL: f64 = 0.2;

/// The most memories one recall returns.
pub const MAX_RECALL: usize = 20;

/// The most past sessions one search returns.
pub const MAX_PAST_SESSIONS: usize = 20;

/// The longest memory content, in characters.
pub const MAX_MEMORY_CHARS: usize = 8_192;

/// The most dimensions of an embedding.
pub const MAX_EMBEDDING_DIMENSIONS: usize = 16_384;

/// The longest excerpt of a past session's final analysis, in characters.
pub const EXCERPT_CHARS: usize = 600;

/// Candidates each kind of recall (words, vector) finds at most.
const CANDIDATES: usize = 200;

/// The most memories recall reads, newest first, looking for the most
/// recent ones with a word of the query before full text finds them
/// instead (see [`Store::most_recent_matching`]).
const MEMORY_WALK: usize = 5_000;

/// Past sessions matching a search that are ranked (the most recent).
const SESSION_CANDIDATES: usize = 100;

/// The most sessions a search reads, newest first, before full text finds
/// the matches instead.
const SESSION_WALK: usize = 1_000;

/// The default and largest page of [`Store::list_memories`].
const DEFAULT_PAGE: i64 = 50;
const MAX_PAGE: i64 = 500;

/// One memory. Its embedding is stored with it but never sent: see
/// [`Store::all_memories`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Memory {
    /// Id.
    pub id: String,
    /// The scope it belongs to: a namespace[/project] (cluster mode), a
    /// project (local mode).
    pub scope: String,
    /// The lesson (masked).
    pub content: String,
    /// Fact, experience or procedure.
    pub category: MemoryCategory,
    /// Whether following it helped or misled.
    pub valence: MemoryValence,
    /// 0–1: raised when it is seen again, changed by its session's review.
    pub confidence: f64,
    /// How many times it was learned (1, then one more per reinforcement).
    pub seen_count: i64,
    /// The alert type it was learned from.
    pub alert_type: Option<String>,
    /// The chain it was learned from.
    pub chain_id: Option<String>,
    /// The session it was learned from (which may since be deleted).
    pub source_session_id: Option<String>,
    /// Kept, but never recalled.
    pub deprecated: bool,
    /// Written.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
    /// Written or last reinforced: its age for recall.
    pub last_reinforced_at: DateTime<Utc>,
}

/// A memory to write.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMemory {
    /// Its scope.
    pub scope: String,
    /// The lesson, masked already.
    pub content: String,
    /// Fact, experience or procedure.
    pub category: MemoryCategory,
    /// Whether following it helped or misled.
    pub valence: MemoryValence,
    /// 0–1.
    pub confidence: f64,
    /// The alert type it was learned from.
    pub alert_type: Option<String>,
    /// The chain it was learned from.
    pub chain_id: Option<String>,
    /// The session it was learned from.
    pub source_session_id: Option<String>,
    /// The embedding of its content, when there is an embedder.
    pub embedding: Option<Vec<f32>>,
}

/// A change of a memory; `None` keeps a field as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryChange {
    /// New content. A new content without a new embedding drops the stored
    /// embedding (it described the old text).
    pub content: Option<String>,
    /// New category.
    pub category: Option<MemoryCategory>,
    /// New valence.
    pub valence: Option<MemoryValence>,
    /// New confidence, 0–1.
    pub confidence: Option<f64>,
    /// Deprecate (true) or restore (false).
    pub deprecated: Option<bool>,
    /// New embedding.
    pub embedding: Option<Vec<f32>>,
}

/// Which memories of a scope [`Store::list_memories`] returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryFilter {
    /// The scope (required).
    pub scope: String,
    /// Only this category.
    pub category: Option<MemoryCategory>,
    /// Only this valence.
    pub valence: Option<MemoryValence>,
    /// Only deprecated ones (true) or only live ones (false); both when
    /// `None`.
    pub deprecated: Option<bool>,
    /// Only memories with every word of this text (words as recall splits
    /// them; a text without any searchable word filters nothing).
    pub text: Option<String>,
    /// Page size, 1–500 (default 50).
    pub limit: Option<i64>,
    /// Memories to skip (default 0).
    pub offset: Option<i64>,
}

/// What to recall memories for.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallQuery {
    /// The scope searched (never crossed).
    pub scope: String,
    /// The text (an alert, a question): its words are searched for.
    pub text: String,
    /// The embedding of the text, when there is an embedder.
    pub vector: Option<Vec<f32>>,
    /// How many memories at most (capped at [`MAX_RECALL`]).
    pub limit: usize,
    /// Least cosine similarity for the vector to make a memory eligible.
    pub min_similarity: f64,
    /// Least lexical overlap (the share of the memory's words in the
    /// query) for the words to make a memory eligible.
    pub min_lexical: f64,
    /// Only memories learned from sessions whose review rated the
    /// investigation accurate.
    pub reviewed_only: bool,
    /// The alert type investigated: memories learned from the same type
    /// weigh a little more.
    pub alert_type: Option<String>,
}

impl RecallQuery {
    /// A query for `text` in `scope` with the default floors, at most 5
    /// memories.
    pub fn new(scope: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            scope: scope.into(),
            text: text.into(),
            vector: None,
            limit: 5,
            min_similarity: DEFAULT_MIN_SIMILARITY,
            min_lexical: DEFAULT_MIN_LEXICAL,
            reviewed_only: false,
            alert_type: None,
        }
    }
}

/// A recalled memory and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Recalled {
    /// The memory.
    pub memory: Memory,
    /// Relevance × confidence × decay (× the alert type's boost): what
    /// the memories are ordered by.
    pub score: f64,
    /// The share of the memory's words in the query.
    pub lexical: f64,
    /// Cosine similarity with the query's vector, when both have one.
    pub cosine: Option<f64>,
}

/// A search over past sessions of a scope.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionSearch {
    /// The scope (sessions whose memory scope it is).
    pub scope: String,
    /// The text whose words are searched for.
    pub text: String,
    /// Only sessions of this alert type.
    pub alert_type: Option<String>,
    /// Only sessions created in the last this many days.
    pub days_back: Option<u32>,
    /// How many sessions at most (capped at [`MAX_PAST_SESSIONS`]).
    pub limit: usize,
}

/// A past session found by [`Store::search_past_sessions`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PastSession {
    /// The session.
    pub session_id: String,
    /// Its alert type.
    pub alert_type: String,
    /// How it ended.
    pub status: SessionStatus,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// The start of its final analysis (at most 600 characters).
    pub final_analysis: Option<String>,
    /// The judge's score, when it has one.
    pub score: Option<u8>,
    /// The share of the searched words the session has.
    pub overlap: f64,
}

/// A memory and its embedding, as stored.
struct Stored {
    memory: Memory,
    embedding: Option<Vec<f32>>,
}

/// A past session found.
struct PastRow {
    id: String,
    alert_type: String,
    status: SessionStatus,
    created_at: DateTime<Utc>,
    /// The start of the final analysis.
    final_analysis: Option<String>,
    score: Option<i64>,
}

/// What recall ranks of a memory (its content as `text`, its
/// `last_reinforced_at` as `at`).
struct Candidate {
    id: String,
    text: String,
    confidence: f64,
    alert_type: Option<String>,
    at: DateTime<Utc>,
    embedding: Option<Vec<f32>>,
}

const CANDIDATE_COLUMNS: &str =
    "m.id, m.content AS text, m.confidence, m.alert_type, m.last_reinforced_at AS at";

/// A session as a search matches it: its id, the text full text covers,
/// its creation.
struct Text {
    id: String,
    text: String,
    at: DateTime<Utc>,
}

/// A record [`Store::most_recent_matching`] walks.
trait Walked {
    /// Its place in the order: (time, id).
    fn key(&self) -> (DateTime<Utc>, String);
    /// The text whose words are matched.
    fn text(&self) -> &str;
}

impl Walked for Candidate {
    fn key(&self) -> (DateTime<Utc>, String) {
        (self.at, self.id.clone())
    }
    fn text(&self) -> &str {
        &self.text
    }
}

impl Walked for Text {
    fn key(&self) -> (DateTime<Utc>, String) {
        (self.at, self.id.clone())
    }
    fn text(&self) -> &str {
        &self.text
    }
}

/// How [`Store::most_recent_matching`] looks for matches.
#[derive(Debug, Clone, Copy)]
struct Walk {
    /// How many.
    want: usize,
    /// The most rows it reads before it asks full text.
    max_rows: usize,
}

/// The condition of the page after `after` in the order `time DESC, id`
/// (`$first` is the time, `$first + 1` the id) and the values to bind;
/// nothing for the first page. The time bounds the index range; the id
/// breaks ties.
fn keyset(
    time: &str,
    id: &str,
    after: Option<&(DateTime<Utc>, String)>,
    first: usize,
) -> (String, Option<(DateTime<Utc>, String)>) {
    match after {
        None => (String::new(), None),
        Some(key) => (
            format!(
                " AND {time} <= ${first} AND ({time} < ${first} OR {id} > ${})",
                first + 1
            ),
            Some(key.clone()),
        ),
    }
}

fn wire<T: std::str::FromStr<Err = UnknownValue>>(
    value: String,
) -> std::result::Result<T, sqlx::Error> {
    value
        .parse()
        .map_err(|e: UnknownValue| sqlx::Error::Decode(e.into()))
}

/// An embedding as stored: little-endian f32s.
fn embedding_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A stored embedding; `None` for bytes that are not whole f32s.
fn embedding_from_bytes(bytes: &[u8]) -> Option<Vec<f32>> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

/// An embedding as a statement parameter: its bytes in hex, turned into
/// bytes by [`Fts::blob`] (the store's parameters are text, integers, JSON
/// and times).
fn embedding_param(vector: Option<&[f32]>) -> Option<String> {
    vector.map(|v| {
        let mut hex = String::with_capacity(v.len() * 8);
        for b in embedding_bytes(v) {
            let _ = write!(hex, "{b:02x}");
        }
        hex
    })
}

/// A float as a statement parameter, read back by `CAST(… AS DOUBLE
/// PRECISION)` (Rust prints the shortest text that parses back to it).
fn float_param(value: Option<f64>) -> Option<String> {
    value.map(|v| v.to_string())
}

macro_rules! memory_from_row {
    ($row_ty:ty) => {
        impl<'r> sqlx::FromRow<'r, $row_ty> for Memory {
            fn from_row(row: &'r $row_ty) -> std::result::Result<Self, sqlx::Error> {
                use sqlx::Row as _;
                Ok(Memory {
                    id: row.try_get("id")?,
                    scope: row.try_get("scope")?,
                    content: row.try_get("content")?,
                    category: wire(row.try_get("category")?)?,
                    valence: wire(row.try_get("valence")?)?,
                    confidence: row.try_get("confidence")?,
                    seen_count: row.try_get("seen_count")?,
                    alert_type: row.try_get("alert_type")?,
                    chain_id: row.try_get("chain_id")?,
                    source_session_id: row.try_get("source_session_id")?,
                    deprecated: row.try_get("deprecated")?,
                    created_at: row.try_get("created_at")?,
                    updated_at: row.try_get("updated_at")?,
                    last_reinforced_at: row.try_get("last_reinforced_at")?,
                })
            }
        }

        impl<'r> sqlx::FromRow<'r, $row_ty> for Stored {
            fn from_row(row: &'r $row_ty) -> std::result::Result<Self, sqlx::Error> {
                use sqlx::Row as _;
                let bytes: Option<Vec<u8>> = row.try_get("embedding")?;
                Ok(Stored {
                    memory: Memory::from_row(row)?,
                    embedding: bytes.as_deref().and_then(embedding_from_bytes),
                })
            }
        }

        impl<'r> sqlx::FromRow<'r, $row_ty> for Candidate {
            fn from_row(row: &'r $row_ty) -> std::result::Result<Self, sqlx::Error> {
                use sqlx::Row as _;
                let bytes: Option<Vec<u8>> = row.try_get("embedding")?;
                Ok(Candidate {
                    id: row.try_get("id")?,
                    text: row.try_get("text")?,
                    confidence: row.try_get("confidence")?,
                    alert_type: row.try_get("alert_type")?,
                    at: row.try_get("at")?,
                    embedding: bytes.as_deref().and_then(embedding_from_bytes),
                })
            }
        }

        impl<'r> sqlx::FromRow<'r, $row_ty> for Text {
            fn from_row(row: &'r $row_ty) -> std::result::Result<Self, sqlx::Error> {
                use sqlx::Row as _;
                Ok(Text {
                    id: row.try_get("id")?,
                    text: row.try_get("text")?,
                    at: row.try_get("at")?,
                })
            }
        }

        impl<'r> sqlx::FromRow<'r, $row_ty> for PastRow {
            fn from_row(row: &'r $row_ty) -> std::result::Result<Self, sqlx::Error> {
                use sqlx::Row as _;
                Ok(PastRow {
                    id: row.try_get("id")?,
                    alert_type: row.try_get("alert_type")?,
                    status: wire(row.try_get("status")?)?,
                    created_at: row.try_get("created_at")?,
                    final_analysis: row.try_get("final_analysis")?,
                    score: row.try_get("score")?,
                })
            }
        }
    };
}
memory_from_row!(sqlx::postgres::PgRow);
memory_from_row!(sqlx::sqlite::SqliteRow);

const COLUMNS: &str = "id, scope, content, category, valence, confidence, seen_count, alert_type, \
     chain_id, source_session_id, deprecated, created_at, updated_at, last_reinforced_at";

const M_COLUMNS: &str = "m.id, m.scope, m.content, m.category, m.valence, m.confidence, \
     m.seen_count, m.alert_type, m.chain_id, m.source_session_id, m.deprecated, m.created_at, \
     m.updated_at, m.last_reinforced_at";

/// The text of a session that full text covers (as the migrations' triggers
/// index it): the alert type, the alert data, the final analysis; the first
/// 100,000 characters.
const SESSION_TEXT: &str = "substr(alert_type || ' ' || alert_data || ' ' || \
     coalesce(final_analysis, ''), 1, 100000)";

/// What a past-session search returns of a session.
const PAST_COLUMNS: &str = "id, alert_type, status, created_at, \
     substr(final_analysis, 1, 2000) AS final_analysis, score";

/// The SQL of full text and bytes on each backend.
#[derive(Clone, Copy)]
struct Fts(BackendKind);

impl Fts {
    /// The memories `m` as full text finds them: joined with the table of
    /// their words (`*_fts`: see the migrations), which is read first (on
    /// SQLite written so: its planner, without statistics, would walk the
    /// scope's memories and look each up).
    fn memory_source(self) -> &'static str {
        match self.0 {
            BackendKind::Postgres => "memories_fts w JOIN memories m ON m.id = w.memory_id",
            BackendKind::Sqlite => {
                "memories_fts f CROSS JOIN memories_fts_keys k ON k.key = f.rowid \
                 CROSS JOIN memories m ON m.id = k.memory_id"
            }
        }
    }

    /// The memories of [`Fts::memory_source`] whose content has the
    /// words of the parameter `$n` (see [`Fts::query`]).
    fn memory_matches(self, n: usize) -> String {
        match self.0 {
            BackendKind::Postgres => format!("w.words @@ to_tsquery('simple', ${n})"),
            BackendKind::Sqlite => format!("f.memories_fts MATCH ${n}"),
        }
    }

    /// The sessions as full text finds them (see [`Fts::memory_source`]);
    /// the columns of the table of their words are named apart from
    /// `alert_sessions`'.
    fn session_source(self) -> &'static str {
        match self.0 {
            BackendKind::Postgres => {
                "session_fts w JOIN alert_sessions ON alert_sessions.id = w.session_id"
            }
            BackendKind::Sqlite => {
                "session_fts f CROSS JOIN session_fts_keys k ON k.key = f.rowid \
                 CROSS JOIN alert_sessions ON alert_sessions.id = k.session_id"
            }
        }
    }

    /// The sessions of [`Fts::session_source`] whose text has any word of
    /// the parameter `$n`.
    fn session_matches(self, n: usize) -> String {
        match self.0 {
            BackendKind::Postgres => format!("w.words @@ to_tsquery('simple', ${n})"),
            BackendKind::Sqlite => format!("f.session_fts MATCH ${n}"),
        }
    }

    /// The full-text query of `words` (letters and digits only: see
    /// [`rank::words`]), any or every one of them, each quoted.
    fn query(self, words: &[String], all: bool) -> String {
        let (quote, any, every) = match self.0 {
            BackendKind::Postgres => ('\'', " | ", " & "),
            BackendKind::Sqlite => ('"', " OR ", " AND "),
        };
        words
            .iter()
            .map(|w| format!("{quote}{w}{quote}"))
            .collect::<Vec<_>>()
            .join(if all { every } else { any })
    }

    /// Bytes from the hex text parameter `$n` (NULL stays NULL).
    fn blob(self, n: usize) -> String {
        match self.0 {
            BackendKind::Postgres => format!("decode(${n}, 'hex')"),
            BackendKind::Sqlite => format!("unhex(${n})"),
        }
    }
}

fn check_scope(scope: &str) -> Result<()> {
    if scope.trim().is_empty() {
        return Err(StoreError::InvalidInput(
            "a memory scope cannot be empty".into(),
        ));
    }
    Ok(())
}

fn check_content(content: &str) -> Result<String> {
    let content = content.trim();
    if content.is_empty() {
        return Err(StoreError::InvalidInput("a memory cannot be empty".into()));
    }
    let chars = content.chars().count();
    if chars > MAX_MEMORY_CHARS {
        return Err(StoreError::InvalidInput(format!(
            "a memory of {chars} characters is longer than {MAX_MEMORY_CHARS}"
        )));
    }
    Ok(content.to_string())
}

fn check_confidence(confidence: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&confidence) {
        return Err(StoreError::InvalidInput(format!(
            "confidence {confidence} is not between 0 and 1"
        )));
    }
    Ok(())
}

fn check_embedding(vector: Option<&[f32]>) -> Result<()> {
    let Some(v) = vector else { return Ok(()) };
    if v.is_empty() || v.len() > MAX_EMBEDDING_DIMENSIONS {
        return Err(StoreError::InvalidInput(format!(
            "an embedding has 1 to {MAX_EMBEDDING_DIMENSIONS} dimensions, not {}",
            v.len()
        )));
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Err(StoreError::InvalidInput(
            "an embedding must be finite numbers".into(),
        ));
    }
    Ok(())
}

/// Distinct ids, in the order given.
fn distinct<S: AsRef<str>>(ids: &[S]) -> Vec<&str> {
    let mut seen = HashSet::new();
    ids.iter()
        .map(AsRef::as_ref)
        .filter(|id| seen.insert(*id))
        .collect()
}

/// `$first, $first+1, …` for `n` parameters.
fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// At most [`EXCERPT_CHARS`] characters of `text`, an ellipsis marking a cut.
fn excerpt(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() <= EXCERPT_CHARS {
        return text.to_string();
    }
    let mut out: String = text.chars().take(EXCERPT_CHARS - 1).collect();
    out.push('…');
    out
}

fn days_since(at: DateTime<Utc>, now: DateTime<Utc>) -> f64 {
    (now - at).num_milliseconds() as f64 / 86_400_000.0
}

impl Store {
    fn fts(&self) -> Fts {
        Fts(self.db.kind())
    }

    /// Writes a new memory (seen once, reinforced now).
    pub async fn create_memory(&self, new: NewMemory) -> Result<Memory> {
        check_scope(&new.scope)?;
        let content = check_content(&new.content)?;
        check_confidence(new.confidence)?;
        check_embedding(new.embedding.as_deref())?;
        let id = new_id();
        let blob = self.fts().blob(10);
        self.db
            .execute(
                Sql::dynamic(format!(
                    "INSERT INTO memories (id, scope, content, category, valence, confidence, \
                     seen_count, alert_type, chain_id, source_session_id, deprecated, embedding, \
                     created_at, updated_at, last_reinforced_at) \
                     VALUES ($1, $2, $3, $4, $5, CAST($6 AS DOUBLE PRECISION), 1, $7, $8, $9, \
                     FALSE, {blob}, $11, $11, $11) ON CONFLICT (id) DO NOTHING"
                ))
                .bind(id.as_str())
                .bind(new.scope.as_str())
                .bind(content)
                .bind(new.category.as_str())
                .bind(new.valence.as_str())
                .bind(float_param(Some(new.confidence)))
                .bind(new.alert_type)
                .bind(new.chain_id)
                .bind(new.source_session_id)
                .bind(embedding_param(new.embedding.as_deref()))
                .bind(now()),
            )
            .await?;
        self.get_memory(&new.scope, &id).await
    }

    /// Writes a memory as exported (`tarsy memory import`): its id, counts
    /// and times kept; one with the same id in the same scope is replaced.
    /// A conflict when the id belongs to a memory of another scope.
    pub async fn import_memory(
        &self,
        memory: &Memory,
        embedding: Option<&[f32]>,
    ) -> Result<Memory> {
        check_scope(&memory.scope)?;
        let content = check_content(&memory.content)?;
        check_confidence(memory.confidence)?;
        check_embedding(embedding)?;
        if memory.id.trim().is_empty() {
            return Err(StoreError::InvalidInput("a memory needs an id".into()));
        }
        for (name, at) in [
            ("created_at", memory.created_at),
            ("updated_at", memory.updated_at),
            ("last_reinforced_at", memory.last_reinforced_at),
        ] {
            if !(1970..=2200).contains(&at.year()) {
                return Err(StoreError::InvalidInput(format!(
                    "{name} {at} is not between the years 1970 and 2200"
                )));
            }
        }
        if memory.seen_count < 1 {
            return Err(StoreError::InvalidInput(format!(
                "seen count {} is below 1",
                memory.seen_count
            )));
        }
        let blob = self.fts().blob(12);
        let n = self
            .db
            .execute(
                Sql::dynamic(format!(
                    "INSERT INTO memories (id, scope, content, category, valence, confidence, \
                     seen_count, alert_type, chain_id, source_session_id, deprecated, embedding, \
                     created_at, updated_at, last_reinforced_at) \
                     VALUES ($1, $2, $3, $4, $5, CAST($6 AS DOUBLE PRECISION), $7, $8, $9, $10, \
                     ($11 <> 0), {blob}, $13, $14, $15) \
                     ON CONFLICT (id) DO UPDATE SET content = excluded.content, \
                     category = excluded.category, valence = excluded.valence, \
                     confidence = excluded.confidence, seen_count = excluded.seen_count, \
                     alert_type = excluded.alert_type, chain_id = excluded.chain_id, \
                     source_session_id = excluded.source_session_id, \
                     deprecated = excluded.deprecated, embedding = excluded.embedding, \
                     created_at = excluded.created_at, updated_at = excluded.updated_at, \
                     last_reinforced_at = excluded.last_reinforced_at \
                     WHERE memories.scope = excluded.scope"
                ))
                .bind(memory.id.as_str())
                .bind(memory.scope.as_str())
                .bind(content)
                .bind(memory.category.as_str())
                .bind(memory.valence.as_str())
                .bind(float_param(Some(memory.confidence)))
                .bind(memory.seen_count)
                .bind(memory.alert_type.as_deref())
                .bind(memory.chain_id.as_deref())
                .bind(memory.source_session_id.as_deref())
                .bind(i64::from(memory.deprecated))
                .bind(embedding_param(embedding))
                .bind(normalize_time(memory.created_at))
                .bind(normalize_time(memory.updated_at))
                .bind(normalize_time(memory.last_reinforced_at)),
            )
            .await?;
        if n == 0 {
            return Err(StoreError::Conflict {
                kind: MEMORY,
                message: format!("memory {:?} belongs to another scope", memory.id),
            });
        }
        self.get_memory(&memory.scope, &memory.id).await
    }

    /// One memory of `scope`; not found when it is not there (also when a
    /// memory of another scope has the id).
    pub async fn get_memory(&self, scope: &str, id: &str) -> Result<Memory> {
        self.db
            .fetch_optional(
                Sql::dynamic(format!(
                    "SELECT {COLUMNS} FROM memories WHERE id = $1 AND scope = $2"
                ))
                .bind(id)
                .bind(scope),
            )
            .await?
            .ok_or_else(|| StoreError::not_found(MEMORY, id))
    }

    /// A page of the memories of a scope, most recently reinforced first,
    /// and how many match in all pages.
    pub async fn list_memories(&self, filter: &MemoryFilter) -> Result<(Vec<Memory>, i64)> {
        check_scope(&filter.scope)?;
        let limit = filter.limit.unwrap_or(DEFAULT_PAGE);
        let offset = filter.offset.unwrap_or(0);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(StoreError::InvalidInput(format!(
                "page size {limit} is outside 1..={MAX_PAGE}"
            )));
        }
        if offset < 0 {
            return Err(StoreError::InvalidInput(format!(
                "offset {offset} is negative"
            )));
        }
        let fts = self.fts();
        let mut source = "memories m";
        let mut clauses = vec!["m.scope = $1".to_string()];
        let mut args: Vec<Arg> = vec![filter.scope.as_str().into()];
        let param = |value: Arg, args: &mut Vec<Arg>| {
            args.push(value);
            args.len()
        };
        if let Some(c) = filter.category {
            clauses.push(format!(
                "m.category = ${}",
                param(c.as_str().into(), &mut args)
            ));
        }
        if let Some(v) = filter.valence {
            clauses.push(format!(
                "m.valence = ${}",
                param(v.as_str().into(), &mut args)
            ));
        }
        if let Some(d) = filter.deprecated {
            clauses.push(
                if d {
                    "m.deprecated = TRUE"
                } else {
                    "m.deprecated = FALSE"
                }
                .into(),
            );
        }
        if let Some(text) = &filter.text {
            let words = rank::query_words(text);
            if !words.is_empty() {
                let n = param(fts.query(&words, true).into(), &mut args);
                source = fts.memory_source();
                clauses.push(fts.memory_matches(n));
            }
        }
        let clause = clauses.join(" AND ");
        let mut page = Sql::dynamic(format!(
            "SELECT {M_COLUMNS} FROM {source} WHERE {clause} \
             ORDER BY m.last_reinforced_at DESC, m.id LIMIT ${} OFFSET ${}",
            args.len() + 1,
            args.len() + 2
        ));
        let mut count = Sql::dynamic(format!("SELECT COUNT(*) FROM {source} WHERE {clause}"));
        for arg in args {
            page = page.bind(arg.clone());
            count = count.bind(arg);
        }
        let memories = self.db.fetch_all(page.bind(limit).bind(offset)).await?;
        let total = self.db.fetch_i64(count).await?;
        Ok((memories, total))
    }

    /// Changes a memory of `scope` (its update time too); not found when
    /// it is not there.
    pub async fn update_memory(
        &self,
        scope: &str,
        id: &str,
        change: &MemoryChange,
    ) -> Result<Memory> {
        let content = change.content.as_deref().map(check_content).transpose()?;
        if let Some(c) = change.confidence {
            check_confidence(c)?;
        }
        check_embedding(change.embedding.as_deref())?;
        let blob = self.fts().blob(8);
        let n = self
            .db
            .execute(
                Sql::dynamic(format!(
                    "UPDATE memories SET content = COALESCE($3, content), \
                     category = COALESCE($4, category), valence = COALESCE($5, valence), \
                     confidence = COALESCE(CAST($6 AS DOUBLE PRECISION), confidence), \
                     deprecated = COALESCE($7 <> 0, deprecated), \
                     embedding = CASE WHEN $8 IS NOT NULL THEN {blob} \
                     WHEN $3 IS NOT NULL AND $3 <> content THEN NULL ELSE embedding END, \
                     updated_at = $9 \
                     WHERE id = $1 AND scope = $2"
                ))
                .bind(id)
                .bind(scope)
                .bind(content)
                .bind(change.category.map(|c| c.as_str()))
                .bind(change.valence.map(|v| v.as_str()))
                .bind(float_param(change.confidence))
                .bind(change.deprecated.map(i64::from))
                .bind(embedding_param(change.embedding.as_deref()))
                .bind(now()),
            )
            .await?;
        if n == 0 {
            return Err(StoreError::not_found(MEMORY, id));
        }
        self.get_memory(scope, id).await
    }

    /// Deletes a memory of `scope` (and the records of its injections);
    /// not found when it is not there.
    pub async fn delete_memory(&self, scope: &str, id: &str) -> Result<()> {
        let n = self
            .db
            .execute(
                Sql::new("DELETE FROM memories WHERE id = $1 AND scope = $2")
                    .bind(id)
                    .bind(scope),
            )
            .await?;
        if n == 0 {
            return Err(StoreError::not_found(MEMORY, id));
        }
        Ok(())
    }

    /// Records that live memories of `scope` were learned again: seen once
    /// more, reinforced now (their age restarts), confidence + 0.1 (at most
    /// 1). Ids of other scopes, unknown or deprecated ones are skipped;
    /// returns how many were reinforced.
    pub async fn reinforce_memories<S: AsRef<str>>(&self, scope: &str, ids: &[S]) -> Result<u64> {
        let ids = distinct(ids);
        if ids.is_empty() {
            return Ok(0);
        }
        let mut sql = Sql::dynamic(format!(
            "UPDATE memories SET seen_count = seen_count + 1, \
             confidence = CASE WHEN confidence + 0.1 > 1 THEN 1 ELSE confidence + 0.1 END, \
             last_reinforced_at = $2, updated_at = $2 \
             WHERE scope = $1 AND deprecated = FALSE AND id IN ({})",
            placeholders(3, ids.len())
        ))
        .bind(scope)
        .bind(now());
        for id in ids {
            sql = sql.bind(id);
        }
        self.db.execute(sql).await
    }

    /// Deprecates memories of `scope`: kept, never recalled. Returns how
    /// many were live.
    pub async fn deprecate_memories<S: AsRef<str>>(&self, scope: &str, ids: &[S]) -> Result<u64> {
        let ids = distinct(ids);
        if ids.is_empty() {
            return Ok(0);
        }
        let mut sql = Sql::dynamic(format!(
            "UPDATE memories SET deprecated = TRUE, updated_at = $2 \
             WHERE scope = $1 AND deprecated = FALSE AND id IN ({})",
            placeholders(3, ids.len())
        ))
        .bind(scope)
        .bind(now());
        for id in ids {
            sql = sql.bind(id);
        }
        self.db.execute(sql).await
    }

    /// A review's effect on what a session taught: adds `delta` to the
    /// confidence of every memory learned from it, kept within 0–1.
    /// Returns how many memories changed.
    pub async fn adjust_session_memories_confidence(
        &self,
        session_id: &str,
        delta: f64,
    ) -> Result<u64> {
        if !delta.is_finite() {
            return Err(StoreError::InvalidInput(format!(
                "confidence change {delta} is not a number"
            )));
        }
        self.db
            .execute(
                Sql::new(
                    "UPDATE memories SET confidence = CASE \
                     WHEN confidence + CAST($2 AS DOUBLE PRECISION) > 1 THEN 1 \
                     WHEN confidence + CAST($2 AS DOUBLE PRECISION) < 0 THEN 0 \
                     ELSE confidence + CAST($2 AS DOUBLE PRECISION) END, updated_at = $3 \
                     WHERE source_session_id = $1",
                )
                .bind(session_id)
                .bind(float_param(Some(delta)))
                .bind(now()),
            )
            .await
    }

    /// A review's effect on what a session taught: deprecates every memory
    /// learned from it. Returns how many were live.
    pub async fn deprecate_session_memories(&self, session_id: &str) -> Result<u64> {
        self.db
            .execute(
                Sql::new(
                    "UPDATE memories SET deprecated = TRUE, updated_at = $2 \
                     WHERE source_session_id = $1 AND deprecated = FALSE",
                )
                .bind(session_id)
                .bind(now()),
            )
            .await
    }

    /// Records which memories were put into a session's prompt, in order
    /// (position = index). Idempotent: a memory recorded already keeps its
    /// position; ids of memories that no longer exist are skipped. Not
    /// found for an unknown session.
    pub async fn record_injections<S: AsRef<str>>(
        &self,
        session_id: &str,
        memory_ids: &[S],
    ) -> Result<()> {
        let ids = distinct(memory_ids);
        if ids.is_empty() {
            return Ok(());
        }
        let at = now();
        let statements = ids
            .iter()
            .enumerate()
            .map(|(position, id)| {
                Sql::new(
                    "INSERT INTO memory_injections (session_id, memory_id, position, injected_at) \
                     SELECT $1, id, $3, $4 FROM memories WHERE id = $2 \
                     ON CONFLICT (session_id, memory_id) DO NOTHING",
                )
                .bind(session_id)
                .bind(*id)
                .bind(position as i64)
                .bind(at)
            })
            .collect();
        match self.db.execute_batch(statements).await {
            Ok(_) => Ok(()),
            Err(e) if is_foreign_key_violation(&e) => {
                Err(StoreError::not_found("session", session_id))
            }
            Err(e) => Err(e),
        }
    }

    /// The memories put into a session's prompt, in their order.
    pub async fn injected_memories(&self, session_id: &str) -> Result<Vec<Memory>> {
        self.db
            .fetch_all(
                Sql::dynamic(format!(
                    "SELECT {M_COLUMNS} FROM memory_injections i \
                     JOIN memories m ON m.id = i.memory_id \
                     WHERE i.session_id = $1 ORDER BY i.position, m.id"
                ))
                .bind(session_id),
            )
            .await
    }

    /// The memories learned from a session, oldest first.
    pub async fn learned_memories(&self, session_id: &str) -> Result<Vec<Memory>> {
        self.db
            .fetch_all(
                Sql::dynamic(format!(
                    "SELECT {COLUMNS} FROM memories WHERE source_session_id = $1 \
                     ORDER BY created_at, id"
                ))
                .bind(session_id),
            )
            .await
    }

    /// How many live (not deprecated) memories each scope has of each
    /// category, by scope and category: the metrics gauge.
    pub async fn memory_counts(&self) -> Result<Vec<(String, MemoryCategory, i64)>> {
        let rows: Vec<(String, String, i64)> = self
            .db
            .fetch_all(Sql::new(
                "SELECT scope, category, COUNT(*) FROM memories WHERE deprecated = FALSE \
                 GROUP BY scope, category ORDER BY scope, category",
            ))
            .await?;
        rows.into_iter()
            .map(|(scope, category, n)| Ok((scope, wire(category)?, n)))
            .collect::<std::result::Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// Every memory of a scope (deprecated ones too) with its embedding,
    /// oldest first: `tarsy memory export`.
    pub async fn all_memories(&self, scope: &str) -> Result<Vec<(Memory, Option<Vec<f32>>)>> {
        let rows: Vec<Stored> = self
            .db
            .fetch_all(
                Sql::dynamic(format!(
                    "SELECT {COLUMNS}, embedding FROM memories WHERE scope = $1 \
                     ORDER BY created_at, id"
                ))
                .bind(scope),
            )
            .await?;
        Ok(rows.into_iter().map(|s| (s.memory, s.embedding)).collect())
    }

    /// The memories of a scope that best fit a text (and its vector), best
    /// first; often none. Candidates: the 200 most recently reinforced live
    /// memories with any word of the text, and with a vector also the 200
    /// most recently reinforced live memories with an embedding. A
    /// candidate is eligible when its lexical overlap (the share of its
    /// words the text has) reaches `min_lexical` or its cosine reaches
    /// `min_similarity`; eligible ones are ranked by reciprocal-rank fusion
    /// of both signals (K = 60, each signal ranking the candidates that
    /// clear its floor), times confidence, times 0.5^(days since reinforced
    /// / 90), times 1.05 when learned from the query's alert type; ties by
    /// id. Words: lowercase runs of letters and digits of 2–64 characters,
    /// without common English words, the first 32 of the text.
    pub async fn recall_memories(&self, query: &RecallQuery) -> Result<Vec<Recalled>> {
        check_scope(&query.scope)?;
        for (name, floor) in [
            ("min_similarity", query.min_similarity),
            ("min_lexical", query.min_lexical),
        ] {
            if !floor.is_finite() {
                return Err(StoreError::InvalidInput(format!("{name} is not a number")));
            }
        }
        let limit = query.limit.min(MAX_RECALL);
        let words = rank::query_words(&query.text);
        let vector = query.vector.as_deref().filter(|v| !v.is_empty());
        if limit == 0 || (words.is_empty() && vector.is_none()) {
            return Ok(Vec::new());
        }
        // Both kinds of candidates at once (two connections).
        let semantic = async {
            match vector {
                Some(v) => {
                    let mut found = self.semantic_candidates(query).await?;
                    found.retain(|c| c.embedding.as_ref().is_some_and(|e| e.len() == v.len()));
                    Ok(found)
                }
                None => Ok(Vec::new()),
            }
        };
        let lexical = async {
            if words.is_empty() {
                Ok(Vec::new())
            } else {
                self.lexical_candidates(query, &words).await
            }
        };
        let (mut candidates, lexical): (Vec<Candidate>, Vec<Candidate>) =
            tokio::try_join!(semantic, lexical)?;
        let known: HashSet<String> = candidates.iter().map(|c| c.id.clone()).collect();
        let mut lexical: Vec<Candidate> = lexical
            .into_iter()
            .filter(|c| !known.contains(&c.id))
            .collect();
        if vector.is_some() {
            self.add_embeddings(&mut lexical).await?;
        }
        candidates.extend(lexical);

        let query_words: HashSet<&str> = words.iter().map(String::as_str).collect();
        let at = now();
        let scored: Vec<(f64, Option<f64>)> = candidates
            .iter()
            .map(|c| {
                let lexical = rank::lexical(&rank::words(&c.text), &query_words);
                let cosine = vector
                    .zip(c.embedding.as_deref())
                    .and_then(|(q, m)| rank::cosine(q, m));
                (lexical, cosine)
            })
            .collect();
        let ranked = rank::rank(
            &candidates
                .iter()
                .zip(&scored)
                .map(|(c, &(lexical, cosine))| rank::Candidate {
                    id: &c.id,
                    lexical,
                    cosine,
                    confidence: c.confidence,
                    age_days: days_since(c.at, at),
                    same_alert_type: query.alert_type.is_some() && c.alert_type == query.alert_type,
                })
                .collect::<Vec<_>>(),
            rank::Floors {
                lexical: query.min_lexical,
                similarity: query.min_similarity,
            },
            limit,
        );
        if ranked.is_empty() {
            return Ok(Vec::new());
        }
        // The whole records of the few recalled.
        let ids: Vec<&str> = ranked
            .iter()
            .map(|(i, _)| candidates[*i].id.as_str())
            .collect();
        let mut sql = Sql::dynamic(format!(
            "SELECT {COLUMNS} FROM memories WHERE id IN ({})",
            placeholders(1, ids.len())
        ));
        for id in &ids {
            sql = sql.bind(*id);
        }
        let mut memories: HashMap<String, Memory> = self
            .db
            .fetch_all::<Memory>(sql)
            .await?
            .into_iter()
            .map(|m| (m.id.clone(), m))
            .collect();
        Ok(ranked
            .into_iter()
            .filter_map(|(i, score)| {
                let (lexical, cosine) = scored[i];
                // Deleted since it was found: left out.
                memories.remove(&candidates[i].id).map(|memory| Recalled {
                    memory,
                    score,
                    lexical,
                    cosine,
                })
            })
            .collect())
    }

    /// The condition of recall's candidates on the memory `m`: its scope
    /// (`$1`), live, and (`reviewed_only`) learned from a session whose
    /// review rated the investigation accurate (read from an index of
    /// `(id, review_rating)`: SQLite, without statistics, would read each
    /// session's row, whose rating comes after its large texts).
    fn recall_filter(&self, query: &RecallQuery) -> String {
        let mut filter = String::from("m.scope = $1 AND m.deprecated = FALSE");
        if query.reviewed_only {
            let indexed = match self.db.kind() {
                BackendKind::Postgres => "",
                BackendKind::Sqlite => " INDEXED BY alert_sessions_rating_idx",
            };
            let _ = write!(
                filter,
                " AND EXISTS (SELECT 1 FROM alert_sessions s{indexed} \
                 WHERE s.id = m.source_session_id AND s.review_rating = '{}')",
                ReviewRating::Accurate.as_str()
            );
        }
        filter
    }

    /// The most recently reinforced candidates with an embedding.
    async fn semantic_candidates(&self, query: &RecallQuery) -> Result<Vec<Candidate>> {
        self.db
            .fetch_all(
                Sql::dynamic(format!(
                    "SELECT {CANDIDATE_COLUMNS}, m.embedding FROM memories m \
                     WHERE {} AND m.embedding IS NOT NULL \
                     ORDER BY m.last_reinforced_at DESC, m.id LIMIT {CANDIDATES}",
                    self.recall_filter(query)
                ))
                .bind(query.scope.as_str()),
            )
            .await
    }

    /// Reads the embeddings of candidates that have one.
    async fn add_embeddings(&self, candidates: &mut [Candidate]) -> Result<()> {
        if candidates.is_empty() {
            return Ok(());
        }
        // By id only: the ids come from the scope's candidates (a
        // condition on the scope would let SQLite scan the scope's index).
        let mut sql = Sql::dynamic(format!(
            "SELECT id, embedding FROM memories WHERE embedding IS NOT NULL AND id IN ({})",
            placeholders(1, candidates.len())
        ));
        for c in candidates.iter() {
            sql = sql.bind(c.id.as_str());
        }
        let rows: Vec<(String, Vec<u8>)> = self.db.fetch_all(sql).await?;
        let mut embeddings: HashMap<String, Vec<u8>> = rows.into_iter().collect();
        for c in candidates {
            c.embedding = embeddings
                .remove(&c.id)
                .as_deref()
                .and_then(embedding_from_bytes);
        }
        Ok(())
    }

    /// The [`CANDIDATES`] most recently reinforced candidates with any of
    /// `words`, without embeddings: on SQLite read from full text in that
    /// order, on Postgres see [`Store::most_recent_matching`].
    async fn lexical_candidates(
        &self,
        query: &RecallQuery,
        words: &[String],
    ) -> Result<Vec<Candidate>> {
        let fts = self.fts();
        let filter = self.recall_filter(query);
        let scope = query.scope.as_str();
        let matches = fts.memory_matches(2);
        let source = fts.memory_source();
        let text = fts.query(words, false);
        if fts.0 == BackendKind::Sqlite {
            // Full text keys memories by recency (see the migration): the
            // newest matches come first, and reading stops at enough.
            return self
                .db
                .fetch_all(
                    Sql::dynamic(format!(
                        "SELECT {CANDIDATE_COLUMNS}, NULL AS embedding FROM {source} \
                         WHERE {filter} AND {matches} ORDER BY f.rowid LIMIT {CANDIDATES}"
                    ))
                    .bind(scope)
                    .bind(text),
                )
                .await;
        }
        let wanted: HashSet<&str> = words.iter().map(String::as_str).collect();
        self.most_recent_matching(
            Walk {
                want: CANDIDATES,
                max_rows: MEMORY_WALK,
            },
            |after, size| {
                let (keyset, key) = keyset("m.last_reinforced_at", "m.id", after, 3);
                let mut sql = Sql::dynamic(format!(
                    "SELECT {CANDIDATE_COLUMNS}, NULL AS embedding FROM memories m \
                     WHERE {filter}{keyset} ORDER BY m.last_reinforced_at DESC, m.id LIMIT $2"
                ))
                .bind(scope)
                .bind(size);
                if let Some((at, id)) = key {
                    sql = sql.bind(at).bind(id);
                }
                sql
            },
            |text| rank::has_any(text, &wanted),
            || {
                // The matches first (no plan walks the recency index testing
                // each row), then the newest of them.
                Sql::dynamic(format!(
                    "WITH found AS MATERIALIZED (SELECT m.id, m.last_reinforced_at \
                     FROM {source} WHERE {filter} AND {matches}) \
                     SELECT {CANDIDATE_COLUMNS}, NULL AS embedding FROM memories m \
                     WHERE m.id IN (SELECT id FROM found \
                     ORDER BY last_reinforced_at DESC, id LIMIT {CANDIDATES})"
                ))
                .bind(scope)
                .bind(text.clone())
            },
        )
        .await
    }

    /// The `walk.want` most recent records (by time, newest first, then
    /// id) whose text has a word of a query, exactly, at a cost that does
    /// not grow with the table. While such records are common they are
    /// looked for newest first, a page at a time (`page`: the page of a
    /// size after a (time, id) key), their texts matched in Rust
    /// (`matches`: the words of [`rank::words`], split as full text splits
    /// them). Once they prove rare (the walk would read more than
    /// `walk.max_rows`), full text finds them instead (`newest_matches`).
    /// Records in no particular order.
    async fn most_recent_matching<R: Record + Walked>(
        &self,
        walk: Walk,
        page: impl Fn(Option<&(DateTime<Utc>, String)>, i64) -> Sql,
        matches: impl Fn(&str) -> bool,
        newest_matches: impl FnOnce() -> Sql,
    ) -> Result<Vec<R>> {
        let mut found: Vec<R> = Vec::new();
        let mut read = 0usize;
        let mut after = None;
        // Enough for the wanted ones when most records match.
        let mut size = walk.want + walk.want / 2;
        loop {
            let rows: Vec<R> = self.db.fetch_all(page(after.as_ref(), size as i64)).await?;
            let last = rows.len() < size;
            read += rows.len();
            after = rows.last().map(Walked::key);
            for row in rows {
                if found.len() < walk.want && matches(row.text()) {
                    found.push(row);
                }
            }
            if last || found.len() == walk.want {
                return Ok(found);
            }
            // The rows the walk would read in all at the rate so far; read
            // in the next page with some to spare (the estimate of a first
            // page is rough).
            let needed = walk.want * read / found.len().max(1);
            if needed > walk.max_rows {
                break;
            }
            size = (needed - read + needed / 4).max(walk.want / 2);
        }
        tracing::debug!(
            read,
            found = found.len(),
            "matches are rare: full text finds them"
        );
        self.db.fetch_all(newest_matches()).await
    }

    /// Finished sessions of a scope (those whose memory scope it is, not
    /// deleted) whose alert or final analysis has any word of the text (the
    /// words of [`Store::recall_memories`]): of the 100 most recent
    /// matches, those with the largest share of the words first, then the
    /// most recent.
    pub async fn search_past_sessions(&self, search: &SessionSearch) -> Result<Vec<PastSession>> {
        check_scope(&search.scope)?;
        let limit = search.limit.min(MAX_PAST_SESSIONS);
        let words = rank::query_words(&search.text);
        if limit == 0 || words.is_empty() {
            return Ok(Vec::new());
        }
        let fts = self.fts();
        let finished: Vec<String> = SessionStatus::ALL
            .iter()
            .filter(|s| s.is_terminal())
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        let mut clauses = vec![
            "memory_scope = $1".to_string(),
            "deleted_at IS NULL".to_string(),
            format!("status IN ({})", finished.join(", ")),
        ];
        // Bound after the scope: $2 onwards.
        let mut args: Vec<Arg> = Vec::new();
        if let Some(alert_type) = &search.alert_type {
            args.push(alert_type.as_str().into());
            clauses.push(format!("alert_type = ${}", args.len() + 1));
        }
        if let Some(days) = search.days_back {
            args.push((now() - chrono::Duration::days(i64::from(days))).into());
            clauses.push(format!("created_at >= ${}", args.len() + 1));
        }
        let filter = clauses.join(" AND ");
        let next = args.len() + 2;
        let scope = search.scope.as_str();
        let with_args = |mut sql: Sql| {
            sql = sql.bind(scope);
            for arg in &args {
                sql = sql.bind(arg.clone());
            }
            sql
        };
        let wanted: HashSet<&str> = words.iter().map(String::as_str).collect();
        let found: Vec<Text> = self
            .most_recent_matching(
                Walk {
                    want: SESSION_CANDIDATES,
                    max_rows: SESSION_WALK,
                },
                |after, size| {
                    let (keyset, key) = keyset("created_at", "id", after, next + 1);
                    let mut sql = with_args(Sql::dynamic(format!(
                        "SELECT id, {SESSION_TEXT} AS text, created_at AS at FROM alert_sessions \
                         WHERE {filter}{keyset} ORDER BY created_at DESC, id LIMIT ${next}"
                    )))
                    .bind(size);
                    if let Some((at, id)) = key {
                        sql = sql.bind(at).bind(id);
                    }
                    sql
                },
                |text| rank::has_any(text, &wanted),
                || {
                    let matches = fts.session_matches(next);
                    let sql = match fts.0 {
                        BackendKind::Postgres => format!(
                            "WITH found AS MATERIALIZED (SELECT id, created_at FROM {} \
                             WHERE {filter} AND {matches}) \
                             SELECT id, {SESSION_TEXT} AS text, created_at AS at \
                             FROM alert_sessions WHERE id IN (SELECT id FROM found \
                             ORDER BY created_at DESC, id LIMIT {SESSION_CANDIDATES})",
                            fts.session_source()
                        ),
                        BackendKind::Sqlite => format!(
                            "SELECT id, {SESSION_TEXT} AS text, created_at AS at FROM {} \
                             WHERE {filter} AND {matches} \
                             ORDER BY created_at DESC, id LIMIT {SESSION_CANDIDATES}",
                            fts.session_source()
                        ),
                    };
                    with_args(Sql::dynamic(sql)).bind(fts.query(&words, false))
                },
            )
            .await?;
        let mut ranked: Vec<(f64, &Text)> = found
            .iter()
            .map(|row| {
                let text: HashSet<String> = rank::words(&row.text).into_iter().collect();
                let shared = words.iter().filter(|w| text.contains(*w)).count();
                (shared as f64 / words.len() as f64, row)
            })
            .filter(|(overlap, _)| *overlap > 0.0)
            .collect();
        ranked.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then_with(|| b.1.at.cmp(&a.1.at))
                .then_with(|| a.1.id.cmp(&b.1.id))
        });
        ranked.truncate(limit);
        if ranked.is_empty() {
            return Ok(Vec::new());
        }
        // The records of the few found.
        let mut sql = Sql::dynamic(format!(
            "SELECT {PAST_COLUMNS} FROM alert_sessions WHERE id IN ({})",
            placeholders(1, ranked.len())
        ));
        for (_, row) in &ranked {
            sql = sql.bind(row.id.as_str());
        }
        let mut rows: HashMap<String, PastRow> = self
            .db
            .fetch_all::<PastRow>(sql)
            .await?
            .into_iter()
            .map(|r| (r.id.clone(), r))
            .collect();
        Ok(ranked
            .into_iter()
            .filter_map(|(overlap, found)| {
                rows.remove(&found.id).map(|row| PastSession {
                    session_id: row.id,
                    alert_type: row.alert_type,
                    status: row.status,
                    created_at: row.created_at,
                    final_analysis: row.final_analysis.as_deref().map(excerpt),
                    score: row.score.and_then(|s| u8::try_from(s).ok()),
                    overlap,
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeddings_round_trip_as_little_endian_f32s() {
        let v = [0.5f32, -1.25, 3.0e-7, f32::MAX];
        let bytes = embedding_bytes(&v);
        assert_eq!(&bytes[..4], &0.5f32.to_le_bytes());
        assert_eq!(embedding_from_bytes(&bytes).unwrap(), v);
        assert_eq!(embedding_from_bytes(&bytes[..5]), None);
        assert_eq!(embedding_param(Some(&[1.0])).unwrap(), "0000803f");
    }

    #[test]
    fn full_text_queries_quote_each_word() {
        let words = vec!["pod".to_string(), "oomkilled".to_string()];
        assert_eq!(
            Fts(BackendKind::Postgres).query(&words, false),
            "'pod' | 'oomkilled'"
        );
        assert_eq!(
            Fts(BackendKind::Sqlite).query(&words, true),
            "\"pod\" AND \"oomkilled\""
        );
    }

    #[test]
    fn excerpts_are_at_most_600_characters() {
        assert_eq!(excerpt("  short  "), "short");
        let long = "é".repeat(700);
        let cut = excerpt(&long);
        assert_eq!(cut.chars().count(), EXCERPT_CHARS);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn floats_print_back_exactly() {
        for v in [0.0, 1.0, 0.7, 0.1 + 0.2, 1e-7] {
            assert_eq!(float_param(Some(v)).unwrap().parse::<f64>().unwrap(), v);
        }
    }
}
