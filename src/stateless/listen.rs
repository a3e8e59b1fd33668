//! `subscriptions/listen` (2026-07-28): a long-lived response stream carrying the change
//! notifications the client opted in to — tool, prompt and resource list changes, updates of
//! named resources — each tagged with the subscription (the listen request's id). Fed by the
//! same per-replica fan-out as sessions (`TenantSessions::broadcast`), which the bus feeds with
//! changes made on other replicas. The transport frames it as SSE, with keep-alives, and ends it
//! with the request's result when the server closes it.

use std::collections::HashSet;

use serde_json::{json, Map, Value};
use tokio::sync::broadcast;

use super::{stamp_server_info, Env};
use crate::protocol::stateless::META_SUBSCRIPTION_ID;
use crate::protocol::{jsonrpc, mcp};
use crate::protocol::{RequestId, RpcError};
use crate::session::supervisor::LISTS;
use crate::session::TenantBroadcast;

/// One open subscription.
pub struct Listener {
    pub id: RequestId,
    pub changes: broadcast::Receiver<TenantBroadcast>,
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: HashSet<String>,
    env: Env,
}

impl Listener {
    /// Reads the filter (`params.notifications`) and starts hearing changes.
    pub fn open(env: &Env, id: RequestId, params: &Map<String, Value>) -> Result<Self, RpcError> {
        let filter = params
            .get("notifications")
            .and_then(Value::as_object)
            .ok_or_else(|| {
                RpcError::invalid_params(
                    "subscriptions/listen needs \"notifications\": an object choosing what to hear",
                )
            })?;
        let flag = |name: &str| -> Result<bool, RpcError> {
            match filter.get(name) {
                None | Some(Value::Null) => Ok(false),
                Some(Value::Bool(b)) => Ok(*b),
                Some(_) => Err(RpcError::invalid_params(format!(
                    "notifications.{name} must be a boolean"
                ))),
            }
        };
        let uris = match filter.get("resourceSubscriptions") {
            None | Some(Value::Null) => HashSet::new(),
            Some(Value::Array(items)) => {
                let mut uris = HashSet::new();
                for item in items {
                    let uri = item.as_str().ok_or_else(|| {
                        RpcError::invalid_params(
                            "notifications.resourceSubscriptions must be an array of resource URIs",
                        )
                    })?;
                    mcp::may_follow(uri, uris.contains(uri), uris.len())?;
                    uris.insert(uri.to_string());
                }
                uris
            }
            Some(_) => {
                return Err(RpcError::invalid_params(
                    "notifications.resourceSubscriptions must be an array of resource URIs",
                ))
            }
        };
        Ok(Listener {
            id,
            changes: env.tenant.sessions.listen(),
            tools: flag("toolsListChanged")?,
            prompts: flag("promptsListChanged")?,
            resources: flag("resourcesListChanged")?,
            uris,
            env: env.clone(),
        })
    }

    /// Whether the access token the subscription was opened with has expired: the stream
    /// ends then (it carried that token's authority; the client listens again with a new one).
    pub fn token_expired(&self) -> bool {
        self.env
            .principal
            .as_ref()
            .and_then(|p| p.token_expires_at)
            .is_some_and(|exp| crate::auth::tokens::now_secs() >= exp)
    }

    fn meta(&self) -> Value {
        json!({ META_SUBSCRIPTION_ID: self.id.to_value() })
    }

    /// The first message: what this subscription will deliver.
    pub fn acknowledgement(&self) -> Value {
        let mut agreed = Map::new();
        for (name, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                agreed.insert(name.into(), json!(true));
            }
        }
        if !self.uris.is_empty() {
            let mut uris: Vec<&String> = self.uris.iter().collect();
            uris.sort();
            agreed.insert("resourceSubscriptions".into(), json!(uris));
        }
        jsonrpc::notification_message(
            "notifications/subscriptions/acknowledged",
            json!({ "_meta": self.meta(), "notifications": agreed }),
        )
    }

    /// The notification a change becomes on this subscription, if it opted in to it.
    pub fn deliver(&self, change: &TenantBroadcast) -> Option<Value> {
        let (method, mut params) = match change {
            TenantBroadcast::ListChanged(list) => {
                let wanted = match *list {
                    "tools" => self.tools,
                    "prompts" => self.prompts,
                    "resources" => self.resources,
                    _ => false,
                };
                if !wanted {
                    return None;
                }
                (format!("notifications/{list}/list_changed"), json!({}))
            }
            TenantBroadcast::ResourceUpdated(uri) => {
                if !self.uris.contains(uri) {
                    return None;
                }
                (
                    "notifications/resources/updated".into(),
                    json!({ "uri": uri }),
                )
            }
        };
        params["_meta"] = self.meta();
        Some(jsonrpc::notification_message(&method, params))
    }

    /// After falling behind (changes were missed): every list it follows may have changed, and
    /// every resource it follows may have been updated.
    pub fn catch_up(&self) -> Vec<Value> {
        let mut changes: Vec<TenantBroadcast> = LISTS
            .into_iter()
            .map(TenantBroadcast::ListChanged)
            .collect();
        changes.extend(
            self.uris
                .iter()
                .cloned()
                .map(TenantBroadcast::ResourceUpdated),
        );
        changes.iter().filter_map(|c| self.deliver(c)).collect()
    }

    /// What ends the subscription when the server tears it down: `notifications/cancelled`
    /// naming the listen request (a MUST of the cancellation page), then the response that
    /// ends it gracefully (the subscriptions page's SHOULD).
    pub fn teardown(&self, reason: &str) -> [Value; 2] {
        let cancelled = jsonrpc::notification_message(
            "notifications/cancelled",
            json!({ "requestId": self.id.to_value(), "reason": reason, "_meta": self.meta() }),
        );
        [cancelled, self.closing()]
    }

    /// The response that ends the subscription gracefully.
    fn closing(&self) -> Value {
        let mut result = Map::new();
        result.insert("resultType".into(), json!("complete"));
        stamp_server_info(&self.env, &mut result);
        if let Some(Value::Object(meta)) = result.get_mut("_meta") {
            meta.insert(META_SUBSCRIPTION_ID.into(), self.id.to_value());
        }
        jsonrpc::result_message(&self.id, Value::Object(result))
    }
}
