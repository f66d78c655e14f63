//! Header names on their way through: by default the heads tollgate edits go out with lower-case
//! names (as Envoy sends them, and as HTTP/2 requires); `server.preserve_header_case: true` keeps
//! the case each name arrived in, the client's to the backend and the backend's to the client.
//! A raw backend records the exact bytes of the head it receives; a raw client reads the exact
//! bytes of the head it gets back.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A backend on a free port that records each request head it reads and answers 200 with a
/// field in mixed case (`X-Backend-Case: kept`).
fn raw_backend() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().unwrap().to_string();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Ok(n) = conn.read(&mut chunk) else { return };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head: Vec<u8> = buf.drain(..end + 4).collect();
                        seen.lock()
                            .unwrap()
                            .push(String::from_utf8_lossy(&head).into_owned());
                        let reply = b"HTTP/1.1 200 OK\r\nX-Backend-Case: kept\r\n\
                                      Content-Length: 2\r\n\r\nok";
                        if conn.write_all(reply).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, heads)
}

/// One request with a mixed-case field through a gateway with `server:` `extra`: the head the
/// backend received and the head the client got, as sent on the wire.
fn through(extra: &str) -> (String, String) {
    let (backend, heads) = raw_backend();
    let yaml = GatewayConfig::echo(&backend, "none")
        .server(&format!("{{ threads: 2, grace_period: 1s{extra} }}"))
        .yaml();
    let gw = Gateway::start(&yaml);
    let mut conn = TcpStream::connect(gw.listen_addr()).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        conn,
        "GET /x HTTP/1.1\r\nHost: a.example\r\nX-Client-Case: sent\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = Vec::new();
    conn.read_to_end(&mut reply).expect("reply");
    let reply = String::from_utf8_lossy(&reply).into_owned();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let received = heads
        .lock()
        .unwrap()
        .first()
        .cloned()
        .expect("backend saw it");
    (received, reply)
}

#[test]
fn edited_heads_go_out_in_lower_case_by_default() {
    let (received, reply) = through("");
    for line in [
        "x-client-case: sent\r\n",
        "x-forwarded-proto: http\r\n",
        "x-request-id: ",
    ] {
        assert!(received.contains(line), "backend got:\n{received}");
    }
    assert!(
        !received.contains("X-Client-Case"),
        "backend got:\n{received}"
    );
    assert!(
        reply.contains("\r\nx-backend-case: kept\r\n"),
        "client got:\n{reply}"
    );
    assert!(reply.contains("\r\nx-request-id: "), "client got:\n{reply}");
}

#[test]
fn preserve_header_case_keeps_each_names_case_both_ways() {
    let (received, reply) = through(", preserve_header_case: true");
    assert!(
        received.contains("\r\nX-Client-Case: sent\r\n"),
        "backend got:\n{received}"
    );
    assert!(
        received.contains("x-forwarded-proto: http\r\n"),
        "backend got:\n{received}"
    );
    assert!(
        reply.contains("\r\nX-Backend-Case: kept\r\n"),
        "client got:\n{reply}"
    );
}
