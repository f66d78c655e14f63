#!/usr/bin/env bash
# Makes the demo's self-signed TLS certificate (EC P-256, 2 days, CN and DNS SAN gw.demo) for the
# TLS + h2 listener of demo/gateway.demo.yaml.tmpl. Called by scripts/demo.sh,
# scripts/demo-cluster.sh and scripts/check-demo-config.sh, each with its temporary directory.
#
#   scripts/demo-cert.sh DIR     writes DIR/gw.crt (PEM certificate) and DIR/gw.key (PEM PKCS#8 key)
#
# Needs openssl. Exit status 0 on success, 1 (with openssl's message) otherwise.
set -euo pipefail

if (($# != 1)) || [[ ! -d $1 ]]; then
  echo "usage: $0 DIR (an existing directory)" >&2
  exit 2
fi
if ! out=$(openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=gw.demo -addext subjectAltName=DNS:gw.demo \
  -keyout "$1/gw.key" -out "$1/gw.crt" 2>&1); then
  echo "$0: openssl could not make the demo certificate:" >&2
  printf '%s\n' "$out" >&2
  exit 1
fi
