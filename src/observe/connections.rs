//! Open HTTP connections on the main port, in the `mcp_harbor_http_connections_open` gauge
//! (Prometheus and OTLP): each connection holds an [`Open`] in its extensions
//! (`HttpServer::on_connect`) for as long as it lives.

/// One open connection, counted from creation to drop.
pub struct Open(());

impl Open {
    pub fn new() -> Self {
        crate::observe::metrics::global().http_connections(1);
        Open(())
    }
}

impl Default for Open {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        crate::observe::metrics::global().http_connections(-1);
    }
}
