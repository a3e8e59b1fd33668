//! Outages of the real services, stopped and restarted by the test under steady MCP and admin
//! load: while PostgreSQL is down, admin writes answer 503 + `Retry-After` within the pool's
//! acquire timeout and `/readyz` answers 503 at once, MCP traffic on open sessions goes on; when
//! it is back everything recovers by itself and every write acknowledged to a client is there.
//! Redis stopped: new sessions get 503 + `Retry-After`, open ones keep answering; restarted:
//! sessions start again.
//!
//! The services are private instances of the machine's own PostgreSQL and Redis servers (their
//! own data directory and port), so stopping them cannot disturb tests running in parallel.
//! Without root or the server binaries the test is skipped, unless MCP_HARBOR_REQUIRE_POSTGRES
//! is set (as in CI).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::helpers::spawn_app_with;
use reqwest::Method;
use serde_json::json;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn pg_bin() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("pg_ctl").exists())
        .collect();
    versions.sort();
    versions.pop()
}

/// A PostgreSQL server of its own (run as the `postgres` user, trust auth, loopback only).
struct Postgres {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
}

impl Postgres {
    fn start_new() -> Option<Postgres> {
        let bin = pg_bin()?;
        let is_root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        if !is_root {
            return None;
        }
        let dir = tempfile::tempdir().ok()?;
        let ok = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return None;
        }
        let pg = Postgres {
            bin,
            dir,
            port: free_port(),
        };
        let data = pg.data();
        let initdb = pg.as_postgres(
            &pg.bin.join("initdb"),
            &["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync"],
        );
        assert!(initdb, "initdb of the private cluster");
        pg.start();
        let created = pg.as_postgres(
            &pg.bin.join("createdb"),
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &pg.port.to_string(),
                "-U",
                "postgres",
                "harbor",
            ],
        );
        assert!(created, "createdb harbor");
        Some(pg)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn as_postgres(&self, program: &Path, args: &[&str]) -> bool {
        Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(program)
            .args(args)
            .current_dir(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/harbor", self.port)
    }

    fn start(&self) {
        let opts = format!(
            "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("pg.log").display().to_string();
        let data = self.data();
        let started = self.as_postgres(
            &self.bin.join("pg_ctl"),
            &["-D", &data, "-o", &opts, "-l", &log, "-w", "start"],
        );
        assert!(started, "pg_ctl start");
    }

    fn stop(&self) {
        let data = self.data();
        let stopped = self.as_postgres(
            &self.bin.join("pg_ctl"),
            &["-D", &data, "-m", "fast", "-w", "stop"],
        );
        assert!(stopped, "pg_ctl stop");
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.data();
        let _ = self.as_postgres(
            &self.bin.join("pg_ctl"),
            &["-D", &data, "-m", "immediate", "-w", "stop"],
        );
    }
}

/// A Redis server of its own, in the foreground as a child (stopped by killing it).
struct Redis {
    port: u16,
    child: Option<Child>,
}

impl Redis {
    fn start_new() -> Option<Redis> {
        Command::new("redis-server")
            .arg("--version")
            .output()
            .ok()?;
        let mut r = Redis {
            port: free_port(),
            child: None,
        };
        r.start();
        Some(r)
    }

    fn start(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the private redis-server did not listen");
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

fn required() -> bool {
    std::env::var_os("MCP_HARBOR_REQUIRE_POSTGRES").is_some()
}

/// Polls `f` every 100 ms until it is true or `within` passed.
async fn eventually<F, Fut>(within: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let until = Instant::now() + within;
    while Instant::now() < until {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[actix_rt::test]
async fn postgres_and_redis_outages_are_clear_503s_and_nothing_acknowledged_is_lost() {
    let (Some(pg), Some(mut redis)) = (Postgres::start_new(), Redis::start_new()) else {
        assert!(
            !required(),
            "MCP_HARBOR_REQUIRE_POSTGRES is set but a private PostgreSQL/Redis cannot be started \
             (needs root and the server binaries)"
        );
        eprintln!("skipped: no private PostgreSQL/Redis here (needs root and the binaries)");
        return;
    };
    let (db_url, redis_url) = (pg.url(), redis.url());
    let app = spawn_app_with(|c| {
        c.storage.database_url = db_url;
        c.storage.max_connections = 4;
        c.redis.url = redis_url;
        c.redis.key_prefix = format!("outage-{}", free_port());
    })
    .await;
    let app = Arc::new(app);

    // Steady load: MCP tool calls on an open session, and admin writes (tenant creations) whose
    // acknowledged results are remembered.
    let mut client = app.open_session("demo", "2025-06-18", json!({})).await;
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let refused = Arc::new(AtomicUsize::new(0));
    let other_failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let writer = {
        let (app, stop, acknowledged, refused, other) = (
            app.clone(),
            stop.clone(),
            acknowledged.clone(),
            refused.clone(),
            other_failures.clone(),
        );
        actix_rt::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let slug = format!("load-{n}");
                let resp = app
                    .admin(Method::POST, "/tenants")
                    .json(&json!({ "slug": slug }))
                    .send()
                    .await;
                match resp {
                    Ok(r) if r.status() == 201 => acknowledged.lock().unwrap().push(slug),
                    Ok(r) if r.status() == 503 && r.headers().contains_key("retry-after") => {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(r) => other
                        .lock()
                        .unwrap()
                        .push(format!("{slug}: {}", r.status())),
                    Err(e) => other.lock().unwrap().push(format!("{slug}: {e}")),
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let mut calls_ok = 0;
    for _ in 0..5 {
        let r = client
            .result(
                "tools/call",
                json!({ "name": "echo", "arguments": { "text": "hi" } }),
            )
            .await;
        assert!(r.get("content").is_some(), "{r}");
        calls_ok += 1;
    }

    // PostgreSQL stops.
    pg.stop();
    let started = Instant::now();
    let resp = app
        .admin(Method::POST, "/tenants")
        .json(&json!({ "slug": "during-outage" }))
        .send()
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(resp.status(), 503, "an admin write with the database down");
    assert!(resp.headers().contains_key("retry-after"));
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    eprintln!("admin write answered 503 after {} ms", took.as_millis());
    assert!(
        took < Duration::from_secs(10),
        "answered within the acquire timeout, not sqlx's 30 s: {took:?}"
    );
    let started = Instant::now();
    let ready = app
        .http
        .get(format!("{}/readyz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503, "/readyz with the database down");
    eprintln!(
        "/readyz answered 503 after {} ms",
        started.elapsed().as_millis()
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    // MCP traffic on the open session goes on (it needs no database).
    for _ in 0..5 {
        let r = client
            .result(
                "tools/call",
                json!({ "name": "echo", "arguments": { "text": "hi" } }),
            )
            .await;
        assert!(r.get("content").is_some(), "{r}");
        calls_ok += 1;
    }
    // The load's writes meet the outage too: each waits out the pool's acquire timeout, then is
    // refused (a write already committed when the database went is acknowledged: it stands).
    assert!(
        eventually(Duration::from_secs(10), || async {
            refused.load(Ordering::Relaxed) > 0
        })
        .await,
        "the load saw the outage"
    );

    // PostgreSQL is back: everything recovers by itself.
    pg.start();
    assert!(
        eventually(Duration::from_secs(20), || async {
            app.admin(Method::POST, "/tenants")
                .json(&json!({ "slug": format!("after-{}", free_port()) }))
                .send()
                .await
                .is_ok_and(|r| r.status() == 201)
        })
        .await,
        "admin writes succeed again"
    );
    assert!(
        eventually(Duration::from_secs(10), || async {
            app.http
                .get(format!("{}/readyz", app.base))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
        })
        .await,
        "ready again"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Redis stops: new sessions are refused clearly, the open one keeps answering.
    redis.stop();
    let resp = app
        .post(
            "demo",
            None,
            &crate::helpers::initialize_body("2025-06-18", json!({})),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 503, "a new session with Redis down");
    assert!(resp.headers().contains_key("retry-after"));
    let r = client
        .result(
            "tools/call",
            json!({ "name": "echo", "arguments": { "text": "hi" } }),
        )
        .await;
    assert!(r.get("content").is_some(), "{r}");
    calls_ok += 1;
    redis.start();
    assert!(
        eventually(Duration::from_secs(20), || async {
            app.post(
                "demo",
                None,
                &crate::helpers::initialize_body("2025-06-18", json!({})),
            )
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
        })
        .await,
        "sessions start again once Redis is back"
    );

    stop.store(true, Ordering::Relaxed);
    let _ = writer.await;
    let acknowledged = acknowledged.lock().unwrap().clone();
    let other = other_failures.lock().unwrap().clone();
    eprintln!(
        "load: {} tenant writes acknowledged, {} refused with 503, {} tool calls answered",
        acknowledged.len(),
        refused.load(Ordering::Relaxed),
        calls_ok
    );
    assert!(other.is_empty(), "only 201s and 503s: {other:?}");
    assert!(
        refused.load(Ordering::Relaxed) > 0,
        "the load saw the outage"
    );
    assert!(!acknowledged.is_empty());
    // Nothing acknowledged was lost.
    for slug in &acknowledged {
        let r = app
            .admin(Method::GET, &format!("/tenants/{slug}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "acknowledged tenant {slug} is there");
    }
}
