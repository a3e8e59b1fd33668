//! Metrics in the Prometheus text format (`/metrics`, on its own listener or behind a bearer
//! token — never public by accident). Names follow the OpenTelemetry MCP semantic conventions
//! where they name one (`mcp.server.operation.duration`, `mcp.server.session.duration`, as
//! `mcp_server_operation_duration_seconds` …); the rest are the platform's own. Labels are low
//! cardinality only: tenant, method, outcome — never a session id or a user.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    pub mcp_method_name: String,
    pub tenant: String,
    /// Empty on success; the JSON-RPC error code, or `tool_error` for an `isError` tool result.
    pub error_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TenantLabels {
    pub tenant: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub tenant: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GrantLabels {
    pub tenant: String,
    pub grant_type: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    /// `mcp`, `oauth`, `admin` or `other`.
    pub route: String,
    pub status: u16,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency() -> Histogram {
    // 0.5 ms … ~33 s
    Histogram::new(exponential_buckets(0.0005, 2.0, 17))
}

fn lifetimes() -> Histogram {
    // 1 s … ~9 h
    Histogram::new(exponential_buckets(1.0, 2.0, 16))
}

pub struct Metrics {
    registry: Registry,
    pub operation_duration: Histograms<OperationLabels>,
    pub session_duration: Histograms<TenantLabels>,
    pub sessions_active: Family<TenantLabels, Gauge>,
    pub sse_streams_open: Family<TenantLabels, Gauge>,
    pub webhook_duration: Histograms<OutcomeLabels>,
    pub oauth_grants: Family<GrantLabels, Counter>,
    pub rate_limited: Family<TenantLabels, Counter>,
    pub http_requests: Family<HttpLabels, Counter>,
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::default();
        let operation_duration: Histograms<OperationLabels> = Family::new_with_constructor(latency);
        registry.register_with_unit(
            "mcp_server_operation_duration",
            "MCP request handling time (mcp.server.operation.duration)",
            Unit::Seconds,
            operation_duration.clone(),
        );
        let session_duration: Histograms<TenantLabels> = Family::new_with_constructor(lifetimes);
        registry.register_with_unit(
            "mcp_server_session_duration",
            "MCP session lifetime on this replica (mcp.server.session.duration)",
            Unit::Seconds,
            session_duration.clone(),
        );
        let sessions_active = Family::<TenantLabels, Gauge>::default();
        registry.register(
            "mcp_harbor_sessions_active",
            "MCP sessions held by this replica",
            sessions_active.clone(),
        );
        let sse_streams_open = Family::<TenantLabels, Gauge>::default();
        registry.register(
            "mcp_harbor_sse_streams_open",
            "Open SSE response streams",
            sse_streams_open.clone(),
        );
        let webhook_duration: Histograms<OutcomeLabels> = Family::new_with_constructor(latency);
        registry.register_with_unit(
            "mcp_harbor_webhook_duration",
            "Webhook tool calls (one HTTP round each) by outcome: ok, error (non-2xx, bad answer), failed (unreachable, timeout)",
            Unit::Seconds,
            webhook_duration.clone(),
        );
        let oauth_grants = Family::<GrantLabels, Counter>::default();
        registry.register(
            "mcp_harbor_oauth_grants",
            "Token endpoint requests by grant type and outcome (issued or the OAuth error)",
            oauth_grants.clone(),
        );
        let rate_limited = Family::<TenantLabels, Counter>::default();
        registry.register(
            "mcp_harbor_rate_limited",
            "Requests refused by a tenant's rate limit (429)",
            rate_limited.clone(),
        );
        let http_requests = Family::<HttpLabels, Counter>::default();
        registry.register(
            "mcp_harbor_http_requests",
            "HTTP requests by route group and status",
            http_requests.clone(),
        );
        Metrics {
            registry,
            operation_duration,
            session_duration,
            sessions_active,
            sse_streams_open,
            webhook_duration,
            oauth_grants,
            rate_limited,
            http_requests,
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }

    pub fn operation(&self, method: &str, tenant: &str, error_type: &str, took: Duration) {
        // Unknown method names are client input: one label for all of them.
        let method = if crate::protocol::mcp::is_known_method(method) {
            method
        } else {
            "other"
        };
        self.operation_duration
            .get_or_create(&OperationLabels {
                mcp_method_name: method.to_string(),
                tenant: tenant.to_string(),
                error_type: error_type.to_string(),
            })
            .observe(took.as_secs_f64());
    }

    pub fn tenant(tenant: &str) -> TenantLabels {
        TenantLabels {
            tenant: tenant.to_string(),
        }
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// This process's metrics.
pub fn global() -> &'static Metrics {
    &METRICS
}

/// Counts an open SSE stream while it lives.
pub struct StreamGauge(TenantLabels);

impl StreamGauge {
    pub fn open(tenant: &str) -> StreamGauge {
        let labels = Metrics::tenant(tenant);
        global().sse_streams_open.get_or_create(&labels).inc();
        StreamGauge(labels)
    }
}

impl Drop for StreamGauge {
    fn drop(&mut self) {
        global().sse_streams_open.get_or_create(&self.0).dec();
    }
}

/// Which group of routes a path belongs to (the `route` label).
pub fn route_group(path: &str) -> &'static str {
    if path.starts_with("/admin/") {
        "admin"
    } else if path.starts_with("/.well-known/")
        || (path.starts_with("/t/") && (path.contains("/oauth/") || path.contains("/.well-known/")))
    {
        "oauth"
    } else if path.starts_with("/t/") {
        "mcp"
    } else {
        "other"
    }
}

/// `GET /metrics` on the main port: only with the configured bearer token.
pub async fn scrape_with_token(
    req: actix_web::HttpRequest,
    token: actix_web::web::Data<MetricsToken>,
) -> actix_web::HttpResponse {
    use secrecy::ExposeSecret;
    use subtle::ConstantTimeEq;
    let presented = req
        .headers()
        .get(actix_web::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    let want = token.0.expose_secret();
    if want.is_empty() || !bool::from(presented.as_bytes().ct_eq(want.as_bytes())) {
        return actix_web::HttpResponse::Unauthorized()
            .insert_header((
                actix_web::http::header::WWW_AUTHENTICATE,
                "Bearer realm=\"metrics\"",
            ))
            .body("metrics need the metrics bearer token\n");
    }
    scrape().await
}

/// `GET /metrics` (text exposition format 0.0.4).
pub async fn scrape() -> actix_web::HttpResponse {
    actix_web::HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(global().render())
}

/// The configured metrics token (app data).
pub struct MetricsToken(pub secrecy::SecretString);
