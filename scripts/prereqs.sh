#!/usr/bin/env bash
# tollgate prerequisites: the system tools the build, the tests and the demo need. Called by
# scripts/test.sh, scripts/demo.sh and .ci/run (one list, one install path).
#
#   scripts/prereqs.sh [--rust-components] [COMMAND[:PACKAGE] ...]
#
# Always required: cargo (not installed here: https://rustup.rs), and the commands cmake,
# redis-server, python3, pkg-config and a C toolchain (cc and make; Debian package
# build-essential). Extra arguments add commands, e.g. `curl` or `redis-cli:redis-tools` (the
# Debian package when it differs from the command). --rust-components also requires rustfmt and
# clippy (added with `rustup component add` when missing).
#
# Missing packages are installed with apt-get when run as root on a system that has apt-get;
# otherwise the script prints what is missing and the install command, and exits 1.
# Exit status: 0 when everything is present (or was installed), 1 otherwise.
set -uo pipefail

have() { command -v "$1" >/dev/null 2>&1; }

rust_components=0
extra=()
for arg in "$@"; do
  case $arg in
    --rust-components) rust_components=1 ;;
    -h | --help)
      sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    -*)
      echo "prereqs: unknown option $arg" >&2
      exit 2
      ;;
    *) extra+=("$arg") ;;
  esac
done

if ! have cargo; then
  echo "cargo not found. Install the Rust toolchain first: https://rustup.rs" >&2
  echo "  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh" >&2
  exit 1
fi

# command -> Debian package
wanted=(cmake:cmake redis-server:redis-server python3:python3 pkg-config:pkg-config "${extra[@]}")
missing=()
for entry in "${wanted[@]}"; do
  cmd=${entry%%:*}
  pkg=${entry#*:}
  have "$cmd" || missing+=("$pkg")
done
{ have cc && have make; } || missing+=(build-essential)

if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]] && have apt-get; then
    echo "prereqs: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; then
      echo "prereqs: apt-get install ${missing[*]} failed" >&2
      exit 1
    fi
  else
    echo "Missing: ${missing[*]}" >&2
    echo "Install them, then run this again:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

if ((rust_components)); then
  for component in rustfmt clippy; do
    sub=${component/rustfmt/fmt} # `cargo fmt`, `cargo clippy`
    cargo "$sub" --version >/dev/null 2>&1 && continue
    if have rustup; then
      echo "prereqs: rustup component add $component"
      rustup component add "$component" || exit 1
    else
      echo "cargo $sub is missing and rustup is not available" >&2
      exit 1
    fi
  done
fi
exit 0
