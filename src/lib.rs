//! mcp-harbor: a multi-tenant hosted Model Context Protocol server.
//!
//! - `protocol`: pure JSON-RPC and MCP types and rules (no I/O)
//! - `session`: sessions of the session-era revisions: their state machine, actor, per-tenant
//!   supervisor, and the one front door the HTTP edge reaches them through (`Sessions`)
//! - `stateless`: the stateless 2026-07-28 revision (no session): discovery, multi round-trip
//!   requests with sealed `requestState`, `subscriptions/listen`
//! - `transport`: the HTTP edge (Streamable HTTP, the legacy HTTP+SSE transport, 2026-07-28)
//! - `catalog`: what tenants serve (built-in `reference` and `demo` catalogs, published entries)
//! - `tools`: tool backends (webhook tools)
//! - `cluster`: session state shared between replicas (event log, snapshots, leases, bus)
//! - `store`: what is kept in PostgreSQL or SQLite
//! - `request`: the context of one request (who, which revision, a port back to the client)
//! - `methods`: the handling of MCP methods that need no session
//! - `elicitation`: URL-mode elicitations (a tool asks the user for a secret on the platform's page)
//! - `auth`, `oauth`: tokens, keys and sealing; each tenant's authorization server
//! - `admin`: the admin API; `cli`: its command line
//! - `egress`: where outgoing calls (webhooks, OAuth fetches) may go
//! - `observe`: traces, metrics and logs (OpenTelemetry, Prometheus), connection counting
//! - `server`: assembling the application: startup, routes, HTTPS, memory settings
//! - `tenant`, `config`, `reseal`: wiring

pub mod admin;
pub mod auth;
pub mod catalog;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod egress;
pub mod elicitation;
pub mod methods;
pub mod oauth;
pub mod observe;
pub mod protocol;
pub mod request;
pub mod reseal;
pub mod server;
pub mod session;
pub mod stateless;
pub mod store;
pub mod tenant;
pub mod tools;
pub mod transport;
pub mod upstream;

pub use config::Config;
pub use server::app::Application;

/// Maps and sets on the hot path: keyed by ids this server made, tool names of the tenant's
/// catalog or a session's own request ids (a few at a time), so foldhash (randomly seeded per
/// map, several times cheaper than the default SipHash on short keys) instead of SipHash.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
pub type FastSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;

/// A header's text when it is all ASCII: what `HeaderValue::to_str` gives (a header value holds
/// no control character but tab, so visible ASCII is ASCII), checked a word at a time where
/// `to_str` checks a byte at a time. On the request path: a bearer token is long (that loop was
/// 6k of the 6.4k instructions of authenticating with a remembered token), and the session id,
/// Host and version headers are read on every request.
pub fn header_text(value: &actix_web::http::header::HeaderValue) -> Option<&str> {
    std::str::from_utf8(value.as_bytes())
        .ok()
        .filter(|text| text.is_ascii())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_quick_header_text_agrees_with_to_str() {
        use actix_web::http::header::HeaderValue;
        let long = format!("Bearer {}", "eyJhbGciOiJFUzI1NiJ9.".repeat(40));
        let values: [&[u8]; 7] = [
            b"Bearer abc.def.ghi",
            b"Bearer\tabc",
            b"",
            long.as_bytes(),
            b"Bearer caf\xc3\xa9",
            b"Bearer \x80\x81",
            b"Bearer ~!@#$%^&*()_+{}|:<>?",
        ];
        for bytes in values {
            let value = HeaderValue::from_bytes(bytes).unwrap();
            assert_eq!(super::header_text(&value), value.to_str().ok(), "{bytes:?}");
        }
        assert_eq!(
            super::header_text(&HeaderValue::from_static("Bearer t")),
            Some("Bearer t")
        );
        assert_eq!(
            super::header_text(&HeaderValue::from_bytes(b"Bearer \xff").unwrap()),
            None
        );
    }
}
