//! mcp-harbor: a multi-tenant hosted Model Context Protocol server.
//!
//! - `protocol`: pure JSON-RPC and MCP types and rules (no I/O)
//! - `session`: the session state machine, its actor, and the per-tenant supervisor
//! - `transport`: the HTTP edge (Streamable HTTP and the legacy HTTP+SSE transport)
//! - `catalog`: what tenants serve (built-in `reference` and `demo` catalogs)
//! - `eventlog`: SSE event storage for resumable streams
//! - `tenant`, `config`, `telemetry`, `app`: wiring

pub mod admin;
pub mod app;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod eventlog;
pub mod protocol;
pub mod session;
pub mod store;
pub mod telemetry;
pub mod tenant;
pub mod tools;
pub mod transport;

pub use app::Application;
pub use config::Config;
