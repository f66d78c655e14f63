"""Memory suite: edge limiter RSS while distinct client addresses arrive."""

import signal
import subprocess
import time

from .clients import msum, scrape
from .common import log
from .processes import free_port, rss_kb
from .servers import start_backend, start_tollgate, tollgate_config
from .wrk import parse_wrk, run_wrk, wrk_argv, wrk_script


def memory(ctx):
    a = ctx.args
    backend = start_backend(ctx)
    # Reference: the same gateway with an edge store of one client, warmed the same way. Its RSS
    # is the baseline that also charges the store's up-front reservation to the tracked clients.
    rport, radmin = free_port(), free_port()
    redge = {"limit": 1000, "per": "1s", "burst": 1000, "trusted_proxies": ["127.0.0.1/32"],
             "max_clients": 1}
    ref = start_tollgate(ctx, "tollgate-mem-ref",
                         tollgate_config(ctx, "tollgate-mem-ref", rport, radmin, backend.port, edge=redge))
    run_wrk(ctx, rport, 2, headers=["X-Forwarded-For: 10.9.9.9"])
    time.sleep(0.5)
    ref_rss_kb = rss_kb([ref.pid])
    ctx.env.stop(ref)
    port, admin = free_port(), free_port()
    edge = {"limit": 1000, "per": "1s", "burst": 1000, "trusted_proxies": ["127.0.0.1/32"],
            "max_clients": a.max_clients}
    cfg = tollgate_config(ctx, "tollgate-mem", port, admin, backend.port, edge=edge)
    tg = start_tollgate(ctx, "tollgate-mem", cfg)
    pids = [tg.pid]
    # Baseline: warmed up (connections, pools, thread stacks) with a single client address.
    run_wrk(ctx, port, 2, headers=["X-Forwarded-For: 10.9.9.9"])
    time.sleep(0.5)
    m = scrape(admin)
    base = {"clients_sent": 0, "rss_kb": rss_kb(pids),
            "tracked": int(msum(m, "tollgate_edge_tracked_clients")),
            "evictions": int(msum(m, "tollgate_edge_evictions_total"))}
    log(f"memory: base RSS {base['rss_kb'] / 1024:.1f} MB, tracked {base['tracked']}; sending "
        f"{a.clients} distinct X-Forwarded-For addresses in {a.checkpoints} steps, "
        f"edge.max_clients {a.max_clients}")
    checkpoints = [base]
    step = a.clients // a.checkpoints
    sent = 0
    script = wrk_script(ctx, "xff.lua")
    t_start = time.monotonic()
    for i in range(a.checkpoints):
        count = step if i < a.checkpoints - 1 else a.clients - sent
        start_requests = msum(scrape(admin), "tollgate_requests_total")
        argv = wrk_argv(ctx, port, 3600, script=script, script_args=(sent, count, a.wrk_threads))
        w = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        last, last_change = start_requests, time.monotonic()
        while True:
            time.sleep(0.25)
            if w.poll() is not None:
                break
            now_req = msum(scrape(admin), "tollgate_requests_total")
            if now_req != last:
                last, last_change = now_req, time.monotonic()
            # Every thread stops itself after its share; wrk itself only ends on its timer.
            if now_req - start_requests >= count or time.monotonic() - last_change > 2.0:
                w.send_signal(signal.SIGINT)
                break
        out, _ = w.communicate(timeout=30)
        wr = parse_wrk(out)
        sent += count
        time.sleep(0.5)
        m = scrape(admin)
        cp = {"clients_sent": sent, "rss_kb": rss_kb(pids),
              "tracked": int(msum(m, "tollgate_edge_tracked_clients")),
              "evictions": int(msum(m, "tollgate_edge_evictions_total")),
              "requests_answered": wr["requests"], "rps": wr["rps"], "non2xx": wr["non2xx"]}
        checkpoints.append(cp)
        log(f"  {sent:>9} addresses: RSS {cp['rss_kb'] / 1024:7.1f} MB, tracked {cp['tracked']}, "
            f"evicted {cp['evictions']}, {wr['rps']:.0f} req/s")
    elapsed = time.monotonic() - t_start
    final = checkpoints[-1]
    full = [c for c in checkpoints[1:] if c["tracked"] >= a.max_clients]
    first_full = full[0] if full else None
    # Plateau check: RSS change over the second half of the checkpoints (all past the bound
    # when --clients is several times --max-clients).
    mid = checkpoints[len(checkpoints) // 2]
    growth = ((final["rss_kb"] - mid["rss_kb"]) / mid["rss_kb"]) if first_full else None
    bpc = ((final["rss_kb"] - ref_rss_kb) * 1024 / final["tracked"]) if final["tracked"] else None
    bpc_after_start = ((final["rss_kb"] - base["rss_kb"]) * 1024 / final["tracked"]) if final["tracked"] else None
    # Marginal cost while the store fills: from the first checkpoint to the one where the bound was
    # reached (excludes the fixed cost of first use, e.g. allocator arenas and table growth).
    marginal = None
    if first_full is not None and checkpoints[1] is not first_full:
        c1 = checkpoints[1]
        if first_full["tracked"] - c1["tracked"] >= 0.1 * a.max_clients:
            marginal = (first_full["rss_kb"] - c1["rss_kb"]) * 1024 / (first_full["tracked"] - c1["tracked"])
    ctx.env.stop(tg)
    ctx.env.stop(backend)
    return {"max_clients": a.max_clients, "marginal_bytes_per_client_while_filling": marginal, "clients": a.clients, "checkpoints": checkpoints,
            "elapsed_s": elapsed, "bytes_per_tracked_client": bpc,
            "reference_rss_kb": ref_rss_kb, "bytes_per_tracked_client_after_start": bpc_after_start,
            "rss_growth_second_half": growth,
            "rss_growth_from_kb": mid["rss_kb"], "rss_growth_from_clients_sent": mid["clients_sent"],
            # The store may round the bound (e.g. up to a multiple of its shard count); a plateau
            # is "no growth over the last two checkpoints, within 1% of edge.max_clients".
            "plateau_at_bound": (len(checkpoints) >= 3
                                 and checkpoints[-1]["tracked"] == checkpoints[-2]["tracked"]
                                 and abs(final["tracked"] - a.max_clients) <= 0.01 * a.max_clients)}
