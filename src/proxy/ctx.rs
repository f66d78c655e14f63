//! The per-request state ([`Ctx`]) every hook and stage reads and fills in.

use crate::concurrency::slots::SlotGuard;
use crate::config::RouteSettings;
use crate::identity::Identity;
use crate::pipeline::settle::Settle;
use crate::pipeline::usage::UsageMeter;
use crate::pipeline::{Layer, Outcome};
use crate::quota::inflight::InflightLease;
use crate::response::{HeaderBlock, QuotaHeaders};
use crate::snapshot::Snapshot;
use crate::upstream::Upstream;
use http::HeaderValue;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Instant;

/// Per-request state. Dropped after `logging` on every path, which releases the upstream slot.
pub struct Ctx {
    pub(super) snapshot: Arc<Snapshot>,
    /// The request id as a header value (visible ASCII), shared by the backend request, the
    /// response, problem bodies and logs ([`Ctx::request_id`]).
    pub(super) request_id: HeaderValue,
    /// The client sent exactly one `X-Request-Id`, and it is `request_id`.
    pub(super) request_id_sent: bool,
    pub(super) started: Instant,
    pub(super) client: IpAddr,
    pub(super) route: Option<usize>,
    /// Who the request is (anonymous included), once the identity stage passed.
    pub(super) identity: Option<Identity>,
    /// The tenant stage used the identity's tenant bucket ([`Ctx::tenant`]). The tier it used
    /// is always the identity's own (`tiers:` is keyed by name), so no copy of either is kept.
    pub(super) tenant_staged: bool,
    /// The place of [`Ctx::tier_label`]'s decision series in the snapshot's, once a decision
    /// looked it up; cleared when the identity (which names the tier) is set ([`Ctx::set_identity`]).
    pub(super) tier_series: Option<Option<usize>>,
    pub(super) quota_headers: Option<QuotaHeaders>,
    pub(super) slot: Option<SlotGuard>,
    /// The request body's share of `server.body_buffer_total_bytes`, when it was buffered.
    pub(super) body_buffer: Option<super::body_buffer::BufferedBody>,
    /// The request's fleet-wide concurrency leases (`max_in_flight` of its tier and of its
    /// concurrency rules), given back when dropped.
    pub(super) inflight: Vec<InflightLease>,
    /// The usage reserves (the tier's, its rules'), each settled when the request ends
    /// (`finish`); a meter dropped unsettled keeps its reserve.
    pub(super) usage: Vec<UsageMeter>,
    /// The request counts kept until the outcome is known (`count`, `refund_on`,
    /// docs/rules.md#counting-by-outcome): settled by the response head or when it ends.
    pub(super) settle: Settle,
    /// Layer that decided the request's fate and how (for the access log).
    pub(super) decided: (Layer, Outcome),
    pub(super) connect_tries: usize,
    /// Request body bytes received so far (for `routes[].max_body_bytes`).
    pub(super) body_bytes: u64,
    /// The request body to send instead of the client's (read whole by the tenant stage):
    /// an OpenAI-style streamed request with `stream_options.include_usage: true` added
    /// (docs/usage-cost.md#streams-and-their-count).
    pub(super) body_rewrite: Option<bytes::Bytes>,
    /// The HTTP status of the refusal tollgate wrote, for the route metrics and the access log:
    /// what the refusal is whatever the wire says (a gRPC call's refusal is HTTP 200 on the wire,
    /// docs/grpc.md#what-a-refused-call-carries).
    pub(super) refused_with: Option<u16>,
    /// The request's server span, only when `observability.tracing` is on.
    pub(super) trace: Option<Box<crate::observe::tracing::RequestTrace>>,
    /// Counts the request as in flight for the idle exit. Last field: dropped after the leases
    /// and meters above have spawned their store calls (counted themselves), so the count
    /// never shows a gap.
    _busy: crate::pending::Busy,
}

impl Ctx {
    /// A request's state before its first stage, on the current `snapshot`.
    pub(super) fn new(snapshot: Arc<Snapshot>) -> Ctx {
        Ctx {
            snapshot,
            request_id: HeaderValue::from_static(""),
            request_id_sent: false,
            started: Instant::now(),
            client: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            route: None,
            identity: None,
            tenant_staged: false,
            tier_series: None,
            quota_headers: None,
            slot: None,
            body_buffer: None,
            inflight: Vec::new(),
            usage: Vec::new(),
            settle: Settle::default(),
            decided: (Layer::Upstream, Outcome::Admitted),
            connect_tries: 0,
            body_bytes: 0,
            body_rewrite: None,
            refused_with: None,
            trace: None,
            _busy: crate::pending::busy(crate::pending::Work::Request),
        }
    }

    /// The request id as text (always visible ASCII: a checked client id or a UUID).
    pub(super) fn request_id(&self) -> &str {
        self.request_id.to_str().unwrap_or_default()
    }

    /// The request's route, once the route stage resolved it.
    pub(super) fn route<'a>(&self, snap: &'a Snapshot) -> Option<&'a RouteSettings> {
        self.route.map(|i| &snap.config.routes[i])
    }
    /// The upstream of the request's route, once the route stage resolved it.
    pub(super) fn upstream<'a>(&self, snap: &'a Snapshot) -> Option<&'a Upstream> {
        snap.route_upstream(self.route?)
    }
    /// Sets who the request is, and forgets the tier's series looked up for the one before.
    pub(super) fn set_identity(&mut self, id: Identity) {
        self.identity = Some(id);
        self.tier_series = None;
    }
    /// The tier for metrics and the access log: the identity's (the one the tenant stage used,
    /// when it decided), else `-`.
    pub(super) fn tier_label(&self) -> &str {
        self.identity
            .as_ref()
            .and_then(|i| i.tier.as_deref())
            .unwrap_or("-")
    }

    /// The tenant whose bucket the tenant stage used, once it decided.
    pub(super) fn tenant(&self) -> Option<&str> {
        let id = self.identity.as_ref().filter(|_| self.tenant_staged);
        id.map(|i| i.tenant.as_str())
    }
    /// The rate-limit header pairs of the request, once the tenant stage decided, without
    /// `Retry-After`: a refusal carries its own ([`Rejection::retry_after`]), and a request that
    /// goes on (admitted, or refused in shadow mode) is not told to retry.
    ///
    /// [`Rejection::retry_after`]: crate::pipeline::Rejection::retry_after
    pub(super) fn quota_pairs(&self) -> Vec<(&'static str, String)> {
        self.quota_fields().into_pairs()
    }

    /// [`Ctx::quota_pairs`] as one [`HeaderBlock`] (every value in one buffer).
    pub(super) fn quota_fields(&self) -> HeaderBlock {
        let Some(q) = &self.quota_headers else {
            return HeaderBlock::default();
        };
        let mut fields = self.snapshot.quota_fields(q);
        fields.retain(|name| name != "Retry-After");
        fields
    }

    /// Gives back at once what the request holds beyond its answer, when tollgate answers it
    /// itself: its fleet-wide leases, its upstream slot and, when `refused` (a refusal made
    /// after admission, rather than a backend failure, which `finish` settles by `refund_on`),
    /// its usage reserves, refunded whole (docs/fleet-concurrency.md#how-a-lease-works,
    /// docs/usage-cost.md#reserve-settle-refund). What was given back is gone from the state,
    /// so a second call, and `finish`, do nothing more.
    pub(super) fn release_held(&mut self, refused: bool) {
        self.inflight.clear();
        self.slot = None;
        if refused {
            for meter in self.usage.drain(..) {
                let ending = meter.refused();
                meter.settle(ending);
            }
        }
    }

    /// True when the request's route runs in shadow mode (every limit layer shadows for it).
    pub(super) fn shadow_route(&self) -> bool {
        self.route(&self.snapshot)
            .is_some_and(|r| r.mode.is_shadow())
    }
}

#[cfg(test)]
mod tests {
    use super::super::hooks::Proxy;
    use pingora::proxy::ProxyHttp;

    /// Pingora keeps the request context inside each request's future and moves that future
    /// into a box per request: the context is a pointer there, not the whole state.
    #[test]
    fn the_request_future_holds_a_pointer_to_the_request_state() {
        assert_eq!(
            std::mem::size_of::<<Proxy as ProxyHttp>::CTX>(),
            std::mem::size_of::<usize>()
        );
    }
}
