#!/usr/bin/env bash
# gRPC through tollgate, as a gRPC client sees it: one call admitted, one limited.
#
#   scripts/demo-grpc.sh          # debug build (TOLLGATE_DEMO_PROFILE=release for a release build)
#
# 1. installs what is missing (scripts/prereqs.sh) and makes the repository's venv with the pinned
#    grpcio packages of demo/grpc/requirements.txt (scripts/venv.sh; PyPI is needed once);
# 2. builds tollgate;
# 3. starts, on free loopback ports inside a temporary directory: redis-server, the real gRPC server
#    demo/grpc/server.py (service demo.Echo) and one tollgate with an h2c listener, an `h2: true`
#    upstream and a tier of one call per day for the API key `demo-key`;
# 4. makes two unary calls /demo.Echo/Unary with the real grpcio client (demo/grpc/client.py) and
#    prints them: the first admitted (OK, the server's reply and the RateLimit metadata), the
#    second RESOURCE_EXHAUSTED with its message, Retry-After and the RetryInfo delay that
#    grpcio-status decodes from grpc-status-details-bin;
# 5. stops everything it started. Exit 0 when both calls came out so. KEEP=1 keeps the files.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
PROFILE=${TOLLGATE_DEMO_PROFILE:-debug}

"$ROOT/scripts/prereqs.sh" curl || exit 1
# shellcheck disable=SC2046 # one requirement per word
VENV=$("$ROOT/scripts/venv.sh" $(cat demo/grpc/requirements.txt)) || exit 1
PY=$VENV/bin/python

TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
if [[ $PROFILE == release ]]; then
  cargo build --release --bin tollgate || exit 1
else
  cargo build --bin tollgate || exit 1
fi
TOLLGATE=$TARGET_DIR/$PROFILE/tollgate

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-grpc-demo.XXXXXX")
PIDS=()
# On exit: stop what was started (by pid), then drop $WORK unless KEEP=1.
trap 'kill "${PIDS[@]}" 2>/dev/null; wait; [[ ${KEEP:-0} == 1 ]] && echo "kept $WORK" || rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

read -r P_REDIS P_GW P_ADMIN < <(python3 - <<'PY'
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
ports = []
while len(ports) < 3:
    p = random.randint(10000, max(low - 1, 12000))
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        if p not in ports:
            ports.append(p)
    except OSError:
        pass
    finally:
        s.close()
print(*ports)
PY
)

redis-server --port "$P_REDIS" --bind 127.0.0.1 --save "" --appendonly no >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
"$PY" demo/grpc/server.py >"$WORK/grpc-server.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do
  P_GRPC=$(sed -n 's/^listening //p' "$WORK/grpc-server.out")
  [[ -n $P_GRPC ]] && break
  sleep 0.1
done
[[ -n ${P_GRPC:-} ]] || { echo "the gRPC server did not start:"; cat "$WORK/grpc-server.out"; exit 1; }

KEY_SHA=$(printf '%s' demo-key | sha256sum | cut -d' ' -f1)
cat >"$WORK/gateway.yaml" <<YAML
listen: [{ addr: "127.0.0.1:$P_GW", h2: true }]      # h2c: gRPC without TLS
admin: { listen: "127.0.0.1:$P_ADMIN" }
redis: { url: "redis://127.0.0.1:$P_REDIS" }
identity:
  api_keys:
    keys: [{ sha256: "$KEY_SHA", tenant: acme, tier: demo }]
tiers:
  demo: { limit: 1, per: 1d, burst: 1 }               # one call per day
upstreams:
  echo-grpc: { backends: ["127.0.0.1:$P_GRPC"], h2: true }
routes:
  - { path_prefix: "/demo.Echo/", upstream: echo-grpc, auth: required }
YAML
"$TOLLGATE" run -c "$WORK/gateway.yaml" >"$WORK/gateway.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$P_ADMIN/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done

echo "gRPC server demo.Echo on 127.0.0.1:$P_GRPC; tollgate (h2c) on 127.0.0.1:$P_GW; config:"
sed 's/^/    /' "$WORK/gateway.yaml"
echo
echo "two unary calls /demo.Echo/Unary with the grpcio client, API key demo-key:"
"$PY" demo/grpc/client.py "127.0.0.1:$P_GW" --metadata x-api-key=demo-key unary --n 2 >"$WORK/calls.jsonl"
"$PY" - "$WORK/calls.jsonl" <<'PY'
import json, sys

calls = [json.loads(l) for l in open(sys.argv[1])]
want = ["OK", "RESOURCE_EXHAUSTED"]
for i, c in enumerate(calls, 1):
    print(f"  call {i}: {c['code']}")
    if c["code"] == "OK":
        print(f"    reply from the server: {c['replies'][0]}")
        meta = c["initial"]
    else:
        print(f"    details: {c['details']}")
        print(f"    RetryInfo retry delay: {c['retry_delay_s']} s (google.rpc.Status code {c['rich_status']})")
        meta = c["trailing"]
    for k in ("ratelimit-policy", "ratelimit", "retry-after"):
        if k in meta:
            print(f"    {k}: {meta[k]}")
got = [c["code"] for c in calls]
print("expected", want, "got", got, "->", "OK" if got == want else "UNEXPECTED")
sys.exit(0 if got == want else 1)
PY
