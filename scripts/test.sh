#!/usr/bin/env bash
# Set up everything the tests need, then run every gate: ruff, mypy --strict,
# the fixture check, the docs site (mkdocs --strict: a warning fails), the Go builds (the control
# plane, LLMKube's manager and the peers), and pytest (with the real-cluster suite, tests/cluster,
# on a control plane scripts/cluster.sh builds, or on $KUBECONFIG's cluster). Extra arguments go
# to pytest. MODELSEAL_LLMKUBE_SOURCE and MODELSEAL_PEER_SOURCES name the source archives of the
# Go modules the proxy refuses (see scripts/cluster.sh and scripts/peers.sh).
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
# Every Go program the tests run is built here, once, and cached outside the repository: no test
# builds anything. On a new machine this is the longest step (tens of minutes on two cores).
echo "== Go builds: the control plane and LLMKube's manager (scripts/cluster.sh build), the peers (scripts/peers.sh all)"
go_begun=$SECONDS
if [ -z "${KUBECONFIG:-}" ] || [ -z "${MODELSEAL_STANDALONE_KUBECONFIG:-}" ]; then
  # tests/cluster starts control planes of its own from these binaries: one with LLMKube's
  # manager (unless $KUBECONFIG names a cluster running LLMKube), one of modelseal alone (unless
  # $MODELSEAL_STANDALONE_KUBECONFIG names a cluster without it)
  bash scripts/cluster.sh build
fi
bash scripts/peers.sh all > /dev/null
echo "Go builds ready in $((SECONDS - go_begun)) s"
echo "== pytest"
"$VENV/bin/python" -m pytest "$@"
echo "== demo (README's first command) runs end to end"
bash scripts/demo.sh > "${TMPDIR:-/tmp}/modelseal-demo.log" 2>&1 || { cat "${TMPDIR:-/tmp}/modelseal-demo.log"; exit 1; }
echo "demo ok"
