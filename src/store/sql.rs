//! `SqlStore`: the stores over a sqlx `Any` pool. The SQL is written once with `$n` placeholders,
//! which both PostgreSQL and SQLite accept; only the migrations differ per backend.

use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::{AnyPool, Row};

use super::StoreError;

static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("migrations/postgres");
static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("migrations/sqlite");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

#[derive(Clone)]
pub struct SqlStore {
    pub(super) pool: AnyPool,
    backend: Backend,
}

/// How long a query waits for a connection by default (sqlx's own default is 30 s).
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

impl SqlStore {
    /// Connects to `url` (`postgres://…` or `sqlite://…`; an SQLite file is created if missing).
    pub async fn connect(url: &str, max_connections: u32) -> Result<SqlStore, StoreError> {
        Self::connect_with(url, max_connections, DEFAULT_ACQUIRE_TIMEOUT).await
    }

    /// As [`connect`](Self::connect), waiting at most `acquire_timeout` for a connection: with
    /// the database down, a query fails after that long (a 503 upstream) instead of hanging.
    pub async fn connect_with(
        url: &str,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> Result<SqlStore, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Backend::Postgres
        } else if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else {
            return Err(StoreError::Corrupt(format!(
                "unsupported database URL scheme in {:?} (use postgres:// or sqlite://)",
                url.split(':').next().unwrap_or("")
            )));
        };
        let url = match backend {
            Backend::Sqlite if !url.contains("mode=") => {
                let sep = if url.contains('?') { '&' } else { '?' };
                format!("{url}{sep}mode=rwc")
            }
            _ => url.to_string(),
        };
        let options = AnyConnectOptions::from_str(&url)?;
        // SQLite serializes writers; a small pool avoids lock contention on the file.
        let max = match backend {
            Backend::Sqlite => max_connections.clamp(1, 4),
            Backend::Postgres => max_connections.max(1),
        };
        let pool = AnyPoolOptions::new()
            .max_connections(max)
            .acquire_timeout(acquire_timeout)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        sqlx::query("PRAGMA foreign_keys = ON")
                            .execute(&mut *conn)
                            .await?;
                        sqlx::query("PRAGMA journal_mode = WAL")
                            .execute(&mut *conn)
                            .await?;
                        sqlx::query("PRAGMA busy_timeout = 5000")
                            .execute(&mut *conn)
                            .await?;
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await?;
        Ok(SqlStore { pool, backend })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Applies the embedded migrations of this backend. Migrations a newer mcp-harbor applied
    /// (a rolling upgrade under way, or a rollback) are left as they are: this version runs on
    /// the database they leave, since migrations only ever add to it (`migrations/README.md`).
    /// Their versions are answered (and logged).
    pub async fn migrate(&self) -> Result<Vec<i64>, StoreError> {
        let embedded = match self.backend {
            Backend::Postgres => &POSTGRES_MIGRATIONS,
            Backend::Sqlite => &SQLITE_MIGRATIONS,
        };
        let mut migrator = Migrator::with_migrations(embedded.iter().cloned().collect());
        migrator.set_ignore_missing(true);
        migrator.run(&self.pool).await?;
        let applied = sqlx::query("SELECT version FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&self.pool)
            .await?;
        let mut newer = Vec::new();
        for row in &applied {
            let version: i64 = row.try_get("version")?;
            if !embedded.version_exists(version) {
                newer.push(version);
            }
        }
        if !newer.is_empty() {
            tracing::warn!(
                migrations = ?newer,
                "the database holds migrations of a newer mcp-harbor; this version runs on it \
                 and leaves them as they are (a rolling upgrade or a rollback)"
            );
        }
        Ok(newer)
    }

    /// Whether the database answers (for `/readyz`).
    pub async fn ping(&self) -> bool {
        sqlx::query("SELECT 1").execute(&self.pool).await.is_ok()
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

pub(super) fn is_unique_violation(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => {
            db.is_unique_violation()
                || db
                    .code()
                    .is_some_and(|c| c == "23505" || c == "1555" || c == "2067")
                || db.message().contains("UNIQUE constraint failed")
        }
        _ => false,
    }
}

/// The outcome of a compare-and-set `UPDATE` (`written`): true when it wrote the row; else false
/// when the row is there (it changed since it was read), `NotFound` when it is not (`exists`,
/// a `SELECT 1` of that row, asked only then).
pub(super) async fn compared<'q>(
    pool: &AnyPool,
    written: sqlx::any::AnyQueryResult,
    exists: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
) -> Result<bool, StoreError> {
    if written.rows_affected() > 0 {
        return Ok(true);
    }
    match exists.fetch_optional(pool).await? {
        Some(_) => Ok(false),
        None => Err(StoreError::NotFound),
    }
}

/// An insert's outcome: a unique-key violation means the row already exists.
pub(super) fn inserted<T>(result: Result<T, sqlx::Error>) -> Result<(), StoreError> {
    match result {
        Ok(_) => Ok(()),
        Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict),
        Err(e) => Err(e.into()),
    }
}

pub(super) fn json(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}
