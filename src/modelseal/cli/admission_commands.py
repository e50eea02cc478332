"""``modelseal verify --policy ADMISSION.yaml``: several attestations judged by an admission policy.

``verify --image oci://REF --policy FILE`` judges every attestation attached
to the image (or the envelopes given); ``verify ENV [ENV ...] --artifact PATH
| --sha256 HEX --policy FILE`` judges envelopes given as files. Exit 0 when
every requirement is met (or in warn mode), 1 otherwise, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from modelseal.errors import Error, InputError, UsageError
from modelseal.text import printable

if TYPE_CHECKING:
    from modelseal.attest.policy.admission import AdmissionResult, Candidate
    from modelseal.attest.policy.admission_policy import AdmissionPolicy

__all__ = ["envelope_paths", "verify_admission"]

#: flags that a TrustPolicy takes from the command line, and where an admission policy says the same
_TRUST_FLAGS = {
    "predicate_type": "predicateType on each requirement (not in its trust)",
    "max_age": "maxAge in a requirement's trust",
    "allow_conditions": "allowConditions in a requirement's trust",
    "strict": "strict in a requirement's trust",
}


def envelope_paths(args: argparse.Namespace) -> list[str]:
    """The envelopes named on the command line, in order."""
    return ([args.envelope] if args.envelope else []) + list(args.more_envelopes or [])


def _refuse_trust_flags(args: argparse.Namespace) -> None:
    from modelseal.cli import bundle_commands

    given = [f for f in _TRUST_FLAGS if getattr(args, f, None) not in (None, False)]
    if given:
        flag, where = f"--{given[0].replace('_', '-')}", _TRUST_FLAGS[given[0]]
        raise UsageError(f"{flag} does not go with an AdmissionPolicy: give {where}")
    if bundle_commands.authority_wanted(args):
        raise UsageError(
            "an authority flag does not go with an AdmissionPolicy: give identities, certificateRoots or"
            " trustedRoot in a requirement's trust"
        )


def _candidates(paths: list[str]) -> list[Candidate]:
    from modelseal.attest.dsse.envelope import MAX_ENVELOPE_BYTES
    from modelseal.attest.policy.admission import Candidate
    from modelseal.files import read_limited

    if paths.count("-") > 1:
        raise UsageError("stdin (-) can be given once")
    out = []
    for path in paths:
        try:
            out.append(Candidate(path, read_limited(path, MAX_ENVELOPE_BYTES, what="attestation")))
        except InputError as e:
            out.append(Candidate(path, None, str(e)))
    return out


def verify_admission(args: argparse.Namespace, policy: AdmissionPolicy, now: datetime) -> int:
    """Judge the attestations by ``policy``; print the outcome of each requirement."""
    from modelseal.attest.policy.admission import judge_admission
    from modelseal.attest.socair.verifier import ExpectedDigest
    from modelseal.attest.verdict import Mode
    from modelseal.cli import render

    _refuse_trust_flags(args)
    mode = Mode(args.mode)
    paths = envelope_paths(args)
    where: dict[str, Any] = {}
    if args.image is not None:
        result, where = _judge_image(args, policy, now, paths)
    else:
        if not (args.artifact or args.sha256):
            raise UsageError("give --artifact or --sha256 (or --image): the digest the attestations are for")
        candidates = _candidates(paths)
        if args.sha256:
            expected = ExpectedDigest(args.sha256.strip().lower())
        else:
            from modelseal.cli.attest_commands import hash_path

            digest, _ = hash_path(args.artifact)
            expected = ExpectedDigest(digest, args.artifact)
        where = {"digest": expected.sha256}
        result = judge_admission(policy, candidates, expected, now=now)
    doc = {"mode": mode.value, **_json(result), **where} if args.json else None
    return render.finish_verify(result.verdict, mode, doc, lambda: _text(result))


def _judge_image(
    args: argparse.Namespace, policy: AdmissionPolicy, now: datetime, paths: list[str]
) -> tuple[AdmissionResult, dict[str, Any]]:
    from modelseal.attest.policy.admission import AdmissionResult
    from modelseal.attest.verdict import Reason, Verdict
    from modelseal.cli.image_commands import _warn_tag, image_reference
    from modelseal.cli.registry_access import registry_client
    from modelseal.publish.referrers.attestations import AttachedImage, read_attached, read_subject
    from modelseal.publish.referrers.image_admission import judge_image_admission

    ref = image_reference(args.image, "--image")
    try:
        with registry_client(ref, args, push=False) as client:
            if paths:
                info, subject = read_subject(client, ref)
                image = ref.pinned(subject.digest).oci
                attached = AttachedImage(image, subject.digest, info, (), "command line", len(paths))
            else:
                attached = read_attached(client, ref)
    except Error as e:
        if args.json and not isinstance(e, UsageError):  # a gate reading the JSON gets a refusal too
            refused = Verdict(admitted=False, reason=Reason.INPUT_UNREADABLE, message=printable(str(e)))
            doc = {"mode": args.mode, **_json(AdmissionResult(refused, ())), "image": ref.oci}
            print(json.dumps(doc, indent=2))
        raise
    _warn_tag(ref, attached.digest, "verified")
    given = _candidates(paths) if paths else None
    result = judge_image_admission(policy, attached, now=now, candidates=given)
    found = {"found_via": attached.via, "listed": attached.listed}
    return result, {"image": attached.image, "digest": attached.digest, **found}


def _json(result: AdmissionResult) -> dict[str, Any]:
    verdict = result.verdict
    return {
        "admitted": verdict.admitted,
        "reason": verdict.reason.value,
        "message": verdict.message,
        "requirements": [r.to_json() for r in result.requirements],
        "unreadable": [{"attestation": s, "message": m} for s, m in result.unreadable],
    }


def _text(result: AdmissionResult) -> str:
    """The admitted requirements, one a line, their names and types in columns (issue 31, point 10)."""
    lines = [f"admitted: {result.verdict.message}"]
    rows = [(printable(r.name), printable(r.predicate_type), r) for r in result.requirements]
    # columns as wide as the widest entry, up to a limit: one long name does not push every line right
    name_width = min(max((len(n) for n, _, _ in rows), default=0), 40)
    type_width = min(max((len(t) for _, t, _ in rows), default=0), 60)
    for name, predicate_type, r in rows:
        who = ", ".join(s["name"] or s["keyid"][:16] for s in r.signers)
        said = printable(f"by {r.attestation} (signed by {who})")
        lines.append(f"  met  {name:<{name_width}}  {predicate_type:<{type_width}}  {said}")
    return "\n".join(lines)
