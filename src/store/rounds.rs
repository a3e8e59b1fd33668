//! Requests between their rounds: webhook calls waiting for a session client's input
//! (`PendingInputStore`) and the stateless revision's multi round-trip requests (`RoundStore`),
//! with their SQL.

use serde_json::Value;
use sqlx::Row;

use super::sql::*;
use super::*;

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

impl PendingInputStore for SqlStore {
    #[tracing::instrument(level = "debug", name = "db", skip(self, input), fields(otel.name = "db save_pending_input", otel.kind = "client", db.operation.name = "save_pending_input"))]
    async fn save_pending_input(
        &self,
        tenant: &str,
        session: &str,
        request_id: &str,
        input: &PendingInput,
    ) -> Result<(), StoreError> {
        let state =
            serde_json::to_string(&input.state).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        sqlx::query(
            "INSERT INTO pending_inputs (tenant, session, request_id, tool, round, state, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (tenant, session, request_id) DO UPDATE \
             SET tool = excluded.tool, round = excluded.round, state = excluded.state, \
                 created_at = excluded.created_at",
        )
        .bind(tenant)
        .bind(session)
        .bind(request_id)
        .bind(&input.tool)
        .bind(i64::from(input.round))
        .bind(state)
        .bind(super::now_millis())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db pending_input", otel.kind = "client", db.operation.name = "pending_input"))]
    async fn pending_input(
        &self,
        tenant: &str,
        session: &str,
        request_id: &str,
    ) -> Result<Option<PendingInput>, StoreError> {
        let row = sqlx::query(
            "SELECT tool, round, state FROM pending_inputs \
             WHERE tenant = $1 AND session = $2 AND request_id = $3",
        )
        .bind(tenant)
        .bind(session)
        .bind(request_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let state: String = row.try_get("state")?;
        let round: i64 = row.try_get("round")?;
        Ok(Some(PendingInput {
            tool: row.try_get("tool")?,
            round: u32::try_from(round).map_err(|e| StoreError::Corrupt(e.to_string()))?,
            state: serde_json::from_str(&state).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        }))
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db delete_pending_input", otel.kind = "client", db.operation.name = "delete_pending_input"))]
    async fn delete_pending_input(
        &self,
        tenant: &str,
        session: &str,
        request_id: Option<&str>,
    ) -> Result<(), StoreError> {
        match request_id {
            Some(id) => sqlx::query(
                "DELETE FROM pending_inputs WHERE tenant = $1 AND session = $2 AND request_id = $3",
            )
            .bind(tenant)
            .bind(session)
            .bind(id)
            .execute(&self.pool)
            .await?,
            None => {
                sqlx::query("DELETE FROM pending_inputs WHERE tenant = $1 AND session = $2")
                    .bind(tenant)
                    .bind(session)
                    .execute(&self.pool)
                    .await?
            }
        };
        Ok(())
    }
}

impl RoundStore for SqlStore {
    #[tracing::instrument(level = "debug", name = "db", skip(self, round), fields(otel.name = "db save_round", otel.kind = "client", db.operation.name = "save_round"))]
    async fn save_round(&self, tenant: &str, round: &RoundRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO mrtr_rounds (tenant, id, round, state, expires_at) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (tenant, id) DO UPDATE \
             SET round = excluded.round, state = excluded.state, \
             expires_at = excluded.expires_at, claimed_until = 0",
        )
        .bind(tenant)
        .bind(&round.id)
        .bind(i64::from(round.round))
        .bind(&round.state)
        .bind(round.expires_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db round", otel.kind = "client", db.operation.name = "round"))]
    async fn round(
        &self,
        tenant: &str,
        id: &str,
        now: i64,
    ) -> Result<Option<RoundRecord>, StoreError> {
        let row = sqlx::query(
            "SELECT id, round, state, expires_at FROM mrtr_rounds \
             WHERE tenant = $1 AND id = $2 AND expires_at > $3",
        )
        .bind(tenant)
        .bind(id)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let round: i64 = row.try_get("round")?;
        Ok(Some(RoundRecord {
            id: row.try_get("id")?,
            round: u32::try_from(round).map_err(|e| StoreError::Corrupt(e.to_string()))?,
            state: row.try_get("state")?,
            expires_at: row.try_get("expires_at")?,
        }))
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db claim_round", otel.kind = "client", db.operation.name = "claim_round"))]
    async fn claim_round(
        &self,
        tenant: &str,
        id: &str,
        round: u32,
        now: i64,
        until: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE mrtr_rounds SET claimed_until = $5 \
             WHERE tenant = $1 AND id = $2 AND round = $3 AND claimed_until <= $4 \
             AND expires_at > $4",
        )
        .bind(tenant)
        .bind(id)
        .bind(i64::from(round))
        .bind(now)
        .bind(until)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db set_claim", otel.kind = "client", db.operation.name = "set_claim"))]
    async fn set_claim(
        &self,
        tenant: &str,
        id: &str,
        round: u32,
        held: i64,
        until: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE mrtr_rounds SET claimed_until = $5 \
             WHERE tenant = $1 AND id = $2 AND round = $3 AND claimed_until = $4",
        )
        .bind(tenant)
        .bind(id)
        .bind(i64::from(round))
        .bind(held)
        .bind(until)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db delete_round", otel.kind = "client", db.operation.name = "delete_round"))]
    async fn delete_round(
        &self,
        tenant: &str,
        id: &str,
        round: u32,
        held: Option<i64>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "DELETE FROM mrtr_rounds WHERE tenant = $1 AND id = $2 AND round = $3 \
             AND ($4 IS NULL OR claimed_until = $4)",
        )
        .bind(tenant)
        .bind(id)
        .bind(i64::from(round))
        .bind(held)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    #[tracing::instrument(level = "debug", name = "db", skip(self), fields(otel.name = "db sweep_rounds", otel.kind = "client", db.operation.name = "sweep_rounds"))]
    async fn sweep_rounds(&self, now: i64) -> Result<u64, StoreError> {
        let done = sqlx::query("DELETE FROM mrtr_rounds WHERE expires_at <= $1")
            .bind(now)
            .execute(&self.pool)
            .await?;
        // Webhook rounds of abandoned stateless calls (recorded under `mrtr:<id>`), once no
        // request state can name them any more (the longest allowed lifetime is a day).
        sqlx::query("DELETE FROM pending_inputs WHERE session LIKE 'mrtr:%' AND created_at < $1")
            .bind(now - 86_400_000)
            .execute(&self.pool)
            .await?;
        // Rounds of session calls that ended without finishing (the session deleted or expired,
        // the call cancelled): a round waits at most a day for the client
        // (`sessions.client_request_timeout_secs`), so one written two days ago is dead.
        sqlx::query("DELETE FROM pending_inputs WHERE created_at < $1")
            .bind(now - 2 * 86_400_000)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }
}
