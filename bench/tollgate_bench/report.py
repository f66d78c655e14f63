"""The terminal text of each suite. Verdicts come from `targets` (pure); this module only lays
them out with the tables and information lines."""

import os

from .targets import (added_p99_ms, f_over_b_ceiling, paced_keys, script_calls_split,
                      throughput_ratios)
from .variants import VARIANTS


def fmt(x, spec, width):
    """Right-aligned number, or '-' for missing values."""
    return format(x, spec).rjust(width) if x is not None else "-".rjust(width)


TABLE = [  # (header, key, format, width)
    ("req/s", "rps", ".0f", 9),
    ("min-max", None, None, 16),
    ("2xx/s", "ok_rps", ".0f", 9),
    ("non2xx/s", "non2xx_rps", ".0f", 9),
    ("p50 ms", "p50_ms", ".3f", 8),
    ("p99 ms", "p99_ms", ".3f", 8),
    ("proxy CPU µs/req", "proxy_cpu_us_per_req", ".1f", 17),
    ("backend µs/req", "backend_cpu_us_per_req", ".1f", 15),
    ("RSS MB", "rss_mb", ".1f", 8),
    ("be-conns", "backend_conns_opened", ".0f", 9),
    ("redis cmd/req", "redis_cmds_per_req", ".3f", 14),
    ("client cmd/req", "redis_client_cmds_per_req", ".3f", 15),
    ("EVALSHA/req", "evalsha_per_req", ".3f", 12),
    ("scripts/req", "script_calls_per_req", ".3f", 12),
    ("client cmd/read", "redis_client_cmds_per_read", ".2f", 16),
]


def targets_block(lines, verdicts, before=None):
    """Appends the "targets:" block: one PASS / FAIL / n/a line per verdict. `before` maps a
    verdict key to information lines printed just above that verdict."""
    lines.append("")
    lines.append("  targets:")
    for v in verdicts:
        lines.extend((before or {}).get(v.key, ()))
        lines.append(f"  {v.label}  {v.target:<58} {v.shown}")


def throughput_report(res, verdicts):
    """Table of medians, ratios, information lines and the verdicts of a throughput result."""
    s, ps = res["summary"], res["paced_summary"]
    lines = []
    for v, desc in VARIANTS.items():
        if v in s:
            lines.append(f"  {v}: {desc}")
    if ps:
        lines.append("  X@N: variant X paced at a constant N req/s (see README: pace.lua); "
                     "X@N/halfF: paced at 50% of F's max (information)")
    lines.append("")
    lines.append(f"  {'variant':<10}" + "".join(h.rjust(w) for h, _, _, w in TABLE))
    for v in list(s) + list(ps):
        r = s.get(v) or ps.get(v)
        row = f"  {v:<10}"
        for h, k, spec, w in TABLE:
            if k is None:
                row += f"({r['rps_min']:.0f}-{r['rps_max']:.0f})".rjust(w)
            else:
                row += fmt(r.get(k), spec, w)
        lines.append(row)
    lines.append("  (medians over reps; be-conns = new backend connections during the run: small means "
                 "upstream keep-alive works; for A they are wrk's own connections)")
    g = lambda v, k: (s.get(v) or {}).get(k)
    ratios = throughput_ratios(s)
    lines.append("")
    lines.append("  ratios (medians): " + ", ".join(
        f"{k} = {v:.3f}" if v is not None else f"{k} = n/a" for k, v in ratios.items()))
    if g("P", "proxy_cpu_us_per_req") is not None and g("D", "proxy_cpu_us_per_req") is not None:
        lines.append(f"  proxy CPU µs/req: nginx B {fmt(g('B', 'proxy_cpu_us_per_req'), '.1f', 0)}, "
                     f"Pingora floor P {g('P', 'proxy_cpu_us_per_req'):.1f}, tollgate D "
                     f"{g('D', 'proxy_cpu_us_per_req'):.1f} (tollgate's own request path on top of "
                     f"Pingora: {g('D', 'proxy_cpu_us_per_req') - g('P', 'proxy_cpu_us_per_req'):+.1f})")
    ceiling = f_over_b_ceiling(s, os.cpu_count())
    if ceiling is not None:
        t_b, r_f, best = ceiling
        lines.append(f"  info  F/B ceiling on this machine: B uses {t_b:.1f} CPU-µs per request "
                     f"({os.cpu_count()} cores / B req/s), Redis adds {r_f:.1f} per F request on the same "
                     f"cores, so even a proxy path as cheap as nginx's gives F/B <= "
                     f"{best:.3f}")
    if "G" in s:
        gl = g("G", "g_tier_limit_per_s")
        lines.append(f"  G: tier limit {gl:.0f}/s (burst = 1 s), offered {g('G', 'rps'):.0f} req/s "
                     f"= {g('G', 'rps') / gl:.1f}x the limit; admitted {g('G', 'ok_rps'):.0f}/s, "
                     f"rejected {g('G', 'non2xx_rps'):.0f}/s")
    for v in ("F", "R", "M"):
        recs = [r for r in res["records"] if r["variant"] == v and "redis" in r]
        if recs:
            calls = sum(r["redis"]["evalsha"] + r["redis"].get("eval", 0) for r in recs)
            dec = sum(r.get("tenant_decisions", 0) for r in recs)
            req = sum(r["requests"] for r in recs)
            lines.append(f"  {v}: Redis script calls {calls} for {dec} tenant decisions "
                         f"({req} requests) over {len(recs)} reps: "
                         f"{calls / dec if dec else float('nan'):.4f} per decision"
                         + (f" ({dec / calls:.2f} decisions per call)" if calls else ""))
    # Script calls per admitted request, split by script (derived from commandstats; see
    # targets.script_calls_split): M's lease acquire + release against F's coalesced calls.
    for r in res["records"]:
        if r["variant"] in ("F", "M") and "redis" in r:
            c = script_calls_split(r)
            adm = c["admitted"] or float("nan")
            lines.append(f"  info  {r['variant']} rep {r['rep']}: script calls per admitted request "
                         f"{c['calls'] / adm:.4f} = rate {c['rate'] / adm:.4f} + lease acquire "
                         f"{c['acquire'] / adm:.4f} + release {c['release'] / adm:.4f} + renewal "
                         f"{c['renew'] / adm:.4f} ({c['calls']} calls, {c['admitted']} admitted, "
                         f"{c['requests']} requests)")
    for v in ("D", "E", "F", "R", "M", "G"):
        t = (s.get(v) or {}).get("tollgate")
        if t:
            lines.append(f"  {v} tollgate counters per run (median): " +
                         ", ".join(f"{k}={v2:.0f}" for k, v2 in t.items() if v2))
    for r in res["records"] + res["paced_records"]:
        t = r.get("tollgate") or {}
        local = {k: v for k, v in t.items() if v and (k in ("tenant_fallback", "redis_errors")
                                                   or k.startswith("tenant_failed"))}
        if local:
            lines.append(f"  warning: {r['variant']} rep {r['rep']}: Redis not used for every decision "
                         f"({', '.join(f'{k}={v}' for k, v in local.items())} of "
                         f"{r.get('tenant_decisions', '?')} tenant decisions; timeouts or open breaker): "
                         f"this run does not measure the Redis path alone")
    rd = [r["redis"]["reads_source"] for r in res["records"] if "redis" in r]
    if rd:
        lines.append(f"  Redis reads: {rd[0]}")
    paced, half_f = paced_keys(ps)
    if half_f is not None:
        lo_a, lo_f = half_f
        lines.append(f"  info  paced at {ps[lo_a]['target_rps']:.0f} req/s (50% of F's max): A p99 "
                     f"{ps[lo_a]['p99_ms']:.3f} ms, F p99 {ps[lo_f]['p99_ms']:.3f} ms (achieved "
                     f"{ps[lo_f]['rps']:.0f}/s); added p99 {ps[lo_f]['p99_ms'] - ps[lo_a]['p99_ms']:.3f} ms, "
                     f"added p50 {ps[lo_f]['p50_ms'] - ps[lo_a]['p50_ms']:.3f} ms")
    if paced is not None:
        pa, pf = paced
        lines.append(f"  paced at {ps[pa]['target_rps']:.0f} req/s: A p99 {ps[pa]['p99_ms']:.3f} ms "
                     f"(achieved {ps[pa]['rps']:.0f}/s), F p99 {ps[pf]['p99_ms']:.3f} ms "
                     f"(achieved {ps[pf]['rps']:.0f}/s); added p99 {added_p99_ms(ps, paced):.3f} ms")
        for k in paced:
            if ps[k]["rps"] < 0.95 * ps[k]["target_rps"]:
                lines.append(f"  warning: {k} reached only {ps[k]['rps']:.0f} of {ps[k]['target_rps']:.0f} "
                             f"req/s: it was saturated, so its latency is queueing, not added latency")
    # Shown just above the G target: how G's rejections reached Redis.
    g_info = []
    for r in (rec for rec in res["records"] if rec["variant"] == "G" and "redis" in rec):
        cs = r["redis"]["commandstats"]
        t = r["tollgate"]
        g_info.append(
            f"  info  G rep {r['rep']}: {r['redis']['evalsha']} EVALSHA for {r['tenant_decisions']} tenant "
            f"decisions ({t.get('tenant_admitted', 0)} admitted, {t.get('tenant_limited', 0)} limited): "
            f"{r['evalsha_per_tenant_decision']:.3f} per decision (fewer than 1: rejections answered "
            f"without Redis, e.g. a local deny cache); script writes (HSET) {cs.get('hset', 0)} "
            f"vs admitted {t.get('tenant_admitted', 0)}")
    targets_block(lines, verdicts, before={"g_flood": g_info})
    return "\n".join(lines)


def memory_report(res, verdicts):
    """Checkpoint table, RSS figures and the verdicts of a memory result."""
    lines = [f"  {'addresses sent':>15}{'tracked':>10}{'evicted':>10}{'RSS MB':>9}{'Δ vs base MB':>14}"]
    base = res["checkpoints"][0]["rss_kb"]
    for c in res["checkpoints"]:
        lines.append(f"  {c['clients_sent']:>15}{c['tracked']:>10}{c['evictions']:>10}"
                     f"{c['rss_kb'] / 1024:>9.1f}{(c['rss_kb'] - base) / 1024:>14.1f}")
    bpc = res["bytes_per_tracked_client"]
    g = res["rss_growth_second_half"]
    lines.append("")
    lines.append(f"  tracked clients at the end: {res['checkpoints'][-1]['tracked']} "
                 f"(edge.max_clients {res['max_clients']}); RSS change from {res['rss_growth_from_clients_sent']} "
                 f"addresses sent to the end: "
                 + (f"{g:+.1%}" if g is not None else "n/a (bound never reached)"))
    lines.append(f"  reference gateway (edge.max_clients 1, same warm-up): RSS {res['reference_rss_kb'] / 1024:.1f} MB; "
                 f"growth after start only: {res['bytes_per_tracked_client_after_start']:.0f} bytes per tracked client")
    mg = res.get("marginal_bytes_per_client_while_filling")
    if mg is not None:
        lines.append(f"  marginal RSS per added client while filling (checkpoint 1 -> bound reached): {mg:.0f} bytes")
    targets_block(lines, verdicts)
    return "\n".join(lines)


def accuracy_report(res):
    lines = [f"  {'instances':>9}{'offered':>9}{'admitted':>10}{'allowance':>11}{'error':>9}"
             f"{'error %':>9}{'429':>7}{'other':>7}{'per-instance admitted':>26}"]
    for r in res["runs"]:
        lines.append(f"  {r['instances']:>9}{r['offered']:>9}{r['admitted']:>10}"
                     f"{r['allowance_exact']:>11.1f}{r['error']:>+9.1f}{r['error_pct']:>+9.2f}"
                     f"{r['rejected_429']:>7}{r['other']:>7}{str(r['per_instance_admitted']):>26}")
    lines.append(f"  allowance = burst + rate x (last send - first send); burst {res['burst']}, "
                 f"rate {res['rate_per_s']:g}/s, offered {res['factor']:g}x for {res['duration_s']}s "
                 f"(nominal allowance {res['burst'] + res['rate_per_s'] * res['duration_s']:.0f})")
    if any(r["other"] for r in res["runs"]):
        lines.append("  note: 'other' are neither 200 nor 429 (e.g. 503 when Redis timed out: on_failure closed)")
    return "\n".join(lines)


def profile_report(res):
    lines = ["  share of sampled cycles by the frame on top of the stack (self time):"]
    groups = sorted({g for r in res.values() for g in r["leaf_share"]},
                    key=lambda g: -max(r["leaf_share"].get(g, 0) for r in res.values()))
    lines.append(f"  {'':<24}" + "".join(v.rjust(8) for v in res))
    for g in groups:
        lines.append(f"  {g:<24}" + "".join(f"{r['leaf_share'].get(g, 0):8.1%}" for r in res.values()))
    lines.append(f"  {'under a tollgate:: frame':<24}" +
                 "".join(f"{r['under_tollgate_frames']:8.1%}" for r in res.values()) +
                 "   (inclusive: our code and the libraries it calls)")
    for v, r in res.items():
        lines.append(f"  {v}: flame graph {r['svg']}")
    return "\n".join(lines)


def instructions_report(res):
    lines = [f"  {'variant':<8}{'Ir/request':>12}{'N1':>7}{'N2':>7}"]
    for v, r in res["runs"].items():
        lines.append(f"  {v:<8}{r['ir_per_req']:>12.0f}{r['n1']:>7}{r['n2']:>7}")
    for k, x in res["ratios"].items():
        lines.append(f"  {k} = {x:.3f}")
    for script, r in res.get("redis", {}).items():
        lines.append(f"  Redis server, {script} script: {r['ir_per_call']:.0f} Ir per call "
                     f"(N1 {r['n1']}, N2 {r['n2']}, pipelined)")
    return "\n".join(lines)


def capacity_report(res):
    lines = [f"  {'script':<14}{'calls/s':>10}{'Redis core':>12}{'µs CPU/call':>13}"
             f"{'calls/core-s':>14}{'calls/read':>12}"]
    for r in res["runs"].values():
        lines.append(f"  {r['script']:<14}{r['calls_per_s']:>10.0f}{r['redis_cpu_share']:>12.0%}"
                     f"{r['redis_cpu_us_per_call']:>13.2f}{r['calls_per_core_s']:>14.0f}"
                     f"{fmt(r['calls_per_read'], '.1f', 12)}")
    lines.append("")
    lines.append(f"  instances one Redis core supports (lease tokens {res['lease_tokens']}, "
                 f"max_hold {res['lease_hold_s']:g}s):")
    lines.append(f"  {'req/s/instance':>15}{'tenants':>9}{'exact':>9}{'leased':>9}{'calls/adm leased':>18}")
    for r in res["fleet"]:
        lines.append(f"  {r['instance_rps']:>15}{r['tenants']:>9}{r['exact_instances']:>9.1f}"
                     f"{r['leased_instances']:>9.1f}{r['leased_calls_per_admission']:>18.3f}")
    return "\n".join(lines)
