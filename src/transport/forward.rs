//! Forwarding to the replica that owns a session: when a request names a session another live
//! replica holds (the load balancer sent it elsewhere, or no affinity is configured), the request
//! is passed on to that replica as it came (method, path, headers, body) and its answer —
//! JSON or a long SSE stream — is streamed back. The owner applies the same admission checks.
//! A connection failure means the owner is gone: the caller takes the session over instead. So
//! does a request that got no answer when the owner has let the session go (it drained, and its
//! restarted process may already listen at its address) or no longer accepts connections.

use std::sync::Arc;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use bytes::Bytes;
use futures_util::StreamExt;

use super::{COUNTED_HEADER, DRAINING_HEADER, FORWARDED_HEADER, SESSION};
use crate::auth::seal::purpose::COUNTED_REQUEST;
use crate::auth::Sealer;
use crate::session::{Relay, Unrelayed};
use crate::store::now_millis;

/// Headers that describe one hop, not the message (RFC 9110 §7.6.1), plus those the client
/// computes itself.
const HOP_HEADERS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
];

const CONNECT_TIMEOUT: Duration = Duration::from_millis(1500);
/// Shorter than the server's keep-alive timeout (actix-web's default, 5 s).
const POOL_IDLE: Duration = Duration::from_secs(2);

/// How long a proof of counting is good for (either way: the replicas' clocks may differ a little).
const COUNTED_FOR_MS: u64 = 10_000;

/// What a proof of counting is bound to: the request's path and query and its session.
fn counted_binding(req: &HttpRequest) -> String {
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let session = req
        .headers()
        .get(SESSION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mut binding = String::with_capacity(path.len() + session.len() + 1);
    binding.push_str(path);
    binding.push('|');
    binding.push_str(session);
    binding
}

/// The forwarding replica's proof that it counted `req` against the tenant's rates: sealed under
/// the deployment's keys (every replica has them), bound to the request's path and session, and
/// stamped with the time.
pub fn counted_proof(sealer: &Sealer, req: &HttpRequest) -> String {
    let plain = format!("{}|{}", now_millis(), counted_binding(req));
    sealer.seal(COUNTED_REQUEST, plain.as_bytes())
}

/// Whether `req` carries a valid proof that the replica forwarding it counted it: one that opens
/// under the deployment's keys, for this path and session, made in the last few seconds.
/// Anything else (none, forged, stale, for another request) is not proof: the request is counted.
pub fn was_counted(sealer: &Sealer, req: &HttpRequest) -> bool {
    let Some(proof) = req
        .headers()
        .get(super::COUNTED)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Ok(plain) = sealer.open(COUNTED_REQUEST, proof) else {
        return false;
    };
    let Some((stamp, binding)) = std::str::from_utf8(&plain)
        .ok()
        .and_then(|p| p.split_once('|'))
    else {
        return false;
    };
    let Ok(stamp) = stamp.parse::<i64>() else {
        return false;
    };
    now_millis().abs_diff(stamp) <= COUNTED_FOR_MS && binding == counted_binding(req)
}

/// Whether the replica at `url` no longer accepts connections (it crashed or stopped): a
/// request that failed on a kept connection to it was then not answered by anyone, and the
/// caller may take the session over. While it still accepts them, the failure is reported.
async fn owner_is_gone(url: &str) -> bool {
    let Some(addr) = reqwest::Url::parse(url)
        .ok()
        .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
    else {
        return false;
    };
    !matches!(
        tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr)).await,
        Ok(Ok(_))
    )
}

/// The HTTP client replicas use to reach each other.
#[derive(Clone)]
pub struct Forwarder {
    client: reqwest::Client,
    replica_id: String,
    sealer: Arc<Sealer>,
}

/// A request to pass on to the replica owning its session, as it came (the front door,
/// `session::Sessions`, decides where and whether).
pub struct Relayed<'a> {
    forwarder: &'a Forwarder,
    req: &'a HttpRequest,
    body: Bytes,
}

impl<'a> Relayed<'a> {
    pub fn new(forwarder: &'a Forwarder, req: &'a HttpRequest, body: Bytes) -> Self {
        Relayed {
            forwarder,
            req,
            body,
        }
    }
}

impl Relay for Relayed<'_> {
    type Answer = HttpResponse;

    fn body(&self) -> &Bytes {
        &self.body
    }

    async fn relay(
        &self,
        owner: &str,
        let_go: impl std::future::Future<Output = bool>,
    ) -> Result<HttpResponse, Unrelayed> {
        self.forwarder
            .forward(owner, self.req, self.body.clone(), let_go)
            .await
    }
}

impl Forwarder {
    pub fn new(replica_id: &str, sealer: Arc<Sealer>) -> Result<Forwarder, reqwest::Error> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            // Connections to the other replicas are kept and reused (a new one per request cost
            // the owner ~8x the CPU of the request itself). An idle one is dropped well before
            // the owner's keep-alive (5 s) would close it under us; a request that fails on a
            // kept connection is told apart below (`owner_is_gone`).
            .pool_idle_timeout(POOL_IDLE)
            .tcp_nodelay(true)
            .build()?;
        Ok(Forwarder {
            client,
            replica_id: replica_id.to_string(),
            sealer,
        })
    }

    /// Passes `req` (with `body`) to the replica at `base`. `let_go` tells whether that owner
    /// has let the session go (`locate::let_go`); it is awaited only for a request that went out
    /// and got no answer.
    pub async fn forward(
        &self,
        base: &str,
        req: &HttpRequest,
        body: Bytes,
        let_go: impl std::future::Future<Output = bool>,
    ) -> Result<HttpResponse, Unrelayed> {
        let path = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        let url = format!("{}{path}", base.trim_end_matches('/'));
        let method = reqwest::Method::from_bytes(req.method().as_str().as_bytes())
            .map_err(|_| Unrelayed::Failed)?;
        let mut out = self.client.request(method, &url).body(body);
        // The trace goes on through this hop: the owner's spans are children of this one.
        let trace = crate::observe::telemetry::outgoing_headers();
        for (name, value) in req.headers() {
            if HOP_HEADERS.contains(&name.as_str())
                || name.as_str() == FORWARDED_HEADER
                || name.as_str() == COUNTED_HEADER
                || (!trace.is_empty() && matches!(name.as_str(), "traceparent" | "tracestate"))
            {
                continue;
            }
            out = out.header(name.as_str(), value.as_bytes());
        }
        for (name, value) in trace {
            out = out.header(name, value);
        }
        out = out.header(FORWARDED_HEADER, &self.replica_id);
        // Admitted here, so counted here: the owner does not count it again.
        out = out.header(COUNTED_HEADER, counted_proof(&self.sealer, req));
        let response = match out.send().await {
            Ok(r) => r,
            Err(e) if e.is_connect() => return Err(Unrelayed::Gone),
            Err(e) => {
                if let_go.await || owner_is_gone(&url).await {
                    tracing::debug!(error = %e, %url, "the session's owner went away");
                    return Err(Unrelayed::Gone);
                }
                tracing::warn!(error = %e, %url, "forwarding to the session's owner failed");
                return Err(Unrelayed::Failed);
            }
        };
        if response.status().as_u16() == 503 && response.headers().contains_key(DRAINING_HEADER) {
            return Err(Unrelayed::Gone);
        }
        let status =
            StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
        let mut builder = HttpResponse::build(status);
        for (name, value) in response.headers() {
            if HOP_HEADERS.contains(&name.as_str()) {
                continue;
            }
            builder.append_header((name.as_str(), value.as_bytes()));
        }
        let stream = response
            .bytes_stream()
            .map(|chunk| chunk.map_err(actix_web::error::ErrorBadGateway));
        Ok(builder.streaming(stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    fn sealer(id: &str) -> Sealer {
        Sealer::from_specs(&[Sealer::generate_spec(id)]).expect("a key")
    }

    fn request(path: &str, session: &str, proof: Option<&str>) -> HttpRequest {
        let mut r = TestRequest::post()
            .uri(path)
            .insert_header(("mcp-session-id", session));
        if let Some(proof) = proof {
            r = r.insert_header((COUNTED_HEADER, proof));
        }
        r.to_http_request()
    }

    #[test]
    fn a_proof_of_counting_holds_for_its_own_request_only() {
        let keys = sealer("k1");
        let sent = request("/t/demo/mcp", "r1.abc", None);
        let proof = counted_proof(&keys, &sent);
        assert!(was_counted(
            &keys,
            &request("/t/demo/mcp", "r1.abc", Some(&proof))
        ));
        // Another session, another tenant's path, another deployment's keys, no proof, junk.
        assert!(!was_counted(
            &keys,
            &request("/t/demo/mcp", "r1.abd", Some(&proof))
        ));
        assert!(!was_counted(
            &keys,
            &request("/t/other/mcp", "r1.abc", Some(&proof))
        ));
        assert!(!was_counted(
            &sealer("k2"),
            &request("/t/demo/mcp", "r1.abc", Some(&proof))
        ));
        assert!(!was_counted(&keys, &request("/t/demo/mcp", "r1.abc", None)));
        assert!(!was_counted(
            &keys,
            &request("/t/demo/mcp", "r1.abc", Some("v1.k1.AAAA"))
        ));
        // A stale one (made a minute ago) is no proof either.
        let stale = format!("{}|/t/demo/mcp|r1.abc", now_millis() - 60_000);
        let stale = keys.seal(COUNTED_REQUEST, stale.as_bytes());
        assert!(!was_counted(
            &keys,
            &request("/t/demo/mcp", "r1.abc", Some(&stale))
        ));
    }
}
