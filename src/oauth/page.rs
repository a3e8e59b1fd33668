//! The server-rendered login/consent page and error page: plain, accessible HTML (labels on
//! every field, no JavaScript), everything interpolated escaped.

use actix_web::http::{header, StatusCode};
use actix_web::HttpResponse;

pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:32rem;margin:2rem auto;padding:0 1rem;line-height:1.5;color:#1a1a1a}\
label{display:block;margin-top:1rem;font-weight:600}input[type=text],input[type=password]{width:100%;padding:.5rem;font-size:1rem;box-sizing:border-box}\
.actions{margin-top:1.5rem;display:flex;gap:1rem}button{padding:.6rem 1.2rem;font-size:1rem}.error{color:#a40000;border:1px solid #a40000;padding:.5rem}.warning{color:#7a4a00;border:1px solid #c08000;padding:.5rem}\
code{background:#f2f2f2;padding:0 .2rem}";

pub(crate) fn document(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head><body><main>{body}</main></body></html>",
        escape(title)
    )
}

/// `form_action`: the origins a form on the page may post to and be redirected to (CSP
/// `form-action` also governs the redirect after the post); `None`: any.
pub(crate) fn html(status: StatusCode, page: String, form_action: Option<&str>) -> HttpResponse {
    let csp = match form_action {
        Some(origins) => format!(
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' {origins}; frame-ancestors 'none'"
        ),
        None => "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'".into(),
    };
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header(("x-frame-options", "DENY"))
        .insert_header((header::CONTENT_SECURITY_POLICY, csp))
        .insert_header(("referrer-policy", "no-referrer"))
        .body(page)
}

/// An error shown to the user (never a redirect to an untrusted place).
pub fn error(status: StatusCode, title: &str, message: &str) -> HttpResponse {
    html(
        status,
        document(
            title,
            &format!(
                "<h1>{}</h1><p role=\"alert\">{}</p><p>Return to the application and try again.</p>",
                escape(title),
                escape(message)
            ),
        ),
        Some(""),
    )
}

/// 503: a store the page needs did not answer.
pub fn unavailable() -> HttpResponse {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "Temporarily unavailable",
        "Try again in a moment.",
    )
}

/// The 408 of a form whose body did not arrive in time (`crate::transport::body_deadline`).
pub fn form_too_slow(_patience: std::time::Duration) -> HttpResponse {
    error(
        StatusCode::REQUEST_TIMEOUT,
        "Too slow",
        "The form did not arrive in time. Go back and send it again.",
    )
}

/// What the login/consent page shows.
pub struct Consent<'a> {
    pub tenant: &'a str,
    pub client_name: &'a str,
    pub redirect_host: &'a str,
    pub scopes: &'a [String],
    /// The authorization request's parameters, carried through the form.
    pub hidden: &'a [(String, String)],
    pub csrf: &'a str,
    pub error: Option<&'a str>,
    pub username: &'a str,
    /// Federated sign-in: the provider's name replaces the username and password fields.
    pub provider: Option<&'a str>,
    /// The origin of the redirect URI (where the form's answer redirects).
    pub redirect_origin: &'a str,
}

/// Whether a redirect host (as the page shows it, a port possibly after it) is this machine.
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

pub fn consent(status: StatusCode, c: &Consent) -> HttpResponse {
    let scopes: String = c
        .scopes
        .iter()
        .map(|s| format!("<li><code>{}</code></li>", escape(s)))
        .collect();
    let hidden: String = c
        .hidden
        .iter()
        .map(|(k, v)| {
            format!(
                "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
                escape(k),
                escape(v)
            )
        })
        .collect();
    let error = c
        .error
        .map(|e| format!("<p class=\"error\" role=\"alert\">{}</p>", escape(e)))
        .unwrap_or_default();
    // The authorization page: servers SHOULD warn about redirects to this machine (any local
    // program could be listening there, and the client named itself).
    let local = loopback_host(c.redirect_host).then_some(
        "<p class=\"warning\" role=\"note\">This application runs on your own computer (it \
         is sent back to an address of this computer): allow it only if you started it \
         yourself and trust it. Its name is the one it gave itself.</p>",
    );
    let body = format!(
        "<h1>Sign in to {tenant}</h1>{error}\
         <p><strong>{client}</strong> wants to access the MCP server <strong>{tenant}</strong> on your behalf.</p>\
         <p>After you allow it, you will be sent back to <strong>{host}</strong>.</p>{local}\
         <p>It asks for:</p><ul>{scopes}</ul>\
         <form method=\"post\">{hidden}<input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         {fields}\
         <div class=\"actions\"><button type=\"submit\" name=\"decision\" value=\"allow\">{allow}</button>\
         <button type=\"submit\" name=\"decision\" value=\"deny\" formnovalidate>Deny</button></div></form>",
        tenant = escape(c.tenant),
        client = escape(c.client_name),
        host = escape(c.redirect_host),
        local = local.unwrap_or_default(),
        csrf = escape(c.csrf),
        fields = match c.provider {
            Some(_) => String::new(),
            None => format!(
                "<label for=\"username\">Username</label><input type=\"text\" id=\"username\" name=\"username\" autocomplete=\"username\" value=\"{}\" required>\
                 <label for=\"password\">Password</label><input type=\"password\" id=\"password\" name=\"password\" autocomplete=\"current-password\" required>",
                escape(c.username)
            ),
        },
        allow = match c.provider {
            Some(p) => format!("Allow and sign in with {}", escape(p)),
            None => "Allow".into(),
        },
    );
    // Federated sign-in redirects to the provider's authorization endpoint, whose origin is not
    // known when the page is drawn.
    let form_action = c.provider.is_none().then_some(c.redirect_origin);
    html(
        status,
        document(&format!("Sign in to {}", c.tenant), &body),
        form_action,
    )
}

#[cfg(test)]
mod tests {
    use super::loopback_host;

    #[test]
    fn loopback_redirect_hosts_are_recognised() {
        for local in [
            "localhost",
            "LOCALHOST:3000",
            "127.0.0.1",
            "127.0.0.1:43210",
            "[::1]:80",
        ] {
            assert!(loopback_host(local), "{local}");
        }
        for remote in [
            "host.example",
            "localhost.example.com",
            "10.0.0.1:80",
            "[2001:db8::1]",
        ] {
            assert!(!loopback_host(remote), "{remote}");
        }
    }
}
