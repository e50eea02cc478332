"""What to do next, added to a refusal's line when the input shows a likely mistake.

The verdict's own message stays as socair words it (and as ``--json`` prints it);
a hint is appended only to the line people read.
"""

from __future__ import annotations

import argparse
import json
import shlex
from typing import TYPE_CHECKING

from modelseal.text import printable

if TYPE_CHECKING:
    from modelseal.attest.verdict import Verdict

__all__ = ["refusal_hint"]

#: top-level fields of a Socair report (``socair scan`` output) that an envelope never has
_REPORT_FIELDS = frozenset({"header", "artifact", "checks", "promotion_authorization"})


def refusal_hint(verdict: Verdict, envelope: bytes, args: argparse.Namespace) -> str:
    """``"; hint"`` for the error line, or ``""``."""
    from modelseal.attest.verdict import Reason

    if verdict.reason == Reason.ENVELOPE_INVALID and _looks_like_report(envelope):
        name = "the input" if args.envelope == "-" else printable(args.envelope)
        report = "REPORT.json" if args.envelope == "-" else shlex.quote(name)
        return (
            f"; {name} looks like an unsigned Socair report, not a DSSE envelope:"
            f" sign it first (modelseal sign --key KEY.key --report {report})"
        )
    if verdict.reason == Reason.NO_TRUSTED_KEYS and verdict.details.get("method") == "certificate":
        return (
            "; give --certificate-chain ROOT.pem, or --certificate-identity and --certificate-oidc-issuer"
            " (in a policy: certificateRoots or identities)"
        )
    asked = args.predicate_type or args.policy
    if verdict.reason == Reason.PREDICATE_TYPE and verdict.predicate_type and not asked:
        found = shlex.quote(printable(verdict.predicate_type))  # the attestation's text: escaped, quoted
        return f"; to admit it (an attestation from modelseal attest), pass --predicate-type {found}"
    return ""


def _looks_like_report(data: bytes) -> bool:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and "payloadType" not in doc and len(_REPORT_FIELDS & doc.keys()) >= 2
