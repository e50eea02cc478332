"""``modelseal verify`` on OMS bundles and ``modelseal sign --format oms``: text, JSON, exit codes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.attest.oms_referee import ec_key_pair, ms_cli_verify, ms_sign, small_model
from tests.cli.conftest import Run
from tests.conftest import SOCAIR, TESTDATA, private_key_copy


@pytest.fixture
def signed(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A model signed by model_signing: (model, model.sig, public key)."""
    model = small_model(tmp_path / "model")
    priv, pub = ec_key_pair(tmp_path, "p256")
    ms_sign(model, priv, model / "model.sig")
    return model, model / "model.sig", pub


def test_verify_prints_what_was_checked(cli: Run, signed: tuple[Path, Path, Path]) -> None:
    model, sig, pub = signed
    r = cli("verify", sig, "--trusted", pub, "--artifact", model)
    assert r.code == 0 and r.err == "", r.err
    lines = r.out.splitlines()
    assert lines[0].startswith("verified: OpenSSF Model Signing bundle (Sigstore bundle v0.3) signed by key ")
    assert lines[1] == "  model model: 4 signed file(s), files serialization, sha256"
    assert (
        lines[3]
        == "  artifact matches: 4 file(s) hashed and compared; ignored: .git, .gitattributes, model.sig"
    )


def test_mismatch_lists_files_and_exits_1(cli: Run, signed: tuple[Path, Path, Path]) -> None:
    model, sig, pub = signed
    (model / "config.json").write_text("{}")
    (model / "new.bin").write_bytes(b"1")
    (model / "empty.txt").unlink()
    r = cli("verify", sig, "--trusted", pub, "--artifact", model)
    assert r.code == 1 and r.out == ""
    assert r.err == (
        f"error: attestation does not verify: model {model} does not match the signature:"
        " added: new.bin; removed: empty.txt; changed: config.json\n"
    )
    warn = cli("verify", sig, "--trusted", pub, "--artifact", model, "--mode", "warn")
    assert warn.code == 0 and warn.err.startswith("warning: attestation does not verify: model")
    j = cli("verify", sig, "--trusted", pub, "--artifact", model, "--json")
    doc = json.loads(j.out)
    assert j.code == 1 and doc["reason"] == "digest_mismatch"
    assert doc["details"]["differences"] == {
        "added": ["new.bin"],
        "removed": ["empty.txt"],
        "changed": ["config.json"],
    }
    assert cli("verify", sig, "--trusted", pub, "--artifact", model, "--ignore-unsigned-files").code == 1


def test_without_artifact_the_signature_alone_is_checked(cli: Run) -> None:
    r = cli("verify", SOCAIR / "oms-key256-model.sig", "--trusted", SOCAIR / "oms-p256.pub")
    assert r.code == 0
    assert (
        r.out.splitlines()[-1]
        == "  the artifact itself was not checked; pass --artifact <path> or --sha256 <hex> to bind it"
    )
    digest = "a26bd853f411fc64cf8351a94b334199155321317443cba81f727bd938c47ebb"
    args = ("verify", SOCAIR / "oms-key256-model.sig", "--trusted", SOCAIR / "oms-p256.pub")
    assert cli(*args, "--sha256", digest).code == 0
    wrong = cli(*args, "--sha256", "ab" * 32)
    assert wrong.code == 1 and "the signed model digest is a26bd853" in wrong.err
    assert cli(*args, "--max-age", "24h").code == 1


def test_unreadable_inputs_exit_1_in_one_line(
    cli: Run, signed: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    model, sig, pub = signed
    missing = cli("verify", tmp_path / "nope.sig", "--trusted", pub, "--artifact", model)
    assert missing.code == 1 and missing.err.startswith(
        "error: attestation does not verify: read attestation"
    )
    gone = cli("verify", sig, "--trusted", pub, "--artifact", tmp_path / "elsewhere")
    assert gone.code == 1 and "no such file or directory" in gone.err
    os.mkfifo(model / "pipe")  # refused without being opened (an open would hang)
    fifo = cli("verify", sig, "--trusted", pub, "--artifact", model)
    assert fifo.code == 1 and "pipe is not a regular file or directory" in fifo.err
    (model / "pipe").unlink()
    (model / ".git" / "pipe").parent.mkdir(exist_ok=True)
    os.mkfifo(model / ".git" / "pipe")  # ignored paths are never looked at
    assert cli("verify", sig, "--trusted", pub, "--artifact", model).code == 0
    (model / "dangling").symlink_to(model / "nowhere")
    assert "is a symlink" in cli("verify", sig, "--trusted", pub, "--artifact", model).err
    (model / "dangling").unlink()
    (model / "link").symlink_to(model / "config.json")
    link = cli("verify", sig, "--trusted", pub, "--artifact", model, "--json")
    assert link.code == 1 and json.loads(link.out)["reason"] == "input_unreadable"
    assert "is a symlink; the signature does not allow symlinks" in json.loads(link.out)["message"]


def test_sign_oms_is_accepted_by_model_signing(cli: Run, tmp_path: Path) -> None:
    model = small_model(tmp_path / "model")
    key = private_key_copy(tmp_path, "ecdsa-p256")
    r = cli("sign", "--format", "oms", "--key", key, model)
    assert r.code == 0, r.err
    assert r.out.splitlines()[0].startswith("signed model ")
    assert r.out.splitlines()[1] == f"  {model / 'model.sig'}"
    pub = TESTDATA / "keys" / "ecdsa-p256.pub"
    assert ms_cli_verify(model, model / "model.sig", pub).returncode == 0
    assert cli("verify", model / "model.sig", "--trusted", pub, "--artifact", model).code == 0
    shards = cli(
        "sign", "--format", "oms", "--key", key, model, "--shard-size", "100", "--out", tmp_path / "s.sig"
    )
    assert shards.code == 0
    assert cli("verify", tmp_path / "s.sig", "--trusted", pub, "--artifact", model).code == 0


def test_sign_oms_usage_errors(cli: Run, tmp_path: Path, ed25519_key_file: Path) -> None:
    model = small_model(tmp_path / "model")
    key = private_key_copy(tmp_path, "ecdsa-p256")
    assert cli("sign", "--format", "oms", "--key", key).code == 2
    assert cli("sign", "--format", "oms", "--key", key, model, "--report", "r.json").code == 2
    assert cli("sign", "--key", key, model).code == 2
    assert cli("sign", "--format", "oms", "--key", key, model, "--shard-size", "0").code == 2
    bad = cli("sign", "--format", "oms", "--key", key, model, "--ignore-path", "../x")
    assert bad.code == 2 and "leaves the model directory" in bad.err
    ed = cli("sign", "--format", "oms", "--key", ed25519_key_file, model)
    assert ed.code == 2 and "signed with ECDSA keys" in ed.err
    assert cli("sign", "--format", "oms", "--key", key, tmp_path / "missing").code == 1
