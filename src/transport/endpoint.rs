//! Which endpoint of which tenant a path names (`/t/{tenant}/mcp`, `/sse`, `/messages`), read
//! by hand: the router matches only the static prefix `/t` (see `routes`), and the tenant is
//! read once from the path the same way.

/// Which endpoint of a tenant a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/t/{tenant}/mcp`
    Mcp,
    /// `/t/{tenant}/sse`
    Sse,
    /// `/t/{tenant}/messages`
    Messages,
}

impl Endpoint {
    /// The methods the endpoint serves (its `Allow` header; `OPTIONS` answers CORS preflights).
    pub fn methods(&self) -> &'static str {
        match self {
            Endpoint::Mcp => "GET, POST, DELETE, OPTIONS",
            Endpoint::Sse => "GET, OPTIONS",
            Endpoint::Messages => "POST, OPTIONS",
        }
    }
}

/// `/t/{tenant}/{mcp|sse|messages}`, the tenant one non-empty segment: the tenant and the
/// endpoint. Anything else (a trailing slash, more segments, another last segment) is `None`.
pub fn endpoint_of(path: &str) -> Option<(&str, Endpoint)> {
    let rest = path.strip_prefix("/t/")?;
    // Read by byte: `split_once('/')` goes through the general char searcher (this runs a few
    // times per request).
    let cut = rest.bytes().position(|b| b == b'/')?;
    if cut == 0 {
        return None;
    }
    let (tenant, last) = (&rest[..cut], &rest[cut + 1..]);
    let endpoint = match last {
        "mcp" => Endpoint::Mcp,
        "sse" => Endpoint::Sse,
        "messages" => Endpoint::Messages,
        _ => return None,
    };
    Some((tenant, endpoint))
}

/// The tenant an endpoint's path names (`""` for a path that is not an endpoint's).
pub fn tenant_of(path: &str) -> &str {
    endpoint_of(path).map_or("", |(tenant, _)| tenant)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_read_from_the_path() {
        assert_eq!(endpoint_of("/t/demo/mcp"), Some(("demo", Endpoint::Mcp)));
        assert_eq!(endpoint_of("/t/a-b_c/sse"), Some(("a-b_c", Endpoint::Sse)));
        assert_eq!(
            endpoint_of("/t/demo/messages"),
            Some(("demo", Endpoint::Messages))
        );
        for other in [
            "/t/demo/mcp/",
            "/t//mcp",
            "/t/demo",
            "/t/demo/",
            "/t/demo/oauth/token",
            "/t/demo/x/mcp",
            "/t/demo/MCP",
            "/t/demo/mcpx",
            "/tt/demo/mcp",
            "/t/mcp",
            "/mcp",
            "",
        ] {
            assert_eq!(endpoint_of(other), None, "{other}");
            assert_eq!(tenant_of(other), "", "{other}");
        }
        assert_eq!(tenant_of("/t/acme/messages"), "acme");
    }
}
