//! The proxy service, made the home runtime of the Redis connections as it starts
//! ([`crate::store::redis::home`]): before it accepts a connection, and before the services
//! that wait for it (the admin listener, whose warm-up makes the first connection) start.

use async_trait::async_trait;
use pingora::server::{ListenFds, RuntimeOpts, ShutdownWatch};
use pingora::services::{ServiceReadyNotifier, ServiceWithDependents};
use std::time::Duration;

/// `S`, whose runtime becomes the Redis connections' home when it starts.
pub struct RedisHome<S>(pub S);

#[async_trait]
impl<S: ServiceWithDependents> ServiceWithDependents for RedisHome<S> {
    async fn start_service(
        &mut self,
        fds: Option<ListenFds>,
        shutdown: ShutdownWatch,
        listeners_per_fd: usize,
        ready_notifier: ServiceReadyNotifier,
    ) {
        crate::store::redis::home::set(tokio::runtime::Handle::current());
        self.0
            .start_service(fds, shutdown, listeners_per_fd, ready_notifier)
            .await
    }

    fn name(&self) -> &str {
        self.0.name()
    }

    fn threads(&self) -> Option<usize> {
        self.0.threads()
    }

    fn runtime_opts_override(&self, global: &RuntimeOpts) -> Option<RuntimeOpts> {
        self.0.runtime_opts_override(global)
    }

    fn on_startup_delay(&self, time_waited: Duration) {
        self.0.on_startup_delay(time_waited)
    }

    fn listen_addresses(&self) -> Option<Vec<String>> {
        self.0.listen_addresses()
    }
}
