#!/usr/bin/env bash
# Set up everything the tests need, then run every gate: ruff, mypy --strict, pytest.
# Usage: scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${MODELSEAL_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[dev]'

echo "== ruff format --check"
"$VENV/bin/ruff" format --check .
echo "== ruff check"
"$VENV/bin/ruff" check .
echo "== mypy --strict"
"$VENV/bin/mypy"
echo "== fixtures are up to date"
"$VENV/bin/python" testdata/generate.py --check
echo "== pytest"
"$VENV/bin/python" -m pytest "$@"
