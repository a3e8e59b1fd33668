//! The request spans and the one way spans leave the process.
//!
//! The two spans every request makes (the HTTP server span and the MCP server span) are built on
//! the OpenTelemetry API directly, not through the `tracing` bridge: a [`RequestSpan`] is an
//! `Arc` holding the span's [`SpanData`], its attributes written once, ended when its last handle
//! is dropped. While its work runs, its context is the current OpenTelemetry context, so the
//! spans still made through `tracing` (webhook rounds, store queries) and the JSON log lines find
//! it as their parent.
//!
//! Every finished span (request spans, and the `tracing` ones through [`QueueProcessor`]) goes to
//! one bounded queue; a thread of its own takes them in batches and exports them: OTLP/HTTP
//! encoded here straight from the span data (no intermediate protobuf structs), or the SDK's
//! exporter (gRPC, or an endpoint given only in `OTEL_*` variables). A full queue drops the span
//! and counts it; nothing on a request's path waits for the export.

use std::borrow::Cow;
use std::future::Future;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{
    Link, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{Context, KeyValue, Value};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter, SpanLinks, SpanProcessor};
use opentelemetry_sdk::Resource;

/// A request's server span, or nothing (not exporting, or not sampled). Clones share the span;
/// it ends when the last one is dropped.
#[derive(Clone, Default)]
pub struct RequestSpan(Option<Arc<Live>>);

struct Live {
    data: parking_lot::Mutex<Option<SpanData>>,
    /// The OpenTelemetry context with this span as its current span (what children continue).
    cx: Context,
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Some(mut span) = self.data.get_mut().take() {
            span.end_time = SystemTime::now();
            if let Some(p) = PIPELINE.get() {
                p.submit(span);
            }
        }
    }
}

/// What a new request span is.
pub struct Start {
    pub name: Cow<'static, str>,
    pub kind: SpanKind,
    pub attributes: Vec<KeyValue>,
    pub links: Vec<Link>,
}

impl RequestSpan {
    pub fn none() -> RequestSpan {
        RequestSpan(None)
    }

    pub fn is_none(&self) -> bool {
        self.0.is_none()
    }

    /// A span continuing `parent` (a new trace when `parent` has no valid span). `None` when
    /// spans are not exported, or the parent was not sampled (its trace is not recorded).
    pub fn start(parent: &Context, start: Start) -> RequestSpan {
        if PIPELINE.get().is_none() {
            return RequestSpan::none();
        }
        let parent_span = parent.span();
        let parent_cx = parent_span.span_context();
        let (trace_id, parent_id, parent_remote, state) = if parent_cx.is_valid() {
            if !parent_cx.is_sampled() {
                return RequestSpan::none();
            }
            (
                parent_cx.trace_id(),
                parent_cx.span_id(),
                parent_cx.is_remote(),
                parent_cx.trace_state().clone(),
            )
        } else {
            (
                new_trace_id(),
                SpanId::INVALID,
                false,
                TraceState::default(),
            )
        };
        let span_context =
            SpanContext::new(trace_id, new_span_id(), TraceFlags::SAMPLED, false, state);
        let data = SpanData {
            span_context,
            parent_span_id: parent_id,
            parent_span_is_remote: parent_remote,
            span_kind: start.kind,
            name: start.name,
            start_time: SystemTime::now(),
            end_time: UNIX_EPOCH,
            attributes: start.attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: scope().clone(),
        };
        let mut data = data;
        data.links.links = start.links;
        let cx = Context::new().with_remote_span_context(data.span_context.clone());
        RequestSpan(Some(Arc::new(Live {
            data: parking_lot::Mutex::new(Some(data)),
            cx,
        })))
    }

    /// Adds attributes (after the span started: its outcome).
    pub fn set(&self, attributes: impl IntoIterator<Item = KeyValue>) {
        if let Some(live) = &self.0 {
            if let Some(data) = live.data.lock().as_mut() {
                data.attributes.extend(attributes);
            }
        }
    }

    /// Marks the span failed.
    pub fn error(&self, description: Option<&str>) {
        if let Some(live) = &self.0 {
            if let Some(data) = live.data.lock().as_mut() {
                data.status = Status::Error {
                    description: description.unwrap_or_default().to_string().into(),
                };
            }
        }
    }

    /// The context whose current span this is (empty for none).
    pub fn context(&self) -> Context {
        self.0
            .as_ref()
            .map(|live| live.cx.clone())
            .unwrap_or_default()
    }

    /// Runs `f` with this span current (what `tracing` spans and logs made in `f` continue).
    pub fn in_scope<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.0 {
            Some(live) => {
                let _attached = live.cx.clone().attach();
                f()
            }
            None => f(),
        }
    }

    /// `future` polled with this span current; the span lives until the future is done.
    pub fn instrument<F: Future>(self, future: F) -> impl Future<Output = F::Output> {
        use opentelemetry::context::FutureExt as _;
        let cx = self.context();
        async move {
            let out = future.with_context(cx).await;
            drop(self);
            out
        }
    }
}

fn new_trace_id() -> TraceId {
    TraceId::from_bytes(rand::random::<u128>().max(1).to_be_bytes())
}

fn new_span_id() -> SpanId {
    SpanId::from_bytes(rand::random::<u64>().max(1).to_be_bytes())
}

fn scope() -> &'static opentelemetry::InstrumentationScope {
    static SCOPE: OnceLock<opentelemetry::InstrumentationScope> = OnceLock::new();
    SCOPE.get_or_init(|| {
        opentelemetry::InstrumentationScope::builder("mcp-harbor")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build()
    })
}

// ---------------------------------------------------------------------------------------------
// The export pipeline

/// How spans are batched (`[telemetry]` `span_queue`, `span_batch`, `span_interval_ms`).
#[derive(Debug, Clone, Copy)]
pub struct Batching {
    /// Finished spans held for export at most; past it a span is dropped (and counted).
    pub queue: usize,
    /// Spans sent in one export at most; a full batch is sent without waiting for the interval.
    pub batch: usize,
    /// The longest a finished span waits before it is sent.
    pub interval: Duration,
}

/// Where spans go.
pub enum Sender {
    /// OTLP/HTTP with protobuf, encoded here.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
    /// The SDK's exporter (gRPC, or an endpoint from the `OTEL_*` variables), run on `runtime`.
    Sdk {
        exporter: Box<opentelemetry_otlp::SpanExporter>,
        runtime: Option<tokio::runtime::Handle>,
    },
}

struct Pipeline {
    queue: Mutex<Queue>,
    wake: Condvar,
    batching: Batching,
    /// OTLP/HTTP encoded here: spans are encoded by the thread that ends them (into its
    /// `Local` buffer), the export thread only sends bytes. Else (the SDK's exporter) they are
    /// queued as they are.
    encode_here: bool,
    /// Each thread's buffer of encoded spans (swept by the export thread at each interval).
    locals: Mutex<Vec<std::sync::Weak<Mutex<Local>>>>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

#[derive(Default)]
struct Queue {
    /// Spans for the SDK's exporter.
    spans: Vec<SpanData>,
    /// Encoded spans (`ScopeSpans.spans` fields), in pieces of several.
    chunks: Vec<Chunk>,
    /// Spans held in `spans` and `chunks`.
    queued: usize,
    /// Set by `flush`/`shutdown`: send what is queued now.
    flush_requested: u64,
    /// The last flush request the worker has finished.
    flushed: u64,
    stop: bool,
}

/// Encoded spans, ready to be sent.
#[derive(Default)]
struct Chunk {
    bytes: Vec<u8>,
    spans: usize,
}

/// A thread's spans encoded since its last chunk left.
#[derive(Default)]
struct Local(Chunk);

/// Spans a thread encodes before its chunk joins the queue.
const CHUNK: usize = 64;

/// The thread's buffer; when the thread ends, what it holds joins the queue.
struct LocalSlot(Arc<Mutex<Local>>);

impl Drop for LocalSlot {
    fn drop(&mut self) {
        let chunk = std::mem::take(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()).0);
        if let (Some(p), true) = (PIPELINE.get(), chunk.spans > 0) {
            p.push_chunk(chunk);
        }
    }
}

thread_local! {
    static LOCAL: LocalSlot = {
        let local = Arc::new(Mutex::new(Local::default()));
        if let Some(p) = PIPELINE.get() {
            let mut locals = p.locals.lock().unwrap_or_else(|e| e.into_inner());
            locals.retain(|l| l.strong_count() > 0);
            locals.push(Arc::downgrade(&local));
        }
        LocalSlot(local)
    };
}

static PIPELINE: OnceLock<Pipeline> = OnceLock::new();

/// Starts the export thread (once per process; a second call is refused).
pub fn start(mut sender: Sender, resource: &Resource, batching: Batching) -> Result<(), String> {
    // The SDK's exporter puts the resource (service.name, …) on each export it sends.
    if let Sender::Sdk { exporter, .. } = &mut sender {
        exporter.set_resource(resource);
    }
    let pipeline = Pipeline {
        queue: Mutex::new(Queue::default()),
        wake: Condvar::new(),
        batching,
        encode_here: matches!(sender, Sender::Http { .. }),
        locals: Mutex::new(Vec::new()),
        worker: Mutex::new(None),
    };
    PIPELINE
        .set(pipeline)
        .map_err(|_| "span export already started".to_string())?;
    let resource = encode_resource(resource);
    let handle = std::thread::Builder::new()
        .name("otlp-spans".into())
        .spawn(move || {
            lower_priority();
            if let Some(p) = PIPELINE.get() {
                p.run(&sender, &resource);
            }
        })
        .map_err(|e| format!("span export thread: {e}"))?;
    if let Some(p) = PIPELINE.get() {
        *p.worker.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
    }
    Ok(())
}

/// The export thread yields to the request workers when both want the CPU (nice +5 on Linux,
/// where the niceness is per thread): a batch being sent does not hold up requests, and its
/// queue absorbs the wait.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on the calling thread (who = 0) with a valid niceness; no memory is
    // passed.
    unsafe {
        let _ = libc::setpriority(libc::PRIO_PROCESS, 0, 5);
    }
}

/// Sends what is queued and waits for it (at most `timeout`).
fn flush(timeout: Duration) {
    if let Some(p) = PIPELINE.get() {
        p.flush(timeout);
    }
}

/// Sends what is queued, then stops the export thread.
pub fn shutdown(timeout: Duration) {
    let Some(p) = PIPELINE.get() else { return };
    p.flush(timeout);
    p.queue.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
    p.wake.notify_all();
    let worker = p.worker.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(worker) = worker {
        let _ = worker.join();
    }
}

impl Pipeline {
    fn submit(&self, span: SpanData) {
        if !self.encode_here {
            self.enqueue(1, |q| q.spans.push(span));
            return;
        }
        // Encoded here, on the thread that ended the span: the cost is spread over the requests
        // instead of coming in bursts on the export thread.
        let full = LOCAL.try_with(|slot| {
            let mut local = slot.0.lock().unwrap_or_else(|e| e.into_inner());
            nested(&mut local.0.bytes, 2, |out| encode_span(out, &span));
            local.0.spans += 1;
            (local.0.spans >= CHUNK).then(|| std::mem::take(&mut local.0))
        });
        match full {
            Ok(Some(chunk)) => self.push_chunk(chunk),
            Ok(None) => {}
            // The thread is ending: its buffer is gone, the span goes alone.
            Err(_) => {
                let mut chunk = Chunk::default();
                nested(&mut chunk.bytes, 2, |out| encode_span(out, &span));
                chunk.spans = 1;
                self.push_chunk(chunk);
            }
        }
    }

    fn push_chunk(&self, chunk: Chunk) {
        let n = chunk.spans;
        self.enqueue(n, |q| q.chunks.push(chunk));
    }

    /// Adds `n` spans (by `add`) unless the queue is full or stopped (then they are dropped and
    /// counted); wakes the export thread once a batch is waiting.
    fn enqueue(&self, n: usize, add: impl FnOnce(&mut Queue)) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.stop || q.queued + n > self.batching.queue {
            drop(q);
            crate::observe::metrics::global().spans("dropped", n as u64);
            return;
        }
        add(&mut q);
        let before = q.queued;
        q.queued += n;
        let full = before < self.batching.batch && q.queued >= self.batching.batch;
        drop(q);
        if full {
            self.wake.notify_one();
        }
    }

    /// Moves every thread's encoded spans to the queue (each interval, and on flush).
    fn sweep(&self) {
        let locals: Vec<_> = self
            .locals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .collect();
        for local in locals {
            let chunk = std::mem::take(&mut local.lock().unwrap_or_else(|e| e.into_inner()).0);
            if chunk.spans > 0 {
                self.push_chunk(chunk);
            }
        }
    }

    fn flush(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.stop {
            return;
        }
        q.flush_requested += 1;
        let wanted = q.flush_requested;
        self.wake.notify_all();
        drop(self.wait(q, deadline, |q| q.flushed < wanted));
    }

    /// Waits on the queue while `waiting` holds, until `deadline` at the latest.
    fn wait<'a>(
        &self,
        mut q: std::sync::MutexGuard<'a, Queue>,
        deadline: Instant,
        waiting: impl Fn(&Queue) -> bool,
    ) -> std::sync::MutexGuard<'a, Queue> {
        while waiting(&q) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            q = match self.wake.wait_timeout(q, left) {
                Ok((q, _)) => q,
                Err(e) => e.into_inner().0,
            };
        }
        q
    }

    fn run(&self, sender: &Sender, resource: &[u8]) {
        let mut poster = match sender {
            Sender::Http { url, headers } => {
                match crate::observe::otlp_http::Poster::new(url, headers.clone()) {
                    Ok(p) => Some(p),
                    Err(e) => {
                        export_failed(&e);
                        None
                    }
                }
            }
            Sender::Sdk { .. } => None,
        };
        let mut deadline = Instant::now() + self.batching.interval;
        loop {
            // Wait for a batch, the interval, a flush or the end.
            let (flush, stop, swept) = {
                let q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                let q = self.wait(q, deadline, |q| {
                    q.queued < self.batching.batch && q.flush_requested == q.flushed && !q.stop
                });
                // Each interval, and for a flush or the end, the threads' encoded spans too.
                let sweep = Instant::now() >= deadline || q.flush_requested != q.flushed || q.stop;
                (q.flush_requested, q.stop, sweep)
            };
            if swept {
                self.sweep();
                deadline = Instant::now() + self.batching.interval;
            }
            // Send everything queued, a batch at a time.
            loop {
                let (spans, chunks, n) = {
                    let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                    let (spans, chunks) = take_batch(&mut q, self.batching.batch);
                    let n = spans.len() + chunks.iter().map(|c| c.spans).sum::<usize>();
                    q.queued -= n;
                    (spans, chunks, n)
                };
                if n == 0 {
                    break;
                }
                let sent = match (sender, poster.as_mut()) {
                    (Sender::Http { .. }, Some(poster)) => {
                        let head = request_head(resource, &chunks);
                        let mut pieces = vec![head.as_slice()];
                        pieces.extend(chunks.iter().map(|c| c.bytes.as_slice()));
                        poster.post(&pieces).map_err(|e| export_failed(&e)).is_ok()
                    }
                    (Sender::Http { .. }, None) => false,
                    (Sender::Sdk { exporter, runtime }, _) => {
                        let result = match runtime {
                            Some(rt) => rt.block_on(exporter.export(spans)),
                            None => futures_executor_block_on(exporter.export(spans)),
                        };
                        result.map_err(|e| export_failed(&e.to_string())).is_ok()
                    }
                };
                let outcome = if sent { "exported" } else { "failed" };
                crate::observe::metrics::global().spans(outcome, n as u64);
            }
            let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            q.flushed = q.flushed.max(flush);
            drop(q);
            self.wake.notify_all();
            if stop {
                return;
            }
        }
    }
}

/// Up to `batch` spans from the queue (whole chunks: a batch may pass `batch` by less than a
/// chunk).
fn take_batch(q: &mut Queue, batch: usize) -> (Vec<SpanData>, Vec<Chunk>) {
    let spans = if q.spans.len() > batch {
        q.spans.drain(..batch).collect()
    } else {
        std::mem::take(&mut q.spans)
    };
    let mut chunks = Vec::new();
    let mut n = 0;
    while n < batch && !q.chunks.is_empty() {
        let chunk = q.chunks.swap_remove(0);
        n += chunk.spans;
        chunks.push(chunk);
    }
    (spans, chunks)
}

/// Polls a future to completion on this thread, outside any runtime: the SDK's OTLP/HTTP exporter
/// does its blocking I/O inside one poll (its blocking client may not run inside a runtime).
fn futures_executor_block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let waker = futures_util::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn export_failed(reason: &str) {
    // A collector that is down fails every export: once a minute is enough.
    static WARN: super::throttle::Throttled = super::throttle::Throttled::every(60_000);
    if WARN.ready() {
        // Not through `tracing`: an error event would become part of a span export.
        eprintln!("mcp-harbor: exporting spans failed: {reason}");
    }
}

/// Sends the spans the SDK's tracer ends (the `tracing` spans) down the same pipeline.
#[derive(Debug)]
pub struct QueueProcessor;

impl SpanProcessor for QueueProcessor {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if let Some(p) = PIPELINE.get() {
            p.submit(span);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        flush(Duration::from_secs(5));
        Ok(())
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        flush(timeout);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// OTLP protobuf (opentelemetry-proto's trace.proto and common.proto field numbers)

fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    key(out, field, 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    key(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

fn fixed32(out: &mut Vec<u8>, field: u32, v: u32) {
    key(out, field, 5);
    out.extend_from_slice(&v.to_le_bytes());
}

/// A length-delimited field whose body `body` writes: room for the length is kept, then the
/// body is moved back over what the length did not use.
fn nested(out: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    key(out, field, 2);
    let at = out.len();
    out.extend_from_slice(&[0; 5]);
    body(out);
    let len = out.len() - at - 5;
    let (mut prefix, mut n, mut v) = ([0u8; 5], 0, len);
    while v >= 0x80 {
        prefix[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    prefix[n] = v as u8;
    n += 1;
    out[at..at + n].copy_from_slice(&prefix[..n]);
    out.copy_within(at + 5.., at + n);
    out.truncate(at + n + len);
}

fn any_value(out: &mut Vec<u8>, value: &Value) {
    use opentelemetry::Array;
    match value {
        Value::String(s) => bytes_field(out, 1, s.as_str().as_bytes()),
        Value::Bool(b) => {
            key(out, 2, 0);
            varint(out, u64::from(*b));
        }
        Value::I64(i) => {
            key(out, 3, 0);
            varint(out, *i as u64);
        }
        Value::F64(f) => fixed64(out, 4, f.to_bits()),
        Value::Array(array) => nested(out, 5, |out| {
            let each = |out: &mut Vec<u8>, v: Value| nested(out, 1, |out| any_value(out, &v));
            match array {
                Array::Bool(v) => v.iter().for_each(|b| each(out, Value::Bool(*b))),
                Array::I64(v) => v.iter().for_each(|i| each(out, Value::I64(*i))),
                Array::F64(v) => v.iter().for_each(|f| each(out, Value::F64(*f))),
                Array::String(v) => v.iter().for_each(|s| each(out, Value::String(s.clone()))),
                _ => {}
            }
        }),
        other => bytes_field(out, 1, other.as_str().as_bytes()),
    }
}

fn attribute(out: &mut Vec<u8>, field: u32, kv: &KeyValue) {
    nested(out, field, |out| {
        bytes_field(out, 1, kv.key.as_str().as_bytes());
        nested(out, 2, |out| any_value(out, &kv.value));
    });
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn encode_resource(resource: &Resource) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in resource.iter() {
        attribute(&mut out, 1, &KeyValue::new(k.clone(), v.clone()));
    }
    out
}

/// The start of an `ExportTraceServiceRequest` whose spans are `chunks` (encoded `spans`
/// fields, sent right after it): one `ResourceSpans` of this process's resource, one scope.
fn request_head(resource: &[u8], chunks: &[Chunk]) -> Vec<u8> {
    let spans_len: usize = chunks.iter().map(|c| c.bytes.len()).sum();
    let mut scope_field = Vec::new();
    nested(&mut scope_field, 1, |out| {
        bytes_field(out, 1, scope().name().as_bytes());
        if let Some(v) = scope().version() {
            bytes_field(out, 2, v.as_bytes());
        }
    });
    let mut resource_field = Vec::new();
    bytes_field(&mut resource_field, 1, resource);
    let scope_spans_len = scope_field.len() + spans_len;
    let mut scope_spans_key = Vec::new();
    key(&mut scope_spans_key, 2, 2);
    varint(&mut scope_spans_key, scope_spans_len as u64);
    let resource_spans_len = resource_field.len() + scope_spans_key.len() + scope_spans_len;
    let mut head = Vec::with_capacity(16 + resource_field.len() + scope_field.len());
    key(&mut head, 1, 2);
    varint(&mut head, resource_spans_len as u64);
    head.extend_from_slice(&resource_field);
    head.extend_from_slice(&scope_spans_key);
    head.extend_from_slice(&scope_field);
    head
}

fn encode_span(out: &mut Vec<u8>, span: &SpanData) {
    let sc = &span.span_context;
    bytes_field(out, 1, &sc.trace_id().to_bytes());
    bytes_field(out, 2, &sc.span_id().to_bytes());
    let state = sc.trace_state().header();
    if !state.is_empty() {
        bytes_field(out, 3, state.as_bytes());
    }
    if span.parent_span_id != SpanId::INVALID {
        bytes_field(out, 4, &span.parent_span_id.to_bytes());
    }
    bytes_field(out, 5, span.name.as_bytes());
    key(out, 6, 0);
    varint(
        out,
        match span.span_kind {
            SpanKind::Internal => 1,
            SpanKind::Server => 2,
            SpanKind::Client => 3,
            SpanKind::Producer => 4,
            SpanKind::Consumer => 5,
        },
    );
    fixed64(out, 7, nanos(span.start_time));
    fixed64(out, 8, nanos(span.end_time));
    for kv in &span.attributes {
        attribute(out, 9, kv);
    }
    if span.dropped_attributes_count > 0 {
        key(out, 10, 0);
        varint(out, u64::from(span.dropped_attributes_count));
    }
    for event in span.events.iter() {
        nested(out, 11, |out| {
            fixed64(out, 1, nanos(event.timestamp));
            bytes_field(out, 2, event.name.as_bytes());
            for kv in &event.attributes {
                attribute(out, 3, kv);
            }
        });
    }
    for link in span.links.iter() {
        nested(out, 13, |out| {
            let lc = &link.span_context;
            bytes_field(out, 1, &lc.trace_id().to_bytes());
            bytes_field(out, 2, &lc.span_id().to_bytes());
            let state = lc.trace_state().header();
            if !state.is_empty() {
                bytes_field(out, 3, state.as_bytes());
            }
            for kv in &link.attributes {
                attribute(out, 4, kv);
            }
            fixed32(out, 6, span_flags(lc.trace_flags(), lc.is_remote()));
        });
    }
    match &span.status {
        Status::Unset => {}
        Status::Ok => nested(out, 15, |out| {
            key(out, 3, 0);
            varint(out, 1);
        }),
        Status::Error { description } => nested(out, 15, |out| {
            if !description.is_empty() {
                bytes_field(out, 2, description.as_bytes());
            }
            key(out, 3, 0);
            varint(out, 2);
        }),
    }
    fixed32(
        out,
        16,
        span_flags(sc.trace_flags(), span.parent_span_is_remote),
    );
}

/// The span flags field: the W3C trace flags, and whether the parent (or link) is remote.
fn span_flags(flags: TraceFlags, remote: bool) -> u32 {
    u32::from(flags.to_u8()) | 0x100 | if remote { 0x200 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message;

    #[test]
    fn the_encoding_is_what_the_otlp_protobuf_reads() {
        let resource = Resource::builder()
            .with_service_name("svc")
            .with_attribute(KeyValue::new("n", 3))
            .build();
        let parent = SpanContext::new(
            TraceId::from_bytes([7; 16]),
            SpanId::from_bytes([8; 8]),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let span = SpanData {
            span_context: SpanContext::new(
                TraceId::from_bytes([7; 16]),
                SpanId::from_bytes([9; 8]),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: SpanId::from_bytes([8; 8]),
            parent_span_is_remote: true,
            span_kind: SpanKind::Server,
            name: "tools/call echo".into(),
            start_time: UNIX_EPOCH + Duration::from_secs(1),
            end_time: UNIX_EPOCH + Duration::from_secs(2),
            // A long value: its length takes two bytes of varint.
            attributes: vec![
                KeyValue::new("a", "x".repeat(300)),
                KeyValue::new("b", true),
                KeyValue::new("c", -5),
                KeyValue::new("d", 1.5),
            ],
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Error {
                description: "boom".into(),
            },
            instrumentation_scope: scope().clone(),
        };
        let mut span = span;
        span.links.links = vec![Link::with_context(parent.clone())];
        let mut chunk = Chunk::default();
        for span in [span.clone(), span] {
            nested(&mut chunk.bytes, 2, |out| encode_span(out, &span));
            chunk.spans += 1;
        }
        let chunks = [chunk];
        let mut out = request_head(&encode_resource(&resource), &chunks);
        out.extend_from_slice(&chunks[0].bytes);
        let req = ExportTraceServiceRequest::decode(out.as_slice()).expect("decodes");
        let rs = &req.resource_spans[0];
        let names: Vec<_> = rs
            .resource
            .as_ref()
            .expect("resource")
            .attributes
            .iter()
            .map(|kv| kv.key.as_str())
            .collect();
        assert!(
            names.contains(&"service.name") && names.contains(&"n"),
            "{names:?}"
        );
        let ss = &rs.scope_spans[0];
        assert_eq!(
            ss.scope.as_ref().map(|s| s.name.as_str()),
            Some("mcp-harbor")
        );
        assert_eq!(ss.spans.len(), 2);
        let s = &ss.spans[0];
        assert_eq!(s.name, "tools/call echo");
        assert_eq!(s.trace_id, vec![7; 16]);
        assert_eq!(s.span_id, vec![9; 8]);
        assert_eq!(s.parent_span_id, vec![8; 8]);
        assert_eq!(s.kind, 2);
        assert_eq!(s.start_time_unix_nano, 1_000_000_000);
        assert_eq!(s.end_time_unix_nano, 2_000_000_000);
        assert_eq!(s.attributes.len(), 4);
        use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
        let value = |i: usize| s.attributes[i].value.as_ref().and_then(|v| v.value.clone());
        assert_eq!(value(0), Some(V::StringValue("x".repeat(300))));
        assert_eq!(value(1), Some(V::BoolValue(true)));
        assert_eq!(value(2), Some(V::IntValue(-5)));
        assert_eq!(value(3), Some(V::DoubleValue(1.5)));
        assert_eq!(s.links.len(), 1);
        assert_eq!(s.links[0].span_id, vec![8; 8]);
        assert_eq!(s.links[0].flags, 0x301);
        let status = s.status.as_ref().expect("status");
        assert_eq!((status.code, status.message.as_str()), (2, "boom"));
        assert_eq!(s.flags, 0x301);
    }
}
