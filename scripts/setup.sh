#!/usr/bin/env bash
# Create the virtual environment and install modelseal with its development tools.
# Sourced by test.sh and demo.sh; sets VENV. Safe to run again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The real parts the tests and the demo use: an OCI registry and two independent
# image tools (Debian's packages), and a software PKCS#11 token for hsm: signers.
missing=()
for tool in docker-registry skopeo umoci; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
command -v softhsm2-util >/dev/null 2>&1 || missing+=(softhsm2)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing ${missing[*]} (apt)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  else
    echo "missing ${missing[*]}: install them (apt-get install ${missing[*]}) or run as root" >&2
    exit 1
  fi
fi

VENV=${MODELSEAL_VENV:-$PWD/.venv}
if [ "${MODELSEAL_SETUP_DONE:-}" = 1 ] && [ -x "$VENV/bin/modelseal" ]; then
  export VENV MODELSEAL_SETUP_DONE=1
  return 0 2>/dev/null || exit 0
fi
# Progress goes to stderr, so a first run (a minute or two of pip) does not look hung,
# while the callers' stdout (the demo's transcript) stays as it was.
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating the virtual environment $VENV (first run: about a minute or two)" >&2
  python3 -m venv "$VENV"
fi
echo "setup: installing modelseal and its development tools into $VENV (pip)" >&2
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[dev]'
echo "setup: ready" >&2
export VENV MODELSEAL_SETUP_DONE=1
