//! Metrics in the Prometheus text format (`/metrics`, on its own listener or behind a bearer
//! token — never public by accident). Names follow the OpenTelemetry MCP semantic conventions
//! where they name one (`mcp.server.operation.duration`, `mcp.server.session.duration`, as
//! `mcp_server_operation_duration_seconds` …); the rest are the platform's own. Labels are low
//! cardinality only: tenant, method, outcome — never a session id or a user.
//!
//! Every recording goes through a method of [`Metrics`]; when OTLP export is on
//! ([`export_to`]), the same values also go to OpenTelemetry instruments named as the conventions
//! say (`mcp.server.operation.duration` with `mcp.method.name` and `error.type`, …).

use std::sync::{LazyLock, OnceLock};
use std::time::Duration;

use opentelemetry::metrics::{
    BoundCounter, BoundHistogram, Counter as OtelCounter, Histogram as OtelHistogram, UpDownCounter,
};
use opentelemetry::KeyValue;

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::info::Info;
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
pub struct SpanLabels {
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GrantLabels {
    pub tenant: String,
    pub grant_type: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    pub tenant: String,
    pub method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    /// `mcp`, `oauth`, `admin` or `other`.
    pub route: String,
    pub status: u16,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// One tenant's `mcp.server.operation.duration` series of successful requests, by known method.
type OperationSeries =
    [OnceLock<Both<Histogram, BoundHistogram<f64>>>; crate::protocol::mcp::KNOWN_METHODS.len()];

/// A series kept in both places at once: its Prometheus series and, when OTLP export is on, the
/// OpenTelemetry instrument bound to the same attributes (no attribute set built or looked up per
/// recording). One call records to both.
#[derive(Clone)]
struct Both<P, O> {
    prometheus: P,
    otel: Option<O>,
}

impl Both<Histogram, BoundHistogram<f64>> {
    fn observe(&self, v: f64) {
        self.prometheus.observe(v);
        if let Some(o) = &self.otel {
            o.record(v);
        }
    }
}

impl Both<Counter, BoundCounter<u64>> {
    fn inc(&self) {
        self.prometheus.inc();
        if let Some(o) = &self.otel {
            o.add(1);
        }
    }
}

fn latency() -> Histogram {
    // 0.5 ms … ~33 s
    Histogram::new(exponential_buckets(0.0005, 2.0, 17))
}

fn lifetimes() -> Histogram {
    // 1 s … ~9 h
    Histogram::new(exponential_buckets(1.0, 2.0, 16))
}

/// The registry and what it holds: each family's exported name (unit suffix included), type,
/// help and unit. A family with no sample yet is not in what the registry encodes: `render` adds
/// its `# HELP`/`# TYPE` lines, so `/metrics` always lists every family (a scraper or a reader
/// sees what exists), and [`Metrics::families`] gives the list to the reference docs.
struct Described {
    registry: Registry,
    families: Vec<Registered>,
}

/// A registered family, as the exposition names it.
struct Registered {
    name: String,
    kind: &'static str,
    help: String,
    unit: Option<&'static str>,
}

impl Described {
    fn register(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        metric: impl EncodeMetric + Send + Sync + std::fmt::Debug + 'static,
    ) {
        use prometheus_client::metrics::MetricType;
        let kind = match metric.metric_type() {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
            MetricType::Info => "info",
            MetricType::Unknown => "unknown",
        };
        let unit_name = match &unit {
            Some(Unit::Seconds) => Some("seconds"),
            Some(Unit::Bytes) => Some("bytes"),
            _ => None,
        };
        self.families.push(Registered {
            name: match unit_name {
                Some(u) => format!("{name}_{u}"),
                None => name.to_string(),
            },
            kind,
            help: help.to_string(),
            unit: unit_name,
        });
        match unit {
            Some(unit) => self.registry.register_with_unit(name, help, unit, metric),
            None => self.registry.register(name, help, metric),
        }
    }

    /// `# HELP`, `# TYPE` (and `# UNIT`) of every family `text` does not list, before its
    /// `# EOF`.
    fn add_empty_families(&self, text: &mut String) {
        let mut missing = String::new();
        for family in &self.families {
            if text.contains(&format!("# TYPE {} ", family.name)) {
                continue;
            }
            let help = family.help.replace('\\', "\\\\").replace('\n', "\\n");
            missing.push_str(&format!("# HELP {} {help}.\n", family.name));
            missing.push_str(&format!("# TYPE {} {}\n", family.name, family.kind));
            if let Some(unit) = family.unit {
                missing.push_str(&format!("# UNIT {} {unit}\n", family.name));
            }
        }
        let at = text.rfind("# EOF").unwrap_or(text.len());
        text.insert_str(at, &missing);
    }
}

pub struct Metrics {
    registry: Described,
    pub operation_duration: Histograms<OperationLabels>,
    pub session_duration: Histograms<TenantLabels>,
    pub sessions_active: Family<TenantLabels, Gauge>,
    pub sse_streams_open: Family<TenantLabels, Gauge>,
    /// SSE streams closed because their client stopped reading (see `session::channel`).
    pub sse_streams_overflowed: Counter,
    /// Open HTTP connections on the main port (kept by `connections::Open`, one per connection).
    pub http_connections_open: Gauge,
    /// Responses given up because their client took none of their bytes for
    /// `server.write_timeout_secs` (counted by the HTTP dispatchers through `write_timed_out`).
    pub http_write_timeouts: Counter,
    pub webhook_duration: Histograms<OutcomeLabels>,
    pub oauth_grants: Family<GrantLabels, Counter>,
    pub oauth_registrations: Family<OutcomeLabels, Counter>,
    pub rate_limited: Family<TenantLabels, Counter>,
    pub quota_unchecked: Family<TenantLabels, Counter>,
    /// Sessions restored here from a replica that held them (dead, drained or fenced).
    pub session_takeovers: Family<TenantLabels, Counter>,
    /// Spans on their way out over OTLP, by outcome (`exported`, `failed`, `dropped`).
    pub telemetry_spans: Family<SpanLabels, Counter>,
    pub http_requests: Family<HttpLabels, Counter>,
    /// The series of `http_requests` nearly every request lands in (each route group with 200
    /// and 202), found in the family once instead of on every request.
    http_common: [OnceLock<Both<Counter, BoundCounter<u64>>>; ROUTE_GROUPS.len() * 2],
    /// The series of successful operations of each tenant and known method (what nearly every
    /// request records), found in the family once per tenant and method.
    operation_ok: parking_lot::RwLock<crate::FastMap<Box<str>, OperationSeries>>,
    pub event_log_appends: Family<TenantLabels, Counter>,
    pub event_log_replays: Family<OutcomeLabels, Counter>,
    pub pending_client_requests: Family<MethodLabels, Gauge>,
    /// Tasks alive on this process's runtimes (HTTP workers and the main one), for leak hunting
    /// (`bench/soak.sh` watches it).
    pub runtime_tasks: Gauge,
    runtimes: parking_lot::Mutex<Vec<(std::thread::ThreadId, tokio::runtime::Handle)>>,
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Described {
            registry: Registry::default(),
            families: Vec::new(),
        };
        let operation_duration: Histograms<OperationLabels> = Family::new_with_constructor(latency);
        registry.register(
            "mcp_server_operation_duration",
            "MCP request handling time (mcp.server.operation.duration)",
            Some(Unit::Seconds),
            operation_duration.clone(),
        );
        let session_duration: Histograms<TenantLabels> = Family::new_with_constructor(lifetimes);
        registry.register(
            "mcp_server_session_duration",
            "MCP session lifetime on this replica (mcp.server.session.duration)",
            Some(Unit::Seconds),
            session_duration.clone(),
        );
        registry.register(
            "mcp_harbor_build",
            "The version this replica runs (during a rolling upgrade, count the replicas of each)",
            None,
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        let sessions_active = Family::<TenantLabels, Gauge>::default();
        registry.register(
            "mcp_harbor_sessions_active",
            "MCP sessions held by this replica",
            None,
            sessions_active.clone(),
        );
        let sse_streams_open = Family::<TenantLabels, Gauge>::default();
        registry.register(
            "mcp_harbor_sse_streams_open",
            "Open SSE response streams",
            None,
            sse_streams_open.clone(),
        );
        let http_connections_open = Gauge::default();
        registry.register(
            "mcp_harbor_http_connections_open",
            "Open HTTP connections on the main port (each keep-alive connection, whether busy, \
             idle or holding a stream)",
            None,
            http_connections_open.clone(),
        );
        let http_write_timeouts = Counter::default();
        registry.register(
            "mcp_harbor_http_write_timeouts",
            "Responses given up because their client took none of their bytes for server.write_timeout_secs (HTTP/1: the connection closed; HTTP/2: the stream reset)",
            None, http_write_timeouts.clone(),
        );
        let sse_streams_overflowed = Counter::default();
        registry.register(
            "mcp_harbor_sse_streams_overflowed",
            "SSE streams closed because their client left more than sessions.stream_buffer_bytes unread (the client may resume them)",
            None, sse_streams_overflowed.clone(),
        );
        let webhook_duration: Histograms<OutcomeLabels> = Family::new_with_constructor(latency);
        registry.register(
            "mcp_harbor_webhook_duration",
            "Webhook tool calls (one HTTP round each) by outcome: ok (a 2xx JSON answer), failed (unreachable, timeout, non-2xx, too large or not JSON), busy (not sent: the tenant's calls in flight stayed at their cap; the time waited)",
            Some(Unit::Seconds),
            webhook_duration.clone(),
        );
        let oauth_grants = Family::<GrantLabels, Counter>::default();
        registry.register(
            "mcp_harbor_oauth_grants",
            "Token endpoint requests by grant type and outcome (issued or the OAuth error)",
            None,
            oauth_grants.clone(),
        );
        let oauth_registrations = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "mcp_harbor_oauth_registrations",
            "Dynamic Client Registration requests by outcome (registered, rate_limited or the OAuth error)",
            None, oauth_registrations.clone(),
        );
        let rate_limited = Family::<TenantLabels, Counter>::default();
        registry.register(
            "mcp_harbor_rate_limited",
            "Requests refused by a tenant's rate limit (429)",
            None,
            rate_limited.clone(),
        );
        let session_takeovers = Family::<TenantLabels, Counter>::default();
        registry.register(
            "mcp_harbor_session_takeovers",
            "Sessions this replica restored from their snapshot after another replica held them (it died, drained or was fenced): how often failover happens",
            None,
            session_takeovers.clone(),
        );
        let telemetry_spans = Family::<SpanLabels, Counter>::default();
        registry.register(
            "mcp_harbor_telemetry_spans",
            "Spans sent over OTLP by outcome: exported, failed (the collector refused or was unreachable) or dropped (the export queue, telemetry.span_queue, was full)",
            None,
            telemetry_spans.clone(),
        );
        let quota_unchecked = Family::<TenantLabels, Counter>::default();
        registry.register(
            "mcp_harbor_quota_unchecked",
            "Requests of rate-limited tenants let in unchecked across replicas (shared state \
             unreachable; only this replica's own limit applied)",
            None,
            quota_unchecked.clone(),
        );
        let http_requests = Family::<HttpLabels, Counter>::default();
        registry.register(
            "mcp_harbor_http_requests",
            "HTTP requests by route group and status",
            None,
            http_requests.clone(),
        );
        let event_log_appends = Family::<TenantLabels, Counter>::default();
        registry.register(
            "mcp_harbor_event_log_appends",
            "SSE events appended to the event log (each is resumable with Last-Event-ID)",
            None,
            event_log_appends.clone(),
        );
        let event_log_replays = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "mcp_harbor_event_log_replays",
            "Stream resumptions (Last-Event-ID) by outcome: replayed, unknown (event not in the log), failed",
            None, event_log_replays.clone(),
        );
        let pending_client_requests = Family::<MethodLabels, Gauge>::default();
        registry.register(
            "mcp_harbor_pending_client_requests",
            "Server-to-client requests awaiting the client's answer (elicitation/create, sampling/createMessage, roots/list)",
            None, pending_client_requests.clone(),
        );
        let runtime_tasks = Gauge::default();
        registry.register(
            "mcp_harbor_runtime_alive_tasks",
            "Tasks alive on the process's async runtimes (HTTP workers and the main runtime)",
            None,
            runtime_tasks.clone(),
        );
        Metrics {
            registry,
            runtime_tasks,
            runtimes: parking_lot::Mutex::new(Vec::new()),
            event_log_appends,
            event_log_replays,
            pending_client_requests,
            operation_duration,
            session_duration,
            sessions_active,
            sse_streams_open,
            http_connections_open,
            sse_streams_overflowed,
            http_write_timeouts,
            webhook_duration,
            oauth_grants,
            oauth_registrations,
            rate_limited,
            quota_unchecked,
            session_takeovers,
            telemetry_spans,
            http_requests,
            http_common: Default::default(),
            operation_ok: Default::default(),
        }
    }

    /// Every family this registry holds, as `/metrics` names it (unit suffix included, before
    /// the `_total`/`_info`/histogram series suffixes), with its type: what the reference docs
    /// must describe.
    pub fn families(&self) -> impl Iterator<Item = (&str, &'static str)> {
        self.registry
            .families
            .iter()
            .map(|f| (f.name.as_str(), f.kind))
    }

    /// Counts the current thread's runtime in `mcp_harbor_runtime_alive_tasks` (once per
    /// thread; outside a runtime, nothing).
    pub fn register_runtime(&self) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let thread = std::thread::current().id();
        let mut runtimes = self.runtimes.lock();
        if !runtimes.iter().any(|(t, _)| *t == thread) {
            runtimes.push((thread, handle));
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let tasks: usize = self
            .runtimes
            .lock()
            .iter()
            .map(|(_, h)| h.metrics().num_alive_tasks())
            .sum();
        self.runtime_tasks
            .set(i64::try_from(tasks).unwrap_or(i64::MAX));
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry.registry).is_err() {
            out.clear();
        }
        self.registry.add_empty_families(&mut out);
        out
    }

    pub fn operation(&self, method: &str, tenant: &str, error_type: &str, took: Duration) {
        // Unknown method names are client input: one label for all of them.
        let known = crate::protocol::mcp::known_method_index(method);
        let method = match known {
            Some(i) => crate::protocol::mcp::KNOWN_METHODS[i],
            None => "other",
        };
        let otel_attrs = || {
            let mut attrs = vec![
                KeyValue::new("mcp.method.name", method),
                KeyValue::new("tenant", tenant.to_string()),
            ];
            if !error_type.is_empty() {
                attrs.push(KeyValue::new("error.type", error_type.to_string()));
            }
            attrs
        };
        let series = || {
            self.operation_duration
                .get_or_create(&OperationLabels {
                    mcp_method_name: method.to_string(),
                    tenant: tenant.to_string(),
                    error_type: error_type.to_string(),
                })
                .clone()
        };
        match known.filter(|_| error_type.is_empty()) {
            // The common case: a cached series of this tenant and method, recorded in both.
            Some(i) => {
                let observe = |s: &OperationSeries| {
                    s[i].get_or_init(|| Both {
                        prometheus: series(),
                        otel: otel().map(|o| o.operation.bind(&otel_attrs())),
                    })
                    .observe(took.as_secs_f64());
                };
                let seen = self.operation_ok.read().get(tenant).map(&observe);
                if seen.is_none() {
                    observe(self.operation_ok.write().entry(tenant.into()).or_default());
                }
            }
            None => {
                series().observe(took.as_secs_f64());
                if let Some(o) = otel() {
                    o.operation.record(took.as_secs_f64(), &otel_attrs());
                }
            }
        }
    }

    /// A session started (+1) or ended here (-1, with its lifetime).
    pub fn session_started(&self, tenant: &str) {
        self.sessions_active
            .get_or_create(&Self::tenant(tenant))
            .inc();
        if let Some(o) = otel() {
            o.sessions_active.add(1, &tenant_attr(tenant));
        }
    }

    pub fn session_ended(&self, tenant: &str, lived: Duration) {
        let labels = Self::tenant(tenant);
        self.sessions_active.get_or_create(&labels).dec();
        self.session_duration
            .get_or_create(&labels)
            .observe(lived.as_secs_f64());
        if let Some(o) = otel() {
            let attrs = tenant_attr(tenant);
            o.sessions_active.add(-1, &attrs);
            o.session.record(lived.as_secs_f64(), &attrs);
        }
    }

    /// One HTTP connection opened (`1`) or closed (`-1`) on the main port.
    pub fn http_connections(&self, delta: i64) {
        self.http_connections_open.inc_by(delta);
        if let Some(o) = otel() {
            o.http_connections.add(delta, &[]);
        }
    }

    fn sse_streams(&self, tenant: &str, delta: i64) {
        self.sse_streams_open
            .get_or_create(&Self::tenant(tenant))
            .inc_by(delta);
        if let Some(o) = otel() {
            o.sse_open.add(delta, &tenant_attr(tenant));
        }
    }

    /// One webhook round: `ok`, `error` or `failed`.
    pub fn webhook(&self, tenant: &str, outcome: &str, took: Duration) {
        self.webhook_duration
            .get_or_create(&OutcomeLabels {
                tenant: tenant.to_string(),
                outcome: outcome.to_string(),
            })
            .observe(took.as_secs_f64());
        if let Some(o) = otel() {
            o.webhook.record(
                took.as_secs_f64(),
                &[
                    KeyValue::new("tenant", tenant.to_string()),
                    KeyValue::new("outcome", outcome.to_string()),
                ],
            );
        }
    }

    pub fn oauth_grant(&self, tenant: &str, grant_type: &str, outcome: &str) {
        self.oauth_grants
            .get_or_create(&GrantLabels {
                tenant: tenant.to_string(),
                grant_type: grant_type.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
        if let Some(o) = otel() {
            o.oauth_grants.add(
                1,
                &[
                    KeyValue::new("tenant", tenant.to_string()),
                    KeyValue::new("grant_type", grant_type.to_string()),
                    KeyValue::new("outcome", outcome.to_string()),
                ],
            );
        }
    }

    pub fn oauth_registration(&self, tenant: &str, outcome: &str) {
        self.oauth_registrations
            .get_or_create(&OutcomeLabels {
                tenant: tenant.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
        if let Some(o) = otel() {
            o.oauth_registrations.add(
                1,
                &[
                    KeyValue::new("tenant", tenant.to_string()),
                    KeyValue::new("outcome", outcome.to_string()),
                ],
            );
        }
    }

    pub fn rate_limited(&self, tenant: &str) {
        self.rate_limited.get_or_create(&Self::tenant(tenant)).inc();
        if let Some(o) = otel() {
            o.rate_limited.add(1, &tenant_attr(tenant));
        }
    }

    pub fn session_taken_over(&self, tenant: &str) {
        self.session_takeovers
            .get_or_create(&Self::tenant(tenant))
            .inc();
        if let Some(o) = otel() {
            o.session_takeovers.add(1, &tenant_attr(tenant));
        }
    }

    /// `n` spans left (`exported`), were refused (`failed`) or found the queue full (`dropped`).
    pub fn spans(&self, outcome: &str, n: u64) {
        self.telemetry_spans
            .get_or_create(&SpanLabels {
                outcome: outcome.to_string(),
            })
            .inc_by(n);
    }

    pub fn quota_unchecked(&self, tenant: &str) {
        self.quota_unchecked
            .get_or_create(&Self::tenant(tenant))
            .inc();
        if let Some(o) = otel() {
            o.quota_unchecked.add(1, &tenant_attr(tenant));
        }
    }

    pub fn http_request(&self, route: &'static str, status: u16) {
        let series = || HttpLabels {
            route: route.into(),
            status,
        };
        let common = ROUTE_GROUPS
            .iter()
            .position(|group| *group == route)
            .zip(match status {
                200 => Some(0),
                202 => Some(1),
                _ => None,
            });
        let otel_attrs = || {
            [
                KeyValue::new("route", route),
                KeyValue::new("http.response.status_code", i64::from(status)),
            ]
        };
        match common {
            Some((group, status_index)) => {
                self.http_common[group * 2 + status_index]
                    .get_or_init(|| Both {
                        prometheus: self.http_requests.get_or_create(&series()).clone(),
                        otel: otel().map(|o| o.http_requests.bind(&otel_attrs())),
                    })
                    .inc();
            }
            None => {
                self.http_requests.get_or_create(&series()).inc();
                if let Some(o) = otel() {
                    o.http_requests.add(1, &otel_attrs());
                }
            }
        }
    }

    pub fn event_log_appended(&self, tenant: &str, events: u64) {
        self.event_log_appends
            .get_or_create(&Self::tenant(tenant))
            .inc_by(events);
        if let Some(o) = otel() {
            o.event_appends.add(events, &tenant_attr(tenant));
        }
    }

    /// A resumption: `replayed`, `unknown` or `failed`.
    pub fn event_log_replayed(&self, tenant: &str, outcome: &str) {
        self.event_log_replays
            .get_or_create(&OutcomeLabels {
                tenant: tenant.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
        if let Some(o) = otel() {
            o.event_replays.add(
                1,
                &[
                    KeyValue::new("tenant", tenant.to_string()),
                    KeyValue::new("outcome", outcome.to_string()),
                ],
            );
        }
    }

    fn pending_client_requests(&self, labels: &MethodLabels, delta: i64) {
        self.pending_client_requests
            .get_or_create(labels)
            .inc_by(delta);
        if let Some(o) = otel() {
            o.pending.add(
                delta,
                &[
                    KeyValue::new("tenant", labels.tenant.clone()),
                    KeyValue::new("mcp.method.name", labels.method.clone()),
                ],
            );
        }
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

/// A response was given up for the write timeout (called by the vendored HTTP dispatchers).
pub fn write_timed_out() {
    global().http_write_timeouts.inc();
    if let Some(o) = otel() {
        o.http_write_timeouts.add(1, &[]);
    }
}

/// Counts an open SSE stream while it lives.
pub struct StreamGauge(String);

/// A stream went over its buffer (`session::channel`).
pub fn stream_overflowed() {
    global().sse_streams_overflowed.inc();
}

impl StreamGauge {
    pub fn open(tenant: &str) -> StreamGauge {
        global().sse_streams(tenant, 1);
        StreamGauge(tenant.to_string())
    }
}

impl Drop for StreamGauge {
    fn drop(&mut self) {
        global().sse_streams(&self.0, -1);
    }
}

/// Counts a server-to-client request while it awaits the client's answer.
pub struct PendingGauge(MethodLabels);

impl PendingGauge {
    pub fn open(tenant: &str, method: &str) -> PendingGauge {
        let labels = MethodLabels {
            tenant: tenant.to_string(),
            method: method.to_string(),
        };
        global().pending_client_requests(&labels, 1);
        PendingGauge(labels)
    }
}

impl Drop for PendingGauge {
    fn drop(&mut self) {
        global().pending_client_requests(&self.0, -1);
    }
}

/// The OpenTelemetry instruments, once OTLP export is on.
struct Otel {
    operation: OtelHistogram<f64>,
    session: OtelHistogram<f64>,
    sessions_active: UpDownCounter<i64>,
    sse_open: UpDownCounter<i64>,
    http_connections: UpDownCounter<i64>,
    webhook: OtelHistogram<f64>,
    oauth_grants: OtelCounter<u64>,
    oauth_registrations: OtelCounter<u64>,
    rate_limited: OtelCounter<u64>,
    quota_unchecked: OtelCounter<u64>,
    session_takeovers: OtelCounter<u64>,
    http_write_timeouts: OtelCounter<u64>,
    http_requests: OtelCounter<u64>,
    event_appends: OtelCounter<u64>,
    event_replays: OtelCounter<u64>,
    pending: UpDownCounter<i64>,
}

static OTEL: OnceLock<Otel> = OnceLock::new();

fn otel() -> Option<&'static Otel> {
    OTEL.get()
}

fn tenant_attr(tenant: &str) -> [KeyValue; 1] {
    [KeyValue::new("tenant", tenant.to_string())]
}

/// Also records every metric into OpenTelemetry instruments of `provider` (OTLP export).
pub fn export_to(provider: &opentelemetry_sdk::metrics::SdkMeterProvider) {
    use opentelemetry::metrics::MeterProvider;
    let meter = provider.meter("mcp-harbor");
    // The boundaries the MCP semantic conventions recommend for both durations.
    let buckets = vec![
        0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    ];
    let _ = OTEL.set(Otel {
        operation: meter
            .f64_histogram("mcp.server.operation.duration")
            .with_unit("s")
            .with_description("MCP request handling time")
            .with_boundaries(buckets.clone())
            .build(),
        session: meter
            .f64_histogram("mcp.server.session.duration")
            .with_unit("s")
            .with_description("MCP session lifetime on this replica")
            .with_boundaries(buckets.clone())
            .build(),
        sessions_active: meter
            .i64_up_down_counter("mcp_harbor.sessions.active")
            .with_description("MCP sessions held by this replica")
            .build(),
        sse_open: meter
            .i64_up_down_counter("mcp_harbor.sse.streams.open")
            .with_description("Open SSE response streams")
            .build(),
        http_connections: meter
            .i64_up_down_counter("mcp_harbor.http.connections.open")
            .with_description("Open HTTP connections on the main port")
            .build(),
        webhook: meter
            .f64_histogram("mcp_harbor.webhook.duration")
            .with_unit("s")
            .with_description("Webhook tool rounds by outcome")
            .with_boundaries(buckets)
            .build(),
        oauth_grants: meter
            .u64_counter("mcp_harbor.oauth.grants")
            .with_description("Token endpoint requests by grant type and outcome")
            .build(),
        oauth_registrations: meter
            .u64_counter("mcp_harbor.oauth.registrations")
            .with_description("Dynamic Client Registration requests by outcome")
            .build(),
        rate_limited: meter
            .u64_counter("mcp_harbor.rate_limited")
            .with_description("Requests refused by a tenant's rate limit")
            .build(),
        quota_unchecked: meter
            .u64_counter("mcp_harbor.quota_unchecked")
            .with_description(
                "Requests let in unchecked across replicas (shared state unreachable)",
            )
            .build(),
        session_takeovers: meter
            .u64_counter("mcp_harbor.session.takeovers")
            .with_description(
                "Sessions restored here after another replica held them (died, drained or fenced)",
            )
            .build(),
        http_write_timeouts: meter
            .u64_counter("mcp_harbor.http.write_timeouts")
            .with_description(
                "Responses given up because their client took none of their bytes for the write timeout",
            )
            .build(),
        http_requests: meter
            .u64_counter("mcp_harbor.http.requests")
            .with_description("HTTP requests by route group and status")
            .build(),
        event_appends: meter
            .u64_counter("mcp_harbor.event_log.appends")
            .with_description("SSE events appended to the event log")
            .build(),
        event_replays: meter
            .u64_counter("mcp_harbor.event_log.replays")
            .with_description("Stream resumptions by outcome")
            .build(),
        pending: meter
            .i64_up_down_counter("mcp_harbor.client_requests.pending")
            .with_description("Server-to-client requests awaiting the client's answer")
            .build(),
    });
}

/// What [`route_group`] answers.
const ROUTE_GROUPS: [&str; 4] = ["mcp", "oauth", "admin", "other"];

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
        .and_then(|v| crate::auth::operator_token(v.as_bytes()))
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

/// `GET /metrics` (OpenMetrics text).
pub async fn scrape() -> actix_web::HttpResponse {
    actix_web::HttpResponse::Ok()
        // What prometheus_client writes: OpenMetrics text (`# EOF`, counters' `_total` samples
        // under their family's name), which a 0.0.4 text parser would misread.
        .content_type("application/openmetrics-text; version=1.0.0; charset=utf-8")
        .body(global().render())
}

/// The configured metrics token (app data).
pub struct MetricsToken(pub secrecy::SecretString);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_counted_through_the_common_series_show_in_the_family() {
        let metrics = Metrics::new();
        for group in [
            "/t/a/mcp",
            "/t/a/oauth/token",
            "/admin/v1/tenants",
            "/healthz",
        ] {
            assert!(ROUTE_GROUPS.contains(&route_group(group)), "{group}");
        }
        metrics.http_request("mcp", 200);
        metrics.http_request("mcp", 200);
        metrics.http_request("mcp", 202);
        metrics.http_request("mcp", 404);
        metrics.http_request("admin", 200);
        let text = metrics.render();
        let count = |route: &str, status: u16| {
            let series =
                format!("mcp_harbor_http_requests_total{{route=\"{route}\",status=\"{status}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(&series))
                .map(|v| v.trim().to_string())
        };
        assert_eq!(count("mcp", 200).as_deref(), Some("2"), "{text}");
        assert_eq!(count("mcp", 202).as_deref(), Some("1"));
        assert_eq!(count("mcp", 404).as_deref(), Some("1"));
        assert_eq!(count("admin", 200).as_deref(), Some("1"));
        assert_eq!(
            count("oauth", 200),
            None,
            "no series before its first request"
        );
    }

    #[test]
    fn operations_recorded_through_the_cached_series_show_in_the_family() {
        let metrics = Metrics::new();
        let ms = Duration::from_millis(1);
        metrics.operation("tools/call", "a", "", ms);
        metrics.operation("tools/call", "a", "", ms);
        metrics.operation("tools/call", "b", "", ms);
        metrics.operation("tools/list", "a", "", ms);
        metrics.operation("tools/call", "a", "-32602", ms);
        metrics.operation("no/such", "a", "", ms);
        let text = metrics.render();
        let count = |method: &str, tenant: &str, error: &str| {
            let series = format!("mcp_server_operation_duration_seconds_count{{mcp_method_name=\"{method}\",tenant=\"{tenant}\",error_type=\"{error}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(&series))
                .map(|v| v.trim().to_string())
        };
        assert_eq!(count("tools/call", "a", "").as_deref(), Some("2"), "{text}");
        assert_eq!(count("tools/call", "b", "").as_deref(), Some("1"));
        assert_eq!(count("tools/list", "a", "").as_deref(), Some("1"));
        assert_eq!(count("tools/call", "a", "-32602").as_deref(), Some("1"));
        assert_eq!(count("other", "a", "").as_deref(), Some("1"));
    }
}
