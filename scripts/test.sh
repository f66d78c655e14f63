#!/usr/bin/env bash
# tollgate tests: THE one test command.
#
#   ./scripts/test.sh
#
# Installs what is missing (cmake, redis-server, python3; apt-get when run as root, otherwise it
# prints what to install and exits 1), then runs, in order and all of them even when one fails:
#   cargo fmt --all -- --check
#   cargo clippy --all-targets -- -D warnings
#   cargo test --all-targets --no-fail-fast (integration tests spawn real redis-server, backends, gateways)
#   python3 scripts/check-compose.py (docker-compose.yml parses and names existing files)
#   python3 -m unittest discover -s bench/tests (bench target verdicts vs the committed results)
# and prints a summary. Exit status: 0 when every step passed, 1 otherwise.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
have() { command -v "$1" >/dev/null 2>&1; }

# ---- prerequisites -------------------------------------------------------------------------------
if ! have cargo; then
  echo "cargo not found. Install the Rust toolchain first: https://rustup.rs" >&2
  exit 1
fi
missing=()
have cmake || missing+=(cmake)
have redis-server || missing+=(redis-server)
have python3 || missing+=(python3)
{ have cc && have make; } || missing+=(build-essential)
have pkg-config || missing+=(pkg-config)
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]] && have apt-get; then
    echo "==> installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
      { echo "apt-get install failed" >&2; exit 1; }
  else
    echo "Missing: ${missing[*]}" >&2
    echo "Install them, then run this again:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi
for component in rustfmt clippy; do
  if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
    if have rustup; then
      echo "==> rustup component add $component"
      rustup component add "$component" || exit 1
    else
      echo "cargo ${component/rustfmt/fmt} is missing and rustup is not available" >&2
      exit 1
    fi
  fi
done

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
step "scripts/check-compose.py" python3 scripts/check-compose.py --tollgate "${CARGO_TARGET_DIR:-target}/debug/tollgate"
step "bench target verdicts (python3 unittest)" python3 -m unittest discover -s bench/tests

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
