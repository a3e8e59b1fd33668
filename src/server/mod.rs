//! Assembling the server: the application (`app`: stores, shared state, tenants, routes, the
//! listener and the drain), the route templates its HTTP spans are named by (`http_route`),
//! HTTPS with certificate reloading (`tls`) and the process's memory settings (`memory`).
//! Nothing below imports it.

pub mod app;
pub mod http_route;
pub mod memory;
pub mod tls;
