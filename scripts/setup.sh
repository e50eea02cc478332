#!/usr/bin/env bash
# Create the virtual environment and install modelseal with its development tools (or, with
# MODELSEAL_EXTRAS=demo, what the demo needs). Sourced by test.sh and demo.sh; sets VENV. Safe to
# run again: pip runs only when pyproject.toml, the Python or the extra changed.
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
# The extra to install: dev (the default: tests, linters, the docs site) or demo (what
# scripts/demo.sh runs: the operator and the emulator its last step uses); a dev venv serves both.
EXTRAS=${MODELSEAL_EXTRAS:-dev}
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
# pip runs only when the venv is not what pyproject.toml and this Python make: the stamp is a hash of
# both, and the extra installed (a change of either installs again; a run with nothing new takes no pip)
stamp_file="$VENV/.modelseal-setup"
stamp=$({ cat pyproject.toml; "$VENV/bin/python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)
read -r have have_extras 2>/dev/null < "$stamp_file" || have=""
if [ -x "$VENV/bin/modelseal" ] && [ "$have" = "$stamp" ] \
    && { [ "${have_extras:-}" = "$EXTRAS" ] || [ "${have_extras:-}" = dev ]; }; then
  echo "setup: $VENV is current (pyproject.toml and Python unchanged)" >&2
else
  rm -f "$stamp_file"
  if [ "$EXTRAS" = dev ]; then
    echo "setup: installing modelseal and its development tools into $VENV (pip)" >&2
  else
    echo "setup: installing modelseal and what its $EXTRAS needs into $VENV (pip)" >&2
  fi
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[$EXTRAS]"
  echo "$stamp $EXTRAS" > "$stamp_file"
  echo "setup: ready" >&2
fi
export VENV MODELSEAL_SETUP_DONE=1
