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


# Issue 20, finding 5: a PIN written in a signer URI was echoed whole in errors.
URI_PIN = "975310"


@pytest.mark.parametrize(
    ("ref", "named"),
    [
        (f"hsm:2?label=modelseal&pin-value={URI_PIN}", "pin-value"),  # signed before, the PIN ignored
        (f"hsm:2?pin-value={URI_PIN}&label=modelseal", "pin-value"),
        (f"hsm:2;pin-value={URI_PIN}", "pin-value"),  # a path attribute, by mistake: echoed before
        (f"hsm:2?PIN-VALUE={URI_PIN}", "pin-value"),
        (f"hsm:2?%70in-value={URI_PIN}", "pin-value"),
        (f"hsm:2?%2570in-value={URI_PIN}", "pin-value"),
        (f"hsm:2?label=modelseal&pin-source=file:/run/secrets/{URI_PIN}", "pin-source"),
        (f"hsm:2;pin-{URI_PIN}", "a pin-* attribute"),  # an unknown name is not repeated: it may be the PIN
        (f"HSM:2?pin-value={URI_PIN}", "pin-value"),  # not a scheme modelseal knows: a path, echoed before
        (f"pkcs11:token=modelseal;object=signer?pin-value={URI_PIN}", "pin-value"),
        (f"gcpkms:projects/p/locations/l/keyRings/r/cryptoKeys/k?pin-value={URI_PIN}", "pin-value"),
        (f"file:/run/keys/ci.key?pin-value={URI_PIN}", "pin-value"),
        (f"envvar:CI_KEY?pin-value={URI_PIN}", "pin-value"),
        # red team: a PIN outside a query or a path attribute was refused, and quoted whole
        (f"hsm:pin-value={URI_PIN}", "pin-value"),
        (f"hsm:2&pin-value={URI_PIN}", "pin-value"),
        (f"hsm:2/pin-value={URI_PIN}", "pin-value"),
        (f"hsm:%70in-value={URI_PIN}", "pin-value"),
        (f"hsm:2%3Fpin-value%3D{URI_PIN}", "pin-value"),
        (f"pin-value={URI_PIN}", "pin-value"),
        (f"hsm:pin-value {URI_PIN}", "pin-value"),  # not refused: "the key id is not a number", quoted
        (f"hsm:pin_value={URI_PIN}", "a pin-* attribute"),  # the same: quoted whole
    ],
)
def test_a_pin_in_a_signer_uri_is_refused_and_never_shown(softhsm: Path, ref: str, named: str) -> None:
    with pytest.raises(UsageError) as info:
        load_signer(ref)
    message = str(info.value)
    assert URI_PIN not in message and "label" not in message, message
    assert f"({named} refused;" in message and f"set {PIN_VARIABLE} to the token's user PIN" in message


def test_a_path_that_holds_spin_is_not_a_pin(tmp_path: Path) -> None:
    path = private_key_copy(tmp_path, "ed25519")
    spun = path.rename(tmp_path / "spin-offs=1.key")
    assert load_signer(str(spun)).public.algorithm == "ed25519"


def test_messages_show_no_query_of_a_signer_uri(
    softhsm: Path, tmp_path: Path, cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The label is no secret, but a query may be: every message shows the scheme and path alone."""
    model = small_model(tmp_path / "model")
    report = tmp_path / "report.json"
    report.write_bytes((TESTDATA / "reports" / "sample.report.json").read_bytes())
    not_ed25519 = cli("sign", "--key", "hsm:2?label=modelseal", "--report", report)
    assert not_ed25519.code == 1 and not_ed25519.err == "error: hsm:2 is not an Ed25519 key\n"
    monkeypatch.setenv(PIN_VARIABLE, "0000-wrong")
    wrong = cli("sign", "--format", "oms", "--key", "hsm:2?label=modelseal", model)
    assert wrong.code == 3 and wrong.err.startswith("error: signer hsm:2: signing failed ("), wrong.err
    monkeypatch.setenv(PIN_VARIABLE, PIN)
    missing = cli("sign", "--format", "oms", "--key", "hsm:9?label=modelseal", model)
    assert missing.code == 3 and missing.err.startswith(
        "error: signer hsm:9: PKCS#11 token or key not usable"
    )
    assert cli("sign", "--format", "oms", "--key", "hsm:two?label=modelseal", model).err == (
        "error: signer hsm:two: the key id is not a number (modelseal sign --help)\n"
    )
    monkeypatch.delenv("PYKCS11LIB")
    unset = cli("sign", "--format", "oms", "--key", "hsm:2?label=modelseal", model)
    assert unset.code == 2 and unset.err.startswith("error: signer hsm:2: set PYKCS11LIB"), unset.err
    for run in (not_ed25519, wrong, missing, unset):
        assert "label" not in run.err and "0000-wrong" not in run.err


def test_a_key_path_or_file_uri_with_a_query_is_not_echoed(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError) as info:
        load_signer(f"{tmp_path}/ci.key?token=s3cret")
    assert "s3cret" not in str(info.value) and f"private key {tmp_path}/ci.key...: no such file" in str(
        info.value
    )
    with pytest.raises(UsageError) as used:
        load_signer(f"file:{tmp_path}/ci.key?encrypted=false&token=s3cret")
    assert "s3cret" not in str(used.value) and "a file: URI takes a path alone" in str(used.value)
    with pytest.raises(UsageError) as named:
        load_signer("envvar:CI_KEY?token=s3cret")
    assert (
        str(named.value) == "signer envvar:CI_KEY: give an environment variable's name, letters, digits and _"
    )


def test_the_cli_refuses_a_pin_in_the_uri_with_exit_2_before_anything_is_pushed(
    softhsm: Path, tmp_path: Path, cli: Run
) -> None:
    model = small_model(tmp_path / "model")
    signed = cli("sign", "--format", "oms", "--key", f"hsm:2?label=modelseal&pin-value={URI_PIN}", model)
    assert signed.code == 2 and URI_PIN not in signed.err + signed.out and not (model / "model.sig").exists()
    published = cli("publish", "--image", "127.0.0.1:9/models/m:v1", "--plain-http", "--from", model,
                    "--sign-key", f"hsm:2?pin-value={URI_PIN}", "--result-file", tmp_path / "result.json")  # fmt: skip
    assert published.code == 2 and URI_PIN not in published.err + published.out, published.err
    assert "MODELSEAL_HSM_PIN" in published.err and not (tmp_path / "result.json").exists()


def test_securesystemslib_logs_nothing_of_a_failed_kms_signer(
    cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """securesystemslib logs a failed KMS call with the key's name and the service's text: the CLI's
    error is its one line, naming the failure's type."""
    import logging

    from securesystemslib.signer import Signer  # type: ignore[attr-defined]

    def failing(uri: str, *_: object) -> None:
        logging.getLogger("securesystemslib.signer._aws_signer").error("Failed to sign using %s: denied", uri)
        raise ValueError(f"cannot open {uri}")

    monkeypatch.setattr(Signer, "from_priv_key_uri", staticmethod(failing))
    monkeypatch.setenv("MODELSEAL_SIGNER_PUBLIC_KEY", str(TESTDATA / "keys" / "ecdsa-p256.pub"))
    model = small_model(tmp_path / "model")
    r = cli("sign", "--format", "oms", "--key", "awskms:arn:aws:kms:eu-west-1:1:key/secret-name", model)
    assert r.code == 3 and r.err == "error: signer awskms: cannot be opened (ValueError)\n"
    assert not [rec for rec in caplog.records if rec.name.startswith("securesystemslib")]


def test_a_pin_given_where_no_key_is_taken_is_not_quoted_back(cli: Run) -> None:
    """argparse quotes an argument it does not take: a signer URI given to verify came back whole."""
    r = cli("verify", "x.json", "--key", f"hsm:2?label=modelseal&pin-value={URI_PIN}")
    assert r.code == 2 and r.err.startswith(
        "error: unrecognized arguments: --key hsm:2... (modelseal verify --help)\n"
    )
    choice = cli(f"hsm:2;pin-value={URI_PIN}")
    assert choice.code == 2 and "invalid choice: 'hsm:2...'" in choice.err and URI_PIN not in choice.err
    bare = cli("verify", "x.json", "--key", f"hsm:pin-value={URI_PIN}")  # red team: quoted whole
    assert bare.code == 2 and URI_PIN not in bare.err and "--key hsm:..." in bare.err, bare.err


@pytest.mark.parametrize("pin", ["97\\5310", "97'53\"10", "97\x1b5310", "97\u202e5310"])
def test_a_pin_argparse_quotes_with_escapes_is_not_quoted_back(cli: Run, pin: str) -> None:
    """argparse quotes an unknown command with repr(), which escapes a backslash, a quote or a control
    character differently from the message's own escaping: such a PIN came back whole."""
    r = cli(f"hsm:2;pin-value={pin}")
    assert r.code == 2 and "invalid choice: 'hsm:2...'" in r.err, r.err
    assert "pin-value" not in r.err and "5310" not in r.err and "10" not in r.err.split("(choose", 1)[0]
