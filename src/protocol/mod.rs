//! Pure protocol code: JSON-RPC framing, MCP revisions, cursors and log levels, the request
//! metadata and header rules of the stateless revision. No I/O.

pub mod jsonrpc;
pub mod mcp;
pub mod modern;
mod read;
pub mod version;

pub use jsonrpc::{Message, Notification, Payload, Request, RequestId, Response, RpcError};
pub use version::ProtocolVersion;
