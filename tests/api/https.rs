//! HTTPS served by the binary: a certificate made in the test, HTTP/2 by ALPN (HTTP/1.1 for
//! clients that only speak it), MCP over TLS, and a certificate replaced on disk picked up
//! without a restart (a broken replacement leaves the previous one in use).

use std::path::Path;
use std::time::Duration;

use crate::helpers::{initialize_body, spawn_app_with};
use serde_json::json;

/// A self-signed certificate for 127.0.0.1 and localhost: (certificate PEM, key PEM, DER).
fn certificate(name: &str) -> (String, String, Vec<u8>) {
    let mut params =
        rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), key.serialize_pem(), cert.der().to_vec())
}

fn write_pair(dir: &Path, cert: &str, key: &str) {
    std::fs::write(dir.join("cert.pem"), cert).unwrap();
    std::fs::write(dir.join("key.pem"), key).unwrap();
}

/// The app over HTTPS with a fresh self-signed certificate (`name`) written to `dir`; returns it
/// with the certificate's PEM.
async fn https_app(dir: &Path, name: &str) -> (crate::helpers::TestApp, String) {
    https_app_with(dir, name, |_| {}).await
}

/// `https_app` with its configuration changed by `tweak`.
async fn https_app_with(
    dir: &Path,
    name: &str,
    tweak: impl FnOnce(&mut mcp_harbor::Config),
) -> (crate::helpers::TestApp, String) {
    let (cert, key, _) = certificate(name);
    write_pair(dir, &cert, &key);
    let cert_path = dir.join("cert.pem").display().to_string();
    let key_path = dir.join("key.pem").display().to_string();
    let app = spawn_app_with(|c| {
        c.tls.cert_path = cert_path;
        c.tls.key_path = key_path;
        tweak(c);
    })
    .await;
    (app, cert)
}

/// A client trusting exactly `certs`, on a fresh connection.
fn client(certs: &[&str], http1_only: bool) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .tls_info(true)
        .pool_max_idle_per_host(0);
    for pem in certs {
        b = b.add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).unwrap());
    }
    if http1_only {
        b = b.http1_only();
    }
    b.build().unwrap()
}

fn peer_certificate(r: &reqwest::Response) -> Vec<u8> {
    r.extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|i| i.peer_certificate())
        .expect("TLS info")
        .to_vec()
}

#[actix_rt::test]
async fn mcp_over_https_with_http2_and_certificate_reload() {
    let dir = tempfile::tempdir().unwrap();
    let (cert_a, key_a, der_a) = certificate("harbor test A");
    write_pair(dir.path(), &cert_a, &key_a);
    let cert_path = dir.path().join("cert.pem").display().to_string();
    let key_path = dir.path().join("key.pem").display().to_string();
    let app = spawn_app_with(|c| {
        c.tls.cert_path = cert_path.clone();
        c.tls.key_path = key_path.clone();
        c.tls.reload_secs = 1;
    })
    .await;
    let base = format!("https://127.0.0.1:{}", app.port);
    let mcp = format!("{base}/t/demo/mcp");
    let initialize = |c: &reqwest::Client| {
        c.post(&mcp)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(initialize_body("2025-11-25", json!({})).to_string())
            .send()
    };

    // HTTP/2 when the client offers it, HTTP/1.1 otherwise; MCP works over both.
    let h2 = client(&[&cert_a], false);
    let r = initialize(&h2).await.unwrap();
    assert_eq!(r.version(), reqwest::Version::HTTP_2);
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key("mcp-session-id"));
    assert_eq!(peer_certificate(&r), der_a);
    let h1 = client(&[&cert_a], true);
    let r = initialize(&h1).await.unwrap();
    assert_eq!(r.version(), reqwest::Version::HTTP_11);
    assert_eq!(r.status(), 200);
    // Plain HTTP on the TLS port is not served.
    let plain = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{}/healthz", app.port))
        .timeout(Duration::from_secs(3))
        .send()
        .await;
    assert!(plain.map(|r| !r.status().is_success()).unwrap_or(true));

    // A broken replacement (key of another certificate) is refused; A stays in use.
    let (cert_b, key_b, der_b) = certificate("harbor test B");
    write_pair(dir.path(), &cert_b, &key_a);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let both = client(&[&cert_a, &cert_b], false);
    let r = both.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(
        peer_certificate(&r),
        der_a,
        "a mismatched pair is not loaded"
    );

    // The renewed pair is served on new connections, without a restart.
    write_pair(dir.path(), &cert_b, &key_b);
    let mut served = Vec::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let r = client(&[&cert_a, &cert_b], false)
            .get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap();
        served = peer_certificate(&r);
        if served == der_b {
            break;
        }
    }
    assert_eq!(served, der_b, "the replaced certificate is picked up");
    let r = initialize(&client(&[&cert_b], false)).await.unwrap();
    assert_eq!(r.status(), 200);
}

#[actix_rt::test]
async fn unusable_certificates_stop_the_server_at_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cert.pem"), "not a certificate").unwrap();
    std::fs::write(dir.path().join("key.pem"), "not a key").unwrap();
    let mut config = crate::helpers::test_config();
    config.storage.data_dir = dir.path().display().to_string();
    config.tls.cert_path = dir.path().join("cert.pem").display().to_string();
    config.tls.key_path = dir.path().join("key.pem").display().to_string();
    let err = mcp_harbor::Application::build(config)
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("cert.pem"), "{err}");
    let mut config = crate::helpers::test_config();
    config.tls.cert_path = "/nonexistent/cert.pem".into();
    assert!(config.validate().is_err(), "a key path is needed too");
}

/// The load generator (`mcp-harbor-bench`, bench/load.rs) against the HTTPS server: it trusts
/// only its `--ca` file, and calls, stateless calls and inits run over TLS without an error.
#[actix_rt::test]
async fn load_generator_speaks_https() {
    let dir = tempfile::tempdir().unwrap();
    let (app, _) = https_app(dir.path(), "harbor bench").await;
    let (other, _, _) = certificate("not the server");
    std::fs::write(dir.path().join("other.pem"), other).unwrap();
    let url = format!("https://127.0.0.1:{}/t/demo/mcp", app.port);
    let bench = |ca: &str, extra: &[&str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-harbor-bench"));
        cmd.args([
            "--url",
            &url,
            "--ca",
            ca,
            "--connections",
            "2",
            "--sessions",
            "4",
        ])
        .args(["--duration", "0.6", "--warmup", "0.1"])
        .args(extra);
        // The server answers on this runtime's threads: wait for the bench off them.
        actix_rt::task::spawn_blocking(move || cmd.output().expect("mcp-harbor-bench runs"))
    };
    let ca = dir.path().join("cert.pem").display().to_string();
    for (phase, line) in [
        (
            &["--phase", "calls"][..],
            "calls: 2 connections, 4 sessions",
        ),
        (
            &["--phase", "calls", "--modern"][..],
            "calls: 2 connections, stateless",
        ),
        (&["--phase", "inits"][..], "inits: 2 connections"),
    ] {
        let out = bench(&ca, phase).await.unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{phase:?}: {stdout}{stderr}");
        let result = stdout.lines().find(|l| l.starts_with(line));
        assert!(
            result.is_some_and(|l| l.ends_with("errors 0") && !l.contains(" 0 requests")),
            "{phase:?}: {stdout}"
        );
        assert!(stdout.contains("tls: TLSv1_3"), "{stdout}");
    }

    // A certificate it was not given is refused.
    let other = dir.path().join("other.pem").display().to_string();
    let out = bench(&other, &["--phase", "calls"]).await.unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("invalid peer certificate"), "{stderr}");
}

/// A reply streamed in several writes (an SSE answer: its first event, then the rest) is not
/// held back over TLS by Nagle's algorithm until the client's delayed ACK (about 40 ms on
/// Linux): TCP_NODELAY is set on HTTPS connections as on plain ones. Each request waits for the
/// stall when it is off, so the fastest of five is the measure (a busy machine slows some, not
/// all of them).
#[actix_rt::test]
async fn streamed_replies_over_https_are_not_held_for_a_delayed_ack() {
    let dir = tempfile::tempdir().unwrap();
    let (app, cert) = https_app(dir.path(), "harbor nodelay").await;
    let mcp = format!("https://127.0.0.1:{}/t/demo/mcp", app.port);
    for http1_only in [true, false] {
        let http = client(&[&cert], http1_only);
        let post = |session: Option<&str>, body: serde_json::Value| {
            let mut r = http
                .post(&mcp)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2025-11-25");
            if let Some(s) = session {
                r = r.header("mcp-session-id", s);
            }
            r.body(body.to_string()).send()
        };
        let r = post(None, initialize_body("2025-11-25", json!({})))
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let session = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        let r = post(
            Some(&session),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await
        .unwrap();
        assert_eq!(r.status(), 202);
        let mut fastest = Duration::MAX;
        for id in 2..7 {
            let started = std::time::Instant::now();
            let r = post(
                Some(&session),
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                    "name": "slow_count", "arguments": {"steps": 1, "interval_ms": 0},
                    "_meta": {"progressToken": "p"}}}),
            )
            .await
            .unwrap();
            assert_eq!(r.status(), 200);
            assert!(r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream"));
            let body = r.text().await.unwrap();
            fastest = fastest.min(started.elapsed());
            assert!(
                body.contains("notifications/progress") && body.contains("counted 1"),
                "{body}"
            );
        }
        assert!(
            fastest < Duration::from_millis(25),
            "HTTP/1.1 only: {http1_only}: the fastest streamed reply took {fastest:?}"
        );
    }
}

/// One HTTP/2 connection over TLS to the app (trusting the certificate `pem`), driven in the
/// background.
async fn h2_connection(port: u16, pem: &str) -> h2::client::SendRequest<bytes::Bytes> {
    use rustls::pki_types::pem::PemObject;
    use std::sync::Arc;
    use tokio_rustls::rustls;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap())
        .unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    let (send, conn) = h2::client::handshake(tls).await.unwrap();
    tokio::spawn(conn);
    send.ready().await.unwrap()
}

/// GET `path` on `send` with the extra headers `headers`: its status, or the stream's error.
async fn h2_get(
    send: &mut h2::client::SendRequest<bytes::Bytes>,
    port: u16,
    path: &str,
    headers: &[(String, String)],
) -> Result<u16, h2::Error> {
    let mut req = http::Request::get(format!("https://localhost:{port}{path}"));
    for (name, value) in headers {
        req = req.header(name, value);
    }
    let (response, _) = send.send_request(req.body(()).unwrap(), true)?;
    Ok(response.await?.status().as_u16())
}

/// What one HTTP/2 connection may ask is bounded: the server announces at most 250 concurrent
/// streams and a 128 KiB header list, and answers 431 to a request whose headers are over it
/// (upstream announced neither: any number of streams, 16 MiB of headers).
#[actix_rt::test]
async fn http2_connections_are_bounded_in_streams_and_header_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (app, cert) = https_app(dir.path(), "harbor test h2").await;
    let mut send = h2_connection(app.port, &cert).await;
    // A first exchange: the server's SETTINGS have arrived by its answer.
    assert_eq!(
        h2_get(&mut send, app.port, "/healthz", &[]).await.unwrap(),
        200
    );
    assert_eq!(send.current_max_send_streams(), 250);

    // 64 KiB of headers are served; 192 KiB are not.
    let pad = |kib: usize| -> Vec<(String, String)> {
        (0..kib)
            .map(|i| (format!("x-pad-{i}"), "p".repeat(1000)))
            .collect()
    };
    assert_eq!(
        h2_get(&mut send, app.port, "/healthz", &pad(64))
            .await
            .unwrap(),
        200
    );
    let mut send = h2_connection(app.port, &cert).await;
    let refused = h2_get(&mut send, app.port, "/healthz", &pad(192)).await;
    assert!(
        matches!(refused, Ok(431)),
        "192 KiB of headers: {refused:?}"
    );
}

/// Sends `crate::helpers::large_echo_body(text_len)` on `send`; returns the answer's head (its
/// `Content-Length`) and body stream.
async fn h2_large_echo(
    send: &mut h2::client::SendRequest<bytes::Bytes>,
    port: u16,
    text_len: usize,
) -> (usize, h2::RecvStream) {
    let req = http::Request::post(format!("https://localhost:{port}/t/demo/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "echo")
        .body(())
        .unwrap();
    let (response, mut stream) = send.send_request(req, false).unwrap();
    stream
        .send_data(
            bytes::Bytes::from(crate::helpers::large_echo_body(text_len)),
            true,
        )
        .unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    let length = response
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .expect("a Content-Length");
    (length, response.into_body())
}

/// Reads `body` to its end, `pause` after each `every` bytes, giving the window back as it
/// goes: the bytes read, and the stream's error if it ended in one.
async fn h2_read(
    body: &mut h2::RecvStream,
    every: usize,
    pause: Duration,
) -> (usize, Option<h2::Error>) {
    let (mut read, mut since_pause) = (0, 0);
    loop {
        match tokio::time::timeout(Duration::from_secs(20), body.data()).await {
            Err(_) => panic!("no data for 20 s after {read} bytes"),
            Ok(None) => return (read, None),
            Ok(Some(Err(e))) => return (read, Some(e)),
            Ok(Some(Ok(chunk))) => {
                read += chunk.len();
                since_pause += chunk.len();
                let _ = body.flow_control().release_capacity(chunk.len());
            }
        }
        if since_pause >= every {
            since_pause = 0;
            tokio::time::sleep(pause).await;
        }
    }
}

/// Over HTTP/2 a client that grants an answer no window for `server.write_timeout_secs` has its
/// stream reset (the rest is not sent; the connection serves on; counted in
/// `mcp_harbor_http_write_timeouts_total`), and a client reading slowly, with pauses shorter than
/// the timeout, gets all of it.
#[actix_rt::test]
async fn an_http2_stream_whose_client_stops_reading_is_reset_after_the_write_timeout() {
    const TEXT: usize = 4 * 1024 * 1024;
    const METRICS_TOKEN: &str = "https-metrics-token";
    const TIMEOUTS: &str = "mcp_harbor_http_write_timeouts";
    let dir = tempfile::tempdir().unwrap();
    let (app, cert) = https_app_with(dir.path(), "harbor test h2 write timeout", |c| {
        c.server.write_timeout_secs = 1.0;
        c.server.max_body_bytes = 16 * 1024 * 1024;
        c.metrics.token = secrecy::SecretString::from(METRICS_TOKEN);
    })
    .await;
    let (metrics, base) = (
        client(&[&cert], false),
        format!("https://localhost:{}", app.port),
    );
    let timeouts = || async {
        let text = crate::helpers::metrics_text_via(&metrics, &base, METRICS_TOKEN).await;
        crate::helpers::counter_in(&text, TIMEOUTS)
    };
    let mut send = h2_connection(app.port, &cert).await;

    // The server may send the stream's first window (64 KiB), which the client leaves unread
    // for three times the timeout, granting no more.
    let (length, mut body) = h2_large_echo(&mut send, app.port, TEXT).await;
    assert!(length > TEXT, "{length}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (read, error) = h2_read(&mut body, usize::MAX, Duration::ZERO).await;
    let reason = error.as_ref().and_then(h2::Error::reason);
    assert_eq!(
        reason,
        Some(h2::Reason::CANCEL),
        "{read} of {length} bytes read, then {error:?}"
    );
    assert!(read < length, "{read} of {length}");
    assert_eq!(timeouts().await, 1.0);

    // The same connection: a client pausing 300 ms after each 512 KiB gets the whole answer.
    let mut send = send.ready().await.unwrap();
    let (length, mut body) = h2_large_echo(&mut send, app.port, TEXT).await;
    let (read, error) = h2_read(&mut body, 512 * 1024, Duration::from_millis(300)).await;
    assert!(
        error.is_none(),
        "{read} of {length} bytes read, then {error:?}"
    );
    assert_eq!(read, length);
    assert_eq!(timeouts().await, 1.0);
}
