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

#[test]
fn push_ip_writes_what_display_writes() {
    let mut addrs: Vec<IpAddr> = [
        "0.0.0.0",
        "255.255.255.255",
        "10.0.0.1",
        "192.0.2.7",
        "1.20.100.9",
        "::",
        "::1",
        "2001:db8::1",
        "2001:db8:0:0:1:0:0:1",
        "::ffff:192.0.2.7",
        "fe80::1:2:3:4",
        // The longest texts: eight full groups, and a mapped address's dotted tail.
        "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        "::ffff:255.255.255.255",
    ]
    .iter()
    .map(|a| ip(a))
    .collect();
    // Every octet value in every position.
    addrs.extend((0..=255u8).map(|b| IpAddr::from([b, 255 - b, b / 3, b.wrapping_mul(7)])));
    for addr in addrs {
        let mut out = b"x".to_vec();
        push_ip(&mut out, addr);
        assert_eq!(String::from_utf8(out).unwrap(), format!("x{addr}"));
    }
}
