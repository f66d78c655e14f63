#!/usr/bin/env bash
# tollgate demo against a local Redis Cluster (also: ./scripts/demo.sh --cluster).
#
# 1. builds the binaries (release; TOLLGATE_DEMO_PROFILE=debug for a debug build);
# 2. starts, on free loopback ports in a temporary directory: a Redis Cluster of 3 masters and
#    3 replicas (redis-server --cluster-enabled yes, redis-cli --cluster create, node timeout
#    1000 ms), two tollgate-echo backends and TWO tollgate instances with `redis.mode: cluster`;
# 3. shows where the tenants' buckets live (one hash slot per tenant), then, under steady
#    traffic: CLUSTER FAILOVER on a replica, and kill -9 of a master; prints how each answer was
#    decided (by Redis, by the local fallback, or refused) per phase;
# 4. stops everything (trap EXIT). Exit 0 when no answer was a 5xx other than the declared policy
#    and decisions came back to Redis after each fault. KEEP=1 keeps the directory.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PROFILE=${TOLLGATE_DEMO_PROFILE:-release}
B=$'\e[1m' N=$'\e[0m'
[[ -t 1 ]] || B= N=
section() { printf '\n%s== %s ==%s\n' "$B" "$*" "$N"; }
say() { printf '  %s\n' "$*"; }
for tool in cargo redis-server redis-cli curl python3 openssl; do
  command -v "$tool" >/dev/null || { echo "demo-cluster: $tool is missing (see scripts/demo.sh)" >&2; exit 1; }
done

TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
if [[ $PROFILE == release ]]; then
  section "build: cargo build --release --bins"
  cargo build --release --bins
  BIN=$TARGET_DIR/release
else
  section "build: cargo build --bins"
  cargo build --bins
  BIN=$TARGET_DIR/debug
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-cluster-demo.XXXXXX")
PIDS=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ ${KEEP:-0} == 1 ]]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 14 free ports below the ephemeral range; the six Redis ports also need port+10000 free (bus).
read -r -a PORTS < <(python3 - <<'EOF'
import random, socket
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except Exception:
    low = 32768
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
ports = []
while len(ports) < 14:
    p = random.randint(10000, min(low - 1, 20000))
    if p in ports or p + 10000 in ports or p - 10000 in ports[:6] or not free(p):
        continue
    if len(ports) < 6 and not free(p + 10000):
        continue
    ports.append(p)
print(*ports)
EOF
)
REDIS_PORTS=("${PORTS[@]:0:6}")
P_ECHO=${PORTS[6]} P_GW1=${PORTS[7]} P_ADM1=${PORTS[8]} P_GW2=${PORTS[9]} P_ADM2=${PORTS[10]}
P_TLS1=${PORTS[11]} P_TLS2=${PORTS[12]} P_ECHO2=${PORTS[13]}

section "Redis Cluster: 3 masters + 3 replicas on ${REDIS_PORTS[*]}"
declare -A RPID
for p in "${REDIS_PORTS[@]}"; do
  mkdir -p "$WORK/r$p"
  redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK/r$p" \
    --cluster-enabled yes --cluster-node-timeout 1000 --cluster-config-file nodes.conf \
    --cluster-require-full-coverage no --repl-diskless-sync-delay 0 \
    --logfile "$WORK/r$p/redis.log" --daemonize no >/dev/null 2>&1 &
  RPID[$p]=$!
  PIDS+=("$!")
  disown "$!" # no "Killed" job notice when the demo kills it
done
for p in "${REDIS_PORTS[@]}"; do
  for _ in $(seq 1 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create $(printf '127.0.0.1:%s ' "${REDIS_PORTS[@]}") --cluster-replicas 1 --cluster-yes >"$WORK/create.log"
for _ in $(seq 1 100); do
  redis-cli -p "${REDIS_PORTS[0]}" cluster info | grep -q cluster_state:ok && break
  sleep 0.2
done
redis-cli -p "${REDIS_PORTS[0]}" cluster nodes | awk '{print "    " $2, $3, $9}' | sed 's/@[0-9]*//'

URLS=$(printf '"redis://127.0.0.1:%s", ' "${REDIS_PORTS[@]}")
URLS="[${URLS%, }]"
cp demo/jwt-hs256.secret "$WORK/jwt-hs256.secret"
"$ROOT/scripts/demo-cert.sh" "$WORK" # certificate of the template's TLS + h2 listener
gen_config() { # gen_config <n> <listen> <tls listen> <admin>: the demo template, cluster redis
  local out="$WORK/gw$1.yaml"
  "$ROOT/scripts/render-template.sh" "$ROOT/demo/gateway.demo.yaml.tmpl" N="$1" GW_PORT="$2" TLS_PORT="$3" \
    ADMIN_PORT="$4" EDGE_BURST=200 WORK="$WORK" REDIS_TARGET="mode: cluster
  urls: $URLS" REDIS_TIMEOUT_MS=200 ECHO1_PORT="$P_ECHO" ECHO2_PORT="$P_ECHO2" >"$out" || return 1
  printf '%s\n' "$out"
}
CFG1=$(gen_config 1 "$P_GW1" "$P_TLS1" "$P_ADM1")
CFG2=$(gen_config 2 "$P_GW2" "$P_TLS2" "$P_ADM2")
"$BIN/tollgate" check -c "$CFG1"
"$BIN/tollgate-echo" --listen "127.0.0.1:$P_ECHO" --name echo-1 --threads 2 >"$WORK/echo.log" 2>&1 &
PIDS+=("$!")
"$BIN/tollgate-echo" --listen "127.0.0.1:$P_ECHO2" --name echo-2 --threads 2 >"$WORK/echo2.log" 2>&1 &
PIDS+=("$!")
"$BIN/tollgate" run -c "$CFG1" >"$WORK/gw1.log" 2>&1 &
PIDS+=("$!")
"$BIN/tollgate" run -c "$CFG2" >"$WORK/gw2.log" 2>&1 &
PIDS+=("$!")
for adm in "$P_ADM1" "$P_ADM2"; do
  for _ in $(seq 1 150); do curl -fsS "http://127.0.0.1:$adm/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
done
say "two gateways on :$P_GW1 and :$P_GW2, redis: { mode: cluster, urls: [6 nodes], timeout_ms: 200 }"

# verdict <gateway port> <api key>: redis | local | policy503 | 429 | other:<code>
verdict() {
  local h
  h=$(curl -s -o /dev/null -D - -H "X-API-Key: $2" "http://127.0.0.1:$1/api/x" | tr -d '\r')
  local code
  code=$(printf '%s\n' "$h" | head -1 | awk '{print $2}')
  if printf '%s\n' "$h" | grep -qi '^tollgate-degraded:'; then echo local
  elif [[ $code == 200 ]]; then echo redis
  elif [[ $code == 429 ]]; then echo 429
  elif [[ $code == 503 ]]; then echo policy503
  else echo "other:${code:-000}"; fi
}
BAD=0
# traffic <label> <seconds>: pro tenant acme through both gateways, counts per verdict
traffic() {
  local end=$((SECONDS + $2)) i=0
  declare -A seen=()
  while ((SECONDS < end)); do
    local port=$P_GW1
    ((i % 2)) && port=$P_GW2
    local v
    v=$(verdict "$port" demo-pro-key)
    seen[$v]=$((${seen[$v]:-0} + 1))
    i=$((i + 1))
    sleep 0.05
  done
  local line=""
  for k in "${!seen[@]}"; do line+="$k=${seen[$k]} "; [[ $k == other:* ]] && BAD=1; done
  say "$1: $line"
}

section "where the buckets live (key tollgate:{<tenant>}:tb, one slot per tenant)"
for key in demo-free-key demo-pro-key; do verdict "$P_GW1" "$key" >/dev/null; done
for t in alice acme; do
  slot=$(redis-cli -p "${REDIS_PORTS[0]}" cluster keyslot "tollgate:{$t}:tb")
  owner=$(redis-cli -c -p "${REDIS_PORTS[0]}" cluster nodes | awk -v s="$slot" '$3 ~ /master/ {for (i=9;i<=NF;i++){split($i,r,"-"); if (s>=r[1] && s<=(r[2]==""?r[1]:r[2])) print $2}}' | sed 's/@.*//')
  say "tenant $t: slot $slot on master $owner"
done
traffic "healthy cluster, 3 s" 3

slot=$(redis-cli -p "${REDIS_PORTS[0]}" cluster keyslot "tollgate:{acme}:tb")
master_port() {
  redis-cli -p "$1" cluster nodes | awk -v s="$slot" '$3 ~ /master/ && $3 !~ /fail/ {for (i=9;i<=NF;i++){split($i,r,"-"); if (s>=r[1] && s<=(r[2]==""?r[1]:r[2])) print $2}}' | sed 's/@.*//; s/.*://'
}
M=$(master_port "${REDIS_PORTS[0]}")
MID=$(redis-cli -p "$M" cluster myid)
R=$(for p in "${REDIS_PORTS[@]}"; do
  if redis-cli -p "$p" cluster nodes | grep myself | grep -q "slave $MID"; then echo "$p"; fi
done | head -1)

section "(a) CLUSTER FAILOVER on :$R, replica of acme's master :$M"
redis-cli -p "$R" cluster failover >/dev/null
traffic "during and after the manual failover, 3 s" 3
NEW=$(master_port "$R")
say "acme's slot is now served by :$NEW"

section "(b) kill -9 of acme's master :$NEW (the replica takes over after the 1 s node timeout)"
kill -KILL "${RPID[$NEW]}"
ALIVE=$(for p in "${REDIS_PORTS[@]}"; do if [[ $p != "$NEW" ]]; then echo "$p"; fi; done | head -1)
traffic "first 4 s after the kill (local = the tier's local fallback)" 4
traffic "next 3 s" 3
say "acme's slot is now served by :$(master_port "$ALIVE")"
LAST=$(verdict "$P_GW1" demo-pro-key)
if [[ $LAST != redis && $LAST != 429 ]]; then
  say "decisions did not come back to Redis ($LAST)"
  BAD=1
fi
section "result"
if ((BAD)); then say "FAILED (see $WORK with KEEP=1)"; exit 1; fi
say "every answer was a Redis decision, the local fallback or a 429; decisions are back in Redis"
