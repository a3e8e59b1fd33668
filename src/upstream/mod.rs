//! Upstream MCP servers a tenant federates (gateway mode): each is one more catalog kind beside
//! the built-in catalogs and the published entries. `Upstream` is the live part of one (its
//! client, the last good copy of its lists, its health), kept across catalog rebuilds while its
//! definition is unchanged; `UpstreamCatalog` is what a tenant's catalog serves of it (renamed,
//! filtered, overridden).

pub mod catalog;
pub mod client;
pub mod def;
pub mod sse;

use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use serde_json::{json, Value};

pub use catalog::UpstreamCatalog;
pub use client::{Client, Notice, UpstreamError};
pub use def::{UpstreamDef, UpstreamInput};

use crate::auth::seal::Sealer;
use crate::egress::Egress;
use crate::protocol::RpcError;
use crate::request::RequestContext;

/// Lists longer than this (or more pages than `MAX_PAGES`) are cut, with a warning.
const MAX_ITEMS: usize = 10_000;
const MAX_PAGES: usize = 100;

/// The upstream's lists as it served them, all pages.
#[derive(Debug, Default, Clone)]
pub struct Lists {
    pub tools: Vec<Value>,
    pub prompts: Vec<Value>,
    pub resources: Vec<Value>,
    pub resource_templates: Vec<Value>,
    /// Unix ms.
    pub fetched_at: i64,
}

/// Failures in a row (unreachable, timed out, refused) after which calls are not sent for
/// `BREAKER_OPEN`; a call after that pause is sent, and one more failure stops calls again.
const BREAKER_FAILURES: u32 = 5;
const BREAKER_OPEN: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Debug, Default)]
struct Health {
    last_error: Option<String>,
    last_error_at: Option<i64>,
    last_ok_at: Option<i64>,
    /// Failures since the last exchange that worked.
    failures: u32,
    /// Until when calls fail at once without reaching the upstream (the circuit is open).
    open_until: Option<std::time::Instant>,
}

/// One upstream of a tenant, live.
pub struct Upstream {
    pub name: String,
    pub tenant: Arc<str>,
    pub def: UpstreamDef,
    /// The `updated_at` of the definition it was built from.
    pub revision: i64,
    /// `Err` when the definition cannot be used (its credentials do not open): every call says so.
    client: Result<Arc<Client>, String>,
    lists: RwLock<Option<Arc<Lists>>>,
    health: Mutex<Health>,
    /// The resources followed at the upstream (`resources/subscribe`) for the tenant's sessions.
    subscribed: Mutex<std::collections::HashSet<String>>,
    /// The tools held back (pinning), as found for the lists fetched at the time given.
    held: Mutex<Option<(i64, Arc<std::collections::HashSet<String>>)>>,
}

/// What a tool definition is pinned by: the SHA-256 (hex) of its JSON (keys sorted).
pub fn definition_hash(tool: &Value) -> String {
    crate::auth::hash_secret(&tool.to_string())
}

impl Upstream {
    pub fn new(
        tenant: &str,
        name: &str,
        def: UpstreamDef,
        revision: i64,
        egress: Egress,
        sealer: &Sealer,
        on_notice: Arc<dyn Fn(Notice) + Send + Sync>,
    ) -> Upstream {
        let client = def.headers(sealer, tenant, name).and_then(|headers| {
            Client::new(name, egress, &def.url, headers, def.timeout_ms(), on_notice)
        });
        if let Err(e) = &client {
            tracing::warn!(tenant, upstream = name, error = %e, "the upstream cannot be used");
        }
        Upstream {
            name: name.to_string(),
            tenant: tenant.into(),
            def,
            revision,
            client: client.map(Arc::new),
            lists: RwLock::new(None),
            health: Mutex::new(Health::default()),
            subscribed: Mutex::new(Default::default()),
            held: Mutex::new(None),
        }
    }

    /// The last good copy of its lists (`None` before the first).
    pub fn lists(&self) -> Option<Arc<Lists>> {
        self.lists.read().clone()
    }

    fn noted<T>(&self, outcome: Result<T, UpstreamError>) -> Result<T, UpstreamError> {
        let mut health = self.health.lock();
        let now = crate::store::now_millis();
        match &outcome {
            Ok(_) | Err(UpstreamError::Rpc(_)) => {
                health.last_ok_at = Some(now);
                health.failures = 0;
                health.open_until = None;
            }
            Err(e) => {
                health.last_error = Some(e.to_string());
                health.last_error_at = Some(now);
                health.failures += 1;
                if health.failures >= BREAKER_FAILURES {
                    if health.open_until.is_none() || health.failures == BREAKER_FAILURES {
                        tracing::warn!(tenant = %self.tenant, upstream = %self.name, failures = health.failures, error = %e, "the upstream keeps failing; its calls fail at once for {} s", BREAKER_OPEN.as_secs());
                    }
                    health.open_until = Some(std::time::Instant::now() + BREAKER_OPEN);
                }
            }
        }
        outcome
    }

    /// Sends `method` to the upstream for a client's request; the client gets the upstream's
    /// answer, or an error naming the upstream.
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        ctx: Option<&RequestContext>,
    ) -> Result<Value, RpcError> {
        let client = self
            .client
            .as_ref()
            .map_err(|e| RpcError::internal(format!("upstream {:?}: {e}", self.name)))?;
        if let Some(open) = self.open_for() {
            return Err(RpcError::internal(format!(
                "upstream {:?} is not called for another {} s: it failed {BREAKER_FAILURES} times \
                 in a row (last: {})",
                self.name,
                open.as_secs().max(1),
                self.health
                    .lock()
                    .last_error
                    .as_deref()
                    .unwrap_or("unknown"),
            ))
            .with_data(json!({ "upstream": self.name })));
        }
        let outcome = client.request(method, params, ctx).await;
        self.noted(outcome).map_err(|e| e.into_rpc(&self.name))
    }

    /// How much longer its calls fail at once (the circuit is open), if they do.
    fn open_for(&self) -> Option<std::time::Duration> {
        let until = self.health.lock().open_until?;
        until.checked_duration_since(std::time::Instant::now())
    }

    /// Fetches its lists again (every page of each list its capabilities announce) and keeps
    /// them as the last good copy.
    pub async fn refresh(&self) -> Result<Arc<Lists>, String> {
        let outcome = self.fetch().await;
        let outcome = self.noted(outcome).map_err(|e| e.to_string());
        if let Ok(lists) = &outcome {
            *self.lists.write() = Some(lists.clone());
        }
        outcome
    }

    async fn fetch(&self) -> Result<Arc<Lists>, UpstreamError> {
        let client = self
            .client
            .as_ref()
            .map_err(|e| UpstreamError::Protocol(e.clone()))?;
        let session = client.session().await?;
        let has = |c: &str| session.capabilities.get(c).is_some_and(Value::is_object);
        let mut lists = Lists {
            fetched_at: crate::store::now_millis(),
            ..Lists::default()
        };
        if has("tools") {
            lists.tools = self.all(client, "tools/list", "tools").await?;
        }
        if has("prompts") {
            lists.prompts = self.all(client, "prompts/list", "prompts").await?;
        }
        if has("resources") {
            lists.resources = self.all(client, "resources/list", "resources").await?;
            lists.resource_templates = self
                .all(client, "resources/templates/list", "resourceTemplates")
                .await?;
        }
        Ok(Arc::new(lists))
    }

    /// Every page of one list.
    async fn all(
        &self,
        client: &Arc<Client>,
        method: &str,
        key: &str,
    ) -> Result<Vec<Value>, UpstreamError> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let page = client.request(method, params, None).await?;
            let Some(Value::Array(page_items)) = page.get(key) else {
                return Err(UpstreamError::Protocol(format!(
                    "its {method} answer has no \"{key}\" array"
                )));
            };
            items.extend(page_items.iter().filter(|i| i.is_object()).cloned());
            if items.len() > MAX_ITEMS {
                tracing::warn!(tenant = %self.tenant, upstream = %self.name, method, "the upstream lists more than {MAX_ITEMS} items; the rest are not served");
                items.truncate(MAX_ITEMS);
                return Ok(items);
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => cursor = Some(next.to_string()),
                _ => return Ok(items),
            }
        }
        tracing::warn!(tenant = %self.tenant, upstream = %self.name, method, "the upstream lists more than {MAX_PAGES} pages; the rest are not served");
        Ok(items)
    }

    /// The capabilities the upstream announced in the session held now (`None` when none is).
    pub fn client_session_capabilities(&self) -> Option<Value> {
        let client = self.client.as_ref().ok()?;
        Some(client.current_session()?.capabilities.clone())
    }

    /// Follows `uri` at the upstream (once: every session of the tenant hears its updates),
    /// in the background.
    pub fn subscribe(self: &Arc<Self>, uri: &str) {
        if !self.subscribed.lock().insert(uri.to_string()) {
            return;
        }
        let (upstream, uri) = (self.clone(), uri.to_string());
        tokio::spawn(async move {
            let params = json!({ "uri": uri });
            if let Err(e) = upstream.call("resources/subscribe", params, None).await {
                tracing::warn!(tenant = %upstream.tenant, upstream = %upstream.name, %uri, error = %e.message, "could not follow a resource at the upstream");
                upstream.subscribed.lock().remove(&uri);
            }
        });
    }

    /// The tools held back for the lists fetched at `fetched_at`, if they were found.
    pub fn held_for(&self, fetched_at: i64) -> Option<Arc<std::collections::HashSet<String>>> {
        match &*self.held.lock() {
            Some((at, held)) if *at == fetched_at => Some(held.clone()),
            _ => None,
        }
    }

    pub fn set_held(&self, fetched_at: i64, held: Arc<std::collections::HashSet<String>>) {
        *self.held.lock() = Some((fetched_at, held));
    }

    /// Its state as the admin API shows it.
    pub fn state(&self) -> Value {
        let health = self.health.lock();
        let session = self.client.as_ref().ok().and_then(|c| c.current_session());
        let lists = self.lists();
        let connected = session.is_some() && health.last_ok_at >= health.last_error_at;
        json!({
            "connected": connected,
            "protocol_version": session.as_ref().map(|s| s.version.as_str()),
            "server_info": session.as_ref().map(|s| s.server_info.clone()),
            "last_error": health.last_error,
            "last_error_at": health.last_error_at,
            "last_ok_at": health.last_ok_at,
            "failures_in_a_row": health.failures,
            "circuit_open": health.open_until.is_some_and(|u| u > std::time::Instant::now()),
            "lists_fetched_at": lists.as_ref().map(|l| l.fetched_at),
            "tools": lists.as_ref().map(|l| l.tools.len()),
            "prompts": lists.as_ref().map(|l| l.prompts.len()),
            "resources": lists.as_ref().map(|l| l.resources.len()),
            "resource_templates": lists.as_ref().map(|l| l.resource_templates.len()),
        })
    }
}
