//! Storage. One trait per concern (`TenantStore`, `CatalogStore`, `AdminStore`), implemented by
//! `SqlStore` over a sqlx `Any` pool, so the same code and SQL serve both backends: PostgreSQL in
//! production and an SQLite file as the embedded default. Every tenant-owned query takes the
//! tenant first and filters on it.

mod elicitation;
mod oauth;
mod sealed;
mod sql;

pub use sql::SqlStore;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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

impl StoreError {
    /// The database cannot be reached right now (no connection within the pool's acquire
    /// timeout, connection refused or cut, the server shutting down or starting up): worth a
    /// 503 with `Retry-After`, not a 500.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Database(e) => match e {
                sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::Io(_)
                | sqlx::Error::Tls(_)
                | sqlx::Error::WorkerCrashed => true,
                // SQLSTATE 08 (connection exception), 57 (operator intervention: admin
                // shutdown, cannot connect now), 53300 (too many connections).
                sqlx::Error::Database(db) => db
                    .code()
                    .is_some_and(|c| c.starts_with("08") || c.starts_with("57") || c == "53300"),
                _ => false,
            },
            _ => false,
        }
    }
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

/// A multi round-trip request between its rounds (the stateless revision's MRTR): `state` is
/// sealed by the caller; the store only keeps it until `expires_at` (unix ms).
#[derive(Debug, Clone, PartialEq)]
pub struct RoundRecord {
    pub id: String,
    pub round: u32,
    pub state: String,
    pub expires_at: i64,
}

/// Multi round-trip requests waiting for their retry, by (tenant, id).
#[allow(async_fn_in_trait)]
pub trait RoundStore {
    /// Records (or replaces) a request's round, unclaimed.
    async fn save_round(&self, tenant: &str, round: &RoundRecord) -> Result<(), StoreError>;
    /// The round, unless it expired before `now`.
    async fn round(
        &self,
        tenant: &str,
        id: &str,
        now: i64,
    ) -> Result<Option<RoundRecord>, StoreError>;
    /// Claims round number `round` of a request for a retry until `until` (unix ms), unless
    /// another retry's claim on it is still running at `now` or the round expired: whether it
    /// did. A later round saved under the same id is not claimed: a retry that read round N
    /// cannot take the N+1 another retry of N saved meanwhile.
    async fn claim_round(
        &self,
        tenant: &str,
        id: &str,
        round: u32,
        now: i64,
        until: i64,
    ) -> Result<bool, StoreError>;
    /// Moves the claim on round `round` that holds it until `held` to `until` (later: renewed
    /// while the retry runs; 0: released, the round free for the retry to be sent again);
    /// whether that claim still held it (one that lapsed and was taken by another retry is not
    /// moved).
    async fn set_claim(
        &self,
        tenant: &str,
        id: &str,
        round: u32,
        held: i64,
        until: i64,
    ) -> Result<bool, StoreError>;
    /// Forgets round number `round` of a request (its retry was answered), if `held` is `None`
    /// or the round is claimed until `held` (by that retry); whether it did. A later round saved
    /// under the same id stays.
    async fn delete_round(
        &self,
        tenant: &str,
        id: &str,
        round: u32,
        held: Option<i64>,
    ) -> Result<bool, StoreError>;
    /// Forgets every round expired before `now`; how many.
    async fn sweep_rounds(&self, now: i64) -> Result<u64, StoreError>;
}

/// `OAuthClient::source` of a client registered by Dynamic Client Registration.
pub const DCR_SOURCE: &str = "dcr";

/// A client registered with a tenant's authorization server.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthClient {
    pub tenant: String,
    pub client_id: String,
    /// SHA-256 (hex) of the secret of a confidential client.
    pub secret_hash: Option<String>,
    /// SHA-256 (hex) of the RFC 7592 registration access token.
    pub registration_token_hash: Option<String>,
    /// `dcr` or `admin`.
    pub source: String,
    /// RFC 7591 client metadata as accepted.
    pub metadata: Value,
    pub created_at: i64,
    /// When it was first issued a token or its registration was vouched for (`None`: a client
    /// anyone registered that nobody has used yet; deleted after a while).
    pub confirmed_at: Option<i64>,
}

/// A single-use authorization code or a refresh token (stored hashed).
#[derive(Debug, Clone, PartialEq)]
pub struct GrantRecord {
    pub token_hash: String,
    /// Refresh tokens: the family every rotation shares (codes: the family their tokens get).
    pub family: String,
    pub client_id: String,
    /// What was granted: scope, resource, principal, PKCE challenge, redirect URI…
    pub grant: Value,
    pub expires_at: i64,
    pub used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// The outcome of redeeming a code or a refresh token.
#[derive(Debug, Clone, PartialEq)]
pub enum Redeemed {
    /// First use: now marked used.
    Fresh(GrantRecord),
    /// Already used (or revoked): a replay.
    Reused(GrantRecord),
    Unknown,
}

/// A tenant's token-signing key.
#[derive(Debug, Clone, PartialEq)]
pub struct SigningKeyRecord {
    pub kid: String,
    pub alg: String,
    pub public_jwk: Value,
    /// PKCS#8, sealed.
    pub private_key: String,
    pub created_at: i64,
    pub retired_at: Option<i64>,
}

/// A tenant user who signs in on the tenant's login page.
#[derive(Debug, Clone, PartialEq)]
pub struct UserRecord {
    pub username: String,
    /// argon2id PHC string.
    pub password_hash: String,
    pub display_name: String,
    pub created_at: i64,
    pub updated_at: i64,
}

/// OAuth state of every tenant: clients, codes, refresh tokens, signing keys, users.
#[allow(async_fn_in_trait)]
pub trait OAuthStore {
    async fn insert_client(&self, client: &OAuthClient) -> Result<(), StoreError>;
    async fn get_client(
        &self,
        tenant: &str,
        client_id: &str,
    ) -> Result<Option<OAuthClient>, StoreError>;
    async fn update_client(&self, client: &OAuthClient) -> Result<(), StoreError>;
    /// Records that a client was confirmed (a user granted it access, or it was first issued a
    /// token) at `at`, unless it was before. False: the client is not registered (any more: the
    /// sweep may have taken it since it was read).
    async fn confirm_client(
        &self,
        tenant: &str,
        client_id: &str,
        at: i64,
    ) -> Result<bool, StoreError>;
    async fn delete_client(&self, tenant: &str, client_id: &str) -> Result<bool, StoreError>;
    async fn list_clients(
        &self,
        tenant: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<OAuthClient>, StoreError>;

    async fn insert_code(&self, tenant: &str, code: &GrantRecord) -> Result<(), StoreError>;
    /// Marks a code used; says whether this was its first use.
    async fn redeem_code(
        &self,
        tenant: &str,
        code_hash: &str,
        now: i64,
    ) -> Result<Redeemed, StoreError>;

    async fn insert_refresh(&self, tenant: &str, token: &GrantRecord) -> Result<(), StoreError>;
    /// Marks a refresh token rotated away; says whether this was its first use.
    async fn redeem_refresh(
        &self,
        tenant: &str,
        token_hash: &str,
        now: i64,
    ) -> Result<Redeemed, StoreError>;
    async fn get_refresh(
        &self,
        tenant: &str,
        token_hash: &str,
    ) -> Result<Option<GrantRecord>, StoreError>;
    /// Revokes every refresh token of a family (reuse detected, or revocation).
    async fn revoke_family(&self, tenant: &str, family: &str, now: i64) -> Result<(), StoreError>;

    async fn signing_keys(&self, tenant: &str) -> Result<Vec<SigningKeyRecord>, StoreError>;
    /// Adds a key and retires every other active one (at `key.created_at`).
    async fn rotate_signing_key(
        &self,
        tenant: &str,
        key: &SigningKeyRecord,
    ) -> Result<(), StoreError>;

    async fn insert_user(&self, tenant: &str, user: &UserRecord) -> Result<(), StoreError>;
    async fn get_user(
        &self,
        tenant: &str,
        username: &str,
    ) -> Result<Option<UserRecord>, StoreError>;
    /// Writes `user` over the stored one if its `updated_at` is still `seen` (as
    /// [`TenantStore::update_tenant`]): false when it changed since, `NotFound` when it is gone.
    async fn update_user(
        &self,
        tenant: &str,
        user: &UserRecord,
        seen: i64,
    ) -> Result<bool, StoreError>;
    /// Deletes a user; false when there was none or, with `seen`, when its `updated_at` is no
    /// longer `seen` (as [`TenantStore::delete_tenant`]).
    async fn delete_user(
        &self,
        tenant: &str,
        username: &str,
        seen: Option<i64>,
    ) -> Result<bool, StoreError>;
    async fn list_users(
        &self,
        tenant: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<UserRecord>, StoreError>;

    /// Deletes expired codes and refresh tokens, keys retired before `retired_before`, and
    /// clients registered by Dynamic Client Registration before `unconfirmed_before` that were
    /// never confirmed.
    async fn sweep_oauth(
        &self,
        now: i64,
        retired_before: i64,
        unconfirmed_before: i64,
    ) -> Result<u64, StoreError>;
}

/// Where a URL-mode elicitation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElicitationStatus {
    /// Waiting for the user on the page.
    Pending,
    /// The user submitted the secret.
    Completed,
    /// The user (on the page, or in the MCP client) refused.
    Declined,
    /// Cancelled by the client, the tool or an administrator.
    Cancelled,
    /// Not completed in time.
    Expired,
}

impl ElicitationStatus {
    pub const ALL: [ElicitationStatus; 5] = [
        ElicitationStatus::Pending,
        ElicitationStatus::Completed,
        ElicitationStatus::Declined,
        ElicitationStatus::Cancelled,
        ElicitationStatus::Expired,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            ElicitationStatus::Pending => "pending",
            ElicitationStatus::Completed => "completed",
            ElicitationStatus::Declined => "declined",
            ElicitationStatus::Cancelled => "cancelled",
            ElicitationStatus::Expired => "expired",
        }
    }
    pub fn parse(s: &str) -> Option<ElicitationStatus> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// A URL-mode elicitation: a tool asked the user for a secret on the platform's page.
#[derive(Clone, PartialEq)]
pub struct ElicitationRecord {
    /// 256 random bits, base64url: unguessable (on open tenants it is the capability).
    pub id: String,
    /// The binding (`issuer\nsubject\nclient_id`) of the principal it was asked for; `None` on
    /// open tenants.
    pub principal: Option<String>,
    /// The MCP session that asked, if any.
    pub session: Option<String>,
    pub tool: String,
    /// What is asked for (`github_token`).
    pub name: String,
    pub message: String,
    pub status: ElicitationStatus,
    /// The secret, sealed; set between completion and delivery to the tool.
    pub secret_sealed: Option<String>,
    pub expires_at: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

impl ElicitationRecord {
    /// The status as of `now`: a pending elicitation past its expiry is expired even before the
    /// sweep records it.
    pub fn status_at(&self, now: i64) -> ElicitationStatus {
        if self.status == ElicitationStatus::Pending && self.expires_at <= now {
            ElicitationStatus::Expired
        } else {
            self.status
        }
    }
}

impl std::fmt::Debug for ElicitationRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElicitationRecord")
            .field("id", &self.id)
            .field("principal", &self.principal)
            .field("session", &self.session)
            .field("tool", &self.tool)
            .field("name", &self.name)
            .field("status", &self.status)
            .field("has_secret", &self.secret_sealed.is_some())
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
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

/// Whose elicitation for which secret: `principal`'s for (`tool`, `name`); without a principal
/// (an open tenant, no user to bind to), only one asked for in `session`.
#[derive(Debug, Clone, Copy)]
pub struct WantedSecret<'a> {
    pub principal: Option<&'a str>,
    pub session: Option<&'a str>,
    pub tool: &'a str,
    pub name: &'a str,
}

/// URL-mode elicitations of every tenant.
#[allow(async_fn_in_trait)]
pub trait ElicitationStore {
    async fn insert_elicitation(
        &self,
        tenant: &str,
        elicitation: &ElicitationRecord,
    ) -> Result<(), StoreError>;
    async fn get_elicitation(
        &self,
        tenant: &str,
        id: &str,
    ) -> Result<Option<ElicitationRecord>, StoreError>;
    /// In id order, starting after `after`; only `status` when given.
    async fn list_elicitations(
        &self,
        tenant: &str,
        status: Option<ElicitationStatus>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<ElicitationRecord>, StoreError>;
    /// The newest unexpired elicitation of `wanted` in `status` (`completed`: only one whose
    /// secret was not delivered yet).
    async fn find_elicitation(
        &self,
        tenant: &str,
        wanted: &WantedSecret<'_>,
        status: ElicitationStatus,
        now: i64,
    ) -> Result<Option<ElicitationRecord>, StoreError>;
    /// Pending and unexpired → completed with the sealed secret; false otherwise.
    async fn complete_elicitation(
        &self,
        tenant: &str,
        id: &str,
        secret_sealed: &str,
        now: i64,
    ) -> Result<bool, StoreError>;
    /// Pending → `status` (declined, cancelled); false when it was not pending.
    async fn close_elicitation(
        &self,
        tenant: &str,
        id: &str,
        status: ElicitationStatus,
        now: i64,
    ) -> Result<bool, StoreError>;
    /// The sealed secret of a completed elicitation, cleared as it is returned (delivered once).
    async fn take_elicitation_secret(
        &self,
        tenant: &str,
        id: &str,
        now: i64,
    ) -> Result<Option<String>, StoreError>;
    /// Marks pending elicitations past their expiry expired, drops secrets not collected before
    /// expiry, and deletes finished elicitations last changed before `forget_before`.
    async fn sweep_elicitations(&self, now: i64, forget_before: i64) -> Result<u64, StoreError>;
}

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
}

impl SealedColumn {
    pub const ALL: [SealedColumn; 5] = [
        SealedColumn::SigningKeys,
        SealedColumn::OidcClientSecrets,
        SealedColumn::WebhookSecrets,
        SealedColumn::ElicitationSecrets,
        SealedColumn::RoundStates,
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

/// The `updated_at` of a record written over one last updated at `previous`: now, but always
/// later than `previous`, so that a compare-and-set on `updated_at` tells every write apart
/// (two in the same millisecond, or a clock that stepped back).
pub fn next_revision(previous: i64) -> i64 {
    now_millis().max(previous.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Settings a newer version stored, with fields this one does not know at every level,
    /// read and written back: the known fields are read, the others come back as they were.
    #[test]
    fn fields_of_a_newer_version_are_read_past_and_written_back() {
        let limits = json!({ "max_sessions": 5, "allowed_origins": [], "max_tools": 7 });
        let read: TenantLimits = serde_json::from_value(limits.clone()).unwrap();
        assert_eq!(read.max_sessions, Some(5));
        assert_eq!(serde_json::to_value(&read).unwrap(), limits);

        let auth = json!({ "mode": "oauth", "registration": "open", "login": "oidc",
            "required_scopes": ["mcp"], "token_ttl_secs": 600,
            "oidc": { "issuer": "https://id.example", "client_id": "harbor", "scopes": ["openid"],
                      "subject_claim": "sub", "name_claim": "name", "prompt": "login" } });
        let read: TenantAuth = serde_json::from_value(auth.clone()).unwrap();
        let TenantAuth::Oauth(settings) = &read else {
            panic!("{read:?}")
        };
        assert_eq!(settings.login, LoginMethod::Oidc);
        assert_eq!(settings.newer_fields.len(), 1, "the tag is not kept as one");
        assert_eq!(serde_json::to_value(&read).unwrap(), auth);

        let auth = json!({ "mode": "external", "issuer": "https://as.example", "audience": "a",
            "required_scopes": [], "leeway_secs": 30 });
        let read: TenantAuth = serde_json::from_value(auth.clone()).unwrap();
        assert!(matches!(&read, TenantAuth::External(e) if e.audience == "a"));
        assert_eq!(serde_json::to_value(&read).unwrap(), auth);
    }
}
