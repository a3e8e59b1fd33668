//! The OpenAPI 3.1 document of the admin API (`openapi.json`, written by hand next to the
//! handlers), served at `/admin/v1/openapi.json`, and the server's own reading of it: the document
//! is the single statement of what a request may be. Request bodies are checked against their
//! documented schemas (422 naming the field), query strings against the documented parameters (400
//! for one the operation does not take), and a method a documented path lacks answers 405 with
//! `Allow`. Handlers add only the rules a schema cannot state (cross-field and state rules, each
//! described in the document's prose). `tests/api/openapi.rs` and `scripts/contract.sh` hold the
//! document to the running server.

use std::collections::HashMap;
use std::sync::LazyLock;

use actix_web::http::Method;
use actix_web::{HttpRequest, HttpResponse, ResponseError};
use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{ValidationError, Validator};
use serde_json::{json, Value};

use super::AdminError;

pub const DOCUMENT: &str = include_str!("openapi.json");

/// Where the admin API is mounted; the document's paths are relative to it.
pub const BASE: &str = "/admin/v1";

/// A request body type and the component schema (`#/components/schemas/{SCHEMA}`) that documents
/// it.
pub trait Documented {
    const SCHEMA: &'static str;
}

/// The keys of a path item that name operations.
const HTTP_METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// One documented operation, as far as requests are checked against it.
struct Operation {
    method: Method,
    /// The documented path (after [`BASE`]), `{variables}` and all.
    path: String,
    /// The path's segments after [`BASE`]; `None` stands for a `{variable}`.
    segments: Vec<Option<String>>,
    /// The query parameters it takes.
    query: Vec<String>,
}

impl Operation {
    fn matches_path(&self, segments: &[&str]) -> bool {
        self.segments.len() == segments.len()
            && self
                .segments
                .iter()
                .zip(segments)
                // A variable takes one or more characters, as the router's `{slug}` does.
                .all(|(documented, given)| match documented.as_deref() {
                    None => !given.is_empty(),
                    Some(d) => d == *given,
                })
    }
}

struct Contract {
    operations: Vec<Operation>,
    /// A validator for each component schema that documents a request body.
    bodies: HashMap<String, Validator>,
    /// `{"components": …}` of the document, where error locations point.
    components: Value,
}

static CONTRACT: LazyLock<Contract> = LazyLock::new(|| {
    Contract::load(DOCUMENT)
        .unwrap_or_else(|e| panic!("src/admin/openapi.json is not a usable document: {e}"))
});

/// Reads the document now (a broken one stops the start instead of the first request).
pub fn load() {
    LazyLock::force(&CONTRACT);
}

impl Contract {
    fn load(text: &str) -> Result<Contract, String> {
        let doc: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let components = json!({ "components": { "schemas": doc["components"]["schemas"] } });
        let mut operations = Vec::new();
        let mut bodies = HashMap::new();
        let paths = doc["paths"].as_object().ok_or("no paths")?;
        for (path, item) in paths {
            let segments = path
                .split('/')
                .skip(1)
                .map(|s| (!s.starts_with('{')).then(|| s.to_string()))
                .collect::<Vec<_>>();
            let shared = item.get("parameters").and_then(Value::as_array);
            for (key, op) in item.as_object().ok_or("a path item is not an object")? {
                if !HTTP_METHODS.contains(&key.as_str()) {
                    continue;
                }
                let method = key
                    .to_uppercase()
                    .parse::<Method>()
                    .map_err(|e| e.to_string())?;
                let own = op.get("parameters").and_then(Value::as_array);
                let query = shared
                    .into_iter()
                    .chain(own)
                    .flatten()
                    .map(|p| resolve(&doc, p))
                    .filter(|p| p["in"] == "query")
                    .filter_map(|p| p["name"].as_str().map(str::to_string))
                    .collect();
                if let Some(name) = op
                    .pointer("/requestBody/content/application~1json/schema/$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.strip_prefix("#/components/schemas/"))
                {
                    if !bodies.contains_key(name) {
                        let mut root = components.clone();
                        root["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
                        root["$ref"] = json!(format!("#/components/schemas/{name}"));
                        let validator = jsonschema::draft202012::new(&root)
                            .map_err(|e| format!("components.schemas.{name}: {e}"))?;
                        bodies.insert(name.to_string(), validator);
                    }
                }
                operations.push(Operation {
                    method,
                    path: path.clone(),
                    segments: segments.clone(),
                    query,
                });
            }
        }
        Ok(Contract {
            operations,
            bodies,
            components,
        })
    }
}

/// Follows a local `$ref` of the document.
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix('#'))
        .and_then(|p| doc.pointer(p))
    {
        Some(target) => resolve(doc, target),
        None => v,
    }
}

fn path_segments(path: &str) -> Option<Vec<&str>> {
    let rest = path.strip_prefix(BASE)?;
    Some(rest.split('/').skip(1).collect())
}

/// Every documented path (after [`BASE`]), once each, as the document writes it.
pub fn documented_paths() -> Vec<&'static str> {
    let mut paths: Vec<&'static str> = CONTRACT
        .operations
        .iter()
        .map(|op| op.path.as_str())
        .collect();
    paths.dedup();
    paths
}

/// The methods of the documented path that `path` (a request path) names, if any.
pub fn documented_methods(path: &str) -> Vec<Method> {
    let Some(segments) = path_segments(path) else {
        return Vec::new();
    };
    CONTRACT
        .operations
        .iter()
        .filter(|op| op.matches_path(&segments))
        .map(|op| op.method.clone())
        .collect()
}

/// The answer to a request no route took: 405 with `Allow` when the path is documented for other
/// methods, 404 otherwise.
pub fn no_route(req: &HttpRequest) -> HttpResponse {
    let methods = documented_methods(req.path());
    if methods.is_empty() {
        return AdminError::not_found("no such admin endpoint").error_response();
    }
    let allow = methods
        .iter()
        .map(Method::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    let mut response = AdminError::method_not_allowed(req.method(), &allow).error_response();
    if let Ok(value) = allow.parse() {
        response
            .headers_mut()
            .insert(actix_web::http::header::ALLOW, value);
    }
    response
}

/// Unknown query parameters are refused (400), on every operation: the document lists the ones
/// each operation takes.
pub fn check_query(req: &HttpRequest) -> Result<(), AdminError> {
    if req.query_string().is_empty() {
        return Ok(());
    }
    let Some(segments) = path_segments(req.path()) else {
        return Ok(());
    };
    let Some(op) = CONTRACT
        .operations
        .iter()
        .find(|op| op.method == req.method() && op.matches_path(&segments))
    else {
        return Ok(());
    };
    for (name, _) in url::form_urlencoded::parse(req.query_string().as_bytes()) {
        if !op.query.iter().any(|q| *q == name) {
            let takes = if op.query.is_empty() {
                "this operation takes none".to_string()
            } else {
                format!("this operation takes {}", op.query.join(", "))
            };
            return Err(AdminError::bad_request(format!(
                "unknown query parameter {name:?}; {takes}"
            )));
        }
    }
    Ok(())
}

/// Checks a request body against the component schema `schema`: a 422 naming the first field that
/// does not match.
pub fn check_body(schema: &str, body: &Value) -> Result<(), AdminError> {
    let Some(validator) = CONTRACT.bodies.get(schema) else {
        tracing::error!(
            schema,
            "no documented request body uses this schema of openapi.json"
        );
        return Err(AdminError::internal());
    };
    match validator.iter_errors(body).next() {
        None => Ok(()),
        Some(error) => {
            let (pointer, message) = explain(&error.to_owned());
            Err(AdminError::invalid(field_name(body, &pointer), message))
        }
    }
}

/// A JSON pointer into `body` written as the API names fields: `limits.allowed_origins[1]`
/// (`body` for the whole of it).
fn field_name(body: &Value, pointer: &str) -> String {
    let mut name = String::new();
    let mut at = Some(body);
    for raw in pointer.split('/').skip(1) {
        let segment = raw.replace("~1", "/").replace("~0", "~");
        match at {
            Some(Value::Array(items)) => {
                name.push_str(&format!("[{segment}]"));
                at = segment.parse::<usize>().ok().and_then(|i| items.get(i));
            }
            other => {
                if !name.is_empty() {
                    name.push('.');
                }
                name.push_str(&segment);
                at = other.and_then(|v| v.get(&segment));
            }
        }
    }
    if name.is_empty() {
        "body".into()
    } else {
        name
    }
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// The schema at an error's schema location, and the nearest description at or above it.
fn schema_at(pointer: &str) -> (Option<&'static Value>, Option<&'static str>) {
    let components = &CONTRACT.components;
    let here = components.pointer(pointer);
    let mut path = pointer;
    loop {
        if let Some(d) = components
            .pointer(path)
            .and_then(|s| s.get("description"))
            .and_then(Value::as_str)
        {
            return (here, Some(d));
        }
        match path.rfind('/') {
            Some(i) if i > 0 => path = &path[..i],
            _ => return (here, None),
        }
    }
}

fn kind_name(kind: &TypeKind) -> String {
    let article = |t: &str| match t {
        "integer" | "object" | "array" => format!("an {t}"),
        "null" => "null".to_string(),
        other => format!("a {other}"),
    };
    match kind {
        TypeKind::Single(t) => article(t.as_str()),
        TypeKind::Multiple(set) => set
            .iter()
            .map(|t| article(t.as_str()))
            .collect::<Vec<_>>()
            .join(" or "),
    }
}

fn one_of(values: &[String]) -> String {
    match values {
        [only] => format!("must be {only}"),
        many => format!("must be one of {}", many.join(", ")),
    }
}

/// The JSON pointer of the offending value and what is wrong with it. For a value that matches
/// none of a `oneOf`'s alternatives, the alternative it was meant for speaks: the first that it
/// does not fail merely for being another kind of value (a `const` such as `mode`, or the type).
fn explain(error: &ValidationError<'static>) -> (String, String) {
    let at = error.instance_path().as_str().to_string();
    let message = match error.kind() {
        ValidationErrorKind::OneOfNotValid { context } | ValidationErrorKind::AnyOf { context } => {
            let misfit = |branch: &Vec<ValidationError<'static>>| {
                branch.iter().any(|e| match e.kind() {
                    ValidationErrorKind::Constant { .. } => true,
                    ValidationErrorKind::Type { .. } => e.instance_path().as_str() == at,
                    _ => false,
                })
            };
            if let Some(branch) = context.iter().find(|b| !b.is_empty() && !misfit(b)) {
                return explain(&branch[0]);
            }
            let consts: Vec<&ValidationError<'static>> = context
                .iter()
                .flatten()
                .filter(|e| matches!(e.kind(), ValidationErrorKind::Constant { .. }))
                .collect();
            if let Some(first) = consts.first() {
                let path = first.instance_path().as_str().to_string();
                let expected: Vec<String> = consts
                    .iter()
                    .filter(|e| e.instance_path().as_str() == path)
                    .filter_map(|e| match e.kind() {
                        ValidationErrorKind::Constant { expected_value } => {
                            Some(expected_value.to_string())
                        }
                        _ => None,
                    })
                    .collect();
                return (path, one_of(&expected));
            }
            let kinds: Vec<String> = context
                .iter()
                .flatten()
                .filter_map(|e| match e.kind() {
                    ValidationErrorKind::Type { kind } if e.instance_path().as_str() == at => {
                        Some(kind_name(kind))
                    }
                    _ => None,
                })
                .collect();
            if kinds.is_empty() {
                "matches none of the documented forms".to_string()
            } else {
                format!("must be {}", kinds.join(" or "))
            }
        }
        ValidationErrorKind::OneOfMultipleValid { .. } => {
            "matches more than one of the documented alternatives; give only one".to_string()
        }
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            return (format!("{at}/{}", escape(name)), "is required".to_string());
        }
        ValidationErrorKind::AdditionalProperties { unexpected }
        | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
            let name = unexpected.first().map(String::as_str).unwrap_or_default();
            return (
                format!("{at}/{}", escape(name)),
                "is not a field of this object".to_string(),
            );
        }
        ValidationErrorKind::Type { kind } => format!("must be {}", kind_name(kind)),
        ValidationErrorKind::MinLength { limit: 1 } => "must not be empty".to_string(),
        ValidationErrorKind::MinLength { limit: n } => {
            format!("must be at least {n} characters")
        }
        ValidationErrorKind::MaxLength { limit: n } => {
            format!("must be at most {n} characters")
        }
        ValidationErrorKind::Minimum { limit: n } => format!("must be at least {n}"),
        ValidationErrorKind::Maximum { limit: n } => format!("must be at most {n}"),
        ValidationErrorKind::ExclusiveMinimum { limit: n } => format!("must be more than {n}"),
        ValidationErrorKind::ExclusiveMaximum { limit: n } => format!("must be less than {n}"),
        ValidationErrorKind::MinItems { limit: n } => {
            format!("must have at least {n} item(s)")
        }
        ValidationErrorKind::MaxItems { limit: n } => {
            format!("must have at most {n} item(s)")
        }
        ValidationErrorKind::UniqueItems => "must not repeat an item".to_string(),
        ValidationErrorKind::Enum { options } => {
            let options: Vec<String> = options
                .as_array()
                .map(|o| o.iter().map(Value::to_string).collect())
                .unwrap_or_default();
            one_of(&options)
        }
        ValidationErrorKind::Constant { expected_value } => format!("must be {expected_value}"),
        ValidationErrorKind::Pattern { pattern } => {
            // The field's description says in words what the pattern says.
            let field = CONTRACT
                .components
                .pointer(parent(error.schema_path().as_str()));
            match field
                .and_then(|f| f.get("description"))
                .and_then(Value::as_str)
            {
                Some(d) => format!("is not as documented: {}", d.trim_end_matches('.')),
                None => format!("must match {pattern}"),
            }
        }
        ValidationErrorKind::Contains => {
            match schema_at(error.schema_path().as_str())
                .0
                .and_then(|s| s.get("const"))
            {
                Some(item) => format!("must include {item}"),
                None => "lacks an item the document requires".to_string(),
            }
        }
        _ => match schema_at(error.schema_path().as_str()).1 {
            Some(d) => format!("is not as documented: {}", d.trim_end_matches('.')),
            None => "does not match the documented schema".to_string(),
        },
    };
    (at, message)
}

fn parent(pointer: &str) -> &str {
    pointer.rfind('/').map_or("", |i| &pointer[..i])
}

pub async fn document(req: HttpRequest) -> Result<HttpResponse, AdminError> {
    check_query(&req)?;
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(DOCUMENT))
}

/// The document's string rules against the server's own checks of the same strings, over whole
/// small alphabets: a string the document accepts, the server accepts (and the other way where the
/// server check is the rule itself).
#[cfg(test)]
mod tests {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use serde_json::{json, Value};

    use super::DOCUMENT;

    fn doc() -> Value {
        serde_json::from_str(DOCUMENT).unwrap()
    }

    /// A matcher for the pattern at `pointer` in the document.
    fn pattern(pointer: &str) -> impl Fn(&str) -> bool {
        let doc = doc();
        let pattern = doc
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no pattern at {pointer}"))
            .to_string();
        let validator =
            jsonschema::draft202012::new(&json!({ "type": "string", "pattern": pattern })).unwrap();
        move |s: &str| validator.is_valid(&json!(s))
    }

    /// Every string of length `0..=max` over `alphabet`.
    fn strings(alphabet: &str, max: usize) -> Vec<String> {
        let chars: Vec<char> = alphabet.chars().collect();
        let mut all = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..max {
            last = last
                .iter()
                .flat_map(|s| chars.iter().map(move |c| format!("{s}{c}")))
                .collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    #[test]
    fn not_blank_means_a_character_rust_does_not_count_as_whitespace() {
        const NOT_BLANK: &str = "/components/schemas/ToolInput/properties/description/pattern";
        const NAME: &str = "/components/schemas/CreateTenant/properties/display_name/pattern";
        let not_blank = pattern(NOT_BLANK);
        let name = pattern(NAME);
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let s = c.to_string();
            assert_eq!(not_blank(&s), !s.trim().is_empty(), "U+{:04X}", c as u32);
            let named = super::super::validate_display_name(&s).is_ok();
            assert_eq!(name(&s), named, "display name U+{:04X}", c as u32);
        }
        assert!(not_blank("  x ") && not_blank("x\0") && name("  x ") && !name("x\0"));
        // Every other not-blank rule is one of the two patterns.
        let doc = doc();
        for (pointer, same_as) in [
            (
                "/components/schemas/UpdateTenant/properties/display_name/pattern",
                NAME,
            ),
            (
                "/components/schemas/CreateUser/properties/display_name/pattern",
                NAME,
            ),
            (
                "/components/schemas/UpdateUser/properties/display_name/pattern",
                NAME,
            ),
            (
                "/components/schemas/ToolInput/properties/title/pattern",
                NOT_BLANK,
            ),
            (
                "/components/schemas/PromptInput/properties/description/pattern",
                NOT_BLANK,
            ),
            (
                "/components/schemas/PromptMessage/properties/text/pattern",
                NOT_BLANK,
            ),
            (
                "/components/schemas/ResourceDef/properties/mime_type/pattern",
                NOT_BLANK,
            ),
            (
                "/components/schemas/ResourceTemplateDef/properties/mime_type/pattern",
                NOT_BLANK,
            ),
            (
                "/components/schemas/TextResolver/properties/text/pattern",
                NOT_BLANK,
            ),
            (
                "/components/schemas/AuthExternalInput/properties/audience/pattern",
                NOT_BLANK,
            ),
            (
                "/components/schemas/ClientMetadataInput/properties/client_name/pattern",
                NOT_BLANK,
            ),
        ] {
            assert_eq!(doc.pointer(pointer), doc.pointer(same_as), "{pointer}");
        }
    }

    #[test]
    fn base64_patterns_are_exactly_what_the_decoders_take() {
        let blob = pattern("/components/schemas/ResourceDef/properties/blob/pattern");
        let secret = pattern("/components/schemas/WebhookInput/properties/secret/pattern");
        // Letters from both sides of each boundary of the alphabet positions the patterns allow.
        let taken = |s: &str| crate::tools::webhook::check_secret(s).is_ok();
        // A secret's key is at least 16 bytes: the strings follow 15 bytes (20 characters).
        let key_start = "A".repeat(20);
        for s in strings("AQgwBbHIfg3489+/_-=", 4) {
            let decoded = STANDARD.decode(&s);
            assert_eq!(blob(&s), decoded.is_ok(), "blob {s:?}");
            for secret_text in [
                s.clone(),
                format!("{key_start}{s}"),
                format!("whsec_{key_start}{s}"),
            ] {
                assert_eq!(
                    secret(&secret_text),
                    taken(&secret_text),
                    "secret {secret_text:?}"
                );
            }
        }
        for n in 0..40usize {
            let bytes: Vec<u8> = (0..n).map(|i| (i * 37 + n) as u8).collect();
            assert!(blob(&STANDARD.encode(&bytes)));
            assert_eq!(
                secret(&format!("whsec_{}", STANDARD.encode(&bytes))),
                n >= crate::tools::webhook::MIN_SECRET_BYTES
            );
        }
    }

    #[test]
    fn if_match_is_exactly_what_the_server_reads() {
        let if_match = pattern("/components/parameters/IfMatch/schema/pattern");
        for s in strings("*W/\"7, \t", 5) {
            let parsed = super::super::precondition::parse(&s).is_some();
            assert_eq!(if_match(&s), parsed, "If-Match {s:?}");
        }
        for s in ["\"1764170000000\"", "\"1\", W/\"2\"", "W/\"\"", "*"] {
            assert!(if_match(s), "{s:?}");
        }
        let etag = pattern("/components/headers/ETag/schema/pattern");
        for revision in [0, 1, 1_764_170_000_000, -5] {
            assert!(etag(&super::super::precondition::etag(revision)));
        }
    }

    #[test]
    fn cursors_are_exactly_what_the_server_resolves() {
        let cursor = pattern("/components/parameters/Cursor/schema/pattern");
        let resolves = |s: &str| {
            super::super::PageQuery {
                limit: None,
                cursor: Some(s.to_string()),
            }
            .resolve()
            .is_ok()
        };
        for s in strings("0127aefF+-", 4) {
            assert_eq!(cursor(&s), resolves(&s), "cursor {s:?}");
        }
        for key in ["acme", "hc_0123", "a b~", "é", "a\u{7f}", "\0", ""] {
            let given = super::super::cursor_after(key);
            let printable = key.bytes().all(|b| (0x20..0x7f).contains(&b));
            assert_eq!(cursor(&given), printable, "{key:?}");
            assert_eq!(resolves(&given), printable, "{key:?}");
        }
    }

    #[test]
    fn urls_the_document_accepts_the_server_accepts() {
        let egress = pattern("/components/schemas/EgressUrl/pattern");
        let redirect = pattern("/components/schemas/RedirectUri/pattern");
        let hosts = [
            "a",
            "a.b",
            "a-b.c-d",
            "1a.b",
            "x1",
            "b.1",
            "1.2.3.4",
            "256.1.1.1",
            "127.0.0.1",
            "127.1",
            "localhost",
            "LOCALHOST",
            "[::1]",
            "[::2]",
            "xn--a",
            "a..b",
            "a.",
            "-a",
            "a-",
            "a b",
            "",
            "0x1",
            "a@b",
            "u:p@a",
        ];
        let ports = [
            "", ":0", ":80", ":65535", ":65536", ":99999", ":", ":08080", ":x",
        ];
        let rests = [
            "", "/", "/p?q#f", "?q", "#f", "/a b", "/é", "\\x", "/%zz", "x", "/\t",
        ];
        let mut accepted = 0;
        for scheme in ["https://", "http://", "ftp://", "HTTPS://", ""] {
            for host in hosts {
                for port in ports {
                    for rest in rests {
                        let url = format!("{scheme}{host}{port}{rest}");
                        if egress(&url) {
                            accepted += 1;
                            crate::egress::validate_url(&url, true)
                                .unwrap_or_else(|e| panic!("{url:?}: {e}"));
                        }
                        if redirect(&url) {
                            crate::oauth::clients::check_redirect_uri(&url)
                                .unwrap_or_else(|e| panic!("{url:?}: {e}"));
                        }
                    }
                }
            }
        }
        assert!(accepted > 100, "{accepted}");
        for url in [
            "https://hooks.acme.example/mcp/lookup-order",
            "http://127.0.0.1:8080/hook",
            "http://[::1]:9/x",
            "http://localhost/cb",
            "https://203.0.113.5:8443/",
        ] {
            assert!(egress(url), "{url}");
        }
        assert!(!egress("http://hooks.acme.example/h") && !egress(" https://a.example"));
        assert!(redirect("https://app.acme.example/cb?x=1") && !redirect("https://a.example/#f"));
    }

    #[test]
    fn uri_templates_the_document_accepts_the_server_accepts() {
        let template =
            pattern("/components/schemas/ResourceTemplateDef/properties/uri_template/pattern");
        let resource = pattern("/components/schemas/ResourceDef/properties/uri/pattern");
        let mut accepted = 0;
        for s in strings("a:{}_ ", 7) {
            let server = crate::catalog::stored::UriTemplate::parse(&s).is_ok()
                && super::super::catalog::validate_uri("uri_template", &s).is_ok();
            assert_eq!(template(&s), server, "{s:?}");
            accepted += usize::from(server);
            let server = super::super::catalog::validate_uri("uri", &s).is_ok();
            assert_eq!(resource(&s), server, "{s:?}");
        }
        assert!(accepted > 50, "{accepted}");
        assert!(template("tickets://{project}/issues/{id}"));
    }
}
