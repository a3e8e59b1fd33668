//! `mcp-harbor-bench`: a load generator for the Streamable HTTP endpoint (`/t/{tenant}/mcp`).
//!
//! It speaks just enough HTTP/1.1 (keep-alive, `Content-Length` and chunked bodies) over plain
//! tokio `TcpStream`s to stay far cheaper per request than the server, or over TLS (rustls, an
//! `https://` URL and `--ca`), and measures:
//!
//! * `calls`: `tools/call` on the `echo` tool from C connections over N sessions (req/s, latency);
//!   with `--modern`, stateless 2026-07-28 requests instead (no session, `_meta` and headers);
//! * `inits`: session opening (`initialize` + `notifications/initialized`) as fast as possible;
//! * `idle`:  the server's resident memory per idle session (needs `--server-pid`);
//! * `streams`: the same per session holding its standalone `GET` SSE stream open;
//! * `replay`: resuming (`GET` + `Last-Event-ID`) a finished 1000-event SSE stream in full;
//! * `resume`: the latency to the first replayed event of a short resumption;
//! * `soak`: a mixed load held for a long time while the server's memory, descriptors and
//!   tasks are sampled (`bench/soak.rs`, `bench/soak.sh`).
//!
//! Only loopback targets are accepted, and every loop is bounded in time and count. Connections
//! are kept alive, so over TLS the handshakes happen only as connections open (set-up and warm-up,
//! the C connections of `inits`, one per stream of `streams`), not per request.

use std::collections::HashSet;
use std::io::{self, Write as _};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};

mod otlp_sink;
mod soak;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls;
use tokio_rustls::TlsConnector;

const PROTOCOL_VERSION: &str = "2025-06-18";
/// The stateless revision (`--modern`).
const MODERN_VERSION: &str = "2026-07-28";
/// The revision with resumable POST streams (priming event, `Last-Event-ID` on any stream).
const RESUMABLE_VERSION: &str = "2025-11-25";
/// Progress notifications of the `replay` phase's call (the tool's maximum).
const REPLAY_STEPS: u64 = 1000;
/// Progress notifications of the `resume` phase's call.
const RESUME_STEPS: u64 = 3;
/// Upper bound on one request of the `replay` and `resume` phases, stream included.
const STREAM_TIMEOUT: Duration = Duration::from_secs(30);
/// Upper bound on the whole `replay` or `resume` phase (the run count normally ends it first).
const STREAM_PHASE_LIMIT: Duration = Duration::from_secs(300);
/// Largest session count any phase creates.
const MAX_SESSIONS: u64 = 100_000;
/// Largest count of GET streams the `streams` phase holds open (one connection each).
const MAX_STREAMS: u64 = 10_000;
/// Largest response accepted (headers + body).
const MAX_RESPONSE: usize = 16 * 1024 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long past its deadline a phase may run before its connections are abandoned (a request
/// the server never answers).
const GRACE: Duration = Duration::from_secs(5);
/// Upper bound on the time spent creating sessions for `calls` and `idle`.
const SETUP_LIMIT: Duration = Duration::from_secs(120);
/// Upper bound on requests per connection in one phase (the time bound normally ends it first).
const MAX_REQUESTS_PER_CONNECTION: u64 = 100_000_000;
/// Back-off after a failed (re)connection.
const RECONNECT_PAUSE: Duration = Duration::from_millis(10);

const INITIALIZED: &[u8] = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

#[derive(Parser, Debug)]
#[command(
    name = "mcp-harbor-bench",
    about = "Load generator for mcp-harbor's Streamable HTTP endpoint (loopback only)"
)]
struct Args {
    /// MCP endpoint (http:// or https://, 127.0.0.1, [::1] or localhost only).
    #[arg(long, default_value = "http://127.0.0.1:8080/t/demo/mcp")]
    url: String,
    /// For an https:// URL: the PEM certificate(s) to trust (the server's self-signed
    /// certificate or its CA); nothing else is trusted.
    #[arg(long, value_name = "FILE")]
    ca: Option<PathBuf>,
    /// Sessions the `calls` phase spreads its requests over.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=MAX_SESSIONS))]
    sessions: u64,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
    connections: u64,
    /// Measured seconds of the `calls` phase; the `inits` phase runs for half of it.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Unmeasured seconds of `tools/call` load before the `calls` measurement starts.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Most sessions the `inits` phase opens (it also stops after duration/2 seconds).
    #[arg(long, default_value_t = MAX_SESSIONS, value_parser = clap::value_parser!(u64).range(1..=MAX_SESSIONS))]
    max_inits: u64,
    /// Idle sessions the `idle` phase opens to measure memory per session.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=MAX_SESSIONS))]
    idle_sessions: u64,
    /// More processes whose CPU time the `calls` phase adds to the server's (the other replicas
    /// of a cluster), comma-separated.
    #[arg(long, value_delimiter = ',')]
    cpu_pids: Vec<u32>,
    /// Instead of loading a server, be an OTLP/HTTP sink on a free loopback port (printed first)
    /// that counts the spans and operations it receives (`GET /counts`; bench/telemetry.sh).
    #[arg(long)]
    otlp_sink: bool,
    /// Sessions the `streams` phase opens, each holding its standalone GET stream (and one
    /// connection) open.
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..=MAX_STREAMS))]
    stream_sessions: u64,
    /// The server's process id, to read its resident memory (VmRSS in /proc/PID/status).
    #[arg(long)]
    server_pid: Option<u32>,
    /// Which measurement to run; `all` runs calls, inits, then idle (idle only with --server-pid).
    #[arg(long, value_enum, default_value_t = Phase::All)]
    phase: Phase,
    /// Resumptions (GET with Last-Event-ID) the `replay` and `resume` phases time.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    runs: u64,
    /// Tokio worker threads; 1 runs everything on a current-thread runtime (one core).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    threads: u64,
    /// The `calls` phase sends stateless 2026-07-28 requests (no sessions) instead.
    #[arg(long)]
    modern: bool,
    /// An environment variable holding an access token sent as `Authorization: Bearer` (for a
    /// protected tenant; never on the command line).
    #[arg(long, value_name = "VAR")]
    bearer_token_env: Option<String>,
    /// `soak`: an environment variable holding the admin token (the admin writer's changes).
    #[arg(long, value_name = "VAR")]
    admin_token_env: Option<String>,
    /// `soak`: an environment variable holding the metrics token (runtime task counts).
    #[arg(long, value_name = "VAR")]
    metrics_token_env: Option<String>,
    /// `soak`: seconds between samples of the server.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=600))]
    sample_secs: u64,
    /// `soak`: pause of each worker between its operations, in milliseconds.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    soak_pause_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Phase {
    All,
    Calls,
    Inits,
    Idle,
    /// Memory per session holding an open standalone GET stream (needs --server-pid).
    Streams,
    Replay,
    Resume,
    /// A mixed load for `--duration` seconds, sampling the server (see bench/soak.rs).
    Soak,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.otlp_sink {
        return match otlp_sink::serve() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("mcp-harbor-bench: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if !(f64::MIN_POSITIVE..=3600.0).contains(&args.duration) {
        eprintln!("mcp-harbor-bench: --duration must be in (0, 3600] seconds");
        return ExitCode::from(2);
    }
    if !(0.0..=600.0).contains(&args.warmup) {
        eprintln!("mcp-harbor-bench: --warmup must be in [0, 600] seconds");
        return ExitCode::from(2);
    }
    let token = match &args.bearer_token_env {
        None => None,
        Some(var) => match std::env::var(var) {
            Ok(t) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_graphic()) => Some(t),
            _ => {
                eprintln!("mcp-harbor-bench: --bearer-token-env {var}: no usable token there");
                return ExitCode::from(2);
            }
        },
    };
    let target = match Target::parse(&args.url, args.ca.as_deref()) {
        Ok(mut t) => {
            if let Some(token) = token {
                t.authorize(&token);
            }
            Arc::new(t)
        }
        Err(e) => {
            eprintln!("mcp-harbor-bench: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = if args.threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.threads as usize)
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mcp-harbor-bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args, target)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcp-harbor-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args, target: Arc<Target>) -> Result<(), String> {
    let conns = args.connections as usize;
    let mut failed = false;
    if matches!(args.phase, Phase::All | Phase::Calls) {
        failed |= !calls_phase(&args, &target, conns).await?;
    }
    if matches!(args.phase, Phase::All | Phase::Inits) {
        failed |= !inits_phase(&args, &target, conns).await;
    }
    match (args.phase, args.server_pid) {
        (Phase::All | Phase::Idle, Some(pid)) => {
            failed |= !idle_phase(&args, &target, conns, pid).await?;
        }
        (Phase::Idle, None) => return Err("the idle phase needs --server-pid".into()),
        (Phase::All, None) => println!("idle: skipped (needs --server-pid)"),
        _ => {}
    }
    if args.phase == Phase::Streams {
        let pid = args
            .server_pid
            .ok_or("the streams phase needs --server-pid")?;
        failed |= !streams_phase(&args, &target, conns, pid).await?;
    }
    if args.phase == Phase::Replay {
        failed |= !replay_phase(&args, &target).await?;
    }
    if args.phase == Phase::Resume {
        failed |= !resume_phase(&args, &target).await?;
    }
    if args.phase == Phase::Soak {
        failed |= !soak::soak_phase(&args, &target).await?;
    }
    if let Some(tls) = &target.tls {
        tls.report();
    }
    if failed {
        Err("some requests failed (see above)".into())
    } else {
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Phases

/// `tools/call` echo from `conns` connections over `--sessions` sessions. Returns false on errors.
async fn calls_phase(args: &Args, target: &Arc<Target>, conns: usize) -> Result<bool, String> {
    let sessions = if args.modern {
        // One empty name: every request goes without a session.
        vec![String::new()]
    } else {
        let wanted = args.sessions as usize;
        let setup_deadline = Instant::now() + SETUP_LIMIT;
        let (sessions, setup) = open_sessions(target, wanted, conns, setup_deadline, true).await;
        if sessions.len() < wanted {
            return Err(format!(
                "calls: could only open {} of {wanted} sessions ({} errors{})",
                sessions.len(),
                setup.errors,
                first_error_suffix(&setup)
            ));
        }
        check_echo(target, &sessions[0]).await?;
        sessions
    };

    let sessions = Arc::new(sessions);
    let start = Instant::now();
    let measure_from = start + Duration::from_secs_f64(args.warmup);
    let deadline = measure_from + Duration::from_secs_f64(args.duration);
    // The server's CPU time over the measured window (user + system, from /proc/PID/stat).
    let cpu = args.server_pid.map(|pid| {
        let pids: Vec<u32> = std::iter::once(pid)
            .chain(args.cpu_pids.iter().copied())
            .collect();
        let ticks = move || {
            pids.iter()
                .map(|&p| read_cpu_ticks(p))
                .sum::<Result<u64, String>>()
        };
        tokio::spawn(async move {
            tokio::time::sleep_until(measure_from.into()).await;
            let before = ticks()?;
            let from = Instant::now();
            tokio::time::sleep_until(deadline.into()).await;
            let after = ticks()?;
            Ok::<_, String>((after.saturating_sub(before), from.elapsed()))
        })
    });
    let mut tasks = Vec::with_capacity(conns);
    for index in 0..conns {
        let target = Arc::clone(target);
        let sessions = Arc::clone(&sessions);
        tasks.push(tokio::spawn(async move {
            let mut stats = Stats::new();
            let work = call_loop(
                &target,
                &sessions,
                index,
                conns,
                measure_from,
                deadline,
                &mut stats,
            );
            if tokio::time::timeout_at((deadline + GRACE).into(), work)
                .await
                .is_err()
            {
                stats.error("a request was still unanswered at the hard deadline".into());
            }
            stats
        }));
    }
    let stats = join_stats(tasks).await;
    let elapsed = Instant::now()
        .saturating_duration_since(measure_from)
        .as_secs_f64();
    println!(
        "calls: {conns} connections, {}, {:.1} s, {} requests, {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, errors {}",
        if args.modern {
            "stateless (2026-07-28)".to_string()
        } else {
            format!("{} sessions", sessions.len())
        },
        elapsed,
        stats.ok,
        stats.ok as f64 / elapsed,
        ms(stats.hist.quantile(0.50)),
        ms(stats.hist.quantile(0.99)),
        ms(stats.hist.max),
        stats.errors
    );
    report_first_error("calls", &stats);
    if let Some(cpu) = cpu {
        match cpu.await {
            Ok(Ok((ticks, window))) => {
                let seconds = ticks as f64 / clock_ticks_per_second();
                let per_request = if stats.ok == 0 {
                    0.0
                } else {
                    // Requests of the window, at the rate measured over it.
                    seconds * 1e6 / (stats.ok as f64 * window.as_secs_f64() / elapsed)
                };
                println!(
                    "calls cpu: server {per_request:.1} us/req, {:.0}% of a core",
                    seconds * 100.0 / window.as_secs_f64()
                );
            }
            Ok(Err(e)) => println!("calls cpu: {e}"),
            Err(e) => println!("calls cpu: sampler failed: {e}"),
        }
    }
    Ok(stats.errors == 0)
}

async fn call_loop(
    target: &Arc<Target>,
    sessions: &[String],
    index: usize,
    conns: usize,
    measure_from: Instant,
    deadline: Instant,
    stats: &mut Stats,
) {
    let mut conn = Conn::new(Arc::clone(target));
    let mut slot = index % sessions.len();
    for _ in 0..MAX_REQUESTS_PER_CONNECTION {
        let started = Instant::now();
        if started >= deadline {
            break;
        }
        let session = &sessions[slot];
        slot = (slot + conns) % sessions.len();
        let result = if session.is_empty() {
            conn.set_modern_call_payload();
            conn.post_modern().await
        } else {
            conn.set_call_payload();
            conn.post(Some(session)).await
        };
        let counted = started >= measure_from;
        match result {
            Ok(200) if !conn.body_has_error() => {
                if counted {
                    stats.ok += 1;
                    stats.hist.record(started.elapsed());
                }
            }
            Ok(status) => {
                if counted {
                    stats.error(format!(
                        "tools/call: HTTP {status}: {}",
                        conn.body_snippet()
                    ));
                }
            }
            Err(e) => {
                if counted {
                    stats.error(format!("tools/call: {e}"));
                }
                tokio::time::sleep(RECONNECT_PAUSE).await;
            }
        }
    }
}

/// Opens sessions as fast as possible for duration/2 seconds (at most `--max-inits`). Returns
/// false on errors.
async fn inits_phase(args: &Args, target: &Arc<Target>, conns: usize) -> bool {
    let cpu_before = args.server_pid.map(read_cpu_ticks);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(args.duration / 2.0);
    let (_, stats) = open_sessions(target, args.max_inits as usize, conns, deadline, false).await;
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = match (cpu_before, args.server_pid) {
        (Some(Ok(before)), Some(pid)) => read_cpu_ticks(pid)
            .ok()
            .map(|after| after.saturating_sub(before)),
        _ => None,
    };
    println!(
        "inits: {conns} connections, {:.1} s, {} inits, {:.0} inits/s, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, errors {}",
        elapsed,
        stats.ok,
        stats.ok as f64 / elapsed,
        ms(stats.hist.quantile(0.50)),
        ms(stats.hist.quantile(0.99)),
        ms(stats.hist.max),
        stats.errors
    );
    report_first_error("inits", &stats);
    if let (Some(ticks), true) = (cpu, stats.ok > 0) {
        let seconds = ticks as f64 / clock_ticks_per_second();
        println!(
            "inits cpu: server {:.1} us/init, {:.0}% of a core",
            seconds * 1e6 / stats.ok as f64,
            seconds * 100.0 / elapsed
        );
    }
    stats.errors == 0
}

/// Reads the server's RSS, opens `--idle-sessions` sessions and leaves them idle, reads the RSS
/// again. Returns false on errors.
async fn idle_phase(
    args: &Args,
    target: &Arc<Target>,
    conns: usize,
    pid: u32,
) -> Result<bool, String> {
    let wanted = args.idle_sessions as usize;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = read_rss(pid)?;
    let start = Instant::now();
    // The connections close when `open_sessions` returns, so only the sessions stay behind.
    let (sessions, stats) = open_sessions(target, wanted, conns, start + SETUP_LIMIT, false).await;
    let took = start.elapsed().as_secs_f64();
    let created = stats.ok;
    drop(sessions);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = read_rss(pid)?;
    let opened = format!("idle: {created} sessions");
    Ok(report_rss_per(
        &opened,
        "per idle session",
        created,
        took,
        before,
        after,
        &stats,
    ))
}

/// Prints a memory phase's line (`opened`, then the RSS before and after and the growth per
/// `count`, `per`) and its first error; returns false on errors.
fn report_rss_per(
    opened: &str,
    per: &str,
    count: u64,
    took: f64,
    before: u64,
    after: u64,
    stats: &Stats,
) -> bool {
    let delta = after as i64 - before as i64;
    let per_item = if count > 0 {
        delta as f64 / count as f64
    } else {
        0.0
    };
    println!(
        "{opened} (in {took:.1} s), RSS {:.1} MiB -> {:.1} MiB ({:+.1} MiB), {:.0} bytes ({:.2} KiB) {per}, errors {}",
        mib(before as f64),
        mib(after as f64),
        mib(delta as f64),
        per_item,
        per_item / 1024.0,
        stats.errors
    );
    let phase = opened.split(':').next().unwrap_or(opened);
    report_first_error(phase, stats);
    stats.errors == 0
}

/// Reads the server's RSS, opens `--stream-sessions` sessions, each with its standalone `GET`
/// SSE stream held open on a connection of its own, reads the RSS again. Returns false on errors.
async fn streams_phase(
    args: &Args,
    target: &Arc<Target>,
    conns: usize,
    pid: u32,
) -> Result<bool, String> {
    let wanted = args.stream_sessions as usize;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = read_rss(pid)?;
    let start = Instant::now();
    let deadline = start + SETUP_LIMIT;
    let (sessions, mut stats) = open_sessions(target, wanted, conns, deadline, true).await;
    let sessions = Arc::new(sessions);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(conns);
    for _ in 0..conns.min(wanted) {
        let target = Arc::clone(target);
        let sessions = Arc::clone(&sessions);
        let next = Arc::clone(&next);
        tasks.push(tokio::spawn(async move {
            let mut held = Vec::new();
            let mut stats = Stats::new();
            while Instant::now() < deadline {
                let Some(session) = sessions.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    break;
                };
                match tokio::time::timeout(GRACE, open_stream(&target, session)).await {
                    Ok(Ok(stream)) => held.push(stream),
                    Ok(Err(e)) => stats.error(e),
                    Err(_) => stats.error("GET stream: no response head in time".into()),
                }
            }
            (held, stats)
        }));
    }
    let mut held = Vec::with_capacity(sessions.len());
    for task in tasks {
        match task.await {
            Ok((streams, s)) => {
                held.extend(streams);
                stats.merge(s);
            }
            Err(e) => stats.error(format!("a connection task failed: {e}")),
        }
    }
    let took = start.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = read_rss(pid)?;
    let opened = format!("streams: {} sessions with an open GET stream", held.len());
    let ok = report_rss_per(
        &opened,
        "per session holding a stream",
        held.len() as u64,
        took,
        before,
        after,
        &stats,
    );
    drop(held);
    Ok(ok)
}

/// Opens the standalone `GET` SSE stream of `session` on a new connection and returns the
/// connection once the response head (200, `text/event-stream`) has arrived.
async fn open_stream(target: &Target, session: &str) -> Result<Stream, String> {
    let mut stream = target
        .connect()
        .await
        .map_err(|e| format!("GET stream: connect: {e}"))?;
    let mut request = target.get_head.clone();
    let _ = write!(
        request,
        "mcp-session-id: {session}\r\nmcp-protocol-version: {PROTOCOL_VERSION}\r\n\r\n"
    );
    match &mut stream {
        Stream::Plain(s) => stream_head(s, &request).await?,
        Stream::Tls(s) => stream_head(s.as_mut(), &request).await?,
    }
    Ok(stream)
}

/// Sends the GET of a standalone stream and reads its response head (200 `text/event-stream`).
async fn stream_head<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    request: &[u8],
) -> Result<(), String> {
    stream
        .write_all(request)
        .await
        .map_err(|e| format!("GET stream: {e}"))?;
    stream
        .flush()
        .await
        .map_err(|e| format!("GET stream: {e}"))?;
    let mut buf = Vec::with_capacity(1024);
    let head_end = loop {
        if let Some(p) = find(&buf, b"\r\n\r\n") {
            break p + 4;
        }
        if buf.len() > 16 * 1024 {
            return Err("GET stream: response head too large".into());
        }
        fill(stream, &mut buf)
            .await
            .map_err(|e| format!("GET stream: {e}"))?;
    };
    let head = parse_head(&buf[..head_end]).map_err(|e| format!("GET stream: {e}"))?;
    let event_stream = buf[..head_end]
        .to_ascii_lowercase()
        .windows(b"text/event-stream".len())
        .any(|w| w == b"text/event-stream");
    if head.status != 200 || !event_stream {
        return Err(format!(
            "GET stream: HTTP {} (expected 200 text/event-stream): {}",
            head.status,
            String::from_utf8_lossy(&buf[..buf.len().min(300)])
        ));
    }
    Ok(())
}

/// Resumes a finished call's 1000-event stream from its priming event, `--runs` times, timing
/// each GET to the end of the replay (the call's answer, then the end of the stream). Returns
/// false on errors (a failed request, or a replay that misses, repeats or reorders events).
async fn replay_phase(args: &Args, target: &Arc<Target>) -> Result<bool, String> {
    let runs = args.runs;
    let deadline = Instant::now() + STREAM_PHASE_LIMIT;
    let mut conn = Conn::with_version(Arc::clone(target), RESUMABLE_VERSION);
    let call = start_call(&mut conn, REPLAY_STEPS, "bench-replay")
        .await
        .map_err(|e| format!("replay: {e}"))?;
    println!(
        "replay: call {} answered live in {:.1} ms on stream {} ({REPLAY_STEPS} progress + response after priming event {})",
        call.call_id,
        ms(call.took.as_nanos() as u64),
        call.stream,
        call.priming_id
    );
    let mut stats = Stats::new();
    for run in 0..runs {
        if Instant::now() >= deadline {
            stats.error(format!("the phase time limit was reached after {run} runs"));
            break;
        }
        let mut first = None;
        let started = Instant::now();
        let result = tokio::time::timeout(
            STREAM_TIMEOUT,
            conn.get_resume(&call.session, &call.priming_id, &mut first),
        )
        .await;
        let elapsed = started.elapsed();
        match resumed_body(&mut conn, result) {
            Err(e) => stats.error(format!("run {run}: GET after {}: {e}", call.priming_id)),
            Ok(events) => match call.check(&events, call.priming_seq, 0) {
                Ok(()) => {
                    stats.ok += 1;
                    stats.hist.record(elapsed);
                }
                Err(e) => stats.error(format!("run {run}: replay after {}: {e}", call.priming_id)),
            },
        }
    }
    println!(
        "replay: {REPLAY_STEPS} events, {runs} runs, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, errors {}",
        ms(stats.hist.quantile(0.50)),
        ms(stats.hist.quantile(0.99)),
        ms(stats.hist.max),
        stats.errors
    );
    report_first_error("replay", &stats);
    if stats.errors > 0 {
        println!(
            "replay: note: the server must keep at least {} events per stream (MCP_HARBOR__SESSIONS__EVENT_LOG_CAPACITY); a smaller log replays only its newest events",
            REPLAY_STEPS + 2
        );
    }
    Ok(stats.errors == 0)
}

/// Resumes a finished short call's stream after its 2nd event (the first progress notification,
/// right after the priming event), `--runs` times, timing each GET to its first replayed event;
/// every replay is then read to its end and checked. Returns false on errors.
async fn resume_phase(args: &Args, target: &Arc<Target>) -> Result<bool, String> {
    let runs = args.runs;
    let deadline = Instant::now() + STREAM_PHASE_LIMIT;
    let mut conn = Conn::with_version(Arc::clone(target), RESUMABLE_VERSION);
    let call = start_call(&mut conn, RESUME_STEPS, "bench-resume")
        .await
        .map_err(|e| format!("resume: {e}"))?;
    let after_seq = call.priming_seq + 1;
    let after = format!("{}-{after_seq}", call.stream);
    println!(
        "resume: call {} on stream {}: resuming after {after} replays {} progress + response",
        call.call_id,
        call.stream,
        RESUME_STEPS - 1
    );
    let mut stats = Stats::new();
    for run in 0..runs {
        if Instant::now() >= deadline {
            stats.error(format!("the phase time limit was reached after {run} runs"));
            break;
        }
        let mut first = None;
        let started = Instant::now();
        let result = tokio::time::timeout(
            STREAM_TIMEOUT,
            conn.get_resume(&call.session, &after, &mut first),
        )
        .await;
        match resumed_body(&mut conn, result) {
            Err(e) => stats.error(format!("run {run}: GET after {after}: {e}")),
            Ok(events) => match (call.check(&events, after_seq, 1), first) {
                (Ok(()), Some(at)) => {
                    stats.ok += 1;
                    stats.hist.record(at.saturating_duration_since(started));
                }
                (Ok(()), None) => stats.error(format!("run {run}: no event seen while streaming")),
                (Err(e), _) => stats.error(format!("run {run}: replay after {after}: {e}")),
            },
        }
    }
    println!(
        "resume: {runs} runs, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, errors {}",
        ms(stats.hist.quantile(0.50)),
        ms(stats.hist.quantile(0.99)),
        ms(stats.hist.max),
        stats.errors
    );
    report_first_error("resume", &stats);
    Ok(stats.errors == 0)
}

/// The events of a resumption GET, or why there are none.
fn resumed_body(
    conn: &mut Conn,
    result: Result<io::Result<u16>, tokio::time::error::Elapsed>,
) -> Result<Vec<SseEvent>, String> {
    match result {
        Err(_) => {
            conn.disconnect();
            Err(format!(
                "the stream did not end within {} s",
                STREAM_TIMEOUT.as_secs()
            ))
        }
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(200)) => Ok(parse_sse(conn.body())),
        Ok(Ok(status)) => Err(format!(
            "HTTP {status}: {}{}",
            conn.body_snippet(),
            if status == 400 {
                " (the event log may keep fewer events per stream than the call sent: raise MCP_HARBOR__SESSIONS__EVENT_LOG_CAPACITY)"
            } else {
                ""
            }
        )),
    }
}

/// A finished `slow_count` call whose SSE answer can be resumed.
struct CallStream {
    session: String,
    call_id: u64,
    token: &'static str,
    steps: u64,
    /// The stream id (`<stream>` of the event ids).
    stream: String,
    priming_id: String,
    priming_seq: u64,
    took: Duration,
}

/// Opens a session and runs `slow_count` with `steps` steps (no interval) and a progress token,
/// reading its whole SSE answer: a priming event, `steps` progress notifications, the answer.
async fn start_call(
    conn: &mut Conn,
    steps: u64,
    token: &'static str,
) -> Result<CallStream, String> {
    let session = tokio::time::timeout(STREAM_TIMEOUT, open_session(conn))
        .await
        .map_err(|_| "initialize was not answered".to_string())??;
    let call_id = conn.set_slow_count_payload(steps, token);
    let started = Instant::now();
    let status = tokio::time::timeout(STREAM_TIMEOUT, conn.post(Some(&session)))
        .await
        .map_err(|_| {
            format!(
                "tools/call slow_count did not end within {} s",
                STREAM_TIMEOUT.as_secs()
            )
        })?
        .map_err(|e| format!("tools/call slow_count: {e}"))?;
    let took = started.elapsed();
    if status != 200 {
        return Err(format!(
            "tools/call slow_count: HTTP {status}: {}",
            conn.body_snippet()
        ));
    }
    let events = parse_sse(conn.body());
    let priming = match events.first() {
        Some(SseEvent { id: Some(id), data }) if data.is_empty() => id.clone(),
        _ => {
            return Err(format!(
                "tools/call slow_count: the answer does not start with an SSE priming event (needs protocol {RESUMABLE_VERSION}): {}",
                conn.body_snippet()
            ))
        }
    };
    let (stream, priming_seq) = split_event_id(&priming)
        .ok_or_else(|| format!("malformed priming event id {priming:?}"))?;
    let call = CallStream {
        session,
        call_id,
        token,
        steps,
        stream: stream.to_owned(),
        priming_id: priming.clone(),
        priming_seq,
        took,
    };
    call.check(&events[1..], priming_seq, 0)
        .map_err(|e| format!("the live answer of tools/call slow_count: {e}"))?;
    Ok(call)
}

impl CallStream {
    /// Checks the events of this call's stream that follow seq `after` (which carried progress
    /// notification `skipped`, or the priming event when 0): every later progress notification in
    /// order, then the answer as the last event; all of this stream, seqs strictly increasing
    /// with no duplicate and no gap.
    fn check(&self, events: &[SseEvent], after: u64, skipped: u64) -> Result<(), String> {
        let mut seen = HashSet::with_capacity(events.len());
        let (mut last, mut progress, mut answers) = (after, skipped, 0u64);
        let (mut duplicates, mut disordered, mut missing, mut after_answer) =
            (0u64, 0u64, 0u64, 0u64);
        let mut first_problem: Option<String> = None;
        let mut problem = |p: String| {
            first_problem.get_or_insert(p);
        };
        for (i, event) in events.iter().enumerate() {
            let Some(id) = event.id.as_deref() else {
                problem(format!("event {i} has no id"));
                continue;
            };
            match split_event_id(id) {
                Some((stream, seq)) if stream == self.stream => {
                    if !seen.insert(seq) {
                        duplicates += 1;
                        problem(format!("duplicate event id {id} (event {i})"));
                    } else if seq <= last {
                        disordered += 1;
                        problem(format!("event {id} after seq {last} (event {i})"));
                    } else {
                        if seq > last + 1 {
                            missing += seq - last - 1;
                            problem(format!(
                                "seqs {}..{} missing before {id}",
                                last + 1,
                                seq - 1
                            ));
                        }
                        last = seq;
                    }
                }
                _ => problem(format!("event id {id:?} is not of stream {}", self.stream)),
            }
            if answers > 0 {
                after_answer += 1;
            }
            let message: serde_json::Value = match serde_json::from_str(&event.data) {
                Ok(m) => m,
                Err(_) => {
                    problem(format!("event {id}: data is not JSON: {:.120}", event.data));
                    continue;
                }
            };
            if message.get("method").and_then(|m| m.as_str()) == Some("notifications/progress") {
                progress += 1;
                let params = &message["params"];
                if params["progressToken"].as_str() != Some(self.token)
                    || params["progress"].as_f64() != Some(progress as f64)
                {
                    problem(format!(
                        "event {id}: expected progress {progress} of token {}: {:.160}",
                        self.token, event.data
                    ));
                }
            } else if message.get("id").and_then(|v| v.as_u64()) == Some(self.call_id) {
                answers += 1;
                let expected = format!("counted {}", self.steps);
                if message
                    .pointer("/result/content/0/text")
                    .and_then(|t| t.as_str())
                    != Some(&expected)
                {
                    problem(format!(
                        "event {id}: unexpected answer: {:.200}",
                        event.data
                    ));
                }
            } else {
                problem(format!(
                    "event {id}: unexpected message: {:.200}",
                    event.data
                ));
            }
        }
        let expected_progress = self.steps;
        if progress == expected_progress
            && answers == 1
            && after_answer == 0
            && first_problem.is_none()
        {
            return Ok(());
        }
        Err(format!(
            "{} events: {} progress + {answers} answers (expected {} + 1), {missing} seqs missing, {duplicates} duplicate ids, {disordered} out of order, {after_answer} after the answer; first problem: {}",
            events.len(),
            progress - skipped,
            expected_progress - skipped,
            first_problem.as_deref().unwrap_or("wrong counts")
        ))
    }
}

/// Opens up to `count` sessions (initialize + notifications/initialized) from `conns` connections
/// until `deadline`. Keeps the session ids when `keep`. One `ok` in the stats is one session
/// opened, its latency the time of both requests.
async fn open_sessions(
    target: &Arc<Target>,
    count: usize,
    conns: usize,
    deadline: Instant,
    keep: bool,
) -> (Vec<String>, Stats) {
    let issued = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(conns);
    for _ in 0..conns.min(count.max(1)) {
        let target = Arc::clone(target);
        let issued = Arc::clone(&issued);
        tasks.push(tokio::spawn(async move {
            let mut stats = Stats::new();
            let mut ids = Vec::new();
            let work = async {
                let mut conn = Conn::new(target);
                while Instant::now() < deadline && issued.fetch_add(1, Ordering::Relaxed) < count {
                    let started = Instant::now();
                    match open_session(&mut conn).await {
                        Ok(id) => {
                            stats.ok += 1;
                            stats.hist.record(started.elapsed());
                            if keep {
                                ids.push(id);
                            }
                        }
                        Err(e) => {
                            stats.error(e);
                            tokio::time::sleep(RECONNECT_PAUSE).await;
                        }
                    }
                }
            };
            if tokio::time::timeout_at((deadline + GRACE).into(), work)
                .await
                .is_err()
            {
                stats.error("a request was still unanswered at the hard deadline".into());
            }
            (ids, stats)
        }));
    }
    let mut all_ids = Vec::with_capacity(if keep { count } else { 0 });
    let mut total = Stats::new();
    for task in tasks {
        match task.await {
            Ok((ids, stats)) => {
                all_ids.extend(ids);
                total.merge(stats);
            }
            Err(e) => total.error(format!("a connection task failed: {e}")),
        }
    }
    (all_ids, total)
}

async fn open_session(conn: &mut Conn) -> Result<String, String> {
    conn.set_initialize_payload();
    let status = conn
        .post(None)
        .await
        .map_err(|e| format!("initialize: {e}"))?;
    if status != 200 || conn.body_has_error() {
        return Err(format!(
            "initialize: HTTP {status}: {}",
            conn.body_snippet()
        ));
    }
    let id = conn
        .session_id()
        .ok_or("initialize: the answer has no mcp-session-id header")?
        .to_owned();
    conn.set_payload(INITIALIZED);
    let status = conn
        .post(Some(&id))
        .await
        .map_err(|e| format!("notifications/initialized: {e}"))?;
    if status != 202 {
        return Err(format!(
            "notifications/initialized: HTTP {status} (expected 202): {}",
            conn.body_snippet()
        ));
    }
    Ok(id)
}

/// One `tools/call` checked in full, so the measured loop can trust status + "no error".
async fn check_echo(target: &Arc<Target>, session: &str) -> Result<(), String> {
    let mut conn = Conn::new(Arc::clone(target));
    conn.set_call_payload();
    let status = tokio::time::timeout(GRACE, conn.post(Some(session)))
        .await
        .map_err(|_| "calls: the first tools/call was not answered".to_string())?
        .map_err(|e| format!("calls: first tools/call: {e}"))?;
    let body: serde_json::Value =
        serde_json::from_slice(&answer_json(conn.body())).map_err(|e| {
            format!(
                "calls: first tools/call answered HTTP {status} with non-JSON ({e}): {}",
                conn.body_snippet()
            )
        })?;
    let text = body
        .pointer("/result/content/0/text")
        .and_then(|t| t.as_str());
    if status != 200 || text != Some("hello") {
        return Err(format!(
            "calls: unexpected answer to tools/call echo: HTTP {status}: {}",
            conn.body_snippet()
        ));
    }
    Ok(())
}

/// A JSON-RPC answer body as JSON: the body itself, or the last JSON `data:` of an SSE body
/// (servers may stream even a single answer, with a priming event first).
fn answer_json(body: &[u8]) -> Vec<u8> {
    match body.first() {
        Some(b'{') => body.to_vec(),
        _ => parse_sse(body)
            .into_iter()
            .rev()
            .find(|e| e.data.starts_with('{'))
            .map(|e| e.data.into_bytes())
            .unwrap_or_default(),
    }
}

async fn join_stats(tasks: Vec<tokio::task::JoinHandle<Stats>>) -> Stats {
    let mut total = Stats::new();
    for task in tasks {
        match task.await {
            Ok(stats) => total.merge(stats),
            Err(e) => total.error(format!("a connection task failed: {e}")),
        }
    }
    total
}

/// User + system CPU time of a process, in clock ticks (fields 14 and 15 of /proc/PID/stat).
fn read_cpu_ticks(pid: u32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| format!("unexpected {path}"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> Result<u64, String> {
        fields
            .get(n - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| format!("no field {n} in {path}"))
    };
    Ok(field(14)? + field(15)?)
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux unless told otherwise).
fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// VmRSS of a process, in bytes.
fn read_rss(pid: u32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| format!("no VmRSS line in {path}"))
}

fn ms(nanos: u64) -> f64 {
    nanos as f64 / 1e6
}

fn mib(bytes: f64) -> f64 {
    bytes / (1024.0 * 1024.0)
}

fn first_error_suffix(stats: &Stats) -> String {
    stats
        .first_error
        .as_deref()
        .map(|e| format!("; first: {e}"))
        .unwrap_or_default()
}

fn report_first_error(phase: &str, stats: &Stats) {
    if let Some(e) = &stats.first_error {
        println!("{phase}: first error: {e}");
    }
}

// ---------------------------------------------------------------------------------------------
// Statistics

struct Stats {
    ok: u64,
    errors: u64,
    hist: Histogram,
    first_error: Option<String>,
}

impl Stats {
    fn new() -> Self {
        Stats {
            ok: 0,
            errors: 0,
            hist: Histogram::new(),
            first_error: None,
        }
    }

    fn error(&mut self, message: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(message);
        }
    }

    fn merge(&mut self, other: Stats) {
        self.ok += other.ok;
        self.errors += other.errors;
        self.hist.merge(&other.hist);
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

/// Log-linear latency histogram in nanoseconds: exact below 64 ns, then 64 buckets per power of
/// two (under 1.6 % relative error), no allocation per sample.
struct Histogram {
    counts: Vec<u64>,
    total: u64,
    max: u64,
}

const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
const BUCKETS: usize = ((64 - SUB_BITS as usize) + 1) * SUB as usize;

impl Histogram {
    fn new() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
            max: 0,
        }
    }

    fn index(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let exp = 63 - v.leading_zeros(); // >= SUB_BITS
        let mantissa = (v >> (exp - SUB_BITS)) & (SUB - 1);
        ((exp - SUB_BITS + 1) as u64 * SUB + mantissa) as usize
    }

    /// Middle of the bucket's range.
    fn value(index: usize) -> u64 {
        let index = index as u64;
        if index < SUB {
            return index;
        }
        let group = index / SUB; // >= 1
        let shift = group - 1;
        let low = (SUB + index % SUB) << shift;
        low + ((1u64 << shift) >> 1)
    }

    fn record(&mut self, d: Duration) {
        let v = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.counts[Self::index(v)] += 1;
        self.total += 1;
        self.max = self.max.max(v);
    }

    fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
    }

    fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        if rank == self.total {
            return self.max;
        }
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::value(i).min(self.max);
            }
        }
        self.max
    }
}

// ---------------------------------------------------------------------------------------------
// A minimal HTTP/1.1 keep-alive client

struct Target {
    addr: SocketAddr,
    /// `host:port` as in the URL (the `Host` header).
    authority: String,
    /// The MCP endpoint's path.
    path: String,
    /// The tenant of a `/t/{tenant}/mcp` path ("" otherwise).
    tenant: String,
    /// `Authorization: Bearer …\r\n`, or "".
    auth_header: String,
    /// Request line and fixed headers, ending in "\r\n" (more headers follow).
    head: Vec<u8>,
    /// The same for `GET` (opening or resuming an SSE stream).
    get_head: Vec<u8>,
    /// TLS for an `https://` URL.
    tls: Option<Tls>,
}

/// A connection to the server: TCP, or TLS over it. The request loops match on it once per
/// exchange and run the code for that stream type (no dynamic dispatch on the plain path).
enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// TLS towards the server (rustls with the ring provider, as the server): only the `--ca`
/// certificates are trusted, ALPN offers http/1.1 only. Counts the handshakes for the report.
struct Tls {
    connector: TlsConnector,
    name: rustls::pki_types::ServerName<'static>,
    handshakes: AtomicU64,
    /// Their total time, TCP connect included.
    handshake_nanos: AtomicU64,
    /// What the first handshake negotiated.
    negotiated: OnceLock<String>,
}

impl Tls {
    fn new(host: &str, ca: &Path) -> Result<Tls, String> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, ServerName};
        let certs = CertificateDer::pem_file_iter(ca)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("--ca {}: {e}", ca.display()))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| format!("--ca {}: {e}", ca.display()))?;
        }
        if roots.is_empty() {
            return Err(format!("--ca {}: no certificate in the file", ca.display()));
        }
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| format!("TLS server name {host:?}: {e}"))?;
        Ok(Tls {
            connector: TlsConnector::from(Arc::new(config)),
            name,
            handshakes: AtomicU64::new(0),
            handshake_nanos: AtomicU64::new(0),
            negotiated: OnceLock::new(),
        })
    }

    fn record(&self, took: Duration, stream: &TlsStream<TcpStream>) {
        self.handshakes.fetch_add(1, Ordering::Relaxed);
        self.handshake_nanos
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
        self.negotiated.get_or_init(|| {
            let session = stream.get_ref().1;
            let alpn = session
                .alpn_protocol()
                .map(|p| String::from_utf8_lossy(p).into_owned());
            format!(
                "{:?} {:?}, ALPN {}",
                session
                    .protocol_version()
                    .unwrap_or(rustls::ProtocolVersion::Unknown(0)),
                session
                    .negotiated_cipher_suite()
                    .map_or(rustls::CipherSuite::Unknown(0), |c| c.suite()),
                alpn.as_deref().unwrap_or("none")
            )
        });
    }

    /// `tls: …` after the phases: what was negotiated and the handshakes made.
    fn report(&self) {
        let n = self.handshakes.load(Ordering::Relaxed);
        let mean = if n == 0 {
            0.0
        } else {
            self.handshake_nanos.load(Ordering::Relaxed) as f64 / n as f64 / 1e6
        };
        println!(
            "tls: {}; {n} handshakes, mean {mean:.2} ms (TCP connect + handshake); connections are kept alive, so handshakes happen only as connections open (set-up and warm-up, not per request)",
            self.negotiated.get().map_or("no handshake", |s| s.as_str())
        );
    }
}

impl Target {
    /// Sends `Authorization: Bearer <token>` on every request.
    fn authorize(&mut self, token: &str) {
        let header = format!("Authorization: Bearer {token}\r\n");
        self.head.extend_from_slice(header.as_bytes());
        self.get_head.extend_from_slice(header.as_bytes());
        self.auth_header = header;
    }

    /// Parses the URL; an `https://` one needs `ca`, the certificates to trust.
    fn parse(url: &str, ca: Option<&Path>) -> Result<Target, String> {
        let (https, rest) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (false, rest),
            (_, Some(rest)) => (true, rest),
            _ => {
                return Err(format!(
                    "--url {url:?}: only http:// and https:// URLs are supported"
                ))
            }
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = match authority.strip_prefix('[') {
            Some(bracketed) => {
                let (h, after) = bracketed
                    .split_once(']')
                    .ok_or_else(|| format!("--url {url:?}: bad IPv6 host"))?;
                (h, after.strip_prefix(':'))
            }
            None => match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            },
        };
        let port = match port {
            Some(p) => p
                .parse::<u16>()
                .map_err(|_| format!("--url {url:?}: bad port {p:?}"))?,
            None if https => 443,
            None => 80,
        };
        let ip = match host {
            "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
            h => h.parse::<IpAddr>().map_err(|_| {
                format!("--url {url:?}: the host must be 127.0.0.1, [::1] or localhost")
            })?,
        };
        if !ip.is_loopback() {
            return Err(format!("--url {url:?}: only loopback targets are allowed"));
        }
        if path.contains(|c: char| c.is_ascii_whitespace() || c.is_ascii_control()) {
            return Err(format!("--url {url:?}: bad path"));
        }
        let tls = match (https, ca) {
            (true, Some(ca)) => Some(Tls::new(host, ca)?),
            (true, None) => return Err(format!("--url {url:?}: https:// needs --ca FILE")),
            (false, Some(_)) => return Err("--ca is only for https:// URLs".into()),
            (false, None) => None,
        };
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        )
        .into_bytes();
        let get_head =
            format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: text/event-stream\r\n")
                .into_bytes();
        let tenant = path
            .strip_prefix("/t/")
            .and_then(|p| p.split('/').next())
            .unwrap_or("")
            .to_string();
        Ok(Target {
            addr: SocketAddr::new(ip, port),
            authority: authority.to_string(),
            path: path.to_string(),
            tenant,
            auth_header: String::new(),
            head,
            get_head,
            tls,
        })
    }

    /// A new connection (TCP, then the TLS handshake for https://), within `CONNECT_TIMEOUT`.
    async fn connect(&self) -> io::Result<Stream> {
        let started = Instant::now();
        let timed_out =
            |what: &str| io::Error::new(io::ErrorKind::TimedOut, format!("{what} timed out"));
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(self.addr))
            .await
            .map_err(|_| timed_out("connect"))??;
        tcp.set_nodelay(true)?;
        let Some(tls) = &self.tls else {
            return Ok(Stream::Plain(tcp));
        };
        let handshake = tls.connector.connect(tls.name.clone(), tcp);
        let stream = tokio::time::timeout_at((started + CONNECT_TIMEOUT).into(), handshake)
            .await
            .map_err(|_| timed_out("TLS handshake"))?
            .map_err(explain_handshake_error)?;
        tls.record(started.elapsed(), &stream);
        Ok(Stream::Tls(Box::new(stream)))
    }
}

/// Adds the way out to the refusal a self-signed certificate made with `openssl req -x509`'s
/// defaults (CA:TRUE) meets as the server's own certificate.
fn explain_handshake_error(e: io::Error) -> io::Error {
    if !e.to_string().contains("CaUsedAsEndEntity") {
        return e;
    }
    io::Error::new(
        e.kind(),
        format!(
            "{e} (the server's certificate is marked CA:TRUE, which webpki refuses for a server: \
             make it with `-addext basicConstraints=critical,CA:FALSE`, or sign it with a CA given to --ca)"
        ),
    )
}

/// Gives every connection its own JSON-RPC id range.
static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);
const IDS_PER_CONNECTION: u64 = 1 << 32;

enum Body {
    /// `buf[start..end]`.
    InBuf(usize, usize),
    /// Decoded into `dechunked`.
    Dechunked,
}

struct Conn {
    target: Arc<Target>,
    stream: Option<Stream>,
    /// Bytes read; the last response starts at 0 and spans `consumed` bytes.
    buf: Vec<u8>,
    consumed: usize,
    body: Body,
    session: Option<(usize, usize)>,
    dechunked: Vec<u8>,
    /// The request being sent.
    out: Vec<u8>,
    /// The JSON-RPC payload of the next request.
    payload: Vec<u8>,
    next_id: u64,
    /// The protocol revision it initializes sessions with and names in `mcp-protocol-version`.
    version: &'static str,
}

impl Conn {
    fn new(target: Arc<Target>) -> Self {
        Self::with_version(target, PROTOCOL_VERSION)
    }

    fn with_version(target: Arc<Target>, version: &'static str) -> Self {
        let n = NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed);
        Conn {
            target,
            stream: None,
            buf: Vec::with_capacity(16 * 1024),
            consumed: 0,
            body: Body::InBuf(0, 0),
            session: None,
            dechunked: Vec::new(),
            out: Vec::with_capacity(1024),
            payload: Vec::with_capacity(256),
            next_id: n * IDS_PER_CONNECTION,
            version,
        }
    }

    fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn set_initialize_payload(&mut self) {
        let id = self.take_id();
        let version = self.version;
        self.payload.clear();
        let _ = write!(
            self.payload,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"bench","version":"1"}}}}}}"#
        );
    }

    /// `tools/call slow_count` with a progress token; returns the JSON-RPC id.
    fn set_slow_count_payload(&mut self, steps: u64, token: &str) -> u64 {
        let id = self.take_id();
        self.payload.clear();
        let _ = write!(
            self.payload,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"slow_count","arguments":{{"steps":{steps},"interval_ms":0}},"_meta":{{"progressToken":"{token}"}}}}}}"#
        );
        id
    }

    fn set_call_payload(&mut self) {
        let id = self.take_id();
        self.payload.clear();
        let _ = write!(
            self.payload,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hello"}}}}}}"#
        );
    }

    /// A stateless (2026-07-28) `tools/call` of `echo`: the request names its revision and
    /// capabilities in `_meta`.
    fn set_modern_call_payload(&mut self) {
        let id = self.take_id();
        self.payload.clear();
        let _ = write!(
            self.payload,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hello"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{MODERN_VERSION}","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"mcp-harbor-bench","version":"1"}}}}}}}}"#
        );
    }

    fn set_payload(&mut self, payload: &[u8]) {
        self.payload.clear();
        self.payload.extend_from_slice(payload);
    }

    /// The body of the last response.
    fn body(&self) -> &[u8] {
        match self.body {
            Body::InBuf(start, end) => &self.buf[start..end],
            Body::Dechunked => &self.dechunked,
        }
    }

    /// The `mcp-session-id` header of the last response.
    fn session_id(&self) -> Option<&str> {
        self.session
            .and_then(|(s, e)| std::str::from_utf8(&self.buf[s..e]).ok())
    }

    /// Does the last body carry a JSON-RPC error?
    fn body_has_error(&self) -> bool {
        find(self.body(), br#""error""#).is_some()
    }

    /// The start of the last body, for error messages.
    fn body_snippet(&self) -> String {
        let body = self.body();
        String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned()
    }

    /// Drops the connection (after an abandoned exchange); the next request reconnects.
    fn disconnect(&mut self) {
        self.stream = None;
        self.buf.clear();
        self.consumed = 0;
        self.body = Body::InBuf(0, 0);
        self.session = None;
    }

    async fn connect(&mut self) -> io::Result<()> {
        if self.stream.is_none() {
            let stream = self.target.connect().await?;
            self.buf.clear();
            self.consumed = 0;
            self.stream = Some(stream);
        }
        Ok(())
    }

    /// POSTs `payload` (with the session headers when `session` is given) and reads the answer;
    /// returns its status. Any I/O or framing error drops the connection (the next request
    /// reconnects).
    async fn post(&mut self, session: Option<&str>) -> io::Result<u16> {
        self.forget_response();

        self.out.clear();
        self.out.extend_from_slice(&self.target.head);
        if let Some(id) = session {
            self.out.extend_from_slice(b"mcp-session-id: ");
            self.out.extend_from_slice(id.as_bytes());
            self.out.extend_from_slice(b"\r\nmcp-protocol-version: ");
            self.out.extend_from_slice(self.version.as_bytes());
            self.out.extend_from_slice(b"\r\n");
        }
        let _ = write!(self.out, "Content-Length: {}\r\n\r\n", self.payload.len());
        self.out.extend_from_slice(&self.payload);
        self.send(None).await
    }

    /// POSTs the payload as a stateless `tools/call` of `echo` (its headers mirror the body).
    async fn post_modern(&mut self) -> io::Result<u16> {
        self.forget_response();

        self.out.clear();
        self.out.extend_from_slice(&self.target.head);
        let _ = write!(
            self.out,
            "mcp-protocol-version: {MODERN_VERSION}\r\nmcp-method: tools/call\r\nmcp-name: echo\r\nContent-Length: {}\r\n\r\n",
            self.payload.len()
        );
        self.out.extend_from_slice(&self.payload);
        self.send(None).await
    }

    /// GETs the session's SSE stream resuming after `last_event_id` and reads it to its end
    /// (the body is the decoded event stream); returns the status. `first_event` is set to the
    /// instant the first complete event with an id arrived.
    /// Drops the previous response before the next request.
    fn forget_response(&mut self) {
        self.buf.drain(..self.consumed);
        self.consumed = 0;
        self.body = Body::InBuf(0, 0);
        self.session = None;
    }

    /// Sends a request given whole (request line, headers, body) and reads its response.
    async fn raw(&mut self, request: Vec<u8>) -> io::Result<u16> {
        self.forget_response();
        self.out = request;
        self.send(None).await
    }

    async fn get_resume(
        &mut self,
        session: &str,
        last_event_id: &str,
        first_event: &mut Option<Instant>,
    ) -> io::Result<u16> {
        self.forget_response();

        self.out.clear();
        self.out.extend_from_slice(&self.target.get_head);
        let _ = write!(
            self.out,
            "mcp-session-id: {session}\r\nmcp-protocol-version: {}\r\nlast-event-id: {last_event_id}\r\n\r\n",
            self.version
        );
        self.send(Some(first_event)).await
    }

    /// Sends `out` and reads the answer; any I/O or framing error drops the connection.
    async fn send(&mut self, first_event: Option<&mut Option<Instant>>) -> io::Result<u16> {
        let result = self.exchange(first_event).await;
        if result.is_err() {
            self.stream = None;
            self.buf.clear();
            self.consumed = 0;
            self.body = Body::InBuf(0, 0);
            self.session = None;
        }
        result
    }

    async fn exchange(&mut self, first_event: Option<&mut Option<Instant>>) -> io::Result<u16> {
        self.connect().await?;
        // Out of `self` for the exchange, back unless the server closes it (or on error).
        let mut stream = self.stream.take().expect("connected above");
        // One arm per stream type, each compiled for its own (the plain one as before TLS).
        let (status, close) = match &mut stream {
            Stream::Plain(s) => self.exchange_on(s, first_event).await?,
            Stream::Tls(s) => self.exchange_on(s.as_mut(), first_event).await?,
        };
        if !close {
            self.stream = Some(stream);
        }
        Ok(status)
    }

    /// Writes `out` to `stream` and reads the response: its status and whether the server
    /// closes the connection.
    async fn exchange_on<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        stream: &mut S,
        first_event: Option<&mut Option<Instant>>,
    ) -> io::Result<(u16, bool)> {
        stream.write_all(&self.out).await?;
        // A no-op on TCP; TLS may hold the last record until flushed.
        stream.flush().await?;
        read_response(
            stream,
            &mut self.buf,
            &mut self.dechunked,
            &mut self.body,
            &mut self.session,
            &mut self.consumed,
            first_event,
        )
        .await
    }
}

/// Reads one response into `buf` (which starts empty or with bytes of this response): returns
/// its status and whether the server closes the connection. With `first_event`, a streamed body
/// is decoded as it arrives and `first_event` set when its first SSE event with an id is complete.
async fn read_response<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    dechunked: &mut Vec<u8>,
    body: &mut Body,
    session: &mut Option<(usize, usize)>,
    consumed: &mut usize,
    mut first_event: Option<&mut Option<Instant>>,
) -> io::Result<(u16, bool)> {
    // Head.
    let mut scanned = 0;
    let head_end = loop {
        if let Some(p) = find(&buf[scanned..], b"\r\n\r\n") {
            break scanned + p + 4;
        }
        scanned = buf.len().saturating_sub(3);
        fill(stream, buf).await?;
    };
    let head = parse_head(&buf[..head_end])?;
    *session = head.session;

    // Body.
    if head.chunked && first_event.is_some() {
        // Incrementally: each chunk is decoded once, as soon as it is complete.
        dechunked.clear();
        let mut at = head_end;
        let mut scanned = 0;
        loop {
            let (n, done) = decode_chunks(&buf[at..], dechunked)?;
            at += n;
            if let Some(first) = first_event.as_deref_mut() {
                if first.is_none() && completes_event(dechunked, &mut scanned) {
                    *first = Some(Instant::now());
                }
            }
            if done {
                break;
            }
            fill(stream, buf).await?;
        }
        *body = Body::Dechunked;
        *consumed = at;
    } else if head.chunked {
        loop {
            if let Some(n) = decode_chunked(&buf[head_end..], dechunked)? {
                *body = Body::Dechunked;
                *consumed = head_end + n;
                break;
            }
            fill(stream, buf).await?;
        }
    } else if let Some(len) = head.content_length {
        if len > MAX_RESPONSE {
            return Err(invalid("response body too large"));
        }
        while buf.len() < head_end + len {
            fill(stream, buf).await?;
        }
        *body = Body::InBuf(head_end, head_end + len);
        *consumed = head_end + len;
    } else if head.status < 200 || head.status == 204 || head.status == 304 {
        *body = Body::InBuf(head_end, head_end);
        *consumed = head_end;
    } else {
        // Delimited by the end of the connection.
        let mut scanned = head_end;
        loop {
            if let Some(first) = first_event.as_deref_mut() {
                if first.is_none() && completes_event(buf, &mut scanned) {
                    *first = Some(Instant::now());
                }
            }
            match fill(stream, buf).await {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(e),
            }
        }
        *body = Body::InBuf(head_end, buf.len());
        *consumed = buf.len();
        return Ok((head.status, true));
    }
    Ok((head.status, head.close))
}

async fn fill<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut Vec<u8>) -> io::Result<()> {
    if buf.len() > MAX_RESPONSE {
        return Err(invalid("response too large"));
    }
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(16 * 1024);
    }
    let n = stream.read_buf(buf).await?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the server closed the connection",
        ));
    }
    Ok(())
}

struct Head {
    status: u16,
    content_length: Option<usize>,
    chunked: bool,
    close: bool,
    session: Option<(usize, usize)>,
}

/// Parses the status line and the headers this client cares about; `head` ends in "\r\n\r\n".
fn parse_head(head: &[u8]) -> io::Result<Head> {
    if head.len() < 12 || !head.starts_with(b"HTTP/1.") || head[8] != b' ' {
        return Err(invalid("malformed status line"));
    }
    let status = std::str::from_utf8(&head[9..12])
        .ok()
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| invalid("malformed status code"))?;
    let mut parsed = Head {
        status,
        content_length: None,
        chunked: false,
        close: head[7] == b'0',
        session: None,
    };
    let mut pos = find(head, b"\r\n").map_or(head.len(), |p| p + 2);
    while pos < head.len() {
        let end = pos + find(&head[pos..], b"\r\n").unwrap_or(head.len() - pos);
        let line = &head[pos..end];
        if let Some(colon) = line.iter().position(|&b| b == b':') {
            let name = &line[..colon];
            let (vs, ve) = trim_range(line, colon + 1);
            let value = &line[vs..ve];
            if name.eq_ignore_ascii_case(b"content-length") {
                let n = std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.parse::<usize>().ok());
                parsed.content_length = Some(n.ok_or_else(|| invalid("malformed content-length"))?);
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                parsed.chunked = value.to_ascii_lowercase().ends_with(b"chunked");
            } else if name.eq_ignore_ascii_case(b"connection") {
                let v = value.to_ascii_lowercase();
                if v == b"close" {
                    parsed.close = true;
                } else if v == b"keep-alive" {
                    parsed.close = false;
                }
            } else if name.eq_ignore_ascii_case(b"mcp-session-id") {
                parsed.session = Some((pos + vs, pos + ve));
            }
        }
        pos = end + 2;
    }
    Ok(parsed)
}

/// The range of `line[from..]` without surrounding spaces and tabs.
fn trim_range(line: &[u8], from: usize) -> (usize, usize) {
    let mut s = from;
    let mut e = line.len();
    while s < e && (line[s] == b' ' || line[s] == b'\t') {
        s += 1;
    }
    while e > s && (line[e - 1] == b' ' || line[e - 1] == b'\t') {
        e -= 1;
    }
    (s, e)
}

/// Decodes a complete chunked body at the start of `data` into `out`: the bytes it spans, or
/// None when more data is needed.
fn decode_chunked(data: &[u8], out: &mut Vec<u8>) -> io::Result<Option<usize>> {
    out.clear();
    let mut pos = 0;
    loop {
        let Some(line_len) = find(&data[pos..], b"\r\n") else {
            return Ok(None);
        };
        let line = &data[pos..pos + line_len];
        let digits = line.split(|&b| b == b';').next().unwrap_or(b"");
        let size = parse_hex(digits).ok_or_else(|| invalid("malformed chunk size"))?;
        pos += line_len + 2;
        if size == 0 {
            // Trailers, then an empty line.
            loop {
                let Some(len) = find(&data[pos..], b"\r\n") else {
                    return Ok(None);
                };
                pos += len + 2;
                if len == 0 {
                    return Ok(Some(pos));
                }
            }
        }
        if size > MAX_RESPONSE || out.len() + size > MAX_RESPONSE {
            return Err(invalid("chunked body too large"));
        }
        if data.len() < pos + size + 2 {
            return Ok(None);
        }
        out.extend_from_slice(&data[pos..pos + size]);
        if &data[pos + size..pos + size + 2] != b"\r\n" {
            return Err(invalid("malformed chunk end"));
        }
        pos += size + 2;
    }
}

/// Decodes the complete chunks at the start of `data`, appending their bytes to `out`: returns
/// the bytes they span and whether the last chunk (and its trailers) was among them.
fn decode_chunks(data: &[u8], out: &mut Vec<u8>) -> io::Result<(usize, bool)> {
    let mut pos = 0;
    loop {
        let Some(line_len) = find(&data[pos..], b"\r\n") else {
            if data.len() - pos > 1024 {
                return Err(invalid("malformed chunk size line"));
            }
            return Ok((pos, false));
        };
        let line = &data[pos..pos + line_len];
        let digits = line.split(|&b| b == b';').next().unwrap_or(b"");
        let size = parse_hex(digits).ok_or_else(|| invalid("malformed chunk size"))?;
        let start = pos + line_len + 2;
        if size == 0 {
            let mut p = start;
            loop {
                let Some(len) = find(&data[p..], b"\r\n") else {
                    return Ok((pos, false));
                };
                p += len + 2;
                if len == 0 {
                    return Ok((p, true));
                }
            }
        }
        if size > MAX_RESPONSE || out.len() + size > MAX_RESPONSE {
            return Err(invalid("chunked body too large"));
        }
        if data.len() < start + size + 2 {
            return Ok((pos, false));
        }
        out.extend_from_slice(&data[start..start + size]);
        if &data[start + size..start + size + 2] != b"\r\n" {
            return Err(invalid("malformed chunk end"));
        }
        pos = start + size + 2;
    }
}

/// Whether the SSE text `data[*from..]` completes an event that has an id; `*from` moves past
/// the blocks (events, comments) checked.
fn completes_event(data: &[u8], from: &mut usize) -> bool {
    while let Some(p) = find(&data[*from..], b"\n\n") {
        let block = &data[*from..*from + p];
        *from += p + 2;
        if block.starts_with(b"id:") || find(block, b"\nid:").is_some() {
            return true;
        }
    }
    false
}

/// One server-sent event (comments and incomplete trailing blocks are not events).
#[derive(Debug, PartialEq)]
struct SseEvent {
    id: Option<String>,
    data: String,
}

fn parse_sse(text: &[u8]) -> Vec<SseEvent> {
    let text = String::from_utf8_lossy(text);
    let mut events = Vec::new();
    let mut rest = &*text;
    while let Some(end) = rest.find("\n\n") {
        let block = &rest[..end];
        rest = &rest[end + 2..];
        let mut event = SseEvent {
            id: None,
            data: String::new(),
        };
        let mut fields = 0;
        for line in block.lines() {
            if line.starts_with(':') {
                continue;
            }
            let (name, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            fields += 1;
            match name {
                "id" => event.id = Some(value.to_owned()),
                "data" => {
                    if !event.data.is_empty() {
                        event.data.push('\n');
                    }
                    event.data.push_str(value);
                }
                _ => {}
            }
        }
        if fields > 0 {
            events.push(event);
        }
    }
    events
}

/// `<stream>-<seq>` split at its last dash.
fn split_event_id(id: &str) -> Option<(&str, u64)> {
    let (stream, seq) = id.rsplit_once('-')?;
    Some((stream, seq.parse().ok()?))
}

fn parse_hex(digits: &[u8]) -> Option<usize> {
    let digits = &digits[..trim_range(digits, 0).1];
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    digits.iter().try_fold(0usize, |acc, &b| {
        Some(acc * 16 + (b as char).to_digit(16)? as usize)
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return if needle.is_empty() { Some(0) } else { None };
    }
    let first = needle[0];
    let last_start = haystack.len() - needle.len();
    let mut i = 0;
    while i <= last_start {
        match haystack[i..=last_start].iter().position(|&b| b == first) {
            None => return None,
            Some(p) => {
                i += p;
                if &haystack[i..i + needle.len()] == needle {
                    return Some(i);
                }
                i += 1;
            }
        }
    }
    None
}

fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_round_trip() {
        for v in [
            0u64,
            1,
            63,
            64,
            65,
            127,
            128,
            129,
            1000,
            123_456,
            1 << 40,
            u64::MAX / 2,
        ] {
            let i = Histogram::index(v);
            assert!(i < BUCKETS);
            let mid = Histogram::value(i);
            let err = mid.abs_diff(v) as f64 / v.max(1) as f64;
            assert!(err < 0.02, "{v} -> {i} -> {mid}");
        }
        let mut h = Histogram::new();
        for us in 1..=100u64 {
            h.record(Duration::from_micros(us));
        }
        let p50 = h.quantile(0.5) as f64 / 1000.0;
        assert!((p50 - 50.0).abs() < 1.0, "{p50}");
        assert_eq!(h.quantile(1.0), 100_000);
    }

    #[test]
    fn chunked_bodies() {
        let mut out = Vec::new();
        assert_eq!(
            decode_chunked(b"5\r\nhello\r\n0\r\n\r\nXX", &mut out).unwrap(),
            Some(15)
        );
        assert_eq!(out, b"hello");
        assert_eq!(
            decode_chunked(b"3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: v\r\n\r\n", &mut out).unwrap(),
            Some(30)
        );
        assert_eq!(out, b"abcde");
        assert_eq!(decode_chunked(b"5\r\nhel", &mut out).unwrap(), None);
        assert_eq!(
            decode_chunked(b"5\r\nhello\r\n0\r\n", &mut out).unwrap(),
            None
        );
        assert!(decode_chunked(b"zz\r\n", &mut out).is_err());
    }

    #[test]
    fn incremental_chunks_and_events() {
        let mut out = Vec::new();
        let data = b"5\r\nid: 1\r\n3\r\n\n\n:\r\n0\r\n\r\n";
        assert_eq!(decode_chunks(&data[..4], &mut out).unwrap(), (0, false));
        assert_eq!(decode_chunks(&data[..12], &mut out).unwrap(), (10, false));
        assert_eq!(out, b"id: 1");
        let mut from = 0;
        assert!(!completes_event(&out, &mut from));
        assert_eq!(decode_chunks(&data[10..], &mut out).unwrap(), (13, true));
        assert_eq!(out, b"id: 1\n\n:");
        assert!(completes_event(&out, &mut from));
        assert_eq!(from, 7);
        let mut from = 0;
        assert!(!completes_event(b": keep-alive\n\n", &mut from));
        assert!(completes_event(
            b"event: message\nid: 3-2\ndata: {}\n\n",
            &mut 0
        ));
    }

    #[test]
    fn answers_in_json_or_sse() {
        assert_eq!(answer_json(br#"{"id":1}"#), br#"{"id":1}"#);
        let sse = b"data: \nid: 0\nretry: 3000\n\ndata: {\"id\":2}\nid: 1/0\n\n";
        assert_eq!(answer_json(sse), br#"{"id":2}"#);
        assert!(answer_json(b"data: \n\n").is_empty());
    }

    #[test]
    fn sse_events() {
        let events = parse_sse(
            b"id: 7-1\nretry: 1000\ndata: \n\n: keep-alive\n\nevent: message\nid: 7-2\ndata: {\"a\":1}\n\nid: 7-3\ndata: x",
        );
        assert_eq!(
            events,
            vec![
                SseEvent {
                    id: Some("7-1".into()),
                    data: String::new()
                },
                SseEvent {
                    id: Some("7-2".into()),
                    data: r#"{"a":1}"#.into()
                },
            ]
        );
        assert_eq!(split_event_id("ab-12-3"), Some(("ab-12", 3)));
        assert_eq!(split_event_id("12"), None);
    }

    #[test]
    fn call_stream_checks() {
        let call = CallStream {
            session: "s".into(),
            call_id: 9,
            token: "t",
            steps: 2,
            stream: "4".into(),
            priming_id: "4-1".into(),
            priming_seq: 1,
            took: Duration::ZERO,
        };
        let progress = |seq: u64, n: u64| SseEvent {
            id: Some(format!("4-{seq}")),
            data: format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"t","progress":{n}.0,"total":2.0}}}}"#
            ),
        };
        let answer = |seq: u64| {
            SseEvent {
            id: Some(format!("4-{seq}")),
            data: r#"{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"counted 2"}]}}"#.into(),
        }
        };
        assert!(call
            .check(&[progress(2, 1), progress(3, 2), answer(4)], 1, 0)
            .is_ok());
        assert!(call.check(&[progress(3, 2), answer(4)], 2, 1).is_ok());
        let missing = call.check(&[progress(2, 1), answer(4)], 1, 0).unwrap_err();
        assert!(missing.contains("1 seqs missing"), "{missing}");
        let repeated = call
            .check(
                &[progress(2, 1), progress(2, 1), progress(3, 2), answer(4)],
                1,
                0,
            )
            .unwrap_err();
        assert!(repeated.contains("1 duplicate ids"), "{repeated}");
        assert!(call.check(&[progress(2, 1), progress(3, 2)], 1, 0).is_err());
        assert!(call
            .check(&[progress(2, 1), answer(3), progress(4, 2)], 1, 0)
            .is_err());
    }

    #[test]
    fn heads() {
        let h =
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\nMcp-Session-Id:  abc \r\n\r\n")
                .unwrap();
        assert_eq!(
            (h.status, h.content_length, h.chunked, h.close),
            (200, Some(12), false, false)
        );
        let (s, e) = h.session.unwrap();
        assert_eq!(
            &b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\nMcp-Session-Id:  abc \r\n\r\n"[s..e],
            b"abc"
        );
        let h = parse_head(
            b"HTTP/1.1 202 Accepted\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        )
        .unwrap();
        assert_eq!((h.status, h.chunked, h.close), (202, true, true));
    }

    #[test]
    fn urls() {
        let t = Target::parse("http://127.0.0.1:9000/t/demo/mcp", None).unwrap();
        assert_eq!(t.addr, "127.0.0.1:9000".parse().unwrap());
        assert!(t
            .head
            .starts_with(b"POST /t/demo/mcp HTTP/1.1\r\nHost: 127.0.0.1:9000\r\n"));
        assert!(Target::parse("http://localhost:80/x", None).is_ok());
        assert!(Target::parse("http://[::1]:8080/x", None).is_ok());
        assert!(Target::parse("http://10.0.0.1:8080/x", None).is_err());
        // https:// needs the certificates to trust, and --ca goes only with it.
        assert!(Target::parse("https://127.0.0.1/x", None).is_err());
        assert!(Target::parse("http://127.0.0.1/x", Some(Path::new("ca.pem"))).is_err());
        assert!(Target::parse("https://127.0.0.1/x", Some(Path::new("/nonexistent.pem"))).is_err());
    }

    #[test]
    fn finds() {
        assert_eq!(find(b"abc\r\n\r\n", b"\r\n\r\n"), Some(3));
        assert_eq!(find(b"abc", b"abcd"), None);
        assert_eq!(find(br#"{"error":1}"#, br#""error""#), Some(1));
    }
}
