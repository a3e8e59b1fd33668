//! Assembling the server: the application (`app`: stores, shared state, tenants, routes, the
//! listener and the drain), HTTPS with certificate reloading (`tls`), deadlines on request
//! bodies (`body_deadline`) and the process's memory settings (`memory`).

pub mod app;
pub mod body_deadline;
pub mod memory;
pub mod tls;
