//! The admin API's OpenAPI document against the real server: every route that `configure()`
//! registers is documented and every documented operation exists, answers with a documented
//! status, and its responses validate against the documented schemas.

use std::collections::{BTreeMap, BTreeSet};

use crate::helpers::{spawn_app, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

/// The routes `mcp_harbor::admin::configure()` registers under `/admin/v1`, as written there
/// ([`KIND`] is one of [`KINDS`]). `configure_source_matches_the_route_list` keeps this in step.
const ROUTES: &[(&str, &str)] = &[
    ("GET", "/openapi.json"),
    ("GET", "/sealing-keys"),
    ("POST", "/sealing-keys/rotate"),
    ("POST", "/tenants"),
    ("GET", "/tenants"),
    ("GET", "/tenants/{slug}"),
    ("PATCH", "/tenants/{slug}"),
    ("DELETE", "/tenants/{slug}"),
    ("POST", "/tenants/{slug}/users"),
    ("GET", "/tenants/{slug}/users"),
    ("GET", "/tenants/{slug}/users/{username}"),
    ("PATCH", "/tenants/{slug}/users/{username}"),
    ("DELETE", "/tenants/{slug}/users/{username}"),
    ("POST", "/tenants/{slug}/oauth-clients"),
    ("GET", "/tenants/{slug}/oauth-clients"),
    ("GET", "/tenants/{slug}/oauth-clients/{client_id}"),
    ("DELETE", "/tenants/{slug}/oauth-clients/{client_id}"),
    ("GET", "/tenants/{slug}/signing-keys"),
    ("POST", "/tenants/{slug}/signing-keys"),
    ("GET", "/tenants/{slug}/elicitations"),
    ("GET", "/tenants/{slug}/elicitations/{id}"),
    ("DELETE", "/tenants/{slug}/elicitations/{id}"),
    (
        "POST",
        "/tenants/{slug}/{kind:tools|prompts|resources|resource-templates}",
    ),
    (
        "GET",
        "/tenants/{slug}/{kind:tools|prompts|resources|resource-templates}",
    ),
    (
        "GET",
        "/tenants/{slug}/{kind:tools|prompts|resources|resource-templates}/{name}",
    ),
    (
        "PUT",
        "/tenants/{slug}/{kind:tools|prompts|resources|resource-templates}/{name}",
    ),
    (
        "DELETE",
        "/tenants/{slug}/{kind:tools|prompts|resources|resource-templates}/{name}",
    ),
    ("GET", "/tenants/{slug}/upstreams"),
    ("GET", "/tenants/{slug}/upstreams/{name}"),
    ("PUT", "/tenants/{slug}/upstreams/{name}"),
    ("PATCH", "/tenants/{slug}/upstreams/{name}"),
    ("DELETE", "/tenants/{slug}/upstreams/{name}"),
    ("POST", "/tenants/{slug}/upstreams/{name}/approve"),
];

/// The catalog collections the `{kind}` segment accepts (`admin::catalog::kind_of`).
const KINDS: &[&str] = &["tools", "prompts", "resources", "resource-templates"];

/// The `{kind}` segment of the catalog routes: only the collections route there, so another
/// segment falls through to 404 or 405.
const KIND: &str = "{kind:tools|prompts|resources|resource-templates}";

const HTTP_METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The fresh tenant the walk runs against.
const WALK_TENANT: &str = "openapi-walk";

/// `(METHOD, documented path)` for every route the server has.
fn expected_operations() -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (method, path) in ROUTES {
        if path.contains(KIND) {
            for kind in KINDS {
                out.insert((method.to_string(), path.replace(KIND, kind)));
            }
        } else {
            out.insert((method.to_string(), path.to_string()));
        }
    }
    out
}

/// One documented operation.
#[derive(Clone)]
struct Op {
    method: String,
    path: String,
    op: Value,
    /// Path-level and operation-level parameters, resolved.
    params: Vec<Value>,
}

impl Op {
    fn id(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
    fn status_codes(&self) -> BTreeSet<String> {
        self.op["responses"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }
    fn request_example(&self) -> Option<Value> {
        self.op
            .pointer("/requestBody/content/application~1json/example")
            .cloned()
    }
    fn is_public(&self) -> bool {
        self.op.get("security") == Some(&json!([]))
    }
}

/// Follows a local `$ref`.
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let target = doc
                .pointer(r.strip_prefix('#').expect("local $ref"))
                .unwrap_or_else(|| panic!("dangling $ref {r}"));
            resolve(doc, target)
        }
        None => v,
    }
}

fn operations(doc: &Value) -> Vec<Op> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        let shared: Vec<Value> = item
            .get("parameters")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (key, op) in item.as_object().unwrap() {
            if !HTTP_METHODS.contains(&key.as_str()) {
                continue;
            }
            let own: Vec<Value> = op
                .get("parameters")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let params = shared
                .iter()
                .chain(own.iter())
                .map(|p| resolve(doc, p).clone())
                .collect();
            ops.push(Op {
                method: key.to_uppercase(),
                path: path.clone(),
                op: op.clone(),
                params,
            });
        }
    }
    ops
}

/// A validator for `schema` (a schema object of the document, `$ref`s into its components).
fn validator(doc: &Value, schema: &Value) -> jsonschema::Validator {
    let mut root = schema.clone();
    root["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
    root["components"] = json!({ "schemas": doc["components"]["schemas"] });
    jsonschema::draft202012::new(&root)
        .unwrap_or_else(|e| panic!("schema {schema} does not compile: {e}"))
}

fn assert_valid(doc: &Value, schema: &Value, instance: &Value, what: &str) {
    let v = validator(doc, schema);
    let errors: Vec<String> = v
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what}: {instance} does not match {schema}: {errors:#?}"
    );
}

fn component(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

struct Answer {
    status: u16,
    content_type: String,
    www_authenticate: Option<String>,
    etag: Option<String>,
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }
}

/// Calls `url_path` (under /admin/v1), a body sent as JSON, and checks that the route exists: no
/// 405, and no `no such admin endpoint` 404 from the admin scope's default service.
async fn call(
    app: &TestApp,
    method: &str,
    url_path: &str,
    body: Option<String>,
    token: bool,
) -> Answer {
    call_as(app, method, url_path, body, token, "application/json").await
}

/// [`call`] with the body sent as `content_type`.
async fn call_as(
    app: &TestApp,
    method: &str,
    url_path: &str,
    body: Option<String>,
    token: bool,
    content_type: &str,
) -> Answer {
    let method = Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = if token {
        app.admin(method.clone(), url_path)
    } else {
        app.http
            .request(method.clone(), format!("{}/admin/v1{url_path}", app.base))
    };
    if let Some(body) = body {
        req = req.header("content-type", content_type).body(body);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let content_type = header("content-type").unwrap_or_default();
    let www_authenticate = header("www-authenticate");
    let etag = header("etag");
    let text = resp.text().await.unwrap();
    assert_ne!(
        status, 405,
        "{method} {url_path}: 405, the route does not take this method"
    );
    if status == 404 {
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        assert_ne!(
            body["error"]["message"], "no such admin endpoint",
            "{method} {url_path} is documented but the server has no such route"
        );
    }
    Answer {
        status,
        content_type,
        www_authenticate,
        etag,
        text,
    }
}

/// Asserts the answer is documented for `op` and matches the documented content.
fn check_documented(doc: &Value, op: &Op, answer: &Answer, what: &str) {
    let status = answer.status.to_string();
    let response = op.op["responses"].get(&status).unwrap_or_else(|| {
        panic!(
            "{} ({what}): status {status} is not documented; body {}",
            op.id(),
            answer.text
        )
    });
    let response = resolve(doc, response);
    let Some(content) = response.get("content").and_then(Value::as_object) else {
        assert!(
            answer.text.is_empty(),
            "{} ({what}): {status} documents no content but got {:?}",
            op.id(),
            answer.text
        );
        return;
    };
    let media = answer
        .content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    let entry = content.get(&media).unwrap_or_else(|| {
        panic!(
            "{} ({what}): {status} answered {media}, documented {:?}",
            op.id(),
            content.keys().collect::<Vec<_>>()
        )
    });
    if media == "application/json" {
        assert_valid(
            doc,
            &entry["schema"],
            &answer.json(),
            &format!("{} ({what}) {status}", op.id()),
        );
    }
    // An ETag is sent exactly where one is documented, in the documented form.
    match (response.pointer("/headers/ETag"), &answer.etag) {
        (Some(header), Some(etag)) => {
            let header = resolve(doc, header);
            assert_valid(
                doc,
                &header["schema"],
                &json!(etag),
                &format!("{} ({what}) {status} ETag", op.id()),
            );
        }
        (None, None) => {}
        (documented, sent) => panic!(
            "{} ({what}) {status}: ETag documented {}, sent {sent:?}",
            op.id(),
            documented.is_some()
        ),
    }
    if answer.status == 401 {
        assert_eq!(
            answer.www_authenticate.as_deref(),
            Some("Bearer realm=\"mcp-harbor-admin\"")
        );
    }
}

async fn fetch_document(app: &TestApp) -> Value {
    // Public: fetched without the token.
    let resp = app
        .http
        .get(format!("{}/admin/v1/openapi.json", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let text = resp.text().await.unwrap();
    assert_eq!(
        text,
        mcp_harbor::admin::openapi::DOCUMENT,
        "the served document is the file"
    );
    serde_json::from_str(&text).expect("the document is JSON")
}

#[test]
fn configure_source_matches_the_route_list() {
    let source = include_str!("../../src/admin/mod.rs");
    let body = source
        .split("pub fn configure(")
        .nth(1)
        .expect("configure() in src/admin/mod.rs");
    let body = &body[..body.find("\n}\n").expect("end of configure()")];
    // Formatting-proof: `.route("<path>", web::<method>()…)` with the whitespace taken out.
    let compact: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    let mut found = Vec::new();
    for call in compact.split(".route(").skip(1) {
        let rest = call.strip_prefix('"').expect(".route(\"<path>\", …)");
        let (path, rest) = rest.split_once('"').unwrap();
        let method = rest
            .strip_prefix(",web::")
            .and_then(|m| m.split('(').next())
            .expect("web::<method>()");
        found.push((method.to_uppercase(), path.to_string()));
    }
    let listed: Vec<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(
        found, listed,
        "admin::configure() changed: update ROUTES here and src/admin/openapi.json"
    );
    assert_eq!(KIND, format!("{{kind:{}}}", KINDS.join("|")));
}

#[actix_rt::test]
async fn document_is_openapi_31_and_covers_exactly_the_routes() {
    let app = spawn_app().await;
    let doc = fetch_document(&app).await;
    let version = doc["openapi"].as_str().expect("openapi version");
    assert!(version.starts_with("3.1."), "openapi {version}");
    let scheme = &doc["components"]["securitySchemes"]["adminToken"];
    assert_eq!(
        (&scheme["type"], &scheme["scheme"]),
        (&json!("http"), &json!("bearer"))
    );
    assert_eq!(doc["security"], json!([{ "adminToken": [] }]));

    let ops = operations(&doc);
    let documented: BTreeSet<(String, String)> = ops
        .iter()
        .map(|o| (o.method.clone(), o.path.clone()))
        .collect();
    let expected = expected_operations();
    let undocumented: Vec<_> = expected.difference(&documented).collect();
    let phantom: Vec<_> = documented.difference(&expected).collect();
    assert!(
        undocumented.is_empty(),
        "server routes missing from openapi.json: {undocumented:?}"
    );
    assert!(
        phantom.is_empty(),
        "openapi.json documents routes the server lacks: {phantom:?}"
    );
    assert_eq!(
        ops.len(),
        expected.len(),
        "an operation is documented twice"
    );

    let mut ids = BTreeSet::new();
    for op in &ops {
        assert!(
            ids.insert(
                op.op["operationId"]
                    .as_str()
                    .expect("operationId")
                    .to_string()
            ),
            "duplicate operationId in {}",
            op.id()
        );
        // Every path template variable is a declared path parameter, and vice versa.
        let vars: BTreeSet<&str> = op
            .path
            .split('{')
            .skip(1)
            .filter_map(|s| s.split('}').next())
            .collect();
        let declared: BTreeSet<&str> = op
            .params
            .iter()
            .filter(|p| p["in"] == "path")
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(vars, declared, "{}: path parameters", op.id());
        let codes = op.status_codes();
        assert!(
            codes.iter().any(|c| c.starts_with('2')),
            "{}: no success response",
            op.id()
        );
        // The statuses each kind of operation can answer, and why.
        let mut required = vec![("400", "every operation refuses unknown query parameters")];
        if !op.is_public() {
            required.push(("401", "a token-protected operation"));
            required.push(("503", "the database may be unavailable"));
        }
        if op.path.contains("{slug}") {
            required.push(("404", "a tenant-scoped operation"));
        }
        if op.op.get("requestBody").is_some() {
            for code in ["408", "413", "415", "422"] {
                required.push((code, "a body-taking operation"));
            }
            assert!(
                op.request_example().is_some(),
                "{}: request body example",
                op.id()
            );
        }
        if op.params.iter().any(|p| p["name"] == "cursor") {
            required.push(("422", "a bad cursor"));
        }
        for (code, why) in required {
            assert!(codes.contains(code), "{}: {why} answers {code}", op.id());
        }
    }
    // Only openapi.json is public.
    let public: Vec<String> = ops.iter().filter(|o| o.is_public()).map(Op::id).collect();
    assert_eq!(public, vec!["GET /openapi.json".to_string()]);

    // Every component schema is a valid JSON Schema 2020-12 and compiles with its references.
    for (name, schema) in doc["components"]["schemas"].as_object().unwrap() {
        jsonschema::draft202012::meta::validate(schema)
            .unwrap_or_else(|e| panic!("components.schemas.{name}: {e}"));
        validator(&doc, &component(name));
    }
    // Every $ref anywhere resolves.
    fn walk(doc: &Value, v: &Value) {
        match v {
            Value::Object(map) => {
                if v.get("$ref").is_some() {
                    resolve(doc, v);
                }
                map.values().for_each(|x| walk(doc, x));
            }
            Value::Array(items) => items.iter().for_each(|x| walk(doc, x)),
            _ => {}
        }
    }
    walk(&doc, &doc);
    // The request examples are valid by their own schemas.
    for op in &ops {
        if let Some(example) = op.request_example() {
            let schema = &op.op["requestBody"]["content"]["application/json"]["schema"];
            assert_valid(
                &doc,
                schema,
                &example,
                &format!("{} request example", op.id()),
            );
        }
    }
}

/// The variable naming an item at the end of `path` (`{name}`, `{username}`, `{client_id}`)
/// and the collection path before it; `None` for collections and for tenants.
fn item_of(path: &str) -> Option<(&str, &str)> {
    let (collection, last) = path.rsplit_once('/')?;
    let var = last.strip_prefix('{')?.strip_suffix('}')?;
    (var != "slug").then_some((collection, var))
}

/// The field by which a collection's POST response names what it created: the variable of the
/// collection's item path (`slug`, `name`, `username`, `client_id`), if it has one.
fn created_key(ops: &[Op], collection: &str) -> Option<String> {
    ops.iter().find_map(|o| {
        let (parent, last) = o.path.rsplit_once('/')?;
        let var = last.strip_prefix('{')?.strip_suffix('}')?;
        (parent == collection).then(|| var.to_string())
    })
}

/// The value of an item path's variable: the key in the example of the collection's POST
/// (`name`, `username`), or else the one the server assigned when the walk created it
/// (`client_id`), kept in `assigned` by collection path (elicitations, which the admin API
/// does not create, are put there by the walk itself).
fn item_key(ops: &[Op], item_path: &str, assigned: &BTreeMap<String, String>) -> String {
    let (collection, var) = item_of(item_path).expect("an item path");
    let create = ops
        .iter()
        .find(|o| o.method == "POST" && o.path == collection);
    // Or, for items created by a PUT of their own path (upstreams), the example of that PUT.
    let put = || {
        ops.iter()
            .find(|o| o.method == "PUT" && o.path == item_path && creates(o))
    };
    if let Some(key) = create
        .or_else(put)
        .and_then(Op::request_example)
        .and_then(|e| e.get(var).and_then(Value::as_str).map(str::to_string))
    {
        return key;
    }
    assigned.get(collection).cloned().unwrap_or_else(|| {
        panic!("{item_path}: no {var} in the example of POST {collection}, nor one it assigned")
    })
}

/// The URL path (under /admin/v1) of a documented path, for `slug` and the item `item` (default:
/// the one the walk created).
fn url_path(
    ops: &[Op],
    path: &str,
    slug: &str,
    item: Option<&str>,
    assigned: &BTreeMap<String, String>,
) -> String {
    let mut out = path.replace("{slug}", slug);
    // An action on an item (`…/{name}/approve`) names the item as its item path does.
    let item_path = match item_of(path) {
        Some(_) => path,
        None => path.rsplit_once('/').map_or(path, |(parent, _)| parent),
    };
    if let Some((_, var)) = item_of(item_path) {
        let key = item
            .map(str::to_string)
            .unwrap_or_else(|| item_key(ops, item_path, assigned));
        out = out.replace(&format!("{{{var}}}"), &key);
    }
    out
}

/// Records a pending elicitation of `tenant` directly in the app's (embedded) database.
async fn pending_elicitation(app: &TestApp, tenant: &str) -> String {
    use mcp_harbor::store::{ElicitationRecord, ElicitationStatus, ElicitationStore, SqlStore};
    let dir = app.data_dir.as_ref().expect("embedded database").path();
    let store = SqlStore::connect(&format!("sqlite://{}/mcp-harbor.db", dir.display()), 1)
        .await
        .unwrap();
    let now = mcp_harbor::store::now_millis();
    let id = "walk-elicitation-0123456789abcdef".to_string();
    store
        .insert_elicitation(
            tenant,
            &ElicitationRecord {
                id: id.clone(),
                principal: None,
                session: None,
                tool: "deploy".into(),
                name: "api_key".into(),
                message: "Your deploy key".into(),
                status: ElicitationStatus::Pending,
                secret_sealed: None,
                expires_at: now + 600_000,
                created_at: now,
                updated_at: now,
            },
        )
        .await
        .unwrap();
    store.close().await;
    id
}

/// Whether the operation documents creating what it names (a `201`): a POST, or a PUT that
/// defines an item by its own path.
fn creates(op: &Op) -> bool {
    op.op["responses"].get("201").is_some()
}

/// Walk order: creations, reads, updates, then deletions (deepest first, the tenant last).
fn phase(op: &Op) -> (u8, i64) {
    let depth = op.path.matches('/').count() as i64;
    match op.method.as_str() {
        "POST" => (0, depth),
        "PUT" if creates(op) => (0, depth),
        "GET" => (1, depth),
        "PUT" | "PATCH" => (2, depth),
        _ => (3, -depth),
    }
}

#[actix_rt::test]
async fn every_documented_operation_exists_and_answers_as_documented() {
    let app = spawn_app().await;
    let doc = fetch_document(&app).await;
    let mut ops = operations(&doc);
    ops.sort_by_key(phase);

    let created = call(
        &app,
        "POST",
        "/tenants",
        Some(json!({ "slug": WALK_TENANT }).to_string()),
        true,
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.text);

    let mut seen_statuses: BTreeMap<String, BTreeSet<u16>> = BTreeMap::new();
    // Server-assigned keys of what the walk created, by collection path.
    let mut assigned: BTreeMap<String, String> = BTreeMap::new();
    // Elicitations come from tool calls, not the admin API: one pending, put in the database.
    let elicitation = pending_elicitation(&app, WALK_TENANT).await;
    assigned.insert("/tenants/{slug}/elicitations".into(), elicitation);
    for op in &ops {
        let path = url_path(&ops, &op.path, WALK_TENANT, None, &assigned);
        let example = op.request_example().map(|e| e.to_string());
        let mut record = |answer: &Answer, what: &str| {
            check_documented(&doc, op, answer, what);
            seen_statuses
                .entry(op.id())
                .or_default()
                .insert(answer.status);
        };

        if !op.is_public() {
            let a = call(&app, &op.method, &path, example.clone(), false).await;
            assert_eq!(a.status, 401, "{} without a token", op.id());
            record(&a, "no token");
            // The token is checked before the query string.
            let unknown = format!("{path}?no_such_param=1");
            let a = call(&app, &op.method, &unknown, example.clone(), false).await;
            assert_eq!(a.status, 401, "{} without a token", op.id());
        }
        // Unknown query parameters are refused on every operation, before anything happens.
        let unknown = format!("{path}?no_such_param=1");
        let a = call(&app, &op.method, &unknown, example.clone(), true).await;
        assert_eq!(a.status, 400, "{} ?no_such_param=1: {}", op.id(), a.text);
        assert_eq!(a.json()["error"]["code"], "bad_request");
        let message = a.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.contains("\"no_such_param\""), "{message}");
        record(&a, "unknown query parameter");
        if op.path.contains("{slug}") {
            let missing = url_path(&ops, &op.path, "no-such-tenant", None, &assigned);
            let a = call(&app, &op.method, &missing, example.clone(), true).await;
            assert_eq!(
                a.status,
                404,
                "{} for a missing tenant: {}",
                op.id(),
                a.text
            );
            record(&a, "missing tenant");
        }
        // (A PUT that creates its item has no missing entry: a missing one is created.)
        if item_of(&op.path).is_some() && !(op.method == "PUT" && creates(op)) {
            let missing = url_path(
                &ops,
                &op.path,
                WALK_TENANT,
                Some("no-such-entry"),
                &assigned,
            );
            let a = call(&app, &op.method, &missing, example.clone(), true).await;
            assert_eq!(a.status, 404, "{} for a missing entry: {}", op.id(), a.text);
            record(&a, "missing entry");
        }
        if example.is_some() {
            for content_type in ["text/plain", "application/x-www-form-urlencoded"] {
                let a = call_as(&app, &op.method, &path, example.clone(), true, content_type).await;
                assert_eq!(a.status, 415, "{} as {content_type}", op.id());
                assert_eq!(a.json()["error"]["code"], "unsupported_media_type");
                record(&a, "not sent as JSON");
            }
            let a = call(&app, &op.method, &path, Some("{not json".into()), true).await;
            assert_eq!(a.status, 400, "{} with a non-JSON body", op.id());
            assert_eq!(a.json()["error"]["code"], "bad_request");
            record(&a, "not JSON");
            let schema = resolve(
                &doc,
                &op.op["requestBody"]["content"]["application/json"]["schema"],
            );
            if schema["additionalProperties"] == json!(false) {
                let a = call(
                    &app,
                    &op.method,
                    &path,
                    Some(json!({ "no_such_field": 1 }).to_string()),
                    true,
                )
                .await;
                assert_eq!(a.status, 422, "{} with an unknown field", op.id());
                assert_eq!(a.json()["error"]["code"], "invalid");
                assert!(
                    a.json()["error"]["field"].is_string(),
                    "422 names the field: {}",
                    a.text
                );
                record(&a, "unknown field");
            } else {
                // Documented as ignoring unknown fields (client metadata, RFC 7591): the
                // example with one more is accepted, and the field is not kept.
                let mut body = op.request_example().unwrap();
                body["no_such_field"] = json!(1);
                let a = call(&app, &op.method, &path, Some(body.to_string()), true).await;
                assert!(
                    (200..300).contains(&a.status),
                    "{} with an ignored unknown field: {} {}",
                    op.id(),
                    a.status,
                    a.text
                );
                assert!(a.json().get("no_such_field").is_none(), "{}", a.text);
                record(&a, "unknown field ignored");
            }
        }
        if op.params.iter().any(|p| p["name"] == "limit") {
            let a = call(&app, &op.method, &format!("{path}?limit=0"), None, true).await;
            assert_eq!(a.status, 422, "{} ?limit=0", op.id());
            assert_eq!(a.json()["error"]["field"], "limit");
            record(&a, "limit=0");
            let a = call(&app, &op.method, &format!("{path}?cursor=*"), None, true).await;
            assert_eq!(a.status, 422, "{} ?cursor=*", op.id());
            assert_eq!(a.json()["error"]["field"], "cursor");
            record(&a, "bad cursor");
            let a = call(&app, &op.method, &format!("{path}?limit=many"), None, true).await;
            assert_eq!(a.status, 400, "{} ?limit=many", op.id());
            record(&a, "unparsable limit");
        }

        // The call itself, with the documented example body.
        let a = call(&app, &op.method, &path, example.clone(), true).await;
        assert!(
            (200..300).contains(&a.status),
            "{} failed: {} {}",
            op.id(),
            a.status,
            a.text
        );
        record(&a, "success");
        if let (201, Some(key)) = (a.status, created_key(&ops, &op.path)) {
            let value = a.json()[&key]
                .as_str()
                .unwrap_or_else(|| panic!("{}: the 201 names no {key}: {}", op.id(), a.text))
                .to_string();
            let again = call(&app, &op.method, &path, example.clone(), true).await;
            if example.as_deref().is_some_and(|e| {
                serde_json::from_str::<Value>(e)
                    .unwrap()
                    .get(&key)
                    .is_some()
            }) {
                // A key the client chose: creating it again conflicts (and the 409 must be
                // documented).
                assert_eq!(again.status, 409, "{} twice: {}", op.id(), again.text);
                assert_eq!(again.json()["error"]["code"], "conflict");
                record(&again, "duplicate");
            } else {
                // A key the server assigns: creating again makes another.
                assert_eq!(again.status, 201, "{} twice: {}", op.id(), again.text);
                assert_ne!(again.json()[&key], json!(value), "{} twice", op.id());
                record(&again, "second");
            }
            assigned.insert(op.path.clone(), value);
        }
    }

    // Every operation got its success status and the 401 it documents.
    for op in &ops {
        let seen = &seen_statuses[&op.id()];
        assert!(
            seen.iter().any(|s| (200..300).contains(s)),
            "{}: {seen:?}",
            op.id()
        );
    }
    // The walk ended by deleting its tenant.
    let a = call(&app, "GET", &format!("/tenants/{WALK_TENANT}"), None, true).await;
    assert_eq!(a.status, 404);
}

#[actix_rt::test]
async fn real_responses_match_the_component_schemas() {
    let app = spawn_app().await;
    let doc = fetch_document(&app).await;

    let body = json!({ "slug": "schema-check", "display_name": "Schema check", "catalogs": ["demo"],
        "limits": { "max_sessions": 3, "allowed_origins": ["https://app.example.com"] } });
    let created = call(&app, "POST", "/tenants", Some(body.to_string()), true).await;
    assert_eq!(created.status, 201);
    let tenant = created.json();
    assert_valid(&doc, &component("Tenant"), &tenant, "created tenant");
    assert_eq!(
        tenant["limits"],
        json!({ "max_sessions": 3, "allowed_origins": ["https://app.example.com"] })
    );
    assert_eq!(tenant["mcp_path"], "/t/schema-check/mcp");

    // The schemas are strict: an undocumented field or a wrong status fails them.
    let mut extra = tenant.clone();
    extra["surprise"] = json!(true);
    assert!(!validator(&doc, &component("Tenant")).is_valid(&extra));
    let mut wrong = tenant.clone();
    wrong["status"] = json!("paused");
    assert!(!validator(&doc, &component("Tenant")).is_valid(&wrong));

    // A full list, paged one tenant at a time: every page is a TenantPage, and the pages add up
    // to the whole list.
    let all = call(&app, "GET", "/tenants?limit=200", None, true)
        .await
        .json();
    assert_valid(&doc, &component("TenantPage"), &all, "tenant list");
    assert!(all["next_cursor"].is_null());
    let mut slugs = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..20 {
        let path = match &cursor {
            Some(c) => format!("/tenants?limit=1&cursor={c}"),
            None => "/tenants?limit=1".to_string(),
        };
        let page = call(&app, "GET", &path, None, true).await.json();
        assert_valid(&doc, &component("TenantPage"), &page, "tenant page");
        slugs.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["slug"].as_str().unwrap().to_string()),
        );
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let expected: Vec<String> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["slug"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(slugs, expected);
    assert!(slugs.contains(&"schema-check".to_string()));

    // A tool: the secret shows once, then redacted; both forms match Tool.
    let tool = json!({ "name": "repeat", "description": "Echoes.", "webhook": { "url": "http://127.0.0.1:9/hook" } });
    let a = call(
        &app,
        "POST",
        "/tenants/schema-check/tools",
        Some(tool.to_string()),
        true,
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.text);
    let shown = a.json();
    assert_valid(&doc, &component("Tool"), &shown, "created tool");
    assert!(shown["webhook"]["secret"]
        .as_str()
        .unwrap()
        .starts_with("whsec_"));
    assert_eq!(shown["input_schema"], json!({ "type": "object" }));
    let page = call(&app, "GET", "/tenants/schema-check/tools", None, true)
        .await
        .json();
    assert_valid(&doc, &component("ToolPage"), &page, "tool list");
    assert_eq!(page["items"][0]["webhook"]["secret"], "whsec_…");

    // The error shape.
    let a = call(
        &app,
        "POST",
        "/tenants",
        Some(json!({ "slug": "Bad Slug" }).to_string()),
        true,
    )
    .await;
    assert_eq!(a.status, 422);
    let error = a.json();
    assert_valid(&doc, &component("Error"), &error, "422");
    assert_eq!(error["error"]["field"], "slug");
}

/// Whether `instance` matches the component schema `name`.
fn fits(doc: &Value, name: &str, instance: &Value) -> bool {
    validator(doc, &component(name)).is_valid(instance)
}

async fn admin_call(app: &TestApp, method: &str, path: &str, body: Option<Value>) -> Answer {
    call(app, method, path, body.map(|b| b.to_string()), true).await
}

/// A 422 naming `field` (or, with `None`, a field under `prefix`), in the documented shape.
fn assert_refused(doc: &Value, a: &Answer, prefix: &str, field: Option<&str>, what: &str) {
    assert_eq!(a.status, 422, "{what}: {}", a.text);
    let error = a.json();
    assert_valid(doc, &component("Error"), &error, what);
    let named = error["error"]["field"].as_str().unwrap_or_default();
    match field {
        Some(f) => assert_eq!(named, f, "{what}: {}", a.text),
        None => assert!(named.starts_with(prefix), "{what}: {}", a.text),
    }
}

#[actix_rt::test]
async fn tenant_auth_settings_match_the_documented_schemas() {
    let app = spawn_app().await;
    let doc = fetch_document(&app).await;
    let token = "iat-0123456789abcdef";
    let oidc = json!({ "issuer": "https://id.acme.example", "client_id": "harbor",
        "client_secret": "upstream-s3cret", "scopes": ["openid", "email"],
        "subject_claim": "email", "name_claim": "preferred_username" });

    // Accepted by both the schema and the server; the response shows no secret.
    let accepted = [
        ("auth-none", json!({ "mode": "none" })),
        // The none mode ignores other fields (documented).
        (
            "auth-none-extra",
            json!({ "mode": "none", "registration": "token" }),
        ),
        ("auth-oauth", json!({ "mode": "oauth" })),
        (
            "auth-oauth-full",
            json!({ "mode": "oauth", "registration": "token", "initial_access_token": token,
                "login": "oidc", "oidc": oidc, "required_scopes": ["mcp", "mcp:tools"] }),
        ),
        (
            "auth-oauth-nulls",
            json!({ "mode": "oauth", "registration": null, "initial_access_token": null,
                "login": null, "oidc": null, "required_scopes": null }),
        ),
        (
            "auth-external",
            json!({ "mode": "external", "issuer": "https://login.acme.example",
                "audience": "https://mcp.acme.example", "jwks_uri": "https://login.acme.example/jwks",
                "required_scopes": ["mcp"] }),
        ),
        (
            "auth-external-min",
            json!({ "mode": "external", "issuer": "https://login.acme.example", "audience": "mcp" }),
        ),
    ];
    for (slug, auth) in &accepted {
        let body = json!({ "slug": slug, "auth": auth });
        assert!(
            fits(&doc, "CreateTenant", &body),
            "the schema refuses {body}"
        );
        let a = admin_call(&app, "POST", "/tenants", Some(body)).await;
        assert_eq!(a.status, 201, "{slug}: {}", a.text);
        assert_valid(&doc, &component("Tenant"), &a.json(), slug);
        assert!(!a.text.contains(token) && !a.text.contains("upstream-s3cret"));
    }
    let auth_of = |slug: &'static str| {
        let app = &app;
        async move {
            let a = admin_call(app, "GET", &format!("/tenants/{slug}"), None).await;
            assert_eq!(a.status, 200, "{}", a.text);
            a.json()["auth"].clone()
        }
    };
    assert_eq!(auth_of("auth-none-extra").await, json!({ "mode": "none" }));
    let defaults = json!({ "mode": "oauth", "registration": "open",
        "initial_access_token_set": false, "login": "local", "required_scopes": ["mcp"],
        "oidc": null });
    assert_eq!(auth_of("auth-oauth").await, defaults);
    assert_eq!(auth_of("auth-oauth-nulls").await, defaults);
    assert_eq!(
        auth_of("auth-oauth-full").await,
        json!({ "mode": "oauth", "registration": "token", "initial_access_token_set": true,
            "login": "oidc", "required_scopes": ["mcp", "mcp:tools"],
            "oidc": { "issuer": "https://id.acme.example", "client_id": "harbor",
                "client_secret_set": true, "scopes": ["openid", "email"],
                "subject_claim": "email", "name_claim": "preferred_username" } })
    );
    assert_eq!(
        auth_of("auth-external-min").await,
        json!({ "mode": "external", "issuer": "https://login.acme.example", "audience": "mcp",
            "jwks_uri": null, "required_scopes": [] })
    );

    // An update replaces the settings but keeps the secrets it does not repeat.
    let body = json!({ "auth": { "mode": "oauth", "registration": "token", "login": "oidc",
        "oidc": { "issuer": "https://id.acme.example", "client_id": "harbor" } } });
    assert!(fits(&doc, "UpdateTenant", &body));
    let a = admin_call(&app, "PATCH", "/tenants/auth-oauth-full", Some(body)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_valid(&doc, &component("Tenant"), &a.json(), "updated auth");
    let auth = &a.json()["auth"];
    assert_eq!(auth["initial_access_token_set"], true);
    assert_eq!(auth["oidc"]["client_secret_set"], true);
    assert_eq!(auth["oidc"]["scopes"], json!(["openid", "profile"]));
    assert_eq!(auth["required_scopes"], json!(["mcp"]));
    let body = json!({ "auth": { "mode": "oauth",
        "oidc": { "issuer": "https://id.acme.example", "client_id": "another" } } });
    let a = admin_call(&app, "PATCH", "/tenants/auth-oauth-full", Some(body)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    let auth = &a.json()["auth"];
    assert_eq!(
        (
            &auth["registration"],
            &auth["login"],
            &auth["oidc"]["client_secret_set"]
        ),
        (&json!("open"), &json!("local"), &json!(false))
    );
    let a = admin_call(
        &app,
        "PATCH",
        "/tenants/auth-external",
        Some(json!({ "auth": { "mode": "none" } })),
    )
    .await;
    assert_eq!(a.json()["auth"], json!({ "mode": "none" }));
    // `registration: token` on an update of an `oauth` tenant that has a token keeps it.
    let a = admin_call(
        &app,
        "PATCH",
        "/tenants/auth-oauth-full",
        Some(json!({ "auth": { "mode": "oauth", "registration": "token" } })),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text);

    // Refused by both the schema and the server (422 naming the field; `None`: some field
    // under `auth`).
    let refused = [
        (
            json!({ "mode": "oauth", "login": "oidc" }),
            Some("auth.oidc"),
        ),
        (
            json!({ "mode": "oauth", "login": "oidc", "oidc": null }),
            Some("auth.oidc"),
        ),
        (
            json!({ "mode": "oauth", "oidc": { "issuer": "https://id.acme.example",
                "client_id": "harbor", "scopes": ["profile"] } }),
            Some("auth.oidc.scopes"),
        ),
        (
            json!({ "mode": "oauth", "oidc": { "issuer": "https://id.acme.example", "client_id": "" } }),
            Some("auth.oidc.client_id"),
        ),
        (
            json!({ "mode": "oauth", "required_scopes": ["has space"] }),
            Some("auth.required_scopes[0]"),
        ),
        (
            json!({ "mode": "external", "issuer": "https://login.acme.example", "audience": "mcp",
                "required_scopes": ["mcp", "quo\"te"] }),
            Some("auth.required_scopes[1]"),
        ),
        (
            json!({ "mode": "external", "issuer": "https://login.acme.example", "audience": "" }),
            Some("auth.audience"),
        ),
        (
            json!({ "mode": "external", "issuer": "https://login.acme.example" }),
            Some("auth.audience"),
        ),
        (
            json!({ "mode": "external", "issuer": "https://login.acme.example", "audience": "mcp",
                "required_scopes": null }),
            None,
        ),
        (
            json!({ "mode": "oauth", "registration": "sometimes" }),
            None,
        ),
        (json!({ "mode": "oauth", "login": "saml" }), None),
        (json!({ "mode": "oauth", "surprise": true }), None),
        (json!({ "mode": "bogus" }), None),
        (json!({ "registration": "open" }), None),
    ];
    for (auth, field) in refused {
        let body = json!({ "slug": "auth-refused", "auth": auth });
        assert!(
            !fits(&doc, "CreateTenant", &body),
            "the schema accepts {body}"
        );
        let a = admin_call(&app, "POST", "/tenants", Some(body.clone())).await;
        assert_refused(&doc, &a, "auth", field, &body.to_string());
    }
    // Refused by the document's patterns and conditions (URLs, the token's length, the token
    // `registration: token` needs on a new tenant, a blank audience), naming the exact field.
    let described = [
        (
            json!({ "mode": "oauth", "registration": "token" }),
            "auth.initial_access_token",
        ),
        (
            json!({ "mode": "oauth", "initial_access_token": "fifteen-chars!!" }),
            "auth.initial_access_token",
        ),
        (
            json!({ "mode": "external", "issuer": "http://login.acme.example", "audience": "mcp" }),
            "auth.issuer",
        ),
        (
            json!({ "mode": "external", "issuer": "https://login.acme.example", "audience": "mcp",
                "jwks_uri": "ftp://login.acme.example/jwks" }),
            "auth.jwks_uri",
        ),
        (
            json!({ "mode": "oauth", "oidc": { "issuer": "not a URL", "client_id": "harbor" } }),
            "auth.oidc.issuer",
        ),
        (
            json!({ "mode": "external", "issuer": "https://login.acme.example", "audience": "  " }),
            "auth.audience",
        ),
    ];
    for (auth, field) in described {
        let body = json!({ "slug": "auth-refused", "auth": auth });
        assert!(
            !fits(&doc, "CreateTenant", &body),
            "the schema accepts {body}"
        );
        let a = admin_call(&app, "POST", "/tenants", Some(body.clone())).await;
        assert_refused(&doc, &a, "auth", Some(field), &body.to_string());
    }
    let a = admin_call(&app, "GET", "/tenants/auth-refused", None).await;
    assert_eq!(a.status, 404);

    // A state rule: `registration: token` on a tenant with no token to keep is 409 (the request
    // alone is valid), and nothing changes.
    let body = json!({ "auth": { "mode": "oauth", "registration": "token" } });
    assert!(fits(&doc, "UpdateTenant", &body));
    let a = admin_call(&app, "PATCH", "/tenants/auth-oauth", Some(body)).await;
    assert_eq!(a.status, 409, "{}", a.text);
    assert_valid(&doc, &component("Error"), &a.json(), "409");
    assert_eq!(auth_of("auth-oauth").await["registration"], "open");
}

/// A fresh app, its document, and a tenant created with `body`.
async fn app_with_tenant(body: Value) -> (TestApp, Value) {
    let app = spawn_app().await;
    let doc = fetch_document(&app).await;
    let a = admin_call(&app, "POST", "/tenants", Some(body)).await;
    assert_eq!(a.status, 201, "{}", a.text);
    (app, doc)
}

#[actix_rt::test]
async fn users_clients_and_keys_match_the_documented_schemas() {
    let (app, doc) =
        app_with_tenant(json!({ "slug": "oauth-admin", "auth": { "mode": "oauth" } })).await;
    let base = "/tenants/oauth-admin";

    // Users.
    let password = "correct horse battery staple";
    let body = json!({ "username": "alice.b-01@acme+x", "password": password });
    assert!(fits(&doc, "CreateUser", &body));
    let a = admin_call(&app, "POST", &format!("{base}/users"), Some(body.clone())).await;
    assert_eq!(a.status, 201, "{}", a.text);
    let user = a.json();
    assert_valid(&doc, &component("User"), &user, "created user");
    assert_eq!(user["display_name"], "alice.b-01@acme+x");
    assert!(!a.text.contains(password));
    let a = admin_call(&app, "POST", &format!("{base}/users"), Some(body)).await;
    assert_eq!(a.status, 409, "{}", a.text);
    assert_valid(&doc, &component("Error"), &a.json(), "duplicate user");
    let body = json!({ "username": "bob", "password": "12345678", "display_name": "Bob" });
    assert!(fits(&doc, "CreateUser", &body));
    let a = admin_call(&app, "POST", &format!("{base}/users"), Some(body)).await;
    assert_eq!(a.status, 201, "{}", a.text);
    let body = json!({ "display_name": "Bob B.", "password": "another passphrase" });
    assert!(fits(&doc, "UpdateUser", &body));
    let a = admin_call(&app, "PATCH", &format!("{base}/users/bob"), Some(body)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_valid(&doc, &component("User"), &a.json(), "updated user");
    assert_eq!(a.json()["display_name"], "Bob B.");
    let a = admin_call(&app, "GET", &format!("{base}/users/bob"), None).await;
    assert_valid(&doc, &component("User"), &a.json(), "read user");
    let page = admin_call(&app, "GET", &format!("{base}/users"), None)
        .await
        .json();
    assert_valid(&doc, &component("UserPage"), &page, "user list");
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    let page = admin_call(&app, "GET", &format!("{base}/users?limit=1"), None)
        .await
        .json();
    assert_valid(&doc, &component("UserPage"), &page, "user page");
    assert!(page["next_cursor"].is_string());
    for (body, field) in [
        (
            json!({ "username": "bad name", "password": password }),
            "username",
        ),
        (json!({ "username": "", "password": password }), "username"),
        (
            json!({ "username": "x".repeat(101), "password": password }),
            "username",
        ),
        (
            json!({ "username": "carol", "password": "1234567" }),
            "password",
        ),
        (
            json!({ "username": "carol", "password": "p".repeat(1025) }),
            "password",
        ),
        (
            json!({ "username": "carol", "password": password, "display_name": "" }),
            "display_name",
        ),
        (json!({ "username": "carol" }), "password"),
        (
            json!({ "username": "carol", "password": password, "admin": true }),
            "admin",
        ),
    ] {
        assert!(
            !fits(&doc, "CreateUser", &body),
            "the schema accepts {body}"
        );
        let a = admin_call(&app, "POST", &format!("{base}/users"), Some(body.clone())).await;
        assert_refused(&doc, &a, field, None, &body.to_string());
    }
    for (body, field) in [
        (json!({ "password": "short" }), "password"),
        (json!({ "display_name": "x".repeat(201) }), "display_name"),
        (json!({ "username": "renamed" }), "username"),
    ] {
        assert!(
            !fits(&doc, "UpdateUser", &body),
            "the schema accepts {body}"
        );
        let a = admin_call(
            &app,
            "PATCH",
            &format!("{base}/users/bob"),
            Some(body.clone()),
        )
        .await;
        assert_refused(&doc, &a, field, None, &body.to_string());
    }
    // Not blank: stated in prose.
    let a = admin_call(
        &app,
        "PATCH",
        &format!("{base}/users/bob"),
        Some(json!({ "display_name": "   " })),
    )
    .await;
    assert_refused(&doc, &a, "", Some("display_name"), "blank display name");
    let a = admin_call(&app, "DELETE", &format!("{base}/users/bob"), None).await;
    assert_eq!(a.status, 204);
    let a = admin_call(&app, "GET", &format!("{base}/users/bob"), None).await;
    assert_eq!(a.status, 404);

    // Pre-registered clients: the secret shows once.
    let body = json!({ "client_name": "Acme", "redirect_uris": ["https://app.acme.example/cb"] });
    assert!(fits(&doc, "ClientMetadataInput", &body));
    let a = admin_call(&app, "POST", &format!("{base}/oauth-clients"), Some(body)).await;
    assert_eq!(a.status, 201, "{}", a.text);
    let confidential = a.json();
    assert_valid(
        &doc,
        &component("CreatedOAuthClient"),
        &confidential,
        "confidential client",
    );
    assert!(
        !fits(&doc, "OAuthClient", &confidential),
        "a secret is only shown once"
    );
    assert_eq!(confidential["confidential"], true);
    assert_eq!(confidential["source"], "admin");
    assert_eq!(
        confidential["token_endpoint_auth_method"],
        "client_secret_basic"
    );
    assert_eq!(
        confidential["grant_types"],
        json!(["authorization_code", "refresh_token"])
    );
    let secret = confidential["client_secret"].as_str().unwrap().to_string();
    let id = confidential["client_id"].as_str().unwrap().to_string();

    let body = json!({ "redirect_uris": ["http://127.0.0.1/callback", "http://[::1]:8080/cb"],
        "token_endpoint_auth_method": "none", "surprise": 1 });
    assert!(fits(&doc, "ClientMetadataInput", &body));
    let a = admin_call(&app, "POST", &format!("{base}/oauth-clients"), Some(body)).await;
    assert_eq!(a.status, 201, "{}", a.text);
    let public = a.json();
    assert_valid(
        &doc,
        &component("CreatedOAuthClient"),
        &public,
        "public client",
    );
    assert_valid(&doc, &component("OAuthClient"), &public, "public client");
    assert_eq!(public["confidential"], false);
    assert!(public.get("surprise").is_none());

    let body = json!({ "grant_types": ["client_credentials"],
        "token_endpoint_auth_method": "client_secret_post", "scope": "mcp",
        "client_uri": "https://acme.example", "logo_uri": "https://acme.example/logo.png",
        "software_id": "acme-agent", "software_version": "1.2" });
    assert!(fits(&doc, "ClientMetadataInput", &body));
    let a = admin_call(&app, "POST", &format!("{base}/oauth-clients"), Some(body)).await;
    assert_eq!(a.status, 201, "{}", a.text);
    assert_valid(
        &doc,
        &component("CreatedOAuthClient"),
        &a.json(),
        "service client",
    );
    assert_eq!(a.json()["redirect_uris"], json!([]));

    // A client registered by Dynamic Client Registration is listed too.
    let dcr = app
        .http
        .post(format!("{}/t/oauth-admin/oauth/register", app.base))
        .json(&json!({ "redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "none" }))
        .send()
        .await
        .unwrap();
    assert_eq!(dcr.status(), 201);

    let a = admin_call(&app, "GET", &format!("{base}/oauth-clients/{id}"), None).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_valid(&doc, &component("OAuthClient"), &a.json(), "read client");
    assert!(!a.text.contains(&secret));
    let a = admin_call(&app, "GET", &format!("{base}/oauth-clients"), None).await;
    let page = a.json();
    assert_valid(&doc, &component("OAuthClientPage"), &page, "client list");
    assert!(!a.text.contains(&secret));
    let sources: BTreeSet<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources, BTreeSet::from(["admin", "dcr"]));
    assert_eq!(page["items"].as_array().unwrap().len(), 4);

    let https = json!(["https://app.acme.example/cb"]);
    let refused = [
        (json!({}), "redirect_uris"),
        (json!({ "redirect_uris": [] }), "redirect_uris"),
        (json!({ "redirect_uris": null }), "redirect_uris"),
        (
            json!({ "redirect_uris": (0..21).map(|i| format!("https://a.example/{i}")).collect::<Vec<_>>() }),
            "redirect_uris",
        ),
        (
            json!({ "redirect_uris": https, "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "client_credentials"] }),
            "grant_types",
        ),
        (
            json!({ "redirect_uris": https, "grant_types": ["implicit"] }),
            "grant_types",
        ),
        (
            json!({ "redirect_uris": https, "response_types": ["token"] }),
            "response_types",
        ),
        (
            json!({ "redirect_uris": https, "token_endpoint_auth_method": "private_key_jwt" }),
            "token_endpoint_auth_method",
        ),
        (
            json!({ "redirect_uris": https, "client_name": "" }),
            "client_name",
        ),
        (
            json!({ "redirect_uris": https, "client_uri": "http://acme.example" }),
            "client_uri",
        ),
        (
            json!({ "redirect_uris": https, "logo_uri": "data:image/png;base64,AAAA" }),
            "logo_uri",
        ),
    ];
    for (body, field) in refused {
        assert!(
            !fits(&doc, "ClientMetadataInput", &body),
            "the schema accepts {body}"
        );
        let a = admin_call(
            &app,
            "POST",
            &format!("{base}/oauth-clients"),
            Some(body.clone()),
        )
        .await;
        assert_refused(&doc, &a, field, None, &body.to_string());
    }
    // Redirect URI rules (the `RedirectUri` pattern).
    for uri in [
        "http://app.acme.example/cb",
        "https://app.acme.example/cb#fragment",
        "app.acme.example/cb",
        "https://user@app.acme.example/cb",
    ] {
        let body = json!({ "redirect_uris": ["https://app.acme.example/ok", uri] });
        assert!(
            !fits(&doc, "ClientMetadataInput", &body),
            "the schema accepts {body}"
        );
        let a = admin_call(&app, "POST", &format!("{base}/oauth-clients"), Some(body)).await;
        assert_refused(&doc, &a, "", Some("redirect_uris[1]"), uri);
    }
    let a = admin_call(&app, "DELETE", &format!("{base}/oauth-clients/{id}"), None).await;
    assert_eq!(a.status, 204);
    let a = admin_call(&app, "GET", &format!("{base}/oauth-clients/{id}"), None).await;
    assert_eq!(a.status, 404);
    let a = admin_call(&app, "DELETE", &format!("{base}/oauth-clients/{id}"), None).await;
    assert_eq!(a.status, 404);

    // Signing keys: each rotation retires the active key.
    let a = admin_call(&app, "GET", &format!("{base}/signing-keys"), None).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_valid(&doc, &component("SigningKeyList"), &a.json(), "no keys yet");
    let before = a.json()["items"].as_array().unwrap().len();
    let mut kids = Vec::new();
    for _ in 0..2 {
        let a = admin_call(&app, "POST", &format!("{base}/signing-keys"), None).await;
        assert_eq!(a.status, 201, "{}", a.text);
        assert_valid(&doc, &component("RotatedSigningKey"), &a.json(), "rotated");
        kids.push(a.json()["kid"].as_str().unwrap().to_string());
    }
    assert_ne!(kids[0], kids[1]);
    let list = admin_call(&app, "GET", &format!("{base}/signing-keys"), None)
        .await
        .json();
    assert_valid(&doc, &component("SigningKeyList"), &list, "keys");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), before + 2);
    let active: Vec<&Value> = items.iter().filter(|k| k["active"] == true).collect();
    assert_eq!(active.len(), 1);
    assert_eq!(active[0]["kid"], json!(kids[1]));
    assert!(active[0]["retired_at"].is_null());
    let first = items.iter().find(|k| k["kid"] == json!(kids[0])).unwrap();
    assert!(first["retired_at"].is_i64() && first["active"] == false);
}

#[actix_rt::test]
async fn methods_a_documented_path_lacks_answer_405_with_allow() {
    let (app, doc) = app_with_tenant(json!({ "slug": "allow-check" })).await;
    let mut refused = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        let documented: BTreeSet<String> = item
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| HTTP_METHODS.contains(&k.as_str()))
            .map(|k| k.to_uppercase())
            .collect();
        let url = path
            .replace("{slug}", "allow-check")
            .split('/')
            .map(|s| if s.starts_with('{') { "x" } else { s })
            .collect::<Vec<_>>()
            .join("/");
        for method in ["GET", "PUT", "POST", "DELETE", "PATCH"] {
            if documented.contains(method) {
                continue;
            }
            let resp = app
                .admin(Method::from_bytes(method.as_bytes()).unwrap(), &url)
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 405, "{method} {url}");
            let allow: BTreeSet<String> = resp.headers()["allow"]
                .to_str()
                .unwrap()
                .split(',')
                .map(|m| m.trim().to_string())
                .collect();
            assert_eq!(allow, documented, "{method} {url}: Allow");
            let body: Value = resp.json().await.unwrap();
            assert_valid(&doc, &component("Error"), &body, "405");
            assert_eq!(body["error"]["code"], "method_not_allowed");
            refused += 1;
        }
    }
    assert!(refused >= 50, "{refused}");
    // A path the document does not have is 404, whatever the method; so is a catalog collection
    // that does not exist.
    for (method, url) in [
        (Method::GET, "/nothing/here"),
        (Method::PUT, "/tenants"),
        (Method::GET, "/tenants/allow-check/widgets"),
        (Method::PUT, "/tenants/allow-check/widgets/x"),
        // An empty variable is no value: these are not `/tenants/{slug}` paths.
        (Method::GET, "/tenants/"),
        (Method::GET, "/tenants//tools"),
    ] {
        let resp = app.admin(method.clone(), url).send().await.unwrap();
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap();
        if url == "/tenants" {
            assert_eq!(status, 405, "{method} {url}");
            continue;
        }
        assert_eq!(status, 404, "{method} {url}");
        assert_eq!(body["error"]["code"], "not_found");
    }
}

#[actix_rt::test]
async fn an_oversized_body_is_413_in_the_error_shape() {
    let app = spawn_app().await;
    let doc = fetch_document(&app).await;
    let body = json!({ "slug": "big", "display_name": "x".repeat(4 * 1024 * 1024) }).to_string();
    let resp = app
        .admin(Method::POST, "/tenants")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 413);
    let error: Value = resp.json().await.unwrap();
    assert_valid(&doc, &component("Error"), &error, "413");
    assert_eq!(error["error"]["code"], "payload_too_large");
    let a = admin_call(&app, "GET", "/tenants/big", None).await;
    assert_eq!(a.status, 404);
}
