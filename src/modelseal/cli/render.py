"""Text for people: what ``verify`` prints on success (socair's layout), control characters escaped."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelseal.text import printable

if TYPE_CHECKING:
    from modelseal.attest.verdict import Verdict

__all__ = ["admitted"]


def admitted(verdict: Verdict, *, bound: bool) -> str:
    """The lines ``socair verify`` prints for a verified attestation, plus ours."""
    d = verdict.details
    signer = verdict.signer
    assert signer is not None
    lines = []
    if verdict.state is not None:
        how = (
            "confirmed: your trust list names this key"
            if d.get("issuer_confirmed")
            else "claimed: your trust list does not name this key"
        )
        lines += [
            f"verified: issued by {d['issuer']} ({how})",
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
    else:
        lines.append(f"verified: signed by key {signer.keyid}")
        lines.append(f"  predicate {verdict.predicate_type}")
        for s in d.get("subjects", []):
            lines.append(f"  subject {s['digest'].get('sha256', '-')} ({s['name']})")
    for other in verdict.signers[1:]:
        lines.append(f"  also signed by key {other.keyid}")
    if not bound:
        lines.append(
            "  the artifact itself was not checked; pass --artifact <path> or --sha256 <hex> to bind it"
        )
    # every field but the counts came from the attestation: no line may move the cursor
    return "\n".join(printable(line) for line in lines)
