//! `ElicitationStore` over the same `Any` pool: URL-mode elicitations and their sealed secrets.
//! Every query takes the tenant first. State changes are conditional UPDATEs (only a pending,
//! unexpired elicitation completes; a secret is taken once), so replicas racing on the same
//! elicitation cannot both win.

use sqlx::any::AnyRow;
use sqlx::Row;

use super::sql::{inserted, SqlStore};
use serde::{Deserialize, Serialize};

use super::StoreError;

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
