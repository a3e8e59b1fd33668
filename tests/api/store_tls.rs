//! TLS to the data stores, against real servers: the machine's PostgreSQL (Debian sets
//! `ssl = on` with its self-signed `localhost` certificate) through `sslmode`/`sslrootcert` in
//! the database URL, and a `redis-server --tls-port` started here with a CA made here, through
//! `rediss://` and `redis.tls_ca_path` (and a client certificate when the server asks for one).
//! The server serves sessions through both; a CA or host name that does not match stops it at
//! start with an error naming the store.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mcp_harbor::{Application, Config};
use serde_json::json;

use crate::helpers::{db, spawn_app_with, test_config};

/// Debian's PostgreSQL certificate: self-signed, for `localhost` only.
const POSTGRES_CERT: &str = "/etc/ssl/certs/ssl-cert-snakeoil.pem";

/// A CA and what it signed, as PEM files in a directory of the test's.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    /// A CA, a server certificate for `localhost` only (no IP address) and a client
    /// certificate, each signed by the CA.
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "harbor test CA");
        let ca = ca_params.self_signed(&ca_key).unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        for (name, host) in [("server", "localhost"), ("client", "harbor-client")] {
            let key = rcgen::KeyPair::generate().unwrap();
            let params = rcgen::CertificateParams::new(vec![host.to_string()]).unwrap();
            let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
            std::fs::write(dir.path().join(format!("{name}.pem")), cert.pem()).unwrap();
            std::fs::write(dir.path().join(format!("{name}.key")), key.serialize_pem()).unwrap();
        }
        Pki { dir }
    }

    fn file(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

/// A `redis-server` answering TLS only, on a port of its own, killed when dropped.
struct TlsRedis {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl TlsRedis {
    /// `clients`: `no` (any client) or `yes` (a certificate the CA signed is required).
    async fn start(pki: &Pki, clients: &str) -> TlsRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new("redis-server")
            .args([
                "--port",
                "0",
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--tls-port", &port.to_string()])
            .args(["--tls-cert-file", &pki.file("server.pem")])
            .args(["--tls-key-file", &pki.file("server.key")])
            .args(["--tls-ca-cert-file", &pki.file("ca.pem")])
            .args(["--tls-auth-clients", clients])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server runs (Debian's is built with TLS)");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "redis-server did not listen"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        TlsRedis {
            child,
            port,
            _dir: dir,
        }
    }

    fn url(&self, host: &str) -> String {
        format!("rediss://{host}:{}", self.port)
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why the server would not start with `tweak` applied (it must not).
async fn start_error(tweak: impl FnOnce(&mut Config)) -> String {
    let mut config = test_config();
    let data_dir = tempfile::tempdir().unwrap();
    config.storage.data_dir = data_dir.path().display().to_string();
    tweak(&mut config);
    config.validate().expect("a valid configuration");
    match Application::build(config).await {
        Ok(_) => panic!("the server started"),
        Err(e) => e.to_string(),
    }
}

/// A session opened and a tool called on `app`'s tenant `demo`.
async fn serves_a_session(app: &crate::helpers::TestApp) {
    let mut client = app.open_session("demo", "2025-11-25", json!({})).await;
    let result = client
        .result(
            "tools/call",
            json!({ "name": "echo", "arguments": { "text": "over TLS" } }),
        )
        .await;
    assert_eq!(result["content"][0]["text"], "over TLS", "{result}");
}

/// `url` with `query` appended (`?` or `&`).
fn with_query(url: &str, query: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{query}")
}

/// The same database URL reaching the server by another host name.
fn on_host(url: &str, host: &str) -> String {
    url.replacen("@127.0.0.1:", &format!("@{host}:"), 1)
}

#[actix_rt::test]
async fn the_server_reaches_postgresql_over_tls_and_refuses_an_untrusted_certificate() {
    let Some(url) = db::postgres_url().await else {
        return;
    };
    assert!(
        Path::new(POSTGRES_CERT).exists(),
        "PostgreSQL's certificate {POSTGRES_CERT} (Debian's ssl = on) is missing"
    );
    // Encrypted, the certificate checked against its issuer and its host name (`localhost`).
    let verified = with_query(
        &on_host(&url, "localhost"),
        &format!("sslmode=verify-full&sslrootcert={POSTGRES_CERT}"),
    );
    let app = spawn_app_with(|c| c.storage.database_url = verified.clone()).await;
    serves_a_session(&app).await;
    // PostgreSQL itself says the server's connections are encrypted.
    let name = url.rsplit('/').next().unwrap().to_string();
    let observer = sqlx::PgPool::connect(&url).await.unwrap();
    let (encrypted, plain): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl) \
         FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
         WHERE a.datname = $1 AND a.pid <> pg_backend_pid()",
    )
    .bind(&name)
    .fetch_one(&observer)
    .await
    .unwrap();
    assert!(
        encrypted >= 1 && plain == 0,
        "{encrypted} encrypted, {plain} plain"
    );
    observer.close().await;
    app.handle.stop(false).await;
    drop(app);

    // `require` encrypts without checking the certificate (libpq's meaning).
    let required = with_query(&url, "sslmode=require");
    let app = spawn_app_with(|c| c.storage.database_url = required.clone()).await;
    serves_a_session(&app).await;
    app.handle.stop(false).await;
    drop(app);

    // A CA that did not sign the server's certificate, and a host name it does not name.
    let pki = Pki::new();
    let wrong_ca = with_query(
        &on_host(&url, "localhost"),
        &format!("sslmode=verify-full&sslrootcert={}", pki.file("ca.pem")),
    );
    let error = start_error(|c| c.storage.database_url = wrong_ca).await;
    assert!(error.starts_with("storage:"), "{error}");
    assert!(error.to_lowercase().contains("certificate"), "{error}");
    let wrong_host = with_query(
        &url,
        &format!("sslmode=verify-full&sslrootcert={POSTGRES_CERT}"),
    );
    let error = start_error(|c| c.storage.database_url = wrong_host).await;
    assert!(error.starts_with("storage:"), "{error}");
    assert!(error.to_lowercase().contains("certificate"), "{error}");
    db::drop_postgres(&url).await;
}

#[actix_rt::test]
async fn the_server_reaches_redis_over_tls_and_refuses_an_untrusted_certificate() {
    let pki = Pki::new();
    let redis = TlsRedis::start(&pki, "no").await;
    let prefix = format!("test-{}", uuid::Uuid::new_v4().simple());
    let app = spawn_app_with(|c| {
        c.redis.url = redis.url("localhost");
        c.redis.key_prefix = prefix.clone();
        c.redis.tls_ca_path = pki.file("ca.pem");
    })
    .await;
    serves_a_session(&app).await;
    app.handle.stop(false).await;
    drop(app);

    // The system's roots do not know the test's CA; another CA does not either; the server's
    // certificate does not name 127.0.0.1.
    let error = start_error(|c| c.redis.url = redis.url("localhost")).await;
    assert!(error.starts_with("shared session state:"), "{error}");
    let other = Pki::new();
    let error = start_error(|c| {
        c.redis.url = redis.url("localhost");
        c.redis.tls_ca_path = other.file("ca.pem");
    })
    .await;
    assert!(error.starts_with("shared session state:"), "{error}");
    assert!(error.contains("redis"), "{error}");
    let error = start_error(|c| {
        c.redis.url = redis.url("127.0.0.1");
        c.redis.tls_ca_path = pki.file("ca.pem");
    })
    .await;
    assert!(error.starts_with("shared session state:"), "{error}");
}

#[actix_rt::test]
async fn a_redis_that_requires_client_certificates_gets_the_configured_one() {
    let pki = Pki::new();
    let redis = TlsRedis::start(&pki, "yes").await;
    let error = start_error(|c| {
        c.redis.url = redis.url("localhost");
        c.redis.tls_ca_path = pki.file("ca.pem");
    })
    .await;
    assert!(error.starts_with("shared session state:"), "{error}");
    let app = spawn_app_with(|c| {
        c.redis.url = redis.url("localhost");
        c.redis.key_prefix = format!("test-{}", uuid::Uuid::new_v4().simple());
        c.redis.tls_ca_path = pki.file("ca.pem");
        c.redis.tls_cert_path = pki.file("client.pem");
        c.redis.tls_key_path = pki.file("client.key");
    })
    .await;
    serves_a_session(&app).await;
}

#[test]
fn redis_certificates_need_a_rediss_url_and_come_in_pairs() {
    let mut config = test_config();
    config.redis.url = "redis://127.0.0.1:6379".into();
    config.redis.tls_ca_path = "/etc/ssl/certs/ca-certificates.crt".into();
    let error = config.validate().unwrap_err().to_string();
    assert!(error.contains("rediss://"), "{error}");
    let mut config = test_config();
    config.redis.url = "rediss://localhost:6380".into();
    config.redis.tls_cert_path = "/tmp/client.pem".into();
    let error = config.validate().unwrap_err().to_string();
    assert!(error.contains("go together"), "{error}");
}
