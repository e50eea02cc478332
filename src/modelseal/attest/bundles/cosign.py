"""cosign's attestations: an in-toto Statement v0.1 in a Sigstore bundle attached to an image.

Everywhere else modelseal reads in-toto Statement v1 only, and refuses v0.1
in socair-verify's words (``modelseal verify`` is a drop-in for ``socair
verify``). ``cosign attest`` (v3.1.3) writes every attestation as a Statement
v0.1, in a Sigstore bundle it attaches as an OCI referrer of the image. This
module is the one place that admits that format, and only that format:

- a Sigstore bundle, never a bare DSSE envelope: a bare envelope is
  modelseal's own format or Socair's, both v1, so a v0.1 statement in one is
  no format modelseal knows, attached or not;
- read as a referrer of the image whose digest is judged, never a bundle given
  as a file: cosign's v0.1 bundles live beside images, and the subject must
  name that image's digest, which the caller read and checks;
- a statement whose predicate type has no format of its own that is v1: an
  OpenSSF Model Signing signature and a Socair report are v1 by their own
  specifications (socair reads OMS bundles, v1 only), so either in a v0.1
  statement is refused in the words it always was;
- v0.1 only: v0.2, links and layouts stay refused.

Nothing else changes: the signature must be by a key (or certificate) the
policy trusts, the predicate type must be one asked for, and the subject must
bind the judged digest, as for a v1 statement.
"""

from __future__ import annotations

from modelseal.attest.bundles.oms import LEGACY_PREDICATE_TYPE, PREDICATE_TYPE
from modelseal.attest.dsse.statement import STATEMENT_V01, Statement, legacy_statement, parse_statement
from modelseal.attest.socair.report import PREDICATE_TYPE as SOCAIR_PREDICATE_TYPE

__all__ = ["V1_ONLY_PREDICATES", "bundle_statement"]

#: predicate types whose own format is an in-toto Statement v1
V1_ONLY_PREDICATES = frozenset({PREDICATE_TYPE, LEGACY_PREDICATE_TYPE, SOCAIR_PREDICATE_TYPE})


def bundle_statement(payload: bytes, *, attached: bool) -> Statement:
    """The statement of a Sigstore bundle's verified ``payload``: cosign's v0.1 too when the
    bundle was read as a referrer of the image being judged (``attached``), v1 only otherwise.

    Raises:
        VerificationError: as :func:`~modelseal.attest.dsse.statement.parse_statement`; and a v0.1
            statement of a predicate type in :data:`V1_ONLY_PREDICATES`, refused as legacy.
    """
    statement = parse_statement(payload, legacy_v01=attached)
    if statement.type == STATEMENT_V01 and statement.predicate_type in V1_ONLY_PREDICATES:
        raise legacy_statement(STATEMENT_V01)
    return statement
