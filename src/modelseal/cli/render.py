"""Text for people: what ``verify`` prints on success (socair's layout), control characters escaped."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from modelseal.text import one_line, printable

if TYPE_CHECKING:
    from modelseal.attest.verdict import Mode, Verdict

__all__ = ["admitted", "finish_verify"]


def finish_verify(
    verdict: Verdict, mode: Mode, doc: dict[str, Any] | None, text: Callable[[], str], hint: str = ""
) -> int:
    """Print a verdict (``doc`` as JSON when given, else ``text()`` or the refusal, with ``hint`` on
    the text line) and return ``verify``'s exit code: 0 admitted or warn mode, 1 refused."""
    if doc is not None:
        print(json.dumps(doc, indent=2))
    if not verdict.admitted:
        if verdict.blocks(mode):
            if doc is None:
                print(f"error: {one_line(verdict.message)}{hint}", file=sys.stderr)
            return 1
        print(f"warning: {one_line(verdict.message)}{hint} (warn mode: not blocking)", file=sys.stderr)
        return 0
    if doc is None:
        print(text())
    return 0


def admitted(verdict: Verdict, *, bound: bool) -> str:
    """The lines ``socair verify`` prints for a verified attestation, plus ours."""
    d = verdict.details
    signer = verdict.signer
    assert signer is not None
    lines = []
    if d.get("format") == "oms":
        lines += _oms_lines(verdict, bound=bound)
    elif verdict.state is not None:
        lines += [
            _issuer_line(d, signer.keyid[:16]),
            f"  signed by key {signer.keyid}",
            f"  artifact {verdict.subject_digest} ({d['file_name']})",
            f"  promotion {verdict.state}, {d['checks']} check(s), document {d['document_hash']}",
        ]
        if verdict.state == "authorized_with_conditions":
            by = d.get("accepted_by")
            if not d.get("signed_acceptance"):
                lines.append(
                    f"  acceptance by {by} is UNSIGNED (named at scan time); the airlock will not promote it"
                )
            else:
                lines.append(
                    f"  acceptance by {by} is signed; modelseal does not verify signed acceptances yet"
                )
    elif d.get("method") == "certificate":
        issuer = f", OIDC issuer {d['oidc_issuer']}" if d.get("oidc_issuer") else ""
        lines.append(f"verified: signed by certificate of {signer.name}{issuer}")
        lines.append(f"  certificate sha256 {d['certificate_sha256']}, issued by {d['certificate_issuer']}")
        lines.append(f"  predicate {verdict.predicate_type}")
        for s in d.get("subjects", []):
            lines.append(f"  subject {s['digest'].get('sha256', '-')} ({s['name']})")
    else:
        lines.append(f"verified: signed by key {signer.keyid}")
        lines.append(f"  predicate {verdict.predicate_type}")
        for s in d.get("subjects", []):
            lines.append(f"  subject {s['digest'].get('sha256', '-')} ({s['name']})")
    for other in verdict.signers[1:]:
        lines.append(f"  also signed by key {other.keyid}")
    if d.get("statement"):  # cosign's in-toto v0.1, read only in a bundle attached to the image
        lines.append(f"  statement {d['statement']} (cosign's, in a Sigstore bundle attached to the image)")
    if not bound:
        lines.append(
            "  the artifact itself was not checked; pass --artifact <path> or --sha256 <hex> to bind it"
        )
    # every field but the counts came from the attestation: no line may move the cursor
    return "\n".join(printable(line) for line in lines)


def _issuer_line(d: dict[str, Any], short_id: str) -> str:
    """Who issued a Socair report: socair's line when the trust list confirms the name; otherwise
    whether the report names an issuer at all, in one pair of parentheses (issue 31, point 10)."""
    if d.get("issuer_confirmed"):
        return f"verified: issued by {d['issuer']} (confirmed: your trust list names this key)"
    if d.get("issuer_named", True):
        return (
            f"verified: issued by {d['issuer']}, as the report says (your trust list does not name this key)"
        )
    return (
        f"verified: issued by key {short_id} (the report names no issuer; your trust list does not name"
        " the key)"
    )


def _oms_lines(verdict: Verdict, *, bound: bool) -> list[str]:
    """An OpenSSF Model Signing bundle: who signed, the model, and what was compared."""
    d = verdict.details
    signer = verdict.signer
    assert signer is not None
    who = f"key {signer.keyid}" if d.get("method") == "key" else f"certificate of {signer.name}"
    lines = [
        f"verified: OpenSSF Model Signing bundle (Sigstore bundle v{d['bundle']}) signed by {who}",
        f"  model {d['model']}: {d['signed_files']} signed file(s), {d['serialization']}"
        f" serialization, {d['hash_type']}",
        f"  model digest {verdict.subject_digest}",
    ]
    if "files_checked" in d:
        ignored = f"; ignored: {', '.join(d['ignored'])}" if d.get("ignored") else ""
        lines.append(f"  artifact matches: {d['files_checked']} file(s) hashed and compared{ignored}")
    return lines
