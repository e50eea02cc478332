#!/usr/bin/env bash
# Create the virtual environment and install modelseal with its development tools.
# Sourced by test.sh and demo.sh; sets VENV. Safe to run again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VENV=${MODELSEAL_VENV:-$PWD/.venv}
if [ "${MODELSEAL_SETUP_DONE:-}" = 1 ] && [ -x "$VENV/bin/modelseal" ]; then
  export VENV MODELSEAL_SETUP_DONE=1
  return 0 2>/dev/null || exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[dev]'
export VENV MODELSEAL_SETUP_DONE=1
