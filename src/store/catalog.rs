//! What tenants publish (tools, prompts, resources, resource templates): entries, the catalog's
//! fingerprint, and the `CatalogStore` trait, with its SQL.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::any::AnyRow;
use sqlx::Row;

use super::sql::*;
use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatalogKind {
    Tool,
    Prompt,
    Resource,
    ResourceTemplate,
}

impl CatalogKind {
    pub const ALL: [CatalogKind; 4] = [
        CatalogKind::Tool,
        CatalogKind::Prompt,
        CatalogKind::Resource,
        CatalogKind::ResourceTemplate,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            CatalogKind::Tool => "tool",
            CatalogKind::Prompt => "prompt",
            CatalogKind::Resource => "resource",
            CatalogKind::ResourceTemplate => "resource_template",
        }
    }
    pub fn parse(s: &str) -> Option<CatalogKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One published tool, prompt, resource or resource template of a tenant.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogEntry {
    pub tenant: String,
    pub kind: CatalogKind,
    pub name: String,
    /// The definition, as the admin API accepted it.
    pub body: Value,
    pub created_at: i64,
    pub updated_at: i64,
}

/// How many entries a tenant's catalog has and the sum of their revisions (`updated_at`): an
/// entry added or deleted changes the count, one replaced the sum (a replacement's revision is
/// always above the one it replaces).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CatalogFingerprint {
    pub entries: i64,
    pub revisions: i64,
}

impl CatalogFingerprint {
    /// The fingerprint of entries read (as `CatalogStore::catalog_fingerprints` computes it in
    /// the store).
    pub fn of(entries: &[CatalogEntry]) -> CatalogFingerprint {
        CatalogFingerprint {
            entries: entries.len() as i64,
            revisions: entries.iter().map(|e| e.updated_at).sum(),
        }
    }
}

/// A tenant's published catalog.
#[allow(async_fn_in_trait)]
pub trait CatalogStore {
    async fn insert_entry(&self, entry: &CatalogEntry) -> Result<(), StoreError>;
    /// Writes `entry` over the stored one if its `updated_at` is still `seen` (as
    /// [`TenantStore::update_tenant`]): false when it changed since, `NotFound` when it is gone.
    async fn replace_entry(&self, entry: &CatalogEntry, seen: i64) -> Result<bool, StoreError>;
    async fn get_entry(
        &self,
        tenant: &str,
        kind: CatalogKind,
        name: &str,
    ) -> Result<Option<CatalogEntry>, StoreError>;
    /// Entries of one kind in name order, starting after `after`.
    async fn list_entries(
        &self,
        tenant: &str,
        kind: CatalogKind,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<CatalogEntry>, StoreError>;
    /// Every entry of a tenant (to build its live catalog).
    async fn all_entries(&self, tenant: &str) -> Result<Vec<CatalogEntry>, StoreError>;
    /// Per tenant with entries: what changes whenever an entry is added, replaced or deleted.
    async fn catalog_fingerprints(
        &self,
    ) -> Result<std::collections::HashMap<String, CatalogFingerprint>, StoreError>;
    /// Deletes an entry; false when there was none or, with `seen`, when its `updated_at` is no
    /// longer `seen` (as [`TenantStore::delete_tenant`]).
    async fn delete_entry(
        &self,
        tenant: &str,
        kind: CatalogKind,
        name: &str,
        seen: Option<i64>,
    ) -> Result<bool, StoreError>;
}

macro_rules! entry_columns {
    () => {
        "tenant, kind, name, body, created_at, updated_at"
    };
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
