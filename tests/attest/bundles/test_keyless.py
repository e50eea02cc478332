"""Keyless Sigstore bundles, verified offline by ``sigstore`` against the trust root it ships.

The fixture is a real public-good bundle (see testdata/sigstore/SOURCES.md).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

import sigstore
from tests.cli.conftest import Run
from tests.conftest import TESTDATA

BUNDLE = TESTDATA / "sigstore" / "dsse_v001_bundle.sigstore.json"
IDENTITY = "https://github.com/prefix-dev/sigstore-example/.github/workflows/action.yaml@refs/heads/main"
ISSUER = "https://token.actions.githubusercontent.com"
PREDICATE = "https://schemas.conda.org/attestations-publish-1.schema.json"
SUBJECT = "3862a3677d33a45134a2ce3452b23f8f7459fe581cefbc3818272648cd987cfb"
STAGING_ROOT = (
    Path(sigstore.__file__).parent
    / "_store"
    / "https%3A%2F%2Ftuf-repo-cdn.sigstage.dev"
    / "trusted_root.json"
)
KEYLESS = (
    "--certificate-identity",
    IDENTITY,
    "--certificate-oidc-issuer",
    ISSUER,
    "--predicate-type",
    PREDICATE,
)


def test_public_good_bundle_verifies_offline(cli: Run) -> None:
    r = cli("verify", BUNDLE, *KEYLESS, "--sha256", SUBJECT)
    assert r.code == 0, r.err
    assert r.out.splitlines()[0] == f"verified: signed by certificate of {IDENTITY}, OIDC issuer {ISSUER}"
    assert f"  subject {SUBJECT} (signed-package-2.1.0-hb0f4dca_0.conda)" in r.out.splitlines()
    doc = json.loads(cli("verify", BUNDLE, *KEYLESS, "--json").out)
    assert doc["admitted"] and doc["details"]["certificate_identity"] == IDENTITY
    assert doc["details"]["oidc_issuer"] == ISSUER and doc["details"]["method"] == "certificate"


def test_aliases_and_regular_expressions(cli: Run) -> None:
    args = ("--cert-identity-regexp", r"https://github\.com/prefix-dev/.*@refs/heads/main",
            "--cert-oidc-issuer-regexp", r"https://token\.actions\.githubusercontent\.com")  # fmt: skip
    assert cli("verify", BUNDLE, *args, "--predicate-type", PREDICATE).code == 0
    # a regular expression must match the whole identity, not a part of it
    part = cli("verify", BUNDLE, "--cert-identity-regexp", "prefix-dev", "--cert-oidc-issuer", ISSUER,
               "--predicate-type", PREDICATE)  # fmt: skip
    assert part.code == 1 and "does not match the one required" in part.err


@pytest.mark.parametrize(
    ("flags", "text"),
    [
        (("--certificate-identity", "https://github.com/evil/x", "--certificate-oidc-issuer", ISSUER),
         "certificate identity https://github.com/prefix-dev"),
        (("--certificate-identity", IDENTITY, "--certificate-oidc-issuer", "https://accounts.google.com"),
         "OIDC issuer 'https://token.actions.githubusercontent.com' does not match"),
        (("--certificate-identity", IDENTITY, "--certificate-oidc-issuer", ISSUER, "--trusted-root", STAGING_ROOT),
         "sigstore refused the bundle"),
    ],
)  # fmt: skip
def test_wrong_identity_issuer_or_root_is_refused(cli: Run, flags: tuple[object, ...], text: str) -> None:
    r = cli("verify", BUNDLE, *flags, "--predicate-type", PREDICATE)
    assert r.code == 1 and text in r.err, r.err
    assert r.err.count("\n") == 1


def test_policy_checks_apply_to_keyless_statements(cli: Run) -> None:
    other = cli("verify", BUNDLE, "--certificate-identity", IDENTITY, "--certificate-oidc-issuer", ISSUER)
    assert other.code == 1 and f'predicate type "{PREDICATE}"' in other.err
    wrong = cli("verify", BUNDLE, *KEYLESS, "--sha256", "ab" * 32)
    assert wrong.code == 1 and f"attestation is for {SUBJECT}" in wrong.err


def test_an_edited_payload_is_refused(cli: Run, tmp_path: Path) -> None:
    bundle = json.loads(BUNDLE.read_bytes())
    statement = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    statement["subject"][0]["digest"]["sha256"] = "ab" * 32
    bundle["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    edited = tmp_path / "edited.sigstore.json"
    edited.write_text(json.dumps(bundle))
    r = cli("verify", edited, *KEYLESS)
    assert r.code == 1 and "sigstore refused the bundle" in r.err


def test_a_broken_trusted_root_is_one_line(cli: Run, tmp_path: Path) -> None:
    root = tmp_path / "root.json"
    root.write_text('{"mediaType": "nope"}')
    r = cli("verify", BUNDLE, *KEYLESS, "--trusted-root", root)
    assert r.code == 1 and "is not a Sigstore trusted root" in r.err
    missing = cli("verify", BUNDLE, *KEYLESS, "--trusted-root", tmp_path / "absent.json")
    assert missing.code == 1 and "No such file or directory" in missing.err
