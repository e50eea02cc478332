#!/usr/bin/env bash
# Set up everything the tests need, then run every gate: ruff, mypy --strict,
# the fixture check, the docs site (mkdocs --strict: a warning fails), and pytest (with the
# real-cluster suite, tests/cluster, on a control plane scripts/cluster.sh builds, or on
# $KUBECONFIG's cluster). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

echo "== ruff format --check"
"$VENV/bin/ruff" format --check .
echo "== ruff check"
"$VENV/bin/ruff" check .
echo "== mypy --strict"
"$VENV/bin/mypy"
echo "== fixtures are up to date"
"$VENV/bin/python" testdata/generate.py --check
echo "== docs site builds with warnings as errors"
NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict --quiet --site-dir "${TMPDIR:-/tmp}/modelseal-site"
if [ -z "${KUBECONFIG:-}" ]; then
  # tests/cluster starts a control plane of its own from these binaries (the first build takes
  # many minutes; later runs find them in the cache)
  echo "== the real-cluster suite's control plane (scripts/cluster.sh build)"
  bash scripts/cluster.sh build
fi
echo "== pytest"
"$VENV/bin/python" -m pytest "$@"
echo "== demo (README's first command) runs end to end"
bash scripts/demo.sh > "${TMPDIR:-/tmp}/modelseal-demo.log" 2>&1 || { cat "${TMPDIR:-/tmp}/modelseal-demo.log"; exit 1; }
echo "demo ok"
