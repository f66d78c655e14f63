//! Which address a request is keyed by: the TCP peer, or, only behind trusted proxies, the
//! first untrusted `X-Forwarded-For` entry walking right to left.
//!
//! Pure functions; no I/O. Normalisation: IPv4-mapped IPv6 (`::ffff:a.b.c.d`) is the IPv4
//! address, and IPv6 is aggregated to a prefix, so different spellings of one client are one key.

use ipnet::IpNet;
use std::net::{IpAddr, Ipv6Addr};

/// `::ffff:a.b.c.d` → `a.b.c.d`; other addresses unchanged.
pub fn normalize(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// The limiter key of a normalised address: IPv4 as is, IPv6 masked to `ipv6_prefix` bits.
pub fn key_of(ip: IpAddr, ipv6_prefix: u8) -> IpAddr {
    match normalize(ip) {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let mask = if ipv6_prefix >= 128 {
                u128::MAX
            } else {
                !(u128::MAX >> ipv6_prefix)
            };
            IpAddr::V6(Ipv6Addr::from(bits & mask))
        }
        v4 => v4,
    }
}

fn is_trusted(ip: IpAddr, trusted: &[IpNet]) -> bool {
    trusted.iter().any(|n| n.contains(&ip))
}

/// Parses one `X-Forwarded-For` element: `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1`, `[2001:db8::1]`
/// or `[2001:db8::1]:443`. Returns `None` for anything else (`unknown`, obfuscated ids, garbage).
pub fn parse_entry(entry: &str) -> Option<IpAddr> {
    let e = entry.trim();
    if let Ok(ip) = e.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Some(rest) = e.strip_prefix('[') {
        let (inside, _) = rest.split_once(']')?;
        return inside.parse().ok();
    }
    let (host, port) = e.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

/// The client address of a request from `peer` carrying the given `X-Forwarded-For` header
/// values (all instances, in order).
///
/// Only when the peer is inside `trusted` are the entries walked from the right: trusted entries
/// are skipped and the first untrusted one is the client. A malformed entry ends the walk at the
/// last good address (the nearest trusted hop, at worst the peer itself). When every entry is
/// trusted, the left-most one is the client. A client therefore never picks its key by sending
/// the header itself from an untrusted address. The result is normalised.
pub fn client_ip<'a>(
    peer: IpAddr,
    forwarded_for: impl DoubleEndedIterator<Item = &'a str>,
    trusted: &[IpNet],
) -> IpAddr {
    let mut current = normalize(peer);
    if trusted.is_empty() || !is_trusted(current, trusted) {
        return current;
    }
    for value in forwarded_for.rev() {
        for entry in value.rsplit(',') {
            if entry.trim().is_empty() {
                continue;
            }
            let Some(ip) = parse_entry(entry) else {
                return current;
            };
            current = normalize(ip);
            if !is_trusted(current, trusted) {
                return current;
            }
        }
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn untrusted_peer_is_its_own_key() {
        let t = nets(&["10.0.0.0/8"]);
        assert_eq!(
            client_ip(ip("203.0.113.5"), ["1.2.3.4"].into_iter(), &t),
            ip("203.0.113.5")
        );
    }

    #[test]
    fn trusted_peer_takes_rightmost_untrusted() {
        let t = nets(&["10.0.0.0/8"]);
        let xff = ["6.6.6.6, 198.51.100.8, 10.0.0.3"];
        assert_eq!(
            client_ip(ip("10.1.1.1"), xff.into_iter(), &t),
            ip("198.51.100.8")
        );
    }

    #[test]
    fn all_header_instances_are_walked() {
        let t = nets(&["10.0.0.0/8"]);
        let xff = ["198.51.100.9", "10.0.0.7"];
        assert_eq!(
            client_ip(ip("10.1.1.1"), xff.into_iter(), &t),
            ip("198.51.100.9")
        );
    }

    #[test]
    fn malformed_entry_ends_walk_at_last_good() {
        let t = nets(&["10.0.0.0/8"]);
        let peer = ip("10.1.1.1");
        assert_eq!(
            client_ip(peer, ["198.51.100.12, garbage"].into_iter(), &t),
            peer
        );
        let xff = ["1.1.1.1, garbage, 10.0.0.9"];
        assert_eq!(client_ip(peer, xff.into_iter(), &t), ip("10.0.0.9"));
    }

    #[test]
    fn entries_with_ports_and_brackets() {
        assert_eq!(parse_entry(" 1.2.3.4:80 "), Some(ip("1.2.3.4")));
        assert_eq!(parse_entry("[2001:db8::1]:443"), Some(ip("2001:db8::1")));
        assert_eq!(parse_entry("2001:db8::1"), Some(ip("2001:db8::1")));
        assert_eq!(parse_entry("unknown"), None);
    }

    #[test]
    fn mapped_and_prefix_normalisation() {
        assert_eq!(key_of(ip("::ffff:127.0.0.1"), 64), ip("127.0.0.1"));
        assert_eq!(
            key_of(ip("2001:db8:0:0:1::9"), 64),
            key_of(ip("2001:db8::ffff"), 64)
        );
        assert_ne!(
            key_of(ip("2001:db8:0:1::1"), 64),
            key_of(ip("2001:db8::1"), 64)
        );
        assert_eq!(
            key_of(ip("2001:0db8::0001"), 128),
            key_of(ip("2001:db8::1"), 128)
        );
    }

    #[test]
    fn mapped_peer_is_checked_as_ipv4_against_trust() {
        let t = nets(&["127.0.0.2/32"]);
        let got = client_ip(ip("::ffff:127.0.0.2"), ["198.51.100.7"].into_iter(), &t);
        assert_eq!(got, ip("198.51.100.7"));
    }
}
