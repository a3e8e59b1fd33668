//! `/t/{tenant}/oauth/token` and `/t/{tenant}/oauth/revoke`: the authorization code grant
//! (single-use code, PKCE S256 verified, redirect URI and resource as authorized; a replayed
//! code revokes what it issued), refresh tokens (opaque, hashed, rotated on every use; an old
//! one presented again revokes its whole family), client credentials for confidential clients,
//! and RFC 7009 revocation.

use std::collections::HashMap;

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use base64::Engine;
use serde_json::{json, Value};
use sha2::Digest;

use super::clients::{authenticate, Client, MACHINE_CLIENTS};
use super::discovery::supported_scopes;
use super::{as_tenant, same, AsTenant, OAuthError, OAuthState, INVALID_TARGET};
use crate::auth::tokens::{now_secs, sign, AccessClaims};
use crate::auth::{hash_secret, random_token, AuthService};
use crate::store::{now_millis, GrantRecord, OAuthStore, Redeemed, RegistrationPolicy};

/// The parameters of an `application/x-www-form-urlencoded` body; a repeated parameter is an
/// `invalid_request` (RFC 6749 §3.1). Public for the fuzz targets.
pub fn form_map(body: &[u8]) -> Result<HashMap<String, String>, OAuthError> {
    let mut map = HashMap::new();
    for (k, v) in url::form_urlencoded::parse(body) {
        if map.insert(k.to_string(), v.to_string()).is_some() {
            return Err(OAuthError::bad(
                "invalid_request",
                format!("parameter {k} is repeated"),
            ));
        }
    }
    Ok(map)
}

fn check_form(req: &HttpRequest) -> Result<(), OAuthError> {
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if ct.split(';').next().map(str::trim) != Some("application/x-www-form-urlencoded") {
        return Err(OAuthError::bad(
            "invalid_request",
            "the body must be application/x-www-form-urlencoded",
        ));
    }
    Ok(())
}

pub async fn token(
    req: HttpRequest,
    slug: web::Path<String>,
    auth: web::Data<AuthService>,
    state: web::Data<OAuthState>,
    body: web::Bytes,
) -> Result<HttpResponse, OAuthError> {
    // A tenant that is not served here counts nowhere: its name comes from the path, and a
    // series per made-up name would grow the metrics without bound.
    let t = as_tenant(&req, &slug, &auth).await?;
    let outcome = grant(&req, &t, &auth, &state, &body).await;
    let grant_type = url::form_urlencoded::parse(&body)
        .find(|(k, _)| k == "grant_type")
        .map(|(_, v)| v.into_owned())
        .filter(|g| {
            matches!(
                g.as_str(),
                "authorization_code" | "refresh_token" | "client_credentials"
            )
        })
        .unwrap_or_else(|| "other".into());
    let result = match &outcome {
        Ok(_) => "issued".to_string(),
        Err(e) => e.error.to_string(),
    };
    crate::observe::metrics::global().oauth_grant(&t.handle.slug, &grant_type, &result);
    outcome
}

async fn grant(
    req: &HttpRequest,
    t: &AsTenant,
    auth: &AuthService,
    state: &OAuthState,
    body: &[u8],
) -> Result<HttpResponse, OAuthError> {
    check_form(req)?;
    let form = form_map(body)?;
    let client = authenticate(auth, &state.documents, &t.handle.slug, req, &form).await?;
    let grant_type = form.get("grant_type").map(String::as_str).unwrap_or("");
    if !client.allows_grant(grant_type)
        && matches!(
            grant_type,
            "authorization_code" | "refresh_token" | "client_credentials"
        )
    {
        return Err(OAuthError::bad(
            "unauthorized_client",
            format!("this client may not use the {grant_type} grant"),
        ));
    }
    match grant_type {
        "authorization_code" => code_grant(t, auth, &client, &form).await,
        "refresh_token" => refresh_grant(t, auth, &client, &form).await,
        "client_credentials" => client_credentials(t, auth, &client, &form).await,
        "" => Err(OAuthError::bad("invalid_request", "grant_type is required")),
        other => Err(OAuthError::bad(
            "unsupported_grant_type",
            format!("unsupported grant type {other:?}"),
        )),
    }
}

/// PKCE S256 (RFC 7636 §4.6): `verifier` is well formed (43 to 128 unreserved characters) and
/// hashes to `challenge`. Public for the fuzz targets.
pub fn pkce_ok(verifier: &str, challenge: &str) -> bool {
    let well_formed = (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
    let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()));
    well_formed && same(&computed, challenge)
}

fn invalid_grant(description: &str) -> OAuthError {
    OAuthError::bad("invalid_grant", description)
}

async fn code_grant(
    t: &AsTenant,
    auth: &AuthService,
    client: &Client,
    form: &HashMap<String, String>,
) -> Result<HttpResponse, OAuthError> {
    let code = form
        .get("code")
        .ok_or_else(|| OAuthError::bad("invalid_request", "code is required"))?;
    let now = now_millis();
    let record = match auth
        .store
        .redeem_code(&t.handle.slug, &hash_secret(code), now)
        .await?
    {
        Redeemed::Unknown => return Err(invalid_grant("unknown authorization code")),
        Redeemed::Reused(r) => {
            // A replayed code: revoke what its first use issued.
            if let Some(family) = r.grant.get("family").and_then(Value::as_str) {
                auth.store
                    .revoke_family(&t.handle.slug, family, now)
                    .await?;
            }
            tracing::warn!(tenant = %t.handle.slug, client_id = %client.client_id, "authorization code replayed; its tokens are revoked");
            return Err(invalid_grant("authorization code already used"));
        }
        Redeemed::Fresh(r) => r,
    };
    if record.expires_at < now {
        return Err(invalid_grant("authorization code expired"));
    }
    if record.client_id != client.client_id {
        return Err(invalid_grant(
            "authorization code was issued to another client",
        ));
    }
    let g = &record.grant;
    let text = |k: &str| g.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    // RFC 6749 §4.1.3: present when the authorization request named it, and identical.
    match form.get("redirect_uri") {
        None if g["redirect_uri_sent"] == true => {
            return Err(invalid_grant(
                "redirect_uri is required: the authorization request named one",
            ))
        }
        Some(sent) if *sent != text("redirect_uri") => {
            return Err(invalid_grant(
                "redirect_uri does not match the authorization request",
            ))
        }
        _ => {}
    }
    let verifier = form.get("code_verifier").map(String::as_str).unwrap_or("");
    if !pkce_ok(verifier, &text("code_challenge")) {
        return Err(invalid_grant("PKCE verification failed (code_verifier)"));
    }
    let resource = text("resource");
    if let Some(r) = form.get("resource") {
        if !super::same_resource(r, &resource) {
            return Err(OAuthError::bad(
                "invalid_target",
                "resource differs from the authorized one",
            ));
        }
    }
    signed_in_still(t, auth, g).await?;
    let grant = json!({
        "scope": text("scope"), "resource": resource, "subject": text("subject"),
        "name": g.get("name"), "nonce": g.get("nonce"), "family": text("family"),
        "credential": g.get("credential"),
    });
    issue(t, auth, client, &grant, None, &text("family"), true).await
}

async fn refresh_grant(
    t: &AsTenant,
    auth: &AuthService,
    client: &Client,
    form: &HashMap<String, String>,
) -> Result<HttpResponse, OAuthError> {
    let token = form
        .get("refresh_token")
        .ok_or_else(|| OAuthError::bad("invalid_request", "refresh_token is required"))?;
    let hash = hash_secret(token);
    let now = now_millis();
    // A request the token could never satisfy (a wider scope, another resource) is refused
    // before the token is redeemed: the client keeps it (else its retry would count as reuse
    // and revoke the family).
    if let Some(record) = auth.store.get_refresh(&t.handle.slug, &hash).await? {
        let usable = record.used_at.is_none()
            && record.revoked_at.is_none()
            && record.client_id == client.client_id
            && record.expires_at >= now;
        if usable {
            refresh_scope(&record.grant, form)?;
            // Checked before the token is redeemed: a store outage here leaves the client its
            // token to retry with; a user gone (or a password changed) ends the family.
            if let Err(e) = signed_in_still(t, auth, &record.grant).await {
                if e.error == "invalid_grant" {
                    auth.store
                        .revoke_family(&t.handle.slug, &record.family, now)
                        .await?;
                }
                return Err(e);
            }
        }
    }
    let record = match auth
        .store
        .redeem_refresh(&t.handle.slug, &hash, now)
        .await?
    {
        Redeemed::Unknown => return Err(invalid_grant("unknown refresh token")),
        Redeemed::Reused(r) => {
            if r.revoked_at.is_none() || r.used_at.is_some() {
                auth.store
                    .revoke_family(&t.handle.slug, &r.family, now)
                    .await?;
                tracing::warn!(tenant = %t.handle.slug, client_id = %r.client_id, "refresh token reused; its family is revoked");
            }
            return Err(invalid_grant("refresh token already used or revoked"));
        }
        Redeemed::Fresh(r) => r,
    };
    if record.client_id != client.client_id {
        auth.store
            .revoke_family(&t.handle.slug, &record.family, now)
            .await?;
        return Err(invalid_grant("refresh token was issued to another client"));
    }
    if record.expires_at < now {
        return Err(invalid_grant("refresh token expired"));
    }
    let scope = refresh_scope(&record.grant, form)?;
    let mut grant = record.grant.clone();
    if let Some(o) = grant.as_object_mut() {
        o.remove("nonce");
    }
    // The new refresh token keeps the grant's whole scope (RFC 6749 §6: its scope MUST be
    // identical to the one redeemed); only the access token gets a narrower one asked for.
    issue(t, auth, client, &grant, scope, &record.family, true).await
}

/// What a grant keeps of the password a tenant user signed in with: a digest of its stored
/// hash (salted, so any change of password changes it), never the hash itself.
pub(super) fn credential_stamp(password_hash: &str) -> String {
    hash_secret(password_hash)
}

/// A grant made by a tenant user's sign-in holds while the user exists with the password they
/// signed in with: deleting the user or changing the password ends its codes and refresh
/// tokens (a new user given the same name inherits nothing). Grants from the tenant's
/// identity provider or a client's own credentials carry no stamp.
async fn signed_in_still(
    t: &AsTenant,
    auth: &AuthService,
    grant: &Value,
) -> Result<(), OAuthError> {
    let Some(stamp) = grant.get("credential").and_then(Value::as_str) else {
        return Ok(());
    };
    let subject = grant.get("subject").and_then(Value::as_str).unwrap_or("");
    let user = auth.store.get_user(&t.handle.slug, subject).await?;
    match user {
        Some(u) if credential_stamp(&u.password_hash) == stamp => Ok(()),
        Some(_) => Err(invalid_grant(
            "the user's password changed since this grant",
        )),
        None => Err(invalid_grant("the user no longer exists")),
    }
}

/// What a refresh request may ask of a grant: a scope within the granted one (the access
/// token's, when it asks one) and the authorized resource.
fn refresh_scope<'f>(
    grant: &Value,
    form: &'f HashMap<String, String>,
) -> Result<Option<&'f str>, OAuthError> {
    if let Some(r) = form.get("resource") {
        let authorized = grant.get("resource").and_then(Value::as_str);
        if !authorized.is_some_and(|a| super::same_resource(r, a)) {
            return Err(OAuthError::bad(
                "invalid_target",
                "resource differs from the authorized one",
            ));
        }
    }
    let Some(requested) = form.get("scope") else {
        return Ok(None);
    };
    let granted: Vec<&str> = grant
        .get("scope")
        .and_then(Value::as_str)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    if requested.split_whitespace().any(|s| !granted.contains(&s)) {
        return Err(OAuthError::bad(
            "invalid_scope",
            "a refresh cannot widen the granted scope",
        ));
    }
    Ok(Some(requested.as_str()))
}

async fn client_credentials(
    t: &AsTenant,
    auth: &AuthService,
    client: &Client,
    form: &HashMap<String, String>,
) -> Result<HttpResponse, OAuthError> {
    if client.secret_hash.is_none() {
        return Err(OAuthError::bad(
            "unauthorized_client",
            "client_credentials needs a confidential client",
        ));
    }
    // Registered by anyone (possibly before registration refused this grant): no user, no token.
    if client.self_registered && t.settings.registration == RegistrationPolicy::Open {
        return Err(OAuthError::bad("unauthorized_client", MACHINE_CLIENTS));
    }
    let supported = supported_scopes(&t.settings.required_scopes);
    let scope = match form
        .get("scope")
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
    {
        Some(s) => s.to_string(),
        None => t.settings.required_scopes.join(" "),
    };
    if let Some(bad) = scope
        .split_whitespace()
        .find(|s| !supported.iter().any(|x| x == s))
    {
        return Err(OAuthError::bad(
            "invalid_scope",
            format!("unknown scope {bad}"),
        ));
    }
    let resource = t
        .resource(form.get("resource"))
        .ok_or_else(|| OAuthError::bad("invalid_target", INVALID_TARGET))?;
    let grant = json!({ "scope": scope, "resource": resource, "subject": client.client_id });
    issue(t, auth, client, &grant, None, "", false).await
}

/// Signs an access token (and an ID token when `openid` was granted), and stores a new refresh
/// token of `family` when `refresh`.
async fn issue(
    t: &AsTenant,
    auth: &AuthService,
    client: &Client,
    grant: &Value,
    access_scope: Option<&str>,
    family: &str,
    refresh: bool,
) -> Result<HttpResponse, OAuthError> {
    let keys = auth
        .keys
        .signing(&auth.store, &auth.sealer, &t.handle.slug)
        .await?;
    // A client anyone registered is kept from its first token on (unused ones are swept); one
    // the sweep took since it was read gets none (its refresh token would name no client).
    if client.self_registered
        && !client.confirmed
        && !auth
            .store
            .confirm_client(&t.handle.slug, &client.client_id, now_millis())
            .await?
    {
        return Err(OAuthError::invalid_client("unknown client", false));
    }
    let text = |k: &str| {
        grant
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let now = now_secs();
    let ttl = auth.config.access_token_ttl_secs as i64;
    // The access token's scope: the grant's, or the narrower one a refresh asked for.
    let scope = access_scope.map_or_else(|| text("scope"), str::to_string);
    let name = grant
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_string);
    let claims = AccessClaims {
        iss: t.issuer.clone(),
        sub: text("subject"),
        aud: text("resource"),
        exp: now + ttl,
        iat: now,
        jti: uuid::Uuid::new_v4().to_string(),
        client_id: client.client_id.clone(),
        scope: scope.clone(),
        name: name.clone(),
    };
    let access_token = sign(&keys, &claims)?;
    let mut body = json!({
        "access_token": access_token,
        "token_type": "Bearer",
        "expires_in": ttl,
        "scope": scope,
    });
    if scope.split_whitespace().any(|s| s == "openid") {
        let id = json!({
            "iss": t.issuer, "sub": claims.sub, "aud": client.client_id,
            "exp": now + ttl, "iat": now, "auth_time": now,
            "nonce": grant.get("nonce").filter(|n| !n.is_null()),
            "name": name,
        });
        body["id_token"] = json!(sign(&keys, &id)?);
    }
    if refresh && client.allows_grant("refresh_token") && !family.is_empty() {
        let token = random_token();
        let record = GrantRecord {
            token_hash: hash_secret(&token),
            family: family.to_string(),
            client_id: client.client_id.clone(),
            grant: grant.clone(),
            expires_at: now_millis() + auth.config.refresh_token_ttl_secs as i64 * 1000,
            used_at: None,
            revoked_at: None,
        };
        auth.store.insert_refresh(&t.handle.slug, &record).await?;
        body["refresh_token"] = json!(token);
    }
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::PRAGMA, "no-cache"))
        .json(body))
}

/// RFC 7009: a refresh token revokes its family; anything else (access tokens are short-lived
/// JWTs, unknown tokens) is answered 200 as the RFC asks.
pub async fn revoke(
    req: HttpRequest,
    slug: web::Path<String>,
    auth: web::Data<AuthService>,
    state: web::Data<OAuthState>,
    body: web::Bytes,
) -> Result<HttpResponse, OAuthError> {
    let t = as_tenant(&req, &slug, &auth).await?;
    check_form(&req)?;
    let form = form_map(&body)?;
    let client = authenticate(&auth, &state.documents, &t.handle.slug, &req, &form).await?;
    let token = form
        .get("token")
        .ok_or_else(|| OAuthError::bad("invalid_request", "token is required"))?;
    if let Some(r) = auth
        .store
        .get_refresh(&t.handle.slug, &hash_secret(token))
        .await?
    {
        if r.client_id == client.client_id {
            auth.store
                .revoke_family(&t.handle.slug, &r.family, now_millis())
                .await?;
            tracing::info!(tenant = %t.handle.slug, client_id = %client.client_id, "refresh token revoked");
        }
    }
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .finish())
}
