"""Trust-policy files naming certificate roots, Sigstore identities and a trusted root."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import sigstore
from modelseal.attest.policy.policy_file import parse_policy
from modelseal.errors import PolicyFileError
from tests.attest.ca import chain
from tests.conftest import TESTDATA

HEAD = "apiVersion: modelseal.dev/v1\nkind: TrustPolicy\n"
PUBLIC_GOOD = (
    Path(sigstore.__file__).parent
    / "_store"
    / "https%3A%2F%2Ftuf-repo-cdn.sigstore.dev"
    / "trusted_root.json"
)
GITHUB = "https://token.actions.githubusercontent.com"
IDENTITY = f"identities:\n  - identity: ci@example.com\n    issuer: {GITHUB}\n"


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    (tmp_path / "ca").mkdir()
    chain(tmp_path / "ca")
    return tmp_path / "ca"


def test_roots_identities_and_a_trusted_root(tmp_path: Path, ca: Path) -> None:
    shutil.copy(PUBLIC_GOOD, tmp_path / "root.json")
    inline = "".join(f"      {line}\n" for line in (ca / "intermediate.pem").read_text().splitlines())
    text = (
        HEAD
        + "certificateRoots:\n  - file: ca/root.pem\n  - pem: |\n"
        + inline
        + "identities:\n  - identity: ci@example.com\n    issuer: https://accounts.example.com\n"
        + "  - identityRegexp: 'https://github\\.com/acme/.*'\n    issuerRegexp: 'https://token\\..*'\n"
        + "trustedRoot: root.json\n"
    )
    policy = parse_policy(text, base=tmp_path, source="p.yaml")
    trust = policy.certificates
    assert [c.subject.rfc4514_string() for c in trust.roots] == [
        "CN=root,O=modelseal tests",
        "CN=intermediate,O=modelseal tests",
    ]
    exact, pattern = trust.identities
    assert exact.matches(["ci@example.com"], "https://accounts.example.com")
    assert not exact.matches(["ci@example.com"], GITHUB) and not exact.matches(["ci@example.co"], None)
    assert pattern.matches(["x", "https://github.com/acme/r/.github/workflows/a.yml@refs/heads/main"], GITHUB)
    # a pattern matches the whole value, never a part of it
    assert not pattern.matches(["https://evil.example/https://github.com/acme/x"], GITHUB)
    assert trust.trusted_root == PUBLIC_GOOD.read_bytes()
    assert trust.trusted_root_source == str(tmp_path / "root.json")
    assert len(policy.keys) == 0 and policy.threshold == 1


def test_fingerprint_follows_the_authorities(tmp_path: Path, ca: Path) -> None:
    def fp(extra: str) -> str:
        return parse_policy(HEAD + extra, base=tmp_path).fingerprint()

    shutil.copy(PUBLIC_GOOD, tmp_path / "root.json")
    roots = "certificateRoots:\n  - file: ca/root.pem\n"
    prints = {
        fp(roots),
        fp(IDENTITY),
        fp(IDENTITY.replace("ci@", "cd@")),
        fp(IDENTITY.replace("issuer:", "issuerRegexp:")),
        fp(IDENTITY + "trustedRoot: root.json\n"),
        fp(roots + IDENTITY),
    }
    assert len(prints) == 6
    assert fp(IDENTITY) == fp(IDENTITY)


def test_keys_and_authorities_together(tmp_path: Path) -> None:
    text = HEAD + f"keys:\n  - file: {TESTDATA / 'keys' / 'ecdsa-p256.pub'}\n" + IDENTITY
    policy = parse_policy(text, base=tmp_path)
    assert len(policy.keys) == 1 and len(policy.certificates.identities) == 1


def bad_cases(ca: Path) -> list[tuple[str, str]]:
    root = f"certificateRoots:\n  - file: {ca / 'root.pem'}\n"
    return [
        (HEAD + "identities: []\n", "p.yaml: identities: List should have at least 1 item"),
        (HEAD + "identities: ci@example.com\n", "p.yaml: identities: Input should be a valid list"),
        (HEAD + "identities:\n  - identity: a\n", "p.yaml: identities.0: give exactly one of issuer and issuerRegexp"),
        (HEAD + f"identities:\n  - issuer: {GITHUB}\n", "p.yaml: identities.0: give exactly one of identity and identityRegexp"),
        (HEAD + f"identities:\n  - identity: a\n    identityRegexp: a\n    issuer: {GITHUB}\n", "give exactly one of identity and identityRegexp"),
        (HEAD + f"identities:\n  - identityRegexp: '(a'\n    issuer: {GITHUB}\n", "p.yaml: identities.0: bad regular expression: missing ), unterminated subpattern"),
        (HEAD + f"identities:\n  - identity: a\n    issuer: {GITHUB}\n    subject: b\n", "p.yaml: identities.0: unknown key 'subject' (known: identity, identityRegexp, issuer, issuerRegexp)"),
        (HEAD + f"identities:\n  - identity: 5\n    issuer: {GITHUB}\n", "identities.0.identity: Input should be a valid string (quote it"),
        (HEAD + f"identities:\n  - identity: ''\n    issuer: {GITHUB}\n", "identities.0.identity: String should have at least 1 character"),
        (HEAD + f"identities:\n  - identity: a\n    identity: b\n    issuer: {GITHUB}\n", "duplicate key 'identity'"),
        (HEAD + IDENTITY + "  - identity: ci@example.com\n" + f"    issuer: {GITHUB}\n", "p.yaml: identities.1: the same identity is listed twice"),
        (HEAD + "certificateRoots:\n  - {}\n", "p.yaml: certificateRoots.0: give exactly one of file or pem"),
        (HEAD + f"certificateRoots:\n  - file: {ca / 'root.pem'}\n    pem: x\n", "certificateRoots.0: give exactly one of file or pem"),
        (HEAD + "certificateRoots:\n  - file: missing.pem\n", "p.yaml: certificateRoots.0: read certificate file"),
        (HEAD + "certificateRoots:\n  - pem: hello\n", "p.yaml: certificateRoots.0: pem holds no PEM certificate"),
        (HEAD + f"certificateRoots:\n  - file: {ca / 'root.key'}\n", "root.key holds no PEM certificate"),
        (HEAD + f"certificateRoots:\n  - file: {ca / 'intermediate.pem'}\n", "p.yaml: certificateRoots: no self-signed root certificate"),
        (HEAD + root + f"  - file: {ca / 'root.pem'}\n", "p.yaml: certificateRoots.1: certificate "),
        (HEAD + root + "trustedRoot: x.json\n", "p.yaml: trustedRoot: it serves identities, and the policy lists none"),
        (HEAD + IDENTITY + "trustedRoot: missing.json\n", "p.yaml: trustedRoot: read trusted root"),
        (HEAD + IDENTITY + f"trustedRoot: {ca / 'root.pem'}\n", "is not a Sigstore trusted root"),
        (HEAD + IDENTITY + "trustedRoot: [a]\n", "p.yaml: trustedRoot: Input should be a valid string"),
        (HEAD + IDENTITY + "threshold: 2\n", "threshold 2 is more than the 0 distinct key(s) given"),
        (HEAD + "keys: []\n" + IDENTITY, "p.yaml: keys: List should have at least 1 item"),
    ]  # fmt: skip


def test_bad_authorities_are_one_line_naming_the_file_and_field(tmp_path: Path, ca: Path) -> None:
    for text, message in bad_cases(ca):
        with pytest.raises(PolicyFileError) as info:
            parse_policy(text, base=tmp_path, source="p.yaml")
        assert info.value.message.startswith("p.yaml: "), info.value.message
        assert message in info.value.message, (message, info.value.message)
        assert "\n" not in info.value.message


@pytest.mark.parametrize(
    ("field", "value"),
    [("certificateAuthorities", []), ("tlogs", []), ("certificateAuthorities.0.rawBytes", "AAAA")],
)
def test_a_trusted_root_sigstore_reads_but_cannot_verify_with_is_a_policy_error(
    tmp_path: Path, field: str, value: object
) -> None:
    """sigstore's reader takes a root without Fulcio certificates, without logs or with an
    unreadable certificate; its verifier then raises (ValueError, MetadataError): the policy is
    refused when it is read, not each bundle with an internal error."""
    root = json.loads(PUBLIC_GOOD.read_text())
    if field.endswith("rawBytes"):
        root["certificateAuthorities"][0]["certChain"]["certificates"][0]["rawBytes"] = value
    else:
        root[field] = value
    (tmp_path / "root.json").write_text(json.dumps(root))
    with pytest.raises(PolicyFileError) as info:
        parse_policy(HEAD + IDENTITY + "trustedRoot: root.json\n", base=tmp_path, source="p.yaml")
    assert info.value.message.startswith("p.yaml: trustedRoot: trusted root "), info.value.message
    assert "is not a Sigstore trusted root" in info.value.message and "\n" not in info.value.message
