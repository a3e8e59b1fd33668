//! The admin API's credential, stored hashed (`AdminStore`), with its SQL.

use sqlx::Row;

use super::sql::*;
use super::*;

/// The admin API's credential, stored hashed.
#[allow(async_fn_in_trait)]
pub trait AdminStore {
    async fn admin_token_hash(&self) -> Result<Option<String>, StoreError>;
    async fn set_admin_token_hash(&self, hash: &str) -> Result<(), StoreError>;
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
