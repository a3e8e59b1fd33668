//! Fake webhook endpoints: an actix-web server on a loopback port answering with a handler of
//! the test's, and the Standard Webhooks signature check an endpoint makes of a delivery,
//! written out independently of the server (the HMAC by hand, RFC 2104 over SHA-256).

use std::time::{SystemTime, UNIX_EPOCH};

use actix_web::{web, App, FromRequest, Handler, HttpRequest, HttpServer, Responder};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;

/// The Standard Webhooks spec's example secret, which most tests register their tools with.
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Serves `handler` for every path on a free loopback port, with `state` as its
/// `web::Data<S>`; the base URL (`http://127.0.0.1:PORT`).
pub async fn serve<S, H, Args>(state: S, handler: H) -> String
where
    S: Send + Sync + 'static,
    H: Handler<Args> + Clone + Send + 'static,
    Args: FromRequest + 'static,
    H::Output: Responder + 'static,
{
    let data = web::Data::new(state);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .default_service(web::to(handler.clone()))
    })
    .workers(1)
    .bind("127.0.0.1:0")
    .unwrap();
    let port = server.addrs()[0].port();
    actix_rt::spawn(server.run());
    format!("http://127.0.0.1:{port}")
}

pub fn hmac_sha256(key: &[u8], message: &[u8]) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    const BLOCK: usize = 64;
    let mut block_key = [0u8; BLOCK];
    if key.len() > BLOCK {
        let digest = Sha256::digest(key);
        block_key[..digest.len()].copy_from_slice(&digest);
    } else {
        block_key[..key.len()].copy_from_slice(key);
    }
    let inner_pad: Vec<u8> = block_key.iter().map(|b| b ^ 0x36).collect();
    let outer_pad: Vec<u8> = block_key.iter().map(|b| b ^ 0x5c).collect();
    let mut inner = Sha256::new();
    inner.update(&inner_pad);
    inner.update(message);
    let inner_hash = inner.finalize();
    let mut outer = Sha256::new();
    outer.update(&outer_pad);
    outer.update(inner_hash);
    outer.finalize().to_vec()
}

/// Verifies a delivery the way an endpoint would: recompute over the raw body, compare with every
/// `v1,` signature in the header, check the timestamp tolerance.
pub fn verify(secret: &str, req: &HttpRequest, body: &[u8]) -> Result<(), String> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| format!("missing header {name}"))
    };
    let id = header("webhook-id")?;
    let timestamp = header("webhook-timestamp")?;
    let signatures = header("webhook-signature")?;
    let ts: i64 = timestamp.parse().map_err(|_| "bad timestamp".to_string())?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    if (now - ts).abs() > 300 {
        return Err("timestamp outside tolerance".into());
    }
    let key = secret
        .strip_prefix("whsec_")
        .and_then(|k| BASE64.decode(k).ok())
        .ok_or("the secret is not a whsec_ key")?;
    let mut signed = format!("{id}.{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    let expected = BASE64.encode(hmac_sha256(&key, &signed));
    let ok = !id.is_empty()
        && signatures
            .split(' ')
            .filter_map(|s| s.strip_prefix("v1,"))
            .any(|s| s == expected);
    if ok {
        Ok(())
    } else {
        Err("signature mismatch".into())
    }
}
