"""OpenSSF Model Signing bundles: model_signing signs at test time, modelseal must decide alike.

Every case asks both verifiers: an untouched model is accepted by both, and
each tampering is refused by both.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from modelseal.attest.bundles.oms import PREDICATE_TYPE
from modelseal.attest.bundles.oms_sign import sign_model
from modelseal.attest.bundles.verifier import ModelBinding, evaluate_bundle
from modelseal.attest.dsse.keys import Keyring, load_public_key
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.signing.private_keys import load_signing_key
from modelseal.attest.verdict import Reason, Verdict
from tests.attest.oms_referee import ec_key_pair, ms_cli_verify, ms_sign, ms_verify, payload_of, small_model

SHARD = 4096


def modelseal_verify(
    model: Path, signature: Path, public_key: Path, *, ignore_unsigned: bool = False
) -> Verdict:
    policy = TrustPolicy(
        Keyring([load_public_key(public_key.read_bytes())]), predicate_types=(PREDICATE_TYPE,)
    )
    binding = ModelBinding(str(model), str(signature), ignore_unsigned)
    return evaluate_bundle(signature.read_bytes(), policy, model=binding)


@pytest.mark.parametrize("curve", ["p256", "p384", "p521"])
@pytest.mark.parametrize("shard_size", [None, SHARD])
def test_model_signing_bundles_verify_in_modelseal(
    tmp_path: Path, curve: str, shard_size: int | None
) -> None:
    model = small_model(tmp_path / "model")
    priv, pub = ec_key_pair(tmp_path, curve)
    sig = model / "model.sig"
    ms_sign(model, priv, sig, shard_size=shard_size)
    assert ms_verify(model, sig, pub, shard_size=shard_size) is None
    v = modelseal_verify(model, sig, pub)
    assert v.admitted, v.message
    assert v.signer is not None and v.signer.algorithm == f"ecdsa-{curve}"
    assert v.details["serialization"] == ("files" if shard_size is None else "shards")
    # the empty file is a resource of the files serialization only (it has no shards)
    assert v.details["signed_files"] == (4 if shard_size is None else 3)
    assert v.subject_digest == payload_of(sig)["subject"][0]["digest"]["sha256"]
    assert sorted(v.details["ignored"]) == [".git", ".gitattributes", "model.sig"]


def _change_byte(model: Path, _: Path) -> None:
    data = bytearray((model / "model.safetensors").read_bytes())
    data[5000] ^= 1
    (model / "model.safetensors").write_bytes(bytes(data))


def _add_file(model: Path, _: Path) -> None:
    (model / "sub" / "extra.bin").write_bytes(b"planted")


def _remove_file(model: Path, _: Path) -> None:
    (model / "sub" / "tokenizer.json").unlink()


def _edit_payload(_: Path, sig: Path) -> None:
    bundle = json.loads(sig.read_bytes())
    statement = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    statement["predicate"]["resources"][0]["digest"] = "00" * 32
    bundle["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    sig.write_text(json.dumps(bundle))


TAMPERING: dict[str, tuple[Callable[[Path, Path], None], Reason, str]] = {
    "changed byte": (_change_byte, Reason.DIGEST_MISMATCH, "changed: model.safetensors"),
    "file added": (_add_file, Reason.DIGEST_MISMATCH, "added: sub/extra.bin"),
    "file removed": (_remove_file, Reason.DIGEST_MISMATCH, "removed: sub/tokenizer.json"),
    "edited payload": (_edit_payload, Reason.SIGNATURE_INVALID, "no valid signature by a trusted key"),
}


@pytest.mark.parametrize("case", sorted(TAMPERING))
@pytest.mark.parametrize("shard_size", [None, SHARD])
def test_tampering_is_refused_by_both(tmp_path: Path, case: str, shard_size: int | None) -> None:
    model = small_model(tmp_path / "model")
    priv, pub = ec_key_pair(tmp_path, "p256")
    sig = model / "model.sig"
    ms_sign(model, priv, sig, shard_size=shard_size)
    tamper, reason, text = TAMPERING[case]
    tamper(model, sig)
    assert ms_verify(model, sig, pub, shard_size=shard_size) is not None
    v = modelseal_verify(model, sig, pub)
    assert not v.admitted and v.reason is reason, v.message
    assert text in v.message


def test_another_key_is_refused_by_both(tmp_path: Path) -> None:
    model = small_model(tmp_path / "model")
    priv, _ = ec_key_pair(tmp_path, "p256")
    _, other = ec_key_pair(tmp_path, "p256", name="other")
    sig = model / "model.sig"
    ms_sign(model, priv, sig)
    assert ms_verify(model, sig, other) is not None
    v = modelseal_verify(model, sig, other)
    assert v.reason is Reason.SIGNATURE_INVALID


def test_ignored_paths_and_unsigned_files_are_judged_alike(tmp_path: Path) -> None:
    model = small_model(tmp_path / "model")
    priv, pub = ec_key_pair(tmp_path, "p384")
    sig = model / "model.sig"
    ms_sign(model, priv, sig)
    # git files are never part of the model: changing them changes nothing
    (model / ".git" / "HEAD").write_text("ref: refs/heads/other\n")
    (model / ".gitignore").write_text("*.tmp\n")
    assert ms_verify(model, sig, pub) is None and modelseal_verify(model, sig, pub).admitted
    (model / "notes.md").write_text("unsigned")
    assert ms_verify(model, sig, pub) is not None
    assert modelseal_verify(model, sig, pub).reason is Reason.DIGEST_MISMATCH
    assert ms_verify(model, sig, pub, ignore_unsigned=True) is None
    assert modelseal_verify(model, sig, pub, ignore_unsigned=True).admitted
    # ignoring unsigned files still notices a signed file that is gone
    (model / "config.json").unlink()
    assert ms_verify(model, sig, pub, ignore_unsigned=True) is not None
    gone = modelseal_verify(model, sig, pub, ignore_unsigned=True)
    assert gone.reason is Reason.DIGEST_MISMATCH and "removed: config.json" in gone.message


def test_single_file_model_is_named_dot(tmp_path: Path) -> None:
    model = small_model(tmp_path / "model") / "model.safetensors"
    priv, pub = ec_key_pair(tmp_path, "p256")
    sig = tmp_path / "weights.sig"
    ms_sign(model, priv, sig)
    assert [r["name"] for r in payload_of(sig)["predicate"]["resources"]] == ["."]
    assert ms_verify(model, sig, pub) is None
    assert modelseal_verify(model, sig, pub).admitted
    other = model.with_name("config.json")
    assert ms_verify(other, sig, pub) is not None
    assert modelseal_verify(other, sig, pub).reason is Reason.DIGEST_MISMATCH


def test_a_key_with_text_before_its_pem_block_loads(tmp_path: Path) -> None:
    model = small_model(tmp_path / "model")
    priv, pub = ec_key_pair(tmp_path, "p521")
    sig = model / "model.sig"
    ms_sign(model, priv, sig)
    commented = tmp_path / "commented.pub"
    commented.write_text("Publisher: example models\nComment: P-521\n\n" + pub.read_text())
    assert modelseal_verify(model, sig, commented).admitted


@pytest.mark.parametrize("shard_size", [None, SHARD])
def test_modelseal_signatures_pass_model_signing(tmp_path: Path, shard_size: int | None) -> None:
    model = small_model(tmp_path / "model")
    priv, pub = ec_key_pair(tmp_path, "p384")
    shutil.copytree(model, tmp_path / "copy")
    sig = model / "model.sig"
    bundle, digest, _ = sign_model(model, load_signing_key(priv), signature=sig, shard_size=shard_size)
    sig.write_bytes(bundle)
    assert ms_verify(model, sig, pub, shard_size=shard_size) is None
    assert modelseal_verify(model, sig, pub).admitted
    # the same model signed by model_signing has the same digest: the same manifest
    theirs = tmp_path / "theirs.sig"
    ms_sign(tmp_path / "copy", priv, theirs, shard_size=shard_size)
    assert payload_of(theirs)["subject"][0]["digest"]["sha256"] == digest
    _change_byte(model, sig)
    assert ms_verify(model, sig, pub, shard_size=shard_size) is not None


def test_model_signing_cli_accepts_modelseal_signature_whole_process(tmp_path: Path) -> None:
    model = small_model(tmp_path / "model")
    priv, pub = ec_key_pair(tmp_path, "p256")
    sig = model / "model.sig"
    sig.write_bytes(sign_model(model, load_signing_key(priv), signature=sig)[0])
    ok = ms_cli_verify(model, sig, pub)
    assert ok.returncode == 0, ok.stderr
    assert "Verification succeeded" in ok.stdout
    (model / "config.json").write_text("{}")
    assert ms_cli_verify(model, sig, pub).returncode != 0
