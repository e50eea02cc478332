"""``modelseal verify``: an envelope, a Sigstore bundle or an image's attestations, judged by a policy.

Exit 0 when admitted (or in warn mode), 1 for every refusal, 2 for a usage
error, as ``socair verify`` does.
"""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from modelseal.cli import bundle_commands
from modelseal.cli.attest_commands import hash_path, skipped_json
from modelseal.cli.image_commands import IMAGE_HELP, image_reference, verify_image_cmd
from modelseal.cli.registry_access import registry_options
from modelseal.durations import parse_max_age
from modelseal.errors import InputError, UsageError
from modelseal.files import read_limited

if TYPE_CHECKING:
    from modelseal.attest.digests.digest import DirectoryDigest
    from modelseal.attest.policy.admission_policy import AdmissionPolicy
    from modelseal.attest.policy.trust import TrustPolicy
    from modelseal.attest.verdict import Mode, Verdict

__all__ = ["add_verify", "verify_cmd"]

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


def add_verify(verify: argparse.ArgumentParser) -> None:
    """``verify``'s arguments."""
    verify.add_argument(
        "envelope",
        nargs="?",
        metavar="ENVELOPE",
        help="the DSSE envelope (- for stdin); with --image, optional",
    )
    verify.add_argument(
        "more_envelopes", nargs="*", metavar="ENVELOPE", help="more envelopes, judged by an AdmissionPolicy"
    )
    trust = verify.add_mutually_exclusive_group()
    trust.add_argument("--trusted", metavar="KEY|DIR", help="a public key, or a directory of *.pub")
    trust.add_argument("--store", metavar="PATH", help="a socair airlock store (its trusted-keys/)")
    trust.add_argument("--policy", metavar="FILE", help="a TrustPolicy or AdmissionPolicy YAML file")
    bind = verify.add_mutually_exclusive_group()
    bind.add_argument("--artifact", metavar="PATH", help="hash this file or model directory")
    bind.add_argument("--sha256", metavar="HEX", help="the digest the attestation must be for")
    bind.add_argument(
        "--image",
        metavar="REF",
        help="verify against this image's digest; without ENVELOPE, the attestations attached to it:"
        f" {IMAGE_HELP}",
    )
    verify.add_argument("--allow-conditions", action="store_true", default=None,
                        help="admit authorized_with_conditions")  # fmt: skip
    verify.add_argument(
        "--max-age", metavar="DURATION", help="refuse reports issued longer ago (e.g. 2160h or 90d)"
    )
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


def _policy(args: argparse.Namespace) -> TrustPolicy | AdmissionPolicy:
    from modelseal.attest.dsse.keys import Keyring
    from modelseal.attest.policy.trust import TrustPolicy

    if args.policy:
        # the policy file's models only when a file is given: a plain verify never imports them
        from modelseal.attest.policy.admission_policy import AdmissionPolicy, load_any_policy

        policy = load_any_policy(args.policy)
        if isinstance(policy, AdmissionPolicy):
            return policy
    elif args.trusted:
        policy = TrustPolicy(Keyring.from_path(args.trusted))
    elif args.store:
        policy = TrustPolicy(Keyring.from_path(Path(args.store) / "trusted-keys"))
    elif bundle_commands.authority_wanted(args):
        policy = TrustPolicy(Keyring())
    else:
        raise UsageError(
            "say whom to trust: --trusted KEY.pub (or a folder of them), --store PATH or --policy FILE"
        )
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
    from modelseal.attest.bundles.bundle import is_bundle
    from modelseal.attest.dsse.envelope import MAX_ENVELOPE_BYTES
    from modelseal.attest.policy.trust import TrustPolicy
    from modelseal.attest.socair.issue_time import parse_rfc3339
    from modelseal.attest.socair.verifier import ExpectedDigest, evaluate
    from modelseal.attest.verdict import Mode, Reason, Verdict
    from modelseal.cli.admission_commands import verify_admission

    if args.sha256 is not None and not _HEX64.fullmatch(args.sha256.strip()):
        raise UsageError(f"--sha256 {args.sha256!r} is not 64 hex digits")
    now = datetime.now(UTC)
    if args.at is not None:
        at = parse_rfc3339(args.at)
        if at is None:
            raise UsageError(f"--at {args.at!r} is not an RFC 3339 time")
        now = at
    if args.envelope is None and args.image is None:
        raise UsageError(
            "give the envelope to verify, or --image oci://REGISTRY/REPO@sha256:... to judge what is attached"
        )
    image = image_reference(args.image, "--image") if args.image is not None else None
    policy = _policy(args)
    if not isinstance(policy, TrustPolicy):
        return verify_admission(args, policy, now)
    if args.more_envelopes:
        raise UsageError("several envelopes are judged by an AdmissionPolicy (--policy FILE)")
    mode = Mode(args.mode)
    if image is not None:
        given = read_limited(args.envelope, MAX_ENVELOPE_BYTES, what="attestation") if args.envelope else None
        return verify_image_cmd(args, image, policy, now, given)
    envelope, expected, directory = b"", None, None
    try:
        envelope = read_limited(args.envelope, MAX_ENVELOPE_BYTES, what="attestation")
        if is_bundle(envelope):
            verdict = bundle_commands.verify_bundle(args, envelope, policy, now, hash_path)
            return _report(args, verdict, mode, bound=bool(args.artifact or args.sha256), envelope=envelope)
        if args.sha256:
            expected = ExpectedDigest(args.sha256.strip().lower())
        elif args.artifact:
            digest, directory = hash_path(args.artifact)
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

    doc = {"mode": mode.value, **verdict.to_json(), **skipped_json(directory)}
    hint = "" if verdict.admitted or not envelope else refusal_hint(verdict, envelope, args)
    return render.finish_verify(
        verdict, mode, doc if args.json else None, lambda: render.admitted(verdict, bound=bound), hint
    )
