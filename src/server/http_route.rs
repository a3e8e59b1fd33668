//! The route templates of the server's paths, for the `http.route` of HTTP server spans
//! (`telemetry::http_span`): the template of the route that serves a path, its identifiers as
//! placeholders, or one value for every path no route serves.

use std::sync::LazyLock;

/// The `http.route` of a path a client asks for no route the server has: one value whatever
/// the path, since the conventions want the route (and the span name made of it) to have few
/// values, and any client chooses its paths.
pub const UNMATCHED: &str = "unmatched";

/// Every route the server serves, as templates: `{…}` stands for one segment and a last `…` for
/// one or more. The admin API's are the paths of its OpenAPI document (as `admin::openapi` read
/// it).
static ROUTES: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut routes: Vec<String> = [
        "/t/{tenant}/mcp",
        "/t/{tenant}/sse",
        "/t/{tenant}/messages",
        "/t/{tenant}/oauth/authorize",
        "/t/{tenant}/oauth/callback",
        "/t/{tenant}/oauth/token",
        "/t/{tenant}/oauth/revoke",
        "/t/{tenant}/oauth/register",
        "/t/{tenant}/oauth/register/{client_id}",
        "/t/{tenant}/oauth/jwks",
        "/t/{tenant}/elicitations/{id}",
        "/authorize",
        "/token",
        "/register",
        "/healthz",
        "/readyz",
        "/metrics",
    ]
    .map(String::from)
    .to_vec();
    // Discovery documents, at the root (RFC 8414 / RFC 9728 insert the resource's path after
    // the document's name) and appended to a tenant's issuer.
    for doc in [
        "oauth-protected-resource",
        "oauth-authorization-server",
        "openid-configuration",
    ] {
        for base in ["", "/t/{tenant}"] {
            routes.push(format!("{base}/.well-known/{doc}"));
            routes.push(format!("{base}/.well-known/{doc}/…"));
        }
    }
    let admin = crate::admin::openapi::BASE;
    routes.extend(
        crate::admin::openapi::documented_paths()
            .into_iter()
            .map(|path| format!("{admin}{path}")),
    );
    routes
});

/// The `http.route` of a path: the template of the route that serves it (identifiers are
/// placeholders), or [`UNMATCHED`].
pub fn of(path: &str) -> &'static str {
    let routes: &'static [String] = &ROUTES;
    routes
        .iter()
        .find(|template| template_matches(template, path))
        .map_or(UNMATCHED, String::as_str)
}

fn template_matches(template: &str, path: &str) -> bool {
    let mut segments = path.split('/');
    for part in template.split('/') {
        let segment = segments.next();
        match (part, segment) {
            ("…", Some(s)) if !s.is_empty() => return true,
            (_, None) => return false,
            (p, Some(s)) if p.starts_with('{') => {
                if s.is_empty() {
                    return false;
                }
            }
            (p, Some(s)) => {
                if p != s {
                    return false;
                }
            }
        }
    }
    segments.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_hide_identifiers() {
        assert_eq!(of("/t/acme/mcp"), "/t/{tenant}/mcp");
        assert_eq!(
            of("/t/acme/oauth/register/abc"),
            "/t/{tenant}/oauth/register/{client_id}"
        );
        assert_eq!(
            of("/admin/v1/tenants/acme/tools/x"),
            "/admin/v1/tenants/{slug}/tools/{name}"
        );
        assert_eq!(of("/admin/v1/tenants"), "/admin/v1/tenants");
        assert_eq!(
            of("/.well-known/oauth-protected-resource/t/acme/mcp"),
            "/.well-known/oauth-protected-resource/…"
        );
        assert_eq!(
            of("/t/acme/.well-known/openid-configuration"),
            "/t/{tenant}/.well-known/openid-configuration"
        );
        assert_eq!(of("/healthz"), "/healthz");
    }

    #[test]
    fn a_path_no_route_serves_has_one_route_whatever_it_is() {
        for path in [
            "/",
            "/nothing",
            "/t/acme/nothing",
            "/t/acme/mcp/",
            "/t//mcp",
            "/t/acme/oauth/register/",
            "/admin/v1/tenants/acme/nothing/x",
            "/admin/v1/nothing",
            "/.well-known/made-up-document",
            "/.well-known/oauth-protected-resource/",
            "/healthz/x",
        ] {
            assert_eq!(of(path), UNMATCHED, "{path}");
        }
        // Every template is reached by a path that fills it in.
        let routes: &[String] = &ROUTES;
        for template in routes {
            let path = template
                .split('/')
                .map(|part| {
                    if part.starts_with('{') || part == "…" {
                        "x"
                    } else {
                        part
                    }
                })
                .collect::<Vec<_>>()
                .join("/");
            assert_eq!(of(&path), template.as_str(), "{path}");
        }
        assert!(
            routes.len() > 40,
            "the admin API's routes are read from its document"
        );
    }
}
