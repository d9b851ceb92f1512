//! The one place that knows there are two backends.
//!
//! Repository code writes each statement once, with `$N` placeholders (both
//! Postgres and SQLite accept them), collects its parameters as [`Arg`]s and
//! runs it through [`Db`] or [`Tx`]; only this module matches on the backend.
//! The few real dialect differences are the functions of [`Dialect`].

use std::borrow::Cow;
use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use serde_json::Value;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::types::Json;
use sqlx::{Arguments, AssertSqlSafe, FromRow, PgPool, Postgres, Sqlite, SqlitePool, Transaction};

use crate::error::{Result, StoreError};

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// PostgreSQL (cluster mode).
    Postgres,
    /// SQLite (local mode, tests).
    Sqlite,
}

/// A statement parameter, backend-neutral.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Text(Option<String>),
    Int(Option<i64>),
    Real(Option<f64>),
    Json(Option<Value>),
    Time(Option<DateTime<Utc>>),
}

impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(v.to_string()))
    }
}
impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(Some(v))
    }
}
impl From<&String> for Arg {
    fn from(v: &String) -> Self {
        Arg::Text(Some(v.clone()))
    }
}
impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Self {
        Arg::Text(v)
    }
}
impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Arg::Text(v.map(str::to_string))
    }
}
impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}
impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}
impl From<Option<f64>> for Arg {
    fn from(v: Option<f64>) -> Self {
        Arg::Real(v)
    }
}
impl From<Value> for Arg {
    fn from(v: Value) -> Self {
        Arg::Json(Some(v))
    }
}
impl From<Option<Value>> for Arg {
    fn from(v: Option<Value>) -> Self {
        Arg::Json(v)
    }
}
impl From<DateTime<Utc>> for Arg {
    fn from(v: DateTime<Utc>) -> Self {
        Arg::Time(Some(v))
    }
}
impl From<Option<DateTime<Utc>>> for Arg {
    fn from(v: Option<DateTime<Utc>>) -> Self {
        Arg::Time(v)
    }
}

/// What replaces a character text columns cannot hold (NUL: Postgres text
/// and JSONB reject it). Visible, so nobody mistakes it for the original.
pub const REPLACEMENT: char = '\u{FFFD}';

/// Text as both backends store it: every NUL replaced by [`REPLACEMENT`].
/// Applied to every parameter, so alert data, chat, model output, tool
/// results and ids behave the same on SQLite and Postgres (an id with a NUL
/// simply matches nothing).
pub fn storable_text(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\0') {
        Cow::Owned(text.replace('\0', &REPLACEMENT.to_string()))
    } else {
        Cow::Borrowed(text)
    }
}

/// JSON as both backends store it (see [`storable_text`]), keys included.
pub fn storable_json(v: &mut Value) {
    match v {
        Value::String(s) => {
            if s.contains('\0') {
                *s = storable_text(s).into_owned();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(storable_json),
        Value::Object(map) => {
            if map.keys().any(|k| k.contains('\0')) {
                let entries = std::mem::take(map);
                for (k, mut v) in entries {
                    storable_json(&mut v);
                    map.insert(storable_text(&k).into_owned(), v);
                }
            } else {
                map.values_mut().for_each(storable_json);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fn storable(arg: Arg) -> Arg {
    match arg {
        Arg::Text(Some(t)) if t.contains('\0') => Arg::Text(Some(storable_text(&t).into_owned())),
        Arg::Json(Some(mut v)) => {
            storable_json(&mut v);
            Arg::Json(Some(v))
        }
        other => other,
    }
}

/// A statement and its parameters, in `$N` order.
#[derive(Debug, Clone)]
pub(crate) struct Sql {
    text: Cow<'static, str>,
    args: Vec<Arg>,
}

impl Sql {
    /// A statement whose text is fixed.
    pub(crate) fn new(text: &'static str) -> Self {
        Self {
            text: Cow::Borrowed(text),
            args: Vec::new(),
        }
    }

    /// A statement assembled at run time. Only ever from constant fragments:
    /// every value goes through [`Sql::bind`].
    pub(crate) fn dynamic(text: String) -> Self {
        Self {
            text: Cow::Owned(text),
            args: Vec::new(),
        }
    }

    /// Appends the next `$N` parameter, its text made storable.
    pub(crate) fn bind(mut self, arg: impl Into<Arg>) -> Self {
        self.args.push(storable(arg.into()));
        self
    }

    fn pg(self) -> Result<(AssertSqlSafe<Cow<'static, str>>, PgArguments)> {
        let mut out = PgArguments::default();
        for arg in self.args {
            let added = match arg {
                Arg::Text(v) => out.add(v),
                Arg::Int(v) => out.add(v),
                Arg::Real(v) => out.add(v),
                Arg::Json(v) => out.add(v.map(Json)),
                Arg::Time(v) => out.add(v),
            };
            added.map_err(|e| StoreError::Database(sqlx::Error::Encode(e)))?;
        }
        Ok((AssertSqlSafe(self.text), out))
    }

    fn sqlite(self) -> Result<(AssertSqlSafe<Cow<'static, str>>, SqliteArguments)> {
        let mut out = SqliteArguments::default();
        for arg in self.args {
            let added = match arg {
                Arg::Text(v) => out.add(v),
                Arg::Int(v) => out.add(v),
                Arg::Real(v) => out.add(v),
                Arg::Json(v) => out.add(v.map(Json)),
                Arg::Time(v) => out.add(v),
            };
            added.map_err(|e| StoreError::Database(sqlx::Error::Encode(e)))?;
        }
        Ok((AssertSqlSafe(self.text), out))
    }
}

/// A record type readable from rows of both backends.
pub(crate) trait Record:
    for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin + 'static
{
}
impl<T> Record for T where
    T: for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin + 'static
{
}

/// The connection pool of either backend.
#[derive(Debug, Clone)]
pub(crate) enum Pool {
    Postgres(PgPool),
    Sqlite(SqlitePool),
}

/// A pool and how a handle on it treats an unreachable database.
#[derive(Debug, Clone)]
pub(crate) struct Db {
    pub(crate) pool: Pool,
    /// Calls that fail transiently are made again, with backoff, for at
    /// most this long (`None`: they fail at once).
    pub(crate) patience: Option<Duration>,
    /// A call that gets no connection within this long fails as
    /// [`StoreError::TimedOut`].
    pub(crate) limit: Option<Duration>,
}

/// An open transaction of either backend.
pub(crate) enum Tx {
    Postgres(Transaction<'static, Postgres>),
    Sqlite(Transaction<'static, Sqlite>),
}

/// A borrowed executor: a pool or an open transaction's connection.
pub(crate) enum Target<'a> {
    PgPool(&'a PgPool),
    LitePool(&'a SqlitePool),
    PgConn(&'a mut sqlx::PgConnection),
    LiteConn(&'a mut sqlx::SqliteConnection),
}

/// Runs `$body` with `$e` bound to the executor and `$text`/`$args` to the
/// statement prepared for that backend: one definition, four instantiations.
macro_rules! on_target {
    ($target:expr, $sql:expr, |$e:ident, $text:ident, $args:ident| $body:expr) => {
        match $target {
            Target::PgPool($e) => {
                let ($text, $args) = $sql.pg()?;
                $body
            }
            Target::PgConn($e) => {
                let ($text, $args) = $sql.pg()?;
                $body
            }
            Target::LitePool($e) => {
                let ($text, $args) = $sql.sqlite()?;
                $body
            }
            Target::LiteConn($e) => {
                let ($text, $args) = $sql.sqlite()?;
                $body
            }
        }
    };
}

impl Target<'_> {
    /// Runs a statement; returns the number of affected rows.
    pub(crate) async fn execute(self, sql: Sql) -> Result<u64> {
        Ok(on_target!(self, sql, |e, text, args| sqlx::query_with(
            text, args
        )
        .execute(e)
        .await?
        .rows_affected()))
    }

    /// Runs a query returning at most one record.
    ///
    /// On SQLite the statement is stepped to its end (`fetch_all`): an
    /// autocommit write (`UPDATE … RETURNING`) commits when it finishes,
    /// and a statement left unfinished after its first row is committed
    /// while sqlx resets it, which drops the commit's error (a full disk
    /// would read as success).
    pub(crate) async fn fetch_optional<T: Record>(self, sql: Sql) -> Result<Option<T>> {
        Ok(match self {
            Target::PgPool(e) => {
                let (text, args) = sql.pg()?;
                sqlx::query_as_with::<_, T, _>(text, args)
                    .fetch_optional(e)
                    .await?
            }
            Target::PgConn(e) => {
                let (text, args) = sql.pg()?;
                sqlx::query_as_with::<_, T, _>(text, args)
                    .fetch_optional(e)
                    .await?
            }
            Target::LitePool(e) => {
                let (text, args) = sql.sqlite()?;
                let rows = sqlx::query_as_with::<_, T, _>(text, args)
                    .fetch_all(e)
                    .await?;
                rows.into_iter().next()
            }
            Target::LiteConn(e) => {
                let (text, args) = sql.sqlite()?;
                let rows = sqlx::query_as_with::<_, T, _>(text, args)
                    .fetch_all(e)
                    .await?;
                rows.into_iter().next()
            }
        })
    }

    /// Runs a query returning records.
    pub(crate) async fn fetch_all<T: Record>(self, sql: Sql) -> Result<Vec<T>> {
        Ok(on_target!(self, sql, |e, text, args| {
            sqlx::query_as_with::<_, T, _>(text, args)
                .fetch_all(e)
                .await?
        }))
    }

    /// Runs a query returning one integer (counts, ids); stepped to its
    /// end like [`Target::fetch_optional`].
    pub(crate) async fn fetch_i64(self, sql: Sql) -> Result<i64> {
        let values: Vec<i64> = on_target!(self, sql, |e, text, args| {
            sqlx::query_scalar_with::<_, i64, _>(text, args)
                .fetch_all(e)
                .await?
        });
        values
            .into_iter()
            .next()
            .ok_or(StoreError::Database(sqlx::Error::RowNotFound))
    }
}

impl Db {
    /// A handle on `pool` that fails at once.
    pub(crate) fn new(pool: Pool) -> Self {
        Self {
            pool,
            patience: None,
            limit: None,
        }
    }

    fn target(&self) -> Target<'_> {
        match &self.pool {
            Pool::Postgres(p) => Target::PgPool(p),
            Pool::Sqlite(p) => Target::LitePool(p),
        }
    }

    /// The backend of this pool.
    pub(crate) fn kind(&self) -> BackendKind {
        match self.pool {
            Pool::Postgres(_) => BackendKind::Postgres,
            Pool::Sqlite(_) => BackendKind::Sqlite,
        }
    }

    /// The dialect helpers of this pool's backend.
    pub(crate) fn dialect(&self) -> Dialect {
        Dialect(self.kind())
    }

    /// Runs `call` under this handle's rules: when it is patient, made
    /// again after a transient failure with
    /// jittered exponential backoff until its patience runs out. Every call
    /// made again is idempotent: the same statement with the same ids, each
    /// insert of a record with an id ignoring one already stored.
    ///
    /// Each attempt is bounded by the patience left (at least
    /// [`MIN_ATTEMPT`]): the pool keeps trying to connect to a server that
    /// is down for its whole acquire timeout, and a statement sent to one
    /// that vanished without a reset waits for TCP; either would stretch
    /// one attempt past the bound the caller counts on. An attempt cut
    /// short may still have been committed; the call made again, or the
    /// records read back by whoever resumes the work, find it stored.
    pub(crate) async fn run<T, F, Fut>(&self, what: &str, mut call: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let Some(patience) = self.patience else {
            return call().await;
        };
        let started = tokio::time::Instant::now();
        let mut waits = backoff();
        let mut failures = 0u32;
        loop {
            let bound = patience.saturating_sub(started.elapsed()).max(MIN_ATTEMPT);
            let attempt = tokio::time::timeout(bound, call())
                .await
                .unwrap_or(Err(StoreError::TimedOut(bound)));
            match attempt {
                Err(e) if e.is_transient() => {
                    failures += 1;
                    let left = patience.saturating_sub(started.elapsed());
                    let Some(wait) = waits.next().map(|w| w.min(left)).filter(|w| !w.is_zero())
                    else {
                        tracing::warn!(what, failures, error = %e, "the database is still unavailable; giving up");
                        return Err(e);
                    };
                    if failures == 1 {
                        tracing::warn!(what, error = %e, "the database is unavailable; waiting for it");
                    } else {
                        tracing::debug!(what, failures, error = %e, "the database is still unavailable");
                    }
                    tokio::time::sleep(wait).await;
                }
                Ok(v) => {
                    if failures > 0 {
                        tracing::info!(
                            what,
                            failures,
                            waited_ms =
                                u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                            "the database is reachable again"
                        );
                    }
                    return Ok(v);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Runs `call` on this handle's target: the pool, or — for a handle
    /// with a time limit — a connection taken from it within the limit (a
    /// database that is down fails the call at once instead of after the
    /// pool's acquire timeout; a slow query on a live one is not cut).
    async fn on_target<T>(&self, call: impl AsyncFnOnce(Target<'_>) -> Result<T>) -> Result<T> {
        let Some(limit) = self.limit else {
            return call(self.target()).await;
        };
        let timed_out = |_| StoreError::TimedOut(limit);
        match &self.pool {
            Pool::Postgres(p) => {
                let mut conn = tokio::time::timeout(limit, p.acquire())
                    .await
                    .map_err(timed_out)??;
                call(Target::PgConn(&mut conn)).await
            }
            Pool::Sqlite(p) => {
                let mut conn = tokio::time::timeout(limit, p.acquire())
                    .await
                    .map_err(timed_out)??;
                call(Target::LiteConn(&mut conn)).await
            }
        }
    }

    /// Begins a transaction. On SQLite it takes the write lock up front
    /// (`BEGIN IMMEDIATE`): a read-then-write transaction must not fail with
    /// "database is locked" halfway through when another connection writes.
    /// Not repeated by itself: the caller repeats the whole transaction
    /// ([`Db::run`]).
    pub(crate) async fn begin(&self) -> Result<Tx> {
        Ok(match &self.pool {
            Pool::Postgres(p) => Tx::Postgres(p.begin().await?),
            Pool::Sqlite(p) => Tx::Sqlite(p.begin_with("BEGIN IMMEDIATE").await?),
        })
    }

    /// Runs a statement; returns the number of affected rows.
    pub(crate) async fn execute(&self, sql: Sql) -> Result<u64> {
        self.run("execute", || {
            self.on_target(async |t| t.execute(sql.clone()).await)
        })
        .await
    }

    /// Runs a query returning at most one record.
    pub(crate) async fn fetch_optional<T: Record>(&self, sql: Sql) -> Result<Option<T>> {
        self.run("fetch", || {
            self.on_target(async |t| t.fetch_optional(sql.clone()).await)
        })
        .await
    }

    /// Runs a query returning records.
    pub(crate) async fn fetch_all<T: Record>(&self, sql: Sql) -> Result<Vec<T>> {
        self.run("fetch", || {
            self.on_target(async |t| t.fetch_all(sql.clone()).await)
        })
        .await
    }

    /// Runs a query returning one integer.
    pub(crate) async fn fetch_i64(&self, sql: Sql) -> Result<i64> {
        self.run("fetch", || {
            self.on_target(async |t| t.fetch_i64(sql.clone()).await)
        })
        .await
    }
}

/// The least time one attempt of a patient call is given, also when its
/// patience is (nearly) spent: enough for a live database to answer.
const MIN_ATTEMPT: Duration = Duration::from_secs(1);

/// The waits between attempts while the database is unreachable: from
/// 100 ms doubling to 5 s, jittered so that the writers a restart cut off
/// do not all come back at once.
fn backoff() -> impl Iterator<Item = Duration> {
    use backon::BackoffBuilder;
    backon::ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(5))
        .with_jitter()
        .without_max_times()
        .build()
}

/// `text` with every `$N` parameter moved up by `offset`.
fn renumber(text: &str, offset: usize) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        out.push(c);
        if c != '$' {
            continue;
        }
        let mut digits = String::new();
        while let Some((_, d)) = chars.peek().copied().filter(|(_, d)| d.is_ascii_digit()) {
            digits.push(d);
            chars.next();
        }
        match digits.parse::<usize>() {
            Ok(n) => out.push_str(&(n + offset).to_string()),
            Err(_) => out.push_str(&digits),
        }
    }
    out
}

impl Db {
    /// Runs data-modifying statements that do not depend on each other's
    /// rows, in order, as one transaction in one round trip; returns the
    /// rows they affected together. Postgres: one statement whose parts are
    /// data-modifying CTEs (atomic, one commit). SQLite: one multi-statement
    /// `BEGIN IMMEDIATE; …; COMMIT` on one connection, rolled back when a
    /// statement fails. On an error nothing is written.
    pub(crate) async fn execute_batch(&self, statements: Vec<Sql>) -> Result<u64> {
        self.run("batch", || self.execute_batch_once(statements.clone()))
            .await
    }

    async fn execute_batch_once(&self, statements: Vec<Sql>) -> Result<u64> {
        let mut args: Vec<Arg> = Vec::new();
        let mut parts: Vec<String> = Vec::with_capacity(statements.len());
        for st in statements {
            parts.push(renumber(&st.text, args.len()));
            args.extend(st.args);
        }
        match &self.pool {
            Pool::Postgres(pool) => {
                let mut text = String::from("WITH ");
                for (i, p) in parts.iter().enumerate() {
                    if i > 0 {
                        text.push_str(", ");
                    }
                    text.push_str(&format!("w{i} AS ({p} RETURNING 1)"));
                }
                text.push_str(" SELECT ");
                for i in 0..parts.len() {
                    if i > 0 {
                        text.push_str(" + ");
                    }
                    text.push_str(&format!("(SELECT count(*) FROM w{i})"));
                }
                let sql = Sql {
                    text: Cow::Owned(text),
                    args,
                };
                Target::PgPool(pool).fetch_i64(sql).await.map(|n| n as u64)
            }
            Pool::Sqlite(pool) => {
                // Rows are counted by what each statement returns: SQLite's
                // change count is the last write's, also after BEGIN/COMMIT.
                let mut text = String::from("BEGIN IMMEDIATE;\n");
                for p in &parts {
                    text.push_str(p);
                    text.push_str(" RETURNING 1;\n");
                }
                text.push_str("COMMIT;");
                let sql = Sql {
                    text: Cow::Owned(text),
                    args,
                };
                let (text, args) = sql.sqlite()?;
                let mut conn = pool.acquire().await?;
                let rows = sqlx::query_with(text, args)
                    .fetch_all(&mut *conn)
                    .await
                    .map_err(StoreError::from);
                match rows {
                    Ok(rows) => Ok(rows.len() as u64),
                    Err(e) => {
                        // A statement failed inside the transaction: undo
                        // what it did (no-op if it never began).
                        let _ = sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await;
                        Err(e)
                    }
                }
            }
        }
    }
}

impl Tx {
    fn target(&mut self) -> Target<'_> {
        match self {
            Tx::Postgres(t) => Target::PgConn(t),
            Tx::Sqlite(t) => Target::LiteConn(t),
        }
    }

    /// Commits the transaction.
    pub(crate) async fn commit(self) -> Result<()> {
        match self {
            Tx::Postgres(t) => t.commit().await?,
            Tx::Sqlite(t) => t.commit().await?,
        }
        Ok(())
    }

    /// Rolls the transaction back.
    pub(crate) async fn rollback(self) -> Result<()> {
        match self {
            Tx::Postgres(t) => t.rollback().await?,
            Tx::Sqlite(t) => t.rollback().await?,
        }
        Ok(())
    }

    /// The backend of this transaction.
    pub(crate) fn kind(&self) -> BackendKind {
        match self {
            Tx::Postgres(_) => BackendKind::Postgres,
            Tx::Sqlite(_) => BackendKind::Sqlite,
        }
    }

    /// Runs a statement; returns the number of affected rows.
    pub(crate) async fn execute(&mut self, sql: Sql) -> Result<u64> {
        self.target().execute(sql).await
    }

    /// Runs a query returning one integer.
    pub(crate) async fn fetch_i64(&mut self, sql: Sql) -> Result<i64> {
        self.target().fetch_i64(sql).await
    }
}

/// SQL fragments that differ between the backends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dialect(pub(crate) BackendKind);

impl Dialect {
    /// Suffix of the claim sub-select: Postgres skips rows other claimers have
    /// locked; SQLite has one writer at a time, so the statement is already
    /// exclusive.
    pub(crate) fn skip_locked(self) -> &'static str {
        match self.0 {
            BackendKind::Postgres => " FOR UPDATE SKIP LOCKED",
            BackendKind::Sqlite => "",
        }
    }

    /// Whether the JSON array in `column` holds the string parameter
    /// `param` (`$N`).
    pub(crate) fn json_array_contains(self, column: &str, param: &str) -> String {
        match self.0 {
            BackendKind::Postgres => format!("{column} ? {param}"),
            BackendKind::Sqlite => format!(
                "EXISTS (SELECT 1 FROM json_each({column}) WHERE json_each.value = {param})"
            ),
        }
    }

    /// Case-insensitive LIKE (SQLite's LIKE already ignores ASCII case).
    pub(crate) fn ilike(self) -> &'static str {
        match self.0 {
            BackendKind::Postgres => "ILIKE",
            BackendKind::Sqlite => "LIKE",
        }
    }

    /// Expression for `metadata` with the top-level keys of the JSON object
    /// parameter `$N` merged in (its keys win). Postgres has the `||` operator;
    /// SQLite rebuilds the object from `json_each` of both sides, rendering
    /// each value back to JSON by its type so that nested objects, booleans
    /// and nulls survive unchanged.
    pub(crate) fn merge_metadata(self, param: usize) -> String {
        match self.0 {
            BackendKind::Postgres => format!("metadata || ${param}"),
            BackendKind::Sqlite => {
                let render = |alias: &str| {
                    format!(
                        "CASE {alias}.type WHEN 'object' THEN {alias}.value WHEN 'array' THEN {alias}.value \
                         WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' WHEN 'null' THEN 'null' \
                         ELSE json_quote({alias}.value) END"
                    )
                };
                format!(
                    "(SELECT json_group_object(k, json(v)) FROM (\
                     SELECT o.key AS k, {old} AS v FROM json_each(timeline_events.metadata) AS o \
                     WHERE o.key NOT IN (SELECT p2.key FROM json_each(${param}) AS p2) \
                     UNION ALL SELECT p.key AS k, {new} AS v FROM json_each(${param}) AS p))",
                    old = render("o"),
                    new = render("p"),
                )
            }
        }
    }
}

/// The current time at the precision both backends keep (microseconds), so
/// that a value read back equals the value written on either backend.
pub(crate) fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}

/// Normalises a caller-supplied timestamp the same way as [`now`].
pub(crate) fn normalize_time(t: DateTime<Utc>) -> DateTime<Utc> {
    t.trunc_subsecs(6)
}

/// A fresh random id for records the store names itself.
pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Escapes `%`, `_` and `\` for a LIKE pattern with `ESCAPE '\'` and wraps the
/// text in `%...%` for a substring match.
pub(crate) fn like_pattern(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renumbering_moves_every_parameter() {
        assert_eq!(
            renumber("UPDATE t SET a = $1, b = $12 WHERE id = $2 AND c = '$'", 3),
            "UPDATE t SET a = $4, b = $15 WHERE id = $5 AND c = '$'"
        );
    }

    #[test]
    fn like_pattern_escapes_wildcards() {
        assert_eq!(like_pattern("50%_a\\b"), "%50\\%\\_a\\\\b%");
    }
}
