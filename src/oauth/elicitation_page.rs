//! `/t/{tenant}/elicitations/{id}`: the page where a user enters the secret a tool asked for.
//! Server-rendered like the sign-in page (same style, no JavaScript, CSRF token in a SameSite
//! cookie and the form). On an `oauth` tenant the user signs in on the form itself and must be
//! the user the elicitation was made for; on an open tenant the unguessable id is the
//! capability. Another tenant's elicitation, or an unknown id, is 404.

use std::collections::HashMap;

use actix_web::cookie::{Cookie, SameSite};
use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use secrecy::SecretString;

use crate::auth::random_token;
use crate::elicitation::{Elicitations, MAX_SECRET_BYTES};
use crate::oauth::authorize::{sign_in, SignInRefused};
use crate::oauth::page::{document, error, escape, html, unavailable};
use crate::oauth::{resolve, same, OAuthState};
use crate::store::{
    now_millis, ElicitationRecord, ElicitationStatus, ElicitationStore, LoginMethod, TenantAuth,
};

const CSRF_COOKIE: &str = "harbor_elicitation_csrf";

/// Mounts the page (before the MCP `/t/{tenant}` scope).
pub fn configure(cfg: &mut web::ServiceConfig) {
    // Room for the longest secret the page takes, percent-encoded (up to 3 bytes each), and
    // the other fields: the page itself says when a secret is too long (actix's default limit,
    // 16 KiB for the whole form, answered a bare 413 and lost what the user typed).
    let form = web::FormConfig::default()
        .limit(MAX_SECRET_BYTES * 3 + 4096)
        .error_handler(|e, _| match e {
            actix_web::error::UrlencodedError::Overflow { .. } => {
                let response = error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "Too long",
                    "That is too long for a secret. Go back and check what you pasted.",
                );
                actix_web::error::InternalError::from_response(e, response).into()
            }
            other => other.into(),
        });
    cfg.service(
        web::resource("/t/{tenant}/elicitations/{id}")
            .app_data(form)
            .wrap(actix_web::middleware::from_fn(|req, next| {
                crate::transport::body_deadline::within(
                    req,
                    next,
                    crate::oauth::page::form_too_slow,
                )
            }))
            .route(web::get().to(show))
            .route(web::post().to(submit))
            .default_service(web::to(method_not_allowed)),
    );
}

/// The page is read (GET) and submitted (POST); any other method is 405 with `Allow`, on a
/// tenant that exists (an unknown one is 404, as for GET; the id is not looked up).
async fn method_not_allowed(req: HttpRequest, path: web::Path<(String, String)>) -> HttpResponse {
    match resolve(&req, &path.0).await {
        Ok(_) => {}
        Err(e) if e.status == StatusCode::NOT_FOUND => return not_found(),
        Err(_) => return unavailable(),
    }
    let mut response = error(
        StatusCode::METHOD_NOT_ALLOWED,
        "Method not allowed",
        "This page is opened with GET and submitted with POST.",
    );
    response
        .headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static("GET, POST"));
    response
}

/// How the page checks who the user is.
enum Verify {
    /// Open tenant: the id is the capability.
    Nobody,
    /// Tenant users sign in with their password.
    Password,
    /// Cannot verify (external issuer, federated sign-in): the page refuses.
    Unsupported,
}

struct Loaded {
    slug: String,
    record: ElicitationRecord,
    verify: Verify,
    /// Served over HTTPS (the CSRF cookie is then `Secure`).
    secure: bool,
}

fn not_found() -> HttpResponse {
    error(
        StatusCode::NOT_FOUND,
        "Unknown request",
        "There is no such request here. Check the link your application opened.",
    )
}

async fn load(
    req: &HttpRequest,
    path: &(String, String),
    service: &Elicitations,
) -> Result<Loaded, HttpResponse> {
    let (slug, id) = path;
    let handle = match resolve(req, slug).await {
        Ok(h) => h,
        Err(e) if e.status == StatusCode::NOT_FOUND => return Err(not_found()),
        Err(_) => return Err(unavailable()),
    };
    let verify = match &*handle.policy.auth() {
        TenantAuth::None => Verify::Nobody,
        TenantAuth::Oauth(s) if s.login == LoginMethod::Local => Verify::Password,
        _ => Verify::Unsupported,
    };
    let record = match service.store().get_elicitation(slug, id).await {
        Ok(Some(r)) => r,
        Ok(None) => return Err(not_found()),
        Err(e) => {
            tracing::warn!(error = %e, "elicitation lookup failed");
            return Err(unavailable());
        }
    };
    Ok(Loaded {
        slug: slug.clone(),
        record,
        verify,
        secure: req.connection_info().scheme() == "https",
    })
}

/// The page for a request that is not pending any more.
fn finished(status: ElicitationStatus) -> HttpResponse {
    let message = match status {
        ElicitationStatus::Completed => "This request was already answered.",
        ElicitationStatus::Declined => "This request was declined.",
        ElicitationStatus::Cancelled => "This request was cancelled.",
        ElicitationStatus::Expired | ElicitationStatus::Pending => {
            "This request has expired. Run the tool again from your application."
        }
    };
    error(StatusCode::GONE, "Request closed", message)
}

fn render(
    l: &Loaded,
    csrf: &str,
    status: StatusCode,
    problem: Option<&str>,
    username: &str,
) -> HttpResponse {
    let problem = problem
        .map(|e| format!("<p class=\"error\" role=\"alert\">{}</p>", escape(e)))
        .unwrap_or_default();
    let sign_in = match l.verify {
        Verify::Password => format!(
            "<p>Sign in as the user who is using the application, to confirm it is you.</p>\
             <label for=\"username\">Username</label><input type=\"text\" id=\"username\" name=\"username\" autocomplete=\"username\" value=\"{}\" required>\
             <label for=\"password\">Password</label><input type=\"password\" id=\"password\" name=\"password\" autocomplete=\"current-password\" required>",
            escape(username)
        ),
        _ => String::new(),
    };
    let r = &l.record;
    let body = format!(
        "<h1>{tenant} needs a secret</h1>{problem}\
         <p>The tool <code>{tool}</code> asks for <strong>{name}</strong>:</p>\
         <blockquote>{message}</blockquote>\
         <p>What you enter here is stored encrypted by {tenant} and handed to that tool only; it does not pass through your AI application.</p>\
         <form method=\"post\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">{sign_in}\
         <label for=\"secret\">{name}</label><input type=\"password\" id=\"secret\" name=\"secret\" autocomplete=\"off\" required>\
         <div class=\"actions\"><button type=\"submit\" name=\"decision\" value=\"submit\">Submit</button>\
         <button type=\"submit\" name=\"decision\" value=\"decline\" formnovalidate>Decline</button></div></form>",
        tenant = escape(&l.slug),
        tool = escape(&r.tool),
        name = escape(&r.name),
        message = escape(&r.message),
        csrf = escape(csrf),
    );
    let mut response = html(
        status,
        document(&format!("{} needs a secret", l.slug), &body),
        Some(""),
    );
    let cookie = Cookie::build(CSRF_COOKIE, csrf.to_string())
        .path(format!("/t/{}/elicitations", l.slug))
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(l.secure)
        .finish();
    let _ = response.add_cookie(&cookie);
    response
}

fn done(title: &str, message: &str) -> HttpResponse {
    html(
        StatusCode::OK,
        document(
            title,
            &format!(
                "<h1>{}</h1><p role=\"status\">{}</p><p>You can close this tab and return to your application.</p>",
                escape(title),
                escape(message)
            ),
        ),
        Some(""),
    )
}

pub async fn show(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    service: web::Data<Elicitations>,
) -> HttpResponse {
    let l = match load(&req, &path, &service).await {
        Ok(l) => l,
        Err(r) => return r,
    };
    if matches!(l.verify, Verify::Unsupported) {
        return unsupported();
    }
    let status = l.record.status_at(now_millis());
    if status != ElicitationStatus::Pending {
        return finished(status);
    }
    let csrf = req
        .cookie(CSRF_COOKIE)
        .map(|c| c.value().to_string())
        .filter(|v| v.len() >= 32)
        .unwrap_or_else(random_token);
    render(&l, &csrf, StatusCode::OK, None, "")
}

fn unsupported() -> HttpResponse {
    error(
        StatusCode::FORBIDDEN,
        "Not available",
        "This server cannot confirm who you are on this page.",
    )
}

pub async fn submit(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    service: web::Data<Elicitations>,
    oauth: web::Data<OAuthState>,
    form: web::Form<HashMap<String, String>>,
) -> HttpResponse {
    let mut form = form.into_inner();
    let l = match load(&req, &path, &service).await {
        Ok(l) => l,
        Err(r) => return r,
    };
    if matches!(l.verify, Verify::Unsupported) {
        return unsupported();
    }
    let sent = form.get("csrf").map(String::as_str).unwrap_or("");
    let cookie = req
        .cookie(CSRF_COOKIE)
        .map(|c| c.value().to_string())
        .unwrap_or_default();
    if sent.is_empty() || !same(sent, &cookie) {
        return error(
            StatusCode::FORBIDDEN,
            "Request expired",
            "This form is not valid any more (cookies disabled, or it came from another site). Open the link from your application again.",
        );
    }
    let status = l.record.status_at(now_millis());
    if status != ElicitationStatus::Pending {
        return finished(status);
    }
    let secret = SecretString::from(form.remove("secret").unwrap_or_default());
    let username = form
        .get("username")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    // The user must be who the elicitation was made for, also to decline it.
    if matches!(l.verify, Verify::Password) {
        let password = form.remove("password").unwrap_or_default();
        if let Err(r) = check_user(&req, &l, &service, &oauth, &cookie, &username, password).await {
            return r;
        }
    }
    let id = &l.record.id;
    if form.get("decision").map(String::as_str) != Some("submit") {
        return match service
            .close(&l.slug, id, ElicitationStatus::Declined)
            .await
        {
            Ok(true) => done("Declined", "The tool will not get this secret."),
            Ok(false) => finished(ElicitationStatus::Expired),
            Err(e) => {
                tracing::warn!(error = %e, "could not decline an elicitation");
                unavailable()
            }
        };
    }
    use secrecy::ExposeSecret;
    let problem = if secret.expose_secret().trim().is_empty() {
        Some("Enter the secret, or decline.")
    } else if secret.expose_secret().len() > MAX_SECRET_BYTES {
        Some("That is too long for a secret.")
    } else {
        None
    };
    if let Some(problem) = problem {
        return render(
            &l,
            &cookie,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some(problem),
            &username,
        );
    }
    match service.submit(&l.slug, id, &secret).await {
        Ok(true) => done(
            "Thank you",
            "The secret was saved; the tool goes on with it.",
        ),
        Ok(false) => finished(ElicitationStatus::Expired),
        Err(e) => {
            tracing::warn!(error = %e, "could not complete an elicitation");
            unavailable()
        }
    }
}

/// Verifies the tenant user's password (failed attempts limited like the sign-in page) and that
/// they are the elicitation's principal.
async fn check_user(
    req: &HttpRequest,
    l: &Loaded,
    service: &Elicitations,
    oauth: &OAuthState,
    csrf: &str,
    username: &str,
    password: String,
) -> Result<(), HttpResponse> {
    let user = match sign_in(
        req,
        service.auth(),
        &oauth.limiter,
        &l.slug,
        username,
        password,
    )
    .await
    {
        Ok(user) => user,
        Err(SignInRefused::Unavailable) => return Err(unavailable()),
        Err(refused) => {
            return Err(render(
                l,
                csrf,
                refused.status(),
                Some(refused.message()),
                username,
            ))
        }
    };
    let subject = l
        .record
        .principal
        .as_deref()
        .and_then(|b| b.split('\n').nth(1));
    if subject != Some(user.username.as_str()) {
        tracing::warn!(tenant = %l.slug, elicitation = %l.record.id, "elicitation page: signed in as another user");
        return Err(error(
            StatusCode::FORBIDDEN,
            "Not your request",
            "This request was made for another user. Sign in as the user of the application that opened it.",
        ));
    }
    Ok(())
}
