//! Tools whose backend lives outside the server.
//!
//! - `webhook`: a tool answered by the tenant's own HTTPS endpoint, called with a Standard
//!   Webhooks signature, which may ask the MCP client for input (elicitation, sampling) between
//!   rounds.
//!
//! Where those calls may go is `crate::egress`.

pub mod webhook;
