"""The command-line side of Sigstore bundles: OMS signing, certificate and keyless flags.

``verify`` and ``sign`` (in :mod:`modelseal.cli.attest_commands`) call in here
for what concerns bundles: the flags, the authority they name, binding a
bundle to ``--artifact``, and ``sign --format oms``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from modelseal.errors import KeyFileError, UsageError
from modelseal.files import write_atomic
from modelseal.text import printable

if TYPE_CHECKING:
    from modelseal.attest.digests.digest import DirectoryDigest
    from modelseal.attest.dsse.keys import PublicKey
    from modelseal.attest.policy.trust import TrustPolicy
    from modelseal.attest.verdict import Verdict

__all__ = [
    "add_sign_flags",
    "add_verify_flags",
    "authority_wanted",
    "sign_oms",
    "verify_bundle",
    "with_flag_authorities",
]


def add_sign_flags(sign: argparse.ArgumentParser) -> None:
    """``sign``'s OMS flags."""
    sign.add_argument(
        "--format",
        choices=("socair", "oms"),
        default="socair",
        help="socair: a report envelope (default); oms: an OpenSSF Model Signing model.sig",
    )
    sign.add_argument("--shard-size", type=int, metavar="BYTES", help="--format oms: sign shards of BYTES")
    sign.add_argument(
        "--ignore-path", action="append", default=[], metavar="PATH", help="--format oms: leave PATH out"
    )
    sign.add_argument(
        "--signing-certificate",
        metavar="PEM",
        help="--format oms: sign with the certificate method (the key's certificate)",
    )
    sign.add_argument(
        "--certificate-chain",
        action="append",
        default=[],
        metavar="PEM",
        help="--format oms: certificates up to the root",
    )


def add_verify_flags(verify: argparse.ArgumentParser) -> None:
    """``verify``'s certificate, keyless and OMS flags."""
    verify.add_argument(
        "--certificate-chain",
        action="append",
        metavar="PEM",
        help="certificate method: trusted root (and intermediate) certificates; repeat or give one file",
    )
    for flag, metavar, text in (
        ("identity", "ID", "keyless: the signer's identity (the certificate's SAN)"),
        ("identity-regexp", "RE", "keyless: the signer's identity, as a full-match regular expression"),
        ("oidc-issuer", "URL", "keyless: the OIDC issuer that vouched for the identity"),
        ("oidc-issuer-regexp", "RE", "keyless: the OIDC issuer, as a full-match regular expression"),
    ):
        verify.add_argument(f"--certificate-{flag}", f"--cert-{flag}", metavar=metavar, help=text)
    verify.add_argument(
        "--trusted-root",
        metavar="FILE",
        help="keyless: a Sigstore trusted root (default: the public-good one)",
    )
    verify.add_argument(
        "--ignore-unsigned-files",
        action="store_true",
        help="OMS bundles: check only the files the signature names; new files are not an error",
    )


def sign_oms(args: argparse.Namespace) -> int:
    """``modelseal sign --format oms``: write an OpenSSF Model Signing bundle."""
    from modelseal.attest.bundles.oms import canonical_path
    from modelseal.attest.bundles.oms_sign import sign_model
    from modelseal.attest.signing.signers import load_signer
    from modelseal.errors import VerificationError

    if args.model is None or args.report is not None:
        raise UsageError("--format oms signs a model: modelseal sign --format oms --key KEY MODEL")
    if args.shard_size is not None and args.shard_size < 1:
        raise UsageError("--shard-size must be a positive number of bytes")
    try:
        ignore = tuple(canonical_path(p, where="--ignore-path") for p in args.ignore_path)
    except VerificationError as e:
        raise UsageError(e.message.removeprefix("attestation does not verify: ")) from None
    model = Path(args.model)
    out = args.out or str(model / "model.sig" if model.is_dir() else Path(f"{model}.sig"))
    signer = load_signer(args.key)
    certificates = signing_chain(args, signer.public) if args.signing_certificate else ()
    if args.certificate_chain and not args.signing_certificate:
        raise UsageError("--certificate-chain needs --signing-certificate")
    bundle, digest, count = sign_model(
        model,
        signer,
        signature=out,
        shard_size=args.shard_size,
        ignore_paths=ignore,
        certificates=certificates,
    )
    write_atomic(out, bundle)
    print(
        f"signed model {printable(args.model)} ({count} file(s), digest {digest})"
        f" with key {signer.public.short_id}"
    )
    print(f"  {printable(out)}")
    return 0


def signing_chain(args: argparse.Namespace, public: PublicKey) -> tuple[bytes, ...]:
    """The certificate method's chain as DER, the signing certificate first; it must hold the key."""
    from cryptography.hazmat.primitives import serialization

    from modelseal.attest.bundles.certificates import load_certificates

    leaf = load_certificates([args.signing_certificate])[0]
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    if leaf.public_key().public_bytes(serialization.Encoding.DER, spki) != public.key.public_bytes(
        serialization.Encoding.DER, spki
    ):
        raise KeyFileError(f"{args.signing_certificate} is not the certificate of the signing key")
    chain = load_certificates(args.certificate_chain) if args.certificate_chain else []
    return tuple(c.public_bytes(serialization.Encoding.DER) for c in [leaf, *chain])


def authority_wanted(args: argparse.Namespace) -> bool:
    keyless = (
        args.certificate_identity,
        args.certificate_identity_regexp,
        args.certificate_oidc_issuer,
        args.certificate_oidc_issuer_regexp,
        args.trusted_root,
    )
    return bool(args.certificate_chain) or any(v is not None for v in keyless)


def with_flag_authorities(args: argparse.Namespace, policy: TrustPolicy) -> TrustPolicy:
    """The policy with the certificate flags applied: they replace its certificate roots and identities.

    ``--trusted-root`` alone, with a policy that names identities, replaces only its trusted root.

    Raises:
        UsageError: flags that exclude each other, a missing identity or issuer, a bad pattern.
        KeyFileError: an unreadable certificate chain or trusted root.
    """
    if not authority_wanted(args):
        return policy
    import re
    from dataclasses import replace

    from modelseal.attest.bundles.certificates import load_certificates
    from modelseal.attest.policy.authorities import CertificateTrust, IdentityRule

    root = _trusted_root(args.trusted_root) if args.trusted_root is not None else None
    if args.certificate_chain:
        if authority_wanted(argparse.Namespace(**{**vars(args), "certificate_chain": None})):
            raise UsageError(
                "--certificate-chain and the keyless flags (--certificate-identity ...) exclude each other"
            )
        roots = load_certificates(args.certificate_chain)
        if not any(c.issuer == c.subject for c in roots):
            raise KeyFileError("--certificate-chain holds no self-signed root certificate")
        return replace(policy, certificates=CertificateTrust(roots=tuple(roots)))
    identity = (args.certificate_identity, args.certificate_identity_regexp)
    issuer = (args.certificate_oidc_issuer, args.certificate_oidc_issuer_regexp)
    if root is not None and not any(identity + issuer) and policy.certificates.identities:
        return replace(policy, certificates=replace(policy.certificates, trusted_root=root[0],
                                                    trusted_root_source=root[1]))  # fmt: skip
    for flag, pair in (("--certificate-identity", identity), ("--certificate-oidc-issuer", issuer)):
        if sum(v is not None for v in pair) != 1:
            raise UsageError(f"keyless verification needs exactly one of {flag} and {flag}-regexp")
    try:
        rule = IdentityRule(identity[0], identity[1], issuer[0], issuer[1])
    except re.error as e:
        raise UsageError(f"bad regular expression: {e}") from None
    trust = CertificateTrust(
        identities=(rule,),
        trusted_root=root[0] if root else None,
        trusted_root_source=root[1] if root else None,
    )
    return replace(policy, certificates=trust)


def _trusted_root(path: str) -> tuple[bytes, str]:
    """``--trusted-root``'s bytes, checked to be a Sigstore trusted root.

    Raises:
        KeyFileError: unreadable, oversized, or not a trusted root.
    """
    from modelseal.attest.bundles.keyless import MAX_TRUSTED_ROOT_BYTES, root_verifier
    from modelseal.errors import InputError
    from modelseal.files import read_limited

    try:
        data = read_limited(path, MAX_TRUSTED_ROOT_BYTES, what="trusted root")
    except InputError as e:
        raise KeyFileError(str(e)) from None
    root_verifier(data, path)
    return data, path


def verify_bundle(
    args: argparse.Namespace,
    data: bytes,
    policy: TrustPolicy,
    now: datetime,
    hash_artifact: Callable[[str], tuple[str, DirectoryDigest | None]],
) -> Verdict:
    """A Sigstore bundle: OMS bound to ``--artifact`` by its own rules, or a generic statement.

    Without ``--policy``, an OMS signature is admitted as the flags' authority signed it; a
    policy file admits one only when its ``predicateTypes`` list the OMS predicate type.
    """
    from dataclasses import replace

    from modelseal.attest.bundles.oms import PREDICATE_TYPE
    from modelseal.attest.bundles.verifier import ModelBinding, evaluate_bundle, names_oms
    from modelseal.attest.socair.verifier import ExpectedDigest

    if not args.policy and names_oms(data) and PREDICATE_TYPE not in policy.predicate_types:
        policy = replace(policy, predicate_types=(*policy.predicate_types, PREDICATE_TYPE))
    model, expected = None, None
    if args.artifact:
        signature = None if args.envelope == "-" else args.envelope
        model = ModelBinding(args.artifact, signature, args.ignore_unsigned_files)
        if not names_oms(data):  # a generic statement binds the artifact's digest
            digest, directory = hash_artifact(args.artifact)
            files = {f.path: f.sha256 for f in directory.files} if directory else None
            expected = ExpectedDigest(digest, args.artifact, directory is not None, files)
    elif args.sha256:
        expected = ExpectedDigest(args.sha256.strip().lower())
    return evaluate_bundle(data, policy, model=model, expected=expected, now=now)
