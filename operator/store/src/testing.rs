//! Throw-away databases for tests and benchmarks (feature `testing`): a
//! SQLite file ([`TempSqlite`]) or a Postgres database ([`TestDatabase`]) of
//! its own for each test, on the server named by `TARSY_TEST_DATABASE_URL`,
//! so tests run in parallel without sharing rows; both are removed
//! afterwards — also when the test panics.
//!
//! ```no_run
//! # async fn demo() -> Result<(), tarsy_store::testing::TestDatabaseError> {
//! let db = tarsy_store::testing::TestDatabase::create("my_test").await?;
//! let store = tarsy_store::Store::connect(db.url()).await.expect("migrated");
//! // ... the test ...
//! store.close().await;
//! db.drop_database().await?;
//! # Ok(()) }
//! ```

pub mod faults;

use std::str::FromStr;
use std::time::Duration;

use sqlx::Connection;
use sqlx::Executor;
use sqlx::postgres::{PgConnectOptions, PgConnection};

/// The server tests use when `TARSY_TEST_DATABASE_URL` is unset (the one
/// `scripts/postgres.sh` starts).
pub const DEFAULT_SERVER_URL: &str = "postgres://tarsy:tarsy@127.0.0.1:55432/tarsy";

/// How long to wait for the server to answer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a test database could not be made or removed.
#[derive(Debug, thiserror::Error)]
pub enum TestDatabaseError {
    /// `TARSY_TEST_DATABASE_URL` is not a Postgres URL.
    #[error("TARSY_TEST_DATABASE_URL {url:?} is not a Postgres URL: {cause}")]
    BadUrl {
        /// The URL.
        url: String,
        /// The parser's complaint.
        cause: String,
    },
    /// The server did not accept a connection.
    #[error(
        "Postgres is unreachable at {url}: {cause}. Start it with scripts/postgres.sh or point \
         TARSY_TEST_DATABASE_URL at a server where this role may create databases."
    )]
    Unreachable {
        /// The server URL.
        url: String,
        /// The real cause (refused, bad password, timeout).
        cause: String,
    },
    /// `CREATE DATABASE` or `DROP DATABASE` failed.
    #[error("cannot {action} test database {name}: {source}")]
    Statement {
        /// `create` or `drop`.
        action: &'static str,
        /// The database.
        name: String,
        /// The server's error.
        source: sqlx::Error,
    },
}

/// The server URL tests connect to: `TARSY_TEST_DATABASE_URL`, else
/// [`DEFAULT_SERVER_URL`]. Its role must be allowed to create databases.
pub fn server_url() -> String {
    std::env::var("TARSY_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_SERVER_URL.to_string())
}

/// `url` with its database name replaced by `database` (query kept).
pub fn database_url(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_start..].find('/') {
        Some(slash) => &base[..authority_start + slash],
        None => base,
    };
    match query {
        Some(q) => format!("{base}/{database}?{q}"),
        None => format!("{base}/{database}"),
    }
}

/// A database created for one test; dropped by [`TestDatabase::drop_database`]
/// or, failing that (a panicking test), when the value is dropped.
#[derive(Debug)]
pub struct TestDatabase {
    server_url: String,
    name: String,
    url: String,
    dropped: bool,
}

impl TestDatabase {
    /// Creates an empty database named `{prefix}_{random}` on [`server_url`].
    /// Connect to [`TestDatabase::url`]; the store migrates it.
    pub async fn create(prefix: &str) -> Result<Self, TestDatabaseError> {
        let server_url = server_url();
        let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
        let mut admin = admin_connection(&server_url).await?;
        let created = (&mut admin)
            .execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .await;
        let _ = admin.close().await;
        created.map_err(|source| TestDatabaseError::Statement {
            action: "create",
            name: name.clone(),
            source,
        })?;
        Ok(Self {
            url: database_url(&server_url, &name),
            server_url,
            name,
            dropped: false,
        })
    }

    /// The database's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Drops the database (closing its remaining connections).
    pub async fn drop_database(mut self) -> Result<(), TestDatabaseError> {
        self.dropped = true;
        drop_named(&self.server_url, &self.name).await
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        // Reached when a test panicked before dropping its database: drop it
        // on a thread of its own (no async in Drop; the test's runtime may be
        // unwinding) so failed runs leave nothing behind.
        let (server_url, name) = (self.server_url.clone(), self.name.clone());
        let cleanup = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            let _ = rt.block_on(drop_named(&server_url, &name));
        });
        let _ = cleanup.join();
    }
}

async fn admin_connection(server_url: &str) -> Result<PgConnection, TestDatabaseError> {
    let options =
        PgConnectOptions::from_str(server_url).map_err(|e| TestDatabaseError::BadUrl {
            url: server_url.to_string(),
            cause: e.to_string(),
        })?;
    // One plain connection (not a pool) so that the real cause — refused,
    // bad password, unknown host — reaches the message.
    match tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&options)).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(TestDatabaseError::Unreachable {
            url: server_url.to_string(),
            cause: e.to_string(),
        }),
        Err(_) => Err(TestDatabaseError::Unreachable {
            url: server_url.to_string(),
            cause: format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()),
        }),
    }
}

async fn drop_named(server_url: &str, name: &str) -> Result<(), TestDatabaseError> {
    let mut admin = admin_connection(server_url).await?;
    let dropped = (&mut admin)
        .execute(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
        )))
        .await;
    let _ = admin.close().await;
    dropped
        .map(|_| ())
        .map_err(|source| TestDatabaseError::Statement {
            action: "drop",
            name: name.to_string(),
            source,
        })
}

/// A SQLite database file for one test, in the temporary directory; the
/// file and its WAL/SHM companions are removed when the value is dropped
/// (also when the test panics). Close the stores using it first.
#[derive(Debug)]
pub struct TempSqlite {
    path: std::path::PathBuf,
}

impl TempSqlite {
    /// A new, not yet existing file `{prefix}_{random}.db` (the store
    /// creates and migrates it on connect).
    pub fn new(prefix: &str) -> Self {
        let name = format!("{prefix}_{}.db", uuid::Uuid::new_v4().simple());
        Self {
            path: std::env::temp_dir().join(name),
        }
    }

    /// Its `sqlite:` URL.
    pub fn url(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }
}

impl Drop for TempSqlite {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.path.display()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::database_url;

    #[test]
    fn database_urls_replace_only_the_name() {
        assert_eq!(
            database_url("postgres://u:p@h:5432/tarsy", "t1"),
            "postgres://u:p@h:5432/t1"
        );
        assert_eq!(
            database_url("postgres://u:p@h:5432/tarsy?sslmode=disable", "t1"),
            "postgres://u:p@h:5432/t1?sslmode=disable"
        );
        assert_eq!(database_url("postgres://h", "t1"), "postgres://h/t1");
    }
}
