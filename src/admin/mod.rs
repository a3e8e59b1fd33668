//! The admin API under `/admin/v1`: JSON, authenticated with the admin bearer token. Tenants
//! (create, get, list, update, delete) and, per tenant, the published catalog: tools (webhook
//! backed), prompts, resources and resource templates; the tenant's URL-mode elicitations
//! (list, inspect, cancel); and the sealing keys of secrets at rest (counts, re-sealing). Errors are
//! `{"error": {"code", "message", "field"?}}` with 400 (unreadable, or an unknown query
//! parameter), 401, 404, 405, 409, 412 (`If-Match` names an older revision: `precondition`), 413,
//! 415 or 422 (invalid, naming the field). What a request
//! may be is stated once, in the OpenAPI document (`openapi`), which the server checks requests
//! against.

mod auth;
mod catalog;
mod elicitations;
mod keys;
pub mod oauth;
pub mod openapi;
mod precondition;
mod tenants;
mod upstreams;

pub use auth::{hash_token, Admin, AdminAuth, AdminTenant};

use actix_web::dev::Payload;
use actix_web::http::{header, Method, StatusCode};
use actix_web::{web, FromRequest, HttpMessage, HttpRequest, HttpResponse, ResponseError};
use futures_util::future::LocalBoxFuture;
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

pub use openapi::Documented;

use crate::store::StoreError;
use crate::tenant::TenantDirectory;

/// What admin handlers share.
pub struct AdminState {
    pub directory: TenantDirectory,
    /// Where outgoing calls may go (webhook URLs are checked against it).
    pub egress: crate::egress::Egress,
    /// Re-sealing secrets at rest under the first sealing key.
    pub rotation: std::sync::Arc<crate::reseal::Rotation>,
}

/// The largest request body: resources may carry 1 MiB of content (about 1.4 MiB as base64).
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Mounts the admin API.
pub fn configure(cfg: &mut web::ServiceConfig) {
    openapi::load();
    cfg.service(
        web::scope(openapi::BASE)
            .wrap(actix_web::middleware::from_fn(|req, next| {
                crate::transport::body_deadline::within(req, next, |patience| {
                    AdminError::body_timed_out(patience).error_response()
                })
            }))
            .app_data(web::QueryConfig::default().error_handler(|err, _| {
                AdminError::bad_request(format!("invalid query string: {err}")).into()
            }))
            .route("/openapi.json", web::get().to(openapi::document))
            .route("/sealing-keys", web::get().to(keys::usage))
            .route("/sealing-keys/rotate", web::post().to(keys::rotate))
            .route("/tenants", web::post().to(tenants::create))
            .route("/tenants", web::get().to(tenants::list))
            .route("/tenants/{slug}", web::get().to(tenants::get))
            .route("/tenants/{slug}", web::patch().to(tenants::update))
            .route("/tenants/{slug}", web::delete().to(tenants::delete))
            .route("/tenants/{slug}/users", web::post().to(oauth::create_user))
            .route("/tenants/{slug}/users", web::get().to(oauth::list_users))
            .route(
                "/tenants/{slug}/users/{username}",
                web::get().to(oauth::get_user),
            )
            .route(
                "/tenants/{slug}/users/{username}",
                web::patch().to(oauth::update_user),
            )
            .route(
                "/tenants/{slug}/users/{username}",
                web::delete().to(oauth::delete_user),
            )
            .route(
                "/tenants/{slug}/oauth-clients",
                web::post().to(oauth::create_client),
            )
            .route(
                "/tenants/{slug}/oauth-clients",
                web::get().to(oauth::list_clients),
            )
            .route(
                "/tenants/{slug}/oauth-clients/{client_id}",
                web::get().to(oauth::get_client),
            )
            .route(
                "/tenants/{slug}/oauth-clients/{client_id}",
                web::delete().to(oauth::delete_client),
            )
            .route(
                "/tenants/{slug}/signing-keys",
                web::get().to(oauth::list_keys),
            )
            .route(
                "/tenants/{slug}/signing-keys",
                web::post().to(oauth::rotate_key),
            )
            .route(
                "/tenants/{slug}/elicitations",
                web::get().to(elicitations::list),
            )
            .route(
                "/tenants/{slug}/elicitations/{id}",
                web::get().to(elicitations::get),
            )
            .route(
                "/tenants/{slug}/elicitations/{id}",
                web::delete().to(elicitations::cancel),
            )
            .route(
                "/tenants/{slug}/{kind:tools|prompts|resources|resource-templates}",
                web::post().to(catalog::create),
            )
            .route(
                "/tenants/{slug}/{kind:tools|prompts|resources|resource-templates}",
                web::get().to(catalog::list),
            )
            .route(
                "/tenants/{slug}/{kind:tools|prompts|resources|resource-templates}/{name}",
                web::get().to(catalog::get),
            )
            .route(
                "/tenants/{slug}/{kind:tools|prompts|resources|resource-templates}/{name}",
                web::put().to(catalog::replace),
            )
            .route(
                "/tenants/{slug}/{kind:tools|prompts|resources|resource-templates}/{name}",
                web::delete().to(catalog::delete),
            )
            .route("/tenants/{slug}/upstreams", web::get().to(upstreams::list))
            .route(
                "/tenants/{slug}/upstreams/{name}",
                web::get().to(upstreams::get),
            )
            .route(
                "/tenants/{slug}/upstreams/{name}",
                web::put().to(upstreams::put),
            )
            .route(
                "/tenants/{slug}/upstreams/{name}",
                web::patch().to(upstreams::patch),
            )
            .route(
                "/tenants/{slug}/upstreams/{name}",
                web::delete().to(upstreams::delete),
            )
            .route(
                "/tenants/{slug}/upstreams/{name}/approve",
                web::post().to(upstreams::approve),
            )
            .default_service(web::to(|req: HttpRequest| async move {
                openapi::no_route(&req)
            })),
    );
}

#[derive(Debug)]
pub struct AdminError {
    status: StatusCode,
    code: &'static str,
    message: String,
    field: Option<String>,
}

impl AdminError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        AdminError {
            status: StatusCode::BAD_REQUEST,
            code: "bad_request",
            message: message.into(),
            field: None,
        }
    }
    pub fn unauthorized() -> Self {
        AdminError {
            status: StatusCode::UNAUTHORIZED,
            code: "unauthorized",
            message: "a valid admin bearer token is required".into(),
            field: None,
        }
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        AdminError {
            status: StatusCode::NOT_FOUND,
            code: "not_found",
            message: message.into(),
            field: None,
        }
    }
    /// 405: the path is documented, for the methods in `allow` only.
    pub fn method_not_allowed(method: &Method, allow: &str) -> Self {
        AdminError {
            status: StatusCode::METHOD_NOT_ALLOWED,
            code: "method_not_allowed",
            message: format!("{method} is not allowed here (allowed: {allow})"),
            field: None,
        }
    }
    pub fn payload_too_large() -> Self {
        AdminError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            code: "payload_too_large",
            message: format!("the body is larger than {MAX_BODY_BYTES} bytes"),
            field: None,
        }
    }
    pub fn unsupported_media_type() -> Self {
        AdminError {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code: "unsupported_media_type",
            message: "send the body as JSON, with Content-Type: application/json".into(),
            field: None,
        }
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        AdminError {
            status: StatusCode::CONFLICT,
            code: "conflict",
            message: message.into(),
            field: None,
        }
    }
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        let field = field.into();
        AdminError {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            code: "invalid",
            message: format!("{field}: {}", message.into()),
            field: Some(field),
        }
    }
    /// 503 with `Retry-After`: the database cannot be reached right now; nothing was changed.
    pub fn unavailable() -> Self {
        AdminError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: "unavailable",
            message: "the database is unavailable right now; nothing was changed, retry shortly"
                .into(),
            field: None,
        }
    }

    /// 503 with `Retry-After`: a stored record this version cannot read (one a newer version
    /// wrote, during a rolling upgrade or after a rollback); nothing was changed. Another replica
    /// may read it; the log names what did not read.
    pub fn unreadable() -> Self {
        AdminError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: "unreadable",
            message: concat!(
                "this replica (mcp-harbor ",
                env!("CARGO_PKG_VERSION"),
                ") cannot read the stored record, perhaps written by a newer version; ",
                "nothing was changed: retry on an upgraded replica, or delete the tenant"
            )
            .into(),
            field: None,
        }
    }

    /// 408: the body did not arrive within `patience` of the request's head.
    pub fn body_timed_out(patience: std::time::Duration) -> Self {
        AdminError {
            status: StatusCode::REQUEST_TIMEOUT,
            code: "request_timeout",
            message: crate::transport::body_deadline::too_slow(patience),
            field: None,
        }
    }

    pub fn internal() -> Self {
        AdminError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: "internal",
            message: "internal error; see the server log".into(),
            field: None,
        }
    }
}

impl std::fmt::Display for AdminError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.message)
    }
}

impl ResponseError for AdminError {
    fn status_code(&self) -> StatusCode {
        self.status
    }
    fn error_response(&self) -> HttpResponse {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(field) = &self.field {
            error["field"] = json!(field);
        }
        let mut builder = HttpResponse::build(self.status);
        if self.status == StatusCode::UNAUTHORIZED {
            builder.insert_header(("www-authenticate", "Bearer realm=\"mcp-harbor-admin\""));
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            builder.insert_header(("retry-after", "2"));
        }
        builder.json(json!({ "error": error }))
    }
}

impl From<crate::auth::AuthError> for AdminError {
    fn from(e: crate::auth::AuthError) -> Self {
        match e {
            crate::auth::AuthError::Store(e) => e.into(),
            e => {
                tracing::error!(error = %e, "admin API: key operation failed");
                AdminError::internal()
            }
        }
    }
}

impl From<StoreError> for AdminError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => AdminError::not_found("not found"),
            StoreError::Conflict => AdminError::conflict("already exists"),
            e if e.is_unavailable() => {
                tracing::warn!(error = %e, "admin API: the database is unavailable");
                AdminError::unavailable()
            }
            StoreError::Corrupt(why) => {
                tracing::error!(error = %why, "admin API: a stored record does not read");
                AdminError::unreadable()
            }
            other => {
                tracing::error!(error = %other, "admin API store failure");
                AdminError::internal()
            }
        }
    }
}

/// A request body as the admin API takes it: `Content-Type: application/json` (415 otherwise) and
/// at most [`MAX_BODY_BYTES`] (413). [`parse_body`] reads it.
pub struct JsonBody(pub web::Bytes);

impl std::ops::Deref for JsonBody {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl FromRequest for JsonBody {
    type Error = AdminError;
    type Future = LocalBoxFuture<'static, Result<JsonBody, AdminError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let json = matches!(req.mime_type(), Ok(Some(m)) if m.type_() == "application" && m.subtype() == "json");
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        let mut payload = payload.take();
        Box::pin(async move {
            if !json {
                return Err(AdminError::unsupported_media_type());
            }
            if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
                return Err(AdminError::payload_too_large());
            }
            let mut body = web::BytesMut::new();
            while let Some(chunk) = payload.next().await {
                let chunk = chunk.map_err(|e| {
                    AdminError::bad_request(format!("the body could not be read: {e}"))
                })?;
                if body.len() + chunk.len() > MAX_BODY_BYTES {
                    return Err(AdminError::payload_too_large());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(JsonBody(body.freeze()))
        })
    }
}

/// JSON numbers with no fractional part (`1000.0`, `1e3`) are integers, as JSON Schema counts
/// them; serde's integer types take them only written without a fraction.
fn integral_numbers(value: &mut Value) {
    match value {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|f| n.is_f64() && f.fract() == 0.0) {
                if f.abs() < 9.0e15 {
                    *value = json!(f as i64);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_numbers),
        Value::Object(map) => map.values_mut().for_each(integral_numbers),
        _ => {}
    }
}

/// Reads a JSON body: 400 when it is not JSON; 422 naming the field when it does not match its
/// documented schema (`T::SCHEMA` in openapi.json) or has the wrong shape.
pub fn parse_body<T: DeserializeOwned + Documented>(body: &[u8]) -> Result<T, AdminError> {
    let mut value: Value = serde_json::from_slice(body)
        .map_err(|e| AdminError::bad_request(format!("the body is not valid JSON: {e}")))?;
    integral_numbers(&mut value);
    openapi::check_body(T::SCHEMA, &value)?;
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // A missing field is reported at its parent; serde names it in the message.
        let missing = inner
            .strip_prefix("missing field `")
            .and_then(|r| r.split('`').next());
        let field = match (path.as_str(), missing) {
            (".", Some(n)) => n.to_string(),
            (p, Some(n)) => format!("{p}.{n}"),
            (".", None) => String::new(),
            (p, None) => p.to_string(),
        };
        AdminError::invalid(
            if field.is_empty() {
                "body".into()
            } else {
                field
            },
            inner,
        )
    })
}

/// A tenant's or a user's display name: 1 to 200 characters, not blank, no U+0000 (which
/// PostgreSQL's text cannot hold).
pub fn validate_display_name(name: &str) -> Result<(), AdminError> {
    if name.trim().is_empty() || name.chars().count() > 200 || name.contains('\0') {
        return Err(AdminError::invalid(
            "display_name",
            "must be 1 to 200 characters, not blank, without U+0000",
        ));
    }
    Ok(())
}

#[derive(Debug, Deserialize)]
pub struct PageQuery {
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

impl PageQuery {
    /// The page size (1..=200, default 50) and the key to continue after.
    pub fn resolve(&self) -> Result<(u32, Option<String>), AdminError> {
        let limit = self.limit.unwrap_or(50);
        if !(1..=200).contains(&limit) {
            return Err(AdminError::invalid("limit", "must be between 1 and 200"));
        }
        let after = match &self.cursor {
            None => None,
            Some(c) => Some(key_of_cursor(c).ok_or_else(|| {
                AdminError::invalid("cursor", "is not a cursor this API returned")
            })?),
        };
        Ok((limit, after))
    }
}

/// The cursor that continues a list after `key`: the key (a slug, name, username or id, all
/// printable ASCII) in lowercase hex, so that any text of that form (the document's pattern) is a
/// position in the key order and has one spelling.
pub fn cursor_after(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The key a cursor continues after, if it is one.
fn key_of_cursor(cursor: &str) -> Option<String> {
    let digits = cursor.as_bytes();
    if !digits.len().is_multiple_of(2)
        || !digits
            .iter()
            .all(|d| matches!(d, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    let bytes = digits
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()?;
    if !bytes.iter().all(|b| (0x20..0x7f).contains(b)) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// `{items, next_cursor}`: a next cursor when the page is full.
pub fn page(items: Vec<Value>, last_key: Option<&str>, limit: u32) -> HttpResponse {
    let full = items.len() as u32 == limit;
    page_continuing(items, last_key.filter(|_| full))
}

/// A page whose next one starts after `next_after` (`None`: the last page).
pub fn page_continuing(items: Vec<Value>, next_after: Option<&str>) -> HttpResponse {
    HttpResponse::Ok().json(json!({ "items": items, "next_cursor": next_after.map(cursor_after) }))
}

/// After a committed write, applying it on this replica (and telling the others) failed: the
/// change stands, so the write is answered as done (a 503 would say nothing changed, and a
/// retry would conflict). Every replica catches up from the store within
/// `cluster.resync_secs`, and a tenant not live here is read from the store when asked for.
pub(crate) fn applied_later<T>(slug: &str, applied: Result<T, crate::store::StoreError>) {
    if let Err(e) = applied {
        tracing::warn!(tenant = %slug, error = %e,
            "a change is stored but could not be applied here yet; it is caught up from the store");
    }
}
