#!/usr/bin/env bash
# Fills the ${NAME} placeholders of a template and prints the result (plain bash, no envsubst).
#
#   scripts/render-template.sh TEMPLATE NAME=VALUE... > OUT
#
# Every placeholder must get a value and every NAME must occur in the template: a placeholder left
# over or a NAME the template does not have is an error (exit 1, nothing printed), so a template and
# its caller cannot drift apart silently. Used by scripts/demo.sh and scripts/check-demo-config.sh
# with demo/gateway.demo.yaml.tmpl.
set -euo pipefail

if (($# < 1)); then
  echo "usage: $0 TEMPLATE NAME=VALUE..." >&2
  exit 2
fi
template=$1
shift
text=$(<"$template")
for pair in "$@"; do
  name=${pair%%=*}
  value=${pair#*=}
  if [[ $pair != *=* || ! $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
    echo "$0: expected NAME=VALUE, got '$pair'" >&2
    exit 2
  fi
  if [[ $text != *"\${$name}"* ]]; then
    echo "$template: no placeholder \${$name}" >&2
    exit 1
  fi
  text=${text//"\${$name}"/"$value"}
done
if [[ $text =~ \$\{[A-Za-z_][A-Za-z0-9_]*\} ]]; then
  echo "$template: no value given for ${BASH_REMATCH[0]}" >&2
  exit 1
fi
printf '%s\n' "$text"
