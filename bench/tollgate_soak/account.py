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


def classify(status, headers, body):
    """The class of one answer from its status, headers (lowercase names) and body text.

    A 503 is declared when it is the problem type `temporary-reduced-capacity` with a
    `Retry-After` (policy `closed`, or a full upstream queue: docs/responses.md); any other 5xx
    is not.
    """
    degraded = "tollgate-degraded" in headers
    if status == 200:
        if "ratelimit-policy" not in headers:
            return OPEN_ADMITTED
        return LOCAL_ADMITTED if degraded else REDIS_ADMITTED
    if status == 429:
        return LIMITED
    if status == 401:
        return UNAUTHENTICATED
    if status == 503 and PROBLEM_CAPACITY in body and "retry-after" in headers:
        return DECLARED_503
    if status >= 500:
        return UNDECLARED_5XX
    return OTHER


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
