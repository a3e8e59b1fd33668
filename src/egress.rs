//! Where outgoing calls may go: one [`Egress`] value, built once at start, holds the HTTP client
//! every call to a place a tenant or a client names goes through (webhook tools, OAuth and
//! OpenID metadata and key fetches, client metadata documents, upstream MCP servers) and the
//! policy it applies (`egress.allow_private`). A hosted service must not let a tenant point a
//! tool at the service's own network (cloud metadata at 169.254.169.254, databases on 10.x,
//! loopback): with private egress off, URLs naming such addresses are refused, and host names are
//! resolved by a resolver that drops every non-public address (so a name cannot rebind to one at
//! call time).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Whether an address is on the public internet.
pub fn is_public_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_unspecified()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let seg = ip.segments();
    let first = seg[0];
    // Forms that carry an IPv4 address a gateway delivers to: public only if it is.
    let v4 = |hi: u16, lo: u16| Ipv4Addr::from(((hi as u32) << 16) | lo as u32);
    if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return is_public_v4(v4(seg[6], seg[7])); // NAT64, well-known prefix (64:ff9b::/96)
    }
    if first == 0x2002 {
        return is_public_v4(v4(seg[1], seg[2])); // 6to4 (2002::/16)
    }
    if seg[..6] == [0; 6] && !ip.is_loopback() && !ip.is_unspecified() {
        return is_public_v4(v4(seg[6], seg[7])); // IPv4-compatible (::a.b.c.d, deprecated)
    }
    if seg[..6] == [0, 0, 0, 0, 0xffff, 0] {
        return is_public_v4(v4(seg[6], seg[7])); // IPv4-translated (::ffff:0:a.b.c.d, SIIT)
    }
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first == 0x64 && seg[1] == 0xff9b && seg[2] == 1) // local-use NAT64 (64:ff9b:1::/48)
        || (first & 0xfe00) == 0xfc00 // unique local
        || (first & 0xffc0) == 0xfe80 // link local
        || (first & 0xffc0) == 0xfec0 // site local (deprecated, still routed by some)
        || (first == 0x2001 && seg[1] == 0) // Teredo (2001::/32): tunnels to any IPv4 address
        || (first == 0x2001 && seg[1] == 2 && seg[2] == 0) // benchmarking (2001:2::/48)
        || seg[..4] == [0x100, 0, 0, 0] // discard-only (100::/64)
        || first == 0x2001 && seg[1] == 0x0db8 // documentation
        || (first == 0x3fff && seg[1] < 0x1000)) // documentation (3fff::/20)
}

/// Refuses URLs that name a non-public address or `localhost` outright (IP literals never reach
/// the resolver, so they are checked here).
pub fn check_public_url(url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url.trim()).map_err(|e| format!("not a valid URL ({e})"))?;
    let public = match parsed.host() {
        Some(url::Host::Ipv4(ip)) => is_public_v4(ip),
        Some(url::Host::Ipv6(ip)) => is_public_ip(IpAddr::V6(ip)),
        Some(url::Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            d != "localhost" && !d.ends_with(".localhost")
        }
        None => false,
    };
    if public {
        Ok(())
    } else {
        Err("the server calls only hosts on the public internet (private, loopback and link-local addresses are refused)".into())
    }
}

/// Resolves names to their public addresses only.
struct PublicOnlyResolver;

impl Resolve for PublicOnlyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_string();
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> =
                all.into_iter().filter(|a| is_public_ip(a.ip())).collect();
            if public.is_empty() {
                return Err(format!("{host} resolves to no public address; the server calls only hosts on the public internet").into());
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// The one way out: the HTTP client outgoing calls share and what it may reach. Cheap to clone
/// (the client is a handle to one connection pool).
#[derive(Clone)]
pub struct Egress {
    client: reqwest::Client,
    allow_private: bool,
}

impl Egress {
    /// `allow_private` (development): loopback and private addresses may be reached, and plain
    /// `http://` to loopback hosts. The client follows no redirect (a signed webhook call must not
    /// be re-sent elsewhere; a redirect is reported as the answer's status), gives up connecting
    /// after 10 s and names itself in `user-agent`.
    pub fn new(allow_private: bool) -> Result<Egress, reqwest::Error> {
        let builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("mcp-harbor/", env!("CARGO_PKG_VERSION")));
        let builder = if allow_private {
            builder
        } else {
            builder
                .dns_resolver(Arc::new(PublicOnlyResolver))
                // A proxy from the environment (HTTPS_PROXY, ALL_PROXY) would resolve the name
                // itself, past the resolver above.
                .no_proxy()
        };
        Ok(Egress {
            client: builder.build()?,
            allow_private,
        })
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// Whether private addresses (and plain `http://` to loopback) may be reached.
    pub fn allows_private(&self) -> bool {
        self.allow_private
    }

    /// Checks a URL before the server calls it: `https://` (`http://` only to loopback, when
    /// private egress is allowed), no user name or password, and a public host unless private
    /// egress is allowed (the resolver also refuses a name that resolves to no public address).
    pub fn check_url(&self, url: &str) -> Result<(), String> {
        validate_url(url, self.allow_private)?;
        if !self.allow_private {
            check_public_url(url)?;
        }
        Ok(())
    }

    /// Checks only the address a URL names (its form was checked when it was configured).
    pub fn check_address(&self, url: &str) -> Result<(), String> {
        if self.allow_private {
            return Ok(());
        }
        check_public_url(url)
    }
}

/// The innermost cause of a failed outgoing request (`connection refused`, `dns error: …`),
/// which says more than reqwest's own message.
pub fn root_cause(e: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// Checks a webhook URL: `https://` required; `http://` only to a loopback host (`127.0.0.0/8`,
/// `::1`, `localhost`) and only when `allow_http_loopback` (development); no user name or
/// password in the URL.
pub fn validate_url(url: &str, allow_http_loopback: bool) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url.trim())
        .map_err(|e| format!("{url:?} is not a valid absolute URL ({e})"))?;
    let host = match parsed.host_str() {
        Some(h) if !h.is_empty() => h,
        _ => return Err(format!("{url:?} has no host")),
    };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(
            "the URL must not contain a user name or password; authenticate requests with the \
             webhook signature instead"
                .to_string(),
        );
    }
    match parsed.scheme() {
        "https" => Ok(()),
        "http" => {
            let loopback = is_loopback_host(host);
            if loopback && allow_http_loopback {
                Ok(())
            } else if loopback {
                Err(format!(
                    "{url:?} uses http://; webhook URLs must use https:// (plain http is allowed \
                     only for loopback hosts in development, which is disabled here)"
                ))
            } else {
                Err(format!(
                    "{url:?} uses http://; webhook URLs must use https:// (plain http is allowed \
                     only for 127.0.0.0/8, ::1 and localhost in development)"
                ))
            }
        }
        other => Err(format!(
            "{url:?} uses the scheme {other:?}; webhook URLs must use https://"
        )),
    }
}

fn is_loopback_host(host: &str) -> bool {
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6.parse::<Ipv6Addr>().is_ok_and(|ip| ip.is_loopback());
    }
    if let Ok(v4) = host.parse::<Ipv4Addr>() {
        return v4.is_loopback();
    }
    host.eq_ignore_ascii_case("localhost")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_addresses() {
        for private in [
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "127.0.0.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            // IPv6 forms a gateway turns into the IPv4 address they carry.
            "64:ff9b::a00:5",
            "64:ff9b::7f00:1",
            "2002:a00:5::1",
            "2002:a9fe:a9fe::",
            "::10.0.0.5",
            "64:ff9b:1::1",
            "fec0::1",
            "::ffff:0:a00:5",
            "::ffff:0:7f00:1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:2::1",
            "100::1",
            "2001:db8::1",
            "3fff:1::1",
        ] {
            assert!(!is_public_ip(private.parse().unwrap()), "{private}");
        }
        for public in [
            "1.1.1.1",
            "93.184.216.34",
            "2606:4700:4700::1111",
            "64:ff9b::101:101",
            "2002:101:101::1",
            "::ffff:0:101:101",
            "2001:4860:4860::8888",
            "2001:3::1",
            "3fff:1000::1",
        ] {
            assert!(is_public_ip(public.parse().unwrap()), "{public}");
        }
    }

    /// A proxy from the environment is not used: it would resolve names past the public-only
    /// resolver (a private name would be reachable through it).
    #[tokio::test]
    async fn the_public_client_ignores_proxies_from_the_environment() {
        let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", proxy.local_addr().unwrap());
        // nextest runs each test in a process of its own: the variables reach no other test.
        for var in ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"] {
            std::env::set_var(var, &url);
        }
        let client = Egress::new(false).unwrap().client().clone();
        let sent = client
            .get("https://localhost/")
            .timeout(Duration::from_secs(2))
            .send()
            .await;
        assert!(sent.is_err(), "localhost resolves to no public address");
        let accepted = tokio::time::timeout(Duration::from_millis(200), proxy.accept()).await;
        assert!(accepted.is_err(), "the request went to the proxy");
    }

    #[test]
    fn urls_naming_private_hosts_are_refused() {
        assert!(check_public_url("https://hooks.example.com/x").is_ok());
        assert!(check_public_url("https://1.1.1.1/x").is_ok());
        for bad in [
            "https://127.0.0.1/x",
            "https://10.0.0.5/x",
            "https://[::1]/x",
            "https://localhost/x",
            "https://api.localhost/x",
            "https://169.254.169.254/latest",
        ] {
            assert!(check_public_url(bad).is_err(), "{bad}");
        }
    }

    #[actix_rt::test]
    async fn the_resolver_drops_private_addresses() {
        let err = PublicOnlyResolver
            .resolve("localhost".parse().unwrap())
            .await
            .err()
            .expect("refused");
        assert!(err.to_string().contains("no public address"));
    }
}
