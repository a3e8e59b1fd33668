//! Pure protocol code: JSON-RPC framing, MCP revisions, cursors and log levels, the request
//! metadata and header rules of the stateless revision. No I/O.

pub mod jsonrpc;
pub mod mcp;
pub mod meta;
mod read;
pub mod schema;
pub mod stateless;
pub mod version;

pub use jsonrpc::{Message, Notification, Payload, Request, RequestId, Response, RpcError};
pub use version::ProtocolVersion;

/// `s` with its `%XX` escapes decoded; `None` when an escape is malformed or the result is not
/// UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            // Two hex digits: `from_str_radix` alone would also take a sign ("%+f").
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?)
                .ok()
                .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
