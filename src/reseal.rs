//! Key rotation for secrets at rest. Every sealed value in the database (private signing keys,
//! upstream client secrets, webhook signing secrets, elicited secrets, recorded rounds, upstream
//! servers' static headers) names the key it was sealed under. After the operator puts a new key first in `auth.sealing_keys` on
//! every replica, [`Rotation`] re-seals each value still under an older key (and seals webhook
//! secrets stored in clear before secrets were sealed) in the background, in batches, writing
//! each value back only if it is unchanged since it was read, so a concurrent write is never
//! lost. The job is idempotent; once it reports nothing left under the old key, that key can be
//! removed from the configuration.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;

use crate::auth::seal::{self, purpose, SealError, Sealer};
use crate::catalog::stored::{reseal_tool_body, tool_body_in_clear, tool_body_key_id};
use crate::store::{
    now_millis, SealedColumn, SealedRow, SealedValueStore, SqlStore, StoreError, TenantAuth,
};

/// Rows read (and re-sealed) per batch.
const BATCH: u32 = 100;

/// A sealed column read in key order, `BATCH` rows at a time.
struct Batches {
    column: SealedColumn,
    /// The last row read (tenant, id); `None` before the first batch.
    after: Option<(String, String)>,
    done: bool,
}

impl Batches {
    fn new(column: SealedColumn) -> Self {
        Batches {
            column,
            after: None,
            done: false,
        }
    }

    /// The next batch; `None` once the column has been read to its end.
    async fn next(
        &mut self,
        store: &impl SealedValueStore,
    ) -> Result<Option<Vec<SealedRow>>, StoreError> {
        if self.done {
            return Ok(None);
        }
        let after = self.after.as_ref().map(|(t, i)| (t.as_str(), i.as_str()));
        let rows = store.sealed_rows(self.column, after, BATCH).await?;
        match rows.last() {
            Some(last) if rows.len() == BATCH as usize => {
                self.after = Some((last.tenant.clone(), last.id.clone()));
            }
            _ => self.done = true,
        }
        Ok((!rows.is_empty()).then_some(rows))
    }
}
/// The pause between batches, so the job never crowds out serving traffic.
const PAUSE: Duration = Duration::from_millis(10);
/// Passes over the database at most: a value changed while the job ran is looked at again.
const MAX_PASSES: u32 = 3;
/// Failures listed in the job's status (all are counted and logged).
const FAILURES_SHOWN: usize = 20;

/// How one stored value is held.
#[derive(Debug, PartialEq, Eq)]
enum Held {
    /// Sealed under this key id.
    Sealed(String),
    /// In clear (a webhook secret stored before secrets were sealed).
    InClear,
    /// No secret in this row (a tenant without an upstream client secret, say).
    Nothing,
}

fn sealed_under(sealed: &str) -> Held {
    match seal::key_id(sealed) {
        Some(id) => Held::Sealed(id.to_string()),
        // Not of the sealed form: counted as in clear, never silently ignored.
        None => Held::InClear,
    }
}

fn oidc_secret(auth: &mut TenantAuth) -> Option<&mut String> {
    match auth {
        TenantAuth::Oauth(settings) => settings.oidc.as_mut()?.client_secret_sealed.as_mut(),
        _ => None,
    }
}

/// Why a row could not be looked at or re-sealed (never holds a secret).
#[derive(Debug, thiserror::Error)]
enum RowError {
    #[error("{0}")]
    Seal(#[from] SealError),
    #[error("{0}")]
    Webhook(#[from] crate::catalog::stored::StoredSecretError),
    #[error("the stored document is not readable JSON")]
    Json,
}

fn held(column: SealedColumn, row: &SealedRow) -> Result<Held, RowError> {
    Ok(match column {
        SealedColumn::SigningKeys
        | SealedColumn::ElicitationSecrets
        | SealedColumn::RoundStates => sealed_under(&row.text),
        SealedColumn::OidcClientSecrets => {
            let mut auth: TenantAuth =
                serde_json::from_str(&row.text).map_err(|_| RowError::Json)?;
            oidc_secret(&mut auth).map_or(Held::Nothing, |s| sealed_under(s))
        }
        SealedColumn::UpstreamHeaders => {
            let body: Value = serde_json::from_str(&row.text).map_err(|_| RowError::Json)?;
            body["auth"]["sealed"]
                .as_str()
                .map_or(Held::Nothing, sealed_under)
        }
        SealedColumn::WebhookSecrets => {
            let body: Value = serde_json::from_str(&row.text).map_err(|_| RowError::Json)?;
            match tool_body_key_id(&body) {
                Some(id) => Held::Sealed(id.to_string()),
                None if tool_body_in_clear(&body) => Held::InClear,
                None => Held::Nothing,
            }
        }
    })
}

/// The row's text with its secret sealed under the first key, or `None` when it already is.
fn resealed(
    sealer: &Sealer,
    column: SealedColumn,
    row: &SealedRow,
) -> Result<Option<String>, RowError> {
    let (tenant, id) = (row.tenant.as_str(), row.id.as_str());
    let direct = |purpose: String| sealer.reseal(&purpose, &row.text);
    Ok(match column {
        SealedColumn::SigningKeys => direct(purpose::signing_key(tenant, id))?,
        SealedColumn::ElicitationSecrets => direct(purpose::elicitation_secret(tenant, id))?,
        SealedColumn::RoundStates => direct(purpose::round_state(tenant, id))?,
        SealedColumn::OidcClientSecrets => {
            let mut auth: TenantAuth =
                serde_json::from_str(&row.text).map_err(|_| RowError::Json)?;
            let Some(sealed) = oidc_secret(&mut auth) else {
                return Ok(None);
            };
            match sealer.reseal(&purpose::oidc_client_secret(tenant), sealed)? {
                Some(new) => {
                    *sealed = new;
                    Some(serde_json::to_string(&auth).map_err(|_| RowError::Json)?)
                }
                None => None,
            }
        }
        SealedColumn::UpstreamHeaders => {
            let mut body: Value = serde_json::from_str(&row.text).map_err(|_| RowError::Json)?;
            let Some(sealed) = body["auth"]["sealed"].as_str() else {
                return Ok(None);
            };
            let purpose = crate::upstream::def::purpose(tenant, id);
            match sealer.reseal(&purpose, sealed)? {
                Some(resealed) => {
                    body["auth"]["sealed"] = Value::String(resealed);
                    Some(body.to_string())
                }
                None => None,
            }
        }
        SealedColumn::WebhookSecrets => {
            let mut body: Value = serde_json::from_str(&row.text).map_err(|_| RowError::Json)?;
            if !tool_body_in_clear(&body) && tool_body_key_id(&body).is_none() {
                return Ok(None);
            }
            reseal_tool_body(sealer, tenant, id, &mut body)?.then(|| body.to_string())
        }
    })
}

/// How many stored values each key id seals (ids no longer configured included).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct KeyUsage {
    /// Key id → sealed values.
    pub sealed: BTreeMap<String, u64>,
    /// Webhook secrets still in clear (stored before secrets were sealed).
    pub in_clear: u64,
    /// Rows whose document could not be read.
    pub unreadable: u64,
}

/// One value the job could not re-seal (no secret in it).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ResealFailure {
    pub column: SealedColumn,
    pub tenant: String,
    pub id: String,
    pub error: String,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    Running,
    Finished,
    /// Stopped by a database error (re-run it).
    Failed,
}

/// What the re-sealing job did (or is doing) on this replica.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct JobStatus {
    pub state: JobState,
    /// The key values are re-sealed under.
    pub sealing_key: String,
    pub started_at: i64,
    pub finished_at: Option<i64>,
    /// Values looked at (again in a later pass if one changed concurrently).
    pub examined: u64,
    /// Values re-sealed (or sealed, if they were in clear).
    pub resealed: u64,
    /// Values changed by someone else between read and write (looked at again in a later pass).
    pub changed_concurrently: u64,
    /// Values that do not open (tampered, moved, or sealed under a key not configured).
    pub failed: u64,
    pub failures: Vec<ResealFailure>,
    /// Why the job stopped early.
    pub error: Option<String>,
}

/// Counts and re-seals the database's sealed values; holds this replica's job status.
pub struct Rotation {
    store: SqlStore,
    sealer: Arc<Sealer>,
    status: Mutex<Option<JobStatus>>,
}

impl std::fmt::Debug for Rotation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rotation")
            .field("sealer", &self.sealer)
            .finish_non_exhaustive()
    }
}

impl Rotation {
    pub fn new(store: SqlStore, sealer: Arc<Sealer>) -> Rotation {
        Rotation {
            store,
            sealer,
            status: Mutex::new(None),
        }
    }

    pub fn sealer(&self) -> &Sealer {
        &self.sealer
    }

    /// The last (or running) job's status on this replica.
    pub fn status(&self) -> Option<JobStatus> {
        self.status.lock().clone()
    }

    /// Counts the stored values per key id (reads every sealed column, in batches).
    pub async fn usage(&self) -> Result<KeyUsage, StoreError> {
        let mut usage = KeyUsage::default();
        for column in SealedColumn::ALL {
            let mut batches = Batches::new(column);
            while let Some(rows) = batches.next(&self.store).await? {
                for row in &rows {
                    match held(column, row) {
                        Ok(Held::Sealed(id)) => *usage.sealed.entry(id).or_default() += 1,
                        Ok(Held::InClear) => usage.in_clear += 1,
                        Ok(Held::Nothing) => {}
                        Err(_) => usage.unreadable += 1,
                    }
                }
            }
        }
        Ok(usage)
    }

    /// Starts the job in the background unless it is running here already; its status.
    pub fn start(self: &Arc<Self>) -> JobStatus {
        let mut status = self.status.lock();
        if let Some(running) = status.as_ref().filter(|s| s.state == JobState::Running) {
            return running.clone();
        }
        let fresh = JobStatus {
            state: JobState::Running,
            sealing_key: self.sealer.first_key_id().to_string(),
            started_at: now_millis(),
            finished_at: None,
            examined: 0,
            resealed: 0,
            changed_concurrently: 0,
            failed: 0,
            failures: Vec::new(),
            error: None,
        };
        *status = Some(fresh.clone());
        drop(status);
        let job = self.clone();
        tokio::spawn(async move { job.run().await });
        fresh
    }

    /// Runs the job to the end (what [`start`](Self::start) runs in the background).
    pub async fn run(&self) {
        tracing::info!(sealing_key = %self.sealer.first_key_id(), "re-sealing secrets at rest");
        let mut outcome = Ok(());
        for pass in 0..MAX_PASSES {
            let before = self.with_status(|s| s.changed_concurrently);
            outcome = self.pass(pass == 0).await;
            if outcome.is_err() || self.with_status(|s| s.changed_concurrently) == before {
                break;
            }
        }
        let now = now_millis();
        let mut status = self.status.lock();
        if let Some(s) = status.as_mut() {
            s.finished_at = Some(now);
            match outcome {
                Ok(()) => s.state = JobState::Finished,
                Err(e) => {
                    tracing::error!(error = %e, "re-sealing stopped; run it again");
                    s.state = JobState::Failed;
                    s.error = Some(e.to_string());
                }
            }
            tracing::info!(
                examined = s.examined,
                resealed = s.resealed,
                failed = s.failed,
                "re-sealing finished"
            );
        }
    }

    fn with_status<T: Default>(&self, f: impl FnOnce(&mut JobStatus) -> T) -> T {
        self.status.lock().as_mut().map(f).unwrap_or_default()
    }

    /// One pass over every sealed column (failures are recorded in the first).
    async fn pass(&self, first: bool) -> Result<(), StoreError> {
        for column in SealedColumn::ALL {
            let mut batches = Batches::new(column);
            while let Some(rows) = batches.next(&self.store).await? {
                for row in &rows {
                    self.reseal_row(column, row, first).await?;
                }
                tokio::time::sleep(PAUSE).await;
            }
        }
        Ok(())
    }

    async fn reseal_row(
        &self,
        column: SealedColumn,
        row: &SealedRow,
        record_failure: bool,
    ) -> Result<(), StoreError> {
        self.with_status(|s| s.examined += 1);
        match resealed(&self.sealer, column, row) {
            Ok(None) => {}
            Ok(Some(text)) => {
                if self.store.replace_sealed(column, row, &text).await? {
                    self.with_status(|s| s.resealed += 1);
                } else {
                    self.with_status(|s| s.changed_concurrently += 1);
                }
            }
            Err(_) if !record_failure => {}
            Err(e) => {
                tracing::error!(column = ?column, tenant = %row.tenant, id = %row.id, error = %e, "a sealed value does not open; left as it is");
                let failure = ResealFailure {
                    column,
                    tenant: row.tenant.clone(),
                    id: row.id.clone(),
                    error: e.to_string(),
                };
                self.with_status(|s| {
                    s.failed += 1;
                    if s.failures.len() < FAILURES_SHOWN {
                        s.failures.push(failure);
                    }
                });
            }
        }
        Ok(())
    }
}
