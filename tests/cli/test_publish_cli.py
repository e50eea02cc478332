"""``modelseal publish`` and ``publish inspect`` from the command line, against a real registry."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from modelseal.cli.result_file import TERMINATION_LOG_LIMIT, compact
from tests.cli.conftest import Run
from tests.conftest import TESTDATA
from tests.publish.fixtures import USERS
from tests.publish.helpers import docker_config, file_layer, push_crafted, skopeo
from tests.publish.servers import Registry

SAMPLE = TESTDATA / "sample-model"


def test_publish_prints_the_pinned_reference(cli: Run, registry: Registry) -> None:
    r = cli("publish", "--image", f"{registry.host}/models/sample:v1", "--plain-http", "--from", SAMPLE,
            "--primary", "model.safetensors", "--source", "https://example.com/sample")  # fmt: skip
    assert r.code == 0, r.err
    digest = json.loads(
        skopeo("inspect", "--tls-verify=false", f"docker://{registry.host}/models/sample:v1")
    )["Digest"]
    assert r.out == f"oci://{registry.host}/models/sample@{digest}\n"
    assert (
        r.err
        == f"published 3 file(s), 235 B (3 uploaded, 0 already there) as {registry.host}/models/sample:v1\n"
    )
    again = cli("publish", "--image", f"{registry.host}/models/sample:v1", "--plain-http", "--from", SAMPLE,
                "--primary", "model.safetensors", "--source", "https://example.com/sample")  # fmt: skip
    assert again.out == r.out and "(0 uploaded, 3 already there)" in again.err


def test_json_and_result_file(cli: Run, registry: Registry, tmp_path: Path) -> None:
    result_file = tmp_path / "result.json"
    model = SAMPLE / "model.safetensors"
    r = cli("publish", "--image", f"{registry.host}/m/x:v1", "--plain-http", "--json", "--result-file", result_file,
            model, f"extra/config.json={SAMPLE / 'config.json'}")  # fmt: skip
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["image"].startswith(f"oci://{registry.host}/m/x@sha256:") and doc["tag"] == "v1"
    assert [f["path"] for f in doc["files"]] == ["model.safetensors", "extra/config.json"]
    assert doc["files"][0]["sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert doc["fingerprint"].startswith("sha256:")
    assert json.loads(result_file.read_text()) == doc
    inspected = json.loads(cli("publish", "inspect", doc["image"], "--plain-http", "--json").out)
    assert inspected["digest"] == doc["digest"] and inspected["primary"] == "model.safetensors"
    assert [(f["path"], f["sha256"], f["size"]) for f in inspected["files"]] == [
        (f["path"], f["sha256"], f["size"]) for f in doc["files"]
    ]


def test_inspect_text(cli: Run, registry: Registry) -> None:
    published = cli(
        "publish", "--image", f"{registry.host}/m/y:v1", "--plain-http", SAMPLE / "model.safetensors"
    )
    r = cli("publish", "inspect", published.out.strip(), "--plain-http")
    assert r.code == 0
    sha = hashlib.sha256((SAMPLE / "model.safetensors").read_bytes()).hexdigest()
    assert r.out.splitlines() == [
        published.out.strip(),
        "  primary  model.safetensors",
        "  FILE                     SIZE  SHA-256",
        f"  model.safetensors       120 B  {sha}",
    ]
    assert (
        cli("publish", "inspect", f"oci://{registry.host}/m/y:v1", "--plain-http").out.splitlines()[0]
        == published.out.strip()
    )
    missing = cli("publish", "inspect", f"oci://{registry.host}/m/none:v1", "--plain-http")
    assert missing.code == 3 and missing.err == f"error: {registry.host}/m/none:v1: no such image\n"


def test_termination_message_stays_under_4096_bytes() -> None:
    doc: dict[str, Any] = {"image": "oci://r/m@sha256:" + "a" * 64, "digest": "sha256:" + "a" * 64, "tag": "v1", "source": None,
           "fingerprint": "sha256:" + "b" * 64,
           "files": [{"path": f"shard-{i:05d}-of-00064.safetensors", "size": 2**33, "sha256": "c" * 64,
                      "layer": "sha256:" + "d" * 64, "uploaded": True} for i in range(64)]}  # fmt: skip
    data = compact(doc)
    assert len(data) <= TERMINATION_LOG_LIMIT
    slim = json.loads(data)
    assert slim["truncated"] is True and slim["image"] == doc["image"]
    assert slim["files"] == [f"shard-{i:05d}-of-00064.safetensors" for i in range(64)]
    doc["files"] = doc["files"] * 3
    assert json.loads(compact(doc)) == {
        **{k: doc[k] for k in ("image", "digest", "tag", "fingerprint")},
        "truncated": True,
    }


def test_docker_config_credentials(cli: Run, basic_registry: Registry, tmp_path: Path) -> None:
    config = docker_config(tmp_path / "config.json", basic_registry.host, "alice", USERS["alice"])
    image = f"{basic_registry.host}/m/auth:v1"
    ok = cli("publish", "--image", image, "--plain-http", "--docker-config", config, SAMPLE / "config.json")
    assert ok.code == 0, ok.err
    bad = docker_config(tmp_path / "bad.json", basic_registry.host, "alice", "wrong-password")
    r = cli("publish", "--image", image, "--plain-http", "--docker-config", bad, SAMPLE / "config.json")
    assert r.code == 3 and "refused the credentials" in r.err and "wrong-password" not in r.err
    other = docker_config(tmp_path / "other.json", "elsewhere.example.com", "alice", USERS["alice"])
    r = cli("publish", "--image", image, "--plain-http", "--docker-config", other, SAMPLE / "config.json")
    assert r.code == 3 and "requires credentials, and none are configured for it" in r.err


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--image", "127.0.0.1:1/m", "x"], 2, "give a tag to publish to"),
        (["--image", "m:v1", "x"], 2, "name the registry host first"),
        (["--image", "127.0.0.1:1/m:v1"], 2, "give the files to publish, or --from DIR"),
        (["--image", "127.0.0.1:1/m:v1", "--chunk-size-mib", "0", "x"], 2, "--chunk-size-mib must be between"),
        (["--image", "127.0.0.1:1/m:v1", "../x=a"], 1, "not a normalised relative path"),
        (["--image", "127.0.0.1:1/m:v1", "/abs=a"], 1, "is absolute"),
        (["--image", "127.0.0.1:1/m:v1", "a=x", "a=y"], 1, "is given twice"),
        (["--image", "127.0.0.1:1/m:v1", "--primary", "nope", "a=x"], 2, "--primary 'nope' is not among the files to publish ('a')"),
        (["--image", "127.0.0.1:1/m:v1", "--from", str(SAMPLE)], 2, "holds 3 files: name the primary one"),
        (["--image", "127.0.0.1:1/m:v1", "--from", str(SAMPLE), "a=x"], 2, "give files or --from, not both"),
        (["--image", "127.0.0.1:1/m:v1", "--platform", "amd64", "a=x"], 2, "--platform: platform 'amd64': want os/architecture"),
        (["--image", "127.0.0.1:1/m:v1", "--docker-config", "/nonexistent/c.json", str(SAMPLE / "config.json")], 1,
         "docker config /nonexistent/c.json: no such file"),
        (["--image", "127.0.0.1:1/m:v1", "--plain-http", str(SAMPLE / "missing.bin")], 1, "No such file"),
        (["--image", "127.0.0.1:1/m:v1", "--plain-http", str(SAMPLE / "config.json")], 3,
         "registry 127.0.0.1:1: connection refused; is a registry listening there?"),
    ],
)  # fmt: skip
def test_publish_errors(
    cli: Run, args: list[str], code: int, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("modelseal.publish.registry.client.RegistryClient.retry_pause", _no_wait)
    r = cli("publish", *args)
    assert r.code == code, r.err
    assert r.err.startswith("error: ") and message in r.err.splitlines()[0]


def _no_wait(self: object, attempt: int, what: str, why: str, response: object = None) -> int:
    from modelseal.errors import RegistryError

    if attempt >= 1:
        raise RegistryError(f"{what}: 127.0.0.1:1 failed {attempt + 1} times, last: {why}")
    return attempt + 1


def test_inspect_errors(cli: Run) -> None:
    r = cli("publish", "inspect", "oci://127.0.0.1:1/m", "--plain-http")
    assert r.code == 2 and "give a digest" in r.err
    r = cli("publish", "inspect", "https://x/y:z")
    assert r.code == 2 and "only oci:// references" in r.err


def test_the_sample_model_always_makes_the_same_image(cli: Run, registry: Registry) -> None:
    """The README's example digest: same files, same options, same manifest on any machine."""
    r = cli("publish", "--image", f"{registry.host}/models/sample:v1", "--plain-http", "--from", SAMPLE,
            "--primary", "model.safetensors", "--json")  # fmt: skip
    doc = json.loads(r.out)
    assert doc["digest"] == "sha256:025962330cb7733c2d06f97ecf3cfdc1a50018fee62637b83c89951af32ace80"
    assert doc["fingerprint"] != ""


def test_inspect_binds_an_attested_digest_to_the_image(cli: Run, registry: Registry) -> None:
    model = SAMPLE / "model.safetensors"
    published = cli("publish", "--image", f"{registry.host}/m/bound:v1", "--plain-http", model).out.strip()
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    ok = cli("publish", "inspect", published, "--plain-http", "--expect-sha256", sha.upper())
    assert ok.code == 0
    assert (
        ok.err == f"verified: the primary file model.safetensors has SHA-256 {sha} (read 1 layer(s), 120 B)\n"
    )
    bad = cli("publish", "inspect", published, "--plain-http", "--expect-sha256", "a" * 64)
    assert bad.code == 1
    assert (
        bad.err
        == f"error: {published}: the primary file model.safetensors has SHA-256 {sha}, not {'a' * 64}\n"
    )
    tagged = cli(
        "publish", "inspect", f"oci://{registry.host}/m/bound:v1", "--plain-http", "--expect-sha256", sha
    )
    assert tagged.code == 0 and tagged.err.startswith("warning: ") and "is not pinned by digest" in tagged.err
    assert cli("publish", "inspect", published, "--plain-http", "--expect-sha256", "xyz").code == 2
    assert cli("publish", "inspect", published, "--plain-http", "--annotations-only").code == 2


def test_inspect_reads_the_bytes_an_image_serves_not_its_annotations(cli: Run, registry: Registry) -> None:
    """Finding 1: the attested annotation re-pushed over evil bytes passes an annotation check only."""
    want = hashlib.sha256((SAMPLE / "model.safetensors").read_bytes()).hexdigest()
    evil = b"weights nobody attested"
    image = push_crafted(registry.host, "m/evil:v1", [file_layer("model.safetensors", evil, sha256=want)])
    refused = cli("publish", "inspect", image, "--plain-http", "--expect-sha256", want)
    assert refused.code == 1
    assert refused.err == (
        f"error: {image}: the primary file model.safetensors has SHA-256 {hashlib.sha256(evil).hexdigest()},"
        f" not {want}\n"
    )
    fooled = cli("publish", "inspect", image, "--plain-http", "--expect-sha256", want, "--annotations-only")
    assert fooled.code == 0 and fooled.err.startswith(
        "note: compared the digest the image's annotations record"
    )
    assert "no layer was read" in fooled.err
    doubled = push_crafted(registry.host, "m/doubled:v1", [file_layer("model.safetensors", b"ok"),
                           file_layer("model.safetensors", evil)])  # fmt: skip
    r = cli("publish", "inspect", doubled, "--plain-http")
    assert r.code == 1 and r.err.count("\n") == 1 and "'model.safetensors' is given twice" in r.err


def test_check_primary_without_a_recorded_digest() -> None:
    from modelseal.errors import VerificationError
    from modelseal.publish.image.contents import check_primary

    info = {
        "image": "oci://r/m@sha256:" + "0" * 64,
        "primary": None,
        "files": [{"path": "x", "sha256": None}],
    }
    with pytest.raises(VerificationError, match="records no SHA-256 for its primary file"):
        check_primary(info, "a" * 64)


def test_result_file_in_a_folder_without_write_access_is_written_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A non-root container cannot create files in /dev; its termination log is written in place."""
    import os

    from modelseal.cli.result_file import write_result

    folder = tmp_path / "dev"
    folder.mkdir()
    log = folder / "termination-log"
    log.write_text("")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == folder else real_access(p, mode))
    created: list[str] = []
    monkeypatch.setattr("modelseal.cli.result_file.write_atomic", lambda *a, **k: created.append("atomic"))
    doc = {"image": "oci://r/m@sha256:" + "a" * 64, "digest": "sha256:" + "a" * 64, "tag": "v1",
           "fingerprint": "sha256:" + "b" * 64, "files": []}  # fmt: skip
    write_result(log, doc)
    assert created == [] and json.loads(log.read_text()) == doc
    other = tmp_path / "result.json"
    write_result(other, doc)
    assert created == ["atomic"]  # an ordinary file still goes through temp-then-rename
