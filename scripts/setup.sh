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
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[dev]'
export VENV MODELSEAL_SETUP_DONE=1
