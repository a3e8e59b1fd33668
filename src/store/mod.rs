//! Storage, one concern per module, each with its records, its trait and the trait's SQL:
//! `tenants`, `catalog` (published entries), `oauth` (clients, grants, keys, users),
//! `elicitation` (URL-mode elicitations), `rounds` (requests between their rounds), `sealed`
//! (every sealed value, for key rotation), `upstreams` (upstream MCP servers) and `admin` (the admin credential). `SqlStore`
//! (`sql`) implements them all over a sqlx `Any` pool, so the same code and SQL serve both
//! backends: PostgreSQL in production and an SQLite file as the embedded default. Every
//! tenant-owned query takes the tenant first and filters on it.

mod admin;
mod catalog;
mod elicitation;
mod oauth;
mod rounds;
mod sealed;
mod sql;
mod tenants;
mod upstreams;

pub use admin::*;
pub use catalog::*;
pub use elicitation::*;
pub use oauth::*;
pub use rounds::*;
pub use sealed::*;
pub use sql::{Backend, SqlStore, DEFAULT_ACQUIRE_TIMEOUT};
pub use tenants::*;
pub use upstreams::*;

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
