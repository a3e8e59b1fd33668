//! Tenants: their records (status, limits, built-in catalogs, how their endpoint is protected)
//! and the `TenantStore` trait, with its SQL.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sqlx::any::AnyRow;
use sqlx::Row;

use super::sql::*;
use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TenantStatus {
    Active,
    Suspended,
}

impl TenantStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TenantStatus::Active => "active",
            TenantStatus::Suspended => "suspended",
        }
    }
    pub fn parse(s: &str) -> Option<TenantStatus> {
        match s {
            "active" => Some(TenantStatus::Active),
            "suspended" => Some(TenantStatus::Suspended),
            _ => None,
        }
    }
}

/// Per-tenant limits; `None` means the server-wide default. Read leniently (see
/// [`TenantLimits::newer_fields`]); the admin API's input is checked against its documented
/// schema, which admits no unknown field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TenantLimits {
    /// Most live sessions of the tenant, across all replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<u32>,
    /// Requests a minute of the tenant, across all replicas (a burst of as many).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<u32>,
    /// Most live sessions of one principal (a token's issuer, subject and client) of a
    /// protected tenant, across all replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sessions_per_principal: Option<u32>,
    /// Requests a minute of one principal of a protected tenant, across all replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_minute_per_principal: Option<u32>,
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// `ttlMs` on list and read results of stateless (2026-07-28) requests; the server's
    /// `modern.cache_ttl_ms` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_ttl_ms: Option<u32>,
    /// Largest request body on the tenant's MCP endpoints, in bytes (never above the server's
    /// `server.max_body_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<u32>,
    /// Largest single JSON-RPC message in a request body (a batch's members each), in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_bytes: Option<u32>,
    /// Fields a newer mcp-harbor wrote that this one does not know (a rolling upgrade, or a
    /// rollback): kept as they are, so an update written back by this version loses none.
    #[serde(flatten)]
    pub newer_fields: Map<String, Value>,
}

/// How a tenant's MCP endpoint is protected (stored form: secrets sealed or hashed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum TenantAuth {
    /// Open: anyone who knows the URL (local development, the embedded `demo` tenant).
    None,
    /// The platform is the tenant's authorization server.
    Oauth(OAuthSettings),
    /// Resource server only: JWT access tokens from the tenant's own authorization server.
    External(ExternalIssuer),
}

impl TenantAuth {
    pub fn mode(&self) -> &'static str {
        match self {
            TenantAuth::None => "none",
            TenantAuth::Oauth(_) => "oauth",
            TenantAuth::External(_) => "external",
        }
    }
}

/// Who may register clients by Dynamic Client Registration (RFC 7591).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RegistrationPolicy {
    /// Anyone (what MCP hosts expect).
    #[default]
    Open,
    /// Nobody: clients are pre-registered or use Client ID Metadata Documents.
    Disabled,
    /// Holders of the tenant's initial access token.
    Token,
}

/// How end users of an `oauth` tenant sign in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoginMethod {
    /// Tenant users (username + password) managed through the admin API.
    #[default]
    Local,
    /// The tenant's own OpenID Connect provider.
    Oidc,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OAuthSettings {
    #[serde(default)]
    pub registration: RegistrationPolicy,
    /// SHA-256 (hex) of the initial access token (`registration: token`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_access_token_hash: Option<String>,
    #[serde(default)]
    pub login: LoginMethod,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oidc: Option<UpstreamOidc>,
    /// Scopes an access token needs to reach the MCP endpoint.
    #[serde(default = "default_required_scopes")]
    pub required_scopes: Vec<String>,
    /// As [`TenantLimits::newer_fields`].
    #[serde(flatten)]
    pub newer_fields: Map<String, Value>,
}

pub fn default_required_scopes() -> Vec<String> {
    vec!["mcp".into()]
}

impl Default for OAuthSettings {
    fn default() -> Self {
        OAuthSettings {
            registration: RegistrationPolicy::Open,
            initial_access_token_hash: None,
            login: LoginMethod::Local,
            oidc: None,
            required_scopes: default_required_scopes(),
            newer_fields: Map::new(),
        }
    }
}

/// The tenant's OpenID provider, of which the platform is a client (code flow + PKCE + nonce).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpstreamOidc {
    pub issuer: String,
    pub client_id: String,
    /// Sealed (see `auth::Sealer`); absent for a public client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_sealed: Option<String>,
    #[serde(default = "default_oidc_scopes")]
    pub scopes: Vec<String>,
    /// The ID-token claim that becomes the principal's subject.
    #[serde(default = "default_subject_claim")]
    pub subject_claim: String,
    /// The ID-token claim shown as the principal's name.
    #[serde(default = "default_name_claim")]
    pub name_claim: String,
    /// As [`TenantLimits::newer_fields`].
    #[serde(flatten)]
    pub newer_fields: Map<String, Value>,
}

pub fn default_oidc_scopes() -> Vec<String> {
    vec!["openid".into(), "profile".into()]
}
pub fn default_subject_claim() -> String {
    "sub".into()
}
pub fn default_name_claim() -> String {
    "name".into()
}

/// An authorization server the tenant already runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExternalIssuer {
    pub issuer: String,
    /// The `aud` its tokens carry for this tenant.
    pub audience: String,
    /// Where its keys are; default: from the issuer's metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_uri: Option<String>,
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// As [`TenantLimits::newer_fields`].
    #[serde(flatten)]
    pub newer_fields: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TenantRecord {
    pub slug: String,
    pub display_name: String,
    pub status: TenantStatus,
    /// Built-in catalogs enabled for the tenant.
    pub catalogs: Vec<String>,
    pub limits: TenantLimits,
    pub auth: TenantAuth,
    /// Unix milliseconds.
    pub created_at: i64,
    pub updated_at: i64,
}

/// A page of tenants ([`TenantStore::tenants_page`]).
#[derive(Debug)]
pub struct TenantsPage {
    pub records: Vec<TenantRecord>,
    /// The tenants whose records do not read, with why.
    pub unreadable: Vec<(String, StoreError)>,
    /// Where the next page starts (after this slug: the last the page covers, readable or
    /// not); `None` when the page is not full, the last one.
    pub next_after: Option<String>,
}

/// Where the page after one of `len` entries ending at `last` starts: after `last` when the
/// page is full (`limit` entries), else nowhere (it was the last page).
fn page_end(last: Option<&str>, len: usize, limit: u32) -> Option<String> {
    last.filter(|_| len == limit as usize).map(str::to_string)
}

/// Tenants.
#[allow(async_fn_in_trait)]
pub trait TenantStore {
    async fn insert_tenant(&self, tenant: &TenantRecord) -> Result<(), StoreError>;
    async fn get_tenant(&self, slug: &str) -> Result<Option<TenantRecord>, StoreError>;
    /// Tenants in slug order, starting after `after`.
    async fn list_tenants(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<TenantRecord>, StoreError>;
    /// The slugs of [`Self::list_tenants`], whether or not their records read.
    async fn tenant_slugs(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<String>, StoreError>;
    /// [`Self::list_tenants`], except that a record this version cannot read (a value only a
    /// newer version knows, say) is set apart with why instead of failing the page: the page
    /// is then read again one tenant at a time.
    async fn tenants_page(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> Result<TenantsPage, StoreError> {
        match self.list_tenants(after, limit).await {
            Ok(records) => Ok(TenantsPage {
                next_after: page_end(
                    records.last().map(|r| r.slug.as_str()),
                    records.len(),
                    limit,
                ),
                records,
                unreadable: Vec::new(),
            }),
            Err(StoreError::Corrupt(_)) => {
                let slugs = self.tenant_slugs(after, limit).await?;
                let mut page = TenantsPage {
                    next_after: page_end(slugs.last().map(String::as_str), slugs.len(), limit),
                    records: Vec::new(),
                    unreadable: Vec::new(),
                };
                for slug in slugs {
                    match self.get_tenant(&slug).await {
                        Ok(Some(record)) => page.records.push(record),
                        Ok(None) => {}
                        Err(e @ StoreError::Corrupt(_)) => page.unreadable.push((slug, e)),
                        Err(e) => return Err(e),
                    }
                }
                Ok(page)
            }
            Err(e) => Err(e),
        }
    }
    /// Writes `tenant` over the stored one if that is still the one read (its `updated_at` is
    /// `seen`): false when it changed since (another write came first; nothing is written), and
    /// `NotFound` when it is gone. Callers give a written record a newer `updated_at`
    /// ([`next_revision`]), so every write is seen by the next compare-and-set.
    async fn update_tenant(&self, tenant: &TenantRecord, seen: i64) -> Result<bool, StoreError>;
    /// Deletes the tenant and everything it owns; false when there was no such tenant or, with
    /// `seen`, when its `updated_at` is no longer `seen` (it changed since; nothing is deleted).
    async fn delete_tenant(&self, slug: &str, seen: Option<i64>) -> Result<bool, StoreError>;
}

macro_rules! tenant_columns {
    () => {
        "slug, display_name, status, catalogs, limits, created_at, updated_at, auth"
    };
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
