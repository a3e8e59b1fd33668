//! Session ids and the other ids that become shared-state keys: `Mcp-Session-Id` as the
//! transport reads it, a tenant slug and a replica id, turned into Redis key segments
//! (`cluster::redis::segment`); leases as stored (`lease_value` / `parse_lease`); stream entry
//! ids (`parse_entry_id`).
//!
//! Input: `tenant \0 session \0 replica-or-lease`, each as raw header bytes.
//!
//! Invariants:
//! - a segment never contains `:`, and decodes back to exactly its id (so `tenant:session` keys
//!   of different (tenant, session) pairs never collide: one tenant cannot reach another's
//!   session state by choosing its session id);
//! - a lease formats and parses back to itself (any replica id, any token), and a stored value
//!   that parses re-formats to the same text when its token is canonical;
//! - a stream entry id parses only as `0-<seq>`, to that seq;
//! - a session id made with a route label the config accepts (`session::id`,
//!   `config::check_session_route`) is a valid header value, needs no escaping as a key segment
//!   and names its label back; in any id from a client, a route is only found as
//!   `<label>.<32 lowercase hex>`.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use mcp_harbor::cluster::redis::{lease_value, parse_entry_id, parse_lease, segment};
use mcp_harbor::cluster::Lease;
use mcp_harbor::config::check_session_route;
use mcp_harbor::session::id::{new_session_id, route_of};

/// The inverse of `segment`: `%25` → `%`, `%3A` → `:`; `None` for anything `segment` never
/// writes.
fn unsegment(s: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let esc = rest.get(i..i + 3)?;
        out.push(match esc {
            "%25" => '%',
            "%3A" => ':',
            _ => return None,
        });
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// An id as the transport gets it from a header (visible ASCII, or refused).
fn header_id(bytes: &[u8]) -> Option<&str> {
    let value = actix_web::http::header::HeaderValue::from_bytes(bytes).ok()?;
    // `to_str` borrows the value; re-borrow from the input, which is the same bytes.
    value.to_str().ok()?;
    std::str::from_utf8(bytes).ok()
}

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |&b| b == 0);
    let (tenant, session, third) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    // Segments: any text (a tenant slug, a session id from a header, a replica id).
    for id in [tenant, session, third] {
        let Ok(id) = std::str::from_utf8(id) else {
            continue;
        };
        let seg = segment(id);
        assert!(!seg.contains(':'), "{seg:?}");
        assert_eq!(unsegment(&seg).as_deref(), Some(id), "{id:?} → {seg:?}");
    }
    if let (Some(t), Some(s)) = (header_id(tenant), header_id(session)) {
        let key = format!("harbor:sess:{}:{}", segment(t), segment(s));
        let fields: Vec<&str> = key.split(':').collect();
        assert_eq!(fields.len(), 4, "{key:?}");
        assert_eq!(
            (
                unsegment(fields[2]).as_deref(),
                unsegment(fields[3]).as_deref()
            ),
            (Some(t), Some(s))
        );
    }

    // Session ids with a route.
    if let Some(id) = header_id(session) {
        if let Some(route) = route_of(id) {
            assert_eq!(check_session_route(route), Ok(()));
            let random = id.strip_prefix(route).and_then(|r| r.strip_prefix('.'));
            assert!(
                random
                    .is_some_and(|r| r.len() == 32
                        && r.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))),
                "{id:?}"
            );
        }
    }
    if let Ok(label) = std::str::from_utf8(third) {
        if check_session_route(label).is_ok() {
            let id = new_session_id(Some(label));
            assert_eq!(header_id(id.as_bytes()), Some(id.as_str()));
            assert_eq!(segment(&id), id);
            assert_eq!(route_of(&id), Some(label));
        }
    }

    // Leases.
    if let Ok(text) = std::str::from_utf8(third) {
        let token = data.iter().fold(0u64, |h, &b| h.rotate_left(5) ^ b as u64);
        let lease = Lease {
            replica: Arc::from(text),
            token,
        };
        assert_eq!(parse_lease(&lease_value(&lease)), Ok(lease));
        if let Ok(parsed) = parse_lease(text) {
            let (_, token_text) = text.rsplit_once('|').unwrap();
            if token_text == parsed.token.to_string() {
                assert_eq!(lease_value(&parsed), text);
            }
        }
        // Stream entry ids.
        if let Ok(seq) = parse_entry_id(text) {
            assert!(text.starts_with("0-"));
            assert_eq!(text[2..].parse::<u64>(), Ok(seq));
        }
        assert_eq!(parse_entry_id(&format!("0-{token}")), Ok(token));
    }
});
