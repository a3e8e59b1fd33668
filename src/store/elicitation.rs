//! `ElicitationStore` over the same `Any` pool: URL-mode elicitations and their sealed secrets.
//! Every query takes the tenant first. State changes are conditional UPDATEs (only a pending,
//! unexpired elicitation completes; a secret is taken once), so replicas racing on the same
//! elicitation cannot both win.

use sqlx::any::AnyRow;
use sqlx::Row;

use super::sql::{inserted, SqlStore};
use super::{ElicitationRecord, ElicitationStatus, ElicitationStore, StoreError, WantedSecret};

macro_rules! columns {
    () => {
        "id, principal, session, tool, name, message, status, secret_sealed, expires_at, \
         created_at, updated_at"
    };
}

fn record_from_row(row: &AnyRow) -> Result<ElicitationRecord, StoreError> {
    let status: String = row.try_get("status")?;
    Ok(ElicitationRecord {
        id: row.try_get("id")?,
        principal: row.try_get("principal")?,
        session: row.try_get("session")?,
        tool: row.try_get("tool")?,
        name: row.try_get("name")?,
        message: row.try_get("message")?,
        status: ElicitationStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("elicitation status {status:?}")))?,
        secret_sealed: row.try_get("secret_sealed")?,
        expires_at: row.try_get("expires_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

impl ElicitationStore for SqlStore {
    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db insert_elicitation", otel.kind = "client", db.operation.name = "insert_elicitation", tenant = %tenant))]
    async fn insert_elicitation(
        &self,
        tenant: &str,
        e: &ElicitationRecord,
    ) -> Result<(), StoreError> {
        let result = sqlx::query(concat!(
            "INSERT INTO elicitations (tenant, ",
            columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
        ))
        .bind(tenant)
        .bind(&e.id)
        .bind(&e.principal)
        .bind(&e.session)
        .bind(&e.tool)
        .bind(&e.name)
        .bind(&e.message)
        .bind(e.status.as_str())
        .bind(&e.secret_sealed)
        .bind(e.expires_at)
        .bind(e.created_at)
        .bind(e.updated_at)
        .execute(&self.pool)
        .await;
        inserted(result)
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db get_elicitation", otel.kind = "client", db.operation.name = "get_elicitation", tenant = %tenant))]
    async fn get_elicitation(
        &self,
        tenant: &str,
        id: &str,
    ) -> Result<Option<ElicitationRecord>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM elicitations WHERE tenant = $1 AND id = $2"
        ))
        .bind(tenant)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(record_from_row).transpose()
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db list_elicitations", otel.kind = "client", db.operation.name = "list_elicitations", tenant = %tenant))]
    async fn list_elicitations(
        &self,
        tenant: &str,
        status: Option<ElicitationStatus>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<ElicitationRecord>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM elicitations WHERE tenant = $1 AND ($2 = '' OR status = $2) AND id > $3 \
             ORDER BY id LIMIT $4"
        ))
        .bind(tenant)
        .bind(status.map(ElicitationStatus::as_str).unwrap_or(""))
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(record_from_row).collect()
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db find_elicitation", otel.kind = "client", db.operation.name = "find_elicitation", tenant = %tenant))]
    async fn find_elicitation(
        &self,
        tenant: &str,
        wanted: &WantedSecret<'_>,
        status: ElicitationStatus,
        now: i64,
    ) -> Result<Option<ElicitationRecord>, StoreError> {
        // An open tenant's elicitations have no principal: bound to the session that asked
        // instead (a client of another session never gets its page or its secret).
        let row = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM elicitations WHERE tenant = $1 AND tool = $2 AND name = $3 AND status = $4 \
             AND COALESCE(principal, '') = $5 AND expires_at > $6 \
             AND ($5 <> '' OR COALESCE(session, '') = $7) \
             AND ($4 <> 'completed' OR secret_sealed IS NOT NULL) \
             ORDER BY created_at DESC, id LIMIT 1"
        ))
        .bind(tenant)
        .bind(wanted.tool)
        .bind(wanted.name)
        .bind(status.as_str())
        .bind(wanted.principal.unwrap_or(""))
        .bind(now)
        .bind(wanted.session.unwrap_or(""))
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(record_from_row).transpose()
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db complete_elicitation", otel.kind = "client", db.operation.name = "complete_elicitation", tenant = %tenant))]
    async fn complete_elicitation(
        &self,
        tenant: &str,
        id: &str,
        secret_sealed: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE elicitations SET status = 'completed', secret_sealed = $3, updated_at = $4 \
             WHERE tenant = $1 AND id = $2 AND status = 'pending' AND expires_at > $4",
        )
        .bind(tenant)
        .bind(id)
        .bind(secret_sealed)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db close_elicitation", otel.kind = "client", db.operation.name = "close_elicitation", tenant = %tenant))]
    async fn close_elicitation(
        &self,
        tenant: &str,
        id: &str,
        status: ElicitationStatus,
        now: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE elicitations SET status = $3, secret_sealed = NULL, updated_at = $4 \
             WHERE tenant = $1 AND id = $2 AND status = 'pending'",
        )
        .bind(tenant)
        .bind(id)
        .bind(status.as_str())
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db take_elicitation_secret", otel.kind = "client", db.operation.name = "take_elicitation_secret", tenant = %tenant))]
    async fn take_elicitation_secret(
        &self,
        tenant: &str,
        id: &str,
        now: i64,
    ) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "SELECT secret_sealed FROM elicitations WHERE tenant = $1 AND id = $2 \
             AND status = 'completed' AND secret_sealed IS NOT NULL",
        )
        .bind(tenant)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let sealed: String = row.try_get("secret_sealed")?;
        // Only the one whose UPDATE clears it takes it.
        let done = sqlx::query(
            "UPDATE elicitations SET secret_sealed = NULL, updated_at = $4 \
             WHERE tenant = $1 AND id = $2 AND secret_sealed = $3",
        )
        .bind(tenant)
        .bind(id)
        .bind(&sealed)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok((done.rows_affected() == 1).then_some(sealed))
    }

    #[tracing::instrument(level = "debug", name = "db", skip_all, fields(otel.name = "db sweep_elicitations", otel.kind = "client", db.operation.name = "sweep_elicitations"))]
    async fn sweep_elicitations(&self, now: i64, forget_before: i64) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin().await?;
        let expired = sqlx::query(
            "UPDATE elicitations SET status = 'expired', secret_sealed = NULL, updated_at = $1 \
             WHERE status = 'pending' AND expires_at <= $1",
        )
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        // A secret nobody collected before the elicitation's expiry is dropped.
        let dropped = sqlx::query(
            "UPDATE elicitations SET secret_sealed = NULL, updated_at = $1 \
             WHERE secret_sealed IS NOT NULL AND expires_at <= $1",
        )
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let forgotten =
            sqlx::query("DELETE FROM elicitations WHERE status <> 'pending' AND updated_at < $1")
                .bind(forget_before)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        tx.commit().await?;
        Ok(expired + dropped + forgotten)
    }
}
