//! CORS for the MCP endpoints, so a browser page at an origin the edge admits (the server's or
//! the tenant's allowed origins, or a loopback origin) can call them: the MCP Inspector in its
//! direct mode, a tenant's own web app.
//!
//! An origin is admitted or refused by the same check as every request
//! (`EdgePolicy::check_host_and_origin`, DNS-rebinding protection): a preflight (`OPTIONS`)
//! from a refused origin is 403 like its request would be, and an admitted one learns the
//! endpoint's methods and may send the headers it asked for (MCP's own — `Mcp-Session-Id`,
//! `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`, `Last-Event-ID` — and
//! `Authorization`; the endpoint checks each header's value as it does for any client). Every
//! answer to an admitted origin, errors included (a 401's challenge is what starts a browser
//! client's authorization), names that origin and exposes the headers a client reads. Cookies
//! are never involved (a client authenticates with a bearer token), so no credentials are
//! allowed.

use actix_web::dev::ServiceResponse;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpMessage, HttpRequest, HttpResponse};

use super::endpoint::endpoint_of;
use super::{admitted_tenant, live_tenant, HttpError};

/// The response headers a browser client reads: the session, the negotiated revision, the
/// bearer challenge and how long to wait before a retry.
const EXPOSED: HeaderValue =
    HeaderValue::from_static("Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate, Retry-After");
/// How long a browser may reuse a preflight's answer (Chromium caps it at two hours).
const MAX_AGE: HeaderValue = HeaderValue::from_static("7200");

/// The `Origin` of a request the edge admitted (set by the extractor that admitted it).
#[derive(Clone)]
pub struct AdmittedOrigin(HeaderValue);

/// Notes that the edge admitted `req`'s `origin`, for [`add_headers`].
pub fn admitted(req: &HttpRequest, origin: &HeaderValue) {
    req.extensions_mut().insert(AdmittedOrigin(origin.clone()));
}

/// Adds the CORS headers to an answer to a request whose origin the edge admitted (nothing
/// otherwise: a refused origin gets no grant, a request without `Origin` needs none). Costs a
/// lookup in the request's (usually empty) extensions.
pub fn add_headers(response: &mut ServiceResponse) {
    let Some(AdmittedOrigin(origin)) = response.request().extensions().get().cloned() else {
        return;
    };
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, EXPOSED);
    if !headers.contains_key(header::VARY) {
        headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    }
}

/// `OPTIONS` on an endpoint: a preflight from an admitted origin is 204 with the endpoint's
/// methods and the headers it asked for (the origin itself is granted by [`add_headers`], as
/// on every answer); an `OPTIONS` without `Origin` is 204 with `Allow`. An unknown tenant is
/// 404, a refused Host or Origin 403.
pub async fn options(req: HttpRequest) -> Result<HttpResponse, HttpError> {
    let methods = endpoint_of(req.match_info().as_str())
        .map_or("OPTIONS", |(_, endpoint)| endpoint.methods());
    admitted_tenant(&req, live_tenant(&req)).await?;
    let mut response = HttpResponse::NoContent();
    response.insert_header((header::ALLOW, methods));
    if !req.headers().contains_key(header::ORIGIN) {
        return Ok(response.finish());
    }
    response
        .insert_header((header::ACCESS_CONTROL_ALLOW_METHODS, methods))
        .insert_header((header::ACCESS_CONTROL_MAX_AGE, MAX_AGE))
        .insert_header((
            header::VARY,
            "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
        ));
    if let Some(asked) = req.headers().get(header::ACCESS_CONTROL_REQUEST_HEADERS) {
        response.insert_header((header::ACCESS_CONTROL_ALLOW_HEADERS, asked.clone()));
    }
    Ok(response.finish())
}
