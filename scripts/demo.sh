#!/usr/bin/env bash
# The main job end to end on bundled sample data, with no network and no cluster:
# make a signing key, sign the sample model's Socair report, verify it against the
# model (admitted, exit 0), tamper with the model, verify again (refused, exit 1);
# then publish the admitted model as an ImageVolume image to a registry started on
# loopback, read it back, unpack it with skopeo and umoci, and bind the attestation
# to the digest the image records.
set -euo pipefail
cd "$(dirname "$0")/.."
# what the demo needs, not the development tools (a venv made by scripts/test.sh serves too)
MODELSEAL_EXTRAS=${MODELSEAL_EXTRAS:-demo}
source scripts/setup.sh >/dev/null
ms() { printf "$ modelseal"; printf " %q" "$@"; echo; "$VENV/bin/modelseal" "$@"; }

out=demo-out
rm -rf "$out" && mkdir -p "$out"
cp testdata/reports/sample.report.json "$out/report.json"
cp -r testdata/sample-model "$out/model"
cp -r testdata/sample-model "$out/admitted-model"

# A throwaway OCI registry on a free loopback port, stopped when the demo ends.
source scripts/local_registry.sh
start_local_registry "$out/registry"
port=$registry_port

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
# the refusal goes where its exit code goes: a transcript captured from stdout keeps both
ms verify "$out/report.dsse.json" --trusted "$out/intake.pub" --artifact "$out/model/model.safetensors" 2>&1
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
echo "== 6. publish the admitted model as an ImageVolume image (a registry on loopback)"
# tee to a file of its own: `tee /dev/stderr` would reopen (and truncate) a log the demo is redirected to
ms publish --image "127.0.0.1:$port/models/sample:v1" --plain-http --from "$out/admitted-model" \
  --primary model.safetensors --source "file://testdata/sample-model" 2>&1 | tee "$out/publish.out"
image=$(tail -n 1 "$out/publish.out")
echo
echo "== 7. read the image back from its manifest"
ms publish inspect "$image" --plain-http
echo
echo "== 8. an independent check: skopeo copies it, umoci unpacks it, the files sit at the root"
skopeo copy -q --preserve-digests --src-tls-verify=false "docker://${image#oci://}" "oci:$out/layout:v1"
umoci unpack --image "$out/layout:v1" "$out/bundle" >/dev/null
(cd "$out/bundle/rootfs" && ls -l && sha256sum model.safetensors)
echo
echo "== 9. the attestation admits the digest the image records for its primary file"
primary_sha=$("$VENV/bin/modelseal" publish inspect "$image" --plain-http --json \
  | "$VENV/bin/python" -c 'import json,sys; d=json.load(sys.stdin); print(d["files"][0]["sha256"])')
ms verify "$out/report.dsse.json" --trusted "$out/intake.pub" --sha256 "$primary_sha"
echo
echo "== 10. the operator: Models gated on their attestations, and one published by prefetchOCI (an emulated API server, no cluster)"
"$VENV/bin/python" scripts/operator_demo.py --registry "127.0.0.1:$port"
echo
echo "demo complete: the untouched model was admitted, the tampered one refused, the admitted"
echo "model is published as $image, and the operator kept unattested Models from Ready and"
echo "published a Model's files before letting it be Ready."
