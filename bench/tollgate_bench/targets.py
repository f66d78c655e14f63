"""Pure evaluation of results: ratios, derived figures and the target verdicts.

Every function here reads a results dict (as written to bench/results/<timestamp>.json) and returns
new values; none prints, measures or mutates its input. The targets and how each is measured are
listed in bench/README.md ("Targets"); `report` prints the verdicts, `tests/test_targets.py` checks
them against the committed results.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    """One target: `key` a stable id, `target` its printed name, `value` the measured figure
    (None when not measured), `ok` True / False, or None for "n/a" (not measured in this run),
    `shown` the figures printed next to the verdict."""

    key: str
    target: str
    value: object
    ok: object
    shown: str

    @property
    def label(self):
        """PASS, FAIL or "n/a " (padded to four characters, as printed)."""
        return "n/a " if self.ok is None else ("PASS" if self.ok else "FAIL")

    def as_json(self):
        """The record kept in the results JSON: {"target", "value", "pass"}."""
        return {"target": self.target, "value": self.value, "pass": self.ok}


def ratio(a, b):
    """a / b, or None when either is missing or b is 0."""
    return (a / b) if (a is not None and b) else None


def _get(summary, variant, key):
    return (summary.get(variant) or {}).get(key)


def throughput_ratios(summary):
    """Ratios of the medians in a throughput summary ({variant: medians}); None when a variant
    is missing."""
    g = lambda v, k: _get(summary, v, k)
    return {
        "F/B rps": ratio(g("F", "rps"), g("B", "rps")),
        "F/D rps": ratio(g("F", "rps"), g("D", "rps")),
        "E/D rps": ratio(g("E", "rps"), g("D", "rps")),
        "C/B rps": ratio(g("C", "rps"), g("B", "rps")),
        "D/B rps": ratio(g("D", "rps"), g("B", "rps")),
        "P/B rps": ratio(g("P", "rps"), g("B", "rps")),
        "D/P rps": ratio(g("D", "rps"), g("P", "rps")),
        "G 429/s ÷ F 200/s": ratio(g("G", "non2xx_rps"), g("F", "ok_rps")),
        "F/T rps": ratio(g("F", "rps"), g("T", "rps")),
        "D/T0 rps": ratio(g("D", "rps"), g("T0", "rps")),
        "F/P rps": ratio(g("F", "rps"), g("P", "rps")),
        "L/D rps": ratio(g("L", "rps"), g("D", "rps")),
        "L/F rps": ratio(g("L", "rps"), g("F", "rps")),
        "K/D rps": ratio(g("K", "rps"), g("D", "rps")),
        "R/F rps": ratio(g("R", "rps"), g("F", "rps")),
        "M/F rps": ratio(g("M", "rps"), g("F", "rps")),
        # The Pingora floor against Traefik: tollgate's path runs on top of the floor (D and F do
        # all P does and more), so D/T0 and F/T cannot exceed these in the same run.
        "P/T0 rps": ratio(g("P", "rps"), g("T0", "rps")),
        "P/T rps": ratio(g("P", "rps"), g("T", "rps")),
        # F's features off the proxied path, each beside F in the same run: tracing at 1 % (H)
        # and 100 % (I), a rule counted after the answer (N), keys from the store (S).
        "H/F rps": ratio(g("H", "rps"), g("F", "rps")),
        "I/F rps": ratio(g("I", "rps"), g("F", "rps")),
        "N/F rps": ratio(g("N", "rps"), g("F", "rps")),
        "S/F rps": ratio(g("S", "rps"), g("F", "rps")),
        "H/F CPU µs/req": ratio(g("H", "proxy_cpu_us_per_req"), g("F", "proxy_cpu_us_per_req")),
        "I/F CPU µs/req": ratio(g("I", "proxy_cpu_us_per_req"), g("F", "proxy_cpu_us_per_req")),
        # The decision service (X): gateway CPU per decision over F's per proxied request, and
        # Redis script calls per decision over F's per request.
        "X/F CPU µs/req": ratio(g("X", "proxy_cpu_us_per_req"), g("F", "proxy_cpu_us_per_req")),
        "X/F script calls/req": ratio(g("X", "script_calls_per_req"),
                                      g("F", "script_calls_per_req")),
        # "D/P in CPU µs/req": P's CPU per request over D's (1.0 = tollgate's path costs nothing
        # on top of Pingora; 0.95 = D spends 1/0.95 of P's CPU per request).
        "P/D CPU µs/req": ratio(g("P", "proxy_cpu_us_per_req"), g("D", "proxy_cpu_us_per_req")),
    }


def f_over_b_ceiling(summary, cpus):
    """(T_B, R_F, ceiling) or None: with every core busy during B, `cpus / B req/s` is the whole
    machine's CPU-µs per request (T_B); F needs at least that plus Redis's CPU-µs per decision
    (R_F), so F/B <= T_B / (T_B + R_F) on the same cores (bench/README.md, "Targets")."""
    b_rps, r_f = _get(summary, "B", "rps"), _get(summary, "F", "redis_cpu_us_per_req")
    if not b_rps or r_f is None:
        return None
    t_b = cpus / b_rps * 1e6
    return t_b, r_f, t_b / (t_b + r_f)


def paced_keys(paced_summary):
    """Labels of the paced runs: (A at the target rate, F at the target rate) and
    (A, F at half of F's max: "X@N/halfF"); each pair is None when not both were run."""
    half_f = [k for k in paced_summary if k.endswith("/halfF")]
    pa = [k for k in paced_summary if k.startswith("A@") and k not in half_f]
    pf = [k for k in paced_summary if k.startswith("F@") and k not in half_f]
    lo = sorted(half_f)  # ["A@N/halfF", "F@N/halfF"]
    return ((pa[0], pf[0]) if pa and pf else None), (tuple(lo) if len(lo) == 2 else None)


def added_p99_ms(paced_summary, pair):
    """Median F p99 − median A p99 (ms) of a pair from `paced_keys`, or None."""
    if pair is None:
        return None
    a, f = pair
    return paced_summary[f]["p99_ms"] - paced_summary[a]["p99_ms"]


def throughput_figures(res, cpus):
    """Information kept in the results JSON next to the targets (never a target itself):
    "f_over_b_ceiling" (see `f_over_b_ceiling`) and "added_p99_ms_at_half_f" (A vs F paced at 50 %
    of F's own max rate), each only when measured."""
    out = {}
    ceiling = f_over_b_ceiling(res["summary"], cpus)
    if ceiling is not None:
        out["f_over_b_ceiling"] = ceiling[2]
    ps = res.get("paced_summary") or {}
    half_f = paced_keys(ps)[1]
    if half_f is not None:
        out["added_p99_ms_at_half_f"] = added_p99_ms(ps, half_f)
    return out


def throughput_targets(res, paced_fraction):
    """Verdicts of a throughput result ({"summary", "records", "paced_summary", ...}).
    `paced_fraction` is the run's --paced-fraction (it names the latency target)."""
    s, ps = res["summary"], res.get("paced_summary") or {}
    g = lambda v, k: _get(s, v, k)
    ratios = throughput_ratios(s)
    out = []
    fb = ratios["F/B rps"]
    out.append(Verdict("f_over_b", "F rps >= 0.90 x B rps", fb, None if fb is None else fb >= 0.90,
                       f"F/B = {fb:.3f}" if fb is not None else "needs B and F"))
    ed = ratios["E/D rps"]
    out.append(Verdict("e_over_d", "E rps >= 0.95 x D rps", ed, None if ed is None else ed >= 0.95,
                       f"E/D = {ed:.3f}" if ed is not None else "needs D and E"))
    # Exactly one EVALSHA per tenant decision, every rep. F: every decision is an admission;
    # integer counts of every rep, not a median. Only when F ran with Redis.
    rs = [r for r in res["records"] if r["variant"] == "F" and "redis" in r]
    coalescing = any(r.get("coalescing") for r in rs)
    if rs:
        pairs = [(r["redis"]["evalsha"], r["tollgate"].get("tenant_admitted", 0),
                  r["tenant_decisions"]) for r in rs]
        # Since request coalescing (src/quota/coalesce.rs) one call may decide several requests:
        # runs that record it need at most one call per admission and at least one call, with
        # every decision still an admission made in Redis. Older runs keep their exact check.
        if coalescing:
            ok = all(0 < e <= a and a == d for e, a, d in pairs)
        else:
            ok = all(e == a and a == d for e, a, d in pairs)
        other = [(r["rep"], {k: v for k, v in r["tollgate"].items()
                             if k.startswith("tenant_") and k != "tenant_admitted" and v}
                  | ({"redis_errors": r["tollgate"]["redis_errors"]}
                     if r["tollgate"].get("redis_errors") else {})) for r in rs]
        other = [(rep, o) for rep, o in other if o]
        out.append(Verdict(
            "evalsha_per_admitted",
            "at most 1.0 EVALSHA per admitted tenant decision, every decision in Redis "
            "(F, coalesced)" if coalescing
            else "exactly 1.0 EVALSHA per admitted tenant decision (F)",
            [e / a if a else None for e, a, _ in pairs], ok,
            "EVALSHA/admitted per rep: " + ", ".join(
                f"{e}/{a} = {e / a:.4f}" if a else f"{e}/0" for e, a, _ in pairs)
            + "".join(f"; rep {rep}: {o}" for rep, o in other)))
    cpr = g("F", "redis_client_cmds_per_read")
    if coalescing:
        # One call in flight per tenant: concurrency shows as decisions per call, not as
        # commands per read (F has one tenant).
        calls = sum(r["redis"]["evalsha"] for r in rs)
        per_call = sum(r["tenant_decisions"] for r in rs) / calls if calls else None
        out.append(Verdict(
            "commands_per_read", "> 1 tenant decision per Redis call under concurrency "
            "(F, coalesced)", per_call, None if per_call is None else per_call > 1.0,
            (f"decisions/EVALSHA = {per_call:.2f}; gateway-sent commands/read = {cpr:.2f}")
            if per_call is not None and cpr is not None else "n/a"))
    else:
        out.append(Verdict(
            "commands_per_read", "> 1 Redis command per read under concurrency (F)", cpr,
            None if cpr is None else cpr > 1.0,
            (f"gateway-sent commands/read = {cpr:.2f} (incl. script-internal: "
             f"{g('F', 'redis_cmds_per_read'):.2f})") if cpr is not None else "n/a"))
    gf = ratios["G 429/s ÷ F 200/s"]
    out.append(Verdict(
        "g_flood", "G 429s/s >= 2 x F 200s/s", gf, None if gf is None else gf >= 2.0,
        f"G 429/s = {g('G', 'non2xx_rps'):.0f}, F 200/s = {g('F', 'ok_rps'):.0f}, ratio {gf:.3f}"
        if gf is not None else "needs F and G"))
    added = added_p99_ms(ps, paced_keys(ps)[0])
    out.append(Verdict(
        "added_p99", f"added p99 of F over A at {paced_fraction:.0%} of B's max rate <= 1 ms", added,
        None if added is None else added <= 1.0,
        f"{added:.3f} ms" if added is not None else "needs A, B, F and the paced phase"))
    out.extend(issue18_targets(res))
    out.extend(rules_targets(res))
    out.extend(feature_targets(res))
    return out


def _at_most(key, name, value, bound, shown, missing):
    return Verdict(key, name, value, None if value is None else value <= bound,
                   shown.format(value) if value is not None else missing)


def feature_targets(res):
    """Features beside F in one run: the decision service (X) at most half F's gateway CPU per
    request and no more Redis script calls per decision than F per request; tracing at 1 % (H)
    >= 0.95 x F req/s; keys from the store (S) >= 0.95 x F req/s."""
    r = throughput_ratios(res["summary"])
    x_calls = _get(res["summary"], "X", "script_calls_per_req")
    f_calls = _get(res["summary"], "F", "script_calls_per_req")
    calls = None if x_calls is None or f_calls is None else x_calls - f_calls
    return [
        _at_most("x_cpu", "X gateway CPU µs per decision <= 0.5 x F's per proxied request",
                 r["X/F CPU µs/req"], 0.5, "X/F CPU µs = {:.3f}", "needs F and X"),
        Verdict("x_redis_calls", "X Redis script calls per decision <= F's per request", calls,
                None if calls is None else calls <= 0,
                f"X {x_calls:.4f}, F {f_calls:.4f}" if calls is not None else "needs F and X"),
        _at_least("h_over_f", "tracing at 1 % (H) rps >= 0.95 x F rps", r["H/F rps"], 0.95,
                  "H/F = {:.3f}", "needs F and H"),
        _at_least("s_over_f", "keys from the store (S) rps >= 0.95 x F rps", r["S/F rps"], 0.95,
                  "S/F = {:.3f}", "needs F and S"),
    ]


def _at_least(key, name, value, bound, shown, missing):
    return Verdict(key, name, value, None if value is None else value >= bound,
                   shown.format(value) if value is not None else missing)


def _floor_bound(floor_ratio):
    """The shown suffix naming the Pingora floor's own ratio against the same peer: the most any
    proxy built on Pingora reached against it in this run ("" when P or the peer did not run)."""
    if floor_ratio is None:
        return ""
    return f" (the Pingora floor itself: {floor_ratio:.3f})"


def issue18_targets(res):
    """The same-job peer and the Pingora floor: F/T >= 2.5, D/T0 >= 2, D/P >= 0.95 in
    CPU µs/req (P ÷ D), F/P >= 0.85 req/s, leased L/D >= 0.95 req/s, and (every L rep) gateway-
    sent Redis commands per admission <= 1/tokens + 0.01."""
    r = throughput_ratios(res["summary"])
    out = [
        _at_least("f_over_t", "F rps >= 2.5 x T (Traefik + Redis rateLimit) rps", r["F/T rps"], 2.5,
                  "F/T = {:.3f}" + _floor_bound(r["P/T rps"]), "needs F and T"),
        _at_least("d_over_t0", "D rps >= 2 x T0 (bare Traefik) rps", r["D/T0 rps"], 2.0,
                  "D/T0 = {:.3f}" + _floor_bound(r["P/T0 rps"]), "needs D and T0"),
        _at_least("d_over_p_cpu", "D/P >= 0.95 in CPU µs/req (P µs ÷ D µs)", r["P/D CPU µs/req"], 0.95,
                  "P÷D CPU µs/req = {:.3f}", "needs D and P"),
        _at_least("f_over_p", "F rps >= 0.85 x P rps (exact mode)", r["F/P rps"], 0.85,
                  "F/P = {:.3f}", "needs F and P"),
        _at_least("l_over_d", "leased F (L) rps >= 0.95 x D rps", r["L/D rps"], 0.95,
                  "L/D = {:.3f}", "needs L and D"),
    ]
    ls = [x for x in res["records"] if x["variant"] == "L" and "redis" in x]
    if ls:
        figs = [(x.get("redis_client_cmds_per_admitted"), x.get("lease_tokens")) for x in ls]
        ok = all(c is not None and t and c <= 1 / t + 0.01 for c, t in figs)
        out.append(Verdict(
            "lease_commands", "L: Redis commands per admission <= 1/tokens + 0.01 (every rep)",
            [c for c, _ in figs], ok,
            "per rep: " + ", ".join(f"{c:.4f} (bound {1 / t + 0.01:.4f})" if c is not None and t
                                    else "n/a" for c, t in figs)))
    return out


def script_calls_per_decision(rec):
    """(script calls, tenant decisions, tenant admitted) of one measured run with Redis:
    EVALSHA + EVAL against the tenant layer's decisions (tollgate's /metrics deltas)."""
    return (rec["redis"]["evalsha"] + rec["redis"].get("eval", 0), rec.get("tenant_decisions", 0),
            (rec.get("tollgate") or {}).get("tenant_admitted", 0))


def script_calls_split(rec):
    """Script calls (EVALSHA + EVAL) of one measured run with Redis, split by script from what the
    scripts run inside Redis (INFO commandstats counts their redis.call commands, not the
    script): lease acquire = ZCARD (only lua/inflight_acquire.lua runs it; fleet_heartbeat.lua
    does too, but only with redis.fleet_size: auto, which the bench does not set), lease release =
    ZREM (lua/inflight_release.lua, once per call), lease renewal = ZREMRANGEBYSCORE - ZCARD
    (inflight_renew.lua and inflight_acquire.lua both run it once), rate = the rest (the tier's
    coalesced token bucket). A derived split: exact while no other script runs those commands.
    Returns {"calls", "acquire", "release", "renew", "rate", "admitted", "requests"} (counts)."""
    cs = rec["redis"].get("commandstats") or {}
    calls = rec["redis"]["evalsha"] + rec["redis"].get("eval", 0)
    acquire, release = cs.get("zcard", 0), cs.get("zrem", 0)
    renew = max(0, cs.get("zremrangebyscore", 0) - acquire)
    return {"calls": calls, "acquire": acquire, "release": release, "renew": renew,
            "rate": calls - acquire - release - renew,
            "admitted": (rec.get("tollgate") or {}).get("tenant_admitted", 0),
            "requests": rec.get("requests", 0)}


def rules_targets(res):
    """Limit rules on the tenant's hash tag (variant R = F + five `limits:` rules keyed by
    tenant): R >= 0.9 x F req/s (medians), and (every R rep) at most one Redis script call per
    tenant decision, at least one call, every decision an admission made in Redis."""
    r = throughput_ratios(res["summary"])
    out = [_at_least("r_over_f", "R (F + five tenant-keyed rules) rps >= 0.90 x F rps",
                     r["R/F rps"], 0.90, "R/F = {:.3f}", "needs F and R")]
    rs = [x for x in res["records"] if x["variant"] == "R" and "redis" in x]
    if rs:
        figs = [script_calls_per_decision(x) for x in rs]
        ok = all(0 < c <= d and a == d for c, d, a in figs)
        out.append(Verdict(
            "r_script_calls",
            "R: at most 1.0 Redis script call per tenant decision, all in Redis (every rep)",
            [c / d if d else None for c, d, _ in figs], ok,
            "script calls/decision per rep: " + ", ".join(
                f"{c}/{d} = {c / d:.4f}" if d else f"{c}/0" for c, d, _ in figs)))
    return out


def memory_targets(res):
    """Verdicts of a memory result ({"checkpoints", "max_clients", "plateau_at_bound",
    "bytes_per_tracked_client", ...})."""
    tr = res["checkpoints"][-1]["tracked"]
    bpc = res["bytes_per_tracked_client"]
    return [
        Verdict("tracked_plateau", "tracked clients plateau at edge.max_clients", tr,
                res["plateau_at_bound"],
                f"{tr} tracked, edge.max_clients {res['max_clients']} ({tr - res['max_clients']:+d})"),
        Verdict("bytes_per_client", "RSS plateau <= 200 bytes per tracked edge client", bpc,
                None if bpc is None else bpc <= 200,
                f"(RSS_end - RSS_reference) / tracked = {bpc:.0f} bytes" if bpc is not None else "n/a"),
    ]


def evaluate(data):
    """All verdicts of a results file: {"throughput": [Verdict], "memory": [Verdict]}, for the
    suites the file has. The latency target's name uses params.paced_fraction (default 0.5)."""
    out = {}
    if "throughput" in data:
        fraction = (data.get("params") or {}).get("paced_fraction", 0.5)
        out["throughput"] = throughput_targets(data["throughput"], fraction)
    if "memory" in data:
        out["memory"] = memory_targets(data["memory"])
    return out
