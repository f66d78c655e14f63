"""The systems under test (A, B, C, T0, T, P, D-G, R, M, L; table in bench/README.md): start one,
probe it, stop it."""

import hashlib
import re
import signal
import sys
from pathlib import Path

from .clients import http_get, redis_cmd
from .common import API_KEY, HUGE, TENANT, BenchError
from .decision import decision_rule

# Variant R's `limits:` rules: every one matches every bench request (no `match`) and has
# `tenant` in its key, so all five share the tenant's hash tag and are decided with the tier in
# one `lua/policy.lua` call. Two algorithms alternate; sizes reject nothing: F's tier's for
# token_bucket, GCRA_HUGE for gcra (whose limit the validator caps at 2^26 per period).
R_RULES = [
    {"name": "r-tenant", "key": ["tenant"], "algorithm": "token_bucket"},
    {"name": "r-method", "key": ["tenant", "method"], "algorithm": "gcra"},
    {"name": "r-route", "key": ["tenant", "route"], "algorithm": "token_bucket"},
    {"name": "r-client", "key": ["tenant", "client_ip"], "algorithm": "gcra"},
    {"name": "r-api-key", "key": ["tenant", "header:x-api-key"], "algorithm": "token_bucket"},
]


GCRA_HUGE = 50_000_000

# Variant M's tier `max_in_flight`: a fleet-wide lease per request (docs/fleet-concurrency.md),
# sized far above any number of requests in flight in the bench, so no request is refused
# (the validator takes any positive integer: src/config/validate/tiers.rs).
M_MAX_IN_FLIGHT = 100_000


def r_rules():
    """The `limits:` list of variant R (fresh dicts, sizes that reject nothing)."""
    size = lambda r: GCRA_HUGE if r["algorithm"] == "gcra" else HUGE
    return [dict(r, limit=size(r), per="1s", burst=size(r)) for r in R_RULES]
from .processes import free_port, wait_port

OTLP_SINK = Path(__file__).resolve().parent / "otlp_sink.py"
from .servers import start_nginx_proxy, start_tollgate, tollgate_config
from .traefik import start_traefik

VARIANTS = {
    "A": "direct to the backend (nginx return 200)",
    "B": "nginx proxy_pass, upstream keepalive",
    "C": "nginx + limit_req/limit_conn per IP (reject nothing)",
    "T0": "Traefik 3.7, bare proxy (GOMAXPROCS = threads, access log off)",
    "T": "Traefik 3.7 + rateLimit in Redis keyed by X-API-Key + inFlightReq (reject nothing)",
    "P": "Pingora floor: bare pingora-proxy, none of tollgate's code (examples/pingora_floor.rs)",
    "D": "tollgate, no limiting",
    "K": "tollgate as D with the access log on (RUST_LOG=warn,tollgate::access=info, to a file)",
    "E": "tollgate, edge + concurrency (memory, reject nothing)",
    "F": "tollgate, edge + API key + Redis tenant bucket + concurrency",
    "R": "tollgate as F plus five limits: rules keyed by tenant (one coalesced script call)",
    "M": "tollgate as F with the tier's max_in_flight (a Redis lease per request, refuses nothing)",
    "G": "tollgate as F, one tenant flooding ~10x its limit",
    "L": "tollgate as F with the tier leased (lease: tokens --lease-tokens, max_hold --lease-hold)",
    "H": "tollgate as F with tracing at sampling 1 % (OTLP/HTTP to a discard sink)",
    "I": "tollgate as F with tracing at sampling 100 % (OTLP/HTTP to a discard sink)",
    "N": "tollgate as F plus one rule counted after the answer (count: {status: [500]}: "
         "every 200 gives its count back)",
    "S": "tollgate as F with the API key issued through the admin API (store.keys), not the file",
    "X": "tollgate's decision service: h2load sends one ShouldRateLimit call (gRPC) per request, "
         "one limits: rule decides it in Redis",
}

# Variants whose tenant decisions go to Redis (F's tier), and those driven by wrk with F's key.
REDIS_VARIANTS = ("F", "R", "M", "G", "L", "H", "I", "N", "S", "X")
# The tracing variants' sampling.
TRACE_SAMPLING = {"H": 0.01, "I": 1.0}
# Variant S: the admin token's variable and the issued key's owner (F's tenant and tier).
ADMIN_TOKEN_ENV = "TOLLGATE_BENCH_ADMIN_TOKEN"
ADMIN_TOKEN = "tollgate-bench-admin-token"


def counted_rule():
    """Variant N's rule: every request reserves a count at admission, and the backend's 200
    (not listed) gives it back when its head arrives: two script calls per request."""
    return [{"name": "n-counted", "key": ["tenant"], "limit": HUGE, "per": "1s", "burst": HUGE,
             "count": {"status": [500]}}]


def tracing_section(port, sampling):
    """`observability.tracing` to the discard sink on `port`."""
    return {"otlp": {"endpoint": f"http://127.0.0.1:{port}", "protocol": "http/protobuf"},
            "sampling": sampling}


def issue_key(admin_port, attempts=40):
    """POST /v1/keys for F's tenant and tier: the issued secret. A 503 (the store did not answer
    in time, e.g. a gateway slowed by callgrind) is retried, half a second apart."""
    import json
    import time
    import urllib.error
    import urllib.request

    for attempt in range(attempts):
        # A new name per attempt: a 503 may come after the key was written.
        body = {"tenant": TENANT, "tier": "bench", "name": f"bench-{attempt}"}
        req = urllib.request.Request(
            f"http://127.0.0.1:{admin_port}/v1/keys", method="POST", data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())["secret"]
        except urllib.error.HTTPError as e:
            if e.code != 503 or attempt == attempts - 1:
                raise BenchError(f"POST /v1/keys answered {e.code}: {e.read()[:300]!r}")
            time.sleep(0.5)


def parse_variants(text):
    """Variant names in a --variants string, in order: "T0" is one name, every other letter
    is one ("ABT0TPDF" -> A, B, T0, T, P, D, F). Unknown letters raise BenchError."""
    names = re.findall(r"T0|[A-Z]", text.upper())
    bad = [n for n in names if n not in VARIANTS]
    if bad:
        raise BenchError(f"unknown variants {bad} (known: {', '.join(VARIANTS)})")
    return names


class Sut:
    """A running system under test: where to send load and which processes to account."""

    def __init__(self, variant, port, procs, kind, headers=(), admin=None, extra=None, redis=None):
        self.variant = variant
        self.port = port
        self.procs = procs  # proxy processes (nginx master+workers, or tollgate); [] for A
        self.kind = kind  # "direct" | "nginx" | "tollgate"
        self.headers = list(headers)
        self.admin = admin
        self.extra = extra or {}
        self.redis = redis  # the redis-server whose counters belong to this variant, or None
        self.aux = []  # helper processes (an OTLP sink), stopped with it, not accounted

    def pids(self):
        return [pid for p in self.procs for pid in p.pids()]


def probe(sut, expect):
    status, headers, body, keepalive = http_get(sut.port, "/", dict(h.split(": ", 1) for h in sut.headers))
    if status not in expect:
        raise BenchError(f"variant {sut.variant}: probe answered {status}, expected {expect}: {body[:300]!r}")
    return {"status": status, "keepalive": keepalive,
            "ratelimit": headers.get("ratelimit"), "ratelimit_policy": headers.get("ratelimit-policy")}


def start_variant(ctx, v, backend, redis, g_limit=None, traefik_redis=None):
    """Starts variant `v`. `redis` serves tollgate's tiers; `traefik_redis` is T's own, so each
    variant's Redis counters are its own."""
    a = ctx.args
    conc = max(256, 4 * a.connections)
    edge = {"limit": HUGE, "per": "1s", "burst": HUGE, "max_clients": 100000}
    key_header = [f"X-API-Key: {API_KEY}"]
    if v == "A":
        return Sut("A", backend.port, [], "direct")
    if v in ("B", "C"):
        p = start_nginx_proxy(ctx, f"nginx-{v}", backend.port, limited=(v == "C"))
        return Sut(v, p.port, [p], "nginx")
    if v in ("T0", "T"):
        r = traefik_redis if v == "T" else None
        if r is not None:
            redis_cmd(r.port, "FLUSHALL")
        p = start_traefik(ctx, f"traefik-{v}", backend.port, r.port if r else None, conc)
        headers = key_header if v == "T" else []
        return Sut(v, p.port, [p], "traefik", headers=headers, extra={"redis": r is not None}, redis=r)
    if v == "P":
        port = free_port()
        # The same runtime choice as tollgate's server.work_stealing, so D - P stays fair.
        p = ctx.env.start("pingora-floor", [ctx.floor, f"127.0.0.1:{port}",
                                            f"127.0.0.1:{backend.port}", str(a.threads),
                                            str(a.work_stealing).lower()],
                          stop_signal=signal.SIGINT)
        wait_port(port, p)
        return Sut(v, port, [p], "pingora")
    port, admin = free_port(), free_port()
    name = f"tollgate-{v}"
    extra = {}
    aux = []
    if v in ("D", "K"):
        cfg = tollgate_config(ctx, name, port, admin, backend.port)
        if v == "K":
            cfg["observability"]["access_log"] = True
    elif v == "E":
        cfg = tollgate_config(ctx, name, port, admin, backend.port, edge=edge, concurrency=conc)
    elif v in ("F", "R", "M", "H", "I", "N", "S", "X"):
        tier = {"limit": HUGE, "per": "1s", "burst": HUGE}
        if v == "M":
            tier["max_in_flight"] = M_MAX_IN_FLIGHT
            extra["max_in_flight"] = M_MAX_IN_FLIGHT
        cfg = tollgate_config(ctx, name, port, admin, backend.port, edge=edge, concurrency=conc,
                              tier=tier, redis_port=redis.port, auth="required")
        extra["redis"] = True
        if v == "R":
            cfg["limits"] = r_rules()
            extra["rules"] = len(cfg["limits"])
        if v == "N":
            cfg["limits"] = counted_rule()
        if v == "S":
            # The file keeps one key nobody sends (auth: required needs an identity method);
            # the key wrk sends is issued through the admin API below.
            cfg["identity"]["api_keys"]["keys"][0]["sha256"] = hashlib.sha256(b"unused").hexdigest()
            cfg["store"] = {"keys": True}
            cfg["admin"]["token_env"] = ADMIN_TOKEN_ENV
        if v == "X":
            extra["grpc_port"] = free_port()
            cfg["limits"] = [decision_rule()]
            cfg["decision"] = {"grpc": {"listen": f"127.0.0.1:{extra['grpc_port']}"}}
        if v in TRACE_SAMPLING:
            sink_port = free_port()
            sink = ctx.env.start(f"otlp-sink-{v}", [sys.executable, OTLP_SINK, sink_port])
            wait_port(sink_port, sink)
            aux.append(sink)
            cfg["observability"]["tracing"] = tracing_section(sink_port, TRACE_SAMPLING[v])
            extra["trace_sampling"] = TRACE_SAMPLING[v]
    elif v == "G":
        cfg = tollgate_config(ctx, name, port, admin, backend.port, edge=edge, concurrency=conc,
                              tier={"limit": g_limit, "per": "1s", "burst": g_limit},
                              redis_port=redis.port, auth="required")
        extra["redis"] = True
        extra["g_tier_limit_per_s"] = g_limit
    elif v == "L":
        cfg = tollgate_config(ctx, name, port, admin, backend.port, edge=edge, concurrency=conc,
                              tier={"limit": HUGE, "per": "1s", "burst": HUGE,
                                    "lease": {"tokens": a.lease_tokens, "max_hold": a.lease_hold}},
                              redis_port=redis.port, auth="required")
        extra["redis"] = True
        extra["lease_tokens"] = a.lease_tokens
    else:
        raise BenchError(f"unknown variant {v}")
    if extra.get("redis"):
        # Exact decisions of one tenant in flight together share a script call. M's rate
        # decision is coalesced as F's; its lease calls (acquire, release) are one per request.
        extra["coalescing"] = True
    if redis is not None:
        redis_cmd(redis.port, "FLUSHALL")
    env = {ADMIN_TOKEN_ENV: ADMIN_TOKEN} if v == "S" else None
    p = start_tollgate(ctx, name, cfg, rust_log="warn,tollgate::access=info" if v == "K" else None,
                       env=env)
    headers = key_header if v in REDIS_VARIANTS and v != "X" else []
    if v == "S":
        headers = [f"X-API-Key: {issue_key(p.admin)}"]
    sut = Sut(v, p.port, [p], "tollgate", headers=headers, admin=p.admin, extra=extra,
              redis=redis if extra.get("redis") else None)
    sut.aux = aux
    return sut


def stop_variant(ctx, sut):
    for p in sut.procs + sut.aux:
        ctx.env.stop(p)
