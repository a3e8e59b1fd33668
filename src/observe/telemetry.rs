//! Telemetry in one place: the log subscriber (env filter, plain text or JSON lines carrying
//! `trace_id`/`span_id`), OpenTelemetry traces and metrics over OTLP (gRPC or HTTP/protobuf; off
//! unless an endpoint is configured here or in the standard `OTEL_EXPORTER_OTLP_*` variables),
//! and the W3C trace-context helpers the edge, the session and the webhook client use.
//!
//! Spans are `tracing` spans turned into OpenTelemetry spans by `tracing-opentelemetry`. The
//! per-request spans (HTTP server, MCP server) are only created when export is on
//! ([`tracing_enabled`]), and the store and Redis spans are at `debug` level, seen only by the
//! OpenTelemetry layer: with export off the hot path pays nothing for them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{SpanKind, TraceContextExt, TracerProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Span, Subscriber};
use tracing_subscriber::filter::{DynFilterFn, EnvFilter};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

use crate::config::{Config, LogConfig, TelemetryConfig};
use crate::observe::trace::{RequestSpan, Start};

static TRACING: AtomicBool = AtomicBool::new(false);
/// The share of new traces kept (f64 bits; 1.0 until configured).
static ROOT_RATIO: AtomicU64 = AtomicU64::new(0x3FF0_0000_0000_0000);

pub use super::throttle::Throttled;

/// Whether a request that continues no trace starts one (`telemetry.sampling_ratio`).
fn sample_root() -> bool {
    let ratio = f64::from_bits(ROOT_RATIO.load(Ordering::Relaxed));
    ratio >= 1.0 || (ratio > 0.0 && rand::random::<f64>() < ratio)
}

/// The share of new traces `OTEL_TRACES_SAMPLER` (and `OTEL_TRACES_SAMPLER_ARG`) asks for, when
/// set: `always_on`, `always_off`, `traceidratio`, each also `parentbased_` (a sampled parent is
/// always followed here).
fn sampler_from_env() -> Option<f64> {
    let sampler = std::env::var("OTEL_TRACES_SAMPLER").ok()?;
    let arg = || {
        std::env::var("OTEL_TRACES_SAMPLER_ARG")
            .ok()
            .and_then(|a| a.trim().parse::<f64>().ok())
            .map(|r| r.clamp(0.0, 1.0))
            .unwrap_or(1.0)
    };
    match sampler.trim().trim_start_matches("parentbased_") {
        "always_on" => Some(1.0),
        "always_off" => Some(0.0),
        "traceidratio" => Some(arg()),
        _ => None,
    }
}

/// Whether spans are exported (per-request spans are created only then).
pub fn tracing_enabled() -> bool {
    TRACING.load(Ordering::Relaxed)
}

/// Keeps the exporters alive; `shutdown` flushes what is buffered (called once the server has
/// stopped, so the last requests' spans and a final metrics export are not lost).
#[derive(Default)]
pub struct Telemetry {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
    /// Runs the gRPC (tonic) exporters' connections, independent of the server's runtimes.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Telemetry {
    pub fn shutdown(mut self) {
        TRACING.store(false, Ordering::Relaxed);
        crate::observe::trace::shutdown(Duration::from_secs(5));
        if let Some(tracer) = self.tracer.take() {
            if let Err(e) = tracer.shutdown() {
                eprintln!("mcp-harbor: flushing spans failed: {e}");
            }
        }
        if let Some(meter) = self.meter.take() {
            if let Err(e) = meter.shutdown() {
                eprintln!("mcp-harbor: flushing metrics failed: {e}");
            }
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

/// Logging only (commands other than `serve`); a second call (tests) is a no-op.
pub fn init_logging(config: &LogConfig) {
    let _ = tracing_subscriber::registry()
        .with(log_layer(config))
        .try_init();
}

/// Logging plus, when configured, OpenTelemetry export of traces and metrics.
pub fn init_telemetry(config: &Config) -> Telemetry {
    let export = Export::resolve(&config.telemetry);
    let Some(export) = export else {
        init_logging(&config.log);
        return Telemetry::default();
    };
    let resource = resource(&config.telemetry, &config.cluster.replica_id);
    let mut telemetry = Telemetry::default();
    if export.protocol == Protocol::Grpc {
        // tonic needs a Tokio runtime for its connections; the server's are per-worker and end
        // before the final flush, so the exporters get their own small one.
        match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("otlp-export")
            .enable_all()
            .build()
        {
            Ok(rt) => telemetry.runtime = Some(rt),
            Err(e) => {
                eprintln!("mcp-harbor: OpenTelemetry export is off: no runtime for gRPC ({e})");
                init_logging(&config.log);
                return telemetry;
            }
        }
    }
    let _guard = telemetry.runtime.as_ref().map(|rt| rt.enter());
    let mut problems = Vec::new();
    if config.telemetry.traces {
        match export.span_sender(telemetry.runtime.as_ref().map(|rt| rt.handle().clone())) {
            Ok(sender) => {
                let t = &config.telemetry;
                let batching = crate::observe::trace::Batching {
                    queue: t.span_queue,
                    batch: t.span_batch,
                    interval: Duration::from_millis(t.span_interval_ms),
                };
                match crate::observe::trace::start(sender, &resource, batching) {
                    Ok(()) => {
                        // New traces are sampled at the edge (`sample_root`), before any span is
                        // built: an unsampled request then costs no span at all. A sampled
                        // parent is followed, an unsampled one is not recorded.
                        let ratio = sampler_from_env().unwrap_or(t.sampling_ratio);
                        ROOT_RATIO.store(ratio.to_bits(), Ordering::Relaxed);
                        // The `tracing` spans (webhook, store, Redis) are SDK spans; they leave
                        // by the same queue.
                        telemetry.tracer = Some(
                            SdkTracerProvider::builder()
                                .with_span_processor(crate::observe::trace::QueueProcessor)
                                .with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)))
                                .with_resource(resource.clone())
                                .build(),
                        );
                    }
                    Err(e) => problems.push(format!("traces: {e}")),
                }
            }
            Err(e) => problems.push(format!("traces: {e}")),
        }
    }
    if config.telemetry.metrics {
        match export.metric_exporter() {
            Ok(exporter) => {
                let reader = opentelemetry_sdk::metrics::PeriodicReader::builder(exporter)
                    .with_interval(Duration::from_millis(
                        config.telemetry.metrics_interval_ms.max(100),
                    ))
                    .build();
                let provider = SdkMeterProvider::builder()
                    .with_reader(reader)
                    .with_resource(resource)
                    .build();
                crate::observe::metrics::export_to(&provider);
                telemetry.meter = Some(provider);
            }
            Err(e) => problems.push(format!("metrics: {e}")),
        }
    }
    let otel_layer = telemetry.tracer.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("mcp-harbor"))
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            // The request spans (`trace::RequestSpan`) start traces; a `tracing` span (store,
            // Redis, webhook) only continues one: background work makes no orphan traces.
            .with_filter(
                DynFilterFn::new(|meta, _| exported(meta) && (!meta.is_span() || in_trace()))
                    .with_callsite_filter(|meta| {
                        if exported(meta) {
                            tracing::subscriber::Interest::sometimes()
                        } else {
                            tracing::subscriber::Interest::never()
                        }
                    }),
            )
    });
    TRACING.store(otel_layer.is_some(), Ordering::Relaxed);
    let _ = tracing_subscriber::registry()
        .with(log_layer(&config.log))
        .with(otel_layer)
        .try_init();
    for problem in problems {
        tracing::error!(%problem, "OpenTelemetry export could not start");
    }
    tracing::info!(
        endpoint = %export.endpoint.as_deref().unwrap_or("(from OTEL_EXPORTER_OTLP_* variables)"),
        protocol = ?export.protocol,
        traces = telemetry.tracer.is_some(),
        metrics = telemetry.meter.is_some(),
        "OpenTelemetry export on"
    );
    telemetry
}

/// What the OpenTelemetry layer sees: the platform's spans, and its warnings and errors (as span
/// events).
fn exported(meta: &tracing::Metadata<'_>) -> bool {
    meta.target().starts_with("mcp_harbor") && (meta.is_span() || *meta.level() <= Level::WARN)
}

fn log_layer<S>(config: &LogConfig) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&config.filter));
    // Colour codes only on a terminal: a log file or a collector gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    if config.format == "json" {
        layer.event_format(JsonLines).with_filter(filter).boxed()
    } else {
        layer.with_filter(filter).boxed()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Grpc,
    HttpProtobuf,
}

/// Builds an OTLP exporter of either signal over the configured protocol (the two builders
/// share no trait to be generic over).
macro_rules! exporter {
    ($export:expr, $kind:ty, $path:literal) => {{
        let export = $export;
        let built = match export.protocol {
            Protocol::Grpc => {
                let mut b = <$kind>::builder()
                    .with_tonic()
                    .with_metadata(export.metadata());
                if let Some(e) = export.endpoint_for("") {
                    b = b.with_endpoint(e);
                }
                b.build()
            }
            Protocol::HttpProtobuf => {
                let mut b = <$kind>::builder()
                    .with_http()
                    .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                    .with_headers(export.headers.clone());
                if let Some(e) = export.endpoint_for($path) {
                    b = b.with_endpoint(e);
                }
                b.build()
            }
        };
        built.map_err(|e| e.to_string())
    }};
}

/// Where and how to export, from `[telemetry]` and the standard variables.
struct Export {
    /// Set in the configuration (else the exporter reads `OTEL_EXPORTER_OTLP_*ENDPOINT`).
    endpoint: Option<String>,
    protocol: Protocol,
    headers: HashMap<String, String>,
}

impl Export {
    fn resolve(config: &TelemetryConfig) -> Option<Export> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return None;
        }
        let endpoint = (!config.otlp_endpoint.is_empty()).then(|| config.otlp_endpoint.clone());
        let from_env = env("OTEL_EXPORTER_OTLP_ENDPOINT")
            .or_else(|| env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
            .or_else(|| env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"));
        if endpoint.is_none() && from_env.is_none() {
            return None;
        }
        let protocol = if config.otlp_protocol.is_empty() {
            env("OTEL_EXPORTER_OTLP_PROTOCOL").unwrap_or_else(|| "http/protobuf".into())
        } else {
            config.otlp_protocol.clone()
        };
        let protocol = if protocol == "grpc" {
            Protocol::Grpc
        } else {
            Protocol::HttpProtobuf
        };
        let headers = config
            .otlp_headers
            .iter()
            .map(|(k, v)| {
                use secrecy::ExposeSecret;
                (k.clone(), v.expose_secret().to_string())
            })
            .collect();
        Some(Export {
            endpoint,
            protocol,
            headers,
        })
    }

    /// The configured base endpoint with a signal's path (HTTP; gRPC takes the base as is).
    fn endpoint_for(&self, path: &str) -> Option<String> {
        let base = self.endpoint.as_deref()?;
        Some(match self.protocol {
            Protocol::Grpc => base.to_string(),
            Protocol::HttpProtobuf => format!("{}{path}", base.trim_end_matches('/')),
        })
    }

    fn metadata(&self) -> opentelemetry_otlp::tonic_types::metadata::MetadataMap {
        let mut headers = reqwest::header::HeaderMap::new();
        for (k, v) in &self.headers {
            if let (Ok(k), Ok(v)) = (
                reqwest::header::HeaderName::from_bytes(k.as_bytes()),
                reqwest::header::HeaderValue::from_str(v),
            ) {
                headers.insert(k, v);
            }
        }
        opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(headers)
    }

    /// Where spans go: OTLP/HTTP encoded by `trace` when the endpoint is configured here (and no
    /// `OTEL_*` variable changes the request), else the SDK's exporter.
    fn span_sender(
        &self,
        runtime: Option<tokio::runtime::Handle>,
    ) -> Result<crate::observe::trace::Sender, String> {
        let env_shapes_request = [
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_COMPRESSION",
            "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
            "OTEL_EXPORTER_OTLP_CERTIFICATE",
            "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
        ]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
        // The standard variables' headers (the traces' own win over the common ones), then
        // `telemetry.otlp_headers` over both; a value that needs percent-decoding leaves the
        // request to the SDK's exporter.
        let mut headers: Vec<(String, String)> = Vec::new();
        let mut set = |k: &str, v: &str| {
            headers.retain(|(hk, _)| !hk.eq_ignore_ascii_case(k));
            headers.push((k.to_string(), v.to_string()));
        };
        let mut plain = true;
        for var in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            if let Ok(value) = std::env::var(var) {
                match plain_headers(&value) {
                    Some(pairs) => pairs.iter().for_each(|(k, v)| set(k, v)),
                    None => plain = false,
                }
            }
        }
        for (k, v) in &self.headers {
            set(k, v);
        }
        if let (Protocol::HttpProtobuf, Some(url), false, true) = (
            self.protocol,
            self.endpoint_for("/v1/traces"),
            env_shapes_request,
            plain,
        ) {
            return Ok(crate::observe::trace::Sender::Http { url, headers });
        }
        let exporter = exporter!(self, opentelemetry_otlp::SpanExporter, "/v1/traces")?;
        Ok(crate::observe::trace::Sender::Sdk {
            exporter: Box::new(exporter),
            runtime,
        })
    }

    fn metric_exporter(&self) -> Result<opentelemetry_otlp::MetricExporter, String> {
        exporter!(self, opentelemetry_otlp::MetricExporter, "/v1/metrics")
    }
}

/// `k=v,k2=v2` as the `OTEL_EXPORTER_OTLP_*HEADERS` variables write them; `None` when a key or
/// value is percent-encoded (the SDK's exporter decodes those) or a pair has no `=`.
fn plain_headers(value: &str) -> Option<Vec<(String, String)>> {
    value
        .split(',')
        .filter(|pair| !pair.trim().is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=')?;
            let (k, v) = (k.trim(), v.trim());
            (!k.is_empty() && !pair.contains('%')).then(|| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// service.name (`OTEL_SERVICE_NAME` wins), service.version, service.instance.id (the replica),
/// plus `OTEL_RESOURCE_ATTRIBUTES`.
fn resource(config: &TelemetryConfig, replica_id: &str) -> Resource {
    let mut builder = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        builder = builder.with_service_name(config.service_name.clone());
    }
    builder = builder.with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    if !replica_id.is_empty() {
        builder =
            builder.with_attribute(KeyValue::new("service.instance.id", replica_id.to_string()));
    }
    builder.build()
}

// ---------------------------------------------------------------------------------------------
// Trace context (W3C `traceparent` / `tracestate`)

struct HeaderCarrier<'a>(&'a actix_web::http::header::HeaderMap);

impl Extractor for HeaderCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

struct MetaCarrier<'a>(&'a Map<String, Value>);

impl Extractor for MetaCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// The trace context a request's headers carry (empty when none or malformed).
fn from_headers(headers: &actix_web::http::header::HeaderMap) -> opentelemetry::Context {
    TraceContextPropagator::new().extract(&HeaderCarrier(headers))
}

/// The trace context in a JSON-RPC message's `params._meta` (`traceparent`, `tracestate`), as
/// the OpenTelemetry MCP conventions carry it; `None` when absent or malformed.
pub fn from_meta(params: Option<&Value>) -> Option<opentelemetry::Context> {
    let meta = params?.get("_meta")?.as_object()?;
    meta.get("traceparent")?;
    let cx = TraceContextPropagator::new().extract(&MetaCarrier(meta));
    cx.span().span_context().is_valid().then_some(cx)
}

/// Whether a sampled trace is running here (a request span or a `tracing` span is current).
pub fn in_trace() -> bool {
    opentelemetry::Context::map_current(|cx| cx.span().span_context().is_valid())
}

/// `traceparent`/`tracestate` headers continuing the current span (empty when not tracing).
pub fn outgoing_headers() -> Vec<(String, String)> {
    let mut headers = HeadersOut(Vec::new());
    if tracing_enabled() {
        opentelemetry::Context::map_current(|cx| {
            if cx.span().span_context().is_valid() {
                TraceContextPropagator::new().inject_context(cx, &mut headers);
            }
        });
    }
    headers.0
}

struct HeadersOut(Vec<(String, String)>);

impl Injector for HeadersOut {
    fn set(&mut self, key: &str, value: String) {
        self.0.push((key.to_string(), value));
    }
}

// ---------------------------------------------------------------------------------------------
// Spans

/// The server span of one HTTP request (continuing a `traceparent` header), or none when not
/// exporting or not sampled. `route_of` gives the `http.route` of the request's path (asked only
/// for a span that is made).
pub fn http_span(
    req: &actix_web::dev::ServiceRequest,
    route_of: fn(&str) -> &'static str,
) -> RequestSpan {
    if !tracing_enabled() {
        return RequestSpan::none();
    }
    let parent = from_headers(req.headers());
    if !parent.span().span_context().is_valid() && !sample_root() {
        return RequestSpan::none();
    }
    // The path as the router reads it (percent-encoded characters decoded).
    let route = route_of(req.match_info().as_str());
    let method = http_method(req.method());
    // An elicitation page's id is its capability on open tenants: traces get the route.
    let path: opentelemetry::Value = if route.contains("/elicitations/") {
        route.into()
    } else {
        req.path().to_string().into()
    };
    // Room for the status code (`http_done`).
    let mut attributes = Vec::with_capacity(4);
    attributes.extend([
        KeyValue::new("http.request.method", method),
        KeyValue::new("http.route", route),
        KeyValue::new("url.path", path),
    ]);
    RequestSpan::start(
        &parent,
        Start {
            name: format!("{method} {route}").into(),
            kind: SpanKind::Server,
            attributes,
            links: Vec::new(),
        },
    )
}

/// The request method as a static string (`_OTHER` for extension methods, as the HTTP
/// conventions name them).
fn http_method(method: &actix_web::http::Method) -> &'static str {
    use actix_web::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "_OTHER",
    }
}

/// Records an HTTP response on its span (5xx are errors, per the HTTP conventions).
pub fn http_done(span: &RequestSpan, status: u16) {
    span.set([KeyValue::new(
        "http.response.status_code",
        i64::from(status),
    )]);
    if status >= 500 {
        span.error(None);
    }
}

/// What an MCP server span is about.
pub struct McpRequest<'a> {
    pub method: &'a str,
    pub params: Option<&'a Value>,
    /// The id as the client wrote it, a string without JSON's quotes (as client spans record it).
    pub request_id: String,
    pub session_id: Option<&'a str>,
    pub protocol_version: Option<&'a str>,
    pub tenant: &'a str,
    pub client_id: Option<&'a str>,
}

/// The server span of one JSON-RPC request, per the OpenTelemetry MCP semantic conventions:
/// named `{mcp.method.name} {target}`, a child of the trace context in `params._meta` when
/// there is one (then linked to the HTTP request's span), else of the current (HTTP) span.
pub fn mcp_span(req: McpRequest<'_>) -> RequestSpan {
    if !tracing_enabled() {
        return RequestSpan::none();
    }
    let meta_parent = from_meta(req.params);
    let current = opentelemetry::Context::current();
    // No trace to continue: the request was not sampled at the edge (or came another way).
    if meta_parent.is_none() && !current.span().span_context().is_valid() {
        return RequestSpan::none();
    }
    let field = |name: &str| req.params.and_then(|p| p.get(name)).and_then(Value::as_str);
    let (tool, prompt, uri) = match req.method {
        "tools/call" => (field("name"), None, None),
        "prompts/get" => (None, field("name"), None),
        m if m.starts_with("resources/") => (None, None, field("uri")),
        _ => (None, None, None),
    };
    let target = tool.or(prompt);
    let known = crate::protocol::mcp::known_method_index(req.method)
        .map(|i| crate::protocol::mcp::KNOWN_METHODS[i]);
    let method = known.unwrap_or("other");
    let name: std::borrow::Cow<'static, str> = match target {
        Some(t) => format!("{method} {t}").into(),
        None => method.into(),
    };
    let text = |s: &str| -> opentelemetry::Value { s.to_string().into() };
    // Room for every attribute, the outcome's included (`mcp_done`).
    let mut attributes = Vec::with_capacity(16);
    attributes.push(KeyValue::new(
        "mcp.method.name",
        match known {
            Some(m) => m.into(),
            None => text(req.method),
        },
    ));
    attributes.push(KeyValue::new("jsonrpc.request.id", req.request_id));
    if let Some(s) = req.session_id {
        attributes.push(KeyValue::new("mcp.session.id", text(s)));
    }
    if let Some(v) = req.protocol_version {
        let known = crate::protocol::ProtocolVersion::SUPPORTED
            .iter()
            .find(|s| **s == v);
        let value = match known {
            Some(s) => (*s).into(),
            None => text(v),
        };
        attributes.push(KeyValue::new("mcp.protocol.version", value));
    }
    if let Some(t) = tool {
        attributes.push(KeyValue::new("gen_ai.tool.name", text(t)));
        attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
    }
    if let Some(p) = prompt {
        attributes.push(KeyValue::new("gen_ai.prompt.name", text(p)));
    }
    if let Some(u) = uri {
        attributes.push(KeyValue::new("mcp.resource.uri", text(u)));
    }
    attributes.push(KeyValue::new("network.transport", "tcp"));
    attributes.push(KeyValue::new("network.protocol.name", "http"));
    attributes.push(KeyValue::new("tenant", text(req.tenant)));
    if let Some(c) = req.client_id {
        attributes.push(KeyValue::new("oauth.client_id", text(c)));
    }
    let mut links = Vec::new();
    let parent = match meta_parent {
        Some(cx) => {
            let transport = current.span().span_context().clone();
            if transport.is_valid() {
                links.push(opentelemetry::trace::Link::with_context(transport));
            }
            cx
        }
        None => current,
    };
    RequestSpan::start(
        &parent,
        Start {
            name,
            kind: SpanKind::Server,
            attributes,
            links,
        },
    )
}

/// Records a JSON-RPC outcome on its server span: `error.type` (the JSON-RPC code, or
/// `tool_error` for a tool result with `isError: true`), `rpc.response.status_code`, status.
pub fn mcp_done(
    span: &RequestSpan,
    error_code: Option<i64>,
    tool_error: bool,
    message: Option<&str>,
) {
    if span.is_none() {
        return;
    }
    if let Some(code) = error_code {
        let code = code.to_string();
        span.set([
            KeyValue::new("error.type", code.clone()),
            KeyValue::new("rpc.response.status_code", code),
        ]);
    } else if tool_error {
        span.set([KeyValue::new("error.type", "tool_error")]);
    } else {
        return;
    }
    span.error(message);
}

/// The MCP server span of a request (none, built from nothing, unless traces are exported): in
/// a session (`session`), or stateless (`None`).
pub fn request_span(
    req: &crate::protocol::Request,
    session: Option<&str>,
    protocol_version: Option<&str>,
    tenant: &str,
    client_id: Option<&str>,
) -> RequestSpan {
    if !tracing_enabled() {
        return RequestSpan::none();
    }
    mcp_span(McpRequest {
        method: &req.method,
        params: req.params.as_ref(),
        request_id: match &req.id {
            crate::protocol::jsonrpc::RequestId::String(s) => s.to_string(),
            other => other.to_string(),
        },
        session_id: session,
        protocol_version,
        tenant,
        client_id,
    })
}

/// Records a finished request: its `mcp.server.operation.duration` point and its span's outcome.
pub fn record_outcome(
    method: &str,
    tenant: &str,
    started: std::time::Instant,
    span: &RequestSpan,
    outcome: &Result<Value, crate::protocol::RpcError>,
) {
    let error_type = match outcome {
        Err(e) => e.code.to_string(),
        Ok(v) if v.get("isError").and_then(Value::as_bool) == Some(true) => "tool_error".into(),
        Ok(_) => String::new(),
    };
    crate::observe::metrics::global().operation(method, tenant, &error_type, started.elapsed());
    let error = outcome.as_ref().err();
    mcp_done(
        span,
        error.map(|e| e.code),
        error_type == "tool_error",
        error.map(|e| e.message.as_str()),
    );
}

/// The client span of one webhook round (a child of the running MCP span). Its `url.full` keeps
/// the scheme, host and port only (a path is `/REDACTED`; no user info, query or fragment): a
/// tenant's URL may carry a credential in any of them (`?code=…`, a Slack-style
/// `/services/T…/B…/secret` path), and spans leave for the tracing backend.
pub fn webhook_span(tool: &str, host: &str, url: &reqwest::Url) -> Span {
    if !tracing_enabled() || !in_trace() {
        return Span::none();
    }
    let mut url = url.clone();
    // Only cannot-be-a-base URLs refuse these; webhook URLs are http(s).
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    if !matches!(url.path(), "" | "/") {
        url.set_path("/REDACTED");
    }
    tracing::info_span!(
        target: "mcp_harbor::webhook",
        "webhook",
        otel.name = "POST",
        otel.kind = "client",
        http.request.method = "POST",
        server.address = %host,
        url.full = %url,
        gen_ai.tool.name = %tool,
        http.response.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

// ---------------------------------------------------------------------------------------------
// JSON log lines

/// One JSON object per line: timestamp, level, target, fields, the current span's name and,
/// inside a traced request, its `trace_id` and `span_id`.
struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let mut line = Map::new();
        let mut ts = String::new();
        if tracing_subscriber::fmt::time::SystemTime
            .format_time(&mut Writer::new(&mut ts))
            .is_ok()
        {
            line.insert("timestamp".into(), Value::String(ts));
        }
        let meta = event.metadata();
        line.insert("level".into(), Value::String(meta.level().to_string()));
        line.insert("target".into(), Value::String(meta.target().to_string()));
        let mut fields = JsonFields(Map::new());
        event.record(&mut fields);
        line.insert("fields".into(), Value::Object(fields.0));
        if let Some(span) = ctx.lookup_current() {
            line.insert("span".into(), Value::String(span.name().to_string()));
        }
        if tracing_enabled() {
            let sc = opentelemetry::Context::map_current(|cx| cx.span().span_context().clone());
            if sc.is_valid() {
                line.insert("trace_id".into(), Value::String(sc.trace_id().to_string()));
                line.insert("span_id".into(), Value::String(sc.span_id().to_string()));
            }
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}

struct JsonFields(Map<String, Value>);

impl Visit for JsonFields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().into(), Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0
            .insert(field.name().into(), Value::String(value.into()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), Value::Bool(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn otlp_header_variables_are_read_when_plain() {
        assert_eq!(
            plain_headers("api-key=abc+/=, x-team = red ,"),
            Some(vec![
                ("api-key".to_string(), "abc+/=".to_string()),
                ("x-team".to_string(), "red".to_string())
            ])
        );
        assert_eq!(plain_headers(""), Some(vec![]));
        assert_eq!(plain_headers("api-key=a%20b"), None);
        assert_eq!(plain_headers("no-equals-sign"), None);
    }

    #[test]
    fn meta_trace_context_is_read_and_bad_ones_ignored() {
        let params = serde_json::json!({"_meta": {
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}});
        let cx = from_meta(Some(&params)).expect("a valid traceparent");
        assert_eq!(
            cx.span().span_context().trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        let bad = serde_json::json!({"_meta": {"traceparent": "00-zz-yy-01"}});
        assert!(from_meta(Some(&bad)).is_none());
        assert!(from_meta(Some(&serde_json::json!({}))).is_none());
        assert!(from_meta(None).is_none());
    }
}
