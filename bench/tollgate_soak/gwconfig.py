"""The gateway configuration of each reload generation (YAML text; pure).

Every generation differs from the one before in limits (the `churn` tier), keys (the rotating
tenants') and the echo upstream (backend order, `max_concurrency`): what the soak reloads every
10 s. Two more upstreams stay the same: `ws` (the WebSocket backend, route `/ws`) and `grpc`
(the gRPC server of demo/grpc/, `h2: true`, route `/demo.Echo/`); both need a tenant's key.
The key lists hold SHA-256 digests, as `tollgate hash-key` prints them.
"""

import hashlib

from . import plan

# (limit per hour, burst) of every tier; `churn` alternates between its two settings, whose
# buckets take the same time to fill (120 s), so a key's expiry never hands out more than the
# larger setting's refill would.
EXACT_LIMIT, EXACT_BURST = 600, 20
LOCAL_LIMIT, LOCAL_BURST = 600, 21
CHURN_SETTINGS = ((600, 20), (900, 30))
ANON_LIMIT_PER_MIN, ANON_BURST = 60, 10
LOCAL_MAX_IN_FLIGHT = 8
FLEET_SIZE = 3
# redis.lease_ttl, in seconds: how long a fleet-wide lease lives unrenewed.
LEASE_TTL_S = 10
PER_S = 3600.0
# The upstreams, as the gateways' metrics label them (`tollgate_upstream_in_flight{upstream}`).
UPSTREAMS = ("echo", "ws", "grpc")


def churn_setting(generation):
    """(limit per hour, burst) of the `churn` tier in `generation`."""
    return CHURN_SETTINGS[generation % 2]


def churn_max():
    """(limit per hour, burst): the larger `churn` setting, which the account bounds by."""
    return max(CHURN_SETTINGS)


def sha256_hex(text):
    return hashlib.sha256(text.encode()).hexdigest()


def gateway_yaml(generation, gw_port, admin_port, sentinel_ports, master_name, backends,
                 ws_backend, grpc_backend):
    """One gateway's config for reload `generation`.

    `sentinel_ports`: the three sentinels; `backends`: the two echo addresses ("127.0.0.1:P");
    `ws_backend`, `grpc_backend`: the WebSocket backend's and the gRPC server's addresses.
    """
    churn_limit, churn_burst = churn_setting(generation)
    order = backends if generation % 2 == 0 else list(reversed(backends))
    max_conc = 64 if generation % 2 == 0 else 48
    urls = ", ".join(f'"redis://127.0.0.1:{p}"' for p in sentinel_ports)
    keys = []
    for i in range(plan.TENANTS):
        if plan.key_present(i, generation):
            keys.append(
                f'      - {{ sha256: "{sha256_hex(plan.api_key(i))}", '
                f'tenant: "{plan.tenant_name(i)}", tier: {plan.tier_of(i)} }}'
            )
    backend_list = ", ".join(f'"{b}"' for b in order)
    return f"""# tollgate soak, generation {generation} (written by bench/soak.py)
listen:
  - {{ addr: "127.0.0.1:{gw_port}", h2: true }}
admin: {{ listen: "127.0.0.1:{admin_port}" }}
server: {{ threads: 1, grace_period_s: 1, keepalive_timeout: 60s }}
redis:
  mode: sentinel
  urls: [{urls}]
  sentinel: {{ master: "{master_name}" }}
  key_prefix: "tollgate"
  timeout_ms: 250
  fleet_size: {FLEET_SIZE}
  lease_ttl: {LEASE_TTL_S}s
edge:
  limit: 50
  per: 1s
  burst: 100
  trusted_proxies: ["127.0.0.1"]
  max_clients: 100000
identity:
  api_keys:
    header: "X-API-Key"
    keys:
{chr(10).join(keys)}
tiers:
  anonymous: {{ limit: {ANON_LIMIT_PER_MIN}, per: 1m, burst: {ANON_BURST}, on_failure: open }}
  exact: {{ limit: {EXACT_LIMIT}, per: 1h, burst: {EXACT_BURST}, on_failure: closed }}
  local: {{ limit: {LOCAL_LIMIT}, per: 1h, burst: {LOCAL_BURST}, on_failure: local, max_in_flight: {LOCAL_MAX_IN_FLIGHT} }}
  churn: {{ limit: {churn_limit}, per: 1h, burst: {churn_burst}, on_failure: closed }}
upstreams:
  echo:
    backends: [{backend_list}]
    max_concurrency: {max_conc}
    queue: {{ max: 256, timeout_ms: 5000 }}
    connect_timeout_ms: 500
    read_timeout_ms: 10000
    health_check: {{ path: "/healthz", interval_s: 1 }}
  ws:
    backends: ["{ws_backend}"]
    max_concurrency: 32
    connect_timeout_ms: 500
    read_timeout_ms: 10000
  grpc:
    backends: ["{grpc_backend}"]
    h2: true
    max_concurrency: 32
    connect_timeout_ms: 500
    read_timeout_ms: 10000
routes:
  - {{ path_prefix: "/api", upstream: echo, auth: required }}
  - {{ path_prefix: "/ws", upstream: ws, auth: required }}
  - {{ path_prefix: "/demo.Echo/", upstream: grpc, auth: required }}
  - {{ path_prefix: "/open", upstream: echo, auth: optional }}
response: {{ status: 429, headers: both }}
observability: {{ access_log: false }}
"""


def tenant_limits():
    """tenant -> (tier, burst, limit, per_s, failure policy) the account bounds it by (for
    `churn`, the larger of its two settings)."""
    out = {}
    for i in range(plan.TENANTS):
        tier = plan.tier_of(i)
        if tier == "exact":
            lim = (tier, EXACT_BURST, EXACT_LIMIT, PER_S, "closed")
        elif tier == "local":
            lim = (tier, LOCAL_BURST, LOCAL_LIMIT, PER_S, "local")
        else:
            limit, burst = churn_max()
            lim = (tier, burst, limit, PER_S, "closed")
        out[plan.tenant_name(i)] = lim
    return out
