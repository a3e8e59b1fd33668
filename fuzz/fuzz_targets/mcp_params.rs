//! MCP params decoding per method (`methods::handle` over the `reference` and `demo` catalogs
//! and a published catalog with a prompt template, a resource and a resource template, plus the
//! session-level decoders `LogLevel::parse` and `ProtocolVersion::negotiate`).
//!
//! Input: one selector byte (the method), then the `params` JSON.
//!
//! Invariants:
//! - a method this module serves never answers `Unknown`, any other method always does;
//! - bad params are a JSON-RPC error with -32602 (or -32002 for an unknown resource), never an
//!   internal error;
//! - a list page is the next slice of the catalog's list and its `nextCursor` continues it;
//! - results have their schema's shape (`content` arrays of typed blocks, `contents` naming the
//!   URI read, `messages`, at most 100 completion values with a consistent `total`/`hasMore`);
//! - a tool call's first poll yields a well-formed `CallToolResult` or a -32602 error.
#![no_main]

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, OnceLock};
use std::task::Poll;

use libfuzzer_sys::fuzz_target;
use mcp_harbor::catalog::stored::{StoredCatalog, WebhookRuntime};
use mcp_harbor::catalog::{Catalog, TenantCatalog};
use mcp_harbor::methods::{handle, Handled, RequestScope, HANDLED};
use mcp_harbor::protocol::jsonrpc::{INVALID_PARAMS, RESOURCE_NOT_FOUND};
use mcp_harbor::protocol::mcp::LogLevel;
use mcp_harbor::protocol::{ProtocolVersion, Request, RequestId, RpcError};
use mcp_harbor::request::SessionPort;
use mcp_harbor::store::{CatalogEntry, CatalogKind};
use serde_json::{json, Value};

const PAGE_SIZE: usize = 3;

/// Methods `methods::handle` does not serve: session-level and unknown ones (it serves
/// `methods::HANDLED`).
const OTHERS: &[&str] = &[
    "initialize",
    "logging/setLevel",
    "resources/subscribe",
    "nope/nothing",
];

/// A session that is gone: notifications dropped, requests never answered.
struct NoSession;
impl SessionPort for NoSession {
    fn notify(&self, _: &RequestId, _: &'static str, _: Value) {}
    fn request(
        &self,
        _: &RequestId,
        _: &'static str,
        _: Value,
        _: tokio::sync::oneshot::Sender<Result<Value, RpcError>>,
    ) {
    }
    fn close_stream(&self, _: &RequestId) {}
    fn resource_updated(&self, _: &str) {}
    fn list_changed(&self, _: &'static str) {}
}

struct World {
    catalog: TenantCatalog,
    runtime: tokio::runtime::Runtime,
    port: Arc<dyn SessionPort>,
    capabilities: Arc<Value>,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let entry = |kind, name: &str, body: Value| CatalogEntry {
            tenant: "fuzz".into(),
            kind,
            name: name.into(),
            body,
            created_at: 0,
            updated_at: 0,
        };
        let entries = [
            entry(
                CatalogKind::Prompt,
                "greet",
                json!({ "name": "greet", "description": "Greets", "arguments": [
                    { "name": "who", "required": true }, { "name": "tone" }],
                    "messages": [{ "role": "user", "text": "Say hello to {{who}} ({{tone}})" }] }),
            ),
            entry(
                CatalogKind::Resource,
                "readme",
                json!({ "name": "readme", "uri": "docs://readme", "mime_type": "text/plain", "text": "hi" }),
            ),
            entry(
                CatalogKind::ResourceTemplate,
                "page",
                json!({ "name": "page", "uri_template": "docs://{space}/pages/{page}",
                    "mime_type": "text/plain", "resolver": { "type": "text", "text": "{page} in {space}" } }),
            ),
        ];
        let runtime = WebhookRuntime {
            slots: Arc::new(tokio::sync::Semaphore::new(64)),
            egress: mcp_harbor::egress::Egress::new(false).expect("http client"),
            tenant: "fuzz".into(),
            store: None,
            elicitations: None,
        };
        let mut catalogs =
            TenantCatalog::builtin(&["reference".into(), "demo".into()]).expect("built-ins");
        let stored: Arc<dyn Catalog> = {
            let sealer = mcp_harbor::auth::Sealer::from_specs(&[
                mcp_harbor::auth::Sealer::generate_spec("fuzz"),
            ])
            .expect("a sealing key");
            Arc::new(StoredCatalog::new(runtime, &sealer, &entries))
        };
        catalogs.push(stored);
        World {
            catalog: TenantCatalog::new(catalogs),
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime"),
            port: Arc::new(NoSession),
            capabilities: Arc::new(json!({ "sampling": {}, "elicitation": {}, "roots": {} })),
        }
    })
}

fn check_error(method: &str, e: &RpcError) {
    assert!(
        e.code == INVALID_PARAMS || (method == "resources/read" && e.code == RESOURCE_NOT_FOUND),
        "{method}: unexpected error {e:?}"
    );
    assert!(!e.message.is_empty());
}

fn check_content(blocks: &Value) {
    let blocks = blocks.as_array().expect("content is an array");
    for b in blocks {
        assert!(b["type"].is_string(), "content block without a type: {b}");
    }
}

fn check_tool_result(r: &Value) {
    check_content(&r["content"]);
    assert!(
        r["isError"].is_boolean() || r.get("isError").is_none(),
        "{r}"
    );
}

/// The list `method` pages through, and its key in the result.
fn list_of<'a>(method: &str, catalog: &'a TenantCatalog) -> Option<(&'static str, &'a [Value])> {
    Some(match method {
        "tools/list" => ("tools", &catalog.tools),
        "resources/list" => ("resources", &catalog.resources),
        "resources/templates/list" => ("resourceTemplates", &catalog.resource_templates),
        "prompts/list" => ("prompts", &catalog.prompts),
        _ => return None,
    })
}

fn run(method: &str, params: Value) -> Option<Result<Value, RpcError>> {
    let w = world();
    let id = RequestId::Number(1);
    let mut req = Request {
        id: id.clone(),
        method: method.to_string(),
        params: Some(params),
        meta: None,
    };
    let params = match req.take_params() {
        Ok(p) => p,
        Err(e) => {
            assert_eq!(e.code, INVALID_PARAMS);
            return None;
        }
    };
    let progress = req.progress_token();
    let scope = RequestScope {
        version: ProtocolVersion::LATEST,
        client_capabilities: &w.capabilities,
        principal: None,
        catalog: &w.catalog,
        page_size: PAGE_SIZE,
        call_key: "fuzz/1".into(),
        session: None,
        port: &w.port,
    };
    match handle(&id, method, params, progress, &scope) {
        Handled::Unknown => {
            assert!(!HANDLED.contains(&method), "{method} answered Unknown");
            None
        }
        Handled::Done(outcome) => {
            assert!(HANDLED.contains(&method), "{method} was handled");
            Some(outcome)
        }
        Handled::Run { future, .. } => {
            // Tool calls, and prompts that ask the client something, run on.
            assert!(
                matches!(method, "tools/call" | "prompts/get"),
                "{method} ran on"
            );
            // One poll: tools that wait (sleeps, client answers) are dropped, as a cancel would.
            let _guard = w.runtime.enter();
            let mut future = pin!(future);
            let waker = std::task::Waker::noop();
            let mut cx = std::task::Context::from_waker(waker);
            match future.as_mut().poll(&mut cx) {
                Poll::Ready(outcome) => Some(outcome),
                Poll::Pending => None,
            }
        }
    }
}

fn check(method: &str, params: &Value, outcome: Result<Value, RpcError>) {
    let w = world();
    let result = match outcome {
        Err(e) => return check_error(method, &e),
        Ok(r) => r,
    };
    assert!(
        result.is_object(),
        "{method}: result {result} is not an object"
    );
    if let Some((key, items)) = list_of(method, &w.catalog) {
        let page = result[key].as_array().expect("a page is an array");
        assert!(page.len() <= PAGE_SIZE);
        // An empty page is the end of the list (a cursor may name the offset just past it).
        let start = if page.is_empty() {
            items.len()
        } else {
            items
                .windows(page.len())
                .position(|w| w == page.as_slice())
                .expect("a page is a slice of its list")
        };
        match result.get("nextCursor") {
            Some(next) => {
                let end = start + page.len();
                assert!(end < items.len(), "a cursor after the last page");
                let next_page = run(method, json!({ "cursor": next }))
                    .expect("next page")
                    .expect("nextCursor is accepted");
                assert_eq!(next_page[key][0], items[end], "nextCursor skips or repeats");
            }
            None => assert_eq!(
                start + page.len(),
                items.len(),
                "the last page ends the list"
            ),
        }
        return;
    }
    match method {
        "ping" => assert_eq!(result, json!({})),
        "tools/call" => check_tool_result(&result),
        "resources/read" => {
            let contents = result["contents"].as_array().expect("contents");
            assert!(!contents.is_empty());
            assert_eq!(contents[0]["uri"], params["uri"], "read another URI");
        }
        "prompts/get" => {
            for m in result["messages"].as_array().expect("messages") {
                assert!(m["role"] == "user" || m["role"] == "assistant", "{m}");
                assert!(m["content"]["type"].is_string(), "{m}");
            }
        }
        "completion/complete" => {
            let c = &result["completion"];
            let values = c["values"].as_array().expect("values");
            let total = c["total"].as_u64().expect("total") as usize;
            assert!(values.len() <= 100 && values.len() <= total);
            assert_eq!(c["hasMore"], json!(total > 100));
            assert!(values.iter().all(Value::is_string));
        }
        other => panic!("{other} answered"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let all = HANDLED.len() + OTHERS.len();
    let i = selector as usize % all;
    let method = if i < HANDLED.len() {
        HANDLED[i]
    } else {
        OTHERS[i - HANDLED.len()]
    };
    let Ok(params) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    // The session-level decoders of the same params.
    if let Some(level) = params["level"].as_str() {
        if let Some(l) = LogLevel::parse(level) {
            assert_eq!(l.as_str(), level);
        }
    }
    let requested = params["protocolVersion"].as_str();
    let negotiated = ProtocolVersion::negotiate(requested);
    match requested.and_then(ProtocolVersion::parse) {
        Some(v) => assert_eq!((v, v.as_str()), (negotiated, requested.unwrap())),
        None => assert_eq!(negotiated, ProtocolVersion::LATEST),
    }
    if let Some(outcome) = run(method, params.clone()) {
        check(method, &params, outcome);
    }
});
