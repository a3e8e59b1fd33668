//! Configuration: compiled-in defaults, then an optional TOML file, then `MCP_HARBOR__…`
//! environment variables (`MCP_HARBOR__SERVER__PORT=9000`), validated once at start.

use std::path::Path;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub sessions: SessionConfig,
    pub modern: ModernConfig,
    pub log: LogConfig,
    pub storage: StorageConfig,
    pub admin: AdminConfig,
    pub egress: EgressConfig,
    pub webhooks: WebhookConfig,
    pub redis: RedisConfig,
    pub cluster: ClusterConfig,
    pub auth: AuthConfig,
    pub tls: TlsConfig,
    pub metrics: MetricsConfig,
    pub telemetry: TelemetryConfig,
    /// Tenants created at start when they do not exist yet (the admin API manages them after).
    pub tenants: Vec<TenantConfig>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// `postgres://…` (production) or `sqlite://…`; empty means an SQLite file in `data_dir`.
    pub database_url: String,
    /// Where the embedded default keeps its SQLite file.
    pub data_dir: String,
    /// Apply migrations at start (otherwise run `mcp-harbor migrate`).
    pub migrate_on_start: bool,
    pub max_connections: u32,
    /// How long a query waits for a database connection before failing (503 upstream).
    pub acquire_timeout_ms: u64,
}

impl StorageConfig {
    /// The database to use: the configured URL, or the embedded SQLite file.
    pub fn url(&self) -> String {
        if self.database_url.is_empty() {
            format!(
                "sqlite://{}/mcp-harbor.db",
                self.data_dir.trim_end_matches('/')
            )
        } else {
            self.database_url.clone()
        }
    }
}

/// The Prometheus `/metrics` endpoint: on its own listener, or on the main port behind a bearer
/// token; with neither it is not served (never public by accident).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// `host:port` of a listener serving only `/metrics` (e.g. the pod IP for a scraper).
    pub listen: String,
    /// A bearer token that opens `/metrics` on the main port (at least 16 characters).
    #[serde(default = "empty_secret", skip_serializing)]
    pub token: secrecy::SecretString,
}

/// OpenTelemetry export over OTLP: off unless `otlp_endpoint` or the standard
/// `OTEL_EXPORTER_OTLP_ENDPOINT` (or a per-signal `…_TRACES_/…_METRICS_ENDPOINT`) is set. The other
/// standard variables (`OTEL_EXPORTER_OTLP_HEADERS`, `…_PROTOCOL`, `OTEL_SERVICE_NAME`,
/// `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER[_ARG]`, `OTEL_SDK_DISABLED`) are honoured.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Collector base URL: `http://collector:4318` (HTTP/protobuf, `/v1/traces` and
    /// `/v1/metrics` appended) or `http://collector:4317` (gRPC).
    pub otlp_endpoint: String,
    /// `grpc` or `http/protobuf`; empty: `OTEL_EXPORTER_OTLP_PROTOCOL`, else `http/protobuf`.
    pub otlp_protocol: String,
    /// Extra request headers (e.g. a vendor's API key); never logged.
    #[serde(default, skip_serializing)]
    pub otlp_headers: std::collections::BTreeMap<String, secrecy::SecretString>,
    /// Export spans (when an endpoint is set).
    pub traces: bool,
    /// Export metrics (when an endpoint is set).
    pub metrics: bool,
    /// Share of new traces sampled (0.0–1.0); a sampled parent (traceparent) is always followed.
    pub sampling_ratio: f64,
    /// How often metrics are exported.
    pub metrics_interval_ms: u64,
    /// Finished spans held for export at most; past it new ones are dropped (and counted in
    /// `mcp_harbor_telemetry_spans_total{outcome="dropped"}`), never waited for.
    pub span_queue: usize,
    /// Spans sent in one export at most (a full batch leaves at once).
    pub span_batch: usize,
    /// The longest a finished span waits before it is sent.
    pub span_interval_ms: u64,
    /// `service.name` (`OTEL_SERVICE_NAME` wins).
    pub service_name: String,
}

/// HTTPS served by the binary itself (without a TLS-terminating ingress).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain; with `key_path`, the server speaks HTTPS (HTTP/2 or HTTP/1.1).
    /// Empty: plain HTTP.
    pub cert_path: String,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key_path: String,
    /// How often the files are checked for a replacement (reloaded without a restart).
    pub reload_secs: u64,
}

impl TlsConfig {
    pub fn enabled(&self) -> bool {
        !self.cert_path.is_empty()
    }
}

/// OAuth 2.1: tenants' authorization servers and the resource-server check.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// The external base URL clients use (`https://mcp.example.com`), behind a TLS-terminating
    /// ingress. Empty: taken from each request's Host (and `X-Forwarded-Proto`).
    pub public_url: String,
    /// Keys sealing secrets at rest, `id:base64(32 bytes)`; the first seals, all open (rotate in
    /// two rollouts: the new key last, then first; then `mcp-harbor admin keys rotate` re-seals
    /// what is stored; see the README). Empty: one is generated into `<data_dir>/sealing.key`
    /// (single node only).
    /// Also accepted as one comma-separated string (`MCP_HARBOR__AUTH__SEALING_KEYS=k2:…,k1:…`).
    #[serde(default, skip_serializing, deserialize_with = "keys_list")]
    pub sealing_keys: Vec<secrecy::SecretString>,
    /// Lifetime of access tokens (JWT).
    pub access_token_ttl_secs: u64,
    /// Lifetime of refresh tokens (each use rotates them).
    pub refresh_token_ttl_secs: u64,
    /// Lifetime of authorization codes (single use).
    pub code_ttl_secs: u64,
    /// The auth mode of tenants created without one: `oauth` or `none`.
    pub default_mode: String,
    /// Failed sign-ins allowed per user and per client address per minute.
    pub login_attempts_per_minute: u32,
    /// Clients a client address may register by open Dynamic Client Registration per tenant
    /// and hour (the address as `server.trusted_proxies` says); past it, 429 with
    /// `Retry-After`. Registrations with an initial access token are not counted.
    pub registrations_per_hour_per_address: u32,
    /// Clients a tenant's open Dynamic Client Registration endpoint registers per hour in all:
    /// what bounds the clients nobody uses that anyone can make it store (with
    /// `unused_client_ttl_secs`).
    pub registrations_per_hour: u32,
    /// A client registered by Dynamic Client Registration that no user has granted access (and
    /// that has not been issued a token) this long after it registered is deleted (registered
    /// under the initial access token, by the admin API or before this version: kept).
    pub unused_client_ttl_secs: u64,
    /// How long a user has to complete a URL-mode elicitation (enter a secret a tool asked for
    /// on the elicitation page).
    pub elicitation_ttl_secs: u64,
    /// Host names dedicated to one tenant (`"mcp.acme.example" = "acme"`): on such a host the
    /// root-level endpoints 2025-03-26 clients use (`/.well-known/oauth-authorization-server`,
    /// `/authorize`, `/token`, `/register`) serve that tenant.
    #[serde(default)]
    pub tenant_hosts: std::collections::BTreeMap<String, String>,
}

/// Redis: shared session state (event logs, snapshots, leases, bus) for several replicas.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisConfig {
    /// `redis://host:port[/db]`, or `rediss://…` for TLS; empty means in-process state (one
    /// replica, nothing to install).
    pub url: String,
    /// Prefix of every key and channel (several deployments can share one Redis).
    pub key_prefix: String,
    /// With `rediss://`: a PEM bundle of the CAs that may sign the server's certificate, used
    /// instead of the system's and Mozilla's roots (a managed Redis with its own CA); empty:
    /// those roots.
    pub tls_ca_path: String,
    /// With `rediss://`: a PEM client certificate for mutual TLS (with `tls_key_path`).
    pub tls_cert_path: String,
    /// With `rediss://`: the PEM private key of `tls_cert_path`.
    pub tls_key_path: String,
}

/// This replica among the others.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// A name unique among the replicas (the pod name); empty: generated at start.
    pub replica_id: String,
    /// Where other replicas reach this one (`http://10.0.0.7:8080`); empty:
    /// `http://{server.host}:{port}`.
    pub advertise_url: String,
    /// How often this replica says it is alive, in milliseconds.
    pub heartbeat_ms: u64,
    /// A replica silent for this long is dead and its sessions are taken over, in milliseconds.
    pub liveness_ttl_ms: u64,
    /// On SIGTERM: how long to wait for running requests before handing sessions over, and
    /// for connections to close, in seconds.
    pub drain_grace_secs: u64,
    /// A label (1-32 letters, digits, `-`, `_`) that new session ids start with
    /// (`r1.<32 hex>`), so a load balancer can send a session's requests to the replica that
    /// created it; empty: plain ids (one process, or a balancer that hashes the whole id).
    pub session_route: String,
    /// How often this replica compares the tenants it serves with the store, in seconds, to
    /// catch up with a change the bus did not bring (0: never).
    pub resync_secs: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// The admin API bearer token. Empty: one is generated on first start, printed once and
    /// stored hashed. When set, it replaces the stored one.
    #[serde(default = "empty_secret", skip_serializing)]
    pub token: secrecy::SecretString,
    /// Deprecated: the same as `egress.allow_private` (either one turns it on).
    pub allow_http_loopback_webhooks: bool,
}

/// Where the server's outgoing calls may go (webhook tools, OAuth and OpenID fetches, client
/// metadata documents): one policy for all of them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressConfig {
    /// Development: outgoing calls may use plain http:// to loopback hosts and reach private
    /// addresses. Off in production: only public https:// hosts are called (no SSRF into the
    /// service's own network).
    pub allow_private: bool,
}

/// `webhooks.max_in_flight_per_tenant` unless configured.
pub const DEFAULT_WEBHOOKS_IN_FLIGHT: usize = 64;

/// Webhook tools' calls to their endpoints.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// Requests one tenant's webhook tools may have open at once on a replica (each may hold a
    /// response of up to 4 MiB while it is read and parsed); a call over it waits for a place up
    /// to its tool's timeout, then is a tool error (`isError`), so one tenant's slow endpoints
    /// cannot hold a replica's memory and connections.
    pub max_in_flight_per_tenant: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub host: String,
    /// 0 picks a free port (tests).
    pub port: u16,
    /// HTTP worker threads; 0 means one per core.
    pub workers: usize,
    /// Largest accepted request body, in bytes.
    pub max_body_bytes: usize,
    /// How long a request body may take to arrive after its head (408 after that), on every
    /// route that reads one: a client trickling one holds a connection and its buffer.
    pub body_timeout_secs: f64,
    /// How long a response may wait for its client to take any of its bytes, in seconds; then
    /// the connection is closed (HTTP/2: the stream is reset), so a client that stopped reading,
    /// on a plain answer or an SSE stream, holds no connection and no buffer for longer.
    pub write_timeout_secs: f64,
    /// Host names (without port) accepted in the `Host` header, besides loopback names.
    /// `"*"` accepts any host (behind a proxy that checks it).
    pub allowed_hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`) accepted in the `Origin` header, besides loopback ones.
    pub allowed_origins: Vec<String>,
    /// Proxies (addresses or CIDR ranges) in front of this server whose `X-Forwarded-For`
    /// names the client: the limits counted per client address (failed sign-ins, client
    /// registrations) count by the last address the header names that is not one of them.
    /// Empty: the connection's own peer address (a header anyone can write is not believed).
    pub trusted_proxies: Vec<String>,
    /// Seconds between SSE keep-alive comments.
    pub sse_keepalive_secs: u64,
    /// Transparent huge pages for the process's memory (Linux). Off by default: with them, the
    /// buffers of every held connection are backed by whole 2 MiB pages whether they are used or
    /// not (24 KB per session holding a GET stream against 16 KB without). On: ~3 % less CPU
    /// per request (fewer TLB misses) for a replica that holds few streams.
    pub transparent_huge_pages: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionConfig {
    /// Most concurrent sessions per tenant.
    pub max_per_tenant: usize,
    /// A session with no client activity for this long ends.
    pub idle_timeout_secs: f64,
    /// SSE events kept per stream for resumption (the oldest go first).
    pub event_log_capacity: usize,
    /// A stream's events are kept this long after its last event, in seconds.
    pub event_log_max_age_secs: u64,
    /// Reconnection delay announced in priming events (`retry:`), in milliseconds.
    pub sse_retry_ms: u64,
    /// Bytes an SSE stream may hold that its client has not read yet; a client that stops
    /// reading past it has its stream closed (resumable with `Last-Event-ID`).
    pub stream_buffer_bytes: usize,
    /// How long a request to the client (sampling, elicitation, roots) waits for its answer.
    pub client_request_timeout_secs: u64,
    /// Items per page of a list.
    pub page_size: usize,
}

/// Stateless requests (protocol version 2026-07-28).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModernConfig {
    /// How long a client has to retry a request that answered `input_required`, in seconds.
    pub request_state_ttl_secs: u64,
    /// `ttlMs` on list and read results (a tenant's `limits.cache_ttl_ms` overrides it).
    pub cache_ttl_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// `plain` or `json`.
    pub format: String,
    /// A tracing filter (`info`, `mcp_harbor=debug,actix_web=info`); `RUST_LOG` wins when set.
    pub filter: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    pub slug: String,
    /// Built-in catalogs enabled for the tenant: `reference`, `demo`.
    pub catalogs: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            server: ServerConfig {
                host: "127.0.0.1".into(),
                port: 8080,
                workers: 0,
                max_body_bytes: 4 * 1024 * 1024,
                body_timeout_secs: 30.0,
                write_timeout_secs: 60.0,
                allowed_hosts: Vec::new(),
                allowed_origins: Vec::new(),
                trusted_proxies: Vec::new(),
                sse_keepalive_secs: 15,
                transparent_huge_pages: false,
            },
            sessions: SessionConfig {
                max_per_tenant: 10_000,
                idle_timeout_secs: 1800.0,
                event_log_capacity: 512,
                event_log_max_age_secs: 3600,
                sse_retry_ms: 1000,
                stream_buffer_bytes: 1024 * 1024,
                client_request_timeout_secs: 600,
                page_size: 50,
            },
            modern: ModernConfig {
                request_state_ttl_secs: 600,
                cache_ttl_ms: 60_000,
            },
            log: LogConfig {
                format: "plain".into(),
                filter: "info".into(),
            },
            storage: StorageConfig {
                database_url: String::new(),
                data_dir: "data".into(),
                migrate_on_start: true,
                max_connections: 10,
                acquire_timeout_ms: 2000,
            },
            admin: AdminConfig {
                token: empty_secret(),
                allow_http_loopback_webhooks: false,
            },
            egress: EgressConfig {
                allow_private: false,
            },
            webhooks: WebhookConfig {
                max_in_flight_per_tenant: DEFAULT_WEBHOOKS_IN_FLIGHT,
            },
            redis: RedisConfig {
                url: String::new(),
                key_prefix: "mcp-harbor".into(),
                tls_ca_path: String::new(),
                tls_cert_path: String::new(),
                tls_key_path: String::new(),
            },
            cluster: ClusterConfig {
                replica_id: String::new(),
                advertise_url: String::new(),
                heartbeat_ms: 1000,
                liveness_ttl_ms: 3000,
                drain_grace_secs: 20,
                session_route: String::new(),
                resync_secs: 30,
            },
            auth: AuthConfig {
                public_url: String::new(),
                sealing_keys: Vec::new(),
                access_token_ttl_secs: 900,
                refresh_token_ttl_secs: 30 * 24 * 3600,
                code_ttl_secs: 60,
                default_mode: "oauth".into(),
                login_attempts_per_minute: 10,
                registrations_per_hour_per_address: 20,
                registrations_per_hour: 600,
                unused_client_ttl_secs: 86_400,
                elicitation_ttl_secs: 600,
                tenant_hosts: Default::default(),
            },
            metrics: MetricsConfig {
                listen: String::new(),
                token: empty_secret(),
            },
            telemetry: TelemetryConfig {
                otlp_endpoint: String::new(),
                otlp_protocol: String::new(),
                otlp_headers: Default::default(),
                traces: true,
                metrics: true,
                sampling_ratio: 1.0,
                metrics_interval_ms: 30_000,
                span_queue: 65_536,
                span_batch: 512,
                span_interval_ms: 1_000,
                service_name: "mcp-harbor".into(),
            },
            tls: TlsConfig {
                cert_path: String::new(),
                key_path: String::new(),
                reload_secs: 5,
            },
            tenants: vec![TenantConfig {
                slug: "demo".into(),
                catalogs: vec!["reference".into(), "demo".into()],
            }],
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration could not be read: {0}")]
    Load(#[from] Box<figment::Error>),
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl ServerConfig {
    /// `trusted_proxies` as address ranges (a bare address is a range of one).
    pub fn trusted_proxy_nets(&self) -> Result<Vec<ipnet::IpNet>, String> {
        self.trusted_proxies
            .iter()
            .map(|entry| {
                entry
                    .parse::<ipnet::IpNet>()
                    .or_else(|_| entry.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| {
                        format!(
                            "server.trusted_proxies entry {entry:?} is not an IP address or \
                             CIDR range (10.0.0.0/8, fd00::/8, 192.0.2.7)"
                        )
                    })
            })
            .collect()
    }
}

impl Config {
    /// Defaults, then `file` (if given), then the environment; validated.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(file) = file {
            if !file.exists() {
                return Err(ConfigError::Invalid(format!(
                    "config file {} does not exist",
                    file.display()
                )));
            }
            figment = figment.merge(Toml::file(file));
        }
        figment = figment.merge(Env::prefixed("MCP_HARBOR__").split("__").lowercase(true));
        let config: Config = figment.extract().map_err(Box::new)?;
        config.validate()?;
        Ok(config)
    }

    /// Whether outgoing calls may reach private addresses (`egress.allow_private`, or its
    /// deprecated name `admin.allow_http_loopback_webhooks`).
    pub fn egress_allows_private(&self) -> bool {
        self.egress.allow_private || self.admin.allow_http_loopback_webhooks
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        if !(1..=86_400).contains(&self.modern.request_state_ttl_secs) {
            return bad(format!(
                "modern.request_state_ttl_secs {} is not between 1 and 86400",
                self.modern.request_state_ttl_secs
            ));
        }
        if self.modern.cache_ttl_ms > 86_400_000 {
            return bad(format!(
                "modern.cache_ttl_ms {} is more than a day (86400000)",
                self.modern.cache_ttl_ms
            ));
        }
        let t = &self.telemetry;
        if !(1..=1_000_000).contains(&t.span_batch)
            || !(t.span_batch..=10_000_000).contains(&t.span_queue)
        {
            return bad(format!(
                "telemetry.span_batch ({}) must be from 1 to 1000000 and telemetry.span_queue ({}) from span_batch to 10000000",
                t.span_batch, t.span_queue
            ));
        }
        if !(10..=600_000).contains(&t.span_interval_ms) {
            return bad(format!(
                "telemetry.span_interval_ms {} is not from 10 to 600000",
                t.span_interval_ms
            ));
        }
        if !(0.0..=1.0).contains(&self.telemetry.sampling_ratio) {
            return bad(format!(
                "telemetry.sampling_ratio {} is not between 0.0 and 1.0",
                self.telemetry.sampling_ratio
            ));
        }
        if !["", "grpc", "http/protobuf"].contains(&self.telemetry.otlp_protocol.as_str()) {
            return bad(format!(
                "telemetry.otlp_protocol {:?} is not \"grpc\" or \"http/protobuf\"",
                self.telemetry.otlp_protocol
            ));
        }
        if self.server.host.parse::<std::net::IpAddr>().is_err() && self.server.host != "localhost"
        {
            return bad(format!(
                "server.host {:?} is not an IP address or localhost",
                self.server.host
            ));
        }
        if !(self.server.body_timeout_secs > 0.0 && self.server.body_timeout_secs <= 3600.0) {
            return bad("server.body_timeout_secs must be more than 0 and at most 3600".into());
        }
        if !(self.server.write_timeout_secs > 0.0 && self.server.write_timeout_secs <= 3600.0) {
            return bad("server.write_timeout_secs must be more than 0 and at most 3600".into());
        }
        if !(1..=100_000).contains(&self.webhooks.max_in_flight_per_tenant) {
            return bad(format!(
                "webhooks.max_in_flight_per_tenant {} is not between 1 and 100000",
                self.webhooks.max_in_flight_per_tenant
            ));
        }
        if self.server.max_body_bytes < 1024 {
            return bad("server.max_body_bytes must be at least 1024".into());
        }
        if self.server.sse_keepalive_secs == 0 {
            return bad("server.sse_keepalive_secs must be at least 1".into());
        }
        for host in &self.server.allowed_hosts {
            // Compared with the Host header's name (port stripped): an entry with a port, a
            // scheme, a bare IPv6 address or a trailing dot would never match, and every request
            // would be 403 with nothing saying why.
            let name_only = if host.starts_with('[') {
                host.len() > 2 && host.ends_with(']')
            } else {
                !host.contains(':')
            };
            let ok = host == "*"
                || (!host.is_empty()
                    && name_only
                    && !host.ends_with('.')
                    && !host.contains(['/', ' ', '\t']));
            if !ok {
                return bad(format!(
                    "server.allowed_hosts entry {host:?} must be a host name or [IPv6] address \
                     without scheme, port or trailing dot (or \"*\")"
                ));
            }
        }
        if let Err(e) = self.server.trusted_proxy_nets() {
            return bad(e);
        }
        let r = &self.redis;
        let tls_files = [&r.tls_ca_path, &r.tls_cert_path, &r.tls_key_path];
        if tls_files.iter().any(|p| !p.is_empty()) && !r.url.starts_with("rediss://") {
            return bad(
                "redis.tls_ca_path, tls_cert_path and tls_key_path need a rediss:// redis.url"
                    .into(),
            );
        }
        if r.tls_cert_path.is_empty() != r.tls_key_path.is_empty() {
            return bad("redis.tls_cert_path and redis.tls_key_path go together".into());
        }
        for origin in &self.server.allowed_origins {
            if !(origin.starts_with("http://") || origin.starts_with("https://")) {
                return bad(format!(
                    "server.allowed_origins entry {origin:?} must start with http:// or https://"
                ));
            }
        }
        if self.sessions.max_per_tenant == 0 {
            return bad("sessions.max_per_tenant must be at least 1".into());
        }
        if !self.sessions.idle_timeout_secs.is_finite() || self.sessions.idle_timeout_secs <= 0.0 {
            return bad("sessions.idle_timeout_secs must be positive".into());
        }
        if !(1..=86_400).contains(&self.sessions.client_request_timeout_secs) {
            return bad("sessions.client_request_timeout_secs must be from 1 to 86400".into());
        }
        if self.sessions.stream_buffer_bytes < 4096 {
            return bad("sessions.stream_buffer_bytes must be at least 4096".into());
        }
        if self.sessions.event_log_capacity == 0 || self.sessions.page_size == 0 {
            return bad(
                "sessions.event_log_capacity and sessions.page_size must be at least 1".into(),
            );
        }
        let url = self.storage.url();
        if !(url.starts_with("postgres://")
            || url.starts_with("postgresql://")
            || url.starts_with("sqlite:"))
        {
            return bad(
                "storage.database_url must start with postgres://, postgresql:// or sqlite:".into(),
            );
        }
        if self.storage.max_connections == 0 {
            return bad("storage.max_connections must be at least 1".into());
        }
        {
            use secrecy::ExposeSecret;
            let token = self.admin.token.expose_secret();
            if !token.is_empty() && token.len() < 16 {
                return bad(
                    "admin.token must be at least 16 characters (or empty to generate one)".into(),
                );
            }
        }
        let redis = &self.redis.url;
        if !(redis.is_empty() || redis.starts_with("redis://") || redis.starts_with("rediss://")) {
            return bad("redis.url must start with redis:// or rediss:// (or be empty)".into());
        }
        if self.redis.key_prefix.is_empty() || self.redis.key_prefix.contains(char::is_whitespace) {
            return bad("redis.key_prefix must be non-empty, without spaces".into());
        }
        if self.sessions.event_log_max_age_secs == 0 {
            return bad("sessions.event_log_max_age_secs must be at least 1".into());
        }
        if !self.cluster.replica_id.is_empty()
            && !self
                .cluster
                .replica_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        {
            return bad(
                "cluster.replica_id may hold only letters, digits, '-', '_' and '.'".into(),
            );
        }
        if !self.cluster.session_route.is_empty() {
            if let Err(e) = check_session_route(&self.cluster.session_route) {
                return bad(format!("cluster.session_route {e}"));
            }
        }
        let advertise = &self.cluster.advertise_url;
        if !(advertise.is_empty()
            || advertise.starts_with("http://")
            || advertise.starts_with("https://"))
        {
            return bad("cluster.advertise_url must start with http:// or https://".into());
        }
        if self.cluster.heartbeat_ms == 0
            || self.cluster.liveness_ttl_ms < 2 * self.cluster.heartbeat_ms
        {
            return bad(
                "cluster.liveness_ttl_ms must be at least twice cluster.heartbeat_ms (and both positive)".into(),
            );
        }
        if !matches!(self.auth.default_mode.as_str(), "oauth" | "none") {
            return bad("auth.default_mode must be \"oauth\" or \"none\"".into());
        }
        let public = &self.auth.public_url;
        if !(public.is_empty() || public.starts_with("https://") || public.starts_with("http://")) {
            return bad("auth.public_url must start with https:// (or be empty)".into());
        }
        if !self.metrics.listen.is_empty()
            && self.metrics.listen.parse::<std::net::SocketAddr>().is_err()
        {
            return bad("metrics.listen must be host:port with an IP address, or empty".into());
        }
        {
            use secrecy::ExposeSecret;
            let token = self.metrics.token.expose_secret();
            if !token.is_empty() && token.len() < 16 {
                return bad("metrics.token must be at least 16 characters (or empty)".into());
            }
        }
        if self.tls.cert_path.is_empty() != self.tls.key_path.is_empty() {
            return bad("tls.cert_path and tls.key_path go together (both, or neither)".into());
        }
        if self.tls.reload_secs == 0 {
            return bad("tls.reload_secs must be at least 1".into());
        }
        for (host, slug) in &self.auth.tenant_hosts {
            if !is_valid_slug(slug) || host.is_empty() || host.contains(['/', ' ']) {
                return bad(format!(
                    "auth.tenant_hosts: {host:?} = {slug:?} must map a host name to a tenant slug"
                ));
            }
        }
        if self.auth.access_token_ttl_secs == 0
            || self.auth.refresh_token_ttl_secs == 0
            || self.auth.code_ttl_secs == 0
        {
            return bad("auth token lifetimes must be at least 1 second".into());
        }
        if self.auth.registrations_per_hour_per_address == 0
            || self.auth.registrations_per_hour == 0
        {
            return bad(
                "auth.registrations_per_hour and auth.registrations_per_hour_per_address must be \
                 at least 1 (a tenant's `registration` policy turns registration off)"
                    .into(),
            );
        }
        if self.auth.unused_client_ttl_secs < 600 {
            return bad(format!(
                "auth.unused_client_ttl_secs {} is less than 600 (a user needs time to sign in)",
                self.auth.unused_client_ttl_secs
            ));
        }
        if !matches!(self.log.format.as_str(), "plain" | "json") {
            return bad(format!(
                "log.format must be \"plain\" or \"json\", not {:?}",
                self.log.format
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for t in &self.tenants {
            if !is_valid_slug(&t.slug) {
                return bad(format!("tenant slug {:?} must be 1-63 characters of a-z, 0-9 and '-', not starting with '-'", t.slug));
            }
            if !seen.insert(&t.slug) {
                return bad(format!("tenant slug {:?} is configured twice", t.slug));
            }
        }
        Ok(())
    }
}

/// A list of secrets, or one string of comma-separated ones.
fn keys_list<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<secrecy::SecretString>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Keys {
        One(String),
        Many(Vec<String>),
    }
    let keys = match Keys::deserialize(d)? {
        Keys::One(s) => s.split(',').map(str::to_string).collect(),
        Keys::Many(v) => v,
    };
    Ok(keys
        .into_iter()
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .map(secrecy::SecretString::from)
        .collect())
}

fn empty_secret() -> secrecy::SecretString {
    secrecy::SecretString::from(String::new())
}

/// URL-safe tenant slugs: lowercase letters, digits and dashes.
pub fn is_valid_slug(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && !s.starts_with('-')
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The longest `cluster.session_route`.
pub const MAX_SESSION_ROUTE_LEN: usize = 32;

/// Whether `label` may prefix session ids (`cluster.session_route`, see `session::id`): 1 to 32
/// ASCII letters, digits, `-` or `_` — visible ASCII as the spec asks of session ids, no `.` so
/// the first dot of an id ends it, nothing a load balancer's pattern or a URL would escape.
pub fn check_session_route(label: &str) -> Result<(), String> {
    if label.is_empty() || label.len() > MAX_SESSION_ROUTE_LEN {
        return Err(format!(
            "must be 1 to {MAX_SESSION_ROUTE_LEN} characters long"
        ));
    }
    if !label
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err("may hold only ASCII letters, digits, '-' and '_'".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        Config::default().validate().unwrap();
    }

    #[test]
    fn validation_names_the_field() {
        let mut c = Config::default();
        c.tenants[0].slug = "Bad Slug".into();
        assert!(c.validate().unwrap_err().to_string().contains("slug"));
        let mut c = Config::default();
        c.log.format = "xml".into();
        assert!(c.validate().unwrap_err().to_string().contains("log.format"));
        let mut c = Config::default();
        c.webhooks.max_in_flight_per_tenant = 0;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("webhooks.max_in_flight_per_tenant"), "{e}");
        for bad in [0.0, -1.0, f64::NAN, 3601.0] {
            let mut c = Config::default();
            c.server.write_timeout_secs = bad;
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains("server.write_timeout_secs"), "{bad}: {e}");
        }
    }

    #[test]
    fn allowed_hosts_are_names_the_host_check_can_match() {
        let check = |host: &str| {
            let mut c = Config::default();
            c.server.allowed_hosts = vec![host.to_string()];
            c.validate().map_err(|e| e.to_string())
        };
        for ok in [
            "mcp.example.com",
            "*",
            "[::1]",
            "10.0.0.7",
            "MCP.Example.com",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        for bad in [
            "mcp.example.com:443",
            "https://mcp.example.com",
            "::1",
            "mcp.example.com.",
            "",
        ] {
            let e = check(bad).unwrap_err();
            assert!(e.contains("server.allowed_hosts"), "{bad}: {e}");
        }
    }

    #[test]
    fn trusted_proxies_are_addresses_or_ranges() {
        let mut c = Config::default();
        c.server.trusted_proxies = vec!["10.0.0.0/8".into(), "192.0.2.7".into(), "fd00::/8".into()];
        let nets = c.server.trusted_proxy_nets().unwrap();
        assert!(nets[1].contains(&"192.0.2.7".parse::<std::net::IpAddr>().unwrap()));
        assert_eq!(nets[1].prefix_len(), 32);
        c.validate().unwrap();
        for bad in ["10.0.0.0/33", "proxy.internal", "10.0.0.1:80", ""] {
            c.server.trusted_proxies = vec![bad.into()];
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains("server.trusted_proxies"), "{bad}: {e}");
        }
    }

    #[test]
    fn route_labels_are_restricted_to_safe_characters() {
        for ok in ["r1", "replica-7", "pod_0", "A"] {
            assert_eq!(check_session_route(ok), Ok(()), "{ok}");
        }
        let too_long = "a".repeat(MAX_SESSION_ROUTE_LEN + 1);
        for bad in [
            "",
            too_long.as_str(),
            "r.1",
            "r 1",
            "r:1",
            "r/1",
            "r%31",
            "é",
            "r1\n",
        ] {
            assert!(check_session_route(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_session_route_is_checked_at_start() {
        let mut c = Config::default();
        c.cluster.session_route = "r1".into();
        c.validate().unwrap();
        for bad in ["r.1", "r:1", "r 1", &"r".repeat(33)] {
            c.cluster.session_route = bad.into();
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains("cluster.session_route"), "{bad}: {e}");
        }
    }

    #[test]
    fn file_then_environment_layers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("harbor.toml");
        std::fs::write(&path, "[server]\nport = 9100\n[sessions]\npage_size = 7\n").unwrap();
        let c = Config::load(Some(&path)).unwrap();
        assert_eq!(c.server.port, 9100);
        assert_eq!(c.sessions.page_size, 7);
        assert_eq!(c.server.host, "127.0.0.1");
        std::fs::write(&path, "[server]\nport = \"x\"\n").unwrap();
        assert!(Config::load(Some(&path)).is_err());
        assert!(Config::load(Some(&dir.path().join("missing.toml"))).is_err());
    }
}
