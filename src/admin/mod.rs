//! The admin API under `/admin/v1`: JSON, authenticated with the admin bearer token. Tenants
//! (create, get, list, update, delete) and, per tenant, the published catalog: tools (webhook
//! backed), prompts, resources and resource templates; the tenant's URL-mode elicitations
//! (list, inspect, cancel). Errors are
//! `{"error": {"code", "message", "field"?}}` with 400 (unreadable), 401, 404, 409 or 422
//! (invalid, naming the field).

mod auth;
mod catalog;
mod elicitations;
pub mod oauth;
pub mod openapi;
mod tenants;

pub use auth::{hash_token, Admin, AdminAuth};

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse, ResponseError};
use base64::Engine;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::store::StoreError;
use crate::tenant::TenantDirectory;

/// What admin handlers share.
pub struct AdminState {
    pub directory: TenantDirectory,
    pub allow_http_loopback_webhooks: bool,
}

/// Mounts the admin API.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/admin/v1")
            // Resources may carry 1 MiB of content (about 1.4 MiB as base64).
            .app_data(web::PayloadConfig::new(4 * 1024 * 1024))
            .app_data(web::QueryConfig::default().error_handler(|err, _| {
                AdminError::bad_request(format!("invalid query string: {err}")).into()
            }))
            .route("/openapi.json", web::get().to(openapi::document))
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
            .route("/tenants/{slug}/{kind}", web::post().to(catalog::create))
            .route("/tenants/{slug}/{kind}", web::get().to(catalog::list))
            .route("/tenants/{slug}/{kind}/{name}", web::get().to(catalog::get))
            .route(
                "/tenants/{slug}/{kind}/{name}",
                web::put().to(catalog::replace),
            )
            .route(
                "/tenants/{slug}/{kind}/{name}",
                web::delete().to(catalog::delete),
            )
            .default_service(web::to(|| async {
                AdminError::not_found("no such admin endpoint").error_response()
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

impl From<StoreError> for AdminError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => AdminError::not_found("not found"),
            StoreError::Conflict => AdminError::conflict("already exists"),
            e if e.is_unavailable() => {
                tracing::warn!(error = %e, "admin API: the database is unavailable");
                AdminError::unavailable()
            }
            other => {
                tracing::error!(error = %other, "admin API store failure");
                AdminError::internal()
            }
        }
    }
}

/// Reads a JSON body: 400 when it is not JSON, 422 naming the field when it has the wrong shape.
pub fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, AdminError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| AdminError::bad_request(format!("the body is not valid JSON: {e}")))?;
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
            Some(c) => Some(
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(c)
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .ok_or_else(|| {
                        AdminError::invalid("cursor", "is not a cursor this API returned")
                    })?,
            ),
        };
        Ok((limit, after))
    }
}

/// `{items, next_cursor}`: a next cursor when the page is full.
pub fn page(items: Vec<Value>, last_key: Option<&str>, limit: u32) -> HttpResponse {
    let next = (items.len() as u32 == limit)
        .then(|| last_key.map(|k| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(k)))
        .flatten();
    HttpResponse::Ok().json(json!({ "items": items, "next_cursor": next }))
}
