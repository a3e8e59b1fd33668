//! `SqlStore`: the stores over a sqlx `Any` pool. The SQL is written once with `$n` placeholders,
//! which both PostgreSQL and SQLite accept; only the migrations differ per backend.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use serde_json::Value;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions, AnyRow};
use sqlx::migrate::Migrator;
use sqlx::{AnyPool, Row};

use super::{
    AdminStore, CatalogEntry, CatalogFingerprint, CatalogKind, CatalogStore, PendingInput,
    PendingInputStore, RoundRecord, RoundStore, StoreError, TenantAuth, TenantLimits, TenantRecord,
    TenantStatus, TenantStore,
};

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

fn is_unique_violation(e: &sqlx::Error) -> bool {
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

fn tenant_from_row(row: &AnyRow) -> Result<TenantRecord, StoreError> {
    let status: String = row.try_get("status")?;
    let catalogs: String = row.try_get("catalogs")?;
    let limits: String = row.try_get("limits")?;
    let auth: String = row.try_get("auth")?;
    Ok(TenantRecord {
        slug: row.try_get("slug")?,
        display_name: row.try_get("display_name")?,
        status: TenantStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("tenant status {status:?}")))?,
        catalogs: serde_json::from_str(&catalogs)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        limits: serde_json::from_str::<TenantLimits>(&limits)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        auth: serde_json::from_str::<TenantAuth>(&auth)
            .map_err(|e| StoreError::Corrupt(format!("tenant auth: {e}")))?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

fn entry_from_row(row: &AnyRow) -> Result<CatalogEntry, StoreError> {
    let kind: String = row.try_get("kind")?;
    let body: String = row.try_get("body")?;
    Ok(CatalogEntry {
        tenant: row.try_get("tenant")?,
        kind: CatalogKind::parse(&kind)
            .ok_or_else(|| StoreError::Corrupt(format!("catalog kind {kind:?}")))?,
        name: row.try_get("name")?,
        body: serde_json::from_str::<Value>(&body)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

pub(super) fn json(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

macro_rules! tenant_columns {
    () => {
        "slug, display_name, status, catalogs, limits, created_at, updated_at, auth"
    };
}
macro_rules! entry_columns {
    () => {
        "tenant, kind, name, body, created_at, updated_at"
    };
}

impl TenantStore for SqlStore {
    #[tracing::instrument(level = "debug", name = "db", skip(self, tenant), fields(otel.name = "db insert_tenant", otel.kind = "client", db.operation.name = "insert_tenant", tenant = %tenant.slug))]
    async fn insert_tenant(&self, tenant: &TenantRecord) -> Result<(), StoreError> {
        let result = sqlx::query(concat!(
            "INSERT INTO tenants (",
            tenant_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
        ))
        .bind(&tenant.slug)
        .bind(&tenant.display_name)
        .bind(tenant.status.as_str())
        .bind(json(&tenant.catalogs))
        .bind(json(&tenant.limits))
        .bind(tenant.created_at)
        .bind(tenant.updated_at)
        .bind(json(&tenant.auth))
        .execute(&self.pool)
        .await;
        inserted(result)
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db get_tenant", otel.kind = "client", db.operation.name = "get_tenant"))]
    async fn get_tenant(&self, slug: &str) -> Result<Option<TenantRecord>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            tenant_columns!(),
            " FROM tenants WHERE slug = $1"
        ))
        .bind(slug)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(tenant_from_row).transpose()
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db list_tenants", otel.kind = "client", db.operation.name = "list_tenants"))]
    async fn list_tenants(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<TenantRecord>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            tenant_columns!(),
            " FROM tenants WHERE slug > $1 ORDER BY slug LIMIT $2"
        ))
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(tenant_from_row).collect()
    }

    async fn tenant_slugs(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query("SELECT slug FROM tenants WHERE slug > $1 ORDER BY slug LIMIT $2")
            .bind(after.unwrap_or(""))
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| row.try_get("slug").map_err(StoreError::from))
            .collect()
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self, tenant), fields(otel.name = "db update_tenant", otel.kind = "client", db.operation.name = "update_tenant", tenant = %tenant.slug))]
    async fn update_tenant(&self, tenant: &TenantRecord, seen: i64) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE tenants SET display_name = $2, status = $3, catalogs = $4, limits = $5, updated_at = $6, \
             auth = $7 WHERE slug = $1 AND updated_at = $8",
        )
        .bind(&tenant.slug)
        .bind(&tenant.display_name)
        .bind(tenant.status.as_str())
        .bind(json(&tenant.catalogs))
        .bind(json(&tenant.limits))
        .bind(tenant.updated_at)
        .bind(json(&tenant.auth))
        .bind(seen)
        .execute(&self.pool)
        .await?;
        let exists = sqlx::query("SELECT 1 FROM tenants WHERE slug = $1").bind(&tenant.slug);
        compared(&self.pool, done, exists).await
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db delete_tenant", otel.kind = "client", db.operation.name = "delete_tenant"))]
    async fn delete_tenant(&self, slug: &str, seen: Option<i64>) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        if let Some(seen) = seen {
            // Holds the tenant's row (PostgreSQL locks it; SQLite's write lock is the whole
            // database) from the check to the delete, so no write lands in between.
            let held = sqlx::query(
                "UPDATE tenants SET updated_at = updated_at WHERE slug = $1 AND updated_at = $2",
            )
            .bind(slug)
            .bind(seen)
            .execute(&mut *tx)
            .await?;
            if held.rows_affected() == 0 {
                tx.rollback().await?;
                return Ok(false);
            }
        }
        for delete in [
            "DELETE FROM catalog_entries WHERE tenant = $1",
            "DELETE FROM pending_inputs WHERE tenant = $1",
            "DELETE FROM mrtr_rounds WHERE tenant = $1",
            "DELETE FROM elicitations WHERE tenant = $1",
            "DELETE FROM oauth_clients WHERE tenant = $1",
            "DELETE FROM oauth_codes WHERE tenant = $1",
            "DELETE FROM oauth_refresh_tokens WHERE tenant = $1",
            "DELETE FROM oauth_signing_keys WHERE tenant = $1",
            "DELETE FROM tenant_users WHERE tenant = $1",
        ] {
            sqlx::query(delete).bind(slug).execute(&mut *tx).await?;
        }
        let done = sqlx::query("DELETE FROM tenants WHERE slug = $1")
            .bind(slug)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }
}

impl CatalogStore for SqlStore {
    #[tracing::instrument(level = "debug", name = "db", skip(self, entry), fields(otel.name = "db insert_entry", otel.kind = "client", db.operation.name = "insert_entry", tenant = %entry.tenant, kind = entry.kind.as_str(), name = %entry.name))]
    async fn insert_entry(&self, entry: &CatalogEntry) -> Result<(), StoreError> {
        let result = sqlx::query(concat!(
            "INSERT INTO catalog_entries (",
            entry_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6)"
        ))
        .bind(&entry.tenant)
        .bind(entry.kind.as_str())
        .bind(&entry.name)
        .bind(json(&entry.body))
        .bind(entry.created_at)
        .bind(entry.updated_at)
        .execute(&self.pool)
        .await;
        inserted(result)
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self, entry), fields(otel.name = "db replace_entry", otel.kind = "client", db.operation.name = "replace_entry", tenant = %entry.tenant, kind = entry.kind.as_str(), name = %entry.name))]
    async fn replace_entry(&self, entry: &CatalogEntry, seen: i64) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE catalog_entries SET body = $4, updated_at = $5 \
             WHERE tenant = $1 AND kind = $2 AND name = $3 AND updated_at = $6",
        )
        .bind(&entry.tenant)
        .bind(entry.kind.as_str())
        .bind(&entry.name)
        .bind(json(&entry.body))
        .bind(entry.updated_at)
        .bind(seen)
        .execute(&self.pool)
        .await?;
        let exists = sqlx::query(
            "SELECT 1 FROM catalog_entries WHERE tenant = $1 AND kind = $2 AND name = $3",
        )
        .bind(&entry.tenant)
        .bind(entry.kind.as_str())
        .bind(&entry.name);
        compared(&self.pool, done, exists).await
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db get_entry", otel.kind = "client", db.operation.name = "get_entry"))]
    async fn get_entry(
        &self,
        tenant: &str,
        kind: CatalogKind,
        name: &str,
    ) -> Result<Option<CatalogEntry>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            entry_columns!(),
            " FROM catalog_entries WHERE tenant = $1 AND kind = $2 AND name = $3"
        ))
        .bind(tenant)
        .bind(kind.as_str())
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(entry_from_row).transpose()
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db list_entries", otel.kind = "client", db.operation.name = "list_entries"))]
    async fn list_entries(
        &self,
        tenant: &str,
        kind: CatalogKind,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<CatalogEntry>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            entry_columns!(),
            " FROM catalog_entries WHERE tenant = $1 AND kind = $2 AND name > $3 \
             ORDER BY name LIMIT $4"
        ))
        .bind(tenant)
        .bind(kind.as_str())
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(entry_from_row).collect()
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db all_entries", otel.kind = "client", db.operation.name = "all_entries"))]
    async fn all_entries(&self, tenant: &str) -> Result<Vec<CatalogEntry>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            entry_columns!(),
            " FROM catalog_entries WHERE tenant = $1 ORDER BY kind, name"
        ))
        .bind(tenant)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(entry_from_row).collect()
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db catalog_fingerprints", otel.kind = "client", db.operation.name = "catalog_fingerprints"))]
    async fn catalog_fingerprints(
        &self,
    ) -> Result<HashMap<String, CatalogFingerprint>, StoreError> {
        let rows = sqlx::query(
            "SELECT tenant, COUNT(*) AS entries, CAST(SUM(updated_at) AS BIGINT) AS revisions \
             FROM catalog_entries GROUP BY tenant",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get::<String, _>("tenant")?,
                    CatalogFingerprint {
                        entries: row.try_get("entries")?,
                        revisions: row.try_get("revisions")?,
                    },
                ))
            })
            .collect()
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db delete_entry", otel.kind = "client", db.operation.name = "delete_entry"))]
    async fn delete_entry(
        &self,
        tenant: &str,
        kind: CatalogKind,
        name: &str,
        seen: Option<i64>,
    ) -> Result<bool, StoreError> {
        let query = match seen {
            None => sqlx::query(
                "DELETE FROM catalog_entries WHERE tenant = $1 AND kind = $2 AND name = $3",
            ),
            Some(_) => sqlx::query(
                "DELETE FROM catalog_entries \
                 WHERE tenant = $1 AND kind = $2 AND name = $3 AND updated_at = $4",
            ),
        };
        let mut query = query.bind(tenant).bind(kind.as_str()).bind(name);
        if let Some(seen) = seen {
            query = query.bind(seen);
        }
        Ok(query.execute(&self.pool).await?.rows_affected() > 0)
    }
}

impl AdminStore for SqlStore {
    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db admin_token_hash", otel.kind = "client", db.operation.name = "admin_token_hash"))]
    async fn admin_token_hash(&self) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT token_hash FROM admin_tokens WHERE id = $1")
            .bind("admin")
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get("token_hash")).transpose()?)
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db set_admin_token_hash", otel.kind = "client", db.operation.name = "set_admin_token_hash"))]
    async fn set_admin_token_hash(&self, hash: &str) -> Result<(), StoreError> {
        // One upsert: replicas starting together on a fresh database each set the hash, and a
        // delete-then-insert let the second insert fail on the primary key (seen with three
        // replicas started at once: one exited).
        sqlx::query(
            "INSERT INTO admin_tokens (id, token_hash, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (id) DO UPDATE SET token_hash = excluded.token_hash, created_at = excluded.created_at",
        )
        .bind("admin")
        .bind(hash)
        .bind(super::now_millis())
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

impl PendingInputStore for SqlStore {
    #[tracing::instrument(level = "debug", name = "db", skip(self, input), fields(otel.name = "db save_pending_input", otel.kind = "client", db.operation.name = "save_pending_input"))]
    async fn save_pending_input(
        &self,
        tenant: &str,
        session: &str,
        request_id: &str,
        input: &PendingInput,
    ) -> Result<(), StoreError> {
        let state =
            serde_json::to_string(&input.state).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        sqlx::query(
            "INSERT INTO pending_inputs (tenant, session, request_id, tool, round, state, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (tenant, session, request_id) DO UPDATE \
             SET tool = excluded.tool, round = excluded.round, state = excluded.state, \
                 created_at = excluded.created_at",
        )
        .bind(tenant)
        .bind(session)
        .bind(request_id)
        .bind(&input.tool)
        .bind(i64::from(input.round))
        .bind(state)
        .bind(super::now_millis())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db pending_input", otel.kind = "client", db.operation.name = "pending_input"))]
    async fn pending_input(
        &self,
        tenant: &str,
        session: &str,
        request_id: &str,
    ) -> Result<Option<PendingInput>, StoreError> {
        let row = sqlx::query(
            "SELECT tool, round, state FROM pending_inputs \
             WHERE tenant = $1 AND session = $2 AND request_id = $3",
        )
        .bind(tenant)
        .bind(session)
        .bind(request_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let state: String = row.try_get("state")?;
        let round: i64 = row.try_get("round")?;
        Ok(Some(PendingInput {
            tool: row.try_get("tool")?,
            round: u32::try_from(round).map_err(|e| StoreError::Corrupt(e.to_string()))?,
            state: serde_json::from_str(&state).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        }))
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db delete_pending_input", otel.kind = "client", db.operation.name = "delete_pending_input"))]
    async fn delete_pending_input(
        &self,
        tenant: &str,
        session: &str,
        request_id: Option<&str>,
    ) -> Result<(), StoreError> {
        match request_id {
            Some(id) => sqlx::query(
                "DELETE FROM pending_inputs WHERE tenant = $1 AND session = $2 AND request_id = $3",
            )
            .bind(tenant)
            .bind(session)
            .bind(id)
            .execute(&self.pool)
            .await?,
            None => {
                sqlx::query("DELETE FROM pending_inputs WHERE tenant = $1 AND session = $2")
                    .bind(tenant)
                    .bind(session)
                    .execute(&self.pool)
                    .await?
            }
        };
        Ok(())
    }
}

impl RoundStore for SqlStore {
    #[tracing::instrument(level = "debug", name = "db", skip(self, round), fields(otel.name = "db save_round", otel.kind = "client", db.operation.name = "save_round"))]
    async fn save_round(&self, tenant: &str, round: &RoundRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO mrtr_rounds (tenant, id, round, state, expires_at) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (tenant, id) DO UPDATE \
             SET round = excluded.round, state = excluded.state, \
             expires_at = excluded.expires_at, claimed_until = 0",
        )
        .bind(tenant)
        .bind(&round.id)
        .bind(i64::from(round.round))
        .bind(&round.state)
        .bind(round.expires_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db round", otel.kind = "client", db.operation.name = "round"))]
    async fn round(
        &self,
        tenant: &str,
        id: &str,
        now: i64,
    ) -> Result<Option<RoundRecord>, StoreError> {
        let row = sqlx::query(
            "SELECT id, round, state, expires_at FROM mrtr_rounds \
             WHERE tenant = $1 AND id = $2 AND expires_at > $3",
        )
        .bind(tenant)
        .bind(id)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let round: i64 = row.try_get("round")?;
        Ok(Some(RoundRecord {
            id: row.try_get("id")?,
            round: u32::try_from(round).map_err(|e| StoreError::Corrupt(e.to_string()))?,
            state: row.try_get("state")?,
            expires_at: row.try_get("expires_at")?,
        }))
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db claim_round", otel.kind = "client", db.operation.name = "claim_round"))]
    async fn claim_round(
        &self,
        tenant: &str,
        id: &str,
        round: u32,
        now: i64,
        until: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE mrtr_rounds SET claimed_until = $5 \
             WHERE tenant = $1 AND id = $2 AND round = $3 AND claimed_until <= $4 \
             AND expires_at > $4",
        )
        .bind(tenant)
        .bind(id)
        .bind(i64::from(round))
        .bind(now)
        .bind(until)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db set_claim", otel.kind = "client", db.operation.name = "set_claim"))]
    async fn set_claim(
        &self,
        tenant: &str,
        id: &str,
        round: u32,
        held: i64,
        until: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE mrtr_rounds SET claimed_until = $5 \
             WHERE tenant = $1 AND id = $2 AND round = $3 AND claimed_until = $4",
        )
        .bind(tenant)
        .bind(id)
        .bind(i64::from(round))
        .bind(held)
        .bind(until)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db delete_round", otel.kind = "client", db.operation.name = "delete_round"))]
    async fn delete_round(
        &self,
        tenant: &str,
        id: &str,
        round: u32,
        held: Option<i64>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "DELETE FROM mrtr_rounds WHERE tenant = $1 AND id = $2 AND round = $3 \
             AND ($4 IS NULL OR claimed_until = $4)",
        )
        .bind(tenant)
        .bind(id)
        .bind(i64::from(round))
        .bind(held)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db sweep_rounds", otel.kind = "client", db.operation.name = "sweep_rounds"))]
    async fn sweep_rounds(&self, now: i64) -> Result<u64, StoreError> {
        let done = sqlx::query("DELETE FROM mrtr_rounds WHERE expires_at <= $1")
            .bind(now)
            .execute(&self.pool)
            .await?;
        // Webhook rounds of abandoned stateless calls (recorded under `mrtr:<id>`), once no
        // request state can name them any more (the longest allowed lifetime is a day).
        sqlx::query("DELETE FROM pending_inputs WHERE session LIKE 'mrtr:%' AND created_at < $1")
            .bind(now - 86_400_000)
            .execute(&self.pool)
            .await?;
        // Rounds of session calls that ended without finishing (the session deleted or expired,
        // the call cancelled): a round waits at most a day for the client
        // (`sessions.client_request_timeout_secs`), so one written two days ago is dead.
        sqlx::query("DELETE FROM pending_inputs WHERE created_at < $1")
            .bind(now - 2 * 86_400_000)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }
}
