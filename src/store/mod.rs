//! Storage. One trait per concern (`TenantStore`, `CatalogStore`, `AdminStore`), implemented by
//! `SqlStore` over a sqlx `Any` pool, so the same code and SQL serve both backends: PostgreSQL in
//! production and an SQLite file as the embedded default. Every tenant-owned query takes the
//! tenant first and filters on it.

mod sql;

pub use sql::SqlStore;

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    #[error("already exists")]
    Conflict,
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

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

/// Per-tenant limits; `None` means the server-wide default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantLimits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<u32>,
    #[serde(default)]
    pub allowed_origins: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TenantRecord {
    pub slug: String,
    pub display_name: String,
    pub status: TenantStatus,
    /// Built-in catalogs enabled for the tenant.
    pub catalogs: Vec<String>,
    pub limits: TenantLimits,
    /// Unix milliseconds.
    pub created_at: i64,
    pub updated_at: i64,
}

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
    async fn update_tenant(&self, tenant: &TenantRecord) -> Result<(), StoreError>;
    /// Deletes the tenant and everything it owns; false when there was no such tenant.
    async fn delete_tenant(&self, slug: &str) -> Result<bool, StoreError>;
}

/// A tenant's published catalog.
#[allow(async_fn_in_trait)]
pub trait CatalogStore {
    async fn insert_entry(&self, entry: &CatalogEntry) -> Result<(), StoreError>;
    async fn replace_entry(&self, entry: &CatalogEntry) -> Result<(), StoreError>;
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
    async fn delete_entry(
        &self,
        tenant: &str,
        kind: CatalogKind,
        name: &str,
    ) -> Result<bool, StoreError>;
}

/// A webhook tool call waiting for the MCP client's input: the round that asked and the
/// endpoint's opaque state (the design card's elicitation state).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingInput {
    pub tool: String,
    pub round: u32,
    pub state: Value,
}

/// Webhook calls waiting for input, by (tenant, session, request id as JSON).
#[allow(async_fn_in_trait)]
pub trait PendingInputStore {
    /// Records (or replaces) what the call is waiting for.
    async fn save_pending_input(
        &self,
        tenant: &str,
        session: &str,
        request_id: &str,
        input: &PendingInput,
    ) -> Result<(), StoreError>;
    async fn pending_input(
        &self,
        tenant: &str,
        session: &str,
        request_id: &str,
    ) -> Result<Option<PendingInput>, StoreError>;
    /// The call ended (or the session did, with `request_id` `None`).
    async fn delete_pending_input(
        &self,
        tenant: &str,
        session: &str,
        request_id: Option<&str>,
    ) -> Result<(), StoreError>;
}

/// The admin API's credential, stored hashed.
#[allow(async_fn_in_trait)]
pub trait AdminStore {
    async fn admin_token_hash(&self) -> Result<Option<String>, StoreError>;
    async fn set_admin_token_hash(&self, hash: &str) -> Result<(), StoreError>;
}

/// Unix milliseconds now.
pub fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
