//! The admin API's OpenAPI document against the real server: every route that `configure()`
//! registers is documented and every documented operation exists, answers with a documented
//! status, and its responses validate against the documented schemas.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{spawn_app, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

/// The routes `mcp_harbor::admin::configure()` registers under `/admin/v1`, as written there
/// (`{kind}` is one of [`KINDS`]). `configure_source_matches_the_route_list` keeps this in step.
const ROUTES: &[(&str, &str)] = &[
    ("GET", "/openapi.json"),
    ("POST", "/tenants"),
    ("GET", "/tenants"),
    ("GET", "/tenants/{slug}"),
    ("PATCH", "/tenants/{slug}"),
    ("DELETE", "/tenants/{slug}"),
    ("POST", "/tenants/{slug}/{kind}"),
    ("GET", "/tenants/{slug}/{kind}"),
    ("GET", "/tenants/{slug}/{kind}/{name}"),
    ("PUT", "/tenants/{slug}/{kind}/{name}"),
    ("DELETE", "/tenants/{slug}/{kind}/{name}"),
];

/// The catalog collections the `{kind}` segment accepts (`admin::catalog::kind_of`).
const KINDS: &[&str] = &["tools", "prompts", "resources", "resource-templates"];

const HTTP_METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The fresh tenant the walk runs against.
const WALK_TENANT: &str = "openapi-walk";

/// `(METHOD, documented path)` for every route the server has.
fn expected_operations() -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (method, path) in ROUTES {
        if path.contains("{kind}") {
            for kind in KINDS {
                out.insert((method.to_string(), path.replace("{kind}", kind)));
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
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }
}

/// Calls `url_path` (under /admin/v1) and checks that the route exists: no 405, and no
/// `no such admin endpoint` 404 from the admin scope's default service.
async fn call(
    app: &TestApp,
    method: &str,
    url_path: &str,
    body: Option<String>,
    token: bool,
) -> Answer {
    let method = Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = if token {
        app.admin(method.clone(), url_path)
    } else {
        app.http
            .request(method.clone(), format!("{}/admin/v1{url_path}", app.base))
    };
    if let Some(body) = body {
        req = req.header("content-type", "application/json").body(body);
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
    let source = include_str!("../src/admin/mod.rs");
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
        if !op.is_public() {
            assert!(
                codes.contains("401"),
                "{}: a token-protected operation must document 401",
                op.id()
            );
        }
        if op.path.contains("{slug}") {
            assert!(
                codes.contains("404"),
                "{}: tenant-scoped operations answer 404",
                op.id()
            );
        }
        if op.op.get("requestBody").is_some() {
            for code in ["400", "422"] {
                assert!(
                    codes.contains(code),
                    "{}: body-taking operations answer {code}",
                    op.id()
                );
            }
            assert!(
                op.request_example().is_some(),
                "{}: request body example",
                op.id()
            );
        }
        if op.params.iter().any(|p| p["name"] == "cursor") {
            assert!(
                codes.contains("422"),
                "{}: a bad cursor answers 422",
                op.id()
            );
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

/// The value of a path's `{name}`: the name in the example of the collection's POST.
fn entry_name(ops: &[Op], item_path: &str) -> String {
    let collection = item_path.trim_end_matches("/{name}");
    let create = ops
        .iter()
        .find(|o| o.method == "POST" && o.path == collection)
        .expect("a POST for the collection");
    create.request_example().unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string()
}

fn url_path(ops: &[Op], path: &str, slug: &str, name: Option<&str>) -> String {
    let name = name.map(str::to_string).unwrap_or_else(|| {
        if path.contains("{name}") {
            entry_name(ops, path)
        } else {
            String::new()
        }
    });
    path.replace("{slug}", slug).replace("{name}", &name)
}

/// Walk order: creations, reads, updates, then deletions (deepest first, the tenant last).
fn phase(op: &Op) -> (u8, i64) {
    let depth = op.path.matches('/').count() as i64;
    match op.method.as_str() {
        "POST" => (0, depth),
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
    for op in &ops {
        let path = url_path(&ops, &op.path, WALK_TENANT, None);
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
        }
        if op.path.contains("{slug}") {
            let missing = url_path(&ops, &op.path, "no-such-tenant", None);
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
        if op.path.ends_with("{name}") {
            let missing = url_path(&ops, &op.path, WALK_TENANT, Some("no-such-entry"));
            let a = call(&app, &op.method, &missing, example.clone(), true).await;
            assert_eq!(a.status, 404, "{} for a missing entry: {}", op.id(), a.text);
            record(&a, "missing entry");
        }
        if example.is_some() {
            let a = call(&app, &op.method, &path, Some("{not json".into()), true).await;
            assert_eq!(a.status, 400, "{} with a non-JSON body", op.id());
            assert_eq!(a.json()["error"]["code"], "bad_request");
            record(&a, "not JSON");
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
        if a.status == 201 {
            assert!(a.json()["name"].is_string() || a.json()["slug"].is_string());
            // Creating it again conflicts (and the 409 must be documented).
            let again = call(&app, &op.method, &path, example.clone(), true).await;
            assert_eq!(again.status, 409, "{} twice: {}", op.id(), again.text);
            assert_eq!(again.json()["error"]["code"], "conflict");
            record(&again, "duplicate");
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
    let tool = json!({ "name": "echo", "description": "Echoes.", "webhook": { "url": "http://127.0.0.1:9/hook" } });
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
