#!/usr/bin/env bash
# The CI recipe's steps (docs/ci.md), run on this machine against a throwaway plain-HTTP
# registry on loopback: make the key pair, publish and sign, verify as a consumer would.
# Only the registry differs from CI: --plain-http, and no login (the local one has none).
#
#     bash examples/ci/try-locally.sh        # exit 0 when the image verifies
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/setup.sh >/dev/null
source scripts/local_registry.sh
PATH="$VENV/bin:$PATH"
work=$(mktemp -d)
start_local_registry "$work/registry"
trap 'kill "$registry_pid" 2>/dev/null || true; rm -rf "$work"' EXIT

echo "== once: the key pair (ci.key is the CI's secret, ci.pub what consumers trust)"
modelseal key gen --out "$work/ci" --issuer "model CI"
export MODELSEAL_SIGNING_KEY MODELSEAL_PUBLIC_KEY
MODELSEAL_SIGNING_KEY=$(cat "$work/ci.key")   # as the CI's secret holds it
MODELSEAL_PUBLIC_KEY=$(cat "$work/ci.pub")    # as the CI's variable holds it

echo "== step 2: publish, hash and sign"
image=$(modelseal publish --image "127.0.0.1:$registry_port/models/model:local" --plain-http \
  --from testdata/sample-model --primary model.safetensors \
  --sign-key envvar:MODELSEAL_SIGNING_KEY \
  --attestation-file "$work/image.dsse.json" --result-file "$work/publish.json")
echo "$image"

echo "== step 3: verify from the registry, trusting the public key variable's content"
printf '%s\n' "$MODELSEAL_PUBLIC_KEY" > "$work/modelseal.pub"
modelseal verify --image "$image" --plain-http --trusted "$work/modelseal.pub"

echo "== step 4: the next stage verifies the handed-on reference and keeps the verdict"
modelseal verify --image "$image" --plain-http --trusted "$work/modelseal.pub" --json > "$work/verdict.json"
python3 -c 'import json, sys; v = json.load(open(sys.argv[1])); print("admitted:", v["admitted"])' "$work/verdict.json"
