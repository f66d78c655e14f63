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

/// Appends `ip` in its standard text form ([`IpText`]) to `out` (ASCII bytes).
pub fn push_ip(out: &mut Vec<u8>, ip: IpAddr) {
    out.extend_from_slice(IpText::of(ip).as_bytes());
}

/// An address in its standard text form, exactly as `Display` writes it (IPv4 dotted decimal;
/// IPv6 in RFC 5952 form), held on the stack: its length is known before anything is allocated
/// for it. IPv4, the common case, is written octet by octet without the formatting machinery,
/// which would run twice per request (`X-Forwarded-For` and the anonymous tenant id).
#[derive(Clone, Copy)]
pub struct IpText {
    /// Room for the longest text (`INET6_ADDRSTRLEN` less its NUL).
    buf: [u8; 45],
    len: usize,
}

impl IpText {
    /// The text of `ip`.
    pub fn of(ip: IpAddr) -> IpText {
        let mut text = IpText {
            buf: [0; 45],
            len: 0,
        };
        match ip {
            IpAddr::V4(v4) => {
                for (i, octet) in v4.octets().into_iter().enumerate() {
                    if i > 0 {
                        text.push(b'.');
                    }
                    if octet >= 100 {
                        text.push(b'0' + octet / 100);
                    }
                    if octet >= 10 {
                        text.push(b'0' + octet / 10 % 10);
                    }
                    text.push(b'0' + octet % 10);
                }
            }
            IpAddr::V6(v6) => {
                use std::io::Write;
                let mut rest = &mut text.buf[..];
                let _ = write!(rest, "{v6}");
                text.len = 45 - rest.len();
            }
        }
        text
    }

    fn push(&mut self, byte: u8) {
        self.buf[self.len] = byte;
        self.len += 1;
    }

    /// The text's bytes (ASCII).
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// True when `ip` is inside one of the `trusted` networks (`edge.trusted_proxies`).
pub fn is_trusted(ip: IpAddr, trusted: &[IpNet]) -> bool {
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
mod tests;
