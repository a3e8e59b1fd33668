//! The admin API over real HTTP: tenant lifecycle, validation, publishing a catalog that live
//! sessions see at once, suspension, deletion and cross-tenant isolation.

use std::time::Duration;

use crate::helpers::{spawn_app, SseReader, TestApp, ADMIN_TOKEN};
use reqwest::Method;
use serde_json::{json, Value};

async fn send(app: &TestApp, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut r = app.admin(method, path);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A server started on `first`'s database once `first` has stopped (`first` keeps the directory
/// and the sealing key).
async fn restarted_on(first: &TestApp) -> TestApp {
    first.handle.stop(false).await;
    let data_dir = first
        .data_dir
        .as_ref()
        .unwrap()
        .path()
        .display()
        .to_string();
    crate::helpers::spawn_app_with(move |c| c.storage.data_dir = data_dir).await
}

/// Every tenant's slug, as the admin listing gives them two to a page.
async fn listed_slugs(app: &TestApp) -> Vec<String> {
    let mut seen = Vec::new();
    let mut path = "/tenants?limit=2".to_string();
    loop {
        let (status, page) = send(app, Method::GET, &path, None).await;
        assert_eq!(status, 200, "{page}");
        seen.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["slug"].as_str().unwrap().to_string()),
        );
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/tenants?limit=2&cursor={c}"),
            None => return seen,
        }
    }
}

fn prompt(name: &str) -> Value {
    json!({ "name": name, "description": "Greets someone", "arguments": [{ "name": "who", "required": true }],
            "messages": [{ "role": "user", "text": "Say hello to {{who}}" }] })
}

#[actix_rt::test]
async fn the_admin_api_needs_the_token() {
    let app = spawn_app().await;
    let resp = app
        .http
        .get(format!("{}/admin/v1/tenants", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert!(resp.headers().get("www-authenticate").is_some());
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized");
    let resp = app
        .http
        .get(format!("{}/admin/v1/tenants", app.base))
        .bearer_auth("wrong-token-wrong-token")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    // The auth scheme is case-insensitive (RFC 7235); another scheme is no token.
    for (header, status) in [
        (format!("BEARER {ADMIN_TOKEN}"), 200),
        (format!("Basic {ADMIN_TOKEN}"), 401),
    ] {
        let resp = app
            .http
            .get(format!("{}/admin/v1/tenants", app.base))
            .header("authorization", header)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), status);
    }
    let resp = app
        .http
        .get(format!("{}/admin/v1/openapi.json", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "the API description is public");
}

#[actix_rt::test]
async fn tenant_lifecycle() {
    let app = spawn_app().await;
    let created = app.tenant("acme").catalogs(json!(["demo"])).create().await;
    assert_eq!(created["slug"], "acme");
    assert_eq!(created["status"], "active");
    assert_eq!(created["mcp_path"], "/t/acme/mcp");
    let (status, _) = send(
        &app,
        Method::POST,
        "/tenants",
        Some(json!({ "slug": "acme" })),
    )
    .await;
    assert_eq!(status, 409);

    let (status, got) = send(&app, Method::GET, "/tenants/acme", None).await;
    assert_eq!((status, &got["display_name"]), (200, &json!("acme")));

    // Pagination walks every tenant once (demo and other come from configuration).
    for slug in ["t1", "t2", "t3"] {
        app.tenant(slug).catalogs(json!([])).create().await;
    }
    assert_eq!(
        listed_slugs(&app).await,
        ["acme", "demo", "other", "t1", "t2", "t3"]
    );

    let (status, updated) = send(
        &app,
        Method::PATCH,
        "/tenants/acme",
        Some(json!({ "display_name": "Acme Corp", "limits": { "max_sessions": 3, "requests_per_minute": 600, "allowed_origins": ["https://app.acme.example"] } })),
    )
    .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["display_name"], "Acme Corp");
    assert_eq!(updated["limits"]["max_sessions"], 3);

    // The tenant serves MCP right away, and its allowed origin is honoured.
    let c = app.open_session("acme", "2025-11-25", json!({})).await;
    let resp = c
        .post(&json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }))
        .header("origin", "https://app.acme.example")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = app
        .post(
            "demo",
            None,
            &crate::helpers::initialize_body("2025-11-25", json!({})),
        )
        .header("origin", "https://app.acme.example")
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        403,
        "another tenant's allowed origin is not this one's"
    );

    let (status, _) = send(&app, Method::DELETE, "/tenants/acme", None).await;
    assert_eq!(status, 204);
    let (status, _) = send(&app, Method::GET, "/tenants/acme", None).await;
    assert_eq!(status, 404);
    let (status, _) = send(&app, Method::DELETE, "/tenants/acme", None).await;
    assert_eq!(status, 404);
}

#[actix_rt::test]
async fn validation_errors_name_the_field() {
    let app = spawn_app().await;
    app.tenant("acme").catalogs(json!([])).create().await;
    let cases: Vec<(Method, &str, Value, &str)> = vec![
        (
            Method::POST,
            "/tenants",
            json!({ "slug": "Not OK" }),
            "slug",
        ),
        (Method::POST, "/tenants", json!({}), "slug"),
        (
            Method::POST,
            "/tenants",
            json!({ "slug": "x", "colour": "red" }),
            "colour",
        ),
        (
            Method::POST,
            "/tenants",
            json!({ "slug": "x", "catalogs": ["nope"] }),
            "catalogs[0]",
        ),
        // Unknown fields are refused at every level (stored records are read leniently: the
        // documented schema is what keeps them out).
        (
            Method::POST,
            "/tenants",
            json!({ "slug": "x", "limits": { "max_tools": 7 } }),
            "limits.max_tools",
        ),
        (
            Method::POST,
            "/tenants",
            json!({ "slug": "x", "auth": { "mode": "oauth", "token_ttl_secs": 600 } }),
            "auth.token_ttl_secs",
        ),
        (
            Method::POST,
            "/tenants/acme/tools",
            json!({ "name": "t", "description": "d", "webhook": { "url": "https://x.example/h", "headers": {} } }),
            "webhook.headers",
        ),
        (
            Method::POST,
            "/tenants/acme/prompts",
            json!({ "name": "p", "description": "d", "arguments": [{ "name": "a", "kind": "text" }],
                    "messages": [{ "role": "user", "text": "x" }] }),
            "arguments[0].kind",
        ),
        (
            Method::POST,
            "/tenants/acme/resource-templates",
            json!({ "name": "rt", "uri_template": "docs://{id}", "mime_type": "text/plain",
                    "resolver": { "type": "text", "text": "{id}", "escape": true } }),
            "resolver.escape",
        ),
        (
            Method::POST,
            "/tenants",
            json!({ "slug": "x", "limits": { "max_sessions": 0 } }),
            "limits.max_sessions",
        ),
        (
            Method::POST,
            "/tenants",
            json!({ "slug": "x", "limits": { "requests_per_minute_per_principal": 0 } }),
            "limits.requests_per_minute_per_principal",
        ),
        (
            Method::POST,
            "/tenants",
            json!({ "slug": "x", "limits": { "max_sessions_per_principal": 0 } }),
            "limits.max_sessions_per_principal",
        ),
        (
            Method::POST,
            "/tenants",
            json!({ "slug": "x", "limits": { "allowed_origins": ["ftp://x"] } }),
            "limits.allowed_origins[0]",
        ),
        (
            Method::POST,
            "/tenants",
            json!({ "slug": "x", "limits": { "max_message_bytes": 100 } }),
            "limits.max_message_bytes",
        ),
        (
            Method::PATCH,
            "/tenants/acme",
            json!({ "status": "sleeping" }),
            "status",
        ),
        (
            Method::POST,
            "/tenants/acme/tools",
            json!({ "name": "bad name", "description": "d", "webhook": { "url": "https://x.example/h" } }),
            "name",
        ),
        (
            Method::POST,
            "/tenants/acme/tools",
            json!({ "name": "t", "description": "d", "webhook": { "url": "http://evil.example/h" } }),
            "webhook.url",
        ),
        (
            Method::POST,
            "/tenants/acme/tools",
            json!({ "name": "t", "description": "d", "input_schema": { "type": "string" }, "webhook": { "url": "https://x.example/h" } }),
            "input_schema.type",
        ),
        (
            Method::POST,
            "/tenants/acme/tools",
            json!({ "name": "t", "description": "d" }),
            "webhook",
        ),
        // What MCP's Tool allows: a schema object per property, boolean hints, a string title.
        (
            Method::POST,
            "/tenants/acme/tools",
            json!({ "name": "t", "description": "d", "input_schema": { "type": "object", "properties": { "x": true } }, "webhook": { "url": "https://x.example/h" } }),
            "input_schema.properties.x",
        ),
        (
            Method::POST,
            "/tenants/acme/tools",
            json!({ "name": "t", "description": "d", "output_schema": { "type": "object", "properties": { "x": false } }, "webhook": { "url": "https://x.example/h" } }),
            "output_schema.properties.x",
        ),
        (
            Method::POST,
            "/tenants/acme/tools",
            json!({ "name": "t", "description": "d", "annotations": { "readOnlyHint": "yes" }, "webhook": { "url": "https://x.example/h" } }),
            "annotations.readOnlyHint",
        ),
        (
            Method::POST,
            "/tenants/acme/tools",
            json!({ "name": "t", "description": "d", "annotations": { "title": 7 }, "webhook": { "url": "https://x.example/h" } }),
            "annotations.title",
        ),
        (
            Method::POST,
            "/tenants",
            json!({ "slug": "twice", "catalogs": ["demo", "demo"] }),
            "catalogs",
        ),
        (
            Method::POST,
            "/tenants/acme/tools",
            json!({ "name": "t", "description": "d", "webhook": { "url": "https://x.example/h", "timeout_ms": 5 } }),
            "webhook.timeout_ms",
        ),
        (
            Method::POST,
            "/tenants/acme/prompts",
            json!({ "name": "p", "description": "d", "messages": [{ "role": "user", "text": "{{ghost}}" }] }),
            "messages[0].text",
        ),
        (
            Method::POST,
            "/tenants/acme/prompts",
            json!({ "name": "p", "description": "d", "messages": [{ "role": "robot", "text": "x" }] }),
            "messages[0].role",
        ),
        (
            Method::POST,
            "/tenants/acme/resources",
            json!({ "name": "r", "uri": "not a uri", "mime_type": "text/plain", "text": "x" }),
            "uri",
        ),
        (
            Method::POST,
            "/tenants/acme/resources",
            json!({ "name": "r", "uri": "docs://r", "mime_type": "text/plain" }),
            "text",
        ),
        (
            Method::POST,
            "/tenants/acme/resources",
            json!({ "name": "r", "uri": "docs://r", "mime_type": "image/png", "blob": "!!" }),
            "blob",
        ),
        (
            Method::POST,
            "/tenants/acme/resource-templates",
            json!({ "name": "rt", "uri_template": "docs://{a}{b}", "mime_type": "text/plain", "resolver": { "type": "text", "text": "x" } }),
            "uri_template",
        ),
        (
            Method::POST,
            "/tenants/acme/resource-templates",
            json!({ "name": "rt", "uri_template": "docs://{id}", "mime_type": "text/plain", "resolver": { "type": "text", "text": "{nope}" } }),
            "resolver.text",
        ),
    ];
    for (method, path, body, field) in cases {
        let (status, resp) = send(&app, method.clone(), path, Some(body.clone())).await;
        assert_eq!(status, 422, "{method} {path} {body} → {resp}");
        assert_eq!(resp["error"]["code"], "invalid");
        assert_eq!(resp["error"]["field"], field, "{body} → {resp}");
    }
    // Not JSON at all is 400.
    let resp = app
        .admin(Method::POST, "/tenants")
        .header("content-type", "application/json")
        .body("{oops")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let (status, _) = send(&app, Method::GET, "/tenants?limit=0", None).await;
    assert_eq!(status, 422);
    let (status, _) = send(&app, Method::GET, "/tenants/acme/widgets", None).await;
    assert_eq!(status, 404);
    let (status, _) = send(&app, Method::GET, "/tenants/ghost/tools", None).await;
    assert_eq!(status, 404);
}

#[actix_rt::test]
async fn a_published_catalog_is_served_at_once_and_live_sessions_hear_of_it() {
    let app = spawn_app().await;
    app.tenant("acme").catalogs(json!([])).create().await;
    let mut c = app.open_session("acme", "2025-11-25", json!({})).await;
    c.result("resources/subscribe", json!({ "uri": "docs://handbook" }))
        .await;
    let mut stream = SseReader::new(c.get_stream(None).await);
    tokio::time::sleep(Duration::from_millis(100)).await;

    let (status, body) = send(
        &app,
        Method::POST,
        "/tenants/acme/prompts",
        Some(prompt("greet")),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let r = c
        .result(
            "prompts/get",
            json!({ "name": "greet", "arguments": { "who": "Ada" } }),
        )
        .await;
    assert_eq!(r["messages"][0]["content"]["text"], "Say hello to Ada");
    let (r, _) = c.call("prompts/get", json!({ "name": "greet" })).await;
    assert_eq!(r["error"]["code"], -32602, "missing required argument");

    let resource = json!({ "name": "handbook", "uri": "docs://handbook", "mime_type": "text/markdown", "text": "# Welcome" });
    assert_eq!(
        send(
            &app,
            Method::POST,
            "/tenants/acme/resources",
            Some(resource.clone())
        )
        .await
        .0,
        201
    );
    let r = c
        .result("resources/read", json!({ "uri": "docs://handbook" }))
        .await;
    assert_eq!(r["contents"][0]["text"], "# Welcome");
    let dup = json!({ "name": "other", "uri": "docs://handbook", "mime_type": "text/plain", "text": "x" });
    assert_eq!(
        send(&app, Method::POST, "/tenants/acme/resources", Some(dup))
            .await
            .0,
        409,
        "URIs are unique per tenant"
    );

    let template = json!({ "name": "page", "uri_template": "docs://pages/{slug}", "mime_type": "text/plain", "resolver": { "type": "text", "text": "Page {slug}" } });
    assert_eq!(
        send(
            &app,
            Method::POST,
            "/tenants/acme/resource-templates",
            Some(template)
        )
        .await
        .0,
        201
    );
    let r = c
        .result("resources/read", json!({ "uri": "docs://pages/intro" }))
        .await;
    assert_eq!(r["contents"][0]["text"], "Page intro");
    let r = c.result("resources/templates/list", json!({})).await;
    assert_eq!(
        r["resourceTemplates"][0]["uriTemplate"],
        "docs://pages/{slug}"
    );

    let mut changed = resource.clone();
    changed["text"] = json!("# Welcome, v2");
    assert_eq!(
        send(
            &app,
            Method::PUT,
            "/tenants/acme/resources/handbook",
            Some(changed)
        )
        .await
        .0,
        200
    );
    let r = c
        .result("resources/read", json!({ "uri": "docs://handbook" }))
        .await;
    assert_eq!(r["contents"][0]["text"], "# Welcome, v2");

    let mut methods = Vec::new();
    while let Some(e) = stream.next_event(Duration::from_millis(700)).await {
        if let Some(m) = e.json() {
            methods.push(m["method"].as_str().unwrap_or("").to_string());
        }
    }
    assert!(
        methods.contains(&"notifications/prompts/list_changed".to_string()),
        "{methods:?}"
    );
    assert!(
        methods.contains(&"notifications/resources/list_changed".to_string()),
        "{methods:?}"
    );
    assert!(
        methods.contains(&"notifications/resources/updated".to_string()),
        "{methods:?}"
    );

    assert_eq!(
        send(&app, Method::DELETE, "/tenants/acme/prompts/greet", None)
            .await
            .0,
        204
    );
    let (r, _) = c
        .call(
            "prompts/get",
            json!({ "name": "greet", "arguments": { "who": "x" } }),
        )
        .await;
    assert_eq!(r["error"]["code"], -32602);
    assert_eq!(
        send(&app, Method::GET, "/tenants/acme/prompts/greet", None)
            .await
            .0,
        404
    );
}

#[actix_rt::test]
async fn tool_secrets_are_shown_once() {
    let app = spawn_app().await;
    app.tenant("acme").catalogs(json!([])).create().await;
    let tool = json!({ "name": "lookup", "description": "Looks things up", "webhook": { "url": "https://hooks.acme.example/lookup" } });
    let (status, created) = send(
        &app,
        Method::POST,
        "/tenants/acme/tools",
        Some(tool.clone()),
    )
    .await;
    assert_eq!(status, 201);
    let secret = created["webhook"]["secret"].as_str().unwrap().to_string();
    assert!(
        secret.starts_with("whsec_") && secret.len() > 20,
        "a generated secret is returned on create"
    );
    let (_, got) = send(&app, Method::GET, "/tenants/acme/tools/lookup", None).await;
    assert_ne!(got["webhook"]["secret"], json!(secret), "and never again");
    assert_eq!(got["input_schema"], json!({ "type": "object" }));
    // Replacing without a secret keeps the old one (not shown).
    let (status, replaced) =
        send(&app, Method::PUT, "/tenants/acme/tools/lookup", Some(tool)).await;
    assert_eq!(status, 200);
    assert_ne!(replaced["webhook"]["secret"], json!(secret));
    let mut renamed = json!({ "name": "other", "description": "d", "webhook": { "url": "https://hooks.acme.example/x" } });
    let (status, resp) = send(
        &app,
        Method::PUT,
        "/tenants/acme/tools/lookup",
        Some(renamed.clone()),
    )
    .await;
    assert_eq!((status, &resp["error"]["field"]), (422, &json!("name")));
    renamed["name"] = json!("lookup");
    assert_eq!(
        send(&app, Method::POST, "/tenants/acme/tools", Some(renamed))
            .await
            .0,
        409
    );
}

#[actix_rt::test]
async fn suspension_refuses_requests_and_ends_streams() {
    let app = spawn_app().await;
    app.tenant("acme").catalogs(json!(["demo"])).create().await;
    let mut c = app.open_session("acme", "2025-11-25", json!({})).await;
    let mut stream = SseReader::new(c.get_stream(None).await);
    let _priming = stream.next_event(Duration::from_secs(2)).await;

    let (status, body) = send(
        &app,
        Method::PATCH,
        "/tenants/acme",
        Some(json!({ "status": "suspended" })),
    )
    .await;
    assert_eq!((status, &body["status"]), (200, &json!("suspended")));
    assert!(
        stream
            .ends_within(Duration::from_secs(3), &mut Vec::new())
            .await,
        "the open stream ended"
    );
    let resp = c
        .send(&json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }))
        .await;
    assert_eq!(resp.status(), 403);
    let body: Value = resp.json().await.unwrap();
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("suspended"));
    let resp = app
        .post(
            "acme",
            None,
            &crate::helpers::initialize_body("2025-11-25", json!({})),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403, "no new sessions either");

    send(
        &app,
        Method::PATCH,
        "/tenants/acme",
        Some(json!({ "status": "active" })),
    )
    .await;
    let mut again = app.open_session("acme", "2025-11-25", json!({})).await;
    again.result("ping", json!({})).await;
    let _ = c.next_id();
}

#[actix_rt::test]
async fn deleting_a_tenant_ends_its_sessions_and_removes_its_data() {
    let app = spawn_app().await;
    app.tenant("acme").catalogs(json!(["demo"])).create().await;
    send(
        &app,
        Method::POST,
        "/tenants/acme/prompts",
        Some(prompt("greet")),
    )
    .await;
    let c = app.open_session("acme", "2025-11-25", json!({})).await;
    assert_eq!(
        send(&app, Method::DELETE, "/tenants/acme", None).await.0,
        204
    );
    let resp = c
        .send(&json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }))
        .await;
    assert_eq!(resp.status(), 404);
    // Re-creating the slug starts from nothing.
    app.tenant("acme").catalogs(json!([])).create().await;
    let (_, page) = send(&app, Method::GET, "/tenants/acme/prompts", None).await;
    assert_eq!(page["items"], json!([]));
}

#[actix_rt::test]
async fn tenants_see_nothing_of_each_other() {
    let app = spawn_app().await;
    app.tenant("alpha").catalogs(json!([])).create().await;
    app.tenant("beta").catalogs(json!([])).create().await;
    for kind in ["prompts", "resources"] {
        let body = if kind == "prompts" {
            prompt("secret_prompt")
        } else {
            json!({ "name": "secret_prompt", "uri": "alpha://secret", "mime_type": "text/plain", "text": "alpha only" })
        };
        assert_eq!(
            send(
                &app,
                Method::POST,
                &format!("/tenants/alpha/{kind}"),
                Some(body)
            )
            .await
            .0,
            201
        );
        // beta's admin view: unknown.
        assert_eq!(
            send(
                &app,
                Method::GET,
                &format!("/tenants/beta/{kind}/secret_prompt"),
                None
            )
            .await
            .0,
            404
        );
        assert_eq!(
            send(
                &app,
                Method::DELETE,
                &format!("/tenants/beta/{kind}/secret_prompt"),
                None
            )
            .await
            .0,
            404
        );
        let (_, page) = send(&app, Method::GET, &format!("/tenants/beta/{kind}"), None).await;
        assert_eq!(page["items"], json!([]));
    }
    // beta's MCP view: unknown.
    let mut beta = app.open_session("beta", "2025-11-25", json!({})).await;
    let (r, _) = beta
        .call(
            "prompts/get",
            json!({ "name": "secret_prompt", "arguments": { "who": "x" } }),
        )
        .await;
    assert_eq!(r["error"]["code"], -32602);
    let (r, _) = beta
        .call("resources/read", json!({ "uri": "alpha://secret" }))
        .await;
    assert_eq!(r["error"]["code"], -32002);
    assert_eq!(
        beta.result("prompts/list", json!({})).await["prompts"],
        json!([])
    );
    // alpha's sessions are unknown at beta.
    let alpha = app.open_session("alpha", "2025-11-25", json!({})).await;
    let resp = app
        .post(
            "beta",
            Some(&alpha.session),
            &json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
}

#[actix_rt::test]
async fn publishing_keeps_the_built_in_catalogs_state() {
    let app = spawn_app().await;
    app.tenant("acme").catalogs(json!(["demo"])).create().await;
    let mut c = app.open_session("acme", "2025-11-25", json!({})).await;
    c.result(
        "tools/call",
        json!({ "name": "set_note", "arguments": { "text": "keep me" } }),
    )
    .await;
    assert_eq!(
        send(
            &app,
            Method::POST,
            "/tenants/acme/prompts",
            Some(prompt("greet"))
        )
        .await
        .0,
        201
    );
    let r = c
        .result("resources/read", json!({ "uri": "demo://note" }))
        .await;
    assert_eq!(r["contents"][0]["text"], "keep me");
    let tools = c.result("tools/list", json!({})).await;
    assert!(tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "echo"));

    // An entry may not take a built-in one's name or URI (it would be listed twice and never
    // reached): 409, nothing published.
    let tool = json!({ "name": "echo", "description": "d",
        "webhook": { "url": "https://hooks.example/echo" } });
    let resource =
        json!({ "name": "note", "uri": "demo://note", "mime_type": "text/plain", "text": "x" });
    for (collection, body) in [
        ("tools", tool),
        ("prompts", prompt("summarize")),
        ("resources", resource),
    ] {
        let (status, answer) = send(
            &app,
            Method::POST,
            &format!("/tenants/acme/{collection}"),
            Some(body),
        )
        .await;
        assert_eq!(status, 409, "{collection}: {answer}");
        assert!(answer.to_string().contains("built-in"), "{answer}");
    }
    let tools = c.result("tools/list", json!({})).await;
    let echoes = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == "echo")
        .count();
    assert_eq!(echoes, 1);

    // Nor may a tenant enable a built-in catalog one of whose entries it already published:
    // 409, the tenant unchanged.
    app.tenant("plain").catalogs(json!([])).create().await;
    let tool = json!({ "name": "echo", "description": "mine",
        "webhook": { "url": "https://hooks.example/echo" } });
    let (status, answer) = send(&app, Method::POST, "/tenants/plain/tools", Some(tool)).await;
    assert_eq!(status, 201, "{answer}");
    let (status, answer) = send(
        &app,
        Method::PATCH,
        "/tenants/plain",
        Some(json!({ "catalogs": ["demo"] })),
    )
    .await;
    assert_eq!(status, 409, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("\"demo\"") && message.contains("\"echo\""),
        "{message}"
    );
    let (_, tenant) = send(&app, Method::GET, "/tenants/plain", None).await;
    assert_eq!(tenant["catalogs"], json!([]));
    // A catalog without a colliding entry is enabled.
    let (status, answer) = send(
        &app,
        Method::PATCH,
        "/tenants/plain",
        Some(json!({ "catalogs": ["reference"] })),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
}

#[actix_rt::test]
async fn production_webhooks_cannot_reach_private_addresses() {
    let app = crate::helpers::spawn_app_with(|c| c.egress.allow_private = false).await;
    app.tenant("acme").catalogs(json!([])).create().await;
    for url in [
        "https://127.0.0.1/hook",
        "https://10.0.0.7/hook",
        "https://169.254.169.254/latest",
        "https://localhost/hook",
        "http://127.0.0.1/hook",
    ] {
        let tool = json!({ "name": "t", "description": "d", "webhook": { "url": url } });
        let (status, body) = send(&app, Method::POST, "/tenants/acme/tools", Some(tool)).await;
        assert_eq!(
            (status, &body["error"]["field"]),
            (422, &json!("webhook.url")),
            "{url}: {body}"
        );
    }
    let tool = json!({ "name": "t", "description": "d", "webhook": { "url": "https://hooks.acme.example/x" } });
    assert_eq!(
        send(&app, Method::POST, "/tenants/acme/tools", Some(tool))
            .await
            .0,
        201,
        "public names are accepted"
    );
    // A signing secret is a key of at least 16 bytes (15 and 16 zero bytes in base64 here).
    for (name, secret, status) in [
        ("short", "whsec_AAAAAAAAAAAAAAAAAAAA", 422),
        ("long", "whsec_AAAAAAAAAAAAAAAAAAAAAA==", 201),
    ] {
        let tool = json!({ "name": name, "description": "d",
            "webhook": { "url": "https://hooks.acme.example/x", "secret": secret } });
        let (got, body) = send(&app, Method::POST, "/tenants/acme/tools", Some(tool)).await;
        assert_eq!(got, status, "{secret}: {body}");
        if status == 422 {
            assert_eq!(body["error"]["field"], "webhook.secret");
        }
    }
    // Nor can a tenant's auth settings name a private issuer or key set (they would be refused
    // when fetched, on every request).
    let ext = |issuer: &str, jwks: Option<&str>| json!({ "auth": { "mode": "external", "issuer": issuer, "audience": "mcp", "jwks_uri": jwks } });
    for (auth, field) in [
        (ext("https://10.0.0.7/", None), "auth.issuer"),
        (
            ext(
                "https://login.acme.example",
                Some("https://169.254.169.254/keys"),
            ),
            "auth.jwks_uri",
        ),
        (
            json!({ "auth": { "mode": "oauth", "oidc": { "issuer": "https://localhost/", "client_id": "harbor" } } }),
            "auth.oidc.issuer",
        ),
    ] {
        let (status, body) = send(&app, Method::PATCH, "/tenants/acme", Some(auth)).await;
        assert_eq!(
            (status, &body["error"]["field"]),
            (422, &json!(field)),
            "{body}"
        );
    }
    let public = ext(
        "https://login.acme.example",
        Some("https://login.acme.example/keys"),
    );
    assert_eq!(
        send(&app, Method::PATCH, "/tenants/acme", Some(public))
            .await
            .0,
        200
    );
}

/// The `ETag` header of a response (a record's revision).
fn etag(resp: &reqwest::Response) -> String {
    resp.headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .expect("the response carries an ETag")
        .to_string()
}

/// Creates a record by POSTing `body` to `collection`; its ETag, the same on the creation's answer
/// and on a read of `item`.
async fn create_tagged(app: &TestApp, collection: &str, body: Value, item: &str) -> String {
    let created = app
        .admin(Method::POST, collection)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let tag = etag(&created);
    let got = app.admin(Method::GET, item).send().await.unwrap();
    assert_eq!(etag(&got), tag);
    tag
}

/// A DELETE with `If-Match` removes the record only at a revision it names: after a write, the
/// tag read before it answers 412 and the record stays; the current tag (or `*`) deletes it; a
/// record already gone is 404 whatever the condition. Without `If-Match` a DELETE is as before.
#[actix_rt::test]
async fn a_delete_with_if_match_removes_only_the_revision_it_names() {
    let app = spawn_app().await;
    let delete = |path: &str, if_match: Option<&str>| {
        let mut req = app.admin(Method::DELETE, path);
        if let Some(tag) = if_match {
            req = req.header("if-match", tag);
        }
        req.send()
    };
    let tool = json!({ "name": "lookup", "description": "Looks things up", "webhook": { "url": "https://hooks.acme.example/lookup" } });
    for (collection, item, body) in [
        (
            "/tenants",
            "/tenants/acme",
            json!({ "slug": "acme", "catalogs": [] }),
        ),
        ("/tenants/acme/tools", "/tenants/acme/tools/lookup", tool),
    ] {
        let read = create_tagged(&app, collection, body, item).await;
        // Someone changes the record after it was read.
        let (status, _) = if item.ends_with("lookup") {
            send(
                &app,
                Method::PUT,
                item,
                Some(json!({ "name": "lookup", "description": "Revised", "webhook": { "url": "https://hooks.acme.example/lookup" } })),
            )
            .await
        } else {
            send(
                &app,
                Method::PATCH,
                item,
                Some(json!({ "display_name": "Acme" })),
            )
            .await
        };
        assert_eq!(status, 200);
        let stale = delete(item, Some(&read)).await.unwrap();
        assert_eq!(stale.status(), 412, "{item}");
        let body: Value = stale.json().await.unwrap();
        assert_eq!(body["error"]["code"], "precondition_failed");
        assert_eq!(
            send(&app, Method::GET, item, None).await.0,
            200,
            "{item} stays"
        );
        assert_eq!(
            delete(item, Some("acme")).await.unwrap().status(),
            400,
            "{item}: not an entity tag"
        );
        let current = etag(&app.admin(Method::GET, item).send().await.unwrap());
        let listed = format!("{read}, W/{current}, {current}");
        assert_eq!(delete(item, Some(&listed)).await.unwrap().status(), 204);
        assert_eq!(
            send(&app, Method::GET, item, None).await.0,
            404,
            "{item} is gone"
        );
        for gone in [Some(current.as_str()), Some("*"), None] {
            assert_eq!(
                delete(item, gone).await.unwrap().status(),
                404,
                "{item} {gone:?}"
            );
        }
        if item == "/tenants/acme" {
            // The tenant again, for the tool.
            app.tenant("acme").catalogs(json!([])).create().await;
        }
    }
    // `*` and no condition delete whatever revision is there.
    app.tenant("beta").catalogs(json!([])).create().await;
    app.tenant("gamma").catalogs(json!([])).create().await;
    assert_eq!(
        delete("/tenants/beta", Some("*")).await.unwrap().status(),
        204
    );
    assert_eq!(delete("/tenants/gamma", None).await.unwrap().status(), 204);
}

/// Writes over an existing record are conditional: every representation carries the record's
/// `ETag`; `If-Match` with an older one answers 412 and writes nothing; and concurrent updates
/// of different fields all land (none puts back what another changed meanwhile).
#[actix_rt::test]
async fn writes_over_a_record_never_undo_each_other() {
    let app = spawn_app().await;
    let first = create_tagged(
        &app,
        "/tenants",
        json!({ "slug": "acme", "catalogs": [] }),
        "/tenants/acme",
    )
    .await;

    let patch = |if_match: &str, body: Value| {
        app.admin(Method::PATCH, "/tenants/acme")
            .header("if-match", if_match)
            .json(&body)
            .send()
    };
    let renamed = patch(&first, json!({ "display_name": "Acme One" }))
        .await
        .unwrap();
    assert_eq!(renamed.status(), 200);
    let second = etag(&renamed);
    assert_ne!(second, first, "a write makes a new revision");
    // The first revision is gone: a write made from it is refused and changes nothing.
    let stale = patch(&first, json!({ "display_name": "Lost" }))
        .await
        .unwrap();
    assert_eq!(stale.status(), 412);
    let body: Value = stale.json().await.unwrap();
    assert_eq!(body["error"]["code"], "precondition_failed");
    let (_, now) = send(&app, Method::GET, "/tenants/acme", None).await;
    assert_eq!(now["display_name"], "Acme One");
    // A list of tags matches when one of them is current; `*` matches any revision; a weak tag
    // never does; a value that is no entity tag at all is a bad request.
    let listed = patch(
        &format!("{first}, {second}"),
        json!({ "display_name": "Acme Two" }),
    )
    .await
    .unwrap();
    assert_eq!(listed.status(), 200);
    let third = etag(&listed);
    assert_eq!(
        patch(&format!("W/{third}"), json!({}))
            .await
            .unwrap()
            .status(),
        412
    );
    assert_eq!(patch("*", json!({})).await.unwrap().status(), 200);
    assert_eq!(patch("acme", json!({})).await.unwrap().status(), 400);
    let (_, now) = send(&app, Method::GET, "/tenants/acme", None).await;
    assert_eq!(now["display_name"], "Acme Two");

    // Without If-Match, concurrent updates of different fields all land, round after round.
    for round in 0..4 {
        let slug = format!("race-{round}");
        app.tenant(&slug).catalogs(json!([])).create().await;
        let path = format!("/tenants/{slug}");
        let writes = [
            json!({ "display_name": format!("Race {round}") }),
            json!({ "limits": { "max_sessions": 7 } }),
            json!({ "catalogs": ["demo"] }),
            json!({ "status": "suspended" }),
        ];
        let sent = writes
            .iter()
            .map(|w| send(&app, Method::PATCH, &path, Some(w.clone())));
        for (status, body) in futures_util::future::join_all(sent).await {
            assert_eq!(status, 200, "{body}");
        }
        let (_, t) = send(&app, Method::GET, &path, None).await;
        assert_eq!(
            (
                &t["display_name"],
                &t["limits"]["max_sessions"],
                &t["catalogs"],
                &t["status"]
            ),
            (
                &json!(format!("Race {round}")),
                &json!(7),
                &json!(["demo"]),
                &json!("suspended")
            ),
            "round {round}: every update landed"
        );
    }

    // Catalog entries: the same rules for a replace.
    let tool = json!({ "name": "lookup", "description": "Looks things up", "webhook": { "url": "https://hooks.acme.example/lookup" } });
    let first = create_tagged(
        &app,
        "/tenants/acme/tools",
        tool.clone(),
        "/tenants/acme/tools/lookup",
    )
    .await;
    let put = |if_match: &str, description: &str| {
        let mut body = tool.clone();
        body["description"] = json!(description);
        app.admin(Method::PUT, "/tenants/acme/tools/lookup")
            .header("if-match", if_match)
            .json(&body)
            .send()
    };
    let replaced = put(&first, "Revised").await.unwrap();
    assert_eq!(replaced.status(), 200);
    assert_ne!(etag(&replaced), first);
    assert_eq!(put(&first, "Lost").await.unwrap().status(), 412);
    let (_, now) = send(&app, Method::GET, "/tenants/acme/tools/lookup", None).await;
    assert_eq!(now["description"], "Revised");
}

/// What a newer mcp-harbor writes (during a rolling upgrade, or before a rollback) is read by
/// this one: stored tenants and catalog entries holding fields it does not know still serve, and
/// an update this version writes back keeps those fields; a built-in catalog it does not have is
/// left out; a tenant it cannot read at all is not served or listed, and keeps neither the
/// server from starting nor the others from being served and listed.
#[actix_rt::test]
async fn records_a_newer_version_wrote_are_read_and_kept() {
    let first = spawn_app().await;
    first.tenant("open").catalogs(json!([])).create().await;
    let (status, body) = send(
        &first,
        Method::POST,
        "/tenants",
        Some(
            json!({ "slug": "guarded", "auth": { "mode": "oauth", "oidc": {
            "issuer": "https://id.example", "client_id": "harbor" } } }),
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    for (kind, entry) in [
        (
            "tools",
            json!({ "name": "lookup", "description": "d", "webhook": { "url": "https://hooks.example/lookup" } }),
        ),
        ("prompts", prompt("greet")),
        (
            "resources",
            json!({ "name": "handbook", "uri": "docs://handbook", "mime_type": "text/plain", "text": "Hello" }),
        ),
        (
            "resource-templates",
            json!({ "name": "page", "uri_template": "docs://pages/{id}", "mime_type": "text/plain",
                    "resolver": { "type": "text", "text": "Page {id}" } }),
        ),
    ] {
        let (status, body) = send(
            &first,
            Method::POST,
            &format!("/tenants/open/{kind}"),
            Some(entry),
        )
        .await;
        assert_eq!(status, 201, "{kind}: {body}");
    }

    first.tenant("later").catalogs(json!([])).create().await;

    // What a newer version would store: one more field at every level of every record, a
    // built-in catalog this version does not have, and an auth mode it does not know.
    let db = first.database().await;
    let edit = |sql: &'static str| sqlx::query(sql).execute(&db);
    edit(
        "UPDATE tenants SET limits = json_set(limits, '$.max_tools', 7), \
         catalogs = '[\"github\"]' WHERE slug = 'open'",
    )
    .await
    .unwrap();
    edit("UPDATE tenants SET auth = '{\"mode\":\"saml\"}' WHERE slug = 'later'")
        .await
        .unwrap();
    edit(
        "UPDATE tenants SET auth = json_set(auth, '$.token_ttl_secs', 600, \
         '$.oidc.prompt', 'login') WHERE slug = 'guarded'",
    )
    .await
    .unwrap();
    edit(
        "UPDATE catalog_entries SET body = json_set(body, '$.icons', json('[]')) \
         WHERE tenant = 'open'",
    )
    .await
    .unwrap();
    edit(
        "UPDATE catalog_entries SET body = json_set(body, '$.webhook.headers', json('{}')) \
         WHERE tenant = 'open' AND kind = 'tool'",
    )
    .await
    .unwrap();
    edit(
        "UPDATE catalog_entries SET body = json_set(body, '$.arguments[0].kind', 'text', \
         '$.messages[0].audience', 'all') WHERE tenant = 'open' AND kind = 'prompt'",
    )
    .await
    .unwrap();
    edit(
        "UPDATE catalog_entries SET body = json_set(body, '$.resolver.escape', true) \
         WHERE tenant = 'open' AND kind = 'resource_template'",
    )
    .await
    .unwrap();

    // This version starts on that database (the first keeps its directory and sealing key).
    let app = restarted_on(&first).await;
    let mut c = app.open_session("open", "2025-11-25", json!({})).await;
    for (method, list, name) in [
        ("tools/list", "tools", "lookup"),
        ("prompts/list", "prompts", "greet"),
        ("resources/list", "resources", "handbook"),
        ("resources/templates/list", "resourceTemplates", "page"),
    ] {
        let listed = c.result(method, json!({})).await;
        let names: Vec<&str> = listed[list]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["name"].as_str())
            .collect();
        assert_eq!(names, [name], "{method}: {listed}");
    }
    let page = c
        .result("resources/read", json!({ "uri": "docs://pages/7" }))
        .await;
    assert_eq!(page["contents"][0]["text"], "Page 7");
    let prompt = c
        .result(
            "prompts/get",
            json!({ "name": "greet", "arguments": { "who": "Ada" } }),
        )
        .await;
    assert_eq!(prompt["messages"][0]["content"]["text"], "Say hello to Ada");

    // The tenant this version cannot read is not served (503), and nothing else is held up.
    let resp = app.initialize("later", "2025-11-25", json!({})).await;
    assert_eq!(resp.status(), 503);
    let refused: Value = resp.json().await.unwrap();
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot serve the tenant")),
        "{refused}"
    );
    // The admin listing leaves it out and goes on past it, page after page.
    assert_eq!(
        listed_slugs(&app).await,
        ["demo", "guarded", "open", "other"]
    );
    // Reading or changing it through the admin API says so (503, `unreadable`) and changes nothing.
    let patch = json!({ "display_name": "Renamed" });
    for (method, body) in [(Method::GET, None), (Method::PATCH, Some(patch))] {
        let (status, got) = send(&app, method, "/tenants/later", body).await;
        assert_eq!(status, 503, "{got}");
        assert_eq!(got["error"]["code"], "unreadable", "{got}");
    }

    // The protected tenant serves its metadata; both tenants read, update and keep the fields.
    let metadata = app
        .http
        .get(format!(
            "{}/.well-known/oauth-protected-resource/t/guarded/mcp",
            app.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(metadata.status(), 200);
    for slug in ["open", "guarded"] {
        let (status, got) = send(&app, Method::GET, &format!("/tenants/{slug}"), None).await;
        assert_eq!(status, 200, "{got}");
        assert!(got["limits"].get("max_tools").is_none(), "{got}");
        let (status, got) = send(
            &app,
            Method::PATCH,
            &format!("/tenants/{slug}"),
            Some(json!({ "display_name": "Renamed" })),
        )
        .await;
        assert_eq!((status, &got["display_name"]), (200, &json!("Renamed")));
    }
    // The file the second server runs on is the first's.
    let db = first.database().await;
    let kept: (String, String, String) = sqlx::query_as(
        "SELECT (SELECT limits FROM tenants WHERE slug = 'open'), \
         (SELECT auth FROM tenants WHERE slug = 'guarded'), \
         (SELECT catalogs FROM tenants WHERE slug = 'open')",
    )
    .fetch_one(&db)
    .await
    .unwrap();
    let limits: Value = serde_json::from_str(&kept.0).unwrap();
    let auth: Value = serde_json::from_str(&kept.1).unwrap();
    assert_eq!(limits["max_tools"], 7, "{limits}");
    assert_eq!(auth["token_ttl_secs"], 600, "{auth}");
    assert_eq!(auth["oidc"]["prompt"], "login", "{auth}");
    assert_eq!(auth["oidc"]["client_id"], "harbor", "{auth}");
    assert_eq!(kept.2, r#"["github"]"#);
    let later: (String, String) =
        sqlx::query_as("SELECT display_name, auth FROM tenants WHERE slug = 'later'")
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!(later.1, r#"{"mode":"saml"}"#);
    assert_ne!(later.0, "Renamed");

    // Deleting it works: the remedy after a rollback.
    let (status, got) = send(&app, Method::DELETE, "/tenants/later", None).await;
    assert_eq!(status, 204, "{got}");
    let (status, _) = send(&app, Method::GET, "/tenants/later", None).await;
    assert_eq!(status, 404);
    let left: (i64,) = sqlx::query_as("SELECT count(*) FROM tenants WHERE slug = 'later'")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(left.0, 0);
    drop(first);
}

/// JSON Schemas whose validation could cost without bound (basic/index.mdx, "Composition-Keyword
/// Resource Use": thirty doubling definitions validate for hours): the admin API refuses them
/// (422 naming the field), and a tool stored with one all the same (before this check, or
/// written into the database) fails its calls at once with a tool error saying why.
#[actix_rt::test]
async fn schemas_that_could_validate_without_bound_are_refused() {
    let first = spawn_app().await;
    first.tenant("acme").catalogs(json!([])).create().await;
    let doubling = crate::helpers::doubling_schema(30);
    let recursive = json!({ "type": "object", "properties": { "next": { "$ref": "#" } } });
    for (field, schema, why) in [
        (
            "input_schema",
            &doubling,
            "expands to more than 2000 subschemas",
        ),
        (
            "output_schema",
            &doubling,
            "expands to more than 2000 subschemas",
        ),
        (
            "input_schema",
            &recursive,
            "recursive schemas are not accepted",
        ),
    ] {
        let tool = json!({ "name": "t", "description": "d", field: schema,
                           "webhook": { "url": "https://x.example/h" } });
        let (status, got) = send(&first, Method::POST, "/tenants/acme/tools", Some(tool)).await;
        assert_eq!(
            (status, &got["error"]["field"]),
            (422, &json!(field)),
            "{got}"
        );
        let message = got["error"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{message}");
    }
    // What stays within the bound is published.
    let fine = json!({ "name": "lookup", "description": "d", "input_schema": crate::helpers::doubling_schema(8),
                       "webhook": { "url": "https://x.example/h" } });
    let (status, got) = send(&first, Method::POST, "/tenants/acme/tools", Some(fine)).await;
    assert_eq!(status, 201, "{got}");

    // The same tool stored with the doubling schema, and a server started on that database.
    let db = first.database().await;
    sqlx::query(
        "UPDATE catalog_entries SET body = json_set(body, '$.input_schema', json(?)) \
         WHERE tenant = 'acme' AND kind = 'tool'",
    )
    .bind(doubling.to_string())
    .execute(&db)
    .await
    .unwrap();
    let app = restarted_on(&first).await;
    let mut c = app.open_session("acme", "2025-11-25", json!({})).await;
    let listed = c.result("tools/list", json!({})).await;
    assert_eq!(listed["tools"][0]["inputSchema"], doubling);
    let called = c
        .result(
            "tools/call",
            json!({ "name": "lookup", "arguments": { "x": 1 } }),
        )
        .await;
    assert_eq!(called["isError"], true, "{called}");
    let text = called["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("its inputSchema expands to more than 2000 subschemas"),
        "{text}"
    );
    drop(first);
}

/// A client's prompt arguments and template variables fill placeholders once: a value holding
/// another placeholder stays as sent (chained, `a` = 200,000 x `{{b}}` and a 1 MB `b` would
/// build 200 GB and take the replica down), and a text that repeats a placeholder renders up to
/// 8 MiB, past which the request is Invalid Params.
#[actix_rt::test]
async fn prompt_and_template_values_fill_placeholders_once_and_within_a_cap() {
    let app = spawn_app().await;
    app.tenant("acme").catalogs(json!([])).create().await;
    let prompt = json!({ "name": "pair", "description": "d",
        "arguments": [{ "name": "a", "required": true }, { "name": "b" }],
        "messages": [{ "role": "user", "text": "a={{a}}" }, { "role": "user", "text": "{{b}}{{b}}{{b}}{{b}}{{b}}{{b}}{{b}}{{b}}{{b}}" }] });
    let template = json!({ "name": "page", "uri_template": "docs://pages/{a}/{b}", "mime_type": "text/plain",
        "resolver": { "type": "text", "text": "{a} then {b}" } });
    for (kind, entry) in [("prompts", prompt), ("resource-templates", template)] {
        let path = format!("/tenants/acme/{kind}");
        let (status, body) = send(&app, Method::POST, &path, Some(entry)).await;
        assert_eq!(status, 201, "{body}");
    }
    let mut c = app.open_session("acme", "2025-11-25", json!({})).await;

    let chained = "{{b}}".repeat(1000);
    let got = c
        .result(
            "prompts/get",
            json!({ "name": "pair", "arguments": { "a": chained, "b": "xyz" } }),
        )
        .await;
    assert_eq!(
        got["messages"][0]["content"]["text"],
        format!("a={chained}")
    );
    assert_eq!(got["messages"][1]["content"]["text"], "xyz".repeat(9));
    let read = c
        .result(
            "resources/read",
            json!({ "uri": "docs://pages/%7Bb%7D%7Bb%7D/zz" }),
        )
        .await;
    assert_eq!(read["contents"][0]["text"], "{b}{b} then zz");

    // Nine copies of a 1 MiB argument: over the cap, refused; eight fit.
    let big = "z".repeat(1024 * 1024);
    let (refused, _) = c
        .call(
            "prompts/get",
            json!({ "name": "pair", "arguments": { "a": "", "b": big } }),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{}", refused["error"]);
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("would exceed 8 MiB"), "{message}");
    let (fits, _) = c
        .call(
            "prompts/get",
            json!({ "name": "pair", "arguments": { "a": "", "b": "z".repeat(900 * 1024) } }),
        )
        .await;
    assert_eq!(
        fits["result"]["messages"][1]["content"]["text"]
            .as_str()
            .map(str::len),
        Some(9 * 900 * 1024)
    );
}
