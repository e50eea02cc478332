#!/usr/bin/env bash
# The main job end to end on bundled sample data, with no network and no cluster:
# make a signing key, sign the sample model's Socair report, verify it against the
# model (admitted, exit 0), tamper with the model, verify again (refused, exit 1).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh >/dev/null
ms() { printf "$ modelseal"; printf " %q" "$@"; echo; "$VENV/bin/modelseal" "$@"; }

out=demo-out
rm -rf "$out" && mkdir -p "$out"
cp testdata/reports/sample.report.json "$out/report.json"
cp -r testdata/sample-model "$out/model"

echo "== 1. a signing key for the intake pipeline"
ms key gen --out "$out/intake" --issuer "demo intake"
echo
echo "== 2. sign the model's Socair report"
ms sign --key "$out/intake.key" --report "$out/report.json"
echo
echo "== 3. verify the attestation against the model file"
ms verify "$out/report.dsse.json" --trusted "$out/intake.pub" --artifact "$out/model/model.safetensors"
echo "exit code: $?"
echo
echo "== 4. tamper with one byte of the weights and verify again"
printf '\x01' | dd of="$out/model/model.safetensors" bs=1 seek=100 conv=notrunc status=none
set +e
ms verify "$out/report.dsse.json" --trusted "$out/intake.pub" --artifact "$out/model/model.safetensors"
code=$?
set -e
echo "exit code: $code"
if [ "$code" -ne 1 ]; then
  echo "demo failed: the tampered model was not refused" >&2
  exit 1
fi
echo
echo "== 5. the same check as JSON, in warn mode (reports, does not block)"
ms verify "$out/report.dsse.json" --trusted "$out/intake.pub" --artifact "$out/model/model.safetensors" --mode warn --json
echo
echo "demo complete: the untouched model was admitted, the tampered one refused."
