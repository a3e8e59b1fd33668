//! Application startup: builds tenants and their supervisors from configuration, binds the
//! listener (port 0 picks a free one) and serves the routes. Tests build an `Application` and talk
//! HTTP to it.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix::Actor;
use actix_web::dev::Server;
use actix_web::{web, App, HttpResponse, HttpServer};

use crate::catalog::{CatalogHandle, TenantCatalog};
use crate::config::Config;
use crate::eventlog::{EventLog, InMemoryEventLog};
use crate::session::supervisor::StopAll;
use crate::session::{SessionLimits, SessionSettings, TenantSessions, TenantSupervisor};
use crate::tenant::{TenantHandle, TenantRegistry};
use crate::transport::{self, EdgePolicy};

pub struct Application {
    port: u16,
    host: String,
    server: Server,
    tenants: TenantRegistry,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("could not bind {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("invalid tenant configuration: {0}")]
    Tenant(String),
}

impl Application {
    /// Builds everything and binds the listener; call from inside an actix system.
    pub fn build(config: Config) -> Result<Application, StartError> {
        let settings = Arc::new(SessionSettings {
            page_size: config.sessions.page_size,
            sse_retry_ms: config.sessions.sse_retry_ms,
            ..SessionSettings::default()
        });
        let limits = SessionLimits {
            max_sessions: config.sessions.max_per_tenant,
            idle_timeout: Duration::from_secs_f64(config.sessions.idle_timeout_secs),
        };
        let log: Arc<dyn EventLog> =
            Arc::new(InMemoryEventLog::new(config.sessions.event_log_capacity));
        let tenants = TenantRegistry::default();
        for t in &config.tenants {
            let catalog = CatalogHandle::new(
                TenantCatalog::from_builtin_names(&t.catalogs).map_err(StartError::Tenant)?,
            );
            let slug: Arc<str> = t.slug.as_str().into();
            let sessions = Arc::new(TenantSessions::new(
                slug.clone(),
                catalog.clone(),
                log.clone(),
                settings.clone(),
                limits.clone(),
            ));
            let supervisor = TenantSupervisor::new(sessions.clone()).start();
            tenants.insert(TenantHandle {
                slug,
                catalog,
                supervisor,
                sessions,
            });
        }

        let addr = format!("{}:{}", config.server.host, config.server.port);
        let listener = TcpListener::bind(&addr).map_err(|source| StartError::Bind {
            addr: addr.clone(),
            source,
        })?;
        let port = listener
            .local_addr()
            .map_err(|source| StartError::Bind { addr, source })?
            .port();
        let edge = web::Data::new(EdgePolicy::from_config(&config.server));
        let registry = web::Data::new(tenants.clone());
        let mut server = HttpServer::new(move || {
            App::new()
                .app_data(edge.clone())
                .app_data(registry.clone())
                .route("/healthz", web::get().to(healthz))
                .route("/readyz", web::get().to(healthz))
                // /t/{tenant}/mcp (Streamable HTTP), /t/{tenant}/sse and /t/{tenant}/messages
                // (legacy HTTP+SSE), routed without a pattern matcher.
                .default_service(web::to(transport::tenant_endpoint))
        })
        .on_connect(|conn, _| {
            // Nagle would hold the second half of a streamed reply for the peer's delayed ACK.
            if let Some(tcp) = conn.downcast_ref::<actix_web::rt::net::TcpStream>() {
                let _ = tcp.set_nodelay(true);
            }
        })
        .disable_signals()
        .shutdown_timeout(5)
        .backlog(4096)
        .max_connection_rate(1024);
        if config.server.workers > 0 {
            server = server.workers(config.server.workers);
        }
        let server = server
            .listen(listener)
            .map_err(|source| StartError::Bind {
                addr: format!("port {port}"),
                source,
            })?
            .run();
        Ok(Application {
            port,
            host: config.server.host.clone(),
            server,
            tenants,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The MCP endpoint of a tenant.
    pub fn mcp_url(&self, tenant: &str) -> String {
        format!("http://{}:{}/t/{tenant}/mcp", self.host, self.port)
    }

    pub fn tenants(&self) -> &TenantRegistry {
        &self.tenants
    }

    pub fn server_handle(&self) -> actix_web::dev::ServerHandle {
        self.server.handle()
    }

    /// Serves until SIGTERM or Ctrl-C, then shuts down gracefully: every session ends (so its SSE
    /// streams close and clients reconnect elsewhere), in-flight responses drain, then it returns.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let handle = self.server.handle();
        let tenants = self.tenants.clone();
        actix_rt::spawn(async move {
            shutdown_signal().await;
            tracing::info!("shutting down: ending sessions, draining connections");
            for slug in tenants.slugs() {
                if let Some(tenant) = tenants.get(&slug) {
                    let _ = tenant.supervisor.send(StopAll).await;
                }
            }
            handle.stop(true).await;
        });
        self.server.await
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(serde_json::json!({ "status": "ok" }))
}
