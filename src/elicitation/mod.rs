//! URL-mode elicitation: a tool needs a secret from the user (an API key, a third-party grant)
//! that must not pass through the MCP client. The platform records the elicitation (tenant,
//! principal binding, session, tool, status, expiry), sends the client a URL to its own page
//! `/t/{tenant}/elicitations/{id}` (served by `oauth::elicitation_page`, beside the tenant's login page), where the same principal enters the secret;
//! the secret is sealed at rest (bound to tenant and id) and handed to the tool once.
//!
//! Both request paths use [`TenantElicitations`]: a 2025-11-25 session sends `elicitation/create`
//! (mode `url`) and waits for the outcome, or answers the URL-elicitation-required error
//! (-32042); a stateless 2026-07-28 request (which never gets -32042) returns the elicitation as
//! an input request and picks the secret up on the client's retry with
//! [`TenantElicitations::prepare`], waiting for the page if the user is not done yet.

use std::sync::Arc;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde_json::{json, Value};
use tokio::sync::broadcast;

use crate::auth::seal::purpose::elicitation_secret as purpose;
use crate::auth::{AuthService, SealError};
use crate::store::{
    now_millis, ElicitationRecord, ElicitationStatus, ElicitationStore, LoginMethod, SqlStore,
    StoreError, TenantAuth, TenantStore, WantedSecret,
};

/// How long finished elicitations stay listed (without their secret) before the sweep deletes
/// them.
pub const KEEP_FINISHED_MS: i64 = 7 * 24 * 3600 * 1000;
/// How often a waiting call re-reads the database (the page may be served by another replica).
const POLL: Duration = Duration::from_millis(1000);
/// Longest message and secret accepted.
pub const MAX_MESSAGE_CHARS: usize = 1000;
pub const MAX_SECRET_BYTES: usize = 16 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ElicitationError {
    /// The tenant cannot verify who opens the page (external authorization server, or sign-in
    /// through an OpenID provider, which the page does not offer yet).
    #[error("URL elicitation is not available on this tenant: {0}")]
    Unavailable(&'static str),
    #[error("unknown tenant")]
    UnknownTenant,
    #[error("elicitation storage: {0}")]
    Store(#[from] StoreError),
    #[error("the stored secret cannot be opened: {0}")]
    Seal(#[from] SealError),
}

/// What the user did, as a waiting call sees it.
pub enum Outcome {
    /// The secret, taken (the elicitation keeps no copy).
    Completed {
        secret: SecretString,
    },
    Declined,
    Cancelled,
    Expired,
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Outcome::Completed { .. } => "Completed",
            Outcome::Declined => "Declined",
            Outcome::Cancelled => "Cancelled",
            Outcome::Expired => "Expired",
        })
    }
}

/// A pending elicitation as the client sees it (`elicitation/create` params, or an entry of the
/// -32042 error's `elicitations`).
#[derive(Debug, Clone, PartialEq)]
pub struct UrlElicitation {
    pub id: String,
    pub url: String,
    pub message: String,
}

impl UrlElicitation {
    pub fn to_value(&self) -> Value {
        json!({ "mode": "url", "elicitationId": self.id, "url": self.url, "message": self.message })
    }
}

/// Where a tool's need for a secret stands.
#[derive(Debug)]
pub enum Prepared {
    /// Completed earlier (e.g. after a -32042 error) and now taken: hand it to the tool.
    Ready { id: String, secret: SecretString },
    /// The user must visit the page; `existing` when this elicitation was already pending (an
    /// earlier call asked), so the client has seen it before.
    Pending {
        elicitation: UrlElicitation,
        existing: bool,
    },
}

/// What a tool asks for.
pub struct SecretRequest<'a> {
    pub principal: Option<&'a Value>,
    pub session: Option<&'a str>,
    pub tool: &'a str,
    /// A short identifier (`github_token`): letters, digits, `_ - .`, at most 64.
    pub name: &'a str,
    pub message: &'a str,
}

/// The platform's elicitations (one per replica).
pub struct Elicitations {
    store: SqlStore,
    auth: Arc<AuthService>,
    base_url: String,
    ttl_ms: i64,
    /// `tenant/id` of elicitations that changed on this replica (wakes waiting calls at once;
    /// other replicas' changes are seen by polling).
    changed: broadcast::Sender<String>,
}

impl std::fmt::Debug for Elicitations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elicitations")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
}

impl Elicitations {
    /// `base_url`: the external origin the page is served at (`https://mcp.example.com`).
    pub fn new(store: SqlStore, auth: Arc<AuthService>, base_url: String, ttl: Duration) -> Self {
        Elicitations {
            store,
            auth,
            base_url: base_url.trim_end_matches('/').to_string(),
            ttl_ms: ttl.as_millis().clamp(1000, i64::MAX as u128) as i64,
            changed: broadcast::channel(256).0,
        }
    }

    pub fn for_tenant(self: &Arc<Self>, tenant: &str) -> TenantElicitations {
        TenantElicitations {
            service: self.clone(),
            tenant: tenant.into(),
        }
    }

    pub fn store(&self) -> &SqlStore {
        &self.store
    }

    pub fn auth(&self) -> &AuthService {
        &self.auth
    }

    /// The page of an elicitation.
    pub fn url(&self, tenant: &str, id: &str) -> String {
        format!("{}/t/{tenant}/elicitations/{id}", self.base_url)
    }

    fn wake(&self, tenant: &str, id: &str) {
        let _ = self.changed.send(format!("{tenant}/{id}"));
    }

    /// The page: stores the secret sealed and completes the elicitation; false when it was not
    /// pending any more.
    pub async fn submit(
        &self,
        tenant: &str,
        id: &str,
        secret: &SecretString,
    ) -> Result<bool, ElicitationError> {
        let sealed = self
            .auth
            .sealer
            .seal(&purpose(tenant, id), secret.expose_secret().as_bytes());
        let done = self
            .store
            .complete_elicitation(tenant, id, &sealed, now_millis())
            .await?;
        if done {
            tracing::info!(tenant, elicitation = id, "elicitation completed");
            self.wake(tenant, id);
        }
        Ok(done)
    }

    /// Declines or cancels a pending elicitation; false when it was not pending.
    pub async fn close(
        &self,
        tenant: &str,
        id: &str,
        status: ElicitationStatus,
    ) -> Result<bool, ElicitationError> {
        let done = self
            .store
            .close_elicitation(tenant, id, status, now_millis())
            .await?;
        if done {
            tracing::info!(
                tenant,
                elicitation = id,
                status = status.as_str(),
                "elicitation closed"
            );
            self.wake(tenant, id);
        }
        Ok(done)
    }

    /// Takes the secret of a completed elicitation (once).
    pub async fn take_secret(
        &self,
        tenant: &str,
        id: &str,
    ) -> Result<Option<SecretString>, ElicitationError> {
        let Some(sealed) = self
            .store
            .take_elicitation_secret(tenant, id, now_millis())
            .await?
        else {
            return Ok(None);
        };
        let bytes = self.auth.sealer.open(&purpose(tenant, id), &sealed)?;
        Ok(Some(SecretString::from(
            String::from_utf8_lossy(&bytes).into_owned(),
        )))
    }

    /// Periodically marks expired elicitations, drops uncollected secrets and forgets old ones.
    pub fn spawn_sweeper(self: &Arc<Self>) {
        let this = self.clone();
        let every = Duration::from_millis((this.ttl_ms as u64 / 2).clamp(1000, 60_000));
        actix_rt::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let now = now_millis();
                match this
                    .store
                    .sweep_elicitations(now, now - KEEP_FINISHED_MS)
                    .await
                {
                    Ok(0) => {}
                    Ok(n) => tracing::debug!(changed = n, "swept elicitations"),
                    Err(e) => tracing::warn!(error = %e, "elicitation sweep failed"),
                }
            }
        });
    }
}

/// One tenant's view of [`Elicitations`]: what a running request (tool call) uses.
#[derive(Clone)]
pub struct TenantElicitations {
    service: Arc<Elicitations>,
    tenant: Arc<str>,
}

impl std::fmt::Debug for TenantElicitations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantElicitations")
            .field("tenant", &self.tenant)
            .finish()
    }
}

impl TenantElicitations {
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    pub fn service(&self) -> &Arc<Elicitations> {
        &self.service
    }

    /// Refuses tenants whose page cannot verify the user (see [`ElicitationError::Unavailable`]).
    async fn check_tenant(&self, principal: Option<&Value>) -> Result<(), ElicitationError> {
        let tenant = self
            .service
            .store
            .get_tenant(&self.tenant)
            .await?
            .ok_or(ElicitationError::UnknownTenant)?;
        match tenant.auth {
            TenantAuth::None => Ok(()),
            TenantAuth::Oauth(settings) if settings.login == LoginMethod::Local => {
                match principal {
                    Some(_) => Ok(()),
                    None => Err(ElicitationError::Unavailable(
                        "the request has no signed-in user to bind the elicitation to",
                    )),
                }
            }
            TenantAuth::Oauth(_) => Err(ElicitationError::Unavailable(
                "its users sign in through an OpenID provider, which the elicitation page does \
                 not offer yet",
            )),
            TenantAuth::External(_) => Err(ElicitationError::Unavailable(
                "its tokens come from an external authorization server, so the platform cannot \
                 verify who opens the elicitation page",
            )),
        }
    }

    /// The secret `request` asks for if the user already provided it (taken now), else the
    /// pending elicitation for it (an existing one, or a new one).
    pub async fn prepare(&self, request: &SecretRequest<'_>) -> Result<Prepared, ElicitationError> {
        let binding = request.principal.and_then(crate::auth::binding_of_value);
        let binding = binding.as_deref();
        let store = &self.service.store;
        let now = now_millis();
        let wanted = WantedSecret {
            principal: binding,
            session: request.session,
            tool: request.tool,
            name: request.name,
        };
        if let Some(done) = store
            .find_elicitation(&self.tenant, &wanted, ElicitationStatus::Completed, now)
            .await?
        {
            if let Some(secret) = self.service.take_secret(&self.tenant, &done.id).await? {
                return Ok(Prepared::Ready {
                    id: done.id,
                    secret,
                });
            }
        }
        if let Some(pending) = store
            .find_elicitation(&self.tenant, &wanted, ElicitationStatus::Pending, now)
            .await?
        {
            return Ok(Prepared::Pending {
                elicitation: self.describe(&pending),
                existing: true,
            });
        }
        self.check_tenant(request.principal).await?;
        let message: String = request.message.chars().take(MAX_MESSAGE_CHARS).collect();
        let record = ElicitationRecord {
            id: crate::auth::random_token(),
            principal: binding.map(str::to_string),
            session: request.session.map(str::to_string),
            tool: request.tool.to_string(),
            name: request.name.to_string(),
            message,
            status: ElicitationStatus::Pending,
            secret_sealed: None,
            expires_at: now + self.service.ttl_ms,
            created_at: now,
            updated_at: now,
        };
        store.insert_elicitation(&self.tenant, &record).await?;
        tracing::info!(tenant = %self.tenant, elicitation = %record.id, tool = %record.tool,
            name = %record.name, "URL elicitation created");
        Ok(Prepared::Pending {
            elicitation: self.describe(&record),
            existing: false,
        })
    }

    fn describe(&self, record: &ElicitationRecord) -> UrlElicitation {
        UrlElicitation {
            url: self.service.url(&self.tenant, &record.id),
            id: record.id.clone(),
            message: record.message.clone(),
        }
    }

    /// Declines or cancels a pending elicitation (the client refused to open the page).
    pub async fn close(
        &self,
        id: &str,
        status: ElicitationStatus,
    ) -> Result<bool, ElicitationError> {
        self.service.close(&self.tenant, id, status).await
    }

    /// Waits until the elicitation is no longer pending (or expires); a completed one's secret
    /// is taken. Cancel-safe: dropping the future only stops waiting.
    pub async fn wait(&self, id: &str) -> Result<Outcome, ElicitationError> {
        let key = format!("{}/{id}", self.tenant);
        let mut changes = self.service.changed.subscribe();
        loop {
            let now = now_millis();
            let record = self.service.store.get_elicitation(&self.tenant, id).await?;
            let Some(record) = record else {
                return Ok(Outcome::Cancelled);
            };
            match record.status_at(now) {
                ElicitationStatus::Pending => {}
                ElicitationStatus::Completed => {
                    return Ok(match self.service.take_secret(&self.tenant, id).await? {
                        Some(secret) => Outcome::Completed { secret },
                        // Someone else took it (another call of the same tool).
                        None => Outcome::Cancelled,
                    });
                }
                ElicitationStatus::Declined => return Ok(Outcome::Declined),
                ElicitationStatus::Cancelled => return Ok(Outcome::Cancelled),
                ElicitationStatus::Expired => return Ok(Outcome::Expired),
            }
            let left = Duration::from_millis((record.expires_at - now).max(1) as u64);
            let sleep = tokio::time::sleep(POLL.min(left));
            tokio::pin!(sleep);
            loop {
                tokio::select! {
                    _ = &mut sleep => break,
                    changed = changes.recv() => match changed {
                        Ok(k) if k == key => break,
                        Ok(_) => {}
                        Err(broadcast::error::RecvError::Lagged(_)) => break,
                        Err(broadcast::error::RecvError::Closed) => {
                            (&mut sleep).await;
                            break;
                        }
                    }
                }
            }
        }
    }
}
