//! Two gateways on one Redis with one config and environment: the smallest fleet, for changes
//! made through one instance's admin API and seen on the other.

use super::{Backend, Gateway, RedisServer};

/// A `redis-server`, an echo backend and gateways `a` and `b` started with `yaml`.
pub struct Fleet {
    pub redis: RedisServer,
    pub backend: Backend,
    /// The config both gateways run (for a reload to the same file).
    pub yaml: String,
    pub a: Gateway,
    pub b: Gateway,
}

impl Fleet {
    /// Starts Redis and the backend, builds the config from them with `yaml`, and starts both
    /// gateways with the environment `env` (e.g. admin token variables).
    pub fn start(
        yaml: impl FnOnce(&RedisServer, &Backend) -> String,
        env: &[(&str, &str)],
    ) -> Fleet {
        let redis = RedisServer::start();
        let backend = Backend::start("echo");
        let yaml = yaml(&redis, &backend);
        let a = Gateway::start_with_env(&yaml, env);
        let b = Gateway::start_with_env(&yaml, env);
        Fleet {
            redis,
            backend,
            yaml,
            a,
            b,
        }
    }
}
