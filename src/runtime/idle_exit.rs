//! Ends a graceful shutdown as soon as nothing is pending. Pingora sleeps the whole
//! `server.grace_period` after SIGTERM (or SIGQUIT, after handing the sockets over) whatever is
//! left; this service waits instead until no request is in flight, every background loop has
//! done its shutdown-time act (lease return) and every spawned store call (usage settlement,
//! lease release) has ended ([`crate::pending`]), then tells [`super::server::run`] to return.
//! With work left it keeps waiting, and the grace period bounds the wait as before.

use crate::pending;
use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::sync::mpsc::Sender;
use std::sync::Mutex;
use std::time::Duration;

/// How often the pending counts are read once shutdown started.
const POLL: Duration = Duration::from_millis(50);

/// Consecutive reads at zero before exiting (a gap of one read is tolerated).
const QUIET_READS: u32 = 3;

/// Background service: after graceful shutdown starts and `drain` has passed (the proxy's
/// window for a request arriving on a kept-alive connection), sends on `done` once nothing is
/// pending.
pub struct IdleExit {
    /// The proxy listeners' drain before they close idle connections.
    pub drain: Duration,
    /// Told once, when the process may exit.
    pub done: Mutex<Sender<()>>,
}

#[async_trait]
impl BackgroundService for IdleExit {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        while !*shutdown.borrow() {
            if shutdown.changed().await.is_err() {
                return;
            }
        }
        tokio::time::sleep(self.drain + POLL).await;
        let mut quiet = 0;
        while quiet < QUIET_READS {
            quiet = if pending::counts() == [0, 0, 0] {
                quiet + 1
            } else {
                0
            };
            tokio::time::sleep(POLL).await;
        }
        tracing::info!("graceful shutdown: no request in flight and no shutdown work left, exiting before the grace period ends");
        if let Ok(done) = self.done.lock() {
            let _ = done.send(());
        }
    }
}
