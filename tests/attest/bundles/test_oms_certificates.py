"""The OMS certificate method, with a CA made at test time; model_signing referees each case."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.attest.ca import chain, issue
from tests.attest.oms_referee import MODEL_SIGNING, small_model
from tests.cli.conftest import Run


def ms(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MODEL_SIGNING, *map(str, args)], capture_output=True, text=True, check=False, timeout=120
    )


def ms_sign_certificate(model: Path, leaf: Path, key: Path, chain_files: list[Path]) -> None:
    extra = [a for c in chain_files for a in ("--certificate_chain", c)]
    r = ms("sign", "certificate", model, "--private_key", key, "--signing_certificate", leaf, *extra,
           "--signature", model / "model.sig")  # fmt: skip
    assert r.returncode == 0, r.stderr


def ms_accepts(model: Path, roots: list[Path]) -> bool:
    extra = [a for c in roots for a in ("--certificate_chain", c)]
    return ms("verify", "certificate", model, "--signature", model / "model.sig", *extra).returncode == 0


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    (tmp_path / "ca").mkdir()
    chain(tmp_path / "ca")
    return tmp_path / "ca"


def test_model_signing_certificate_bundles_verify(cli: Run, tmp_path: Path, ca: Path) -> None:
    model = small_model(tmp_path / "model")
    ms_sign_certificate(model, ca / "leaf.pem", ca / "leaf.key", [ca / "intermediate.pem"])
    assert ms_accepts(model, [ca / "root.pem"])
    r = cli("verify", model / "model.sig", "--certificate-chain", ca / "root.pem", "--artifact", model)
    assert r.code == 0, r.err
    assert "signed by certificate of CN=leaf,O=modelseal tests" in r.out.splitlines()[0]
    # the intermediate may come from the verifier's file instead of the bundle; roots and
    # intermediates in one file work too
    both = tmp_path / "both.pem"
    both.write_bytes((ca / "root.pem").read_bytes() + (ca / "intermediate.pem").read_bytes())
    assert cli("verify", model / "model.sig", "--certificate-chain", both, "--artifact", model).code == 0
    (model / "config.json").write_text("{}")
    assert not ms_accepts(model, [ca / "root.pem"])
    changed = cli("verify", model / "model.sig", "--certificate-chain", ca / "root.pem", "--artifact", model)
    assert changed.code == 1 and "changed: config.json" in changed.err


def test_another_chain_is_refused_by_both(cli: Run, tmp_path: Path, ca: Path) -> None:
    model = small_model(tmp_path / "model")
    ms_sign_certificate(model, ca / "leaf.pem", ca / "leaf.key", [ca / "intermediate.pem"])
    other = tmp_path / "other"
    other.mkdir()
    chain(other, "other-")
    assert not ms_accepts(model, [other / "other-root.pem"])
    r = cli(
        "verify", model / "model.sig", "--certificate-chain", other / "other-root.pem", "--artifact", model
    )
    assert r.code == 1 and "does not chain to a trusted root" in r.err
    # an intermediate alone is no root
    alone = cli("verify", model / "model.sig", "--certificate-chain", ca / "intermediate.pem")
    assert alone.code == 1 and "no self-signed root certificate" in alone.err
    # a key-method verification of a certificate bundle says what to give
    key = cli("verify", model / "model.sig", "--trusted", tmp_path / "ca" / "leaf.pem")
    assert key.code == 1


def test_a_leaf_not_for_signing_is_refused_by_both(cli: Run, tmp_path: Path, ca: Path) -> None:
    from tests.attest.ca import Issued

    root_pem, inter_pem = ca / "root.pem", ca / "intermediate.pem"
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    inter = Issued(
        x509.load_pem_x509_certificate(inter_pem.read_bytes()),
        serialization.load_pem_private_key((ca / "intermediate.key").read_bytes(), None),  # type: ignore[arg-type]
        inter_pem,
        ca / "intermediate.key",
    )
    plain = issue(ca, "plain", issuer=inter, code_signing=False, digital_signature=False)
    model = small_model(tmp_path / "model")
    ms_sign_certificate(model, plain.cert_file, plain.key_file, [inter_pem])
    assert not ms_accepts(model, [root_pem])
    r = cli("verify", model / "model.sig", "--certificate-chain", root_pem, "--artifact", model)
    assert r.code == 1 and "is not for signing" in r.err


def test_checked_at_the_leafs_start_as_model_signing_does(cli: Run, tmp_path: Path) -> None:
    """An expired leaf still verifies (model_signing checks the chain at notBefore)."""
    ca = tmp_path / "ca"
    ca.mkdir()
    root = issue(ca, "root", ca=True, not_before=datetime.now(UTC) - timedelta(days=400), days=3650)
    old = issue(ca, "old", issuer=root, not_before=datetime.now(UTC) - timedelta(days=300), days=30)
    model = small_model(tmp_path / "model")
    ms_sign_certificate(model, old.cert_file, old.key_file, [root.cert_file])
    assert ms_accepts(model, [root.cert_file])
    assert (
        cli("verify", model / "model.sig", "--certificate-chain", root.cert_file, "--artifact", model).code
        == 0
    )


def test_modelseal_certificate_signatures_pass_model_signing(cli: Run, tmp_path: Path, ca: Path) -> None:
    model = small_model(tmp_path / "model")
    r = cli("sign", "--format", "oms", "--key", ca / "leaf.key", "--signing-certificate", ca / "leaf.pem",
            "--certificate-chain", ca / "intermediate.pem", model)  # fmt: skip
    assert r.code == 0, r.err
    assert ms_accepts(model, [ca / "root.pem"])
    assert (
        cli("verify", model / "model.sig", "--certificate-chain", ca / "root.pem", "--artifact", model).code
        == 0
    )
    wrong = cli(
        "sign", "--format", "oms", "--key", ca / "leaf.key", "--signing-certificate", ca / "root.pem", model
    )
    assert wrong.code == 1 and "is not the certificate of the signing key" in wrong.err
    lone = cli(
        "sign", "--format", "oms", "--key", ca / "leaf.key", "--certificate-chain", ca / "root.pem", model
    )
    assert lone.code == 2


def test_keyless_flag_usage_errors(cli: Run, tmp_path: Path) -> None:
    sig = tmp_path / "x.sig"
    sig.write_text("{}")
    assert cli("verify", sig, "--certificate-identity", "a@b").code == 2
    assert (
        cli(
            "verify",
            sig,
            "--cert-identity",
            "a@b",
            "--cert-oidc-issuer",
            "x",
            "--certificate-oidc-issuer-regexp",
            "y",
        ).code
        == 2
    )
    bad = cli("verify", sig, "--certificate-identity-regexp", "(", "--certificate-oidc-issuer", "x")
    assert bad.code == 2 and "bad regular expression" in bad.err
    both = cli(
        "verify",
        sig,
        "--certificate-chain",
        sig,
        "--certificate-identity",
        "a",
        "--certificate-oidc-issuer",
        "b",
    )
    assert both.code == 2
