"""The arithmetic of bench/recovery.py (pure): its timeline, and what each tenant admitted
against the allowance of a limiter that never lost Redis and the documented bound of `local`
(docs/redis.md#when-redis-is-slow-or-down-failure-policy)."""

from collections import namedtuple

# The tier: LIMIT tokens per window, burst BURST.
LIMIT = 20
BURST = 20
# Each outage lasts this many windows.
OUTAGE_WINDOWS = 2.5
# Tokens of slack per outage: the late calls of the outage whose give-back may land after the
# carry (the calls before the breaker opened and its probes), and the clocks.
SLACK_PER_OUTAGE = 8

Plan = namedtuple("Plan", "outages end_s")


def plan(window_s, outages, windows_between):
    """One healthy window, then `outages` times: Redis frozen 2.5 windows, healthy
    `windows_between` windows. `outages`: (from, until) in seconds since the start."""
    at = float(window_s)
    spans = []
    for _ in range(outages):
        until = at + OUTAGE_WINDOWS * window_s
        spans.append((at, until))
        at = until + windows_between * window_s
    return Plan(outages=spans, end_s=at)


def back_at(answers, until):
    """When Redis decided again after the outage ending at `until`: the first answer after it
    that was not degraded (None when none was)."""
    return next((at for at, _, degraded in answers if at >= until and not degraded), None)


def outage_bound(gateways):
    """The documented excess of `local` per outage, in a fleet of `gateways` instances: one burst
    when it starts (the local buckets start full), up to (gateways - 1) / gateways of a burst when
    it ends (the instances whose breaker closed first may take from Redis what the others'
    carries would have, until those land), and the slack."""
    return BURST + BURST * (gateways - 1) / gateways + SLACK_PER_OUTAGE


def figures(plan_, window_s, answers, elapsed_s, gateways=1):
    """Per tenant, from its answers [(seconds since start, admitted, degraded)], sorted:
    admitted, allowance, excess over it and the bound; per outage, what was admitted from
    when Redis decided again to the next outage (or the end) against limit x that time."""
    rate = LIMIT / window_s
    bound = len(plan_.outages) * outage_bound(gateways)
    tenants = {}
    for tenant, rows in answers.items():
        admitted = sum(1 for _, ok, _ in rows if ok)
        allowance = BURST + rate * elapsed_s
        after = []
        for i, (_, until) in enumerate(plan_.outages):
            nxt = plan_.outages[i + 1][0] if i + 1 < len(plan_.outages) else plan_.end_s
            back = back_at(rows, until)
            if back is None:
                after.append(None)
                continue
            got = sum(1 for at, ok, _ in rows if ok and back <= at < nxt)
            after.append({
                "back_s": round(back, 3),
                "admitted": got,
                "allowed": round(rate * (nxt - back), 1),
                "excess": round(got - rate * (nxt - back), 1),
            })
        tenants[tenant] = {
            "answers": len(rows),
            "degraded": sum(1 for *_, d in rows if d),
            "admitted": admitted,
            "allowance": round(allowance, 1),
            "excess": round(admitted - allowance, 1),
            "after_outages": after,
        }
    within = all(t["excess"] <= bound for t in tenants.values())
    return {"elapsed_s": round(elapsed_s, 2), "bound": bound, "tenants": tenants,
            "within_bound": within}


def report(figs):
    """Printable lines of `figures`."""
    lines = [f"elapsed {figs['elapsed_s']} s; bound: excess <= {figs['bound']} "
             f"(per outage: one burst, (n - 1) / n of one, {SLACK_PER_OUTAGE} tokens)"]
    for tenant, t in figs["tenants"].items():
        after = ", ".join(
            "never back" if a is None else f"{a['admitted']} of {a['allowed']} ({a['excess']:+})"
            for a in t["after_outages"]
        )
        lines.append(f"{tenant}: admitted {t['admitted']} of {t['answers']} ({t['degraded']} degraded), "
                     f"allowance {t['allowance']}, excess {t['excess']:+}; after each outage: {after}")
    lines.append("within bound" if figs["within_bound"] else "BOUND EXCEEDED")
    return lines
