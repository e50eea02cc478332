"""Signer URIs: file:, envvar:, hsm: (a real SoftHSM2 token), and schemes passed to securesystemslib."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import pytest

from modelseal.attest.dsse.envelope import pae
from modelseal.attest.signing.private_keys import generate_key
from modelseal.attest.signing.signers import PIN_VARIABLE, UriSigner, load_signer
from modelseal.errors import KeyFileError, OperationalError, UsageError
from tests.attest.oms_referee import ms_cli_verify, small_model
from tests.cli.conftest import Run
from tests.conftest import TESTDATA, private_key_copy

SOFTHSM_MODULE = Path("/usr/lib/softhsm/libsofthsm2.so")
PIN = "4711"


def test_envvar_signs_and_never_shows_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    key = generate_key("ecdsa-p384")
    monkeypatch.setenv("MODELSEAL_TEST_KEY", key.private_pem())
    signer = load_signer("envvar:MODELSEAL_TEST_KEY")
    assert isinstance(signer, UriSigner) and signer.public.keyid == key.public.keyid
    message = pae("application/vnd.in-toto+json", b"{}")
    assert key.public.verify(signer.sign(message), message)
    monkeypatch.setenv("MODELSEAL_TEST_KEY", "s3cret-not-a-key PRIVATE KEY-----")
    with pytest.raises(KeyFileError) as info:
        load_signer("envvar:MODELSEAL_TEST_KEY")
    assert "s3cret" not in str(info.value) and "holds neither a PEM key nor a base64" in str(info.value)
    monkeypatch.delenv("MODELSEAL_TEST_KEY")
    with pytest.raises(KeyFileError, match="environment variable MODELSEAL_TEST_KEY is not set"):
        load_signer("envvar:MODELSEAL_TEST_KEY")
    with pytest.raises(KeyFileError, match="environment variable \\(none\\) is not set"):
        load_signer("envvar:")
    monkeypatch.setenv("MODELSEAL_TEST_KEY", " \n")  # GitHub passes a secret nobody set as ""
    with pytest.raises(KeyFileError, match="environment variable MODELSEAL_TEST_KEY is empty"):
        load_signer("envvar:MODELSEAL_TEST_KEY")


def test_envvar_keeps_the_issuer_line_key_gen_writes(
    tmp_path: Path, cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CI secret holding the .key file as written: reports signed with it name its issuer.

    Before, the issuer line was dropped: the report claimed "unnamed issuer", and a verifier
    whose .pub names the issuer refused it.
    """
    assert cli("key", "gen", "--out", tmp_path / "ci", "--issuer", "CI pipeline").code == 0
    monkeypatch.setenv("MODELSEAL_TEST_KEY", (tmp_path / "ci.key").read_text())
    signer = load_signer("envvar:MODELSEAL_TEST_KEY")
    assert signer.issuer == "CI pipeline" and signer.public.name == "CI pipeline"
    report = tmp_path / "report.json"
    report.write_bytes((TESTDATA / "reports" / "sample.report.json").read_bytes())
    assert cli("sign", "--key", "envvar:MODELSEAL_TEST_KEY", "--report", report).code == 0
    v = cli("verify", tmp_path / "report.dsse.json", "--trusted", tmp_path / "ci.pub")
    assert v.code == 0, v.err
    assert v.out.startswith("verified: issued by CI pipeline (confirmed: your trust list names this key)")


def test_envvar_takes_the_key_base64_encoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """GitLab masks only one-line values of the base64 alphabet: `base64 -w0 ci.key` is one."""
    key = generate_key("ed25519", issuer="CI pipeline")
    pem = f"Socair-Issuer: CI pipeline\n{key.private_pem()}"
    monkeypatch.setenv("MODELSEAL_TEST_KEY", base64.b64encode(pem.encode()).decode())
    signer = load_signer("envvar:MODELSEAL_TEST_KEY")
    assert signer.public.keyid == key.public.keyid and signer.issuer == "CI pipeline"
    wrapped = base64.encodebytes(key.private_pem().encode()).decode()  # `base64` wraps at 76 columns
    monkeypatch.setenv("MODELSEAL_TEST_KEY", wrapped)
    assert load_signer("envvar:MODELSEAL_TEST_KEY").public.keyid == key.public.keyid


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("s3cret!!", "holds neither a PEM key nor a base64-encoded one"),
        (base64.b64encode(b"s3cret-bytes").decode(), "does not hold an unencrypted PEM private key"),
        (base64.b64encode(b"\xff\xfe s3cret").decode(), "holds neither a PEM key nor a base64-encoded one"),
        (
            (TESTDATA / "keys" / "ed25519.pub").read_text(),
            "holds a public key; put the private key (.key) in it",
        ),
        (
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\ns3cret\n-----END ENCRYPTED PRIVATE KEY-----\n",
            "does not hold an unencrypted PEM private key",
        ),
        (
            "-----BEGIN PRIVATE KEY-----\ns3cret\n-----END PRIVATE KEY-----\n",
            "does not hold a PEM private key",
        ),
        ("A" * (64 * 1024 + 1), "does not hold an unencrypted PEM private key"),
    ],
    ids=["not-base64", "base64-not-pem", "base64-not-text", "public-key", "encrypted", "bad-pem", "huge"],
)
def test_envvar_refusals_never_show_the_value(
    value: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MODELSEAL_TEST_KEY", value)
    with pytest.raises(KeyFileError) as info:
        load_signer("envvar:MODELSEAL_TEST_KEY")
    assert str(info.value) == f"signer envvar:MODELSEAL_TEST_KEY: the variable {message}"
    assert "s3cret" not in str(info.value)


def test_file_uri_keeps_the_key_file_checks(tmp_path: Path) -> None:
    path = private_key_copy(tmp_path, "ecdsa-p256")
    signer = load_signer(f"file:{path}")
    assert isinstance(signer, UriSigner) and signer.public.algorithm == "ecdsa-p256"
    path.chmod(0o644)
    with pytest.raises(KeyFileError, match="readable by other users"):
        load_signer(f"file:{path}")
    with pytest.raises(KeyFileError, match="No such file or directory"):
        load_signer(f"file:{tmp_path / 'missing.key'}")


def test_unknown_and_passed_through_schemes(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match="signer scheme 'nope' is not known"):
        load_signer("nope:thing")
    monkeypatch.delenv("MODELSEAL_SIGNER_PUBLIC_KEY", raising=False)
    with pytest.raises(UsageError, match="set MODELSEAL_SIGNER_PUBLIC_KEY"):
        load_signer("gcpkms:projects/p/locations/l/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1")
    # with its public key, the URI goes to securesystemslib, whose KMS client is not installed here
    monkeypatch.setenv("MODELSEAL_SIGNER_PUBLIC_KEY", str(TESTDATA / "keys" / "ecdsa-p256.pub"))
    with pytest.raises(
        OperationalError, match=r"signer gcpkms: cannot be opened \(UnsupportedLibraryError\)"
    ):
        load_signer("gcpkms:projects/p/locations/l/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1")


@pytest.fixture
def softhsm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A SoftHSM2 token "modelseal" holding the testdata P-256 key under id 2."""
    assert SOFTHSM_MODULE.exists(), "softhsm2 is missing: scripts/setup.sh installs it"
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    conf = tmp_path / "softhsm2.conf"
    conf.write_text(f"directories.tokendir = {tokens}\nobjectstore.backend = file\nlog.level = ERROR\n")
    monkeypatch.setenv("SOFTHSM2_CONF", str(conf))
    monkeypatch.setenv("PYKCS11LIB", str(SOFTHSM_MODULE))
    monkeypatch.setenv(PIN_VARIABLE, PIN)
    util = ["softhsm2-util"]
    subprocess.run(
        [*util, "--init-token", "--free", "--label", "modelseal", "--pin", PIN, "--so-pin", "8642"],
        check=True,
        capture_output=True,
        env=os.environ,
    )
    key = private_key_copy(tmp_path, "ecdsa-p256")
    subprocess.run(
        [
            *util,
            "--import",
            str(key),
            "--token",
            "modelseal",
            "--label",
            "signer",
            "--id",
            "02",
            "--pin",
            PIN,
        ],
        check=True,
        capture_output=True,
        env=os.environ,
    )
    return TESTDATA / "keys" / "ecdsa-p256.pub"


def test_hsm_signs_an_oms_bundle_model_signing_accepts(softhsm: Path, tmp_path: Path, cli: Run) -> None:
    model = small_model(tmp_path / "model")
    r = cli("sign", "--format", "oms", "--key", "hsm:2?label=modelseal", model)
    assert r.code == 0, r.err
    assert ms_cli_verify(model, model / "model.sig", softhsm).returncode == 0
    assert cli("verify", model / "model.sig", "--trusted", softhsm, "--artifact", model).code == 0
    attest = cli(
        "attest", model / "config.json", "--key", "hsm:", "--predicate-type", "https://example.com/p",
        "--out", tmp_path / "a.json",
    )  # fmt: skip
    assert attest.code == 0, attest.err
    v = cli("verify", tmp_path / "a.json", "--trusted", softhsm, "--predicate-type", "https://example.com/p")
    assert v.code == 0, v.err


def test_hsm_failures_are_one_line_without_the_pin(
    softhsm: Path, tmp_path: Path, cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = small_model(tmp_path / "model")
    monkeypatch.setenv(PIN_VARIABLE, "0000-wrong")
    wrong = cli("sign", "--format", "oms", "--key", "hsm:2", model)
    assert wrong.code == 3 and "0000-wrong" not in wrong.err
    assert wrong.err.startswith("error: signer hsm:2: signing failed (")
    monkeypatch.setenv(PIN_VARIABLE, PIN)
    missing = cli("sign", "--format", "oms", "--key", "hsm:9", model)
    assert missing.code == 3 and "PKCS#11 token or key not usable" in missing.err
    assert cli("sign", "--format", "oms", "--key", "hsm:two", model).code == 2
    monkeypatch.delenv(PIN_VARIABLE)
    assert "set MODELSEAL_HSM_PIN" in cli("sign", "--format", "oms", "--key", "hsm:2", model).err
    monkeypatch.delenv("PYKCS11LIB")
    assert cli("sign", "--format", "oms", "--key", "hsm:2", model).code == 2
