"""``key gen``, ``sign``, ``attest``, ``verify`` and ``digest``."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelseal.cli import bundle_commands
from modelseal.cli.image_commands import attest_image, image_reference, is_image, verify_image_cmd
from modelseal.cli.progress import ProgressBar
from modelseal.cli.publish_commands import registry_options
from modelseal.durations import parse_max_age
from modelseal.errors import InputError, KeyFileError, UsageError
from modelseal.files import read_limited, write_atomic
from modelseal.text import printable

if TYPE_CHECKING:
    from modelseal.attest.digest import DirectoryDigest
    from modelseal.attest.policy import TrustPolicy
    from modelseal.attest.verdict import Mode, Verdict

# Commands import what they use when they run, so that `modelseal digest`
# starts without loading pydantic and the crypto bindings.

__all__ = ["register"]

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
VERIFY_USAGE = (
    "usage: modelseal verify <attestation.dsse.json> (--trusted <key.pub|dir> | --store <path>"
    " | --policy <file>) [--artifact <path> | --sha256 <hex>]\n"
    "       modelseal verify [<attestation.dsse.json>] --image oci://<registry/repo@sha256:...> ..."
)


def register(commands: Any) -> None:
    """Add the attestation commands to the ``modelseal`` parser."""
    key = commands.add_parser("key", help="manage signing keys")
    key_commands = key.add_subparsers(dest="key_command", metavar="COMMAND", parser_class=type(key))
    gen = key_commands.add_parser("gen", help="generate a key pair (<prefix>.key, <prefix>.pub)")
    gen.add_argument("--out", required=True, metavar="PREFIX", help="write PREFIX.key and PREFIX.pub")
    gen.add_argument("--issuer", metavar="NAME", help="the issuer name reports signed with it carry")
    gen.add_argument(
        "--algorithm",
        default="ed25519",
        help="ed25519 (the default; socair's), ecdsa-p256, ecdsa-p384 or rsa-3072",
    )
    gen.set_defaults(handler=key_gen)

    sign = commands.add_parser(
        "sign", help="sign a Socair report (as socair sign), or a model (--format oms)"
    )
    sign.add_argument("model", nargs="?", metavar="MODEL", help="--format oms: the model directory or file")
    sign.add_argument(
        "--key",
        required=True,
        help="private key: a PKCS#8 PEM file (mode 0600) or a signer URI (file:, envvar:, hsm:, ...)",
    )
    sign.add_argument("--report", help="the report JSON (socair scan output)")
    bundle_commands.add_sign_flags(sign)
    sign.add_argument("--out", help="default: the report's name with .dsse.json; MODEL/model.sig for oms")
    sign.set_defaults(handler=sign_cmd)

    attest = commands.add_parser("attest", help="sign an in-toto Statement over files or an image (for CI)")
    attest.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="files or model directories, or one oci://REGISTRY/REPO@DIGEST",
    )
    attest.add_argument("--key", action="append", required=True, help="private key; repeat to co-sign")
    attest.add_argument(
        "--predicate-type",
        metavar="URI",
        help="required for files (verify then needs the same --predicate-type); an image's lists its files",
    )
    attest.add_argument("--predicate", metavar="FILE", help="predicate JSON object (default {})")
    attest.add_argument("--out", help="write the envelope here (default: stdout)")
    attest.add_argument(
        "--attach", action="store_true", help="for an image: push the envelope beside it as an OCI referrer"
    )
    registry_options(attest)
    attest.set_defaults(handler=attest_cmd)

    verify = commands.add_parser("verify", help="verify and admit an attestation (as socair verify)")
    verify.add_argument(
        "envelope",
        nargs="?",
        metavar="ENVELOPE",
        help="the DSSE envelope (- for stdin); with --image, optional",
    )
    trust = verify.add_mutually_exclusive_group()
    trust.add_argument("--trusted", metavar="KEY|DIR", help="a public key, or a directory of *.pub")
    trust.add_argument("--store", metavar="PATH", help="a socair airlock store (its trusted-keys/)")
    trust.add_argument("--policy", metavar="FILE", help="a trust-policy YAML file")
    bind = verify.add_mutually_exclusive_group()
    bind.add_argument("--artifact", metavar="PATH", help="hash this file or model directory")
    bind.add_argument("--sha256", metavar="HEX", help="the digest the attestation must be for")
    bind.add_argument(
        "--image",
        metavar="oci://REF",
        help="verify against this image's digest; without ENVELOPE, the attestations attached to it",
    )
    verify.add_argument("--allow-conditions", action="store_true", default=None,
                        help="admit authorized_with_conditions")  # fmt: skip
    verify.add_argument("--max-age", metavar="DURATION", help="refuse reports issued longer ago (e.g. 2160h)")
    verify.add_argument(
        "--strict", action="store_true", default=None, help="also recompute the document hash"
    )
    verify.add_argument("--predicate-type", action="append", metavar="URI", help="admit this predicate type")
    verify.add_argument("--at", metavar="TIME", help="evaluate as of this RFC 3339 time instead of now")
    verify.add_argument(
        "--mode", choices=("enforce", "warn"), default="enforce", help="warn: report a refusal, exit 0"
    )
    verify.add_argument("--json", action="store_true", help="print the verdict as JSON")
    registry_options(verify)
    bundle_commands.add_verify_flags(verify)
    verify.set_defaults(handler=verify_cmd)

    digest = commands.add_parser("digest", help="SHA-256 of a file, socair's digest of a directory")
    digest.add_argument("path", metavar="PATH", help="a file, or a model directory")
    digest.add_argument("--jobs", type=int, metavar="N", help="files hashed at once (default: cores)")
    digest.add_argument("--json", action="store_true", help="print the digest and files as JSON")
    digest.set_defaults(handler=digest_cmd)


def key_gen(args: argparse.Namespace) -> int:
    """``modelseal key gen``."""
    from modelseal.attest.private_keys import generate_key, valid_issuer, write_key_pair

    if args.issuer is not None:
        valid_issuer(args.issuer)
    key = generate_key(args.algorithm, issuer=args.issuer or None)
    priv, pub = write_key_pair(args.out, key)
    print(f"key id {key.public.keyid}")
    print(f"  private: {printable(str(priv))} (keep it secret; mode 0600)")
    print(f"  public:  {printable(str(pub))} (share it; verifiers list it in their trusted keys)")
    if key.issuer:
        print(f"  issuer:  {printable(key.issuer)} (reports signed with this key name it as their issuer)")
    else:
        print("  no issuer name: reports signed with it name the key id; pass --issuer to name who signs")
    return 0


def _hash(path: str, jobs: int | None = None) -> tuple[str, DirectoryDigest | None]:
    """Hash a file or directory; for a directory, say on stderr what socair's rules left out."""
    from modelseal.attest.digest import digest_path, total_size

    total = total_size(path) if ProgressBar.wanted() else 0  # sizing a directory walks it once more
    with ProgressBar(f"hashing {printable(Path(path).name)}", total) as bar:
        digest, directory = digest_path(path, workers=jobs, progress=bar.advance)
    if directory is not None and directory.skip_summary:
        print(f"note: {directory.skip_summary}", file=sys.stderr)
    return digest, directory


def _skipped_json(directory: DirectoryDigest | None) -> dict[str, Any]:
    return {"skipped": [s.to_json() for s in directory.skipped]} if directory is not None else {}


def sign_cmd(args: argparse.Namespace) -> int:
    """``modelseal sign``."""
    from modelseal.attest import gojson
    from modelseal.attest.envelope import MAX_ENVELOPE_BYTES
    from modelseal.attest.sign import sign_report
    from modelseal.attest.signers import load_signer

    if args.format == "oms":
        return bundle_commands.sign_oms(args)
    if args.report is None or args.model is not None:
        raise UsageError("sign a report with --report FILE, or a model with --format oms MODEL")
    key = load_signer(args.key)
    if key.public.algorithm != "ed25519":
        raise KeyFileError(f"{args.key} is not an Ed25519 key")
    data = read_limited(args.report, MAX_ENVELOPE_BYTES, what="report")
    try:
        report = gojson.loads(data)
    except gojson.JSONFormatError as e:
        raise InputError(f"{args.report} is not a report document: {e}") from None
    if not isinstance(report, dict):
        raise InputError(f"{args.report} is not a report document: not a JSON object")
    envelope, doc = sign_report(report, key)
    out = args.out or args.report.removesuffix(".json") + ".dsse.json"
    write_atomic(out, envelope.to_json())
    sha, short = doc["artifact"]["sha256"], key.public.short_id
    print(f"signed {printable(args.report)} for artifact {sha} with key {short}")
    print(f"  {printable(out)}")
    return 0


def attest_cmd(args: argparse.Namespace) -> int:
    """``modelseal attest``."""
    from modelseal.attest import gojson
    from modelseal.attest.envelope import MAX_ENVELOPE_BYTES
    from modelseal.attest.sign import make_statement, sign_payload
    from modelseal.attest.signers import load_signer

    if not any(is_image(p) for p in args.paths) and (args.attach or not args.predicate_type):
        raise UsageError(
            "--attach is for an image (oci://...)" if args.attach else "files need --predicate-type"
        )
    keys = [load_signer(k) for k in args.key]
    predicate: Any = {}
    if args.predicate:
        try:
            predicate = gojson.loads(read_limited(args.predicate, MAX_ENVELOPE_BYTES, what="predicate"))
        except gojson.JSONFormatError as e:
            raise InputError(f"predicate {args.predicate} is not JSON: {e}") from None
        if not isinstance(predicate, dict):
            raise InputError(f"predicate {args.predicate} is not a JSON object")
    if any(is_image(p) for p in args.paths):
        return attest_image(args, keys, predicate if args.predicate else None)
    subjects = [(Path(p).resolve().name, _hash(p)[0]) for p in args.paths]
    try:
        statement = make_statement(subjects, args.predicate_type, predicate)
    except gojson.JSONFormatError as e:  # a --predicate-type or path that is not UTF-8
        raise InputError(f"cannot encode the statement: {e}") from None
    envelope = sign_payload(statement, keys)
    if args.out:
        write_atomic(args.out, envelope.to_json())
        print(f"attested {len(subjects)} subject(s) with {len(keys)} key(s)", file=sys.stderr)
        print(f"  {printable(args.out)}", file=sys.stderr)
    else:
        sys.stdout.write(envelope.to_json().decode() + "\n")
    return 0


def _policy(args: argparse.Namespace) -> TrustPolicy:
    from modelseal.attest.keys import Keyring
    from modelseal.attest.policy import TrustPolicy, load_policy

    if args.policy:
        policy = load_policy(args.policy)
    elif args.trusted:
        policy = TrustPolicy(Keyring.from_path(args.trusted))
    elif args.store:
        policy = TrustPolicy(Keyring.from_path(Path(args.store) / "trusted-keys"))
    elif bundle_commands.authority_wanted(args):
        policy = TrustPolicy(Keyring())
    else:
        raise UsageError("give --trusted, --store or --policy", usage=VERIFY_USAGE)
    max_age = None
    if args.max_age is not None:
        try:
            max_age = parse_max_age(args.max_age)
        except ValueError as e:
            raise UsageError(f"--max-age: {e}") from None
    types = tuple(args.predicate_type) if args.predicate_type else None
    policy = policy.with_overrides(
        allow_conditions=args.allow_conditions, max_age=max_age, strict=args.strict, predicate_types=types
    )
    return bundle_commands.with_flag_authorities(args, policy)


def verify_cmd(args: argparse.Namespace) -> int:
    """``modelseal verify``: exit 0 admitted (or warn), 1 refused, 2 usage."""
    from modelseal.attest.bundle_verifier import is_bundle
    from modelseal.attest.envelope import MAX_ENVELOPE_BYTES
    from modelseal.attest.issue_time import parse_rfc3339
    from modelseal.attest.verdict import Mode, Reason, Verdict
    from modelseal.attest.verifier import ExpectedDigest, evaluate

    if args.sha256 is not None and not _HEX64.fullmatch(args.sha256.strip()):
        raise UsageError(f"--sha256 {args.sha256!r} is not 64 hex digits")
    now = datetime.now(UTC)
    if args.at is not None:
        at = parse_rfc3339(args.at)
        if at is None:
            raise UsageError(f"--at {args.at!r} is not an RFC 3339 time")
        now = at
    if args.envelope is None and args.image is None:
        raise UsageError("give the envelope to verify, or --image", usage=VERIFY_USAGE)
    image = image_reference(args.image, "--image") if args.image is not None else None
    policy = _policy(args)
    mode = Mode(args.mode)
    if image is not None:
        given = read_limited(args.envelope, MAX_ENVELOPE_BYTES, what="attestation") if args.envelope else None
        return verify_image_cmd(args, image, policy, now, given)
    envelope, expected, directory = b"", None, None
    try:
        envelope = read_limited(args.envelope, MAX_ENVELOPE_BYTES, what="attestation")
        if is_bundle(envelope):
            verdict = bundle_commands.verify_bundle(args, envelope, policy, now, _hash)
            return _report(args, verdict, mode, bound=bool(args.artifact or args.sha256), envelope=envelope)
        if args.sha256:
            expected = ExpectedDigest(args.sha256.strip().lower())
        elif args.artifact:
            digest, directory = _hash(args.artifact)
            files = {f.path: f.sha256 for f in directory.files} if directory else None
            expected = ExpectedDigest(digest, args.artifact, directory is not None, files)
    except InputError as e:
        verdict = Verdict(
            admitted=False, reason=Reason.INPUT_UNREADABLE, message=f"attestation does not verify: {e}"
        )
    else:
        verdict = evaluate(envelope, policy, expected=expected, now=now)
    return _report(args, verdict, mode, bound=expected is not None, directory=directory, envelope=envelope)


def _report(
    args: argparse.Namespace,
    verdict: Verdict,
    mode: Mode,
    *,
    bound: bool,
    directory: DirectoryDigest | None = None,
    envelope: bytes = b"",
) -> int:
    """Print a verdict as ``verify`` does (with a hint when refused); return the exit code."""
    from modelseal.cli import render
    from modelseal.cli.hints import refusal_hint

    doc = {"mode": mode.value, **verdict.model_dump(mode="json"), **_skipped_json(directory)}
    hint = "" if verdict.admitted or not envelope else refusal_hint(verdict, envelope, args)
    return render.finish_verify(
        verdict, mode, doc if args.json else None, lambda: render.admitted(verdict, bound=bound), hint
    )


def digest_cmd(args: argparse.Namespace) -> int:
    """``modelseal digest``."""
    if args.jobs is not None and not 1 <= args.jobs <= 64:
        raise UsageError("--jobs must be between 1 and 64")
    digest, directory = _hash(args.path, args.jobs)
    if args.json:
        out: dict[str, Any] = {"path": args.path, "sha256": digest}
        if directory is not None:
            out.update(
                kind="socair.modeldir/v1",
                size=directory.size,
                files=[{"path": f.path, "sha256": f.sha256, "size": f.size} for f in directory.files],
                **_skipped_json(directory),
            )
        else:
            out.update(kind="file", size=os.path.getsize(args.path))
        print(json.dumps(out, indent=2))
    else:
        print(f"{digest}  {printable(args.path)}")
    return 0
