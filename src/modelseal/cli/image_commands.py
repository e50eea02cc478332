"""``attest oci://...``, ``attest --attach`` and ``verify --image``: attestations bound to an image digest."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

from modelseal.cli.registry_access import registry_client
from modelseal.errors import Error, UsageError
from modelseal.files import write_atomic
from modelseal.text import printable

if TYPE_CHECKING:
    from modelseal.attest.policy.trust import TrustPolicy
    from modelseal.attest.signing.signers import KeySigner
    from modelseal.attest.verdict import Verdict
    from modelseal.publish.referrers.attestations import ImageVerdict, SignedImage
    from modelseal.publish.referrers.store import Attached
    from modelseal.publish.registry.reference import ImageReference

__all__ = ["IMAGE_HELP", "attach_signed", "attest_image", "image_reference", "is_image", "verify_image_cmd"]


#: what every command's help says of an image reference (issue 31, point 2: one convention)
IMAGE_HELP = (
    "REGISTRY/REPO@sha256:... (pinned) or REGISTRY/REPO:TAG (resolved to the digest it names now);"
    " the oci:// prefix is optional"
)


def is_image(text: str) -> bool:
    """Whether a PATH argument names an image: ``oci://REF``, or a reference with a registry host and a
    tag or digest where no file or folder of that name exists (a file always wins)."""
    from modelseal.publish.registry.reference import parse_reference

    if text.startswith("oci://"):
        return True
    if os.path.lexists(text):
        return False
    try:
        ref = parse_reference(text)
    except UsageError:
        return False
    return ref.tag is not None or ref.digest is not None


def image_reference(text: str, flag: str, *, require: str | None = None) -> ImageReference:
    """An image as every command takes it: ``oci://REGISTRY/REPO...`` or ``REGISTRY/REPO...``, with a tag
    or a digest (``require``: ``"tag"`` for a destination, see :func:`parse_reference`).

    Raises:
        UsageError: not a reference, or one with neither tag nor digest; the message names ``flag``.
    """
    from modelseal.publish.registry.reference import parse_reference

    try:
        ref = parse_reference(text, allow_oci_scheme=True, require=require)
    except UsageError as e:
        raise UsageError(f"{flag} {e}") from None
    if ref.digest is None and ref.tag is None:
        raise UsageError(f"{flag} {text!r}: give a digest (@sha256:...) or a tag")
    return ref


def _warn_tag(ref: ImageReference, digest: str, doing: str) -> None:
    if ref.digest is None:
        print(
            f"warning: {printable(str(ref))} is a tag, resolved to {digest}; {doing} that digest"
            " (a tag can move: pin it with @sha256:)",
            file=sys.stderr,
        )


def attach_signed(client: Any, signed: SignedImage, bundle: bytes | None = None) -> Attached:
    """Push a signed image's envelope (or ``bundle``, cosign's way) as a referrer and say where
    it went (stderr)."""
    from modelseal.publish.referrers.bundles import attach_bundle
    from modelseal.publish.referrers.store import attach, referrers_tag

    if bundle is not None:
        attached = attach_bundle(client, signed.subject, bundle, signed.predicate_type)
    else:
        attached = attach(client, signed.subject, signed.envelope.to_json(), signed.predicate_type)
    where = attached.via
    if where.endswith("tag schema"):
        where += f", tag {referrers_tag(signed.subject.digest)}"
    state = "attached" if attached.added else "already attached"
    print(f"{state} as referrer {attached.digest} ({where})", file=sys.stderr)
    return attached


def attest_image(args: argparse.Namespace, keys: list[KeySigner], predicate: dict[str, Any] | None) -> int:
    """``modelseal attest oci://...``: sign the image's digest; ``--attach`` stores it beside the image."""
    from modelseal.publish.referrers.attestations import sign_image

    if len(args.paths) != 1:
        raise UsageError("attest one image at a time (and no files with it)")
    if args.predicate and not args.predicate_type:
        raise UsageError("--predicate goes with --predicate-type")
    ref = image_reference(args.paths[0], "attest")
    with registry_client(ref, args, push=bool(args.attach)) as client:
        signed = sign_image(client, ref, keys, predicate_type=args.predicate_type, predicate=predicate)
        _warn_tag(ref, signed.subject.digest, "signed")
        document = signed.envelope.to_json()
        if args.bundle:
            from modelseal.publish.referrers.bundles import envelope_bundle

            document = envelope_bundle(signed.envelope, keys[0].public)
        if args.out:
            write_atomic(args.out, document)
        image = ref.pinned(signed.subject.digest).oci
        what = (
            f"{len(signed.info.get('files') or [])} file(s)"  # the image predicate lists them
            if args.predicate_type is None
            else f"predicate {printable(args.predicate_type)}"
        )
        print(f"attested {printable(image)} ({what}) with {len(keys)} key(s)", file=sys.stderr)
        if args.out:
            print(f"  {printable(args.out)}", file=sys.stderr)
        if args.attach:
            attach_signed(client, signed, document if args.bundle else None)
    if not args.out:
        sys.stdout.write(document.decode() + "\n")
    return 0


def verify_image_cmd(
    args: argparse.Namespace, ref: ImageReference, policy: TrustPolicy, now: datetime, envelope: bytes | None
) -> int:
    """``modelseal verify --image REF [ENVELOPE]``: exit 0 admitted (or warn), 1 refused.

    An image that cannot be read (no such image, a registry error, bytes that do not match
    their digest) is an error, exit 1 whatever the mode; with ``--json`` it is also printed as
    a refusal (``input_unreadable``), so a gate that reads the JSON never finds it missing.
    """
    from modelseal.attest.verdict import Mode, Reason, Verdict
    from modelseal.cli import render
    from modelseal.publish.referrers.attestations import ImageVerdict, image_policy, verify_image

    # --predicate-type, or a policy file's predicateTypes, say what is admitted
    policy = image_policy(policy, explicit_types=bool(args.predicate_type or args.policy))
    try:
        with registry_client(ref, args, push=False) as client:
            result = verify_image(client, ref, policy, envelope=envelope, now=now)
    except Error as e:
        if args.json and not isinstance(e, UsageError):  # a gate reading the JSON gets a refusal too
            refused = Verdict(admitted=False, reason=Reason.INPUT_UNREADABLE, message=printable(str(e)))
            doc = {**_json(ImageVerdict(refused, ref.oci, ""), Mode(args.mode)), "digest": ref.digest}
            print(json.dumps(doc, indent=2))
        raise
    _warn_tag(ref, result.digest, "checked")  # not "verified": a refusal may follow
    mode = Mode(args.mode)
    hint = _file_hint(result.verdict, ref.pinned(result.digest).oci, args.envelope)
    return render.finish_verify(result.verdict, mode, _json(result, mode) if args.json else None,
                                lambda: _text(result), hint)  # fmt: skip


def _file_hint(verdict: Verdict, image: str, envelope: str | None) -> str:
    """A Socair report names a file's digest, never an image's: say how to check one against the other."""
    from modelseal.attest.socair.report import PREDICATE_TYPE
    from modelseal.attest.verdict import Reason

    sha = verdict.subject_digest
    if verdict.reason != Reason.DIGEST_MISMATCH or verdict.predicate_type != PREDICATE_TYPE or not sha:
        return ""
    given = shlex.quote(envelope) if envelope else "ENVELOPE"
    return printable(
        f"; a Socair report is for a file, not an image: check the image's file with modelseal publish"
        f" inspect {image} --sha256 {sha}, then modelseal verify {given} --sha256 {sha}"
    )


def _json(result: ImageVerdict, mode: Any) -> dict[str, Any]:
    return {
        "mode": mode.value,
        **result.verdict.to_json(),
        "image": result.image,
        "digest": result.digest,
        "referrer": result.referrer,
        "found_via": result.via,
        "files": result.files,
        "tried": [{"referrer": r, "message": m} for r, m in result.tried],
        "listed": result.listed,
        "skipped": result.skipped,
    }


def _text(result: ImageVerdict) -> str:
    from modelseal.cli import render

    lines = [render.admitted(result.verdict, bound=True)]
    found = f"attached as {result.referrer} ({result.via})" if result.referrer else "the envelope given"
    lines.append(printable(f"  image {result.image}: {found}"))
    if result.skipped:
        lines.append(f"  {result.skipped} of {result.listed} attached attestation(s) skipped: over the caps")
    if result.files:
        lines.append(
            f"  binds {len(result.files)} file(s) as its manifest records them (no layer was downloaded;"
            " publish inspect --sha256 reads one):"
        )
        lines += [printable(f"    {f['sha256']}  {f['size']:>12}  {f['path']}") for f in result.files]
    return "\n".join(lines)
