#!/usr/bin/env bash
# Renders demo/gateway.demo.yaml.tmpl for both demo instances, as scripts/demo.sh does (with fixed
# example ports and the TLS certificate of scripts/demo-cert.sh: needs openssl), and validates each
# with `tollgate check`: a config change the template missed fails here, in scripts/test.sh, instead
# of in the demo.
#
#   scripts/check-demo-config.sh [TOLLGATE_BIN]    (default: ${CARGO_TARGET_DIR:-target}/debug/tollgate)
#
# Exit status 0 when both render and pass, 1 otherwise.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${1:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/tollgate}
if [[ ! -x $BIN ]]; then
  echo "$BIN not built (cargo build --bins first)" >&2
  exit 1
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-demo-config.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cp "$ROOT/demo/jwt-hs256.secret" "$WORK/jwt-hs256.secret"
"$ROOT/scripts/demo-cert.sh" "$WORK" # the TLS listener's certificate: `check` reads it

# n, listen port, TLS listen port, admin port, edge burst: the two instances of scripts/demo.sh
for instance in "1 18080 18443 19090 200" "2 18081 18444 19091 20"; do
  read -r n gw tls adm burst <<<"$instance"
  cfg=$WORK/gw$n.yaml
  "$ROOT/scripts/render-template.sh" "$ROOT/demo/gateway.demo.yaml.tmpl" N="$n" GW_PORT="$gw" TLS_PORT="$tls" \
    ADMIN_PORT="$adm" EDGE_BURST="$burst" WORK="$WORK" REDIS_TARGET="url: \"redis://127.0.0.1:16379/0\"" REDIS_TIMEOUT_MS=50 ECHO1_PORT=19001 \
    ECHO2_PORT=19002 >"$cfg"
  if ! out=$("$BIN" check -c "$cfg" 2>&1); then
    echo "demo/gateway.demo.yaml.tmpl (instance $n) fails tollgate check:" >&2
    printf '%s\n' "$out" | sed 's/^/  /' >&2
    exit 1
  fi
  echo "demo/gateway.demo.yaml.tmpl instance $n: tollgate check ok"
done
