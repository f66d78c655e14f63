"""The loss account: how each answer is classified, each tenant's allowance, and the verdict lines.

Pure arithmetic over what the traffic recorded and what the driver sampled; no I/O. Every line
is (name, ok, detail); the run fails when any line is not ok.

Bounds (stated in bench/README.md, "Chaos soak"):

- a token bucket that starts full admits at most `burst + limit / per x span` over `span`
  seconds (`allowance`); `span` runs from the tenant's first request sent to its last answer;
- tiers with `on_failure: closed` (`exact`, `churn`): every admission counts against it;
- tier `local`: Redis's admissions count against it; the in-memory fallback may admit on top
  `local_bound`: each gateway process starts one local bucket per tenant, full with
  floor(burst / fleet) tokens, and starts them again each time its breaker closes, and the
  local buckets of the fleet refill at most at the tier's rate (each at limit / fleet);
- anonymous clients (tier `anonymous`, `on_failure: open`): Redis's admissions per address
  count against its allowance; `open` admits while Redis is down are reported, not bounded.

A WebSocket upgrade answered 101 and a gRPC call answered OK are admissions like a 200: they
count against the tenant's allowance the same way (`classify`, `classify_grpc`).
"""

import math

PROBLEM_CAPACITY = "temporary-reduced-capacity"

# Classes of an answer (`classify`).
REDIS_ADMITTED = "redis_admitted"
LOCAL_ADMITTED = "local_admitted"
OPEN_ADMITTED = "open_admitted"
LIMITED = "limited"
UNAUTHENTICATED = "unauthenticated"
DECLARED_503 = "declared_503"
UNDECLARED_5XX = "undeclared_5xx"
OTHER = "other"
ADMITTED = (REDIS_ADMITTED, LOCAL_ADMITTED, OPEN_ADMITTED)
# gRPC only (`classify_grpc`): an UNAVAILABLE the gateway made that is not the declared capacity
# refusal (no healthy or reachable backend); a failure no gateway answered (no `x-request-id`:
# the connection broke); a client deadline passed without any answer.
GRPC_UNAVAILABLE = "grpc_unavailable"
GRPC_TRANSPORT = "grpc_transport"
GRPC_NO_ANSWER = "grpc_no_answer"


def admitted_class(headers):
    """Who admitted a request that went through, from its answer's headers: Redis (RateLimit
    fields), the local fallback (and `Tollgate-Degraded`), or nobody (`on_failure: open`, no
    RateLimit fields)."""
    if "ratelimit-policy" not in headers:
        return OPEN_ADMITTED
    return LOCAL_ADMITTED if "tollgate-degraded" in headers else REDIS_ADMITTED


def classify(status, headers, body):
    """The class of one answer from its status, headers (lowercase names) and body text.

    A 200, or a 101 to a WebSocket upgrade, is an admission (`admitted_class`). A 503 is
    declared when it is the problem type `temporary-reduced-capacity` with a `Retry-After`
    (policy `closed`, or a full upstream queue: docs/responses.md); any other 5xx is not.
    """
    if status in (101, 200):
        return admitted_class(headers)
    if status == 429:
        return LIMITED
    if status == 401:
        return UNAUTHENTICATED
    if status == 503 and PROBLEM_CAPACITY in body and "retry-after" in headers:
        return DECLARED_503
    if status >= 500:
        return UNDECLARED_5XX
    return OTHER


def classify_grpc(code, meta):
    """The class of one gRPC call from its status code name ("OK", "UNAVAILABLE", ...) and its
    metadata (initial and trailing merged, lowercase names).

    The gateway's refusals are trailers-only answers carrying `x-request-id` (docs/grpc.md):
    RESOURCE_EXHAUSTED is a limit (429), UNAUTHENTICATED a 401, UNAVAILABLE with `retry-after`
    the declared capacity refusal (the 503 of policy `closed` or a full queue), any other
    UNAVAILABLE `GRPC_UNAVAILABLE`. Without `x-request-id` no gateway answered: UNAVAILABLE is
    `GRPC_TRANSPORT`, DEADLINE_EXCEEDED `GRPC_NO_ANSWER`. Anything else is `OTHER`.
    """
    from_gateway = "x-request-id" in meta
    if code == "OK":
        return admitted_class(meta)
    if code == "RESOURCE_EXHAUSTED":
        return LIMITED
    if code == "UNAUTHENTICATED":
        return UNAUTHENTICATED
    if code == "UNAVAILABLE":
        if not from_gateway:
            return GRPC_TRANSPORT
        return DECLARED_503 if "retry-after" in meta else GRPC_UNAVAILABLE
    if code == "DEADLINE_EXCEEDED" and not from_gateway:
        return GRPC_NO_ANSWER
    return OTHER


def concurrency_refusal(headers):
    """Whether a 429 is a `max_in_flight` refusal (`RateLimit-Policy: "<tier>.concurrency"`)."""
    return ".concurrency" in headers.get("ratelimit-policy", "")


def allowance(burst, limit, per_s, span_s):
    """Tokens a full bucket of `burst`, refilling `limit` per `per_s` seconds, can give in
    `span_s` seconds (a float; admissions are compared with its floor)."""
    return burst + limit / per_s * max(0.0, span_s)


def over(admitted, bound):
    """Admissions beyond `bound` (0 when within it)."""
    return max(0, admitted - math.floor(bound + 1e-9))


def local_bound(burst, limit, per_s, span_s, fleet, episodes):
    """What a tier's `local` fallback can admit for one tenant over `span_s`: `episodes` fresh
    local buckets of floor(burst / fleet) tokens (at least 1), refilled by `fleet` instances at
    max(1, floor(limit / fleet)) per `per_s` each."""
    share_burst = max(1, burst // fleet)
    share_limit = max(1, limit // fleet)
    return episodes * share_burst + fleet * share_limit / per_s * max(0.0, span_s)


def quarters(samples):
    """Median of the first and of the last quarter of `samples` (at least 4 values), else None."""
    if len(samples) < 4:
        return None
    q = max(1, len(samples) // 4)

    def med(xs):
        xs = sorted(xs)
        n = len(xs)
        return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2

    return med(samples[:q]), med(samples[-q:])


# A gateway's RSS is flat when its last quarter's median is at most this factor of the first
# quarter's plus this slack (MiB); its open fds when they grew by at most this many.
RSS_FACTOR, RSS_SLACK_MB, FD_SLACK = 1.5, 24, 48
MIN_SAMPLES = 8


def flat(series_rss_mb, series_fds):
    """(ok, detail) for one gateway process's RSS (MiB) and fd samples over its life."""
    if len(series_rss_mb) < MIN_SAMPLES:
        return True, f"{len(series_rss_mb)} samples (under {MIN_SAMPLES}: not judged)"
    r1, r4 = quarters(series_rss_mb)
    f1, f4 = quarters(series_fds)
    ok = r4 <= r1 * RSS_FACTOR + RSS_SLACK_MB and f4 <= f1 + FD_SLACK
    return ok, f"RSS {r1:.1f} -> {r4:.1f} MiB, fds {f1:.0f} -> {f4:.0f}"


def in_window(t, windows):
    """Whether time `t` falls in one of the (start, end) windows."""
    return any(a <= t <= b for a, b in windows)


class TenantTally:
    """One tenant's (or anonymous address's) answers: counts per class and the span."""

    __slots__ = ("counts", "first", "last")

    def __init__(self):
        self.counts = {}
        self.first = None
        self.last = None

    def add(self, cls, sent_at, done_at):
        self.counts[cls] = self.counts.get(cls, 0) + 1
        if self.first is None or sent_at < self.first:
            self.first = sent_at
        if self.last is None or done_at > self.last:
            self.last = done_at

    def copy(self):
        c = TenantTally()
        c.counts, c.first, c.last = dict(self.counts), self.first, self.last
        return c

    def n(self, *classes):
        return sum(self.counts.get(c, 0) for c in classes)

    def span(self):
        return 0.0 if self.first is None else self.last - self.first


def tenant_overs(tallies, limits, fleet, episodes):
    """Per tenant, the admissions beyond the bound of its tier.

    `tallies`: tenant -> TenantTally; `limits`: tenant -> (tier, burst, limit, per_s, policy).
    Returns a list of dicts (tenant, tier, admitted, redis_admitted, local_admitted, allowance,
    local_bound, over), one per tenant, sorted by tenant.
    """
    rows = []
    for tenant in sorted(tallies):
        t = tallies[tenant]
        tier, burst, limit, per_s, policy = limits[tenant]
        allow = allowance(burst, limit, per_s, t.span())
        redis = t.n(REDIS_ADMITTED)
        local = t.n(LOCAL_ADMITTED)
        opened = t.n(OPEN_ADMITTED)
        row = {
            "tenant": tenant,
            "tier": tier,
            "admitted": redis + local + opened,
            "redis_admitted": redis,
            "local_admitted": local,
            "open_admitted": opened,
            "allowance": round(allow, 2),
            "local_bound": 0.0,
        }
        if policy == "local":
            lb = local_bound(burst, limit, per_s, t.span(), fleet, episodes)
            row["local_bound"] = round(lb, 2)
            row["over"] = max(over(redis, allow), over(redis + local, allow + lb)) + opened
        elif policy == "open":
            row["over"] = over(redis, allow)
        else:
            row["over"] = over(redis + local + opened, allow)
        rows.append(row)
    return rows


# The WebSocket counters the load keeps (`traffic.Stats.ws`), in the order the summary lists them.
WS_COUNTERS = ("attempted", "opened", "refused", "refused_concurrency", "other_answer", "closed",
               "dropped", "broken_by_kill", "failed", "lost", "echoes")


def ws_verdict(ws, backend):
    """(ok, detail) of the WebSocket line.

    `ws`: the load's counters (`WS_COUNTERS`): upgrades attempted, answered 101 (`opened`), 429
    (`refused`, of which `refused_concurrency` by `max_in_flight`), otherwise (`other_answer`);
    sessions ended by a close handshake (`closed`), by the client hanging up mid-way (`dropped`),
    by a gateway SIGKILL (`broken_by_kill`), any other way (`failed`: wrong accept, wrong echo,
    connection closed), or hung (`lost`: no answer or echo within the deadline); messages echoed.
    `backend`: the WebSocket backend's /stats after the settle ({"open": n, ...}) or None.

    Passes when no session failed or hung, the backend holds no session open, and at least one
    upgrade was answered 101 when any was attempted.
    """
    open_left = None if backend is None else backend.get("open")
    ok = (ws["failed"] == 0 and ws["lost"] == 0 and open_left == 0
          and (ws["opened"] > 0 or ws["attempted"] == 0))
    detail = (f"{ws['attempted']} upgrades: {ws['opened']} opened (101), {ws['refused']} refused "
              f"(429, {ws['refused_concurrency']} of them max_in_flight), {ws['other_answer']} "
              f"other answers; sessions: {ws['closed']} closed, {ws['dropped']} dropped mid-way "
              f"by the client, {ws['broken_by_kill']} broken by a gateway SIGKILL, "
              f"{ws['failed']} failed, {ws['lost']} lost; {ws['echoes']} messages echoed; "
              f"backend sessions still open: {open_left}")
    return ok, detail


def grpc_verdict(counts, unavailable_at, unexpected, windows):
    """(ok, detail) of the gRPC line.

    `counts`: class -> calls (`classify_grpc`, after retries); `unavailable_at`: the times of the
    `GRPC_UNAVAILABLE` answers; `unexpected`: how many calls ended `OTHER` (a 401 for a
    configured key is judged with the other answers' line); `windows`: (start, end) of the declared faults.
    Passes when every `GRPC_UNAVAILABLE` fell in a window, nothing was unexpected, and some call
    was admitted when any was made.
    """
    admitted = sum(counts.get(c, 0) for c in ADMITTED)
    outside = [t for t in unavailable_at if not in_window(t, windows)]
    made = sum(counts.values())
    ok = not outside and unexpected == 0 and (admitted > 0 or made == 0)
    detail = (f"{made} calls: {admitted} OK, {counts.get(LIMITED, 0)} RESOURCE_EXHAUSTED, "
              f"{counts.get(DECLARED_503, 0)} UNAVAILABLE declared (Retry-After), "
              f"{len(unavailable_at) - len(outside)} other UNAVAILABLE during faults, "
              f"{len(outside)} outside faults, {counts.get(UNAUTHENTICATED, 0)} UNAUTHENTICATED "
              f"(rotating keys), {unexpected} unexpected")
    if outside:
        detail += f"; first outside: {outside[:3]}"
    return ok, detail
