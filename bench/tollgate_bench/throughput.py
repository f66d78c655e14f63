"""Throughput suite: variants interleaved over repetitions, then the paced latency phase."""

from .common import log, median
from .decision import measure_decision, probe_decision
from .measure import measure, summarize
from .servers import start_backend, start_redis
from .variants import REDIS_VARIANTS, parse_variants, probe, start_variant, stop_variant


def paced_runs(ctx, backend, redis, rate, suffix):
    """A and F at a constant `rate`, interleaved, `--reps` times; labels `A@<rate><suffix>`."""
    out = []
    for rep in range(1, ctx.args.reps + 1):
        for v in ("A", "F"):
            sut = start_variant(ctx, v, backend, redis)
            try:
                rec = measure(ctx, sut, backend, redis, ctx.args.duration, paced_rate=rate,
                              label=f"{v}@{rate}{suffix}")
            finally:
                stop_variant(ctx, sut)
            rec["rep"] = rep
            out.append(rec)
            log(f"  rep {rep} {v}@{rate}: {rec['rps']:.0f} req/s, p50 {rec['p50_ms']:.3f} ms, "
                f"p99 {rec['p99_ms']:.3f} ms")
    return out


def throughput(ctx):
    a = ctx.args
    variants = parse_variants(a.variants)
    need_redis = any(v in REDIS_VARIANTS for v in variants)
    backend = start_backend(ctx)
    redis = start_redis(ctx) if need_redis else None
    # Traefik's rateLimit gets its own Redis: each variant's Redis counters are its own.
    traefik_redis = start_redis(ctx, "redis-traefik") if "T" in variants else None
    records, probes = [], {}
    log(f"throughput: variants {''.join(variants)}, {a.reps} reps x {a.duration}s "
        f"(+{a.warmup}s warm-up), wrk -t{a.wrk_threads} -c{a.connections}")
    for rep in range(1, a.reps + 1):
        f_rps = None
        for v in variants:
            g_limit = None
            if v == "G":
                f_rps = f_rps or median([r["rps"] for r in records if r["variant"] == "F"])
                g_limit = max(1, int(round((f_rps or a.g_fallback_rps) / 10)))
            sut = start_variant(ctx, v, backend, redis, g_limit, traefik_redis)
            try:
                expect = (200, 429) if v == "G" else (200,)
                if v == "X":
                    probes[v] = probe_decision(ctx, sut)
                    rec = measure_decision(ctx, sut, backend)
                else:
                    probes[v] = probe(sut, expect)
                    rec = measure(ctx, sut, backend, redis, a.duration)
            finally:
                stop_variant(ctx, sut)
            rec["rep"] = rep
            records.append(rec)
            if v == "F":
                f_rps = rec["rps"]
            if v != "X":  # measure_decision logs its own line
                log(f"  rep {rep} {v}: {rec['rps']:.0f} req/s, non-2xx {rec['non2xx']}, "
                    f"p99 {rec['p99_ms']:.2f} ms, sock-err {rec['socket_errors']}")
    summary = summarize(records)

    paced = []
    if not a.no_paced and "A" in variants and "F" in variants and "B" in summary:
        rate = int(summary["B"]["rps"] * a.paced_fraction)
        log(f"paced latency: A and F at {rate} req/s ({a.paced_fraction:.0%} of B's median max)")
        paced += paced_runs(ctx, backend, redis, rate, "")
        # Information, not a target: the same A-vs-F comparison at half of F's own max rate,
        # i.e. the latency tollgate adds when it is not saturated on this machine.
        rate = int(summary["F"]["rps"] * 0.5)
        log(f"paced latency (info): A and F at {rate} req/s (50% of F's median max)")
        paced += paced_runs(ctx, backend, redis, rate, "/halfF")
    paced_summary = summarize(paced)
    for p in (traefik_redis, redis, backend):
        if p is not None:
            ctx.env.stop(p)
    return {"records": records, "summary": summary, "probes": probes,
            "paced_records": paced, "paced_summary": paced_summary}
