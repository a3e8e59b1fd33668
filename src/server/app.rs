//! Application startup: picks the shared-state backends (in-process, or Redis for several
//! replicas), binds the listener (port 0 picks a free one), starts tenants and their supervisors,
//! keeps this replica's heartbeat and bus subscription running, and serves the routes. On SIGTERM
//! it drains: not ready, no new sessions, running requests finish, sessions are handed over.
//! Tests build an `Application` and talk HTTP to it.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::{web, App, HttpResponse, HttpServer};

use crate::admin::{self, AdminAuth, AdminState};
use crate::cluster::{Backends, ReplicaInfo, Retention};
use crate::config::Config;
use crate::session::supervisor::HandOverAll;
use crate::session::{Replica, SessionLimits, SessionSettings};
use crate::store::{
    now_millis, SqlStore, StoreError, TenantLimits, TenantRecord, TenantStatus, TenantStore,
};
use crate::tenant::{TenantDirectory, TenantRegistry};
use crate::transport::forward::Forwarder;
use crate::transport::{self, EdgePolicy};

pub struct Application {
    port: u16,
    scheme: &'static str,
    host: String,
    server: Server,
    tenants: TenantRegistry,
    replica: Arc<Replica>,
    drain_grace: Duration,
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
    #[error("shared session state: {0}")]
    Shared(#[from] crate::cluster::BackendError),
    #[error("authorization: {0}")]
    Auth(String),
    #[error("HTTPS: {0}")]
    Tls(String),
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
    let store = SqlStore::connect_with(
        &config.storage.url(),
        config.storage.max_connections,
        Duration::from_millis(config.storage.acquire_timeout_ms.max(100)),
    )
    .await?;
    if config.storage.migrate_on_start {
        store.migrate().await?;
    }
    Ok(store)
}

/// Creates the configured tenants that do not exist yet (an operator's later changes win).
async fn seed_tenants(store: &impl TenantStore, config: &Config) -> Result<(), StoreError> {
    for t in &config.tenants {
        if store.get_tenant(&t.slug).await?.is_none() {
            let now = now_millis();
            let record = TenantRecord {
                slug: t.slug.clone(),
                display_name: t.slug.clone(),
                status: TenantStatus::Active,
                catalogs: t.catalogs.clone(),
                limits: TenantLimits::default(),
                auth: crate::store::TenantAuth::None,
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
            stream_buffer_bytes: config.sessions.stream_buffer_bytes,
            client_request_timeout: std::time::Duration::from_secs(
                config.sessions.client_request_timeout_secs,
            ),
            ..SessionSettings::default()
        });
        let limits = SessionLimits {
            max_sessions: config.sessions.max_per_tenant,
            idle_timeout: Duration::from_secs_f64(config.sessions.idle_timeout_secs),
        };

        let addr = format!("{}:{}", config.server.host, config.server.port);
        let listener = TcpListener::bind(&addr).map_err(|source| StartError::Bind {
            addr: addr.clone(),
            source,
        })?;
        let port = listener
            .local_addr()
            .map_err(|source| StartError::Bind { addr, source })?
            .port();

        let retention = Retention {
            max_events: config.sessions.event_log_capacity,
            max_age: Duration::from_secs(config.sessions.event_log_max_age_secs),
        };
        let backends = if config.redis.url.is_empty() {
            Backends::in_process(retention)
        } else {
            let tls = crate::cluster::redis::RedisTls::from_config(&config.redis)?;
            Backends::redis_with(&config.redis.url, &tls, &config.redis.key_prefix, retention)
                .await?
        };
        let replica_id = if config.cluster.replica_id.is_empty() {
            format!("r-{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
        } else {
            config.cluster.replica_id.clone()
        };
        let scheme = if config.tls.enabled() {
            "https"
        } else {
            "http"
        };
        let advertise_url = if config.cluster.advertise_url.is_empty() {
            if !config.redis.url.is_empty()
                && matches!(config.server.host.as_str(), "0.0.0.0" | "::" | "[::]")
            {
                // Harmless for a lone replica; with others they would forward to themselves.
                tracing::warn!("cluster.advertise_url is not set and server.host is {}: other replicas sharing this Redis cannot reach this one (set it to this replica's own URL)", config.server.host);
            }
            format!("{scheme}://{}:{port}", config.server.host)
        } else {
            config.cluster.advertise_url.clone()
        };
        let liveness_ttl = Duration::from_millis(config.cluster.liveness_ttl_ms);
        let replica = Arc::new(Replica::new(
            ReplicaInfo {
                id: replica_id.as_str().into(),
                url: advertise_url,
            },
            backends,
            liveness_ttl,
            Some(config.cluster.session_route.clone()).filter(|r| !r.is_empty()),
        ));
        // Alive before serving, so no other replica takes this one's sessions for dead.
        replica
            .backends
            .leases
            .heartbeat(&replica.info, liveness_ttl)
            .await?;
        spawn_heartbeat(
            replica.clone(),
            Duration::from_millis(config.cluster.heartbeat_ms),
        );

        let store = open_store(&config).await?;
        // Every outgoing call to a place a tenant or client names goes through this one client.
        let egress = crate::egress::Egress::new(config.egress_allows_private())
            .map_err(|e| StartError::Tenant(format!("HTTP client: {e}")))?;
        let auth_service = {
            use secrecy::ExposeSecret;
            let specs: Vec<&str> = config
                .auth
                .sealing_keys
                .iter()
                .map(|k| k.expose_secret())
                .collect();
            let data_dir = std::path::Path::new(&config.storage.data_dir);
            let sealer = crate::auth::Sealer::from_config_or_file(&specs, data_dir)
                .map(Arc::new)
                .map_err(|e| StartError::Auth(format!("auth.sealing_keys: {e}")))?;
            if specs.is_empty() && !config.storage.database_url.is_empty() {
                tracing::warn!("auth.sealing_keys is not set: secrets are sealed with a key in this replica's data directory; replicas sharing a database need the same configured key");
            }
            Arc::new(
                crate::auth::AuthService::new(
                    store.clone(),
                    sealer,
                    config.auth.clone(),
                    egress.clone(),
                    config
                        .server
                        .trusted_proxy_nets()
                        .map_err(StartError::Auth)?,
                )
                .map_err(|e| StartError::Auth(e.to_string()))?,
            )
        };
        auth_service.spawn_sweeper();
        let sealer = auth_service.sealer.clone();
        // Where users enter the secrets tools ask for: the configured public URL, else this
        // listener (development).
        let elicitation_base = if config.auth.public_url.is_empty() {
            let host = match config.server.host.as_str() {
                "0.0.0.0" | "::" => {
                    tracing::warn!("auth.public_url is not set: elicitation pages are linked at localhost; set it to the URL users reach this server at");
                    "localhost"
                }
                host => host,
            };
            let host = if host.contains(':') {
                format!("[{host}]")
            } else {
                host.to_string()
            };
            format!("{scheme}://{host}:{port}")
        } else {
            config.auth.public_url.clone()
        };
        let elicitations = Arc::new(crate::elicitation::Elicitations::new(
            store.clone(),
            auth_service.clone(),
            elicitation_base,
            Duration::from_secs(config.auth.elicitation_ttl_secs),
        ));
        elicitations.spawn_sweeper();
        let elicitation_data = web::Data::from(elicitations.clone());
        let auth_data = web::Data::from(auth_service.clone());
        let oauth_state = web::Data::new(crate::oauth::OAuthState::new(
            replica.backends.quotas.clone(),
        ));
        let (admin_auth, generated_admin_token) =
            AdminAuth::init(&store, &config.admin.token).await?;
        // Configured tenants name built-in catalogs that must exist (checked here: the
        // configuration does not know the catalogs).
        for t in &config.tenants {
            crate::catalog::TenantCatalog::builtin(&t.catalogs)
                .map_err(|e| StartError::Tenant(format!("tenant {:?}: {e}", t.slug)))?;
        }
        seed_tenants(&store, &config).await?;
        let tenants = TenantRegistry::default();
        let directory = TenantDirectory::new(
            store.clone(),
            tenants.clone(),
            replica.clone(),
            settings,
            limits,
            egress.clone(),
            sealer.clone(),
        )
        .with_elicitations(elicitations)
        .with_auth(auth_service)
        .with_webhook_slots(config.webhooks.max_in_flight_per_tenant);
        directory.load_all().await?;
        actix_rt::spawn(directory.clone().listen());
        if config.cluster.resync_secs > 0 {
            actix_rt::spawn(
                directory
                    .clone()
                    .reconcile_every(Duration::from_secs(config.cluster.resync_secs)),
            );
        }
        let forwarder = web::Data::new(
            Forwarder::new(&replica_id, directory.sealer.clone())
                .map_err(|e| StartError::Tenant(format!("HTTP client: {e}")))?,
        );

        let edge = web::Data::new(EdgePolicy::from_config(&config.server));
        let write_timeout = Duration::from_secs_f64(config.server.write_timeout_secs);
        let stateless_settings = web::Data::new(crate::stateless::StatelessSettings {
            request_state_ttl: Duration::from_secs(config.modern.request_state_ttl_secs),
            cache_ttl_ms: config.modern.cache_ttl_ms,
            page_size: config.sessions.page_size,
            ..crate::stateless::StatelessSettings::default()
        });
        let registry = web::Data::new(tenants.clone());
        let directory_data = web::Data::new(directory.clone());
        let admin_state = web::Data::new(AdminState {
            directory,
            egress: egress.clone(),
            rotation: Arc::new(crate::reseal::Rotation::new(store.clone(), sealer)),
        });
        let admin_auth = web::Data::new(admin_auth);
        let ready = web::Data::new(Readiness {
            store: store.clone(),
            replica: replica.clone(),
        });
        let scope_replica = replica_id.clone();
        let metrics_token = {
            use secrecy::ExposeSecret;
            (!config.metrics.token.expose_secret().is_empty()).then(|| {
                web::Data::new(crate::observe::metrics::MetricsToken(
                    config.metrics.token.clone(),
                ))
            })
        };
        if !config.metrics.listen.is_empty() {
            let metrics_server = HttpServer::new(|| {
                App::new().route("/metrics", web::get().to(crate::observe::metrics::scrape))
            })
            .workers(1)
            .disable_signals()
            .bind(&config.metrics.listen)
            .map_err(|source| StartError::Bind {
                addr: config.metrics.listen.clone(),
                source,
            })?
            .run();
            actix_rt::spawn(metrics_server);
        }
        crate::observe::metrics::global().register_runtime();
        let mut server = HttpServer::new(move || {
            // Runs on each HTTP worker's thread: its runtime's tasks are counted in /metrics.
            crate::observe::metrics::global().register_runtime();
            let mut app = App::new();
            if let Some(token) = &metrics_token {
                app = app.app_data(token.clone()).route(
                    "/metrics",
                    web::get().to(crate::observe::metrics::scrape_with_token),
                );
            }
            app.wrap_fn(|req, srv| {
                use actix_web::dev::Service;
                use futures_util::future::Either;
                let route = crate::observe::metrics::route_group(req.path());
                // The HTTP server span (only when exporting traces): handlers see it as the
                // current span and hand it to the session actor with their message.
                let span =
                    crate::observe::telemetry::http_span(&req, crate::server::http_route::of);
                if span.is_none() {
                    // No span to enter and leave on every poll (traces are not exported, or
                    // this request was not sampled).
                    let response = srv.call(req);
                    return Either::Left(async move {
                        let response = response.await?;
                        crate::observe::metrics::global()
                            .http_request(route, response.status().as_u16());
                        Ok(response)
                    });
                }
                let response = span.in_scope(|| srv.call(req));
                let done = span.clone();
                Either::Right(span.instrument(async move {
                    let response = response.await?;
                    let status = response.status().as_u16();
                    crate::observe::telemetry::http_done(&done, status);
                    crate::observe::metrics::global().http_request(route, status);
                    Ok(response)
                }))
            })
            .app_data(edge.clone())
            .app_data(stateless_settings.clone())
            .app_data(registry.clone())
            .app_data(admin_state.clone())
            .app_data(admin_auth.clone())
            .app_data(directory_data.clone())
            .app_data(forwarder.clone())
            .app_data(ready.clone())
            .app_data(auth_data.clone())
            .app_data(oauth_state.clone())
            .app_data(elicitation_data.clone())
            // /t/{tenant}/mcp (Streamable HTTP), /t/{tenant}/sse and /t/{tenant}/messages
            // (legacy HTTP+SSE): first, the hot path is matched before anything else.
            .configure(|cfg| transport::configure(cfg, &scope_replica))
            .route("/healthz", web::get().to(healthz))
            .route("/readyz", web::get().to(readyz))
            .configure(admin::configure)
            // Each oauth tenant's authorization server and the discovery documents.
            .configure(crate::oauth::configure)
            // The pages where users enter secrets tools ask for.
            .configure(crate::oauth::elicitation_page::configure)
            .default_service(web::to(transport::not_found))
        })
        // Nagle would hold the second half of a streamed reply for the peer's delayed ACK: on
        // every accepted connection, HTTPS ones too (whose stream is not a bare TcpStream).
        .tcp_nodelay(true)
        .on_connect(move |_, extensions| {
            // Counted for as long as it is open (dropped with the connection).
            extensions.insert(crate::observe::connections::Open::new());
            // Read by the (vendored) HTTP/1 and HTTP/2 dispatchers: a client that takes none of
            // a response's bytes for this long loses the connection (HTTP/2: the stream).
            extensions.insert(actix_http::WriteTimeout {
                after: write_timeout,
                expired: crate::observe::metrics::write_timed_out,
            });
        })
        .disable_signals()
        .shutdown_timeout(config.cluster.drain_grace_secs.max(1))
        .backlog(4096)
        .max_connection_rate(1024);
        if config.server.workers > 0 {
            server = server.workers(config.server.workers);
        }
        let bind_err = |source| StartError::Bind {
            addr: format!("port {port}"),
            source,
        };
        let server = if config.tls.enabled() {
            let cert = crate::server::tls::ReloadingCert::new(
                std::path::Path::new(&config.tls.cert_path),
                std::path::Path::new(&config.tls.key_path),
            )
            .map_err(|e| StartError::Tls(e.to_string()))?;
            cert.watch(Duration::from_secs(config.tls.reload_secs));
            let tls = crate::server::tls::server_config(cert)
                .map_err(|e| StartError::Tls(e.to_string()))?;
            server.listen_rustls_0_23(listener, tls).map_err(bind_err)?
        } else {
            server.listen(listener).map_err(bind_err)?
        }
        .run();
        Ok(Application {
            port,
            scheme,
            host: config.server.host.clone(),
            server,
            tenants,
            replica,
            drain_grace: Duration::from_secs(config.cluster.drain_grace_secs),
            generated_admin_token,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The MCP endpoint of a tenant.
    pub fn mcp_url(&self, tenant: &str) -> String {
        format!(
            "{}://{}:{}/t/{tenant}/mcp",
            self.scheme, self.host, self.port
        )
    }

    pub fn tenants(&self) -> &TenantRegistry {
        &self.tenants
    }

    /// This replica (its id, shared-state backends, drain state).
    pub fn replica(&self) -> &Arc<Replica> {
        &self.replica
    }

    /// The admin token generated at this start (first start without a configured token): to be
    /// shown to the operator once.
    pub fn generated_admin_token(&self) -> Option<&str> {
        self.generated_admin_token.as_deref()
    }

    pub fn server_handle(&self) -> actix_web::dev::ServerHandle {
        self.server.handle()
    }

    /// A handle that drains this replica (as SIGTERM does) and stops it.
    pub fn drainer(&self) -> Drainer {
        Drainer {
            tenants: self.tenants.clone(),
            replica: self.replica.clone(),
            server: self.server.handle(),
            grace: self.drain_grace,
        }
    }

    /// Serves until SIGTERM or Ctrl-C, then drains (see `Drainer::drain`) and returns.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let drainer = self.drainer();
        actix_rt::spawn(async move {
            shutdown_signal().await;
            drainer.drain().await;
        });
        self.server.await
    }
}

/// Drains a replica: it reports not ready, refuses new sessions, lets running requests finish
/// (most of the grace period), tells SSE clients to reconnect, hands every session over
/// (snapshot written, lease released, so the next replica to see it restores it at once),
/// retires from the cluster and stops.
#[derive(Clone)]
pub struct Drainer {
    tenants: TenantRegistry,
    replica: Arc<Replica>,
    server: actix_web::dev::ServerHandle,
    grace: Duration,
}

impl Drainer {
    pub async fn drain(&self) {
        tracing::info!(replica = %self.replica.info.id, "draining: handing sessions over, then stopping");
        self.replica.start_draining();
        let deadline = tokio::time::Instant::now() + self.grace.mul_f64(0.7);
        let handovers = self
            .tenants
            .slugs()
            .into_iter()
            .filter_map(|slug| self.tenants.get(&slug))
            .map(|t| t.supervisor.send(HandOverAll { deadline }));
        futures_util::future::join_all(handovers).await;
        if let Err(e) = self
            .replica
            .backends
            .leases
            .retire(&self.replica.info.id)
            .await
        {
            tracing::warn!(error = %e, "could not retire this replica from the cluster");
        }
        self.server.stop(true).await;
    }
}

/// Keeps this replica alive in the cluster's eyes.
fn spawn_heartbeat(replica: Arc<Replica>, every: Duration) {
    actix_rt::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tick.tick().await;
            if replica.is_draining() {
                continue;
            }
            match replica
                .backends
                .leases
                .heartbeat(&replica.info, replica.liveness_ttl)
                .await
            {
                Ok(()) if failing => {
                    failing = false;
                    tracing::info!("heartbeat restored");
                }
                Ok(()) => {}
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "heartbeat failed; retrying");
                }
                Err(_) => {}
            }
        }
    });
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

/// What `/readyz` checks.
struct Readiness {
    store: SqlStore,
    replica: Arc<Replica>,
}

/// Ready when not draining and the database and shared state answer (both asked at once,
/// within 800 ms, so the answer comes before a probe's default 1 s timeout).
async fn readyz(ready: web::Data<Readiness>) -> HttpResponse {
    let unready = |status: &str| {
        HttpResponse::ServiceUnavailable().json(serde_json::json!({ "status": status }))
    };
    if ready.replica.is_draining() {
        return unready("draining");
    }
    let within = Duration::from_millis(800);
    let me = &ready.replica.info.id;
    let (db, shared) = futures_util::join!(
        tokio::time::timeout(within, ready.store.ping()),
        tokio::time::timeout(within, ready.replica.backends.leases.replica_url(me)),
    );
    if !matches!(db, Ok(true)) {
        return unready("database unreachable");
    }
    if !matches!(shared, Ok(Ok(_))) {
        return unready("shared session state unreachable");
    }
    HttpResponse::Ok().json(serde_json::json!({ "status": "ready" }))
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(serde_json::json!({ "status": "ok" }))
}
