//! Pure protocol code: JSON-RPC framing, MCP revisions, cursors and log levels. No I/O.

pub mod jsonrpc;
pub mod mcp;
pub mod version;

pub use jsonrpc::{Message, Notification, Payload, Request, RequestId, Response, RpcError};
pub use version::ProtocolVersion;
