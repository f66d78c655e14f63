//! The X-Forwarded-For walk on arbitrary header values: never panics, and the client is the peer
//! itself or one of the addresses the header lists.
#![no_main]
use ipnet::IpNet;
use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr};
use tollgate::edge::client_ip;

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    // The first byte picks the peer (trusted or not); the rest is the header, split on '\n' into
    // several header instances.
    let peer = IpAddr::V4(Ipv4Addr::new(10, 0, 0, data[0]));
    let trusted: Vec<IpNet> = vec!["10.0.0.0/25".parse().unwrap(), "::1/128".parse().unwrap()];
    let text = String::from_utf8_lossy(&data[1..]);
    let values: Vec<&str> = text.split('\n').collect();
    let client = client_ip::client_ip(peer, values.iter().copied(), &trusted);
    let listed = values
        .iter()
        .flat_map(|v| v.split(','))
        .filter_map(client_ip::parse_entry)
        .map(client_ip::normalize)
        .any(|ip| ip == client);
    assert!(
        client == peer || listed,
        "client {client} neither the peer nor listed"
    );
});
