#!/usr/bin/env bash
# The repository's Python virtual environment for checks that need PyPI packages: makes it when
# missing, installs the pinned requirements given that it lacks, and prints its path on stdout.
#
#   VENV=$(scripts/venv.sh 'kubernetes-validate==1.37.0' 'PyYAML==6.0.4') || exit 1
#   "$VENV/bin/python" ...
#
# The venv is .venv/ at the repository root (gitignored; TOLLGATE_VENV overrides the path). Pin
# every requirement with `==`: an installed exact version is trusted as is, so a warm venv needs
# no network, and only a missing or different version goes to PyPI (pip). When `python3 -m venv`
# fails for want of ensurepip (Debian without python3-venv), the package is installed with
# apt-get when run as root, else the install command is printed.
# Progress goes to stderr. Exit status: 0 with the venv ready, 1 otherwise.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${TOLLGATE_VENV:-$ROOT/.venv}
PY=$VENV/bin/python

log() { printf 'venv: %s\n' "$*" >&2; }

for req in "$@"; do
  if [[ $req != *==* ]]; then
    log "requirement '$req' is not pinned (NAME==VERSION)"
    exit 1
  fi
done

make_venv() {
  rm -rf "$VENV"
  python3 -m venv "$VENV" >&2
}

if [[ ! -x $PY ]] || ! "$PY" -m pip --version >/dev/null 2>&1; then
  if ! command -v python3 >/dev/null 2>&1; then
    log "python3 not found (scripts/prereqs.sh installs it)"
    exit 1
  fi
  log "creating $VENV"
  if ! make_venv; then
    # Debian splits ensurepip out of python3: python3-venv (python3.X-venv for that version).
    pkg="python$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')-venv"
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
      log "python3 -m venv failed; installing python3-venv $pkg"
      export DEBIAN_FRONTEND=noninteractive
      if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv "$pkg" >/dev/null; }; then
        log "apt-get install python3-venv $pkg failed"
        exit 1
      fi
      make_venv || {
        log "python3 -m venv $VENV still fails"
        exit 1
      }
    else
      log "python3 -m venv failed; install the venv module, then run this again:"
      log "  sudo apt-get install -y python3-venv $pkg"
      exit 1
    fi
  fi
fi

# Which requirements are missing or at another version (no network: installed metadata only).
missing=$("$PY" - "$@" <<'PY'
import sys
from importlib import metadata

for req in sys.argv[1:]:
    name, version = req.split("==", 1)
    try:
        have = metadata.version(name)
    except metadata.PackageNotFoundError:
        have = None
    if have != version:
        print(req)
PY
) || {
  log "$PY does not run"
  exit 1
}

if [[ -n $missing ]]; then
  # shellcheck disable=SC2086 # one requirement per word
  log "pip install $(echo $missing)"
  # shellcheck disable=SC2086
  if ! "$PY" -m pip install --quiet --disable-pip-version-check $missing >&2; then
    log "pip install failed (no network? PyPI is needed once, to fill $VENV)"
    exit 1
  fi
fi
printf '%s\n' "$VENV"
