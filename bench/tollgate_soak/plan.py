"""The soak's fixed plan: 200 tenants in three tiers, and when each fault happens.

Pure: no processes, no clock. The tiers (their limits are in `gwconfig`):

- `exact` (tenants t000-t099), `on_failure: closed`: every admission is a Redis decision, so
  admitted <= burst + rate x time holds exactly;
- `local` (t100-t159), `on_failure: local`, `max_in_flight` leases: Redis decisions as above,
  plus what the in-memory fallback may admit while Redis is unreachable (`account.local_bound`);
- `churn` (t160-t199), `on_failure: closed`: its limits change at every reload (two settings,
  the account uses the larger), and the keys of t190-t199 exist only in even generations.
"""

TENANTS = 200
EXACT = range(0, 100)
LOCAL = range(100, 160)
CHURN = range(160, 200)
ROTATING = range(190, 200)

RELOAD_EVERY_S = 10.0
# The gap between faults in one period, and the quiet time kept before the end of the run.
FAILOVER_PERIOD_MAX_S = 300.0
QUIET_END_S = 20.0
FREEZE_S = 2.0
BACKEND_DOWN_S = 2.0
GATEWAY_DOWN_S = 3.0


def tenant_name(i):
    """`t000` .. `t199`."""
    return f"t{i:03d}"


def tier_of(i):
    """The tier of tenant number `i` (0-199)."""
    if i in EXACT:
        return "exact"
    if i in LOCAL:
        return "local"
    return "churn"


def api_key(i):
    """Tenant `i`'s API key (the gateway config holds its SHA-256)."""
    return f"soak-key-{i:03d}-{(i * 7919) % 100000:05d}"


def key_present(i, generation):
    """Whether tenant `i`'s key is in the config of reload `generation` (0 = the first config)."""
    return i not in ROTATING or generation % 2 == 0


def schedule(duration_s):
    """The faults of a run of `duration_s` seconds, as a sorted list of (at_s, kind, arg).

    One period is min(300 s, duration / 2); in each period k (starting at k x period) come a
    backend restart at 11 %, a Redis freeze at 25 %, a gateway SIGKILL at 39 % and a Sentinel
    failover at the period's end. Nothing is scheduled in the last `QUIET_END_S` seconds, so
    the account sees a settled fleet. Kinds: "backend" (arg: backend index 0-1), "freeze",
    "gateway" (arg: gateway index 0-2), "failover". A 3-minute run: backend 9.9 s, freeze
    22.5 s, gateway 35.1 s, failover 90 s, backend 99.9 s, freeze 112.5 s, gateway 125.1 s.
    """
    period = min(FAILOVER_PERIOD_MAX_S, duration_s / 2.0)
    last = duration_s - QUIET_END_S
    events = []
    k = 0
    while k * period < last:
        start = k * period
        for frac, kind, arg in (
            (0.11, "backend", k % 2),
            (0.25, "freeze", None),
            (0.39, "gateway", k % 3),
            (1.0, "failover", None),
        ):
            at = round(start + frac * period, 1)
            if at <= last:
                events.append((at, kind, arg))
        k += 1
    return sorted(events, key=lambda e: e[0])
