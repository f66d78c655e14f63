#!/usr/bin/env bash
# tollgate optional two-region demo (docs/multi-region.md): `mode: sync` between two
# regions, eu and us, each with its own Redis, exchanging demand through a third, `global` Redis.
#
#   ./scripts/demo-regions.sh        (TOLLGATE_DEMO_PROFILE=debug for a debug build; KEEP=1 keeps files)
#
# Tier "pro": 20 tokens/s, burst 20, shares eu:1 us:1. All traffic goes to eu: its part of the
# budget starts at the static half (RateLimit-Policy q=10) and grows to ~95 % after a sync or two
# (q=19), with `;region="eu"` on the policy. Exit 0 when that held.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PROFILE=${TOLLGATE_DEMO_PROFILE:-release}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
if [[ $PROFILE == release ]]; then cargo build --release --bins; BIN=$TARGET_DIR/release
else cargo build --bins; BIN=$TARGET_DIR/debug; fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-regions.XXXXXX")
PIDS=()
cleanup() {
  local rc=$?
  trap - EXIT
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ ${KEEP:-0} == 1 ]]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
  exit "$rc"
}
trap cleanup EXIT

read -r P_GLOBAL P_EU P_US P_ECHO P_GW_EU P_ADM_EU P_GW_US P_ADM_US < <(python3 - <<'PY'
import socket
ports = []
for _ in range(8):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ports.append(s.getsockname()[1]); s.close()
print(*ports)
PY
)
wait_tcp() { local end=$((SECONDS + 10)); while ((SECONDS < end)); do
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

for p in "$P_GLOBAL" "$P_EU" "$P_US"; do
  redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" \
    --logfile "$WORK/redis-$p.log" >/dev/null 2>&1 &
  PIDS+=($!)
  wait_tcp "$p" || { echo "redis-server :$p did not start"; exit 1; }
done
"$BIN/tollgate-echo" --listen "127.0.0.1:$P_ECHO" --name echo --threads 1 >"$WORK/echo.log" 2>&1 &
PIDS+=($!)
KEY=demo-region-key
SHA=$(printf %s "$KEY" | sha256sum | cut -d' ' -f1)

gateway() { # gateway <region> <redis port> <listen port> <admin port>
  cat >"$WORK/$1.yaml" <<YAML
listen: ["127.0.0.1:$3"]
admin: { listen: "127.0.0.1:$4" }
server: { threads: 1, grace_period_s: 1, upgrade_sock: "$WORK/$1.sock", pid_file: "$WORK/$1.pid" }
redis: { url: "redis://127.0.0.1:$2/0", on_failure: closed }
identity: { api_keys: { keys: [ { sha256: "$SHA", tenant: "acme", tier: pro } ] } }
tiers: { pro: { limit: 20, per: 1s, burst: 20 } }
multi_region:
  region: $1
  shares: { eu: 1, us: 1 }
  mode: sync
  global: { url: "redis://127.0.0.1:$P_GLOBAL" }
  sync_interval: 500ms
upstreams: { echo: { backends: ["127.0.0.1:$P_ECHO"] } }
routes: [ { path_prefix: "/", upstream: echo, auth: required } ]
YAML
  "$BIN/tollgate" run -c "$WORK/$1.yaml" >"$WORK/$1.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$4/healthz" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "gateway $1 did not start:"; tail -20 "$WORK/$1.log"; exit 1
}
gateway eu "$P_EU" "$P_GW_EU" "$P_ADM_EU"
gateway us "$P_US" "$P_GW_US" "$P_ADM_US"
echo "== eu :$P_GW_EU, us :$P_GW_US, global redis :$P_GLOBAL (sync every 500 ms)"

policy() { curl -s -o /dev/null -D - -H "X-API-Key: $KEY" "http://127.0.0.1:$P_GW_EU/" \
  | tr -d '\r' | sed -n 's/^ratelimit-policy: //Ip'; }
first=$(policy)
echo "first request in eu:      RateLimit-Policy: $first"
for _ in $(seq 1 30); do policy >/dev/null; sleep 0.05; done
later=$(policy)
echo "after 1.5 s of eu load:   RateLimit-Policy: $later"
echo "eu sync failures: $(curl -s "http://127.0.0.1:$P_ADM_EU/metrics" | sed -n 's/^tollgate_region_sync_failures_total //p')"
[[ $first == *'q=10;'*'region="eu"'* ]] || { echo "FAIL: expected the static half (q=10) first"; exit 1; }
[[ $later == *'q=19;'*'region="eu"'* ]] || { echo "FAIL: expected eu's share to grow to q=19"; exit 1; }
echo "OK: eu's part of the budget followed its demand (q 10 -> 19 of 20)"
