//! The Pingora floor for the benchmark: a bare `pingora-proxy` reverse proxy with the same
//! server settings as tollgate (worker threads, upstream keep-alive, timeouts) and nothing else:
//! no stages, no metrics, no request id, no header rewriting. `bench/run.py` runs it as variant
//! P so that D − P is what tollgate's own request path costs on top of Pingora.
//!
//! Same allocator as tollgate: mimalloc with the default `mimalloc` feature, the system one
//! with `--no-default-features`.
//!
//! Usage: `pingora_floor <listen addr> <backend addr> <threads> [work_stealing: true|false]`
//! (default `true`, Pingora's own default; the bench passes tollgate's `server.work_stealing`).

use async_trait::async_trait;
use pingora::prelude::*;
use pingora::server::configuration::ServerConf;
use std::time::Duration;

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Floor {
    backend: String,
}

#[async_trait]
impl ProxyHttp for Floor {
    type CTX = ();
    fn new_ctx(&self) {}

    async fn upstream_peer(&self, _session: &mut Session, _ctx: &mut ()) -> Result<Box<HttpPeer>> {
        let mut peer = HttpPeer::new(self.backend.as_str(), false, String::new());
        peer.options.connection_timeout = Some(Duration::from_secs(1));
        peer.options.total_connection_timeout = Some(Duration::from_secs(1));
        peer.options.read_timeout = Some(Duration::from_secs(30));
        peer.options.write_timeout = Some(Duration::from_secs(30));
        peer.options.idle_timeout = Some(Duration::from_secs(60));
        Ok(Box::new(peer))
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (listen, backend, threads, stealing) = match args.as_slice() {
        [_, l, b, t] => (l, b, t, "true"),
        [_, l, b, t, s] => (l, b, t, s.as_str()),
        _ => {
            eprintln!(
                "usage: pingora_floor <listen addr> <backend addr> <threads> [work_stealing]"
            );
            std::process::exit(2);
        }
    };
    let conf = ServerConf {
        threads: threads.parse().expect("threads: a positive integer"),
        work_stealing: stealing.parse().expect("work_stealing: true or false"),
        grace_period_seconds: Some(1),
        graceful_shutdown_timeout_seconds: Some(1),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let mut proxy = pingora::proxy::http_proxy_service(
        &server.configuration,
        Floor {
            backend: backend.clone(),
        },
    );
    proxy.add_tcp(listen);
    server.add_service(proxy);
    server.run_forever();
}
