"""One measured wrk run of a system under test, with the CPU, Redis and tollgate-metrics
deltas around it, and the medians over repetitions."""

import re
import time

from .clients import msum, redis_info, scrape
from .common import REPO, median
from .processes import cpu_seconds, rss_kb
from .servers import backend_accepts
from .wrk import run_wrk, wrk_script

# Commands the tenant-bucket script runs inside Redis (from lua/*.lua), lower case as in
# INFO commandstats. If the gateway ever sent one of these itself, it would be miscounted as
# script-internal; the JSON keeps the raw commandstats.
SCRIPT_COMMANDS = {
    m.lower() for f in (REPO / "lua").rglob("*.lua")
    for m in re.findall(r"redis\.p?call\(\s*['\"](\w+)['\"]", f.read_text())
}


def snapshot(ctx, sut, backend, redis):
    s = {"t": time.monotonic(), "proxy_cpu": cpu_seconds(sut.pids()),
         "backend_cpu": cpu_seconds(backend.pids()), "backend_accepts": backend_accepts(backend)}
    if redis is not None:
        s["redis"] = redis_info(redis.port)
    if sut.admin:
        s["metrics"] = scrape(sut.admin)
    return s


def delta_redis(a, b):
    ra, rb = a["redis"], b["redis"]

    def calls(info, cmd):
        return info.get(f"cmdstat_{cmd}", {}).get("calls", 0)

    cmds = {}
    for k in set(ra) | set(rb):
        if k.startswith("cmdstat_"):
            d = calls(rb, k[8:]) - calls(ra, k[8:])
            if d:
                cmds[k[8:]] = int(d)
    # Our own INFO calls: the "before" INFO is counted in total_commands_processed of the
    # "after" reply, and the "after" INFO's read event in its total_reads_processed; remove both.
    cmds["info"] = cmds.get("info", 0) - 1
    if cmds["info"] <= 0:
        cmds.pop("info")
    total = rb["total_commands_processed"] - ra["total_commands_processed"] - 1
    # total_commands_processed (and commandstats) also count the commands the Lua script runs
    # with redis.call (a token bucket decision: TIME, GET, SET; 4 "commands" with its EVALSHA).
    # Pipelining is about what the gateway sends, so subtract the script's own commands.
    internal = sum(v for k, v in cmds.items() if k in SCRIPT_COMMANDS)
    out = {
        "commands": total,
        "client_commands": total - internal,
        "script_internal_commands": internal,
        "evalsha": int(calls(rb, "evalsha") - calls(ra, "evalsha")),
        "eval": int(calls(rb, "eval") - calls(ra, "eval")),
        "commandstats": cmds,
        "cpu_s": (rb["used_cpu_user"] + rb["used_cpu_sys"]) - (ra["used_cpu_user"] + ra["used_cpu_sys"]),
    }
    out["script_commands_assumed"] = sorted(SCRIPT_COMMANDS)
    if "total_reads_processed" in rb:
        out["reads"] = rb["total_reads_processed"] - ra["total_reads_processed"] - 1
        out["reads_source"] = "INFO stats total_reads_processed"
    else:  # older Redis: no read counter; one read per client round trip ~ net input commands
        out["reads"] = None
        out["reads_source"] = "not available in this Redis (total_reads_processed missing)"
    return out


def delta_metrics(a, b):
    ma, mb = a["metrics"], b["metrics"]

    def d(name, **labels):
        return int(round(msum(mb, name, **labels) - msum(ma, name, **labels)))

    out = {}
    for layer in ("edge", "identity", "tenant", "upstream", "route"):
        for outcome in ("admitted", "limited", "fallback", "failed_open", "failed_closed",
                        "unauthenticated", "rejected", "error", "not_found"):
            v = d("tollgate_decisions_total", layer=layer, outcome=outcome)
            if v:
                out[f"{layer}_{outcome}"] = v
    # Fleet-wide concurrency leases (variant M): acquired, refused, renewed, expired.
    for event in ("acquired", "refused", "renewed", "expired"):
        v = d("tollgate_inflight_lease_events_total", event=event)
        if v:
            out[f"lease_{event}"] = v
    # Limit rules (R, N, X: the decision service's calls are decided by rules only).
    for outcome in ("admitted", "rule_limited", "shadow_limited", "fallback", "failed_open",
                    "failed_closed"):
        v = d("tollgate_rule_decisions_total", outcome=outcome)
        if v:
            out[f"rule_{outcome}"] = v
    out["requests"] = d("tollgate_requests_total")
    out["redis_errors"] = d("tollgate_redis_errors_total")
    out["upstream_rejections"] = d("tollgate_upstream_rejections_total")
    return out


def measure(ctx, sut, backend, redis, duration, *, paced_rate=None, label=None):
    """Warm up, then one measured wrk run with CPU/Redis/metrics deltas around it. The Redis
    deltas are those of the variant's own Redis (`sut.redis`), when it has one."""
    redis = sut.redis
    script_extra, script_args = None, ()
    if paced_rate:
        script_extra, script_args = "pace.lua", (paced_rate, ctx.args.wrk_threads)
    if ctx.args.warmup > 0:
        run_wrk(ctx, sut.port, ctx.args.warmup, headers=sut.headers,
                script=wrk_script(ctx, script_extra), script_args=script_args)
    time.sleep(0.2)
    before = snapshot(ctx, sut, backend, redis)
    w = run_wrk(ctx, sut.port, duration, headers=sut.headers,
                script=wrk_script(ctx, script_extra), script_args=script_args)
    time.sleep(0.3)  # let in-flight requests finish before reading counters
    after = snapshot(ctx, sut, backend, redis)
    n = max(w["requests"], 1)
    rec = {
        "variant": label or sut.variant,
        "rps": w["rps"], "ok_rps": w["ok_rps"], "non2xx_rps": w["non2xx_rps"],
        "requests": w["requests"], "non2xx": w["non2xx"], "status_ge_400": w["err_status"],
        "socket_errors": w["socket_errors"], "duration_s": w["duration_s"],
        "p50_ms": w["p50_us"] / 1000, "p90_ms": w["p90_us"] / 1000,
        "p99_ms": w["p99_us"] / 1000, "p999_ms": w["p999_us"] / 1000,
        "mean_ms": w["lat_mean_us"] / 1000, "max_ms": w["lat_max_us"] / 1000,
        "backend_cpu_us_per_req": (after["backend_cpu"] - before["backend_cpu"]) / n * 1e6,
        "backend_conns_opened": after["backend_accepts"] - before["backend_accepts"] - 1,
    }
    if paced_rate:
        rec["target_rps"] = paced_rate
    if sut.procs:
        rec["proxy_cpu_s"] = after["proxy_cpu"] - before["proxy_cpu"]
        rec["proxy_cpu_us_per_req"] = rec["proxy_cpu_s"] / n * 1e6
        rec["rss_mb"] = rss_kb(sut.pids()) / 1024
    if redis is not None:
        r = delta_redis(before, after)
        rec["redis"] = r
        rec["redis_cmds_per_req"] = r["commands"] / n
        rec["redis_client_cmds_per_req"] = r["client_commands"] / n
        rec["evalsha_per_req"] = r["evalsha"] / n
        rec["redis_cmds_per_read"] = (r["commands"] / r["reads"]) if r.get("reads") else None
        rec["redis_client_cmds_per_read"] = (r["client_commands"] / r["reads"]) if r.get("reads") else None
        rec["redis_cpu_us_per_req"] = r["cpu_s"] / n * 1e6
    if sut.admin:
        m = delta_metrics(before, after)
        rec["tollgate"] = m
        decisions = sum(v for k, v in m.items() if k.startswith("tenant_"))
        if "redis" in rec and decisions:
            rec["tenant_decisions"] = decisions
            rec["evalsha_per_tenant_decision"] = rec["redis"]["evalsha"] / decisions
            adm = m.get("tenant_admitted", 0)
            rec["evalsha_per_admitted"] = (rec["redis"]["evalsha"] / adm) if adm else None
            # Script calls (EVALSHA + EVAL) and every gateway-sent command per admission: the
            # leased variant's figure (at most 1/tokens + 0.01).
            scripts = rec["redis"]["evalsha"] + rec["redis"]["eval"]
            rec["script_calls_per_admitted"] = (scripts / adm) if adm else None
            rec["script_calls_per_req"] = scripts / n
            rec["redis_client_cmds_per_admitted"] = (rec["redis"]["client_commands"] / adm) if adm else None
    rec.update({k: v for k, v in sut.extra.items() if k != "redis"})
    return rec


def summarize(records):
    """Median over repetitions of every numeric field, per variant label."""
    by = {}
    for r in records:
        by.setdefault(r["variant"], []).append(r)
    out = {}
    for v, rs in by.items():
        s = {"reps": len(rs)}
        keys = [k for k in rs[0] if isinstance(rs[0][k], (int, float)) and not isinstance(rs[0][k], bool)]
        for k in keys:
            s[k] = median([r.get(k) for r in rs])
        s["rps_min"] = min(r["rps"] for r in rs)
        s["rps_max"] = max(r["rps"] for r in rs)
        for sub in ("tollgate", "redis"):
            if sub in rs[0]:
                s[sub] = {k: median([r[sub].get(k) for r in rs]) for k in rs[0][sub]
                          if isinstance(rs[0][sub][k], (int, float))}
        out[v] = s
    return out
