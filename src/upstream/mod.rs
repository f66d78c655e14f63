//! Upstream stage: routing to a named upstream, per-upstream concurrency slots, the pool of
//! backends behind it, and HTTP/2 to them ([`h2`]).

pub mod balancer;
pub mod h2;

use crate::concurrency::fair_queue::Order;
use crate::concurrency::slots::Slots;
use crate::config::UpstreamSettings;
use crate::tls::upstream::PeerTls;
use balancer::Pool;
use std::sync::Arc;

/// One upstream of a snapshot: its settings, backends and slots.
pub struct Upstream {
    pub settings: UpstreamSettings,
    pub pool: Arc<Pool>,
    /// `None` when `max_concurrency` is not set.
    pub slots: Option<Arc<Slots>>,
    /// HTTPS settings of the backends; `None` = plain HTTP.
    pub tls: Option<Arc<PeerTls>>,
}

impl Upstream {
    /// Builds an upstream, reusing `previous`'s pool and slots where unchanged. `tls` is the
    /// loaded `settings.tls` (requests and health checks use it).
    pub fn build(
        settings: &UpstreamSettings,
        previous: Option<&Upstream>,
        tls: Option<Arc<PeerTls>>,
    ) -> Self {
        let pool = match previous {
            Some(p) if p.pool.same_as(settings) => p.pool.clone(),
            _ => Arc::new(Pool::new(settings, tls.as_deref())),
        };
        let order = match &settings.queue {
            Some(q) if q.fair => Order::Fair,
            _ => Order::Fifo,
        };
        // Kept (with its holders and waiters) while the slot count and queue order are
        // unchanged; queue bounds, timeout and per-tenant cap apply per request.
        let slots =
            settings
                .max_concurrency
                .map(|max| match previous.and_then(|p| p.slots.as_ref()) {
                    Some(s) if s.max == max && s.order() == order => s.clone(),
                    _ => Arc::new(Slots::new(&settings.name, max, order)),
                });
        Upstream {
            settings: settings.clone(),
            pool,
            slots,
            tls,
        }
    }
}
