//! Interop check: drives mcp-harbor with the official Rust SDK client (crates.io `rmcp` 3.x) at
//! protocol 2026-07-28.
//!
//! Usage: `rmcp-interop-client http://127.0.0.1:PORT/t/demo/mcp [--auto]`
//!
//! Connects over Streamable HTTP (reqwest) in rmcp's `Discover` lifecycle pinned to 2026-07-28
//! (a `server/discover` probe and self-contained per-request `_meta`; no fallback to
//! `initialize`), then checks that:
//! - discovery negotiated 2026-07-28;
//! - `test_simple_text` returns its text;
//! - `test_elicitation` completes through the multi round-trip (`input_required` ->
//!   elicitation handler -> retry with `inputResponses` + `requestState`) and reflects the answer.
//!
//! With `--auto` it uses rmcp's `Auto` lifecycle instead (probe `server/discover`, fall back to
//! `initialize` at 2025-11-25 when the server looks legacy) and prints the version it ended on:
//! a diagnostic for how rmcp decides to fall back; the 2026-07-28 check then fails on fallback.
//!
//! Prints one "ok - ..."/"not ok - ..." line per check and finally
//! "rmcp-client: N passed, M failed"; exits 1 on any failure. Bounded by INTEROP_TIMEOUT_SECS
//! (default 60).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, ErrorData, Implementation, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RequestContext, RoleClient};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ClientHandler;
use serde_json::{json, Value};

const SIMPLE_TEXT: &str = "This is a simple text response for testing.";
const USERNAME: &str = "rmcpuser";
const EMAIL: &str = "rmcpuser@example.com";

#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
}

impl Tally {
    fn check(&mut self, name: &str, ok: bool, detail: impl FnOnce() -> String) {
        if ok {
            self.passed += 1;
            println!("ok - {name}");
        } else {
            self.failed += 1;
            println!("not ok - {name} ({})", detail());
        }
    }
}

/// Answers every form elicitation with a fixed username/email, counting the calls.
#[derive(Clone, Default)]
struct Client {
    elicitations: Arc<AtomicUsize>,
}

impl ClientHandler for Client {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.elicitations.fetch_add(1, Ordering::SeqCst);
        Ok(match request {
            ElicitRequestParams::FormElicitationParams { .. } => {
                ElicitResult::new(ElicitationAction::Accept)
                    .with_content(json!({ "username": USERNAME, "email": EMAIL }))
            }
            _ => ElicitResult::new(ElicitationAction::Decline),
        })
    }

    fn get_info(&self) -> ClientConfig {
        // Built through serde: the typed capability builder needs rmcp's `server` feature.
        let capabilities: ClientCapabilities =
            serde_json::from_value(json!({ "elicitation": { "form": {} } }))
                .expect("client capabilities");
        ClientConfig::new(
            capabilities,
            Implementation::new("mcp-harbor-interop-rmcp", "1.0.0"),
        )
        .with_protocol_version(ProtocolVersion::V_2026_07_28)
    }
}

fn text_of(result: &CallToolResult) -> String {
    let v = serde_json::to_value(result).unwrap_or(Value::Null);
    v["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn is_error(result: &CallToolResult) -> bool {
    result.is_error.unwrap_or(false)
}

async fn run(url: String, auto: bool, t: &mut Tally) {
    let handler = Client::default();
    let elicitations = handler.elicitations.clone();
    let transport = StreamableHttpClientTransport::from_uri(url);
    let lifecycle = if auto {
        ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        }
    } else {
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        }
    };
    let started = std::time::Instant::now();
    let client = match handler.serve_with_lifecycle(transport, lifecycle).await {
        Ok(c) => c,
        Err(e) => {
            t.check("server/discover at 2026-07-28", false, || format!("{e}"));
            return;
        }
    };

    let info = client.peer_info();
    let version = info
        .as_ref()
        .map(|i| serde_json::to_value(&i.protocol_version).unwrap_or(Value::Null));
    if auto {
        println!(
            "# auto lifecycle settled on {} after {:.1} s",
            version.clone().unwrap_or(Value::Null),
            started.elapsed().as_secs_f64()
        );
    }
    t.check(
        "server/discover negotiated 2026-07-28",
        version == Some(json!("2026-07-28")),
        || format!("peer info {info:?}"),
    );

    match client
        .call_tool(CallToolRequestParams::new("test_simple_text"))
        .await
    {
        Ok(r) => t.check(
            "test_simple_text returns its text",
            !is_error(&r) && text_of(&r) == SIMPLE_TEXT,
            || format!("{r:?}"),
        ),
        Err(e) => t.check("test_simple_text", false, || format!("error: {e}")),
    }

    let args = json!({ "message": "Who are you?" });
    let params = CallToolRequestParams::new("test_elicitation")
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    match client.call_tool(params).await {
        Ok(r) => {
            let text = text_of(&r);
            t.check(
                "elicitation handler ran once for the multi round-trip",
                elicitations.load(Ordering::SeqCst) == 1,
                || format!("handler calls: {}", elicitations.load(Ordering::SeqCst)),
            );
            t.check(
                "test_elicitation result reflects the accepted content",
                !is_error(&r)
                    && text.contains("accept")
                    && text.contains(USERNAME)
                    && text.contains(EMAIL),
                || format!("{r:?}"),
            );
        }
        Err(e) => t.check("test_elicitation round trip", false, || {
            format!("error: {e}")
        }),
    }

    let closed = tokio::time::timeout(Duration::from_secs(5), client.cancel()).await;
    t.check("client closed", matches!(closed, Ok(Ok(_))), || {
        format!("{closed:?}")
    });
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let auto = args.iter().any(|a| a == "--auto");
    let urls: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let ([url], true) = (
        urls.as_slice(),
        args.len() == urls.len() + usize::from(auto),
    ) else {
        eprintln!(
            "usage: rmcp-interop-client <mcp-url> [--auto]   (e.g. http://127.0.0.1:8080/t/demo/mcp)"
        );
        std::process::exit(2);
    };
    let url = url.to_string();
    let secs: u64 = std::env::var("INTEROP_TIMEOUT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let mut tally = Tally::default();
    if tokio::time::timeout(Duration::from_secs(secs), run(url, auto, &mut tally))
        .await
        .is_err()
    {
        tally.check("finished in time", false, || {
            format!("timed out after {secs} s")
        });
    }
    println!(
        "rmcp-client: {} passed, {} failed",
        tally.passed, tally.failed
    );
    std::process::exit(if tally.failed == 0 { 0 } else { 1 });
}
