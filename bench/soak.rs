//! The `soak` phase: a mixed load held for `--duration` seconds while the server's resident
//! memory, open file descriptors, threads and runtime tasks are sampled every `--sample-secs`.
//! It fails when a request fails or when memory, descriptors or tasks keep growing.
//!
//! The mix (each worker pauses `--soak-pause-ms` between its operations, so the run measures
//! leaks rather than peak throughput):
//! - 2 churners: open a session, call `echo` three times, end it with DELETE;
//! - 2 callers: `echo` on a session of their own, replaced every 500 calls;
//! - 1 resumer: a `slow_count` call on a 2025-11-25 session (SSE, priming event), then its
//!   stream resumed with `Last-Event-ID`, checked, and the session ended;
//! - 1 stateless caller: 2026-07-28 `echo` calls (no session);
//! - 1 admin writer (with `--admin-token-env`): publishes a prompt on the tenant and removes it
//!   again (each change is a list_changed for the open sessions).
//!
//! Growth is judged on the samples after the first fifth of the run (start-up and warm-up):
//! the median of their last third against the median of their first third (memory: more than
//! 10 % and 16 MiB more), and the lowest value of the last third against the highest of the
//! first (descriptors: 8 more; tasks: 64 more): a level that only fluctuates passes, one that
//! climbs through the run does not.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::{
    open_session, read_rss, start_call, Args, Conn, Target, MODERN_VERSION, RESUMABLE_VERSION,
    STREAM_TIMEOUT,
};

/// Operations done and failed, shared by the workers.
#[derive(Default)]
struct Tally {
    inits: AtomicU64,
    calls: AtomicU64,
    resumes: AtomicU64,
    stateless: AtomicU64,
    admin: AtomicU64,
    errors: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl Tally {
    fn error(&self, what: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut first = self.first_error.lock();
        if first.is_none() {
            *first = Some(what);
        }
    }

    fn line(&self) -> String {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "sessions {} calls {} resumes {} stateless {} admin {} errors {}",
            n(&self.inits),
            n(&self.calls),
            n(&self.resumes),
            n(&self.stateless),
            n(&self.admin),
            n(&self.errors)
        )
    }
}

/// One sample of the server process.
#[derive(Clone, Copy)]
struct Sample {
    at: f64,
    rss: u64,
    fds: u64,
    threads: u64,
    /// `mcp_harbor_runtime_alive_tasks` (None without a metrics token).
    tasks: Option<u64>,
}

pub(super) async fn soak_phase(args: &Args, target: &Arc<Target>) -> Result<bool, String> {
    let pid = args.server_pid.ok_or("the soak phase needs --server-pid")?;
    let admin_token = token_from(args.admin_token_env.as_deref(), "--admin-token-env")?;
    let metrics_token = token_from(args.metrics_token_env.as_deref(), "--metrics-token-env")?;
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(args.duration);
    let pause = Duration::from_millis(args.soak_pause_ms);
    let tally = Arc::new(Tally::default());
    println!(
        "soak: {:.0} s of mixed load (pause {} ms per operation per worker), sampling every {} s",
        args.duration, args.soak_pause_ms, args.sample_secs
    );

    let mut workers = Vec::new();
    for _ in 0..2 {
        workers.push(tokio::spawn(churn(
            target.clone(),
            tally.clone(),
            deadline,
            pause,
        )));
        workers.push(tokio::spawn(calls(
            target.clone(),
            tally.clone(),
            deadline,
            pause,
        )));
    }
    workers.push(tokio::spawn(resumes(
        target.clone(),
        tally.clone(),
        deadline,
        pause,
    )));
    workers.push(tokio::spawn(stateless(
        target.clone(),
        tally.clone(),
        deadline,
        pause,
    )));
    if let Some(token) = admin_token {
        workers.push(tokio::spawn(admin(
            target.clone(),
            tally.clone(),
            deadline,
            pause.max(Duration::from_millis(200)),
            token,
        )));
    } else {
        println!("soak: no admin changes (no --admin-token-env)");
    }

    let mut samples = Vec::new();
    let mut metrics_conn = Conn::new(target.clone());
    let every = Duration::from_secs(args.sample_secs);
    let mut next = started;
    while Instant::now() < deadline {
        next += every;
        tokio::time::sleep_until(next.min(deadline).into()).await;
        let tasks = match &metrics_token {
            // Once more on a new connection when the kept-alive one was closed meanwhile.
            Some(token) => match runtime_tasks(&mut metrics_conn, token).await {
                None => runtime_tasks(&mut metrics_conn, token).await,
                some => some,
            },
            None => None,
        };
        let sample = Sample {
            at: started.elapsed().as_secs_f64(),
            rss: read_rss(pid)?,
            fds: count_fds(pid)?,
            threads: read_status_field(pid, "Threads:").unwrap_or(0),
            tasks,
        };
        println!(
            "soak: {:6.0} s  rss {:7.1} MiB  fds {:4}  threads {:3}  tasks {:>5}  | {}",
            sample.at,
            sample.rss as f64 / (1024.0 * 1024.0),
            sample.fds,
            sample.threads,
            sample.tasks.map_or("-".into(), |t| t.to_string()),
            tally.line()
        );
        samples.push(sample);
    }
    for worker in workers {
        if tokio::time::timeout(STREAM_TIMEOUT, worker).await.is_err() {
            tally.error("a worker did not stop after the deadline".into());
        }
    }

    let mut ok = true;
    let judged = judged(&samples);
    if judged.len() < 6 {
        println!(
            "soak: only {} samples after warm-up: too short to judge growth (run longer or sample more often)",
            judged.len()
        );
    } else {
        ok &= verdict(
            "memory (MiB)",
            judged,
            |s| s.rss as f64 / (1024.0 * 1024.0),
            Growth::Median {
                ratio: 0.10,
                floor: 16.0,
            },
        );
        ok &= verdict(
            "file descriptors",
            judged,
            |s| s.fds as f64,
            Growth::Level(8.0),
        );
        let with_tasks: Vec<Sample> = judged
            .iter()
            .filter(|s| s.tasks.is_some())
            .copied()
            .collect();
        if with_tasks.len() >= 6 {
            ok &= verdict(
                "runtime tasks",
                &with_tasks,
                |s| s.tasks.unwrap_or(0) as f64,
                Growth::Level(64.0),
            );
        } else {
            println!("soak: runtime tasks not judged (too few samples read from /metrics; needs --metrics-token-env)");
        }
    }
    let errors = tally.errors.load(Ordering::Relaxed);
    println!(
        "soak: done after {:.0} s: {}",
        started.elapsed().as_secs_f64(),
        tally.line()
    );
    if let Some(e) = tally.first_error.lock().take() {
        println!("soak: first error: {e}");
    }
    Ok(ok && errors == 0)
}

fn token_from(var: Option<&str>, flag: &str) -> Result<Option<String>, String> {
    let Some(var) = var else { return Ok(None) };
    match std::env::var(var) {
        Ok(t) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_graphic()) => Ok(Some(t)),
        _ => Err(format!("{flag} {var}: no usable token there")),
    }
}

/// The samples after the first fifth of the run.
fn judged(samples: &[Sample]) -> &[Sample] {
    let Some(last) = samples.last() else {
        return samples;
    };
    let from = last.at / 5.0;
    let start = samples.iter().position(|s| s.at >= from).unwrap_or(0);
    &samples[start..]
}

enum Growth {
    /// Median of the last third above the first third's by more than `ratio` and `floor`.
    Median { ratio: f64, floor: f64 },
    /// Lowest of the last third above the highest of the first third by more than this.
    Level(f64),
}

fn verdict(name: &str, samples: &[Sample], value: impl Fn(&Sample) -> f64, rule: Growth) -> bool {
    let third = samples.len() / 3;
    let first: Vec<f64> = samples[..third].iter().map(&value).collect();
    let last: Vec<f64> = samples[samples.len() - third..]
        .iter()
        .map(&value)
        .collect();
    let (growing, detail) = match rule {
        Growth::Median { ratio, floor } => {
            let (a, b) = (median(&first), median(&last));
            (
                b - a > (a * ratio).max(floor),
                format!(
                    "median {a:.1} -> {b:.1} (limit +{:.1})",
                    (a * ratio).max(floor)
                ),
            )
        }
        Growth::Level(limit) => {
            let high = first.iter().copied().fold(f64::MIN, f64::max);
            let low = last.iter().copied().fold(f64::MAX, f64::min);
            (
                low - high > limit,
                format!("first third at most {high:.0}, last third at least {low:.0} (limit +{limit:.0})"),
            )
        }
    };
    println!(
        "soak: {name}: {detail}: {}",
        if growing { "GROWING" } else { "steady" }
    );
    !growing
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn count_fds(pid: u32) -> Result<u64, String> {
    let dir = format!("/proc/{pid}/fd");
    std::fs::read_dir(&dir)
        .map(|entries| entries.count() as u64)
        .map_err(|e| format!("cannot read {dir}: {e}"))
}

fn read_status_field(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .trim()
        .parse()
        .ok()
}

/// `mcp_harbor_runtime_alive_tasks` from the server's /metrics (bearer token).
async fn runtime_tasks(conn: &mut Conn, token: &str) -> Option<u64> {
    let request = format!(
        "GET /metrics HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\r\n",
        conn.target.authority
    );
    match conn.raw(request.into_bytes()).await {
        Ok(200) => String::from_utf8_lossy(conn.body())
            .lines()
            .find_map(|l| l.strip_prefix("mcp_harbor_runtime_alive_tasks "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|v| v as u64),
        _ => None,
    }
}

/// Runs `$op` (a block evaluating to `Result<(), String>`, run as an async block so it may use
/// `?`) until the deadline, pausing between runs; a failure is tallied and the loop goes on (the
/// connection reconnects on its next request).
macro_rules! until_deadline {
    ($deadline:expr, $pause:expr, $tally:expr, $op:block) => {
        while Instant::now() < $deadline {
            let outcome: Result<(), String> = async $op.await;
            if let Err(e) = outcome {
                $tally.error(e);
            }
            tokio::time::sleep($pause).await;
        }
    };
}

async fn churn(target: Arc<Target>, tally: Arc<Tally>, deadline: Instant, pause: Duration) {
    let mut conn = Conn::new(target);
    until_deadline!(deadline, pause, tally, {
        let session = timed(open_session(&mut conn)).await??;
        tally.inits.fetch_add(1, Ordering::Relaxed);
        for _ in 0..3 {
            echo(&mut conn, &session).await?;
            tally.calls.fetch_add(1, Ordering::Relaxed);
        }
        end_session(&mut conn, &session).await
    });
}

async fn calls(target: Arc<Target>, tally: Arc<Tally>, deadline: Instant, pause: Duration) {
    let mut conn = Conn::new(target);
    let mut session: Option<(String, u32)> = None;
    until_deadline!(deadline, pause, tally, {
        let (id, used) = match session.take() {
            Some((id, used)) if used < 500 => (id, used),
            old => {
                if let Some((id, _)) = old {
                    end_session(&mut conn, &id).await?;
                }
                let id = timed(open_session(&mut conn)).await??;
                tally.inits.fetch_add(1, Ordering::Relaxed);
                (id, 0)
            }
        };
        echo(&mut conn, &id).await?;
        tally.calls.fetch_add(1, Ordering::Relaxed);
        session = Some((id, used + 1));
        Ok(())
    });
}

async fn resumes(target: Arc<Target>, tally: Arc<Tally>, deadline: Instant, pause: Duration) {
    let mut conn = Conn::with_version(target, RESUMABLE_VERSION);
    until_deadline!(deadline, pause, tally, {
        let call = start_call(&mut conn, 3, "soak-resume").await?;
        tally.inits.fetch_add(1, Ordering::Relaxed);
        let mut first = None;
        let result = timed(conn.get_resume(&call.session, &call.priming_id, &mut first)).await?;
        answered(&conn, "resume", result, |status| status == 200)?;
        let events = super::parse_sse(conn.body());
        call.check(&events, call.priming_seq, 0)
            .map_err(|e| format!("resume after {}: {e}", call.priming_id))?;
        tally.resumes.fetch_add(1, Ordering::Relaxed);
        end_session(&mut conn, &call.session).await
    });
}

async fn stateless(target: Arc<Target>, tally: Arc<Tally>, deadline: Instant, pause: Duration) {
    let mut conn = Conn::with_version(target, MODERN_VERSION);
    until_deadline!(deadline, pause, tally, {
        conn.set_modern_call_payload();
        let result = timed(conn.post_modern()).await?;
        answered(&conn, "stateless echo", result, |status| {
            status == 200 && !conn.body_has_error()
        })?;
        tally.stateless.fetch_add(1, Ordering::Relaxed);
        Ok(())
    });
}

async fn admin(
    target: Arc<Target>,
    tally: Arc<Tally>,
    deadline: Instant,
    pause: Duration,
    token: String,
) {
    let tenant = target.tenant.clone();
    let mut conn = Conn::new(target);
    let mut n = 0u64;
    until_deadline!(deadline, pause, tally, {
        n += 1;
        let name = format!("soak-{n}");
        let body = format!(
            r#"{{"name":"{name}","description":"soak test prompt","messages":[{{"role":"user","text":"hello {{{{who}}}}"}}],"arguments":[{{"name":"who"}}]}}"#
        );
        let path = format!("/admin/v1/tenants/{tenant}/prompts");
        admin_request(&mut conn, &token, "POST", &path, Some(&body)).await?;
        admin_request(&mut conn, &token, "DELETE", &format!("{path}/{name}"), None).await?;
        tally.admin.fetch_add(2, Ordering::Relaxed);
        Ok(())
    });
}

async fn admin_request(
    conn: &mut Conn,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<(), String> {
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n",
        conn.target.authority
    );
    match body {
        Some(b) => request.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        )),
        None => request.push_str("Content-Length: 0\r\n\r\n"),
    }
    let result = timed(conn.raw(request.into_bytes())).await?;
    answered(conn, &format!("admin {method} {path}"), result, |status| {
        (200..300).contains(&status)
    })
}

async fn echo(conn: &mut Conn, session: &str) -> Result<(), String> {
    conn.set_call_payload();
    let result = timed(conn.post(Some(session))).await?;
    answered(conn, "echo", result, |status| {
        status == 200 && !conn.body_has_error()
    })
}

async fn end_session(conn: &mut Conn, session: &str) -> Result<(), String> {
    let request = format!(
        "DELETE {} HTTP/1.1\r\nHost: {}\r\nmcp-session-id: {session}\r\nmcp-protocol-version: {}\r\n{}\r\n",
        conn.target.path,
        conn.target.authority,
        conn.version,
        conn.target.auth_header
    );
    let result = timed(conn.raw(request.into_bytes())).await?;
    answered(conn, "DELETE session", result, |status| {
        matches!(status, 200 | 204)
    })
}

/// Whether a request of the soak (`what`) was answered as `ok` accepts; else why not.
fn answered(
    conn: &Conn,
    what: &str,
    result: std::io::Result<u16>,
    ok: impl FnOnce(u16) -> bool,
) -> Result<(), String> {
    match result {
        Ok(status) if ok(status) => Ok(()),
        Ok(status) => Err(format!("{what}: HTTP {status}: {}", conn.body_snippet())),
        Err(e) => Err(format!("{what}: {e}")),
    }
}

/// Bounds one request (a hung server fails the soak instead of stalling it).
async fn timed<T>(f: impl std::future::Future<Output = T>) -> Result<T, String> {
    tokio::time::timeout(STREAM_TIMEOUT, f)
        .await
        .map_err(|_| format!("no answer within {} s", STREAM_TIMEOUT.as_secs()))
}
