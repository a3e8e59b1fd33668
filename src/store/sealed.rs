//! `SealedValueStore` over the same `Any` pool: every column that holds a sealed value (or a JSON
//! document holding one), read in key order in batches and replaced only if unchanged
//! (compare-and-set), so that re-sealing under a new key never loses a concurrent write. A
//! tenant or catalog entry re-sealed gets a later `updated_at` (by 1 ms): an admin write that read
//! it before then fails its own compare-and-set and reads it again, instead of writing the
//! secret back sealed under the old key.

use sqlx::Row;

use serde::{Deserialize, Serialize};

use super::{SqlStore, StoreError};

/// A column holding sealed values (see `auth::Sealer`), directly or inside a JSON document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SealedColumn {
    /// `oauth_signing_keys.private_key`, by (tenant, kid).
    SigningKeys,
    /// `tenants.auth` (JSON: `oidc.client_secret_sealed`), by (slug, "").
    OidcClientSecrets,
    /// `catalog_entries.body` of tools (JSON: `webhook.secret_sealed`), by (tenant, name).
    WebhookSecrets,
    /// `elicitations.secret_sealed`, by (tenant, id).
    ElicitationSecrets,
    /// `mrtr_rounds.state`, by (tenant, id).
    RoundStates,
    /// `upstreams.body` (JSON: `auth.sealed`, an upstream's static headers), by (tenant, name).
    UpstreamHeaders,
}

impl SealedColumn {
    pub const ALL: [SealedColumn; 6] = [
        SealedColumn::SigningKeys,
        SealedColumn::OidcClientSecrets,
        SealedColumn::WebhookSecrets,
        SealedColumn::ElicitationSecrets,
        SealedColumn::RoundStates,
        SealedColumn::UpstreamHeaders,
    ];
}

/// One row of a [`SealedColumn`]: its key and the column's text as read.
#[derive(Clone, PartialEq)]
pub struct SealedRow {
    pub tenant: String,
    pub id: String,
    pub text: String,
}

impl std::fmt::Debug for SealedRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedRow")
            .field("tenant", &self.tenant)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Every sealed value, for re-sealing under a new key.
#[allow(async_fn_in_trait)]
pub trait SealedValueStore {
    /// Rows of `column` in (tenant, id) order, starting after `after`.
    async fn sealed_rows(
        &self,
        column: SealedColumn,
        after: Option<(&str, &str)>,
        limit: u32,
    ) -> Result<Vec<SealedRow>, StoreError>;
    /// Replaces the row's text with `text` if it still is what was read; whether it was.
    async fn replace_sealed(
        &self,
        column: SealedColumn,
        row: &SealedRow,
        text: &str,
    ) -> Result<bool, StoreError>;
}

/// (select in key order after `($1, $2)`, limit `$3`; compare-and-set `$3` → `$4` at `($1, $2)`).
fn sql(column: SealedColumn) -> (&'static str, &'static str) {
    match column {
        SealedColumn::SigningKeys => (
            "SELECT tenant, kid AS id, private_key AS text FROM oauth_signing_keys \
             WHERE (tenant, kid) > ($1, $2) ORDER BY tenant, kid LIMIT $3",
            "UPDATE oauth_signing_keys SET private_key = $4 \
             WHERE tenant = $1 AND kid = $2 AND private_key = $3",
        ),
        SealedColumn::OidcClientSecrets => (
            // One row per tenant: its id is always empty.
            "SELECT slug AS tenant, '' AS id, auth AS text FROM tenants \
             WHERE (slug, '') > ($1, $2) AND auth LIKE '%client_secret_sealed%' \
             ORDER BY slug LIMIT $3",
            "UPDATE tenants SET auth = $4, updated_at = updated_at + 1 WHERE slug = $1 AND $2 = '' AND auth = $3",
        ),
        SealedColumn::WebhookSecrets => (
            "SELECT tenant, name AS id, body AS text FROM catalog_entries \
             WHERE kind = 'tool' AND (tenant, name) > ($1, $2) ORDER BY tenant, name LIMIT $3",
            "UPDATE catalog_entries SET body = $4, updated_at = updated_at + 1 \
             WHERE tenant = $1 AND kind = 'tool' AND name = $2 AND body = $3",
        ),
        SealedColumn::ElicitationSecrets => (
            "SELECT tenant, id, secret_sealed AS text FROM elicitations \
             WHERE secret_sealed IS NOT NULL AND (tenant, id) > ($1, $2) \
             ORDER BY tenant, id LIMIT $3",
            "UPDATE elicitations SET secret_sealed = $4 \
             WHERE tenant = $1 AND id = $2 AND secret_sealed = $3",
        ),
        SealedColumn::RoundStates => (
            "SELECT tenant, id, state AS text FROM mrtr_rounds \
             WHERE (tenant, id) > ($1, $2) ORDER BY tenant, id LIMIT $3",
            "UPDATE mrtr_rounds SET state = $4 WHERE tenant = $1 AND id = $2 AND state = $3",
        ),
        SealedColumn::UpstreamHeaders => (
            "SELECT tenant, name AS id, body AS text FROM upstreams \
             WHERE (tenant, name) > ($1, $2) AND body LIKE '%\"sealed\"%' \
             ORDER BY tenant, name LIMIT $3",
            "UPDATE upstreams SET body = $4, updated_at = updated_at + 1 \
             WHERE tenant = $1 AND name = $2 AND body = $3",
        ),
    }
}

impl SealedValueStore for SqlStore {
    #[tracing::instrument(level = "debug", name = "db", skip(self, after), fields(otel.name = "db sealed_rows", otel.kind = "client", db.operation.name = "sealed_rows"))]
    async fn sealed_rows(
        &self,
        column: SealedColumn,
        after: Option<(&str, &str)>,
        limit: u32,
    ) -> Result<Vec<SealedRow>, StoreError> {
        // Every row sorts after ("", ""): tenants have non-empty slugs.
        let (tenant, id) = after.unwrap_or(("", ""));
        let rows = sqlx::query(sql(column).0)
            .bind(tenant)
            .bind(id)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(SealedRow {
                    tenant: r.try_get("tenant")?,
                    id: r.try_get("id")?,
                    text: r.try_get("text")?,
                })
            })
            .collect()
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self, row, text), fields(otel.name = "db replace_sealed", otel.kind = "client", db.operation.name = "replace_sealed", tenant = %row.tenant))]
    async fn replace_sealed(
        &self,
        column: SealedColumn,
        row: &SealedRow,
        text: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(sql(column).1)
            .bind(&row.tenant)
            .bind(&row.id)
            .bind(&row.text)
            .bind(text)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}
