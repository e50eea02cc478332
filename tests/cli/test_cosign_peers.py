"""Round trips with cosign v3.1.3 (built by scripts/peers.sh), offline, keys only, no transparency log.

docker-registry 2.8 has no referrers API: both sides write and read the
referrers tag schema (``sha256-<hex>``), each keeping the other's entries.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from modelseal.attest.bundles.bundle import is_bundle
from modelseal.attest.dsse.keys import load_public_key
from modelseal.attest.socair.image_predicate import IMAGE_PREDICATE_TYPE
from modelseal.publish.referrers.attestations import read_subject
from modelseal.publish.referrers.bundles import BUNDLE_ARTIFACT_TYPE, attach_bundle
from modelseal.publish.referrers.envelopes import fetch_envelopes
from modelseal.publish.referrers.store import referrers_tag
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import parse_reference
from tests.cli.conftest import Run
from tests.cli.test_modelpack_cli import publish
from tests.publish.helpers import skopeo
from tests.publish.peers import peer, run
from tests.publish.servers import Registry


def cosign(tmp_path: Path, *argv: str, ok: bool = True) -> tuple[int, str]:
    """cosign with its home, TUF cache and (empty) key password under ``tmp_path``."""
    binary = peer("cosign")  # built by scripts/test.sh, in the real home's cache
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "TUF_ROOT": str(tmp_path / "tuf"),
        "COSIGN_PASSWORD": "",
    }
    done = run(binary, *argv, cwd=tmp_path, ok=ok, env=env)
    return done.returncode, done.stdout + done.stderr


def test_cosign_verifies_the_bundle_modelseal_attaches(cli: Run, registry: Registry, tmp_path: Path) -> None:
    assert cli("key", "gen", "--out", tmp_path / "ms", "--algorithm", "ecdsa-p256").code == 0
    image = publish(cli, registry.host, "--layers", "raw")
    target = image.removeprefix("oci://")
    attached = cli("attest", image, "--key", tmp_path / "ms.key", "--plain-http", "--attach", "--bundle")
    assert attached.code == 0, attached.err
    code, out = cosign(tmp_path, "verify-attestation", "--key", "ms.pub", "--type", IMAGE_PREDICATE_TYPE,
                       "--insecure-ignore-tlog=true", "--allow-http-registry", target)  # fmt: skip
    assert code == 0 and "The cosign claims were validated" in out
    cosign(tmp_path, "generate-key-pair")
    code, out = cosign(tmp_path, "verify-attestation", "--key", "cosign.pub", "--type", IMAGE_PREDICATE_TYPE,
                       "--insecure-ignore-tlog=true", "--allow-http-registry", target, ok=False)  # fmt: skip
    assert code != 0 and "no matching attestations" in out


def cosign_attests(cli: Run, tmp_path: Path, image: str) -> None:
    """modelseal's own envelope (for the image predicate it writes), then cosign's bundle over that
    predicate, both attached to ``image``; cosign's key pair is cosign.key and cosign.pub."""
    assert cli("key", "gen", "--out", tmp_path / "ms").code == 0
    signed = cli("attest", image, "--key", tmp_path / "ms.key", "--plain-http", "--attach",
                 "--out", tmp_path / "e.json")  # fmt: skip
    assert signed.code == 0, signed.err
    payload = json.loads(base64.b64decode(json.loads((tmp_path / "e.json").read_text())["payload"]))
    (tmp_path / "predicate.json").write_text(json.dumps(payload["predicate"]))
    cosign(tmp_path, "generate-key-pair")
    cosign(tmp_path, "attest", "--key", "cosign.key", "--type", IMAGE_PREDICATE_TYPE, "--predicate", "predicate.json",
           "--tlog-upload=false", "--use-signing-config=false", "--new-bundle-format", "--allow-http-registry", "-y",
           image.removeprefix("oci://"))  # fmt: skip


def cosigns_bundle(host: str, image: str) -> tuple[str, bytes]:
    """The referrer and bytes of the Sigstore bundle attached to ``image``, as modelseal reads them."""
    ref = parse_reference(image, allow_oci_scheme=True)
    with RegistryClient(ref, plain_http=True, retries=0) as client:
        found = fetch_envelopes(client, ref.digest or "").found
    [(referrer, data)] = [(f.referrer, f.envelope) for f in found if f.envelope and is_bundle(f.envelope)]
    return referrer, data


def tried(out: str) -> dict[str, str]:
    """``verify --image --json``'s refusal of each referrer tried."""
    return {t["referrer"]: t["message"] for t in json.loads(out)["tried"]}


def test_modelseal_admits_what_cosign_attest_attaches(cli: Run, registry: Registry, tmp_path: Path) -> None:
    """cosign attaches a bundle through the tag schema, beside modelseal's envelope; its statement is an
    in-toto Statement v0.1 (cosign v3.1.3 writes no other), which modelseal reads in a bundle attached
    to the image it judges, and nowhere else."""
    image = publish(cli, registry.host, "--layers", "raw")
    digest = image.rsplit("@", 1)[1]
    cosign_attests(cli, tmp_path, image)
    index = json.loads(
        skopeo(
            "inspect",
            "--tls-verify=false",
            "--raw",
            f"docker://{registry.host}/models/pack:{referrers_tag(digest)}",
        )
    )
    kinds = sorted(d.get("artifactType") for d in index["manifests"])
    assert kinds == sorted([BUNDLE_ARTIFACT_TYPE, "application/vnd.modelseal.dsse.envelope.v1+json"])
    referrer, bundle = cosigns_bundle(registry.host, image)
    statement = json.loads(base64.b64decode(json.loads(bundle)["dsseEnvelope"]["payload"]))
    assert statement["_type"] == "https://in-toto.io/Statement/v0.1"
    assert statement["subject"][0]["digest"] == {"sha256": digest.removeprefix("sha256:")}
    cosign_pub = load_public_key((tmp_path / "cosign.pub").read_bytes())
    asked = ("--predicate-type", IMAGE_PREDICATE_TYPE, "--plain-http")
    r = cli("verify", "--image", image, "--trusted", tmp_path / "cosign.pub", *asked)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[:4] == [
        f"verified: signed by key {cosign_pub.keyid}",
        f"  predicate {IMAGE_PREDICATE_TYPE}",
        f"  subject {digest.removeprefix('sha256:')} ({registry.host}/models/pack)",
        "  statement https://in-toto.io/Statement/v0.1 (cosign's, in a Sigstore bundle attached to the image)",
    ]
    assert lines[4].endswith(f": attached as {referrer} (referrers tag schema)")
    doc = json.loads(
        cli("verify", "--image", image, "--trusted", tmp_path / "cosign.pub", *asked, "--json").out
    )
    assert doc["admitted"] and doc["referrer"] == referrer and len(doc["files"]) == 3
    assert doc["details"]["statement"] == "https://in-toto.io/Statement/v0.1"
    # another key: cosign's bundle is refused for its signature (modelseal's envelope too)
    assert cli("key", "gen", "--out", tmp_path / "stranger").code == 0
    stranger = cli("verify", "--image", image, "--trusted", tmp_path / "stranger.pub", *asked, "--json")
    assert stranger.code == 1
    assert tried(stranger.out)[referrer].startswith("attestation does not verify: no")
    # another predicate type: refused by its type, whoever signed it
    other = cli("verify", "--image", image, "--trusted", tmp_path / "cosign.pub", "--predicate-type",
                "https://slsa.dev/provenance/v1", "--plain-http", "--json")  # fmt: skip
    assert other.code == 1
    assert tried(other.out)[referrer] == (
        f'attestation does not verify: predicate type "{IMAGE_PREDICATE_TYPE}",'
        ' want "https://slsa.dev/provenance/v1"'
    )
    # an admission policy over the image takes the same decision
    (tmp_path / "admission.yaml").write_text(
        "apiVersion: modelseal.dev/v1\nkind: AdmissionPolicy\nrequire:\n"
        f"  - name: cosigned\n    predicateType: {IMAGE_PREDICATE_TYPE}\n"
        "    trust: {keys: [{file: cosign.pub}]}\n"
    )
    admitted = cli(
        "verify", "--policy", tmp_path / "admission.yaml", "--image", image, "--plain-http", "--json"
    )
    assert admitted.code == 0, admitted.err
    [met] = json.loads(admitted.out)["requirements"]
    assert (met["outcome"], met["attestation"]) == ("met", referrer)
    # modelseal's own envelope, beside cosign's bundle, still admits
    assert cli("verify", "--image", image, "--trusted", tmp_path / "ms.pub", "--plain-http").code == 0


def test_cosigns_statement_for_another_image_is_refused(cli: Run, registry: Registry, tmp_path: Path) -> None:
    """cosign's bundle (v0.1, signed by a trusted key) copied beside another image: its subject is the
    first image's digest, not the one judged."""
    image = publish(cli, registry.host, "--layers", "raw")
    cosign_attests(cli, tmp_path, image)
    _, bundle = cosigns_bundle(registry.host, image)
    other = publish(cli, registry.host, "--layers", "raw", "--model-name", "other", tag="models/pack:v2")
    ref = parse_reference(other, allow_oci_scheme=True)
    with RegistryClient(ref, plain_http=True, retries=0) as client:
        attach_bundle(client, read_subject(client, ref)[1], bundle, IMAGE_PREDICATE_TYPE)
    r = cli("verify", "--image", other, "--trusted", tmp_path / "cosign.pub", "--predicate-type",
            IMAGE_PREDICATE_TYPE, "--plain-http")  # fmt: skip
    assert r.code == 1
    first, second = image.rsplit("@sha256:", 1)[1], other.rsplit("@sha256:", 1)[1]
    assert f"attestation is for {first}, not the artifact {second}" in r.err
