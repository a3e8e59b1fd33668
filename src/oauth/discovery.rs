//! Discovery documents: Protected Resource Metadata (RFC 9728) for each tenant endpoint,
//! Authorization Server Metadata (RFC 8414) and OpenID Connect discovery for each `oauth`
//! tenant's issuer, at the path-inserted URLs (`/.well-known/<doc>/t/{tenant}[/mcp]`) and the
//! appended ones clients also try (`/t/{tenant}/.well-known/<doc>`), with or without a trailing
//! slash; and the tenant's JWKS.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Value};

use super::{as_tenant, resolve, OAuthError};
use crate::auth::{self, AuthService};
use crate::store::TenantAuth;

pub(super) const PRM: &str = "oauth-protected-resource";
pub(super) const ASM: &str = "oauth-authorization-server";
pub(super) const OIDC: &str = "openid-configuration";

/// A metadata document. Its URLs come from `auth.public_url`, or else from the request's Host
/// (and forwarding headers): then a shared cache must not hand one client's answer to another
/// (a forged `X-Forwarded-Host` would otherwise point everyone's sign-in elsewhere).
fn json_doc(auth: &AuthService, v: Value) -> HttpResponse {
    let mut response = HttpResponse::Ok();
    if auth.config.public_url.is_empty() {
        response
            .insert_header((header::CACHE_CONTROL, "private, max-age=300"))
            .insert_header((
                header::VARY,
                "Host, Forwarded, X-Forwarded-Host, X-Forwarded-Proto",
            ));
    } else {
        response.insert_header((header::CACHE_CONTROL, "public, max-age=300"));
    }
    response.json(v)
}

/// `/.well-known/<doc>/t/{tenant}[/<endpoint>][/]` (RFC 8414 / RFC 9728 path insertion).
pub async fn inserted(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    auth: web::Data<AuthService>,
) -> Result<HttpResponse, OAuthError> {
    let (doc, rest) = path.into_inner();
    let rest = rest.trim_end_matches('/');
    let mut parts = rest.split('/');
    let (Some("t"), Some(slug)) = (parts.next(), parts.next()) else {
        return Err(OAuthError::not_found(
            "no metadata here: tenants publish theirs under /.well-known/<document>/t/{tenant}",
        ));
    };
    let endpoint = parts.next();
    if parts.next().is_some() {
        return Err(OAuthError::not_found("no such metadata document"));
    }
    document(&req, &auth, &doc, slug, endpoint).await
}

/// `/t/{tenant}/.well-known/<doc>[/]`.
pub async fn appended(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    auth: web::Data<AuthService>,
) -> Result<HttpResponse, OAuthError> {
    let (slug, doc) = path.into_inner();
    document(&req, &auth, &doc, &slug, None).await
}

/// `/t/{tenant}/.well-known/<doc>/<endpoint>` (a resource-metadata variant some clients build).
pub async fn appended_with_rest(
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
    auth: web::Data<AuthService>,
) -> Result<HttpResponse, OAuthError> {
    let (slug, doc, rest) = path.into_inner();
    let rest = rest.trim_end_matches('/');
    let endpoint = (!rest.is_empty()).then_some(rest);
    if endpoint.is_some_and(|e| e.contains('/')) {
        return Err(OAuthError::not_found("no such metadata document"));
    }
    document(&req, &auth, &doc, &slug, endpoint).await
}

async fn document(
    req: &HttpRequest,
    auth: &AuthService,
    doc: &str,
    slug: &str,
    endpoint: Option<&str>,
) -> Result<HttpResponse, OAuthError> {
    match (doc, endpoint) {
        (PRM, None | Some("mcp" | "sse")) => resource_metadata(req, auth, slug, endpoint).await,
        (ASM | OIDC, None) => {
            let t = as_tenant(req, slug, auth).await?;
            Ok(json_doc(
                auth,
                server_metadata(&t.issuer, &t.settings.required_scopes, doc == OIDC),
            ))
        }
        _ => Err(OAuthError::not_found("no such metadata document")),
    }
}

async fn resource_metadata(
    req: &HttpRequest,
    auth: &AuthService,
    slug: &str,
    endpoint: Option<&str>,
) -> Result<HttpResponse, OAuthError> {
    let tenant = resolve(req, slug).await?;
    let base = auth::base_url(req, &auth.config);
    let resource = match endpoint {
        Some(e) => format!("{}/{e}", auth::issuer(&base, slug)),
        None => auth::issuer(&base, slug),
    };
    let (servers, scopes) = match &*tenant.policy.auth() {
        TenantAuth::None => {
            return Err(OAuthError::not_found(format!(
                "tenant {slug:?} is open: it needs no authorization"
            )))
        }
        // The scopes this resource needs, not every scope the server knows: clients ask for
        // what is listed here (the authorization page: the minimal set for basic
        // functionality; offline_access SHOULD NOT be listed). Refresh tokens do not need it.
        TenantAuth::Oauth(o) => (vec![auth::issuer(&base, slug)], o.required_scopes.clone()),
        TenantAuth::External(e) => (vec![e.issuer.clone()], e.required_scopes.clone()),
    };
    let mut doc = json!({
        "resource": resource,
        "authorization_servers": servers,
        "bearer_methods_supported": ["header"],
        "resource_name": tenant.slug.to_string(),
    });
    if !scopes.is_empty() {
        doc["scopes_supported"] = json!(scopes);
    }
    Ok(json_doc(auth, doc))
}

/// Scopes an `oauth` tenant's clients may ask for.
pub fn supported_scopes(required: &[String]) -> Vec<String> {
    let mut scopes: Vec<String> = required.to_vec();
    for s in ["openid", "profile", "offline_access"] {
        if !scopes.iter().any(|x| x == s) {
            scopes.push(s.into());
        }
    }
    scopes
}

/// RFC 8414 metadata (plus the OpenID Provider fields when `oidc`).
pub fn server_metadata(issuer: &str, required: &[String], oidc: bool) -> Value {
    let mut doc = json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/oauth/authorize"),
        "token_endpoint": format!("{issuer}/oauth/token"),
        "registration_endpoint": format!("{issuer}/oauth/register"),
        "revocation_endpoint": format!("{issuer}/oauth/revoke"),
        "jwks_uri": format!("{issuer}/oauth/jwks"),
        "scopes_supported": supported_scopes(required),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
        "revocation_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": true,
        "client_id_metadata_document_supported": true,
    });
    if oidc {
        if let Some(o) = doc.as_object_mut() {
            o.insert("subject_types_supported".into(), json!(["public"]));
            o.insert(
                "id_token_signing_alg_values_supported".into(),
                json!([auth::keys::ALG]),
            );
            o.insert(
                "claims_supported".into(),
                json!(["iss", "sub", "aud", "exp", "iat", "nonce", "name"]),
            );
        }
    }
    doc
}

/// `/t/{tenant}/oauth/jwks`: the tenant's public keys (a first key is made on demand).
pub async fn jwks(
    req: HttpRequest,
    slug: web::Path<String>,
    auth: web::Data<AuthService>,
) -> Result<HttpResponse, OAuthError> {
    let t = as_tenant(&req, &slug, &auth).await?;
    let keys = auth
        .keys
        .signing(&auth.store, &auth.sealer, &t.handle.slug)
        .await?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "public, max-age=60"))
        .json(&keys.jwks))
}
