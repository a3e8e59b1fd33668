//! Session ids: 128 random bits as 32 lowercase hex characters, optionally after a route
//! label and a dot (`r1.9f86d081884c7d659a2feaa0c55ad015`) naming the replica that created the
//! session, so a load balancer can send each of its requests straight there. The label is only
//! a hint for routing: any replica serves any session (it forwards to the owner, or takes the
//! session over when the owner is gone), so an id naming a dead or unknown replica still works.

use crate::config::check_session_route;

/// Hex characters of the random part.
const RANDOM_LEN: usize = 32;

/// A new session id, prefixed with `route` (a label `config::check_session_route` accepts)
/// when given.
pub fn new_session_id(route: Option<&str>) -> String {
    // From rand's thread-local CSPRNG (ChaCha12, seeded from the OS and reseeded as it goes), as
    // the platform's other secrets are: asking the OS for every id cost a `getrandom` system
    // call per session opening, the one it made beside its two reads and two writes.
    let random: u128 = rand::random();
    let mut id = String::with_capacity(route.map_or(0, |r| r.len() + 1) + RANDOM_LEN);
    if let Some(route) = route {
        id.push_str(route);
        id.push('.');
    }
    // By nibble into bytes rather than through `format!`'s `{:032x}`, which cost ~700
    // instructions per session opening (a callgrind profile of session inits).
    let mut hex = [0u8; RANDOM_LEN];
    for (i, digit) in hex.iter_mut().enumerate() {
        let nibble = (random >> (4 * (RANDOM_LEN - 1 - i))) & 0xf;
        *digit = b"0123456789abcdef"[nibble as usize];
    }
    id.push_str(std::str::from_utf8(&hex).unwrap_or_default());
    id
}

/// The route label of a session id made by `new_session_id` with one; `None` for a plain id
/// or any other text (ids come from clients: nothing is assumed of them).
pub fn route_of(id: &str) -> Option<&str> {
    let (route, random) = id.split_once('.')?;
    let hex = random.len() == RANDOM_LEN
        && random
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    (hex && check_session_route(route).is_ok()).then_some(route)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_random_part_is_the_128_bits_in_hex_most_significant_first() {
        // Spread over many ids, every position takes every hex digit, and the digits read back
        // as a u128 whose hex form (as `format!` writes it) is the id's.
        let mut seen = [[false; 16]; RANDOM_LEN];
        for _ in 0..2000 {
            let id = new_session_id(None);
            let value = u128::from_str_radix(&id, 16).unwrap();
            assert_eq!(format!("{value:032x}"), id);
            for (i, b) in id.bytes().enumerate() {
                let digit = char::from(b).to_digit(16).unwrap() as usize;
                seen[i][digit] = true;
            }
        }
        assert!(seen.iter().all(|digits| digits.iter().all(|&d| d)));
    }

    #[test]
    fn a_plain_id_is_32_hex_characters() {
        let id = new_session_id(None);
        assert_eq!(id.len(), 32);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(route_of(&id), None);
    }

    #[test]
    fn a_routed_id_names_its_route_and_keeps_128_random_bits() {
        let id = new_session_id(Some("r1"));
        let (route, random) = id.split_once('.').unwrap();
        assert_eq!(route, "r1");
        assert_eq!(random.len(), 32);
        assert_eq!(route_of(&id), Some("r1"));
        // Visible ASCII only (0x21..=0x7E), as the spec asks of session ids.
        assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{id}");
        assert_ne!(new_session_id(Some("r1")), id);
        let longest = "a".repeat(crate::config::MAX_SESSION_ROUTE_LEN);
        assert_eq!(
            route_of(&new_session_id(Some(&longest))),
            Some(longest.as_str())
        );
    }

    #[test]
    fn only_well_formed_ids_have_a_route() {
        let hex = "0123456789abcdef0123456789abcdef";
        assert_eq!(route_of(&format!("r2.{hex}")), Some("r2"));
        for other in [
            hex.to_string(),
            format!(".{hex}"),
            format!("r2.{}", &hex[1..]),
            format!("r2.{hex}0"),
            format!("r2.{}", hex.to_uppercase()),
            format!("r.2.{hex}"),
            format!("r:2.{hex}"),
            "r2.".to_string(),
            String::new(),
        ] {
            assert_eq!(route_of(&other), None, "{other:?}");
        }
    }
}
