"""Accuracy suite: admitted requests of one tenant vs its allowance, 1..N instances on one Redis."""

import http.client
import threading
import time

from .clients import http_get, msum, redis_cmd, scrape
from .common import API_KEY, BenchError, log, parse_duration_s
from .processes import free_port
from .servers import start_backend, start_redis, start_tollgate, tollgate_config


def paced_http(targets, rate, duration, headers, workers_per_target=2):
    """Open-ish loop: request k is sent at t0 + k/rate to target k % N, by one of a few threads
    per target (each with its own keep-alive connection). Returns [(k, t_send, status)]."""
    n = int(rate * duration)
    results = []
    lock = threading.Lock()
    t0 = time.monotonic() + 0.3
    nt = len(targets)

    def worker(ti, wi):
        port = targets[ti]
        mine = [k for k in range(ti, n, nt) if (k // nt) % workers_per_target == wi]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        local = []
        for k in mine:
            wait = t0 + k / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            ts = time.monotonic()
            try:
                conn.request("GET", "/", headers=headers)
                r = conn.getresponse()
                r.read()
                status = r.status
                if r.will_close:
                    conn.close()
            except (OSError, http.client.HTTPException):
                status = 0
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            local.append((k, ts, status))
        conn.close()
        with lock:
            results.extend(local)

    threads = [threading.Thread(target=worker, args=(ti, wi), daemon=True)
               for ti in range(nt) for wi in range(workers_per_target)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.sort()
    return results


def accuracy(ctx):
    a = ctx.args
    per_s = parse_duration_s(a.acc_per)
    rate = a.acc_limit / per_s  # tokens per second
    burst = a.acc_burst if a.acc_burst else a.acc_limit
    offered = rate * a.acc_factor
    backend = start_backend(ctx)
    redis = start_redis(ctx)
    instances = [int(x) for x in a.instances.split(",") if x.strip()]
    log(f"accuracy: tier limit {a.acc_limit} per {a.acc_per} ({rate:g}/s), burst {burst}; one tenant "
        f"offered {offered:g} req/s ({a.acc_factor:g}x) for {a.acc_duration}s over {instances} instance(s)")
    runs = []
    for n in instances:
        redis_cmd(redis.port, "FLUSHALL")
        tgs = []
        try:
            for i in range(n):
                port, admin = free_port(), free_port()
                cfg = tollgate_config(ctx, f"tollgate-acc{n}-{i}", port, admin, backend.port,
                                      tier={"limit": a.acc_limit, "per": a.acc_per, "burst": burst},
                                      redis_port=redis.port, fleet_size=n, on_failure="closed",
                                      auth="required")
                tgs.append(start_tollgate(ctx, f"tollgate-acc{n}-{i}", cfg))
            # Warm each instance's Redis connection and script cache with another tenant's key?
            # There is only one key; instead check the instances answer 401 without a key.
            for t in tgs:
                st = http_get(t.port, "/")[0]
                if st != 401:
                    raise BenchError(f"accuracy: instance without key answered {st}, expected 401")
            before = [scrape(t.admin) for t in tgs]
            res = paced_http([t.port for t in tgs], offered, a.acc_duration, {"X-API-Key": API_KEY})
            time.sleep(0.3)
            after = [scrape(t.admin) for t in tgs]
        finally:
            for t in tgs:
                ctx.env.stop(t)
        ok = [r for r in res if r[2] == 200]
        limited = [r for r in res if r[2] == 429]
        other = [r for r in res if r[2] not in (200, 429)]
        window = res[-1][1] - res[0][1] if res else 0.0
        allowance = burst + rate * window
        nominal = burst + rate * a.acc_duration
        m_adm = sum(msum(y, "tollgate_decisions_total", layer="tenant", outcome="admitted") -
                    msum(x, "tollgate_decisions_total", layer="tenant", outcome="admitted")
                    for x, y in zip(before, after))
        fallback = sum(msum(y, "tollgate_decisions_total", layer="tenant", outcome="fallback") -
                       msum(x, "tollgate_decisions_total", layer="tenant", outcome="fallback")
                       for x, y in zip(before, after))
        run = {"instances": n, "offered": len(res), "offered_rps": offered, "admitted": len(ok),
               "rejected_429": len(limited), "other": len(other),
               "other_statuses": sorted({r[2] for r in other}), "window_s": window,
               "allowance_exact": allowance, "allowance_nominal": nominal,
               "error": len(ok) - allowance, "error_pct": (len(ok) - allowance) / allowance * 100,
               "metrics_admitted": int(m_adm), "metrics_fallback": int(fallback),
               "per_instance_admitted": [
                   sum(1 for r in ok if r[0] % n == i) for i in range(n)]}
        runs.append(run)
        log(f"  {n} instance(s): admitted {len(ok)} of {len(res)}, allowance "
            f"{allowance:.1f} (burst {burst} + {rate:g}/s x {window:.3f}s), 429 {len(limited)}, "
            f"other {len(other)}")
    ctx.env.stop(redis)
    ctx.env.stop(backend)
    return {"limit": a.acc_limit, "per": a.acc_per, "burst": burst, "rate_per_s": rate,
            "factor": a.acc_factor, "duration_s": a.acc_duration, "runs": runs}
