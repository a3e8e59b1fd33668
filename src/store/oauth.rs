//! `OAuthStore` over the same `Any` pool: clients, codes, refresh-token families, signing keys and
//! users. Every query takes the tenant first. Codes and refresh tokens are redeemed with one
//! conditional UPDATE, so two replicas racing on the same code cannot both win.

use serde_json::Value;
use sqlx::any::AnyRow;
use sqlx::Row;

use super::sql::{inserted, json, SqlStore};
use super::StoreError;

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

fn parse_json(text: &str, what: &str) -> Result<Value, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

fn client_from_row(row: &AnyRow) -> Result<OAuthClient, StoreError> {
    let metadata: String = row.try_get("metadata")?;
    Ok(OAuthClient {
        tenant: row.try_get("tenant")?,
        client_id: row.try_get("client_id")?,
        secret_hash: row.try_get("secret_hash")?,
        registration_token_hash: row.try_get("registration_token_hash")?,
        source: row.try_get("source")?,
        metadata: parse_json(&metadata, "client metadata")?,
        created_at: row.try_get("created_at")?,
        confirmed_at: row.try_get("confirmed_at")?,
    })
}

fn code_from_row(row: &AnyRow) -> Result<GrantRecord, StoreError> {
    let grant: String = row.try_get("grant_data")?;
    Ok(GrantRecord {
        token_hash: row.try_get("code_hash")?,
        family: String::new(),
        client_id: row.try_get("client_id")?,
        grant: parse_json(&grant, "code grant")?,
        expires_at: row.try_get("expires_at")?,
        used_at: row.try_get("used_at")?,
        revoked_at: None,
    })
}

fn refresh_from_row(row: &AnyRow) -> Result<GrantRecord, StoreError> {
    let grant: String = row.try_get("grant_data")?;
    Ok(GrantRecord {
        token_hash: row.try_get("token_hash")?,
        family: row.try_get("family")?,
        client_id: row.try_get("client_id")?,
        grant: parse_json(&grant, "refresh grant")?,
        expires_at: row.try_get("expires_at")?,
        used_at: row.try_get("used_at")?,
        revoked_at: row.try_get("revoked_at")?,
    })
}

fn key_from_row(row: &AnyRow) -> Result<SigningKeyRecord, StoreError> {
    let jwk: String = row.try_get("public_jwk")?;
    Ok(SigningKeyRecord {
        kid: row.try_get("kid")?,
        alg: row.try_get("alg")?,
        public_jwk: parse_json(&jwk, "signing key")?,
        private_key: row.try_get("private_key")?,
        created_at: row.try_get("created_at")?,
        retired_at: row.try_get("retired_at")?,
    })
}

fn user_from_row(row: &AnyRow) -> Result<UserRecord, StoreError> {
    Ok(UserRecord {
        username: row.try_get("username")?,
        password_hash: row.try_get("password_hash")?,
        display_name: row.try_get("display_name")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

impl OAuthStore for SqlStore {
    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db insert_client", otel.kind = "client", db.operation.name = "insert_client"))]
    async fn insert_client(&self, c: &OAuthClient) -> Result<(), StoreError> {
        let result = sqlx::query(
            "INSERT INTO oauth_clients (tenant, client_id, secret_hash, registration_token_hash, \
             source, metadata, created_at, confirmed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&c.tenant)
        .bind(&c.client_id)
        .bind(c.secret_hash.as_deref())
        .bind(c.registration_token_hash.as_deref())
        .bind(&c.source)
        .bind(json(&c.metadata))
        .bind(c.created_at)
        .bind(c.confirmed_at)
        .execute(&self.pool)
        .await;
        inserted(result)
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db get_client", otel.kind = "client", db.operation.name = "get_client"))]
    async fn get_client(
        &self,
        tenant: &str,
        client_id: &str,
    ) -> Result<Option<OAuthClient>, StoreError> {
        let row = sqlx::query(
            "SELECT tenant, client_id, secret_hash, registration_token_hash, source, metadata, \
             created_at, confirmed_at FROM oauth_clients WHERE tenant = $1 AND client_id = $2",
        )
        .bind(tenant)
        .bind(client_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(client_from_row).transpose()
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db update_client", otel.kind = "client", db.operation.name = "update_client"))]
    async fn update_client(&self, c: &OAuthClient) -> Result<(), StoreError> {
        let done = sqlx::query(
            "UPDATE oauth_clients SET secret_hash = $3, registration_token_hash = $4, metadata = $5 \
             WHERE tenant = $1 AND client_id = $2",
        )
        .bind(&c.tenant)
        .bind(&c.client_id)
        .bind(c.secret_hash.as_deref())
        .bind(c.registration_token_hash.as_deref())
        .bind(json(&c.metadata))
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db confirm_client", otel.kind = "client", db.operation.name = "confirm_client"))]
    async fn confirm_client(
        &self,
        tenant: &str,
        client_id: &str,
        at: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE oauth_clients SET confirmed_at = COALESCE(confirmed_at, $3) \
             WHERE tenant = $1 AND client_id = $2",
        )
        .bind(tenant)
        .bind(client_id)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db delete_client", otel.kind = "client", db.operation.name = "delete_client"))]
    async fn delete_client(&self, tenant: &str, client_id: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        // The client's grants go with it.
        sqlx::query("DELETE FROM oauth_refresh_tokens WHERE tenant = $1 AND client_id = $2")
            .bind(tenant)
            .bind(client_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM oauth_codes WHERE tenant = $1 AND client_id = $2")
            .bind(tenant)
            .bind(client_id)
            .execute(&mut *tx)
            .await?;
        let done = sqlx::query("DELETE FROM oauth_clients WHERE tenant = $1 AND client_id = $2")
            .bind(tenant)
            .bind(client_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db list_clients", otel.kind = "client", db.operation.name = "list_clients"))]
    async fn list_clients(
        &self,
        tenant: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<OAuthClient>, StoreError> {
        let rows = sqlx::query(
            "SELECT tenant, client_id, secret_hash, registration_token_hash, source, metadata, \
             created_at, confirmed_at FROM oauth_clients WHERE tenant = $1 AND client_id > $2 \
             ORDER BY client_id LIMIT $3",
        )
        .bind(tenant)
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(client_from_row).collect()
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db insert_code", otel.kind = "client", db.operation.name = "insert_code"))]
    async fn insert_code(&self, tenant: &str, code: &GrantRecord) -> Result<(), StoreError> {
        let result = sqlx::query(
            "INSERT INTO oauth_codes (tenant, code_hash, client_id, grant_data, expires_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(tenant)
        .bind(&code.token_hash)
        .bind(&code.client_id)
        .bind(json(&code.grant))
        .bind(code.expires_at)
        .execute(&self.pool)
        .await;
        inserted(result)
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db redeem_code", otel.kind = "client", db.operation.name = "redeem_code"))]
    async fn redeem_code(
        &self,
        tenant: &str,
        code_hash: &str,
        now: i64,
    ) -> Result<Redeemed, StoreError> {
        let won = sqlx::query(
            "UPDATE oauth_codes SET used_at = $3 \
             WHERE tenant = $1 AND code_hash = $2 AND used_at IS NULL",
        )
        .bind(tenant)
        .bind(code_hash)
        .bind(now)
        .execute(&self.pool)
        .await?
        .rows_affected()
            == 1;
        let row = sqlx::query(
            "SELECT code_hash, client_id, grant_data, expires_at, used_at FROM oauth_codes \
             WHERE tenant = $1 AND code_hash = $2",
        )
        .bind(tenant)
        .bind(code_hash)
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row.as_ref().map(code_from_row).transpose()? {
            None => Redeemed::Unknown,
            Some(code) if won => Redeemed::Fresh(code),
            Some(code) => Redeemed::Reused(code),
        })
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db insert_refresh", otel.kind = "client", db.operation.name = "insert_refresh"))]
    async fn insert_refresh(&self, tenant: &str, t: &GrantRecord) -> Result<(), StoreError> {
        let result = sqlx::query(
            "INSERT INTO oauth_refresh_tokens (tenant, token_hash, family, client_id, grant_data, \
             expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(tenant)
        .bind(&t.token_hash)
        .bind(&t.family)
        .bind(&t.client_id)
        .bind(json(&t.grant))
        .bind(t.expires_at)
        .execute(&self.pool)
        .await;
        inserted(result)
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db redeem_refresh", otel.kind = "client", db.operation.name = "redeem_refresh"))]
    async fn redeem_refresh(
        &self,
        tenant: &str,
        token_hash: &str,
        now: i64,
    ) -> Result<Redeemed, StoreError> {
        let won = sqlx::query(
            "UPDATE oauth_refresh_tokens SET used_at = $3 WHERE tenant = $1 AND token_hash = $2 \
             AND used_at IS NULL AND revoked_at IS NULL",
        )
        .bind(tenant)
        .bind(token_hash)
        .bind(now)
        .execute(&self.pool)
        .await?
        .rows_affected()
            == 1;
        Ok(match self.get_refresh(tenant, token_hash).await? {
            None => Redeemed::Unknown,
            Some(t) if won => Redeemed::Fresh(t),
            Some(t) => Redeemed::Reused(t),
        })
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db get_refresh", otel.kind = "client", db.operation.name = "get_refresh"))]
    async fn get_refresh(
        &self,
        tenant: &str,
        token_hash: &str,
    ) -> Result<Option<GrantRecord>, StoreError> {
        let row = sqlx::query(
            "SELECT token_hash, family, client_id, grant_data, expires_at, used_at, revoked_at \
             FROM oauth_refresh_tokens WHERE tenant = $1 AND token_hash = $2",
        )
        .bind(tenant)
        .bind(token_hash)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(refresh_from_row).transpose()
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db revoke_family", otel.kind = "client", db.operation.name = "revoke_family"))]
    async fn revoke_family(&self, tenant: &str, family: &str, now: i64) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE oauth_refresh_tokens SET revoked_at = $3 \
             WHERE tenant = $1 AND family = $2 AND revoked_at IS NULL",
        )
        .bind(tenant)
        .bind(family)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db signing_keys", otel.kind = "client", db.operation.name = "signing_keys"))]
    async fn signing_keys(&self, tenant: &str) -> Result<Vec<SigningKeyRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT kid, alg, public_jwk, private_key, created_at, retired_at \
             FROM oauth_signing_keys WHERE tenant = $1 ORDER BY created_at, kid",
        )
        .bind(tenant)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(key_from_row).collect()
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db rotate_signing_key", otel.kind = "client", db.operation.name = "rotate_signing_key"))]
    async fn rotate_signing_key(
        &self,
        tenant: &str,
        key: &SigningKeyRecord,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE oauth_signing_keys SET retired_at = $2 WHERE tenant = $1 AND retired_at IS NULL",
        )
        .bind(tenant)
        .bind(key.created_at)
        .execute(&mut *tx)
        .await?;
        let result = sqlx::query(
            "INSERT INTO oauth_signing_keys (tenant, kid, alg, public_jwk, private_key, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(tenant)
        .bind(&key.kid)
        .bind(&key.alg)
        .bind(json(&key.public_jwk))
        .bind(&key.private_key)
        .bind(key.created_at)
        .execute(&mut *tx)
        .await;
        inserted(result)?;
        tx.commit().await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db insert_user", otel.kind = "client", db.operation.name = "insert_user"))]
    async fn insert_user(&self, tenant: &str, u: &UserRecord) -> Result<(), StoreError> {
        let result = sqlx::query(
            "INSERT INTO tenant_users (tenant, username, password_hash, display_name, created_at, \
             updated_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(tenant)
        .bind(&u.username)
        .bind(&u.password_hash)
        .bind(&u.display_name)
        .bind(u.created_at)
        .bind(u.updated_at)
        .execute(&self.pool)
        .await;
        inserted(result)
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db get_user", otel.kind = "client", db.operation.name = "get_user"))]
    async fn get_user(
        &self,
        tenant: &str,
        username: &str,
    ) -> Result<Option<UserRecord>, StoreError> {
        let row = sqlx::query(
            "SELECT username, password_hash, display_name, created_at, updated_at \
             FROM tenant_users WHERE tenant = $1 AND username = $2",
        )
        .bind(tenant)
        .bind(username)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(user_from_row).transpose()
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db update_user", otel.kind = "client", db.operation.name = "update_user"))]
    async fn update_user(
        &self,
        tenant: &str,
        u: &UserRecord,
        seen: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE tenant_users SET password_hash = $3, display_name = $4, updated_at = $5 \
             WHERE tenant = $1 AND username = $2 AND updated_at = $6",
        )
        .bind(tenant)
        .bind(&u.username)
        .bind(&u.password_hash)
        .bind(&u.display_name)
        .bind(u.updated_at)
        .bind(seen)
        .execute(&self.pool)
        .await?;
        let exists = sqlx::query("SELECT 1 FROM tenant_users WHERE tenant = $1 AND username = $2")
            .bind(tenant)
            .bind(&u.username);
        super::sql::compared(&self.pool, done, exists).await
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db delete_user", otel.kind = "client", db.operation.name = "delete_user"))]
    async fn delete_user(
        &self,
        tenant: &str,
        username: &str,
        seen: Option<i64>,
    ) -> Result<bool, StoreError> {
        let query = match seen {
            None => sqlx::query("DELETE FROM tenant_users WHERE tenant = $1 AND username = $2"),
            Some(_) => sqlx::query(
                "DELETE FROM tenant_users WHERE tenant = $1 AND username = $2 AND updated_at = $3",
            ),
        };
        let mut query = query.bind(tenant).bind(username);
        if let Some(seen) = seen {
            query = query.bind(seen);
        }
        Ok(query.execute(&self.pool).await?.rows_affected() > 0)
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db list_users", otel.kind = "client", db.operation.name = "list_users"))]
    async fn list_users(
        &self,
        tenant: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<UserRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT username, password_hash, display_name, created_at, updated_at \
             FROM tenant_users WHERE tenant = $1 AND username > $2 ORDER BY username LIMIT $3",
        )
        .bind(tenant)
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(user_from_row).collect()
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db sweep_oauth", otel.kind = "client", db.operation.name = "sweep_oauth"))]
    async fn sweep_oauth(
        &self,
        now: i64,
        retired_before: i64,
        unconfirmed_before: i64,
    ) -> Result<u64, StoreError> {
        let mut removed = 0;
        removed += sqlx::query("DELETE FROM oauth_codes WHERE expires_at < $1")
            .bind(now)
            .execute(&self.pool)
            .await?
            .rows_affected();
        removed += sqlx::query("DELETE FROM oauth_refresh_tokens WHERE expires_at < $1")
            .bind(now)
            .execute(&self.pool)
            .await?
            .rows_affected();
        removed += sqlx::query(
            "DELETE FROM oauth_signing_keys WHERE retired_at IS NOT NULL AND retired_at < $1",
        )
        .bind(retired_before)
        .execute(&self.pool)
        .await?
        .rows_affected();
        // Registered by anyone, never used: nothing refers to them but unredeemed codes, which
        // expire on their own.
        removed += sqlx::query(
            "DELETE FROM oauth_clients \
             WHERE source = $1 AND confirmed_at IS NULL AND created_at < $2",
        )
        .bind(super::DCR_SOURCE)
        .bind(unconfirmed_before)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(removed)
    }
}
