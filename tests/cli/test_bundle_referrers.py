"""``attest --attach --bundle``: a Sigstore bundle attached as cosign attaches one, read beside envelopes."""

from __future__ import annotations

import json
from pathlib import Path

from modelseal.publish.referrers.bundles import BUNDLE_ARTIFACT_TYPE
from modelseal.publish.referrers.store import referrers_tag
from tests.cli.conftest import Run
from tests.cli.test_image_attestations import keys, publish
from tests.publish.helpers import skopeo
from tests.publish.servers import Registry


def test_a_bundle_is_attached_cosigns_way_and_verified(cli: Run, registry: Registry, tmp_path: Path) -> None:
    key, pub = keys(cli, tmp_path)
    image = publish(cli, registry.host)
    digest = image.rsplit("@", 1)[1]
    r = cli(
        "attest", image, "--key", key, "--plain-http", "--attach", "--bundle", "--out", tmp_path / "b.json"
    )
    assert r.code == 0, r.err
    bundle = json.loads((tmp_path / "b.json").read_text())
    assert bundle["mediaType"] == BUNDLE_ARTIFACT_TYPE and bundle["verificationMaterial"]["tlogEntries"] == []
    # docker-registry 2.8 has no referrers API: the tag schema lists it, with cosign's artifactType
    tag = referrers_tag(digest)
    assert f"({'referrers tag schema'}, tag {tag})" in r.err
    index = json.loads(
        skopeo("inspect", "--tls-verify=false", "--raw", f"docker://{registry.host}/models/sample:{tag}")
    )
    [entry] = index["manifests"]
    assert entry["artifactType"] == BUNDLE_ARTIFACT_TYPE
    referrer = json.loads(
        skopeo(
            "inspect",
            "--tls-verify=false",
            "--raw",
            f"docker://{registry.host}/models/sample@{entry['digest']}",
        )
    )
    assert referrer["artifactType"] == BUNDLE_ARTIFACT_TYPE and referrer["subject"]["digest"] == digest
    assert [layer["mediaType"] for layer in referrer["layers"]] == [BUNDLE_ARTIFACT_TYPE]
    assert referrer["annotations"]["dev.sigstore.bundle.content"] == "dsse-envelope"
    again = cli(
        "attest", image, "--key", key, "--plain-http", "--attach", "--bundle", "--out", tmp_path / "c.json"
    )
    assert again.code == 0 and "attached" in again.err
    verified = cli("verify", "--image", image, "--trusted", pub, "--plain-http", "--json")
    assert verified.code == 0, verified.err
    doc = json.loads(verified.out)
    assert doc["found_via"] == "referrers tag schema" and len(doc["files"]) == 3
    # beside an envelope signed by a key not trusted (a second bundle, signed later, is another referrer)
    other_key, _ = keys(cli, tmp_path, "other")
    assert cli("attest", image, "--key", other_key, "--plain-http", "--attach").code == 0
    both = cli("verify", "--image", image, "--trusted", pub, "--plain-http", "--json")
    assert both.code == 0 and json.loads(both.out)["referrer"] == entry["digest"]
    _, stranger = keys(cli, tmp_path, "stranger")
    refused = cli("verify", "--image", image, "--trusted", stranger, "--plain-http")
    # two bundles signed within one second are the same bytes, one referrer: count what the index lists
    listed = json.loads(
        skopeo("inspect", "--tls-verify=false", "--raw", f"docker://{registry.host}/models/sample:{tag}")
    )["manifests"]
    assert len(listed) in (2, 3)
    assert refused.code == 1 and f"none of the {len(listed)} attached attestations" in refused.err


def test_bundle_usage(cli: Run, tmp_path: Path) -> None:
    key, _ = keys(cli, tmp_path)
    other, _ = keys(cli, tmp_path, "o")
    (tmp_path / "f").write_text("x")
    r = cli("attest", tmp_path / "f", "--key", key, "--bundle", "--predicate-type", "https://x")
    assert (r.code, r.err) == (2, "error: --bundle is for an image (oci://...) (modelseal attest --help)\n")
    r = cli("attest", "oci://127.0.0.1:1/m@sha256:" + "a" * 64, "--key", key, "--key", other, "--bundle")
    assert (r.code, r.err) == (
        2,
        "error: --bundle: a Sigstore bundle carries one signature; give one --key (modelseal attest --help)\n",
    )
