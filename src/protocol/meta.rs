//! The keys of `params._meta` the stateless revision (2026-07-28) defines, and their wire form:
//! what the JSON-RPC reader sets apart from the rest of a request's params while it reads.
//! Pure: no I/O.

use serde_json::{Map, Value};

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The keys of `params._meta` this revision defines, as the JSON-RPC parser reads them: apart
/// from the rest of the params (`jsonrpc::parse_payload` fills this while it reads the body),
/// so a stateless request's `_meta` costs no map and no copies of its long key names. A field
/// is `None` when the key was absent. `clientInfo` is checked as JSON like the rest of the body
/// and not kept: nothing reads the client's self-description.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WireMeta {
    pub protocol_version: Option<Value>,
    pub client_capabilities: Option<Value>,
    pub log_level: Option<Value>,
}

/// Where a key of `params._meta` goes.
pub(crate) enum MetaKey {
    ProtocolVersion,
    ClientCapabilities,
    ClientInfo,
    LogLevel,
    /// Any other key stays in `params._meta`.
    Other,
}

impl MetaKey {
    pub(crate) fn of(key: &str) -> MetaKey {
        match key {
            META_PROTOCOL_VERSION => MetaKey::ProtocolVersion,
            META_CLIENT_CAPABILITIES => MetaKey::ClientCapabilities,
            META_CLIENT_INFO => MetaKey::ClientInfo,
            META_LOG_LEVEL => MetaKey::LogLevel,
            _ => MetaKey::Other,
        }
    }
}

impl WireMeta {
    /// The slot a key of this revision is kept in (`None`: `clientInfo`, not kept).
    pub(crate) fn slot(&mut self, key: &MetaKey) -> Option<&mut Option<Value>> {
        match key {
            MetaKey::ProtocolVersion => Some(&mut self.protocol_version),
            MetaKey::ClientCapabilities => Some(&mut self.client_capabilities),
            MetaKey::LogLevel => Some(&mut self.log_level),
            MetaKey::ClientInfo | MetaKey::Other => None,
        }
    }

    /// Moves this revision's keys out of `params._meta` when it is an object (dropping
    /// `_meta` if nothing else is left in it): what the parser does while reading, done to a
    /// message already read as a `Value`. `None` when there is no `_meta` object.
    pub fn split(params: &mut Map<String, Value>) -> Option<WireMeta> {
        let Some(Value::Object(meta)) = params.get_mut("_meta") else {
            return None;
        };
        let mut wire = WireMeta::default();
        meta.retain(|key, value| match MetaKey::of(key) {
            MetaKey::Other => true,
            MetaKey::ClientInfo => false,
            known => {
                if let Some(slot) = wire.slot(&known) {
                    *slot = Some(std::mem::take(value));
                }
                false
            }
        });
        if meta.is_empty() {
            params.remove("_meta");
        }
        Some(wire)
    }

    /// Puts the keys back into `params._meta` (as a client writes them).
    pub fn restore(&self, params: &mut Map<String, Value>) {
        let meta = params
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            for (key, value) in [
                (META_PROTOCOL_VERSION, &self.protocol_version),
                (META_CLIENT_CAPABILITIES, &self.client_capabilities),
                (META_LOG_LEVEL, &self.log_level),
            ] {
                if let Some(v) = value {
                    meta.insert(key.into(), v.clone());
                }
            }
        }
    }
}
