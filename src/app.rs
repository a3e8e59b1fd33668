//! Application startup: builds tenants and their supervisors from configuration, binds the
//! listener (port 0 picks a free one) and serves the routes. Tests build an `Application` and talk
//! HTTP to it.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::{web, App, HttpResponse, HttpServer};

use crate::admin::{self, AdminAuth, AdminState};
use crate::config::Config;
use crate::eventlog::{EventLog, InMemoryEventLog};
use crate::session::supervisor::StopAll;
use crate::session::{SessionLimits, SessionSettings};
use crate::store::{
    now_millis, SqlStore, StoreError, TenantLimits, TenantRecord, TenantStatus, TenantStore,
};
use crate::tenant::{TenantDirectory, TenantRegistry};
use crate::transport::{self, EdgePolicy};

pub struct Application {
    port: u16,
    host: String,
    server: Server,
    tenants: TenantRegistry,
    generated_admin_token: Option<String>,
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
    #[error("storage: {0}")]
    Store(#[from] StoreError),
    #[error("could not create the data directory {dir}: {source}")]
    DataDir { dir: String, source: std::io::Error },
}

/// Connects to the configured database (creating the embedded SQLite file's directory) and
/// applies migrations when configured to.
pub async fn open_store(config: &Config) -> Result<SqlStore, StartError> {
    if config.storage.database_url.is_empty() {
        std::fs::create_dir_all(&config.storage.data_dir).map_err(|source| {
            StartError::DataDir {
                dir: config.storage.data_dir.clone(),
                source,
            }
        })?;
    }
    let store = SqlStore::connect(&config.storage.url(), config.storage.max_connections).await?;
    if config.storage.migrate_on_start {
        store.migrate().await?;
    }
    Ok(store)
}

/// Creates the configured tenants that do not exist yet (an operator's later changes win).
async fn seed_tenants(store: &SqlStore, config: &Config) -> Result<(), StoreError> {
    for t in &config.tenants {
        if store.get_tenant(&t.slug).await?.is_none() {
            let now = now_millis();
            let record = TenantRecord {
                slug: t.slug.clone(),
                display_name: t.slug.clone(),
                status: TenantStatus::Active,
                catalogs: t.catalogs.clone(),
                limits: TenantLimits::default(),
                created_at: now,
                updated_at: now,
            };
            match store.insert_tenant(&record).await {
                Ok(()) | Err(StoreError::Conflict) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

impl Application {
    /// Builds everything and binds the listener; call from inside an actix system.
    pub async fn build(config: Config) -> Result<Application, StartError> {
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

        let store = open_store(&config).await?;
        let (admin_auth, generated_admin_token) =
            AdminAuth::init(&store, &config.admin.token).await?;
        seed_tenants(&store, &config).await?;
        // Webhook calls: no redirects (a signed POST must not be re-sent elsewhere).
        let allow_private = config.admin.allow_http_loopback_webhooks;
        let http = if allow_private {
            crate::tools::webhook::http_client()
        } else {
            crate::tools::egress::public_http_client()
        }
        .map_err(|e| StartError::Tenant(format!("HTTP client: {e}")))?;
        let tenants = TenantRegistry::default();
        let directory = TenantDirectory::new(
            store.clone(),
            tenants.clone(),
            log,
            settings,
            limits,
            http,
            allow_private,
        );
        directory.load_all().await?;

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
        let admin_state = web::Data::new(AdminState {
            directory,
            allow_http_loopback_webhooks: config.admin.allow_http_loopback_webhooks,
        });
        let admin_auth = web::Data::new(admin_auth);
        let ready_store = web::Data::new(store.clone());
        let mut server = HttpServer::new(move || {
            App::new()
                .app_data(edge.clone())
                .app_data(registry.clone())
                .app_data(admin_state.clone())
                .app_data(admin_auth.clone())
                .app_data(ready_store.clone())
                .route("/healthz", web::get().to(healthz))
                .route("/readyz", web::get().to(readyz))
                .configure(admin::configure)
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
            generated_admin_token,
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

    /// The admin token generated at this start (first start without a configured token): to be
    /// shown to the operator once.
    pub fn generated_admin_token(&self) -> Option<&str> {
        self.generated_admin_token.as_deref()
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

/// Ready when the database answers.
async fn readyz(store: web::Data<SqlStore>) -> HttpResponse {
    if store.ping().await {
        HttpResponse::Ok().json(serde_json::json!({ "status": "ready" }))
    } else {
        HttpResponse::ServiceUnavailable()
            .json(serde_json::json!({ "status": "database unreachable" }))
    }
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(serde_json::json!({ "status": "ok" }))
}
