"""``attest oci://...``, ``--attach`` and ``verify --image`` from the command line, against a real registry."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from modelseal.attest.socair.image_predicate import IMAGE_PREDICATE_TYPE
from tests.cli.conftest import Run
from tests.conftest import TESTDATA
from tests.publish.helpers import file_layer, push_crafted, skopeo
from tests.publish.servers import Registry

SAMPLE = TESTDATA / "sample-model"


def keys(cli: Run, tmp_path: Path, name: str = "ci") -> tuple[Path, Path]:
    assert cli("key", "gen", "--out", tmp_path / name).code == 0
    return tmp_path / f"{name}.key", tmp_path / f"{name}.pub"


def publish(cli: Run, host: str, tag: str = "models/sample:v1", source: Path = SAMPLE) -> str:
    r = cli(
        "publish",
        "--image",
        f"{host}/{tag}",
        "--plain-http",
        "--from",
        source,
        "--primary",
        "model.safetensors",
    )
    assert r.code == 0, r.err
    return r.out.strip()


def statement(envelope: str) -> dict[str, object]:
    doc = json.loads(envelope)
    payload: dict[str, object] = json.loads(base64.b64decode(doc["payload"]))
    return payload


def test_attest_signs_the_hashes_of_the_bytes_served_not_the_annotations(
    cli: Run, registry: Registry, tmp_path: Path
) -> None:
    """Before, the file list came from the layers' annotations: a pusher could write down the
    hash of weights someone trusts over other bytes, and the attester vouched for it."""
    key, pub = keys(cli, tmp_path)
    honest, evil = b"weights someone trusts" * 40, b"weights nobody looked at" * 40
    want = hashlib.sha256(honest).hexdigest()
    lying = push_crafted(registry.host, "m/lying:v1", [file_layer("model.gguf", evil, sha256=want)])
    r = cli("attest", lying, "--key", key, "--plain-http")
    assert (r.code, r.out) == (1, "")
    assert r.err == (
        f"error: {lying}: layer 0 (model.gguf): its annotations record {want} ({len(evil)} bytes);"
        f" its bytes are {hashlib.sha256(evil).hexdigest()} ({len(evil)} bytes)\n"
    )
    honest_image = push_crafted(registry.host, "m/honest:v1", [file_layer("model.gguf", honest)])
    r = cli("attest", honest_image, "--key", key, "--plain-http", "--out", tmp_path / "honest.dsse.json")
    assert r.code == 0, r.err
    verified = cli("verify", tmp_path / "honest.dsse.json", "--image", honest_image, "--trusted", pub,
                   "--plain-http")  # fmt: skip
    assert verified.code == 0, verified.err


def test_attest_a_tag_signs_its_digest_and_says_so(cli: Run, registry: Registry, tmp_path: Path) -> None:
    key, _ = keys(cli, tmp_path)
    image = publish(cli, registry.host)
    digest = image.rsplit("@", 1)[1]
    r = cli("attest", f"oci://{registry.host}/models/sample:v1", "--key", key, "--plain-http")
    assert r.code == 0, r.err
    assert r.err.splitlines() == [
        f"warning: {registry.host}/models/sample:v1 is a tag, resolved to {digest}; signed that digest"
        " (a tag can move: pin it with @sha256:)",
        f"attested {image} (3 file(s)) with 1 key(s)",
    ]
    doc = statement(r.out)
    assert doc["subject"] == [{"name": f"{registry.host}/models/sample", "digest": {"sha256": digest[7:]}}]
    assert doc["predicateType"] == IMAGE_PREDICATE_TYPE
    predicate = doc["predicate"]
    assert isinstance(predicate, dict)
    assert predicate["image"] == {"name": f"{registry.host}/models/sample", "digest": digest,
                                  "mediaType": "application/vnd.oci.image.manifest.v1+json"}  # fmt: skip
    assert predicate["primary"] == "model.safetensors"
    assert [(f["path"], f["size"]) for f in predicate["files"]] == [
        ("model.safetensors", 120),
        ("config.json", 57),
        ("tokenizer.json", 58),
    ]
    assert set(predicate) == {"image", "issued", "primary", "files"}


def test_attach_then_verify_the_image(cli: Run, registry: Registry, tmp_path: Path) -> None:
    key, pub = keys(cli, tmp_path)
    image = publish(cli, registry.host)
    digest = image.rsplit("@", 1)[1]
    r = cli("attest", image, "--key", key, "--plain-http", "--attach", "--out", tmp_path / "image.dsse.json")
    assert r.code == 0 and r.out == "", r.err
    attached = r.err.splitlines()[-1]
    assert attached.startswith("attached as referrer sha256:")
    assert attached.endswith(f"(referrers tag schema, tag sha256-{digest[7:]})")
    cosigner, _ = keys(cli, tmp_path, "cosigner")
    again = cli("attest", image, "--key", cosigner, "--plain-http", "--attach")
    assert again.code == 0 and "attached as referrer" in again.err
    index = json.loads(skopeo("inspect", "--raw", "--tls-verify=false",
                              f"docker://{registry.host}/models/sample:sha256-{digest[7:]}"))  # fmt: skip
    assert len(index["manifests"]) == 2
    v = cli("verify", "--image", image, "--trusted", pub, "--plain-http")
    assert v.code == 0, v.err
    lines = v.out.splitlines()
    assert lines[0].startswith("verified: signed by key ")
    assert lines[1] == f"  predicate {IMAGE_PREDICATE_TYPE}"
    assert lines[2] == f"  subject {digest[7:]} ({registry.host}/models/sample)"
    assert lines[3].startswith(f"  image {image}: attached as sha256:") and lines[3].endswith(
        "(referrers tag schema)"
    )
    assert lines[4] == (
        "  binds 3 file(s) as its manifest records them (no layer was downloaded; publish inspect --sha256 reads one):"
    )
    assert lines[5].endswith("  model.safetensors") and len(lines) == 8
    j = cli("verify", "--image", image, "--trusted", pub, "--plain-http", "--json")
    doc = json.loads(j.out)
    assert doc["admitted"] and doc["digest"] == digest and doc["found_via"] == "referrers tag schema"
    assert [f["path"] for f in doc["files"]] == ["model.safetensors", "config.json", "tokenizer.json"]
    given = cli("verify", tmp_path / "image.dsse.json", "--image", image, "--trusted", pub, "--plain-http")
    assert given.code == 0 and "the envelope given" in given.out


def test_an_attestation_of_another_image_is_refused(cli: Run, registry: Registry, tmp_path: Path) -> None:
    key, pub = keys(cli, tmp_path)
    a = publish(cli, registry.host, "models/sample:a")
    other = tmp_path / "other"
    other.mkdir()
    for f in SAMPLE.iterdir():
        (other / f.name).write_bytes(f.read_bytes() + b" ")
    b = publish(cli, registry.host, "models/sample:b", other)
    assert cli("attest", a, "--key", key, "--plain-http", "--out", tmp_path / "a.json").code == 0
    r = cli("verify", tmp_path / "a.json", "--image", b, "--trusted", pub, "--plain-http")
    assert r.code == 1
    da, db = a.rsplit("@sha256:", 1)[1], b.rsplit("@sha256:", 1)[1]
    assert (
        r.err
        == f"error: attestation not admitted by policy: attestation is for {da}, not the artifact {db}\n"
    )
    unsigned = cli("verify", "--image", b, "--trusted", pub, "--plain-http")
    assert unsigned.code == 1 and "no attestation is attached to" in unsigned.err
    warn = cli("verify", "--image", b, "--trusted", pub, "--plain-http", "--mode", "warn")
    assert warn.code == 0 and "(warn mode: not blocking)" in warn.err


def test_untrusted_keys_max_age_and_a_predicate_of_your_own(
    cli: Run, registry: Registry, tmp_path: Path
) -> None:
    key, pub = keys(cli, tmp_path)
    _, stranger = keys(cli, tmp_path, "stranger")
    image = publish(cli, registry.host)
    assert cli("attest", image, "--key", key, "--plain-http", "--attach").code == 0
    r = cli("verify", "--image", image, "--trusted", stranger, "--plain-http")
    assert r.code == 1 and "no valid signature by a trusted key" in r.err
    old = cli("verify", "--image", image, "--trusted", pub, "--plain-http", "--max-age", "1h", "--at",
              "2099-01-01T00:00:00Z")  # fmt: skip
    assert old.code == 1 and "old, over the 1h0m0s limit" in old.err
    (tmp_path / "p.json").write_text('{"scan": "clean"}')
    custom = cli("attest", image, "--key", key, "--plain-http", "--predicate-type", "https://example.com/scan/v1",
                 "--predicate", tmp_path / "p.json", "--out", tmp_path / "scan.json")  # fmt: skip
    assert custom.code == 0, custom.err
    # it signed a predicate of the user's, not a file list: the line says so (it gave the image's count)
    assert f"attested {image} (predicate https://example.com/scan/v1) with 1 key(s)" in custom.err
    assert statement((tmp_path / "scan.json").read_text())["predicate"] == {"scan": "clean"}
    default_types = cli("verify", tmp_path / "scan.json", "--image", image, "--trusted", pub, "--plain-http")
    assert default_types.code == 1 and 'predicate type "https://example.com/scan/v1"' in default_types.err
    typed = cli("verify", tmp_path / "scan.json", "--image", image, "--trusted", pub, "--plain-http",
                "--predicate-type", "https://example.com/scan/v1")  # fmt: skip
    assert typed.code == 0 and "binds" not in typed.out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["attest", "model.gguf", "--key", "k"], "files need --predicate-type"),
        (["attest", "model.gguf", "--key", "k", "--predicate-type", "u", "--attach"], "--attach is for an image"),
        (["verify", "--trusted", "k.pub"], "give the envelope to verify, or --image"),
        (["verify", "--image", "oci://registry.example/m", "--trusted", "k.pub"], "give a digest (@sha256:...) or a tag"),
        (["verify", "x.json", "--image", "oci://registry.example/m:v1", "--sha256", "a" * 64, "--trusted", "k.pub"],
         "--sha256 and --image exclude each other: give one of them (modelseal verify --help)"),
    ],
)  # fmt: skip
def test_usage_errors(cli: Run, argv: list[str], message: str) -> None:
    r = cli(*argv)
    assert r.code == 2 and message in r.err


def test_attest_two_images_or_an_image_and_files_is_refused(cli: Run, tmp_path: Path) -> None:
    key, _ = keys(cli, tmp_path)
    r = cli("attest", "oci://registry.example/m:v1", "model.gguf", "--key", key)
    assert r.code == 2 and "attest one image at a time" in r.err


def test_publish_sign_key_signs_and_attaches_what_it_pushed(
    cli: Run, registry: Registry, tmp_path: Path
) -> None:
    key, pub = keys(cli, tmp_path)
    r = cli("publish", "--image", f"{registry.host}/models/signed:v1", "--plain-http", "--from", SAMPLE,
            "--primary", "model.safetensors", "--sign-key", key, "--json")  # fmt: skip
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["attestation"]["via"] == "referrers tag schema"
    assert doc["attestation"]["predicateType"] == IMAGE_PREDICATE_TYPE
    assert r.err.startswith(f"attached as referrer {doc['attestation']['referrer']}")
    v = cli("verify", "--image", doc["image"], "--trusted", pub, "--plain-http", "--json")
    assert v.code == 0, v.err
    verdict = json.loads(v.out)
    assert verdict["referrer"] == doc["attestation"]["referrer"]
    assert [(f["path"], f["sha256"], f["size"]) for f in verdict["files"]] == [
        (f["path"], f["sha256"], f["size"]) for f in doc["files"]
    ]


def test_publish_signs_with_a_signer_uri_and_writes_the_envelope_it_attached(
    cli: Run, registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI: the key from a secret in the environment (never on disk); the envelope for a ConfigMap.

    Before, --sign-key took only a key file (`envvar:` was read as a path), and the
    envelope it attached could be had from the registry only.
    """
    key, pub = keys(cli, tmp_path)
    monkeypatch.setenv("MODELSEAL_SIGNING_KEY", key.read_text())
    key.unlink()
    envelope = tmp_path / "out" / "image.dsse.json"
    envelope.parent.mkdir()
    r = cli("publish", "--image", f"{registry.host}/models/ci:v1", "--plain-http", "--from", SAMPLE,
            "--primary", "model.safetensors", "--sign-key", "envvar:MODELSEAL_SIGNING_KEY", "--attestation-file", envelope,
            "--result-file", tmp_path / "out" / "publish.json")  # fmt: skip
    assert r.code == 0, r.err
    image = r.out.strip()
    doc = json.loads((tmp_path / "out" / "publish.json").read_text())
    assert doc["image"] == image and doc["attestation"]["predicateType"] == IMAGE_PREDICATE_TYPE
    subject = statement(envelope.read_text())["subject"]
    assert subject == [{"name": f"{registry.host}/models/ci", "digest": {"sha256": doc["digest"][7:]}}]
    # the file is the envelope attached: verifying it against the image finds the same referrer
    given = cli("verify", envelope, "--image", image, "--trusted", pub, "--plain-http")
    assert given.code == 0, given.err
    attached = cli("verify", "--image", image, "--trusted", pub, "--plain-http", "--json")
    assert attached.code == 0 and json.loads(attached.out)["referrer"] == doc["attestation"]["referrer"]


@pytest.mark.parametrize("flag", ["--attestation-file", "--result-file"])
def test_an_output_path_that_cannot_be_written_stops_publish_before_anything_is_pushed(
    cli: Run, registry: Registry, tmp_path: Path, flag: str
) -> None:
    """Before, the image was pushed and tagged, and only then did the write fail (unsigned for
    --attestation-file: the signature was never attached)."""
    key, _ = keys(cli, tmp_path)
    for target in (tmp_path, tmp_path / "no" / "such" / "folder.json"):
        r = cli("publish", "--image", f"{registry.host}/models/unwritten:v1", "--plain-http", "--from", SAMPLE,
                "--primary", "model.safetensors", "--sign-key", key, flag, target)  # fmt: skip
        assert r.code == 3 and r.err == f"error: {flag} {target}: not a file in an existing folder\n"
    assert registry.tags("models/unwritten") == []


def test_attestation_file_goes_with_sign_key(cli: Run, tmp_path: Path) -> None:
    r = cli("publish", "--image", "127.0.0.1:1/m:v1", "--from", SAMPLE, "--attestation-file", tmp_path / "e")
    assert r.code == 2 and "--attestation-file goes with --sign-key" in r.err


def test_publish_sign_key_takes_the_key_from_the_environment(
    cli: Run, registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prefetchOCI Job's publisher gets its key by secretKeyRef, as ``--sign-key envvar:NAME``."""
    key, pub = keys(cli, tmp_path)
    monkeypatch.setenv("MODELSEAL_SIGNING_KEY", key.read_text())
    r = cli("publish", "--image", f"{registry.host}/models/signed:v1", "--plain-http", "--from", SAMPLE,
            "--primary", "model.safetensors", "--sign-key", "envvar:MODELSEAL_SIGNING_KEY", "--json")  # fmt: skip
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert cli("verify", "--image", doc["image"], "--trusted", pub, "--plain-http").code == 0
    monkeypatch.delenv("MODELSEAL_SIGNING_KEY")
    r = cli("publish", "--image", f"{registry.host}/models/unsigned:v1", "--plain-http", "--from", SAMPLE,
            "--primary", "model.safetensors", "--sign-key", "envvar:MODELSEAL_SIGNING_KEY")  # fmt: skip
    assert (r.code, r.err) == (
        1,
        "error: signer envvar:MODELSEAL_SIGNING_KEY: environment variable MODELSEAL_SIGNING_KEY is not set\n",
    )
    assert registry.tags("models/unsigned") == []


def test_publish_with_an_unusable_sign_key_pushes_nothing(
    cli: Run, registry: Registry, tmp_path: Path
) -> None:
    (tmp_path / "bad.key").write_text("not a key")
    (tmp_path / "bad.key").chmod(0o600)
    r = cli("publish", "--image", f"{registry.host}/models/unsigned:v1", "--plain-http", "--from", SAMPLE,
            "--primary", "model.safetensors", "--sign-key", tmp_path / "bad.key")  # fmt: skip
    assert r.code == 1 and r.err.startswith("error: ") and len(r.err.splitlines()) == 1
    assert registry.tags("models/unsigned") == []


def test_a_policy_file_decides_whether_the_image_predicate_is_admitted(
    cli: Run, registry: Registry, tmp_path: Path
) -> None:
    key, pub = keys(cli, tmp_path)
    image = publish(cli, registry.host)
    assert cli("attest", image, "--key", key, "--plain-http", "--attach").code == 0
    for types, code in (("[https://socair.ai/attestation/v1]", 1), (f"[{IMAGE_PREDICATE_TYPE}]", 0)):
        policy = tmp_path / "policy.yaml"
        policy.write_text(
            f"apiVersion: modelseal.dev/v1\nkind: TrustPolicy\nkeys:\n  - file: {pub}\npredicateTypes: {types}\n"
        )
        r = cli("verify", "--image", image, "--policy", policy, "--plain-http")
        assert r.code == code, r.err


def test_an_image_that_cannot_be_read_is_a_refusal_in_json_too(
    cli: Run, registry: Registry, tmp_path: Path
) -> None:
    """A CI gate reading `verify --image --json` gets a verdict, not an empty file, plus the error line.

    Before, an image that could not be read (gone, or bytes not matching their digest) printed
    only the error line: a gate reading the JSON found nothing to read.
    """
    _, pub = keys(cli, tmp_path)
    missing = f"oci://{registry.host}/models/absent@sha256:{'a' * 64}"
    r = cli("verify", "--image", missing, "--trusted", pub, "--plain-http", "--json")
    assert r.code == 1 and r.err.startswith("error: ") and len(r.err.splitlines()) == 1
    doc = json.loads(r.out)
    assert doc["admitted"] is False and doc["reason"] == "input_unreadable"
    assert doc["message"] == r.err.removeprefix("error: ").rstrip("\n")
    assert doc["image"] == missing and doc["digest"] == "sha256:" + "a" * 64 and doc["files"] == []
    warn = cli("verify", "--image", f"oci://{registry.host}/models/absent:v1", "--trusted", pub, "--plain-http",
               "--json", "--mode", "warn")  # fmt: skip
    assert warn.code == 1, "an image nobody can read is not a warning"  # as before: only verdicts warn
    assert json.loads(warn.out)["mode"] == "warn" and json.loads(warn.out)["digest"] is None
    text = cli("verify", "--image", missing, "--trusted", pub, "--plain-http")
    assert text.code == 1 and text.out == ""


def test_verify_image_says_how_many_attestations_it_skipped(
    cli: Run, registry: Registry, tmp_path: Path
) -> None:
    """Forty untrusted attestations attached before the trusted one: it is read first and admits, and the
    output says how many of those listed were skipped (text and --json); refused, the error says it too."""
    from modelseal.attest.signing.private_keys import generate_key
    from modelseal.attest.signing.sign import sign_payload
    from modelseal.publish.referrers.attestations import read_subject
    from modelseal.publish.registry.client import RegistryClient
    from modelseal.publish.registry.reference import parse_reference
    from tests.publish.helpers import push_artifact, set_referrers_index

    key, pub = keys(cli, tmp_path)
    image = publish(cli, registry.host)
    other = generate_key("ed25519")
    with RegistryClient(parse_reference(image, allow_oci_scheme=True), plain_http=True, retries=0) as c:
        _, subject = read_subject(c, parse_reference(image, allow_oci_scheme=True))
        junk = [push_artifact(c, subject, sign_payload(f'{{"junk": {n}}}'.encode(), [other]).to_json())
                for n in range(40)]  # fmt: skip
        set_referrers_index(c, subject.digest, junk)
    assert cli("attest", image, "--key", key, "--plain-http", "--attach").code == 0
    v = cli("verify", "--image", image, "--trusted", pub, "--plain-http")
    assert v.code == 0, v.err
    assert "  9 of 41 attached attestation(s) skipped: over the caps" in v.out.splitlines()
    doc = json.loads(cli("verify", "--image", image, "--trusted", pub, "--plain-http", "--json").out)
    assert doc["admitted"] and doc["listed"] == 41 and doc["skipped"] == 9 and doc["tried"] == []
    _, stranger = keys(cli, tmp_path, "stranger")
    refused = cli("verify", "--image", image, "--trusted", stranger, "--plain-http", "--json")
    said = json.loads(refused.out)
    assert refused.code == 1 and said["skipped"] == 9
    assert said["message"].startswith(
        "none of the 32 attached attestations read (41 listed, 9 skipped: over the caps"
    )
