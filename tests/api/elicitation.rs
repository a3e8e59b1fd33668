//! URL-mode elicitation over real HTTP: a webhook tool asks for a secret, the client gets
//! `elicitation/create` (mode `url`), the user submits the platform's page, the session gets
//! `notifications/elicitation/complete` and the endpoint the secret. Also: capability checks,
//! decline (in the client and on the page), expiry, the URL-elicitation-required error and a
//! retried call, cross-tenant 404s, the admin API, and a raw look at the database.

use std::sync::Arc;
use std::time::Duration;

use crate::helpers::{spawn_app, spawn_app_with, Client, SseReader, TestApp};
use actix_web::{web, HttpResponse};
use parking_lot::Mutex;
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::webhook::SECRET;
const TOKEN: &str = "ghp_TopSecretValue_4242424242";

/// What the endpoint saw: the `input` of every round after the first.
#[derive(Default)]
struct Endpoint {
    inputs: Mutex<Vec<Value>>,
}

async fn hook(
    body: web::Bytes,
    state: web::Data<Arc<Endpoint>>,
    req: actix_web::HttpRequest,
) -> HttpResponse {
    let call: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if call["round"] == 1 {
        let request = if req.path() == "/form" {
            json!({ "type": "elicitation", "message": "Which project?", "requested_schema": { "type": "object", "properties": { "p": { "type": "string" } } } })
        } else {
            json!({ "type": "secret", "name": "github_token", "message": "Paste a GitHub token with repo scope." })
        };
        return HttpResponse::Ok()
            .json(json!({ "input_request": request, "state": { "step": 1 } }));
    }
    let input = call["input"].clone();
    state.inputs.lock().push(input.clone());
    let text = match (input["action"].as_str(), input["secret"].as_str()) {
        (Some("accept"), Some(secret)) => {
            format!("deployed with a {}-character token", secret.len())
        }
        (Some(action), _) => format!(
            "no token: {action} {}",
            input["reason"].as_str().unwrap_or("")
        ),
        _ => format!("no token: error {}", input["error"]["code"]),
    };
    HttpResponse::Ok().json(json!({ "content": [{ "type": "text", "text": text.trim_end() }], "isError": !text.starts_with("deployed") }))
}

async fn start_endpoint() -> (String, Arc<Endpoint>) {
    let state = Arc::new(Endpoint::default());
    (
        crate::helpers::webhook::serve(state.clone(), hook).await,
        state,
    )
}

async fn tenant_with_tool(app: &TestApp, tenant: &str, base: &str, path: &str) {
    let resp = app
        .admin(Method::POST, "/tenants")
        .json(&json!({ "slug": tenant }))
        .send()
        .await
        .unwrap();
    assert!(resp.status() == 201 || resp.status() == 409);
    let tool = json!({ "name": "deploy", "description": "Deploys; needs a GitHub token",
        "input_schema": { "type": "object" },
        "webhook": { "url": format!("{base}{path}"), "secret": SECRET, "timeout_ms": 5000 } });
    let resp = app
        .admin(Method::POST, &format!("/tenants/{tenant}/tools"))
        .json(&tool)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201, "{}", resp.text().await.unwrap());
}

fn call_tool(c: &Client<'_>, id: i64) -> Value {
    let _ = c;
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": { "name": "deploy", "arguments": {} } })
}

/// Starts a call and returns its stream and the `elicitation/create` request it got.
async fn start_call(c: &Client<'_>, id: i64) -> (SseReader, Value) {
    let resp = c.send(&call_tool(c, id)).await;
    assert_eq!(resp.status(), 200);
    let mut sse = SseReader::new(resp);
    let request = sse.next_json(Duration::from_secs(10)).await;
    assert_eq!(request["method"], "elicitation/create", "{request}");
    (sse, request)
}

async fn answer(c: &Client<'_>, request: &Value, result: Value) {
    let r = c
        .send(&json!({ "jsonrpc": "2.0", "id": request["id"], "result": result }))
        .await;
    assert_eq!(r.status(), 202);
}

async fn admin_get(app: &TestApp, path: &str) -> Value {
    let resp = app.admin(Method::GET, path).send().await.unwrap();
    assert_eq!(resp.status(), 200, "GET {path}");
    resp.json().await.unwrap()
}

/// Opens the page: its CSRF token (from the form) and cookie.
async fn open_page(app: &TestApp, url: &str) -> (String, String) {
    let (csrf, cookie, html) = crate::helpers::open_elicitation_page(app, url).await;
    assert!(html.contains("Paste a GitHub token with repo scope."));
    (csrf, cookie)
}

async fn submit_secret(app: &TestApp, url: &str, secret: &str) {
    let (csrf, cookie) = open_page(app, url).await;
    let resp = crate::helpers::post_form(
        app,
        url,
        &cookie,
        &[("csrf", &csrf), ("secret", secret), ("decision", "submit")],
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert!(resp.text().await.unwrap().contains("The secret was saved"));
}

fn url_capable() -> Value {
    json!({ "elicitation": { "url": {} } })
}

#[actix_rt::test]
async fn a_secret_goes_from_the_page_to_the_webhook() {
    let app = spawn_app().await;
    let (base, endpoint) = start_endpoint().await;
    tenant_with_tool(&app, "acme", &base, "/secret").await;
    let c = app.open_session("acme", "2025-11-25", url_capable()).await;
    let (mut sse, request) = start_call(&c, 7).await;
    let params = &request["params"];
    assert_eq!(params["mode"], "url");
    assert_eq!(params["message"], "Paste a GitHub token with repo scope.");
    let id = params["elicitationId"].as_str().unwrap().to_string();
    assert!(id.len() >= 43, "an unguessable id: {id}");
    let url = params["url"].as_str().unwrap().to_string();
    assert_eq!(url, format!("{}/t/acme/elicitations/{id}", app.base));
    assert!(params.get("requestedSchema").is_none());
    answer(&c, &request, json!({ "action": "accept" })).await;

    // The page refuses a post without the CSRF cookie, and an empty secret.
    let (csrf, cookie) = open_page(&app, &url).await;
    let r = crate::helpers::post_form(
        &app,
        &url,
        "",
        &[("csrf", &csrf), ("secret", TOKEN), ("decision", "submit")],
    )
    .await;
    assert_eq!(r.status(), 403);
    let r = crate::helpers::post_form(
        &app,
        &url,
        &cookie,
        &[("csrf", &csrf), ("secret", " "), ("decision", "submit")],
    )
    .await;
    assert_eq!(r.status(), 422);
    // Longer than a secret may be but within what the form takes (422), and beyond what the
    // form takes (413): either way a page that says so, not a bare 413 from the form reader.
    for (size, status) in [(20_000, 422), (60_000, 413)] {
        let long = "x".repeat(size);
        let r = crate::helpers::post_form(
            &app,
            &url,
            &cookie,
            &[("csrf", &csrf), ("secret", &long), ("decision", "submit")],
        )
        .await;
        assert_eq!(r.status(), status, "a {size}-byte secret");
        assert!(r.text().await.unwrap().contains("too long for a secret"));
    }
    submit_secret(&app, &url, TOKEN).await;

    let done = sse.next_json(Duration::from_secs(10)).await;
    assert_eq!(done["method"], "notifications/elicitation/complete");
    assert_eq!(done["params"], json!({ "elicitationId": id }));
    let result = sse.next_json(Duration::from_secs(10)).await;
    assert_eq!(result["id"], 7);
    assert_eq!(
        result["result"]["content"][0]["text"],
        format!("deployed with a {}-character token", TOKEN.len())
    );
    let inputs = endpoint.inputs.lock().clone();
    assert_eq!(
        inputs,
        vec![json!({ "action": "accept", "name": "github_token", "secret": TOKEN })]
    );

    // Done: the page says so, the admin view shows it completed with nothing waiting.
    assert_eq!(app.http.get(&url).send().await.unwrap().status(), 410);
    let e: Value = admin_get(&app, &format!("/tenants/acme/elicitations/{id}")).await;
    assert_eq!(e["status"], "completed");
    assert_eq!(e["secret_waiting"], false);
    assert!(!e.to_string().contains(TOKEN));
}

/// Every byte of the embedded database (and its write-ahead log).
fn database_bytes(app: &TestApp) -> Vec<u8> {
    let dir = app.data_dir.as_ref().unwrap().path();
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().contains("mcp-harbor.db") {
            all.extend(std::fs::read(&path).unwrap());
        }
    }
    all
}

#[actix_rt::test]
async fn a_pending_secret_answers_minus_32042_and_a_retry_gets_the_sealed_secret() {
    let app = spawn_app().await;
    let (base, endpoint) = start_endpoint().await;
    tenant_with_tool(&app, "acme", &base, "/secret").await;
    let c = app.open_session("acme", "2025-11-25", url_capable()).await;
    let (_first, request) = start_call(&c, 1).await;
    answer(&c, &request, json!({ "action": "accept" })).await;
    let id = request["params"]["elicitationId"]
        .as_str()
        .unwrap()
        .to_string();
    let url = request["params"]["url"].as_str().unwrap().to_string();

    // A second call needing the same secret cannot proceed until the page is done.
    let resp = c.send(&call_tool(&c, 2)).await;
    let mut sse = SseReader::new(resp);
    let error = sse.next_json(Duration::from_secs(10)).await;
    assert_eq!(error["error"]["code"], -32042, "{error}");
    assert_eq!(
        error["error"]["data"]["elicitations"],
        json!([{ "mode": "url", "elicitationId": id, "url": url, "message": "Paste a GitHub token with repo scope." }])
    );
    // The tenant is open (no user to bind to): the elicitation is bound to the session that
    // asked. Another session's client is asked on a page of its own, never this one's.
    let other = app.open_session("acme", "2025-11-25", url_capable()).await;
    let (_theirs, their_request) = start_call(&other, 1).await;
    assert_ne!(their_request["params"]["elicitationId"], id.as_str());
    assert_ne!(their_request["params"]["url"], url.as_str());
    answer(&other, &their_request, json!({ "action": "decline" })).await;

    // The first call is given up; the user completes the page later.
    let r = c.send(&json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 1 } })).await;
    assert_eq!(r.status(), 202);
    tokio::time::sleep(Duration::from_millis(200)).await;
    submit_secret(&app, &url, TOKEN).await;

    // At rest the secret is sealed: neither the row nor any byte of the database holds it.
    let e: Value = admin_get(&app, &format!("/tenants/acme/elicitations/{id}")).await;
    assert_eq!(
        (e["status"].as_str(), e["secret_waiting"].as_bool()),
        (Some("completed"), Some(true))
    );
    let bytes = database_bytes(&app);
    assert!(!bytes.is_empty());
    assert!(
        !bytes.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
        "the secret is in the database in clear"
    );
    {
        use mcp_harbor::store::{ElicitationStore, SqlStore};
        let dir = app.data_dir.as_ref().unwrap().path();
        let store = SqlStore::connect(&format!("sqlite://{}/mcp-harbor.db", dir.display()), 1)
            .await
            .unwrap();
        let row = store.get_elicitation("acme", &id).await.unwrap().unwrap();
        let sealed = row.secret_sealed.clone().expect("sealed secret stored");
        assert!(sealed.starts_with("v1.") && !sealed.contains(TOKEN));
        assert!(
            !format!("{row:?}").contains(&sealed),
            "Debug never shows the sealed value"
        );
        store.close().await;
    }

    // The retried call gets the secret at once (round 2), and only once.
    let (result, messages) = {
        let resp = c.send(&call_tool(&c, 3)).await;
        crate::helpers::read_answer(resp, 3).await
    };
    assert!(messages.iter().all(|m| m["method"] != "elicitation/create"));
    assert_eq!(
        result["result"]["content"][0]["text"],
        format!("deployed with a {}-character token", TOKEN.len())
    );
    assert_eq!(endpoint.inputs.lock().last().unwrap()["secret"], TOKEN);
    let e: Value = admin_get(&app, &format!("/tenants/acme/elicitations/{id}")).await;
    assert_eq!(e["secret_waiting"], false);
    assert!(!database_bytes(&app)
        .windows(TOKEN.len())
        .any(|w| w == TOKEN.as_bytes()));
}

#[actix_rt::test]
async fn url_and_form_requests_go_only_to_clients_that_declared_the_mode() {
    let app = spawn_app().await;
    let (base, endpoint) = start_endpoint().await;
    tenant_with_tool(&app, "acme", &base, "/secret").await;
    tenant_with_tool(&app, "forms", &base, "/form").await;

    // Form mode only (an empty object): no URL request; the endpoint learns why.
    let c = app
        .open_session("acme", "2025-11-25", json!({ "elicitation": {} }))
        .await;
    let (result, messages) = crate::helpers::read_answer(c.send(&call_tool(&c, 1)).await, 1).await;
    assert!(
        messages.iter().all(|m| m["method"] != "elicitation/create"),
        "{messages:?}"
    );
    assert_eq!(result["result"]["isError"], true);
    assert_eq!(
        endpoint.inputs.lock().last().unwrap()["error"]["code"],
        -32600
    );
    // 2025-06-18 has no URL mode even when a client says so.
    let c = app.open_session("acme", "2025-06-18", url_capable()).await;
    let (_, messages) = crate::helpers::read_answer(c.send(&call_tool(&c, 1)).await, 1).await;
    assert!(messages.iter().all(|m| m["method"] != "elicitation/create"));
    // Nothing was recorded for them.
    let list: Value = admin_get(&app, "/tenants/acme/elicitations?status=all").await;
    assert_eq!(list["items"], json!([]));

    // URL mode only: no form request.
    let c = app.open_session("forms", "2025-11-25", url_capable()).await;
    let (result, messages) = crate::helpers::read_answer(c.send(&call_tool(&c, 1)).await, 1).await;
    assert!(messages.iter().all(|m| m["method"] != "elicitation/create"));
    assert_eq!(result["result"]["isError"], true);
    assert_eq!(
        endpoint.inputs.lock().last().unwrap()["error"]["code"],
        -32600
    );
}

#[actix_rt::test]
async fn declining_in_the_client_or_on_the_page_reaches_the_webhook() {
    let app = spawn_app().await;
    let (base, endpoint) = start_endpoint().await;
    tenant_with_tool(&app, "acme", &base, "/secret").await;
    let c = app.open_session("acme", "2025-11-25", url_capable()).await;

    // The user does not want to open the page.
    let (mut sse, request) = start_call(&c, 1).await;
    answer(&c, &request, json!({ "action": "decline" })).await;
    let result = sse.next_json(Duration::from_secs(10)).await;
    assert_eq!(result["result"]["content"][0]["text"], "no token: decline");
    let id = request["params"]["elicitationId"].as_str().unwrap();
    let e: Value = admin_get(&app, &format!("/tenants/acme/elicitations/{id}")).await;
    assert_eq!(e["status"], "declined");
    let page = request["params"]["url"].as_str().unwrap();
    assert_eq!(app.http.get(page).send().await.unwrap().status(), 410);

    // The user opens the page and presses Decline.
    let (mut sse, request) = start_call(&c, 2).await;
    answer(&c, &request, json!({ "action": "accept" })).await;
    let url = request["params"]["url"].as_str().unwrap();
    let (csrf, cookie) = open_page(&app, url).await;
    let r = crate::helpers::post_form(
        &app,
        url,
        &cookie,
        &[("csrf", &csrf), ("decision", "decline")],
    )
    .await;
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("Declined"));
    let result = sse.next_json(Duration::from_secs(10)).await;
    assert_eq!(result["result"]["content"][0]["text"], "no token: decline");
    assert_eq!(endpoint.inputs.lock().len(), 2);
}

#[actix_rt::test]
async fn an_unanswered_elicitation_expires_and_is_swept() {
    let app = spawn_app_with(|c| c.auth.elicitation_ttl_secs = 1).await;
    let (base, _endpoint) = start_endpoint().await;
    tenant_with_tool(&app, "acme", &base, "/secret").await;
    let c = app.open_session("acme", "2025-11-25", url_capable()).await;
    let (mut sse, request) = start_call(&c, 1).await;
    answer(&c, &request, json!({ "action": "accept" })).await;
    let result = sse.next_json(Duration::from_secs(10)).await;
    assert_eq!(
        result["result"]["content"][0]["text"],
        "no token: cancel expired"
    );
    let url = request["params"]["url"].as_str().unwrap();
    assert_eq!(app.http.get(url).send().await.unwrap().status(), 410);
    // The sweep records it (it runs every second with this TTL).
    let id = request["params"]["elicitationId"].as_str().unwrap();
    let mut swept = false;
    for _ in 0..40 {
        let list: Value = admin_get(&app, "/tenants/acme/elicitations?status=expired").await;
        if list["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["id"] == id)
        {
            swept = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(swept, "the sweep marked it expired");
}

#[actix_rt::test]
async fn admins_list_inspect_and_cancel_and_tenants_are_isolated() {
    let app = spawn_app().await;
    let (base, _endpoint) = start_endpoint().await;
    tenant_with_tool(&app, "acme", &base, "/secret").await;
    tenant_with_tool(&app, "beta", &base, "/secret").await;
    let c = app.open_session("acme", "2025-11-25", url_capable()).await;
    let (mut sse, request) = start_call(&c, 1).await;
    answer(&c, &request, json!({ "action": "accept" })).await;
    let id = request["params"]["elicitationId"]
        .as_str()
        .unwrap()
        .to_string();
    let url = request["params"]["url"].as_str().unwrap().to_string();

    let list: Value = admin_get(&app, "/tenants/acme/elicitations").await;
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    let e = &items[0];
    assert_eq!(
        (
            e["id"].as_str(),
            e["status"].as_str(),
            e["tool"].as_str(),
            e["name"].as_str()
        ),
        (
            Some(id.as_str()),
            Some("pending"),
            Some("deploy"),
            Some("github_token")
        )
    );
    assert_eq!(e["url"], url);
    assert_eq!(e["principal"], Value::Null);
    assert!(e["session"].is_string());
    let bad = app
        .admin(Method::GET, "/tenants/acme/elicitations?status=weird")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 422);

    // Another tenant knows nothing of it: page, admin and cancel are 404.
    let elsewhere = url.replace("/t/acme/", "/t/beta/");
    assert_eq!(app.http.get(&elsewhere).send().await.unwrap().status(), 404);
    assert_eq!(
        app.http
            .get(format!("{}/t/nope/elicitations/{id}", app.base))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        app.http
            .get(format!("{}/t/acme/elicitations/not-an-id", app.base))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    // The page is read and submitted; other methods are 405 with `Allow`.
    for method in [Method::PUT, Method::DELETE, Method::PATCH] {
        let r = app.http.request(method.clone(), &url).send().await.unwrap();
        assert_eq!(r.status(), 405, "{method}");
        assert_eq!(r.headers()["allow"], "GET, POST", "{method}");
    }
    // ... on a tenant that exists: an unknown one is 404 whatever the method.
    let unknown = format!("{}/t/nope/elicitations/{id}", app.base);
    let r = app.http.put(&unknown).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert!(r.headers().get("allow").is_none());
    for method in [Method::GET, Method::DELETE] {
        let r = app
            .admin(method, &format!("/tenants/beta/elicitations/{id}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
    }
    let beta: Value = admin_get(&app, "/tenants/beta/elicitations?status=all").await;
    assert_eq!(beta["items"], json!([]));

    // Cancelling ends the waiting call; the page closes; a second cancel conflicts.
    let r = app
        .admin(Method::DELETE, &format!("/tenants/acme/elicitations/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["status"], "cancelled");
    let result = sse.next_json(Duration::from_secs(10)).await;
    assert_eq!(result["result"]["content"][0]["text"], "no token: cancel");
    assert_eq!(app.http.get(&url).send().await.unwrap().status(), 410);
    let r = app
        .admin(Method::DELETE, &format!("/tenants/acme/elicitations/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let pending: Value = admin_get(&app, "/tenants/acme/elicitations").await;
    assert_eq!(pending["items"], json!([]));
}

/// A stateless (2026-07-28) request: `_meta` and the headers the revision requires.
async fn modern_call(app: &TestApp, tenant: &str, id: i64, extra: Value) -> (u16, Value) {
    let mut params = json!({ "name": "deploy", "arguments": {}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": url_capable() } });
    if let Some(extra) = extra.as_object() {
        for (k, v) in extra {
            params[k] = v.clone();
        }
    }
    let body = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params });
    let resp = app
        .http
        .post(app.mcp_url(tenant))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "deploy")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, crate::helpers::read_answer(resp, id).await.0)
}

/// How many multi round-trip rounds are recorded and not claimed by a running retry (read from
/// the database).
async fn recorded_rounds(app: &TestApp) -> i64 {
    let pool = app.database().await;
    let n = sqlx::query_scalar("SELECT count(*) FROM mrtr_rounds WHERE claimed_until <= ?")
        .bind(crate::helpers::unix_ms())
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    n
}

#[actix_rt::test]
async fn a_stateless_call_gets_its_secret_through_input_required() {
    let app = spawn_app().await;
    let (base, endpoint) = start_endpoint().await;
    tenant_with_tool(&app, "acme", &base, "/secret").await;
    let (status, first) = modern_call(&app, "acme", 1, json!({})).await;
    assert_eq!(status, 200);
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let (key, request) = result["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["mode"], "url");
    assert!(
        request["params"].get("elicitationId").is_none(),
        "2026-07-28 has no elicitation id"
    );
    let url = request["params"]["url"].as_str().unwrap().to_string();
    let retry = json!({ "requestState": result["requestState"], "inputResponses": { key.clone(): { "action": "accept" } } });

    // The user has not used the page yet. 2026-07-28 has no -32042: a new call of the tool is
    // asked for an elicitation, not refused. The tenant is open (no user to bind it to): the
    // elicitation is bound to the call that asked, so another call (perhaps another client)
    // gets a page of its own, never this one's or its secret.
    let (status, again) = modern_call(&app, "acme", 2, json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    let asked: Vec<&Value> = again["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .values()
        .collect();
    assert_eq!(asked.len(), 1, "{again}");
    assert_ne!(asked[0]["params"]["url"], url.as_str());

    // A retry whose client gives up while it waits for the page (its connection closed) leaves
    // the round to be retried: the same retry sent again goes on. Two calls wait for a page,
    // each with its round recorded; the retry claims one while it runs.
    assert_eq!(recorded_rounds(&app).await, 2);
    let gave_up = tokio::time::timeout(
        Duration::from_millis(300),
        modern_call(&app, "acme", 3, retry.clone()),
    )
    .await;
    assert!(
        gave_up.is_err(),
        "the retry waits for the page: {gave_up:?}"
    );
    assert_eq!(
        recorded_rounds(&app).await,
        1,
        "claimed by the waiting retry"
    );
    // The server notices the closed stream at its next heartbeat, drops the call and gives the
    // round back.
    let mut rounds = 1;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        rounds = recorded_rounds(&app).await;
        if rounds == 2 {
            break;
        }
    }
    assert_eq!(rounds, 2, "the dropped retry's round was given back");

    // The retry waits for the page (the revision's URL flow), then completes with the secret,
    // handed to the endpoint once.
    let submitted = std::sync::atomic::AtomicBool::new(false);
    let retried = async {
        let answer = modern_call(&app, "acme", 3, retry.clone()).await;
        (answer, submitted.load(std::sync::atomic::Ordering::SeqCst))
    };
    let page = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        submitted.store(true, std::sync::atomic::Ordering::SeqCst);
        submit_secret(&app, &url, TOKEN).await;
    };
    let (((status, done), after_page), ()) = tokio::join!(retried, page);
    assert!(
        after_page,
        "the retry answered before the page was used: {done}"
    );
    assert_eq!(status, 200);
    assert_eq!(
        done["result"]["content"][0]["text"],
        format!("deployed with a {}-character token", TOKEN.len()),
        "{done}"
    );
    assert_eq!(done["result"]["resultType"], "complete");
    assert_eq!(endpoint.inputs.lock().len(), 1);
    assert!(!database_bytes(&app)
        .windows(TOKEN.len())
        .any(|w| w == TOKEN.as_bytes()));
}
