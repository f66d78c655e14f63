use super::*;

fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

fn ip(text: &str) -> Option<IpAddr> {
    Some(text.parse().unwrap())
}

/// The listener cap refuses the connection past its number and takes the next one once a
/// place is given back.
#[test]
fn listener_cap_refuses_past_its_number_until_one_closes() {
    let limits = ConnectionLimits::new(&[addr("127.0.0.1:18001")], 2, 0);
    let local = Some(addr("127.0.0.1:18001"));
    let a = limits.admit(local, ip("10.0.0.1")).unwrap();
    let _b = limits.admit(local, ip("10.0.0.2")).unwrap();
    assert_eq!(
        limits.admit(local, ip("10.0.0.3")).err(),
        Some(Refused::Listener)
    );
    assert_eq!(limits.open(0), 2);
    drop(a);
    assert_eq!(limits.open(0), 1);
    assert!(limits.admit(local, ip("10.0.0.3")).is_ok());
}

/// The per-client cap counts each address on its own, and a refused connection gives back its
/// listener place.
#[test]
fn client_cap_counts_each_address() {
    let limits = ConnectionLimits::new(&[addr("0.0.0.0:18002")], 10, 1);
    let local = Some(addr("127.0.0.5:18002"));
    let a = limits.admit(local, ip("10.0.0.1")).unwrap();
    assert_eq!(
        limits.admit(local, ip("10.0.0.1")).err(),
        Some(Refused::Client)
    );
    let _b = limits.admit(local, ip("10.0.0.2")).unwrap();
    assert_eq!(limits.open(0), 2, "the refused one is not counted");
    drop(a);
    assert!(limits.admit(local, ip("10.0.0.1")).is_ok());
    assert!(limits.clients.lock().len() <= 2);
}

/// A connection to another port than every listener's is not counted against any.
#[test]
fn an_unknown_listener_is_not_counted() {
    let limits = ConnectionLimits::new(&[addr("127.0.0.1:18003")], 1, 0);
    let _a = limits.admit(Some(addr("127.0.0.1:9")), None).unwrap();
    let _b = limits.admit(Some(addr("127.0.0.1:9")), None).unwrap();
    assert_eq!(limits.open(0), 0);
}
