//! The ceiling for `bench/compare.sh`: a bare actix-web JSON-RPC echo with no MCP behind it.
//! Every POST body is parsed into a `serde_json::Value` and a JSON-RPC answer serialised back:
//! `tools/call` answers `params.arguments.text` as text content, `initialize` answers a minimal
//! result with an `mcp-session-id` header (a counter, nothing is kept) so that the load generator
//! runs unchanged, a notification gets 202. One worker, like the measured mcp-harbor.
//! Prints `actix-echo: serving at http://127.0.0.1:PORT/mcp` once listening.
//!
//! Usage: `actix-echo [PORT]` (0, the default, lets the kernel pick).

use std::sync::atomic::{AtomicU64, Ordering};

use actix_web::{http::StatusCode, web, App, HttpResponse, HttpServer};
use serde_json::{json, Value};

static SESSIONS: AtomicU64 = AtomicU64::new(0);

async fn mcp(body: web::Bytes) -> HttpResponse {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) => {
            return json_rpc(
                json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}),
            )
        }
    };
    let Some(id) = request.get("id").cloned() else {
        return HttpResponse::build(StatusCode::ACCEPTED).finish();
    };
    let params = request.get("params");
    match request.get("method").and_then(Value::as_str) {
        Some("tools/call") => {
            let text = params
                .and_then(|p| p.pointer("/arguments/text"))
                .cloned()
                .unwrap_or(Value::Null);
            json_rpc(json!({"jsonrpc":"2.0","id":id,"result":{
                "content":[{"type":"text","text":text}],"isError":false}}))
        }
        Some("initialize") => {
            let version = params
                .and_then(|p| p.get("protocolVersion"))
                .cloned()
                .unwrap_or(Value::Null);
            let session = SESSIONS.fetch_add(1, Ordering::Relaxed);
            let mut response = json_rpc(json!({"jsonrpc":"2.0","id":id,"result":{
                "protocolVersion":version,"capabilities":{"tools":{}},
                "serverInfo":{"name":"actix-echo","version":"0.1.0"}}}));
            if let Ok(value) = format!("{session:032x}").parse() {
                response.headers_mut().insert(
                    actix_web::http::header::HeaderName::from_static("mcp-session-id"),
                    value,
                );
            }
            response
        }
        _ => json_rpc(
            json!({"jsonrpc":"2.0","id":id,"error":{"code":-32601,"message":"method not found"}}),
        ),
    }
}

fn json_rpc(body: Value) -> HttpResponse {
    match serde_json::to_vec(&body) {
        Ok(bytes) => HttpResponse::Ok()
            .content_type("application/json")
            .body(bytes),
        Err(_) => HttpResponse::InternalServerError().finish(),
    }
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = match std::env::args().nth(1) {
        None => 0,
        Some(p) => p
            .parse()
            .map_err(|_| std::io::Error::other(format!("bad port {p:?}")))?,
    };
    let server = HttpServer::new(|| App::new().route("/mcp", web::post().to(mcp)))
        .workers(1)
        .bind(("127.0.0.1", port))?;
    for addr in server.addrs() {
        println!("actix-echo: serving at http://{addr}/mcp");
    }
    server.run().await
}
