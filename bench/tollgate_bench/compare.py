"""`compare OLD.json NEW.json`: medians, targets, memory and accuracy of two runs side by side."""

import json
from pathlib import Path


def compare(args):
    """Side by side medians of two result files (throughput, memory, accuracy, targets)."""
    a, b = (json.loads(Path(p).read_text()) for p in (args.old, args.new))
    for name, d, p in (("old", a, args.old), ("new", b, args.new)):
        e = d.get("environment", {})
        print(f"{name}: {p}  commit {e.get('git_commit', '?')[:10]} "
              f"({e.get('git_dirty_files', '?')} uncommitted files), load {e.get('loadavg_at_start', ['?'])[0]}")

    def merged(d):
        t = d.get("throughput", {})
        out = dict(t.get("summary", {}))
        for k, v in t.get("paced_summary", {}).items():  # "A@17693" -> "A@paced"
            out[k.split("@")[0] + ("@halfF" if k.endswith("/halfF") else "@paced")] = v
        return out
    sa, sb = merged(a), merged(b)
    keys = [("rps", "req/s"), ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"),
            ("proxy_cpu_us_per_req", "proxy CPU µs/req"), ("rss_mb", "RSS MB"),
            ("redis_client_cmds_per_read", "client cmd/read")]

    def num(x):
        return "-" if x is None else (f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}")
    if sa or sb:
        print(f"\n{'variant':<10}" + "".join(f"{h:>30}" for _, h in keys))
        for v in sorted(set(sa) | set(sb)):
            row = f"{v:<10}"
            for k, _ in keys:
                x, y = (sa.get(v) or {}).get(k), (sb.get(v) or {}).get(k)
                cell = f"{num(x)} -> {num(y)}"
                if x and y is not None:
                    cell += f" ({(y - x) / x:+.1%})"
                row += f"{cell if (x is not None or y is not None) else '-':>30}"
            print(row)
    for section in ("throughput", "memory"):
        ta = {t["target"]: t for t in a.get(section, {}).get("targets", [])}
        tb = {t["target"]: t for t in b.get(section, {}).get("targets", [])}
        if ta or tb:
            print(f"\n{section} targets (old -> new):")
            verdict = lambda t: "-" if t is None else ("n/a" if t["pass"] is None else
                                                        "PASS" if t["pass"] else "FAIL")
            for name in list(ta) + [n for n in tb if n not in ta]:
                print(f"  {verdict(ta.get(name)):>4} -> {verdict(tb.get(name)):<4}  {name}")
    for name, d in (("old", a), ("new", b)):
        m = d.get("memory")
        if m and m.get("bytes_per_tracked_client") is not None:
            print(f"memory ({name}): {m['bytes_per_tracked_client']:.0f} bytes per tracked client, "
                  f"{m['checkpoints'][-1]['tracked']} tracked")
        acc = d.get("accuracy")
        if acc:
            print(f"accuracy ({name}): " + ", ".join(
                f"{r['instances']} inst: {r['admitted']} admitted / {r['allowance_exact']:.1f} allowed"
                for r in acc["runs"]))
