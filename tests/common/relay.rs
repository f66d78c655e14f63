//! A TCP relay in front of a server: the "address" of Redis as clients see it. It can be
//! re-pointed (like a DNS name or a moved virtual IP), delay every byte (a WAN link), be cut
//! and restored (a network partition), and black-hole its open connections (a link dropped
//! without a reset: nothing arrives, nothing is closed).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use super::processes::free_port;

/// Accepts on its own loopback port and forwards each new connection to the current target.
/// Re-pointing it leaves established connections where they are, exactly like a DNS change or a
/// moved virtual IP leaves a client's open sockets on the old host.
pub struct TcpRelay {
    pub port: u16,
    target: Arc<Mutex<String>>,
    cut: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
    /// Connections numbered below this forward nothing (black-holed).
    held_below: Arc<AtomicU64>,
    /// The number the next connection gets.
    next: Arc<AtomicU64>,
}

impl TcpRelay {
    /// Relays `127.0.0.1:<port>` → `target` ("host:port").
    pub fn start(target: &str) -> Self {
        Self::start_delayed(target, Duration::ZERO)
    }

    /// [`start`](Self::start) with `delay` added to every byte in each direction (order kept).
    pub fn start_delayed(target: &str, delay: Duration) -> Self {
        // A port handed out as free can still be taken before the bind (a process left by
        // another test binary): take the next one.
        let listener = (0..50)
            .find_map(|_| TcpListener::bind(("127.0.0.1", free_port())).ok())
            .expect("bind relay: 50 ports taken");
        let port = listener.local_addr().expect("addr").port();
        let relay = TcpRelay {
            port,
            target: Arc::new(Mutex::new(target.to_string())),
            cut: Arc::new(AtomicBool::new(false)),
            stop: Arc::new(AtomicBool::new(false)),
            streams: Arc::new(Mutex::new(Vec::new())),
            held_below: Arc::new(AtomicU64::new(0)),
            next: Arc::new(AtomicU64::new(0)),
        };
        let (target, cut, stop, streams) = (
            relay.target.clone(),
            relay.cut.clone(),
            relay.stop.clone(),
            relay.streams.clone(),
        );
        let (held_below, next) = (relay.held_below.clone(), relay.next.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop.load(Ordering::Acquire) {
                    return;
                }
                let Ok(client) = client else { continue };
                if cut.load(Ordering::Acquire) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let to = target.lock().unwrap().clone();
                let Ok(server) = TcpStream::connect(&to) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                {
                    let mut s = streams.lock().unwrap();
                    s.push(client.try_clone().expect("clone"));
                    s.push(server.try_clone().expect("clone"));
                }
                let hold = Hold {
                    number: next.fetch_add(1, Ordering::AcqRel),
                    below: held_below.clone(),
                };
                delayed_pipe(
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                    delay,
                    hold.clone(),
                );
                delayed_pipe(server, client, delay, hold);
            }
        });
        relay
    }

    /// New connections go to `target` from now on.
    pub fn point_to(&self, target: &str) {
        *self.target.lock().unwrap() = target.to_string();
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Partition: closes every relayed connection and refuses new ones until [`restore`](Self::restore).
    pub fn cut(&self) {
        self.cut.store(true, Ordering::Release);
        for s in self.streams.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Ends the partition.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::Release);
    }

    /// Black-holes every connection open now: their bytes are read and dropped in both
    /// directions, and nothing is closed. Connections made afterwards are relayed as usual.
    pub fn black_hole(&self) {
        self.held_below
            .store(self.next.load(Ordering::Acquire), Ordering::Release);
    }
}

/// Whether one relayed connection is black-holed.
#[derive(Clone)]
struct Hold {
    number: u64,
    below: Arc<AtomicU64>,
}

impl Hold {
    fn held(&self) -> bool {
        self.number < self.below.load(Ordering::Acquire)
    }
}

impl Drop for TcpRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        for s in self.streams.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// Copies `from` → `to`, each chunk written `delay` after it was read (order kept; at once for
/// a zero delay), then half-closes `to`. Chunks read while `hold` is held are dropped.
fn delayed_pipe(mut from: TcpStream, mut to: TcpStream, delay: Duration, hold: Hold) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    std::thread::spawn(move || {
        while let Ok((due, bytes)) = rx.recv() {
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if hold.held() {
                continue;
            }
            if to.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}
