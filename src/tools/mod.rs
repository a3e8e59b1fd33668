//! Tools whose backend lives outside the server.
//!
//! - `webhook`: a tool answered by the tenant's own HTTPS endpoint, called with a Standard
//!   Webhooks signature, which may ask the MCP client for input (elicitation, sampling) between
//!   rounds.
//! - `egress`: where those calls may go (public addresses only, unless private egress is allowed
//!   for development).

pub mod egress;
pub mod webhook;
