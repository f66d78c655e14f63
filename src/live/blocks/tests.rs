use super::*;

fn block(kind: Kind, value: &str, expires_at: Option<u64>) -> Block {
    Block {
        kind,
        value: value.into(),
        reason: "r".into(),
        created_at: 0,
        expires_at,
    }
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

#[test]
fn networks_match_most_specific_first_v4_and_v6() {
    let set = BlockSet::new([
        block(Kind::Ip, "10.0.0.0/8", None),
        block(Kind::Ip, "10.1.2.3/32", Some(100)),
        block(Kind::Ip, "2001:db8::/32", None),
        block(Kind::Ip, "::1/128", None),
        block(Kind::Ip, "0.0.0.0/0", Some(50)),
    ]);
    assert_eq!(set.len(), 5);
    assert_eq!(set.ip(ip("10.1.2.3"), 10).unwrap().value, "10.1.2.3/32");
    // The host block expired: the network's still holds.
    assert_eq!(set.ip(ip("10.1.2.3"), 100).unwrap().value, "10.0.0.0/8");
    assert_eq!(set.ip(ip("10.200.0.1"), 100).unwrap().value, "10.0.0.0/8");
    assert_eq!(set.ip(ip("11.0.0.1"), 10).unwrap().value, "0.0.0.0/0");
    assert!(set.ip(ip("11.0.0.1"), 50).is_none());
    assert_eq!(
        set.ip(ip("2001:db8:ffff::9"), 0).unwrap().value,
        "2001:db8::/32"
    );
    assert!(set.ip(ip("2001:db9::1"), 0).is_none());
    assert_eq!(set.ip(ip("::1"), 0).unwrap().value, "::1/128");
    // An IPv4-mapped client is its IPv4 address.
    assert_eq!(
        set.ip(ip("::ffff:10.9.9.9"), 100).unwrap().value,
        "10.0.0.0/8"
    );
}

#[test]
fn tenants_and_keys_by_id_and_expiry() {
    let set = BlockSet::new([
        block(Kind::Tenant, "acme", Some(10)),
        block(Kind::Key, "key_0123456789abcdef", None),
    ]);
    assert!(set.tenant("acme", 9).is_some());
    assert!(set.tenant("acme", 10).is_none());
    assert!(set.tenant("other", 0).is_none());
    assert!(set.key("key_0123456789abcdef", u64::MAX - 1).is_some());
    assert_eq!(set.tenant("acme", 4).unwrap().remaining_s(4), Some(6));
}

#[test]
fn canonical_networks() {
    let c = |t: &str| canonical_network(t).map(|n| n.to_string());
    assert_eq!(c("203.0.113.7").unwrap(), "203.0.113.7/32");
    assert_eq!(c("198.51.100.77/24").unwrap(), "198.51.100.0/24");
    assert_eq!(c("2001:db8::5/32").unwrap(), "2001:db8::/32");
    assert_eq!(c("::1").unwrap(), "::1/128");
    assert_eq!(c("::ffff:192.0.2.0/120").unwrap(), "192.0.2.0/24");
    assert!(c("10.0.0.0/33").is_err());
    assert!(c("10.0.0").is_err());
    assert!(c("").is_err());
}

#[test]
fn thousands_of_networks_cost_a_probe_per_prefix_length() {
    let blocks = (0..5000u32).map(|i| {
        let a = std::net::Ipv4Addr::from_bits(0x0a00_0000 | (i << 8));
        block(Kind::Ip, &format!("{a}/24"), None)
    });
    let set = BlockSet::new(blocks);
    assert_eq!(set.v4.len(), 1);
    assert!(set.ip(ip("10.0.19.7"), 0).is_some());
    assert!(set.ip(ip("10.200.0.7"), 0).is_none());
}
