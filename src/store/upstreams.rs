//! Upstream MCP servers a tenant federates: `UpstreamRecord`, the `UpstreamStore` trait and its
//! SQL (table `upstreams`), and the pinned definitions of their tools (`upstream_pins`).

use serde_json::Value;
use sqlx::any::AnyRow;
use sqlx::Row;

use super::sql::*;
use super::*;

/// One upstream of a tenant: its definition as the admin API accepted it (credentials sealed).
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamRecord {
    pub tenant: String,
    pub name: String,
    pub body: Value,
    pub created_at: i64,
    pub updated_at: i64,
}

/// One upstream tool's pinned definition, and a different one it offers since (held back).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolPin {
    pub tool: String,
    pub hash: String,
    pub definition: Value,
    pub pending: Option<(String, Value)>,
}

/// A tenant's upstreams.
#[allow(async_fn_in_trait)]
pub trait UpstreamStore {
    /// Records the definitions an upstream offers now (tool, hash, definition): pinned when
    /// first seen; one that differs from its pin is kept as pending (one equal to it clears
    /// what was pending). Returns every pin of the upstream.
    async fn see_tools(
        &self,
        tenant: &str,
        upstream: &str,
        offered: &[(String, String, Value)],
    ) -> Result<Vec<ToolPin>, StoreError>;
    /// Pins every pending definition of the upstream: how many.
    async fn approve_tools(&self, tenant: &str, upstream: &str) -> Result<u64, StoreError>;
    /// Every pin of the upstream (with what is pending).
    async fn tool_pins(&self, tenant: &str, upstream: &str) -> Result<Vec<ToolPin>, StoreError>;
    async fn insert_upstream(&self, record: &UpstreamRecord) -> Result<(), StoreError>;
    /// Writes `record` over the stored one if its `updated_at` is still `seen`: false when it
    /// changed since, `NotFound` when it is gone.
    async fn replace_upstream(
        &self,
        record: &UpstreamRecord,
        seen: i64,
    ) -> Result<bool, StoreError>;
    async fn get_upstream(
        &self,
        tenant: &str,
        name: &str,
    ) -> Result<Option<UpstreamRecord>, StoreError>;
    /// In name order, starting after `after`.
    async fn list_upstreams(
        &self,
        tenant: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<UpstreamRecord>, StoreError>;
    /// Deletes one; false when there was none or, with `seen`, when its `updated_at` is no
    /// longer `seen`.
    async fn delete_upstream(
        &self,
        tenant: &str,
        name: &str,
        seen: Option<i64>,
    ) -> Result<bool, StoreError>;
}

macro_rules! upstream_columns {
    () => {
        "tenant, name, body, created_at, updated_at"
    };
}

fn upstream_from_row(row: &AnyRow) -> Result<UpstreamRecord, StoreError> {
    let body: String = row.try_get("body")?;
    Ok(UpstreamRecord {
        tenant: row.try_get("tenant")?,
        name: row.try_get("name")?,
        body: serde_json::from_str::<Value>(&body)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

fn pin_from_row(row: &AnyRow) -> Result<ToolPin, StoreError> {
    let parse = |text: String| {
        serde_json::from_str::<Value>(&text).map_err(|e| StoreError::Corrupt(e.to_string()))
    };
    let pending_hash: Option<String> = row.try_get("pending_hash")?;
    let pending_definition: Option<String> = row.try_get("pending_definition")?;
    Ok(ToolPin {
        tool: row.try_get("tool")?,
        hash: row.try_get("hash")?,
        definition: parse(row.try_get("definition")?)?,
        pending: match (pending_hash, pending_definition) {
            (Some(hash), Some(definition)) => Some((hash, parse(definition)?)),
            _ => None,
        },
    })
}

impl UpstreamStore for SqlStore {
    #[tracing::instrument(level = "debug", name = "db", skip(self, offered), fields(otel.name = "db see_tools", otel.kind = "client", db.operation.name = "see_tools"))]
    async fn see_tools(
        &self,
        tenant: &str,
        upstream: &str,
        offered: &[(String, String, Value)],
    ) -> Result<Vec<ToolPin>, StoreError> {
        let mut tx = self.pool.begin().await?;
        for (tool, hash, definition) in offered {
            sqlx::query(
                "INSERT INTO upstream_pins (tenant, upstream, tool, hash, definition) \
                 VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (tenant, upstream, tool) DO UPDATE SET \
                 pending_hash = CASE WHEN upstream_pins.hash = excluded.hash THEN NULL \
                   ELSE excluded.hash END, \
                 pending_definition = CASE WHEN upstream_pins.hash = excluded.hash THEN NULL \
                   ELSE excluded.definition END",
            )
            .bind(tenant)
            .bind(upstream)
            .bind(tool)
            .bind(hash)
            .bind(json(definition))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        self.tool_pins(tenant, upstream).await
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db approve_tools", otel.kind = "client", db.operation.name = "approve_tools"))]
    async fn approve_tools(&self, tenant: &str, upstream: &str) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE upstream_pins SET hash = pending_hash, definition = pending_definition, \
             pending_hash = NULL, pending_definition = NULL \
             WHERE tenant = $1 AND upstream = $2 AND pending_hash IS NOT NULL",
        )
        .bind(tenant)
        .bind(upstream)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db tool_pins", otel.kind = "client", db.operation.name = "tool_pins"))]
    async fn tool_pins(&self, tenant: &str, upstream: &str) -> Result<Vec<ToolPin>, StoreError> {
        let rows = sqlx::query(
            "SELECT tool, hash, definition, pending_hash, pending_definition FROM upstream_pins \
             WHERE tenant = $1 AND upstream = $2 ORDER BY tool",
        )
        .bind(tenant)
        .bind(upstream)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(pin_from_row).collect()
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self, record), fields(otel.name = "db insert_upstream", otel.kind = "client", db.operation.name = "insert_upstream", tenant = %record.tenant, name = %record.name))]
    async fn insert_upstream(&self, record: &UpstreamRecord) -> Result<(), StoreError> {
        let result = sqlx::query(concat!(
            "INSERT INTO upstreams (",
            upstream_columns!(),
            ") VALUES ($1, $2, $3, $4, $5)"
        ))
        .bind(&record.tenant)
        .bind(&record.name)
        .bind(json(&record.body))
        .bind(record.created_at)
        .bind(record.updated_at)
        .execute(&self.pool)
        .await;
        inserted(result)
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self, record), fields(otel.name = "db replace_upstream", otel.kind = "client", db.operation.name = "replace_upstream", tenant = %record.tenant, name = %record.name))]
    async fn replace_upstream(
        &self,
        record: &UpstreamRecord,
        seen: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE upstreams SET body = $3, updated_at = $4 \
             WHERE tenant = $1 AND name = $2 AND updated_at = $5",
        )
        .bind(&record.tenant)
        .bind(&record.name)
        .bind(json(&record.body))
        .bind(record.updated_at)
        .bind(seen)
        .execute(&self.pool)
        .await?;
        let exists = sqlx::query("SELECT 1 FROM upstreams WHERE tenant = $1 AND name = $2")
            .bind(&record.tenant)
            .bind(&record.name);
        compared(&self.pool, done, exists).await
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db get_upstream", otel.kind = "client", db.operation.name = "get_upstream"))]
    async fn get_upstream(
        &self,
        tenant: &str,
        name: &str,
    ) -> Result<Option<UpstreamRecord>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            upstream_columns!(),
            " FROM upstreams WHERE tenant = $1 AND name = $2"
        ))
        .bind(tenant)
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(upstream_from_row).transpose()
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db list_upstreams", otel.kind = "client", db.operation.name = "list_upstreams"))]
    async fn list_upstreams(
        &self,
        tenant: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<UpstreamRecord>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            upstream_columns!(),
            " FROM upstreams WHERE tenant = $1 AND name > $2 ORDER BY name LIMIT $3"
        ))
        .bind(tenant)
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(upstream_from_row).collect()
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db delete_upstream", otel.kind = "client", db.operation.name = "delete_upstream"))]
    async fn delete_upstream(
        &self,
        tenant: &str,
        name: &str,
        seen: Option<i64>,
    ) -> Result<bool, StoreError> {
        let query = match seen {
            None => sqlx::query("DELETE FROM upstreams WHERE tenant = $1 AND name = $2"),
            Some(_) => sqlx::query(
                "DELETE FROM upstreams WHERE tenant = $1 AND name = $2 AND updated_at = $3",
            ),
        };
        let mut query = query.bind(tenant).bind(name);
        if let Some(seen) = seen {
            query = query.bind(seen);
        }
        let deleted = query.execute(&self.pool).await?.rows_affected() > 0;
        if deleted {
            sqlx::query("DELETE FROM upstream_pins WHERE tenant = $1 AND upstream = $2")
                .bind(tenant)
                .bind(name)
                .execute(&self.pool)
                .await?;
        }
        Ok(deleted)
    }
}
