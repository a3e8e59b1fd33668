//! The 2025-03-26 fallback: such clients look for the authorization server at the root of the
//! MCP server's host (`/.well-known/oauth-authorization-server`, then `/authorize`, `/token`,
//! `/register`), ignoring the `/t/{tenant}` path. On a host the operator dedicates to one tenant
//! (`auth.tenant_hosts`), those root endpoints serve that tenant; elsewhere they are 404, since
//! the root of a shared host names no tenant.

use std::collections::HashMap;

use actix_web::{web, HttpRequest, HttpResponse, ResponseError};

use super::{authorize, clients, discovery, token, OAuthError, OAuthState};
use crate::auth::AuthService;

fn host_tenant(req: &HttpRequest, auth: &AuthService) -> Result<String, OAuthError> {
    let host = req.connection_info().host().to_ascii_lowercase();
    let name = host.rsplit_once(':').map_or(host.as_str(), |(h, port)| {
        if port.bytes().all(|b| b.is_ascii_digit()) {
            h
        } else {
            host.as_str()
        }
    });
    auth.config
        .tenant_hosts
        .get(name)
        .or_else(|| auth.config.tenant_hosts.get(&host))
        .cloned()
        .ok_or_else(|| {
            OAuthError::not_found(
                "no authorization server at the root of this host: tenants publish theirs at /.well-known/oauth-authorization-server/t/{tenant}",
            )
        })
}

/// `/.well-known/<doc>` without a path.
pub async fn metadata(
    req: HttpRequest,
    doc: web::Path<String>,
    auth: web::Data<AuthService>,
) -> Result<HttpResponse, OAuthError> {
    let slug = host_tenant(&req, &auth)?;
    discovery::appended(req, web::Path::from((slug, doc.into_inner())), auth).await
}

pub async fn authorize_show(
    req: HttpRequest,
    auth: web::Data<AuthService>,
    state: web::Data<OAuthState>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, OAuthError> {
    let slug = host_tenant(&req, &auth)?;
    Ok(authorize::show(req, web::Path::from(slug), auth, state, query).await)
}

pub async fn authorize_submit(
    req: HttpRequest,
    auth: web::Data<AuthService>,
    state: web::Data<OAuthState>,
    form: web::Form<HashMap<String, String>>,
) -> Result<HttpResponse, OAuthError> {
    let slug = host_tenant(&req, &auth)?;
    Ok(authorize::submit(req, web::Path::from(slug), auth, state, form).await)
}

pub async fn token(
    req: HttpRequest,
    auth: web::Data<AuthService>,
    state: web::Data<OAuthState>,
    body: web::Bytes,
) -> Result<HttpResponse, OAuthError> {
    let slug = host_tenant(&req, &auth)?;
    token::token(req, web::Path::from(slug), auth, state, body).await
}

pub async fn register(
    req: HttpRequest,
    auth: web::Data<AuthService>,
    state: web::Data<OAuthState>,
    body: web::Bytes,
) -> Result<HttpResponse, OAuthError> {
    let slug = host_tenant(&req, &auth)?;
    clients::register(req, web::Path::from(slug), auth, state, body).await
}

/// A root endpoint asked with a method it does not serve: a browser's preflight is answered;
/// otherwise 404 on a shared host (the root names no tenant, whatever the method), 405 with
/// `Allow` on a host dedicated to a tenant.
pub async fn refusal(
    req: HttpRequest,
    auth: web::Data<AuthService>,
    allow: &'static str,
) -> HttpResponse {
    if req.method() == actix_web::http::Method::OPTIONS {
        return super::preflight();
    }
    match host_tenant(&req, &auth) {
        Ok(_) => super::method_not_allowed(&req, allow),
        Err(e) => e.error_response(),
    }
}
