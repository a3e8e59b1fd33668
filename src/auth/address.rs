//! The address a request comes from, as limits counted per client address see it: the
//! connection's peer, unless that peer is a trusted proxy (`server.trusted_proxies`); then the
//! last address `X-Forwarded-For` names that is not one (each proxy appends the address it was
//! reached from, so what stands left of that was written by the client and proves nothing).

use std::net::{IpAddr, SocketAddr};

use actix_web::HttpRequest;
use ipnet::IpNet;

/// The client address of `req` (`None`: no peer address, as under some test harnesses).
pub fn client_address(req: &HttpRequest, trusted: &[IpNet]) -> Option<IpAddr> {
    let peer = req.peer_addr()?.ip();
    let forwarded = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|v| v.to_str().ok());
    Some(behind_proxies(peer, forwarded, trusted))
}

/// See [`client_address`]: `peer` and the `X-Forwarded-For` header lines in order.
pub fn behind_proxies<'a>(
    peer: IpAddr,
    forwarded_for: impl DoubleEndedIterator<Item = &'a str>,
    trusted: &[IpNet],
) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    let mut client = peer;
    if !is_trusted(&client) {
        return client;
    }
    let lines: Vec<&str> = forwarded_for.collect();
    for hop in lines.iter().rev().flat_map(|line| line.rsplit(',')) {
        // Written by a trusted proxy: an address (with a port, some write one); anything
        // else ends the walk at the proxy that passed it on.
        let Some(ip) = parse_hop(hop.trim()) else {
            return client;
        };
        client = ip;
        if !is_trusted(&client) {
            return client;
        }
    }
    client
}

/// What limits counted per client address count `ip` under: an IPv4 address (an IPv4-mapped
/// IPv6 one included) as itself, an IPv6 address by its /64 (one host is commonly given a whole
/// /64, and would otherwise have 2^64 addresses to spread its attempts over).
pub fn limit_key(ip: IpAddr) -> String {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            format!("{}/64", std::net::Ipv6Addr::from(prefix))
        }
    }
}

fn parse_hop(hop: &str) -> Option<IpAddr> {
    hop.parse::<IpAddr>()
        .ok()
        .or_else(|| hop.parse::<SocketAddr>().ok().map(|s| s.ip()))
        .or_else(|| {
            hop.strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .and_then(|h| h.parse().ok())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_ipv6_host_counts_as_its_64() {
        assert_eq!(limit_key(ip("203.0.113.9")), "203.0.113.9");
        assert_eq!(limit_key(ip("::ffff:203.0.113.9")), "203.0.113.9");
        assert_eq!(limit_key(ip("2001:db8:1:2:3:4:5:6")), "2001:db8:1:2::/64");
        assert_eq!(
            limit_key(ip("2001:db8:1:2:ffff::1")),
            limit_key(ip("2001:db8:1:2::7"))
        );
        assert_ne!(
            limit_key(ip("2001:db8:1:3::1")),
            limit_key(ip("2001:db8:1:2::1"))
        );
    }

    #[test]
    fn only_what_trusted_proxies_wrote_is_believed() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap(), "fd00::/8".parse().unwrap()];
        let walk =
            |peer: &str, lines: &[&str]| behind_proxies(ip(peer), lines.iter().copied(), &trusted);
        // A peer that is not a proxy: its header is ignored.
        assert_eq!(walk("203.0.113.5", &["198.51.100.1"]), ip("203.0.113.5"));
        // A trusted proxy: the last address it did not append itself.
        assert_eq!(
            walk("10.0.0.2", &["198.51.100.1, 203.0.113.9"]),
            ip("203.0.113.9")
        );
        // Through two proxies (one header line each), spoofed entries on the left ignored.
        assert_eq!(
            walk("10.0.0.2", &["1.1.1.1, 203.0.113.9", "10.0.0.3"]),
            ip("203.0.113.9")
        );
        // Ports and bracketed IPv6.
        assert_eq!(walk("10.0.0.2", &["203.0.113.9:4711"]), ip("203.0.113.9"));
        assert_eq!(walk("fd00::1", &["[2001:db8::7]:443"]), ip("2001:db8::7"));
        assert_eq!(walk("fd00::1", &["[2001:db8::8]"]), ip("2001:db8::8"));
        // Nothing forwarded, or only proxies: the leftmost known address.
        assert_eq!(walk("10.0.0.2", &[]), ip("10.0.0.2"));
        assert_eq!(walk("10.0.0.2", &["10.0.0.9"]), ip("10.0.0.9"));
        // Garbage from a proxy ends the walk there.
        assert_eq!(walk("10.0.0.2", &["203.0.113.9, unknown"]), ip("10.0.0.2"));
        // No trusted proxies: never the header.
        assert_eq!(
            behind_proxies(ip("127.0.0.1"), ["198.51.100.1"].into_iter(), &[]),
            ip("127.0.0.1")
        );
    }
}
