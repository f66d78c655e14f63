//! `edge:`: the per-client-IP limiter in memory, before authentication.

use super::common::Check;
use super::policy;
use crate::config::model::{EdgeSettings, DEFAULT_IPV6_PREFIX};
use crate::config::raw::RawEdge;
use ipnet::IpNet;

/// `edge:` → settings; `None` when its rate is invalid (the error is recorded).
pub(super) fn settings(c: &mut Check, e: &RawEdge) -> Option<EdgeSettings> {
    let rate = c.rate("edge", e.limit, &e.per, e.burst);
    let trusted = cidrs(
        c,
        "edge.trusted_proxies",
        e.trusted_proxies.as_deref().unwrap_or(&[]),
    );
    let exempt = cidrs(c, "edge.exempt", e.exempt.as_deref().unwrap_or(&[]));
    let ipv6_prefix = e.ipv6_prefix.unwrap_or(DEFAULT_IPV6_PREFIX.into());
    if !(1..=128).contains(&ipv6_prefix) {
        c.err(
            "edge.ipv6_prefix",
            format!("must be 1..=128 (got {ipv6_prefix})"),
        );
    }
    let max_clients = c.opt_positive("edge.max_clients", e.max_clients, 100_000) as usize;
    let algorithm = policy::edge_algorithm(c, e.algorithm.as_deref(), rate.as_ref());
    Some(EdgeSettings {
        rate: rate?,
        algorithm,
        trusted_proxies: trusted,
        ipv6_prefix: ipv6_prefix.clamp(1, 128) as u8,
        exempt,
        max_clients,
        mode: c.mode("edge.mode", e.mode.as_deref()),
    })
}

/// The networks of the CIDR list at `path` (a bare address is a /32 or /128); every entry that
/// does not parse is an error naming `path[i]`.
fn cidrs(c: &mut Check, path: &str, list: &[String]) -> Vec<IpNet> {
    let mut out = Vec::new();
    for (i, text) in list.iter().enumerate() {
        let parsed = text
            .parse::<IpNet>()
            .or_else(|_| text.parse::<std::net::IpAddr>().map(IpNet::from));
        match parsed {
            Ok(net) => out.push(mapped_to_ipv4(net.trunc())),
            Err(_) => c.err(format!("{path}[{i}]"), format!("\"{text}\" is not a CIDR")),
        }
    }
    out
}

/// An IPv4-mapped IPv6 network (`::ffff:10.0.0.0/104`) as the IPv4 network it maps
/// (`10.0.0.0/8`): addresses are normalised to IPv4 before they are matched
/// ([`crate::http::client_ip::normalize`]), so the mapped form would never match. Other
/// networks are returned as they are.
fn mapped_to_ipv4(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.network().to_ipv4_mapped() {
            Some(v4) => ipnet::Ipv4Net::new(v4, v6.prefix_len() - 96)
                .map(IpNet::V4)
                .unwrap_or(net),
            None => net,
        },
        other => other,
    }
}
