"""``verify --policy`` on OMS and Sigstore bundles: the same verdicts as the flags, and the referees agree.

The keyless OMS bundle is model_signing's own public-good vector
(testdata/sigstore/SOURCES.md); model_signing verifies it offline when given
a trust configuration made from the trust root ``sigstore`` ships.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import sigstore
from modelseal.attest.bundles.certificates import load_certificates
from modelseal.attest.dsse.keys import load_public_key
from tests.attest.bundles.test_oms_certificates import ms_accepts, ms_sign_certificate
from tests.attest.ca import chain, issue
from tests.attest.oms_referee import MODEL_SIGNING, ec_key_pair, ms_sign, ms_verify, small_model
from tests.cli.conftest import Run
from tests.conftest import TESTDATA

OMS = "https://model_signing/signature/v1.0"
KEYLESS_MODEL = TESTDATA / "sigstore" / "v1.1.0-sigstore"
SIGNER, ISSUER = "stefanb@us.ibm.com", "https://sigstore.verify.ibm.com/oauth2"
STORE = Path(sigstore.__file__).parent / "_store"
PUBLIC_GOOD, STAGING = (STORE / f"https%3A%2F%2Ftuf-repo-cdn.{h}.dev" for h in ("sigstore", "sigstage"))
KEYLESS_FLAGS = ("--certificate-identity", SIGNER, "--certificate-oidc-issuer", ISSUER)
HEAD = "apiVersion: modelseal.dev/v1\nkind: TrustPolicy\n"
IDENTITY = f"identities:\n  - identity: {SIGNER}\n    issuer: {ISSUER}\n"


def policy(tmp_path: Path, body: str, name: str = "policy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(HEAD + body)
    return path


def ms_keyless(model: Path, tmp_path: Path, identity: str = SIGNER) -> bool:
    """model_signing's keyless verification, offline: the trust root sigstore ships, no TUF update."""
    config = tmp_path / "trust_config.json"
    config.write_text(json.dumps({
        "mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
        "trustedRoot": json.loads((PUBLIC_GOOD / "trusted_root.json").read_text()),
        "signingConfig": json.loads((PUBLIC_GOOD / "signing_config.v0.2.json").read_text()),
    }))  # fmt: skip
    r = subprocess.run(
        [MODEL_SIGNING, "verify", "sigstore", model, "--signature", model / "model.sig", "--identity", identity,
         "--identity_provider", ISSUER, "--trust_config", config],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    return r.returncode == 0


@pytest.fixture
def keyless_model(tmp_path: Path) -> Path:
    model = tmp_path / "v1.1.0-sigstore"
    shutil.copytree(KEYLESS_MODEL, model)
    return model


def test_the_keyless_oms_vector_verifies_as_model_signing_says(
    cli: Run, tmp_path: Path, keyless_model: Path
) -> None:
    sig = keyless_model / "model.sig"
    assert ms_keyless(keyless_model, tmp_path)
    r = cli("verify", sig, *KEYLESS_FLAGS, "--artifact", keyless_model)
    assert r.code == 0, r.err
    assert r.out.splitlines() == [
        f"verified: OpenSSF Model Signing bundle (Sigstore bundle v0.3) signed by certificate of {SIGNER}",
        "  model v1.1.0-sigstore: 2 signed file(s), files serialization, sha256",
        "  model digest 61d4849d9d90076d6215f4d525f13d6574af8e3f67aef3e6f36fc40a14fdd226",
        "  artifact matches: 2 file(s) hashed and compared; ignored: model.sig",
    ]
    by_policy = cli("verify", sig, "--policy", policy(tmp_path, IDENTITY + f"predicateTypes: [{OMS}]\n"),
                    "--artifact", keyless_model)  # fmt: skip
    assert by_policy.code == 0 and by_policy.out == r.out
    # the flags and the policy give the same verdict, field for field
    flags_json = cli("verify", sig, *KEYLESS_FLAGS, "--artifact", keyless_model, "--json").out
    policy_json = cli(
        "verify", sig, "--policy", tmp_path / "policy.yaml", "--artifact", keyless_model, "--json"
    )
    assert json.loads(flags_json) == json.loads(policy_json.out)
    assert json.loads(flags_json)["details"]["oidc_issuer"] == ISSUER
    (keyless_model / "signme-2").write_text("tampered")
    assert not ms_keyless(keyless_model, tmp_path)
    for args in (KEYLESS_FLAGS, ("--policy", tmp_path / "policy.yaml")):
        changed = cli("verify", sig, *args, "--artifact", keyless_model)
        assert changed.code == 1 and changed.err.endswith("does not match the signature: changed: signme-2\n")


def test_another_identity_is_refused_by_both(cli: Run, tmp_path: Path, keyless_model: Path) -> None:
    assert not ms_keyless(keyless_model, tmp_path, identity="other@us.ibm.com")
    other = policy(tmp_path, IDENTITY.replace(SIGNER, "other@us.ibm.com") + f"predicateTypes: [{OMS}]\n")
    r = cli("verify", keyless_model / "model.sig", "--policy", other)
    assert r.code == 1 and f"certificate identity {SIGNER} does not match" in r.err
    pattern = IDENTITY.replace("identity:", "identityRegexp:").replace(SIGNER, "'.*@us\\.ibm\\.com'")
    regexp = policy(tmp_path, pattern + f"predicateTypes: [{OMS}]\n", "regexp.yaml")
    assert cli("verify", keyless_model / "model.sig", "--policy", regexp).code == 0
    # a flag overrides the policy's identities, as the other flags override the file
    override = cli("verify", keyless_model / "model.sig", "--policy", regexp,
                   "--certificate-identity", "x@us.ibm.com", "--certificate-oidc-issuer", ISSUER)  # fmt: skip
    assert override.code == 1 and "does not match the one required" in override.err


@pytest.mark.parametrize(
    ("body", "reason", "text"),
    [
        (IDENTITY, "predicate_type", f'predicate type "{OMS}" (an OpenSSF Model Signing signature), want one of'),
        (IDENTITY + f"predicateTypes: [{OMS}]\nthreshold: 2\nkeys:\n  - dir: KEYS\n", "threshold_not_met",
         "a Sigstore bundle carries one signature, and the policy requires 2 distinct signers"),
        (IDENTITY + f"predicateTypes: [{OMS}]\ntrustedRoot: STAGING\n", "signature_invalid",
         "sigstore refused the bundle"),
        (IDENTITY + f"predicateTypes: [{OMS}]\nmaxAge: 2160h\n", "issued_time_invalid",
         "an OMS signature carries no issue time"),
        (f"predicateTypes: [{OMS}]\nkeys:\n  - dir: KEYS\n", "no_trusted_keys",
         "the bundle is signed with a certificate, and no certificate root or Sigstore identity is trusted"),
    ],
)  # fmt: skip
def test_policy_rules_apply_to_keyless_bundles(
    cli: Run, tmp_path: Path, keyless_model: Path, body: str, reason: str, text: str
) -> None:
    body = body.replace("KEYS", str(TESTDATA / "keys")).replace("STAGING", str(STAGING / "trusted_root.json"))
    r = cli("verify", keyless_model / "model.sig", "--policy", policy(tmp_path, body), "--json")
    doc = json.loads(r.out)
    assert r.code == 1 and doc["reason"] == reason and text in doc["message"], doc["message"]


def test_a_revoked_certificate_key_is_refused(cli: Run, tmp_path: Path, keyless_model: Path) -> None:
    admitted = json.loads(cli("verify", keyless_model / "model.sig", *KEYLESS_FLAGS, "--json").out)
    keyid = admitted["signers"][0]["keyid"]
    body = IDENTITY + f"predicateTypes: [{OMS}]\nrevokedKeyIds: ['{keyid}']\n"
    r = cli("verify", keyless_model / "model.sig", "--policy", policy(tmp_path, body))
    assert r.code == 1 and f"the certificate's key {keyid[:16]} is revoked (revokedKeyIds)" in r.err


def test_trusted_root_flag_replaces_only_the_policys_root(
    cli: Run, tmp_path: Path, keyless_model: Path
) -> None:
    shutil.copy(PUBLIC_GOOD / "trusted_root.json", tmp_path / "root.json")
    body = IDENTITY + f"predicateTypes: [{OMS}]\ntrustedRoot: root.json\n"
    good = policy(tmp_path, body)
    assert cli("verify", keyless_model / "model.sig", "--policy", good).code == 0
    staged = cli(
        "verify",
        keyless_model / "model.sig",
        "--policy",
        good,
        "--trusted-root",
        STAGING / "trusted_root.json",
    )
    assert staged.code == 1 and "sigstore refused the bundle" in staged.err


def test_key_bundles_under_a_policy(cli: Run, tmp_path: Path) -> None:
    model = small_model(tmp_path / "model")
    priv, pub = ec_key_pair(tmp_path, "p256")
    ms_sign(model, priv, model / "model.sig")
    assert ms_verify(model, model / "model.sig", pub) is None
    keys = f"keys:\n  - file: {pub}\n"
    listed = policy(tmp_path, keys + f"predicateTypes: [{OMS}]\n")
    flags = cli("verify", model / "model.sig", "--trusted", pub, "--artifact", model, "--json")
    by_policy = cli("verify", model / "model.sig", "--policy", listed, "--artifact", model, "--json")
    assert flags.code == by_policy.code == 0 and json.loads(flags.out) == json.loads(by_policy.out)
    unlisted = cli("verify", model / "model.sig", "--policy", policy(tmp_path, keys, "socair.yaml"))
    assert unlisted.code == 1 and f'predicate type "{OMS}"' in unlisted.err
    # --predicate-type overrides the file's list, as for envelopes
    assert (
        cli("verify", model / "model.sig", "--policy", listed, "--predicate-type", "https://x/v1").code == 1
    )
    assert (
        cli(
            "verify",
            model / "model.sig",
            "--policy",
            policy(tmp_path, keys, "s.yaml"),
            "--predicate-type",
            OMS,
        ).code
        == 0
    )
    windowed = policy(
        tmp_path, keys + "    notAfter: 2020-01-01T00:00:00Z\n" + f"predicateTypes: [{OMS}]\n", "w.yaml"
    )
    expired = cli("verify", model / "model.sig", "--policy", windowed, "--json")
    assert expired.code == 1 and json.loads(expired.out)["reason"] == "key_inactive"
    keyid = load_public_key(pub.read_bytes()).keyid
    revoked = policy(tmp_path, keys + f"predicateTypes: [{OMS}]\nrevokedKeyIds: ['{keyid}']\n", "r.yaml")
    assert (
        json.loads(cli("verify", model / "model.sig", "--policy", revoked, "--json").out)["reason"]
        == "key_inactive"
    )


def test_certificate_bundles_under_a_policy(cli: Run, tmp_path: Path) -> None:
    (tmp_path / "ca").mkdir()
    chain(tmp_path / "ca")
    ca = tmp_path / "ca"
    model = small_model(tmp_path / "model")
    ms_sign_certificate(model, ca / "leaf.pem", ca / "leaf.key", [ca / "intermediate.pem"])
    assert ms_accepts(model, [ca / "root.pem"])
    roots = policy(tmp_path, f"certificateRoots:\n  - file: ca/root.pem\npredicateTypes: [{OMS}]\n")
    flags = cli(
        "verify", model / "model.sig", "--certificate-chain", ca / "root.pem", "--artifact", model, "--json"
    )
    by_policy = cli("verify", model / "model.sig", "--policy", roots, "--artifact", model, "--json")
    assert flags.code == by_policy.code == 0 and json.loads(flags.out) == json.loads(by_policy.out)
    (tmp_path / "other").mkdir()
    chain(tmp_path / "other", "other-")
    assert not ms_accepts(model, [tmp_path / "other" / "other-root.pem"])
    other = policy(
        tmp_path, f"certificateRoots:\n  - file: other/other-root.pem\npredicateTypes: [{OMS}]\n", "o.yaml"
    )
    refused = cli("verify", model / "model.sig", "--policy", other)
    assert refused.code == 1 and "does not chain to a trusted root" in refused.err
    # keys and identities in the same policy do not stand in for a root
    keyless_only = policy(tmp_path, IDENTITY + f"predicateTypes: [{OMS}]\n", "k.yaml")
    none = cli("verify", model / "model.sig", "--policy", keyless_only)
    assert none.code == 1 and "not a Sigstore keyless one, and no certificate root is trusted" in none.err


def test_a_keyless_style_certificate_never_counts_through_a_root(cli: Run, tmp_path: Path) -> None:
    """A leaf carrying Fulcio's OIDC-issuer extension is judged by identities only: listing
    Fulcio's root under certificateRoots (or --certificate-chain) must not admit any OIDC account."""
    (tmp_path / "ca").mkdir()
    root = issue(tmp_path / "ca", "root", ca=True, days=3650)
    leaf = issue(tmp_path / "ca", "leaf", issuer=root, oidc_issuer="https://accounts.example.com")
    model = small_model(tmp_path / "model")
    signed = cli("sign", "--format", "oms", "--key", leaf.key_file,
                 "--signing-certificate", leaf.cert_file, model)  # fmt: skip
    assert signed.code == 0, signed.err
    assert load_certificates([str(root.cert_file)])
    for args in (("--certificate-chain", root.cert_file),
                 ("--policy", policy(tmp_path, f"certificateRoots:\n  - file: {root.cert_file}\npredicateTypes: [{OMS}]\n"))):  # fmt: skip
        r = cli("verify", model / "model.sig", *args)
        assert r.code == 1, r.out
        assert "a Sigstore keyless certificate (OIDC issuer 'https://accounts.example.com')" in r.err


@pytest.mark.parametrize("length", [40, 200])
def test_fulcios_v2_issuer_extension_routes_to_the_identities_whatever_its_length(
    cli: Run, tmp_path: Path, length: int
) -> None:
    """Fulcio writes the issuer as a DER UTF8String (1.3.6.1.4.1.57264.1.8); one past 127 bytes has
    a long-form length (a GKE cluster's issuer URL can be that long). Such a leaf is still keyless:
    a root listed under certificateRoots must not admit it."""
    (tmp_path / "ca").mkdir()
    root = issue(tmp_path / "ca", "root", ca=True, days=3650)
    long_issuer = "https://container.googleapis.com/v1/projects/p/locations/l/clusters/" + "c" * length
    leaf = issue(tmp_path / "ca", "leaf", issuer=root, oidc_issuer_v2=long_issuer)
    model = small_model(tmp_path / "model")
    signed = cli("sign", "--format", "oms", "--key", leaf.key_file,
                 "--signing-certificate", leaf.cert_file, model)  # fmt: skip
    assert signed.code == 0, signed.err
    for args in (("--certificate-chain", root.cert_file),
                 ("--policy", policy(tmp_path, f"certificateRoots:\n  - file: {root.cert_file}\npredicateTypes: [{OMS}]\n"))):  # fmt: skip
        r = cli("verify", model / "model.sig", *args, "--artifact", model)
        assert r.code == 1, r.out
        assert f"a Sigstore keyless certificate (OIDC issuer '{long_issuer}')" in r.err, r.err


def test_generic_keyless_bundles_under_a_policy(cli: Run, tmp_path: Path) -> None:
    bundle = TESTDATA / "sigstore" / "dsse_v001_bundle.sigstore.json"
    subject = "3862a3677d33a45134a2ce3452b23f8f7459fe581cefbc3818272648cd987cfb"
    conda = "https://schemas.conda.org/attestations-publish-1.schema.json"
    identity = "https://github.com/prefix-dev/sigstore-example/.github/workflows/action.yaml@refs/heads/main"
    issuer = "https://token.actions.githubusercontent.com"
    body = f"identities:\n  - identity: {identity}\n    issuer: {issuer}\npredicateTypes: [{conda}]\n"
    flags = cli("verify", bundle, "--certificate-identity", identity, "--certificate-oidc-issuer", issuer,
                "--predicate-type", conda, "--sha256", subject, "--json")  # fmt: skip
    by_policy = cli("verify", bundle, "--policy", policy(tmp_path, body), "--sha256", subject, "--json")
    assert flags.code == by_policy.code == 0 and json.loads(flags.out) == json.loads(by_policy.out)
    other = cli("verify", bundle, "--policy", tmp_path / "policy.yaml", "--sha256", "ab" * 32)
    assert other.code == 1 and f"attestation is for {subject}" in other.err


def test_a_payload_sigstore_reads_otherwise_is_refused(cli: Run, tmp_path: Path) -> None:
    """sigstore's base64 reader skips characters outside the standard alphabet ('-' among them),
    modelseal's reads the URL-safe one: "----" in a keyless bundle's payload left sigstore verifying
    the signed statement while modelseal took the payload for an OMS one it could not read, so
    --artifact bound nothing and any file verified. The payload verified must be the one read."""
    bundle = json.loads((TESTDATA / "sigstore" / "dsse_v001_bundle.sigstore.json").read_text())
    payload = bundle["dsseEnvelope"]["payload"]
    bundle["dsseEnvelope"]["payload"] = payload[:8] + "----" + payload[8:]
    tampered = tmp_path / "tampered.sigstore.json"
    tampered.write_text(json.dumps(bundle))
    conda = "https://schemas.conda.org/attestations-publish-1.schema.json"
    identity = "https://github.com/prefix-dev/sigstore-example/.github/workflows/action.yaml@refs/heads/main"
    body = f"identities:\n  - identity: {identity}\n    issuer: https://token.actions.githubusercontent.com\n"
    listed = policy(tmp_path, body + f"predicateTypes: [{conda}]\n")
    (tmp_path / "evil.bin").write_bytes(b"not the signed package")
    r = cli("verify", tampered, "--policy", listed, "--artifact", tmp_path / "evil.bin")
    assert r.code == 1, r.out
    assert "the payload sigstore verified is not the one the envelope holds" in r.err, r.err


def test_a_forged_keyless_certificate_naming_the_identity_is_refused(cli: Run, tmp_path: Path) -> None:
    """Anyone can make a certificate with the right SAN and OIDC issuer: only Fulcio's chain,
    the SCT and the log entry (checked by sigstore, offline) make it keyless."""
    (tmp_path / "ca").mkdir()
    root = issue(tmp_path / "ca", "root", ca=True, days=3650)
    leaf = issue(tmp_path / "ca", "leaf", issuer=root, oidc_issuer=ISSUER, email=SIGNER)
    model = small_model(tmp_path / "model")
    signed = cli("sign", "--format", "oms", "--key", leaf.key_file, "--signing-certificate", leaf.cert_file,
                 "--certificate-chain", root.cert_file, model)  # fmt: skip
    assert signed.code == 0, signed.err
    for args in (KEYLESS_FLAGS, ("--policy", policy(tmp_path, IDENTITY + f"predicateTypes: [{OMS}]\n"))):
        r = cli("verify", model / "model.sig", *args, "--artifact", model)
        assert r.code == 1 and "sigstore refused the bundle" in r.err, r.err
