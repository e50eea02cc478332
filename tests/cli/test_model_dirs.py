"""Model directories from the command line: what socair's rules leave out is said, and
``publish --from`` does not follow a symlink out of the folder unless told to."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from modelseal.attest.signing.private_keys import SigningKey
from modelseal.attest.signing.sign import sign_report
from tests.attest.helpers import hf_snapshot, sample_report
from tests.cli.conftest import Run
from tests.conftest import TESTDATA
from tests.publish.servers import Registry

NOWHERE = "127.0.0.1:1/m/x:v1"  # refused before any connection


def _planted(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    shutil.copytree(TESTDATA / "sample-model", model)
    (model / "__pycache__").mkdir()
    (model / "__pycache__" / "modeling.cpython-311.pyc").write_bytes(b"planted")
    return model


def test_digest_says_what_it_left_out(cli: Run, tmp_path: Path) -> None:
    model = _planted(tmp_path)
    r = cli("digest", model)
    assert r.code == 0
    assert r.err == (
        f"note: {model}: 1 file(s) left out of the digest (socair's rules): __pycache__/ (1 file)\n"
    )
    doc = json.loads(cli("digest", model, "--json").out)
    assert doc["skipped"] == [{"path": "__pycache__/", "why": "skipped folder", "files": 1}]
    assert doc["sha256"] == json.loads(cli("digest", TESTDATA / "sample-model", "--json").out)["sha256"]
    assert json.loads(cli("digest", TESTDATA / "sample-model", "--json").out)["skipped"] == []


def test_verify_artifact_says_what_it_left_out(
    cli: Run, ed25519_key: SigningKey, ed25519_key_file: Path, tmp_path: Path
) -> None:
    model = _planted(tmp_path)
    report = sample_report()
    report["artifact"]["sha256"] = json.loads(cli("digest", model, "--json").out)["sha256"]
    envelope = tmp_path / "a.dsse.json"
    envelope.write_bytes(sign_report(report, ed25519_key)[0].to_json())
    pub = ed25519_key_file.with_suffix(".pub")
    r = cli("verify", envelope, "--trusted", pub, "--artifact", model)
    assert r.code == 0 and "left out of the digest (socair's rules): __pycache__/ (1 file)" in r.err
    doc = json.loads(cli("verify", envelope, "--trusted", pub, "--artifact", model, "--json").out)
    assert doc["admitted"] and doc["skipped"][0]["path"] == "__pycache__/"


def test_attest_says_what_it_left_out(cli: Run, ed25519_key_file: Path, tmp_path: Path) -> None:
    model = _planted(tmp_path)
    r = cli("attest", model, "--key", ed25519_key_file, "--predicate-type", "https://example.com/t/v1")
    assert r.code == 0 and r.err.startswith(f"note: {model}: 1 file(s) left out of the digest")


def test_publish_refuses_a_link_out_of_the_folder(cli: Run, tmp_path: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(TESTDATA / "sample-model", model)
    (tmp_path / "shadow").write_text("root:$6$secret")
    (model / "vocab.txt").symlink_to(tmp_path / "shadow")
    r = cli("publish", "--image", NOWHERE, "--from", model, "--primary", "model.safetensors")
    assert r.code == 1 and r.err == (
        f"error: {model / 'vocab.txt'} is a symlink to {tmp_path / 'shadow'}, outside {model};"
        " refusing to follow it (--follow-symlinks follows links that leave the folder)\n"
    )
    usage = cli("publish", "--image", NOWHERE, "--follow-symlinks", model / "config.json")
    assert usage.code == 2 and "--follow-symlinks goes with --from DIR" in usage.err


def test_publish_follows_links_when_told_and_lists_them(cli: Run, registry: Registry, tmp_path: Path) -> None:
    snapshot = hf_snapshot(tmp_path)
    (snapshot / "model.bin").write_bytes(b"weights")  # a file of the folder itself
    (snapshot / "same.bin").symlink_to("model.bin")  # a link inside: fine either way
    (snapshot / ".cache").mkdir()
    (snapshot / ".cache" / "x").write_text("x")
    image = f"{registry.host}/m/hf:v1"
    refused = cli("publish", "--image", image, "--plain-http", "--from", snapshot, "--primary", "model.bin")
    assert refused.code == 1 and "config.json is a symlink to" in refused.err
    r = cli("publish", "--image", image, "--plain-http", "--from", snapshot, "--primary", "model.bin",
            "--follow-symlinks", "--json")  # fmt: skip
    assert r.code == 0, r.err
    blob = (snapshot / "config.json").resolve()
    assert r.err.splitlines() == [
        f"following config.json -> {blob}",
        f"note: {snapshot}: 1 file(s) left out of the image (socair's rules): .cache/ (1 file)",
    ]
    assert [f["path"] for f in json.loads(r.out)["files"]] == ["model.bin", "config.json", "same.bin"]
