#!/usr/bin/env bash
# The docker-compose demo on a real container engine: Podman (rootful), no image registry.
#
#   sudo ./scripts/compose-demo.sh
#
# 1. installs what is missing (Debian: podman, runc, debootstrap, catatonit, netavark, iptables,
#    aardvark-dns, python3-venv, curl; podman-compose from PyPI into a venv);
# 2. uses a private containers.conf (CONTAINERS_CONF): runtime runc, default ulimits nofile 20000
#    and nproc 32768, netavark networking (service names resolve through aardvark-dns);
# 3. makes the base image locally: `debootstrap --variant=minbase bookworm` with redis-server and
#    curl, then `podman import` (cached: the rootfs tarball and the image are reused);
# 4. builds the release binaries (`cargo build --release --bins`) and packs them into a local
#    image; docker-compose.yml builds tollgate:local from them (Dockerfile build args) and runs
#    Redis from the base image (REDIS_IMAGE);
# 5. brings the compose topology up in two steps, because Podman runs no healthchecks without
#    systemd: Redis and the backends, `podman healthcheck run` until healthy, then the gateways;
# 6. shows the free tier's burst shared by both gateways (exactly `burst` admitted across them),
#    reloads tollgate-a with SIGHUP (`podman kill --signal HUP`), and
# 7. tears everything down (trap EXIT, also on failure).
# Exit 0 when every expectation held, 1 otherwise.
#
# Environment: TOLLGATE_COMPOSE_PROFILE=debug uses a debug build (faster to build) instead of
# release; TOLLGATE_COMPOSE_CACHE (default /var/cache/tollgate-compose-demo) keeps the
# debootstrap tarball and the podman-compose venv between runs; KEEP_UP=1 leaves the containers
# running (tear down with the printed command).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
CACHE=${TOLLGATE_COMPOSE_CACHE:-/var/cache/tollgate-compose-demo}
PROJECT=tollgate-demo
BASE_IMAGE=localhost/tollgate-base:bookworm
BIN_IMAGE=localhost/tollgate-binaries:local
PODMAN_COMPOSE_VERSION=1.6.0
FREE_KEY=demo-free-key # tenant alice, tier free: burst 10 (demo/compose-gateway.yaml)
PRO_KEY=demo-pro-key
FREE_BURST=10
STARTED=$SECONDS

# ---- output --------------------------------------------------------------------------------------
if [[ -t 1 ]]; then B=$'\e[1m'; G=$'\e[32m'; R=$'\e[31m'; N=$'\e[0m'; else B= G= R= N=; fi
section() { printf '\n%s== %s ==%s  (t=%ss)\n' "$B" "$*" "$N" "$((SECONDS - STARTED))"; }
say() { printf '  %s\n' "$*"; }
indent() { tr -d '\r' | sed 's/^/    /'; }
PASSED=0
FAILED=()
expect() { # expect <what> <actual> <expected>
  if [[ "$2" == "$3" ]]; then
    PASSED=$((PASSED + 1))
    printf '  %sPASS%s %s (%s)\n' "$G" "$N" "$1" "$2"
  else
    FAILED+=("$1: expected $3, got $2")
    printf '  %sFAIL%s %s: expected %s, got %s\n' "$R" "$N" "$1" "$3" "$2"
  fi
}
die() {
  printf '%sFAIL%s %s\n' "$R" "$N" "$*" >&2
  exit 1
}
have() { command -v "$1" >/dev/null 2>&1; }

# ---- 1. prerequisites ----------------------------------------------------------------------------
section "prerequisites"
[[ $(id -u) -eq 0 ]] || die "run as root (rootful Podman): sudo $0"
have cargo || die "cargo not found; install the Rust toolchain (https://rustup.rs)"
missing=()
have podman || missing+=(podman)
have runc || missing+=(runc)
have debootstrap || missing+=(debootstrap)
have curl || missing+=(curl)
[[ -x /usr/libexec/podman/catatonit ]] || missing+=(catatonit)
[[ -x /usr/lib/podman/netavark ]] || missing+=(netavark)
[[ -x /usr/lib/podman/aardvark-dns ]] || missing+=(aardvark-dns)
# netavark sets up container networks (builds included) through iptables; without it every
# networked container fails with "netavark: No such file or directory".
have iptables || [[ -x /usr/sbin/iptables ]] || missing+=(iptables)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
if ((${#missing[@]})); then
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [[ ! -x $CACHE/venv/bin/podman-compose ]]; then
  say "podman-compose $PODMAN_COMPOSE_VERSION from PyPI into $CACHE/venv"
  mkdir -p "$CACHE"
  python3 -m venv "$CACHE/venv"
  "$CACHE/venv/bin/pip" install -q --disable-pip-version-check "podman-compose==$PODMAN_COMPOSE_VERSION"
fi
COMPOSE=("$CACHE/venv/bin/podman-compose" -p "$PROJECT" -f "$ROOT/docker-compose.yml")

WORK=$(mktemp -d /tmp/tollgate-compose-demo.XXXXXX)
cat >"$WORK/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"

[network]
network_backend = "netavark"
EOF
export CONTAINERS_CONF=$WORK/containers.conf
say "$(podman --version), $("${COMPOSE[0]}" --version 2>/dev/null | head -1), runtime $(podman info --format '{{.Host.OCIRuntime.Name}}'), network $(podman info --format '{{.Host.NetworkBackend}}')"

teardown() {
  local rc=$?
  if [[ ${KEEP_UP:-} == 1 ]]; then
    say "KEEP_UP=1: left running; tear down with: CONTAINERS_CONF=$CONTAINERS_CONF ${COMPOSE[*]} down"
  else
    section "teardown"
    "${COMPOSE[@]}" down -t 5 >"$WORK/down.log" 2>&1 || true
    # Whatever compose left (a failed start): containers, pod and network of this project.
    podman ps -aq --filter "label=io.podman.compose.project=$PROJECT" | xargs -r podman rm -f >/dev/null 2>&1 || true
    podman pod rm -f "pod_$PROJECT" >/dev/null 2>&1 || true
    podman network rm -f "${PROJECT}_default" >/dev/null 2>&1 || true
    # Earlier builds of tollgate:local (one per compose service), untagged by the last one.
    podman image prune -f --filter label=org.opencontainers.image.title=tollgate >/dev/null 2>&1 || true
    say "containers left: $(podman ps -aq --filter "label=io.podman.compose.project=$PROJECT" | wc -l)"
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap teardown EXIT
# Leftovers of an interrupted earlier run would hold the ports.
"${COMPOSE[@]}" down -t 2 >/dev/null 2>&1 || true
for port in 8080 8081 9090 9091; do # published on 127.0.0.1 by docker-compose.yml
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    die "127.0.0.1:$port is in use (docker-compose.yml publishes 8080, 8081, 9090, 9091)"
  fi
done

# ---- 2. base image -------------------------------------------------------------------------------
section "base image $BASE_IMAGE (debootstrap --variant=minbase bookworm, podman import)"
if podman image exists "$BASE_IMAGE"; then
  say "cached in podman's store"
else
  if [[ ! -s $CACHE/rootfs.tar ]]; then
    say "debootstrap into $CACHE/rootfs (a few minutes, once)"
    rm -rf "$CACHE/rootfs"
    mkdir -p "$CACHE"
    debootstrap --variant=minbase --include=redis-server,curl,ca-certificates \
      bookworm "$CACHE/rootfs" >"$WORK/debootstrap.log" 2>&1 ||
      { tail -20 "$WORK/debootstrap.log" | indent; die "debootstrap failed"; }
    rm -rf "$CACHE"/rootfs/var/cache/apt/archives/*.deb "$CACHE"/rootfs/var/lib/apt/lists/*
    tar -C "$CACHE/rootfs" -cf "$CACHE/rootfs.tar.tmp" . && mv "$CACHE/rootfs.tar.tmp" "$CACHE/rootfs.tar"
    rm -rf "$CACHE/rootfs"
  fi
  podman import --quiet "$CACHE/rootfs.tar" "$BASE_IMAGE" >/dev/null
  say "imported from $CACHE/rootfs.tar"
fi

# ---- 3. binaries and images ----------------------------------------------------------------------
PROFILE=${TOLLGATE_COMPOSE_PROFILE:-release}
section "$PROFILE binaries and the tollgate:local image"
if [[ $PROFILE == release ]]; then cargo build --release --bins --quiet; else cargo build --bins --quiet; fi
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
mkdir -p "$WORK/bin"
cp "$TARGET_DIR/$PROFILE/tollgate" "$TARGET_DIR/$PROFILE/tollgate-echo" "$WORK/bin/"
printf 'FROM scratch\nCOPY tollgate tollgate-echo /out/\n' >"$WORK/bin/Containerfile"
podman build --quiet -t "$BIN_IMAGE" "$WORK/bin" >/dev/null
export REDIS_IMAGE=$BASE_IMAGE TOLLGATE_RUNTIME_IMAGE=$BASE_IMAGE TOLLGATE_BINARIES=$BIN_IMAGE
"${COMPOSE[@]}" build >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" | indent; die "compose build failed"; }
say "$(podman image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E 'tollgate(-base|-binaries)?:' | sort | tr '\n' ' ')"

# ---- 4. up: dependencies, healthchecks, gateways -------------------------------------------------
container() { podman ps -q --filter "label=io.podman.compose.project=$PROJECT" --filter "label=io.podman.compose.service=$1"; }
# wait_healthy <service>...: `podman healthcheck run` until every one reports healthy (60 s each).
wait_healthy() {
  local svc id i
  for svc in "$@"; do
    id=$(container "$svc")
    [[ -n $id ]] || die "$svc is not running: $(podman ps -a --filter "label=io.podman.compose.service=$svc" --format '{{.Names}} {{.Status}}')"
    for ((i = 0; ; i++)); do
      if podman healthcheck run "$id" >/dev/null 2>&1; then
        say "$svc: healthy after $i failed checks"
        break
      fi
      ((i < 120)) || { podman logs --tail 20 "$id" 2>&1 | indent; die "$svc never became healthy"; }
      sleep 0.5
    done
  done
}
section "up: redis, echo-1, echo-2"
"${COMPOSE[@]}" up -d --no-deps redis echo-1 echo-2 >"$WORK/up1.log" 2>&1 || { tail -30 "$WORK/up1.log" | indent; die "compose up failed"; }
wait_healthy redis echo-1 echo-2
section "up: tollgate-a, tollgate-b"
"${COMPOSE[@]}" up -d --no-deps tollgate-a tollgate-b >"$WORK/up2.log" 2>&1 || { tail -30 "$WORK/up2.log" | indent; die "compose up failed"; }
wait_healthy tollgate-a tollgate-b
podman ps --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Names}}  {{.Status}}  {{.Ports}}' | indent

decided() { # decided <admin port> <outcome> <tier>: tenant decisions with that outcome and tier
  curl -s "http://127.0.0.1:$1/metrics" |
    awk -v o="outcome=\"$2\"" -v t="tier=\"$3\"" \
      'index($1, "tollgate_decisions_total{") == 1 && index($1, "layer=\"tenant\"") && index($1, o) && index($1, t) {s += $2} END {print s + 0}'
}
# Each gateway opens its Redis connection and loads the script on its first tenant decision; done
# here (as the pro tenant), so that a slow first call cannot time out during the burst below.
section "warm-up: 3 requests as the pro tenant on each gateway"
for port in 8080 8081; do
  for i in 1 2 3; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-API-Key: $PRO_KEY" "http://127.0.0.1:$port/api/hello")
    [[ $code == 200 ]] || die "warm-up on :$port answered $code"
  done
done
say "6 x 200"

# ---- 5. the free tier's burst, shared by both gateways -------------------------------------------
section "the free tier's burst (10) is shared by tollgate-a (:8080) and tollgate-b (:8081)"
say "20 requests as tenant alice (tier free: burst 10, refill 1 token/s), alternating a, b, a, b, ..."
say "(one curl process, kept-alive connections: the 20 take well under the 1 s one token takes to refill)"
transfers=() # curl's -o applies to one URL: one per URL
for i in $(seq 1 10); do
  transfers+=(-o /dev/null "http://127.0.0.1:8080/api/hello?i=a$i" -o /dev/null "http://127.0.0.1:8081/api/hello?i=b$i")
done
curl -s --no-progress-meter -H "X-API-Key: $FREE_KEY" \
  -w '%{url_effective} %{http_code} %{time_total}\n' "${transfers[@]}" >"$WORK/burst.txt" 2>"$WORK/burst.err" || true
admitted_a=$(grep -c ':8080/.* 200 ' "$WORK/burst.txt" || true)
admitted_b=$(grep -c ':8081/.* 200 ' "$WORK/burst.txt" || true)
limited=$(grep -c ' 429 ' "$WORK/burst.txt" || true)
sed -E 's|^http://127.0.0.1:[0-9]+/api/hello\?i=([ab][0-9]+) ([0-9]+) .*|\1:\2|' "$WORK/burst.txt" | paste -sd' ' | fold -s -w 96 | indent
say "tollgate-a admitted $admitted_a, tollgate-b admitted $admitted_b, 429s: $limited, in $(awk '{s += $3} END {printf "%.3f", s}' "$WORK/burst.txt") s"
expect "admitted across both gateways = the burst" "$((admitted_a + admitted_b))" "$FREE_BURST"
expect "each gateway admitted half of it (alternating)" "$admitted_a+$admitted_b" "$((FREE_BURST / 2))+$((FREE_BURST / 2))"
expect "the other requests were limited (429)" "$limited" "$((20 - FREE_BURST))"
a_ok=$(decided 9090 admitted free)
b_ok=$(decided 9091 admitted free)
# A Redis call slower than redis.timeout_ms (50 ms) would be answered by the local fallback
# bucket (outcome fallback) instead of the shared one: then the burst is not shared exactly.
expect "metrics agree: tenant admitted (free) on a + b" "$((a_ok + b_ok))" "$FREE_BURST"
expect "no decision fell back to local buckets (Redis answered every call)" \
  "$(($(decided 9090 fallback free) + $(decided 9091 fallback free)))" "0"

# ---- 6. reload one gateway -----------------------------------------------------------------------
section "reload tollgate-a: podman kill --signal HUP"
reloads() { curl -s "http://127.0.0.1:$1/metrics" | awk '$1 == "tollgate_config_reloads_total{result=\"ok\"}" {print $2}'; }
before=$(reloads 9090)
podman kill --signal HUP "$(container tollgate-a)" >/dev/null
for ((i = 0; i < 100; i++)); do
  [[ $(reloads 9090) != "$before" ]] && break
  sleep 0.2
done
expect "tollgate-a reloads_total{ok}" "$(reloads 9090)" "$((before + 1))"
expect "tollgate-b not reloaded" "$(reloads 9091)" "1"
podman logs "$(container tollgate-a)" 2>&1 | grep -m1 'config reloaded' | cut -c1-200 | indent
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-API-Key: $PRO_KEY" http://127.0.0.1:8080/api/hello)
expect "tollgate-a serves after the reload (pro tenant)" "$code" "200"
code=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:9090/readyz)
expect "tollgate-a ready after the reload" "$code" "200"

# ---- summary ------------------------------------------------------------------------------------
section "summary"
if ((${#FAILED[@]})); then
  printf '  %s%d passed, %d failed%s\n' "$R" "$PASSED" "${#FAILED[@]}" "$N"
  printf '  - %s\n' "${FAILED[@]}"
  say "gateway logs (tail):"
  podman logs --tail 10 "$(container tollgate-a)" 2>&1 | cut -c1-200 | indent || true
  exit 1
fi
printf '  %scompose demo: %d passed, 0 failed%s (%ss)\n' "$G" "$PASSED" "$N" "$((SECONDS - STARTED))"
