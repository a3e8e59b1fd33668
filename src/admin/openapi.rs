//! The OpenAPI 3.1 document of the admin API, served at `/admin/v1/openapi.json`. It is written
//! by hand next to the handlers; a test walks every documented operation against the real API.

use actix_web::HttpResponse;

pub const DOCUMENT: &str = include_str!("openapi.json");

pub async fn document() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(DOCUMENT)
}
