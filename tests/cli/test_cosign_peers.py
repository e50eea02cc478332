"""Round trips with cosign v3.1.3 (built by scripts/peers.sh), offline, keys only, no transparency log.

docker-registry 2.8 has no referrers API: both sides write and read the
referrers tag schema (``sha256-<hex>``), each keeping the other's entries.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from modelseal.attest.socair.image_predicate import IMAGE_PREDICATE_TYPE
from modelseal.publish.referrers.bundles import BUNDLE_ARTIFACT_TYPE
from modelseal.publish.referrers.store import referrers_tag
from tests.cli.conftest import Run
from tests.cli.test_modelpack_cli import publish
from tests.publish.helpers import skopeo
from tests.publish.peers import peer, run
from tests.publish.servers import Registry


def cosign(tmp_path: Path, *argv: str, ok: bool = True) -> tuple[int, str]:
    """cosign with its home, TUF cache and (empty) key password under ``tmp_path``."""
    binary = peer("cosign")  # built once, into the real home's cache
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


def test_modelseal_reads_what_cosign_attest_attaches(cli: Run, registry: Registry, tmp_path: Path) -> None:
    """cosign attaches a bundle through the tag schema, beside modelseal's envelope; modelseal finds it,
    checks its signature with cosign's key, and refuses its Statement: cosign v3.1.3 writes in-toto
    Statement v0.1, which modelseal's verifier does not accept (v1 only)."""
    assert cli("key", "gen", "--out", tmp_path / "ms").code == 0
    image = publish(cli, registry.host, "--layers", "raw")
    digest = image.rsplit("@", 1)[1]
    signed = cli(
        "attest",
        image,
        "--key",
        tmp_path / "ms.key",
        "--plain-http",
        "--attach",
        "--out",
        tmp_path / "e.json",
    )
    assert signed.code == 0, signed.err
    predicate = json.loads(base64.b64decode(json.loads((tmp_path / "e.json").read_text())["payload"]))[
        "predicate"
    ]
    (tmp_path / "predicate.json").write_text(json.dumps(predicate))
    cosign(tmp_path, "generate-key-pair")
    cosign(tmp_path, "attest", "--key", "cosign.key", "--type", IMAGE_PREDICATE_TYPE, "--predicate", "predicate.json",
           "--tlog-upload=false", "--use-signing-config=false", "--new-bundle-format", "--allow-http-registry", "-y",
           image.removeprefix("oci://"))  # fmt: skip
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
    r = cli("verify", "--image", image, "--trusted", tmp_path / "cosign.pub", "--plain-http", "--json")
    assert r.code == 1
    tried = {t["message"] for t in json.loads(r.out)["tried"]}
    assert (
        'attestation does not verify: statement type "https://in-toto.io/Statement/v0.1" is a legacy in-toto'
        " version; only https://in-toto.io/Statement/v1 is accepted"
    ) in tried
    # modelseal's own envelope, beside cosign's bundle, still admits
    assert cli("verify", "--image", image, "--trusted", tmp_path / "ms.pub", "--plain-http").code == 0
