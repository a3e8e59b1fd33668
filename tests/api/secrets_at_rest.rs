//! Secrets at rest, against SQLite and (when reachable) PostgreSQL: after a tenant with OAuth, an
//! upstream OpenID client secret, webhook tools and an elicited secret was set up, no text or
//! blob column of any table (nor, for SQLite, any byte of the file) holds a secret in clear.
//! Rotation: values sealed under key A are re-sealed under B by the job while the server runs,
//! a webhook secret stored in clear by an older version is sealed too, and a server configured
//! with B alone still signs webhook calls and issues working tokens; a sealed value moved to
//! another tool is refused with a clear error that holds no secret.

use crate::helpers::db;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::helpers::{spawn_app_with, SseReader, TestApp};
use actix_web::{web, HttpRequest, HttpResponse};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use mcp_harbor::auth::seal::purpose;
use mcp_harbor::auth::Sealer;
use parking_lot::Mutex;
use reqwest::Method;
use serde_json::{json, Value};
use sqlx::Row;

const KNOWN_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const LEGACY_SECRET: &str = "whsec_TGVnYWN5U2VjcmV0S2V5QmVmb3JlU2VhbGluZzE=";
const OIDC_SECRET: &str = "upstream-client-secret-7c1f0e9a";
const ELICITED: &str = "ghp_ElicitedTokenValue_5151515151";
const UPSTREAM_KEY: &str = "upstream-api-key-4b8d2e6f0a1c3e5d";

/// The webhook endpoint: checks every call's signature with the secret registered for its path.
#[derive(Default)]
struct Endpoint {
    secrets: Mutex<HashMap<String, String>>,
}

async fn hook(req: HttpRequest, body: web::Bytes, state: web::Data<Arc<Endpoint>>) -> HttpResponse {
    let secret = state.secrets.lock().get(req.path()).cloned();
    if secret.is_none_or(|s| crate::helpers::webhook::verify(&s, &req, &body).is_err()) {
        return HttpResponse::Unauthorized().body("bad signature");
    }
    let call: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if req.path() == "/secret" && call["round"] == 1 {
        return HttpResponse::Ok().json(json!({ "input_request": { "type": "secret",
            "name": "github_token", "message": "Paste a token." }, "state": null }));
    }
    HttpResponse::Ok().json(json!({ "content": [{ "type": "text", "text": "signed ok" }] }))
}

async fn start_endpoint() -> (String, Arc<Endpoint>) {
    let state = Arc::new(Endpoint::default());
    (
        crate::helpers::webhook::serve(state.clone(), hook).await,
        state,
    )
}

/// A database for one test: an SQLite file, or a fresh PostgreSQL database.
struct Db {
    url: String,
    sqlite_dir: Option<tempfile::TempDir>,
}

impl Db {
    fn sqlite() -> Db {
        let (url, dir) = db::sqlite_url();
        Db {
            url,
            sqlite_dir: Some(dir),
        }
    }

    async fn postgres() -> Option<Db> {
        Some(Db {
            url: db::postgres_url().await?,
            sqlite_dir: None,
        })
    }

    async fn pool(&self) -> sqlx::AnyPool {
        sqlx::any::install_default_drivers();
        sqlx::any::AnyPoolOptions::new()
            .max_connections(1)
            .connect(&self.url)
            .await
            .unwrap()
    }

    /// Every text and blob value of every table, as bytes, and with `files` every byte of an
    /// SQLite database's files (SQLite keeps overwritten page contents in its write-ahead log and
    /// free pages, so the files are only checked where no secret was ever written in clear).
    async fn raw_values(&self, files: bool) -> Vec<Vec<u8>> {
        let pool = self.pool().await;
        let sqlite = self.sqlite_dir.is_some();
        let columns: Vec<(String, String)> = if sqlite {
            sqlx::query(
                "SELECT m.name AS t, p.name AS c FROM sqlite_master m, pragma_table_info(m.name) p \
                 WHERE m.type = 'table'",
            )
        } else {
            sqlx::query(
                "SELECT table_name::text AS t, column_name::text AS c FROM information_schema.columns \
                 WHERE table_schema = 'public'",
            )
        }
        .fetch_all(&pool)
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get("t"), r.get("c")))
        .collect();
        assert!(columns.iter().any(|(t, _)| t == "catalog_entries"));
        let mut values = Vec::new();
        for (table, column) in &columns {
            let cast = if sqlite { "BLOB" } else { "TEXT" };
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT CAST(\"{column}\" AS {cast}) AS v FROM \"{table}\""
            )))
            .fetch_all(&pool)
            .await
            .unwrap();
            for row in rows {
                let v: Option<Vec<u8>> = if sqlite {
                    row.get("v")
                } else {
                    row.get::<Option<String>, _>("v").map(String::into_bytes)
                };
                values.extend(v);
            }
        }
        pool.close().await;
        if let Some(dir) = self.sqlite_dir.as_ref().filter(|_| files) {
            for entry in std::fs::read_dir(dir.path()).unwrap() {
                values.push(std::fs::read(entry.unwrap().path()).unwrap());
            }
        }
        values
    }

    async fn drop(self) {
        if self.sqlite_dir.is_none() {
            db::drop_postgres(&self.url).await;
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Asserts that no stored value (nor, with `files`, any byte of an SQLite file) holds any of
/// `secrets` (named for the message).
async fn assert_nothing_in_clear(db: &Db, files: bool, secrets: &[(&str, Vec<u8>)]) {
    let values = db.raw_values(files).await;
    assert!(values.len() > 20, "the database was read: {}", values.len());
    for (name, secret) in secrets {
        assert!(secret.len() >= 16, "{name} is a real secret");
        assert!(
            !values.iter().any(|v| contains(v, secret)),
            "{name} is stored in clear"
        );
    }
}

/// The ways binary key material could be written as text (and its raw bytes).
fn encodings(name: &'static str, bytes: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    vec![
        (name, bytes.to_vec()),
        (name, STANDARD.encode(bytes).into_bytes()),
        (name, URL_SAFE_NO_PAD.encode(bytes).into_bytes()),
        (name, hex.into_bytes()),
    ]
}

async fn spawn(db: &Db, keys: &[&str]) -> TestApp {
    let (url, keys): (String, Vec<String>) =
        (db.url.clone(), keys.iter().map(|k| k.to_string()).collect());
    spawn_app_with(move |c| {
        c.storage.database_url = url;
        c.auth.sealing_keys = keys.into_iter().map(secrecy::SecretString::from).collect();
    })
    .await
}

async fn admin(app: &TestApp, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut r = app.admin(method, path);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Tenant `acme` (oauth, with a confidential client), `fed` (sign-in at an OpenID provider whose
/// client secret is sealed) and `open` (webhook tools `known`, `generated` and `deploy`); the
/// secrets the API handed out.
struct Setup {
    client_id: String,
    client_secret: String,
    generated_secret: String,
}

async fn set_up(app: &TestApp, base: &str, endpoint: &Endpoint) -> Setup {
    for (slug, auth) in [
        ("acme", json!({ "mode": "oauth" })),
        (
            "fed",
            json!({ "mode": "oauth", "login": "oidc", "oidc": { "issuer": "http://127.0.0.1:9/idp",
                "client_id": "harbor", "client_secret": OIDC_SECRET } }),
        ),
        ("open", json!({ "mode": "none" })),
    ] {
        let (status, body) = admin(
            app,
            Method::POST,
            "/tenants",
            Some(json!({ "slug": slug, "auth": auth })),
        )
        .await;
        assert_eq!(status, 201, "{body}");
        assert!(!body.to_string().contains(OIDC_SECRET));
    }
    let (status, client) = admin(
        app,
        Method::POST,
        "/tenants/acme/oauth-clients",
        Some(
            json!({ "client_name": "Batch", "grant_types": ["client_credentials"],
            "token_endpoint_auth_method": "client_secret_basic" }),
        ),
    )
    .await;
    assert_eq!(status, 201, "{client}");
    let tool = |name: &str, path: &str, secret: Option<&str>| {
        let mut webhook = json!({ "url": format!("{base}{path}"), "timeout_ms": 5000 });
        if let Some(s) = secret {
            webhook["secret"] = json!(s);
        }
        json!({ "name": name, "description": "a webhook tool", "webhook": webhook })
    };
    let (status, known) = admin(
        app,
        Method::POST,
        "/tenants/open/tools",
        Some(tool("known", "/known", Some(KNOWN_SECRET))),
    )
    .await;
    assert_eq!(
        (status, known["webhook"]["secret"].as_str()),
        (201, Some(KNOWN_SECRET))
    );
    let (status, generated) = admin(
        app,
        Method::POST,
        "/tenants/open/tools",
        Some(tool("generated", "/generated", None)),
    )
    .await;
    assert_eq!(status, 201);
    let generated_secret = generated["webhook"]["secret"].as_str().unwrap().to_string();
    assert!(generated_secret.starts_with("whsec_") && generated_secret.len() > 40);
    let (status, _) = admin(
        app,
        Method::POST,
        "/tenants/open/tools",
        Some(tool("deploy", "/secret", Some(KNOWN_SECRET))),
    )
    .await;
    assert_eq!(status, 201);
    // An upstream MCP server's static credentials (it answers nothing: only the sealing counts).
    let (status, upstream) = admin(
        app,
        Method::PUT,
        "/tenants/open/upstreams/up",
        Some(
            json!({ "name": "up", "url": format!("{base}/no-mcp-here"), "timeout_ms": 1000,
            "auth": { "type": "headers", "headers": { "X-Api-Key": UPSTREAM_KEY } } }),
        ),
    )
    .await;
    assert_eq!(status, 201, "{upstream}");
    assert!(!upstream.to_string().contains(UPSTREAM_KEY));
    // Shown once: reading the tool back shows no secret.
    let (_, shown) = admin(app, Method::GET, "/tenants/open/tools/known", None).await;
    assert_eq!(shown["webhook"]["secret"], "whsec_…");
    assert!(shown["webhook"].get("secret_sealed").is_none(), "{shown}");
    let mut secrets = endpoint.secrets.lock();
    secrets.insert("/known".into(), KNOWN_SECRET.into());
    secrets.insert("/secret".into(), KNOWN_SECRET.into());
    secrets.insert("/generated".into(), generated_secret.clone());
    drop(secrets);
    Setup {
        client_id: client["client_id"].as_str().unwrap().to_string(),
        client_secret: client["client_secret"].as_str().unwrap().to_string(),
        generated_secret,
    }
}

/// An access token for `acme` by client_credentials (signed with acme's private key).
async fn access_token(app: &TestApp, s: &Setup) -> String {
    let r = app
        .http
        .post(format!("{}/t/acme/oauth/token", app.base))
        .basic_auth(&s.client_id, Some(&s.client_secret))
        .form(&[("grant_type", "client_credentials")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let tokens: Value = r.json().await.unwrap();
    tokens["access_token"].as_str().unwrap().to_string()
}

/// Whether `token` opens an MCP session at `acme`.
async fn token_works(app: &TestApp, token: &str) -> bool {
    let r = app
        .post(
            "acme",
            None,
            &crate::helpers::initialize_body("2025-06-18", json!({})),
        )
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    r.status() == 200
}

/// Calls an `open` tool: its result.
async fn call(app: &TestApp, tool: &str) -> Value {
    let mut c = app.open_session("open", "2025-06-18", json!({})).await;
    c.result("tools/call", json!({ "name": tool, "arguments": {} }))
        .await
}

fn signed_ok(result: &Value) -> bool {
    result["isError"] != true && result["content"][0]["text"] == "signed ok"
}

/// A secret the `deploy` tool asked for, entered on the page and left waiting (sealed) in the
/// database: the call that asked is cancelled before the user submits.
async fn elicit_a_secret(app: &TestApp) {
    let c = app
        .open_session(
            "open",
            "2025-11-25",
            json!({ "elicitation": { "url": {} } }),
        )
        .await;
    let resp = c
        .send(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": { "name": "deploy", "arguments": {} } }))
        .await;
    let mut sse = SseReader::new(resp);
    let request = loop {
        let m = sse
            .next_event(Duration::from_secs(10))
            .await
            .expect("a message");
        if let Some(m) = m.json().filter(|m| m["method"] == "elicitation/create") {
            break m;
        }
    };
    let url = request["params"]["url"].as_str().unwrap().to_string();
    let r = c
        .send(&json!({ "jsonrpc": "2.0", "id": request["id"], "result": { "action": "accept" } }))
        .await;
    assert_eq!(r.status(), 202);
    let r = c
        .send(&json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 1 } }))
        .await;
    assert_eq!(r.status(), 202);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (csrf, cookie, _) = crate::helpers::open_elicitation_page(app, &url).await;
    let r = crate::helpers::post_form(
        app,
        &url,
        &cookie,
        &[
            ("csrf", &csrf),
            ("secret", ELICITED),
            ("decision", "submit"),
        ],
    )
    .await;
    assert_eq!(r.status(), 200);
}

/// Every stored signing key of `acme`, opened with `sealer` (the test knows the keys).
async fn private_keys(db: &Db, sealer: &Sealer) -> Vec<Vec<u8>> {
    let pool = db.pool().await;
    let rows = sqlx::query("SELECT tenant, kid, private_key FROM oauth_signing_keys")
        .fetch_all(&pool)
        .await
        .unwrap();
    pool.close().await;
    assert!(!rows.is_empty(), "a signing key was made");
    rows.iter()
        .map(|r| {
            let (tenant, kid, sealed): (String, String, String) =
                (r.get("tenant"), r.get("kid"), r.get("private_key"));
            sealer
                .open(&purpose::signing_key(&tenant, &kid), &sealed)
                .unwrap()
        })
        .collect()
}

async fn no_secret_in_clear(db: Db) {
    let key = Sealer::generate_spec("a");
    let (base, endpoint) = start_endpoint().await;
    let app = spawn(&db, &[&key]).await;
    let setup = set_up(&app, &base, &endpoint).await;
    let token = access_token(&app, &setup).await;
    assert!(token_works(&app, &token).await);
    assert!(signed_ok(&call(&app, "known").await));
    assert!(signed_ok(&call(&app, "generated").await));
    elicit_a_secret(&app).await;
    let (_, e) = admin(
        &app,
        Method::GET,
        "/tenants/open/elicitations?status=completed",
        None,
    )
    .await;
    assert_eq!(e["items"][0]["secret_waiting"], true, "{e}");

    let sealer = Sealer::from_specs(&[&key]).unwrap();
    let mut secrets = vec![
        (
            "a webhook secret",
            KNOWN_SECRET
                .trim_start_matches("whsec_")
                .as_bytes()
                .to_vec(),
        ),
        (
            "a generated webhook secret",
            setup.generated_secret.as_bytes()["whsec_".len()..].to_vec(),
        ),
        (
            "the upstream client secret",
            OIDC_SECRET.as_bytes().to_vec(),
        ),
        ("an elicited secret", ELICITED.as_bytes().to_vec()),
        (
            "an upstream's static header",
            UPSTREAM_KEY.as_bytes().to_vec(),
        ),
        ("a client secret", setup.client_secret.as_bytes().to_vec()),
        ("an access token", token.as_bytes().to_vec()),
        (
            "the admin token",
            crate::helpers::ADMIN_TOKEN.as_bytes().to_vec(),
        ),
    ];
    for der in private_keys(&db, &sealer).await {
        secrets.extend(encodings("private key material", &der));
    }
    assert_nothing_in_clear(&db, true, &secrets).await;
    app.handle.stop(false).await;
    db.drop().await;
}

#[actix_rt::test]
async fn no_secret_is_stored_in_clear_sqlite() {
    no_secret_in_clear(Db::sqlite()).await;
}

#[actix_rt::test]
async fn no_secret_is_stored_in_clear_postgres() {
    if let Some(db) = Db::postgres().await {
        no_secret_in_clear(db).await;
    }
}

/// `GET /sealing-keys`: key id → values, and what is in clear.
async fn usage(app: &TestApp) -> (HashMap<String, u64>, u64, Value) {
    let (status, body) = admin(app, Method::GET, "/sealing-keys", None).await;
    assert_eq!(status, 200, "{body}");
    let counts = body["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["id"].as_str().unwrap().to_string(),
                k["values"].as_u64().unwrap(),
            )
        })
        .collect();
    (counts, body["in_clear"].as_u64().unwrap(), body)
}

/// Starts the job and waits (bounded) for it to finish: its status.
async fn rotate(app: &TestApp) -> Value {
    let (status, started) = admin(app, Method::POST, "/sealing-keys/rotate", None).await;
    assert_eq!(status, 202, "{started}");
    for _ in 0..200 {
        let (_, _, body) = usage(app).await;
        if body["rotation"]["state"] != "running" {
            return body["rotation"].clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the rotation did not finish within 10 s");
}

/// Every stored text naming a key, per key id.
async fn sealed_under(db: &Db, id: &str) -> usize {
    let needle = format!("v1.{id}.");
    db.raw_values(false)
        .await
        .iter()
        .filter(|v| contains(v, needle.as_bytes()))
        .count()
}

async fn rotation(db: Db) {
    let (a, b) = (Sealer::generate_spec("a"), Sealer::generate_spec("b"));
    let (base, endpoint) = start_endpoint().await;

    // Under key A: signing key, upstream client secret, webhook secrets, an elicited secret.
    let app = spawn(&db, &[&a]).await;
    let setup = set_up(&app, &base, &endpoint).await;
    assert!(token_works(&app, &access_token(&app, &setup).await).await);
    elicit_a_secret(&app).await;
    app.handle.stop(false).await;

    // A tool stored by a version that kept webhook secrets in clear.
    endpoint
        .secrets
        .lock()
        .insert("/legacy".into(), LEGACY_SECRET.into());
    let pool = db.pool().await;
    let legacy = json!({ "name": "legacy", "description": "stored in clear", "input_schema": { "type": "object" },
        "webhook": { "url": format!("{base}/legacy"), "secret": LEGACY_SECRET } });
    sqlx::query("INSERT INTO catalog_entries (tenant, kind, name, body, created_at, updated_at) VALUES ('open', 'tool', 'legacy', $1, 0, 0)")
        .bind(legacy.to_string())
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;

    // B first, A still there: everything opens; the legacy secret works as it is.
    let app = spawn(&db, &[&b, &a]).await;
    let (counts, in_clear, _) = usage(&app).await;
    // 1 signing key + 1 upstream client secret + 3 webhook secrets + 1 elicited secret + 1
    // upstream server's headers.
    assert_eq!(
        (counts["a"], counts["b"], in_clear),
        (7, 0, 1),
        "{counts:?}"
    );
    assert!(signed_ok(&call(&app, "legacy").await));
    assert!(signed_ok(&call(&app, "known").await));
    let job = rotate(&app).await;
    assert_eq!(job["state"], "finished", "{job}");
    assert_eq!(
        (job["resealed"].as_u64(), job["failed"].as_u64()),
        (Some(8), Some(0)),
        "{job}"
    );
    let (counts, in_clear, _) = usage(&app).await;
    assert_eq!(
        (counts["a"], counts["b"], in_clear),
        (0, 8, 0),
        "{counts:?}"
    );
    assert_eq!(sealed_under(&db, "a").await, 0);
    assert!(sealed_under(&db, "b").await >= 8);
    assert_nothing_in_clear(
        &db,
        false,
        &[(
            "the legacy webhook secret",
            LEGACY_SECRET.as_bytes()[6..].to_vec(),
        )],
    )
    .await;
    // Idempotent: a second run finds nothing to do.
    let again = rotate(&app).await;
    assert_eq!(
        (again["resealed"].as_u64(), again["failed"].as_u64()),
        (Some(0), Some(0)),
        "{again}"
    );
    app.handle.stop(false).await;

    // B alone: webhook calls are signed right, tokens are issued.
    let app = spawn(&db, &[&b]).await;
    for tool in ["known", "generated", "legacy"] {
        let result = call(&app, tool).await;
        assert!(signed_ok(&result), "{tool}: {result}");
    }
    // The signing key made under A signs (the listener's port, hence the audience, changed).
    let token = access_token(&app, &setup).await;
    assert!(token_works(&app, &token).await);
    let (_, e) = admin(
        &app,
        Method::GET,
        "/tenants/open/elicitations?status=completed",
        None,
    )
    .await;
    assert_eq!(e["items"][0]["secret_waiting"], true, "{e}");
    app.handle.stop(false).await;

    // A sealed secret moved to another tool (or tenant) does not open there: the call says so,
    // without the secret, and the job reports it without touching it.
    let pool = db.pool().await;
    let body: String =
        sqlx::query("SELECT body FROM catalog_entries WHERE tenant = 'open' AND name = 'known'")
            .fetch_one(&pool)
            .await
            .unwrap()
            .get("body");
    let moved: Value = serde_json::from_str(&body).unwrap();
    let generated: String = sqlx::query(
        "SELECT body FROM catalog_entries WHERE tenant = 'open' AND name = 'generated'",
    )
    .fetch_one(&pool)
    .await
    .unwrap()
    .get("body");
    let mut generated: Value = serde_json::from_str(&generated).unwrap();
    generated["webhook"]["secret_sealed"] = moved["webhook"]["secret_sealed"].clone();
    sqlx::query(
        "UPDATE catalog_entries SET body = $1 WHERE tenant = 'open' AND name = 'generated'",
    )
    .bind(generated.to_string())
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let app = spawn(&db, &[&b]).await;
    let result = call(&app, "generated").await;
    let text = result["content"][0]["text"].as_str().unwrap_or("");
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        text.contains("signing secret cannot be opened") && text.contains("failed authentication"),
        "{text}"
    );
    for secret in [KNOWN_SECRET, &setup.generated_secret] {
        assert!(!text.contains(&secret["whsec_".len()..]), "{text}");
    }
    assert!(signed_ok(&call(&app, "known").await));
    let job = rotate(&app).await;
    assert_eq!(job["failed"], 1, "{job}");
    assert_eq!(job["failures"][0]["column"], "webhook_secrets");
    assert_eq!(job["failures"][0]["id"], "generated");
    assert!(!job.to_string().contains(&KNOWN_SECRET[6..]));
    app.handle.stop(false).await;
    db.drop().await;
}

#[actix_rt::test]
async fn rotation_reseals_everything_and_the_old_key_can_go_sqlite() {
    rotation(Db::sqlite()).await;
}

#[actix_rt::test]
async fn rotation_reseals_everything_and_the_old_key_can_go_postgres() {
    if let Some(db) = Db::postgres().await {
        rotation(db).await;
    }
}

#[test]
fn debug_output_shows_no_secret() {
    use mcp_harbor::catalog::stored::{StoredWebhook, ToolDef};
    use mcp_harbor::tools::webhook::WebhookTarget;
    let sealer = Sealer::from_specs(&[Sealer::generate_spec("a")]).unwrap();
    let secret = secrecy::SecretString::from(KNOWN_SECRET.to_string());
    let stored = StoredWebhook::sealed(
        &sealer,
        "t",
        "x",
        "https://h.example/".into(),
        &secret,
        None,
    );
    let target: WebhookTarget = stored.open(&sealer, "t", "x").unwrap();
    let legacy: ToolDef = serde_json::from_value(json!({ "name": "x", "description": "d",
        "input_schema": { "type": "object" }, "webhook": { "url": "https://h.example/", "secret": KNOWN_SECRET } }))
    .unwrap();
    let shown = format!("{stored:?} {target:?} {legacy:?} {sealer:?}");
    assert!(!shown.contains(&KNOWN_SECRET[6..]), "{shown}");
    // The wrong tool or tenant does not open it; the error holds no secret.
    let e = stored.open(&sealer, "t", "y").unwrap_err().to_string();
    assert!(
        e.contains("failed authentication") && !e.contains(&KNOWN_SECRET[6..]),
        "{e}"
    );
    assert!(stored.open(&sealer, "u", "x").is_err());
}

/// The job's write-back is a compare-and-set: a value written by someone else (an admin update on
/// another replica) after the job read it is not overwritten.
async fn concurrent_writes_win(db: Db) {
    use mcp_harbor::store::{
        CatalogEntry, CatalogKind, CatalogStore, SealedColumn, SealedValueStore, SqlStore,
        TenantRecord, TenantStatus, TenantStore,
    };
    let store = SqlStore::connect(&db.url, 2).await.unwrap();
    store.migrate().await.unwrap();
    store
        .insert_tenant(&TenantRecord {
            slug: "acme".into(),
            display_name: "Acme".into(),
            status: TenantStatus::Active,
            catalogs: vec![],
            limits: Default::default(),
            auth: mcp_harbor::store::TenantAuth::None,
            created_at: 0,
            updated_at: 0,
        })
        .await
        .unwrap();
    let entry = |body: Value| CatalogEntry {
        tenant: "acme".into(),
        kind: CatalogKind::Tool,
        name: "hook".into(),
        body,
        created_at: 0,
        updated_at: 0,
    };
    store
        .insert_entry(&entry(json!({ "v": "read by the job" })))
        .await
        .unwrap();
    let rows = store
        .sealed_rows(SealedColumn::WebhookSecrets, None, 10)
        .await
        .unwrap();
    assert_eq!((rows.len(), rows[0].id.as_str()), (1, "hook"));
    store
        .replace_entry(&entry(json!({ "v": "written meanwhile" })), 0)
        .await
        .unwrap();
    let replaced = store
        .replace_sealed(
            SealedColumn::WebhookSecrets,
            &rows[0],
            "{\"v\":\"the job's\"}",
        )
        .await
        .unwrap();
    assert!(!replaced, "a stale read does not overwrite");
    let now = store
        .get_entry("acme", CatalogKind::Tool, "hook")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(now.body, json!({ "v": "written meanwhile" }));
    // Read again, the write goes through; pages continue after the last key.
    let rows = store
        .sealed_rows(SealedColumn::WebhookSecrets, None, 10)
        .await
        .unwrap();
    assert!(store
        .replace_sealed(
            SealedColumn::WebhookSecrets,
            &rows[0],
            "{\"v\":\"the job's\"}"
        )
        .await
        .unwrap());
    // Re-sealing gives the entry a later revision: an admin write that read it before the job
    // (revision 0) fails its own compare-and-set instead of putting the old sealing back.
    let resealed = store
        .get_entry("acme", CatalogKind::Tool, "hook")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resealed.updated_at, 1);
    assert!(!store
        .replace_entry(&entry(json!({ "v": "read before the job" })), 0)
        .await
        .unwrap());
    assert_eq!(
        store
            .get_entry("acme", CatalogKind::Tool, "hook")
            .await
            .unwrap()
            .unwrap()
            .body,
        json!({ "v": "the job's" })
    );
    let after = store
        .sealed_rows(SealedColumn::WebhookSecrets, Some(("acme", "hook")), 10)
        .await
        .unwrap();
    assert!(after.is_empty());
    store.close().await;
    db.drop().await;
}

#[actix_rt::test]
async fn concurrent_writes_win_over_the_job_sqlite() {
    concurrent_writes_win(Db::sqlite()).await;
}

#[actix_rt::test]
async fn concurrent_writes_win_over_the_job_postgres() {
    if let Some(db) = Db::postgres().await {
        concurrent_writes_win(db).await;
    }
}
