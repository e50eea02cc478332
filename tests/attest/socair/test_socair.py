"""socair-verify's rules on the real fixtures and on envelopes made to break them."""

import base64
import json
from datetime import timedelta
from typing import Any

import pytest

from modelseal.attest.dsse.keys import Keyring
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.signing.private_keys import SigningKey, generate_key
from modelseal.attest.socair import report as socair
from modelseal.attest.socair.verifier import ExpectedDigest, evaluate
from modelseal.attest.verdict import Reason
from tests.attest.helpers import Mutate, signed_statement
from tests.conftest import FIXTURE_KEYID, FIXTURE_NOW, FIXTURE_SHA256, socair_envelope

EXPECTED = ExpectedDigest(FIXTURE_SHA256)


def test_authorized_fixture_is_admitted(operator_ring: Keyring) -> None:
    v = evaluate(
        socair_envelope("authorized"), TrustPolicy(operator_ring), expected=EXPECTED, now=FIXTURE_NOW
    )
    assert v.admitted and v.reason is Reason.ADMITTED
    assert v.message == (
        "signed by trusted key b4f69dad730db4cb, state authorized, attestation SOCAIR-20261003-2698a976"
    )
    assert v.signer is not None and v.signer.keyid == FIXTURE_KEYID
    assert v.details["issued_utc"] == "2026-10-03T02:50:10Z"
    assert v.details["document_hash"].startswith("0e9fca86")


def test_withheld_fixture_does_not_authorize_promotion(operator_ring: Keyring) -> None:
    v = evaluate(socair_envelope("withheld"), TrustPolicy(operator_ring), expected=EXPECTED, now=FIXTURE_NOW)
    assert not v.admitted and v.reason is Reason.STATE_NOT_AUTHORIZED
    assert v.message == (
        'attestation not admitted by policy: attestation state "withheld" does not authorize promotion'
    )


def test_conditional_fixture_is_refused_unless_conditions_are_allowed(operator_ring: Keyring) -> None:
    refused = evaluate(socair_envelope("conditional"), TrustPolicy(operator_ring), expected=EXPECTED)
    assert refused.reason is Reason.CONDITIONS_NOT_ALLOWED
    assert refused.message == (
        "attestation not admitted by policy: attestation is authorized_with_conditions (accepted by"
        " ciso@example.com for Hash, provenance, lineage) and this policy admits only authorized"
    )
    allowed = evaluate(
        socair_envelope("conditional"), TrustPolicy(operator_ring, allow_conditions=True), expected=EXPECTED
    )
    assert allowed.admitted and allowed.state == "authorized_with_conditions"


def flip_payload_bit(envelope: bytes, byte: int = 100, bit: int = 0) -> bytes:
    env = json.loads(envelope)
    payload = bytearray(base64.b64decode(env["payload"]))
    payload[byte] ^= 1 << bit
    env["payload"] = base64.b64encode(bytes(payload)).decode()
    return json.dumps(env).encode()


def test_one_flipped_payload_bit_breaks_the_signature(operator_ring: Keyring) -> None:
    v = evaluate(
        flip_payload_bit(socair_envelope("authorized")), TrustPolicy(operator_ring), expected=EXPECTED
    )
    assert v.reason is Reason.SIGNATURE_INVALID
    assert v.message == (
        "attestation does not verify: no valid signature by a trusted key"
        f" (signed by [{FIXTURE_KEYID}]; 1 key(s) trusted)"
    )


def test_another_digest_is_not_the_artifact(operator_ring: Keyring) -> None:
    other = "AB" * 32
    v = evaluate(
        socair_envelope("authorized"), TrustPolicy(operator_ring), expected=ExpectedDigest(f" {other} ")
    )
    assert v.reason is Reason.DIGEST_MISMATCH
    assert v.message == (
        f"attestation not admitted by policy: attestation is for {FIXTURE_SHA256}, not the artifact {other.lower()}"
    )


def test_uppercase_expected_digest_still_matches(operator_ring: Keyring) -> None:
    v = evaluate(
        socair_envelope("authorized"),
        TrustPolicy(operator_ring),
        expected=ExpectedDigest(FIXTURE_SHA256.upper()),
    )
    assert v.admitted


def test_a_key_not_in_the_ring_is_refused() -> None:
    other = Keyring([generate_key().public])
    v = evaluate(socair_envelope("authorized"), TrustPolicy(other), expected=EXPECTED)
    assert v.reason is Reason.SIGNATURE_INVALID
    assert "no valid signature by a trusted key" in v.message and "1 key(s) trusted" in v.message


def test_max_age_uses_the_injected_clock(operator_ring: Keyring) -> None:
    policy = TrustPolicy(operator_ring, max_age=timedelta(hours=2160))
    assert evaluate(socair_envelope("authorized"), policy, now=FIXTURE_NOW).admitted
    late = FIXTURE_NOW + timedelta(days=100)
    v = evaluate(socair_envelope("authorized"), policy, now=late)
    assert v.reason is Reason.TOO_OLD
    assert v.message == (
        "attestation not admitted by policy: attestation is 2424h0m0s old, over the 2160h0m0s limit;"
        " rescan the artifact"
    )


ISSUED = FIXTURE_NOW - timedelta(days=1)  # the real fixtures' header.issued_utc


@pytest.mark.parametrize("max_age", [None, timedelta(hours=24)])
def test_a_report_from_the_future_is_refused(operator_ring: Keyring, ed25519_key: SigningKey,
                                             max_age: timedelta | None) -> None:  # fmt: skip
    policy = TrustPolicy(operator_ring, max_age=max_age)
    skew = socair.MAX_CLOCK_SKEW
    assert evaluate(socair_envelope("authorized"), policy, now=ISSUED - skew).admitted  # within the skew
    v = evaluate(socair_envelope("authorized"), policy, now=ISSUED - skew - timedelta(seconds=1))
    assert v.reason is Reason.ISSUED_IN_FUTURE and not v.admitted
    assert v.message == (
        "attestation not admitted by policy: attestation is issued in the future (2026-10-03T02:50:10Z,"
        " 5m1s from now, over the 5m0s clock skew allowed); check the signer's clock"
    )
    mine = TrustPolicy(Keyring([ed25519_key.public.named(None)]), max_age=max_age)
    late = signed_statement(ed25519_key, lambda r: r["header"].update(issued_utc="2099-01-01T00:00:00Z"))
    v = evaluate(late, mine, now=FIXTURE_NOW)
    assert v.reason is Reason.ISSUED_IN_FUTURE and "(2099-01-01T00:00:00Z, 633285h9m50s from now" in v.message


def test_an_unparsable_issue_time_is_still_admitted_without_a_max_age(ed25519_key: SigningKey) -> None:
    """socair checks no time without a max age; only a time that parses can be in the future."""
    odd = signed_statement(ed25519_key, lambda r: r["header"].update(issued_utc="next year"))
    ring = Keyring([ed25519_key.public.named(None)])
    assert evaluate(odd, TrustPolicy(ring), now=FIXTURE_NOW).admitted
    v = evaluate(odd, TrustPolicy(ring, max_age=timedelta(hours=1)), now=FIXTURE_NOW)
    assert v.reason is Reason.ISSUED_TIME_INVALID


@pytest.mark.parametrize("name", ["authorized", "withheld", "conditional"])
def test_recorded_document_hashes_recompute(name: str, operator_ring: Keyring) -> None:
    payload = base64.b64decode(json.loads(socair_envelope(name))["payload"])
    predicate = json.loads(payload)["predicate"]
    assert socair.document_hash(predicate) == predicate["verification"]["document_hash"]
    strict = TrustPolicy(operator_ring, strict=True, allow_conditions=True)
    assert evaluate(socair_envelope(name), strict).reason in (Reason.ADMITTED, Reason.STATE_NOT_AUTHORIZED)


def set_path(path: str, value: Any) -> Mutate:
    def mutate(report: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = report
        for p in parents:
            node = node[p]
        node[last] = value

    return mutate


def checks_status(*statuses: str) -> Mutate:
    def mutate(report: dict[str, Any]) -> None:
        for row, status in zip(report["checks"], statuses, strict=False):
            row["status"] = status

    return mutate


def both(*mutations: Mutate) -> Mutate:
    def mutate(report: dict[str, Any]) -> None:
        for m in mutations:
            m(report)

    return mutate


CONDITIONAL = both(
    set_path("promotion_authorization.state", "authorized_with_conditions"),
    set_path("promotion_authorization.accepted_by", "ciso@example.com"),
    set_path("promotion_authorization.accepted_surfaces", ["Known-bad hash match"]),
)

# (mutation, reason, message after "attestation does not verify: ")
STATE_CASES = [
    (set_path("promotion_authorization.state", "promoted"), 'unknown promotion state "promoted"'),
    (
        set_path("promotion_authorization.authorized", False),
        'authorized flag false disagrees with state "authorized"',
    ),
    (set_path("checks", []), 'state "authorized" with no checks'),
    (checks_status("PASS", "FAIL"), 'state "authorized" over FAIL check "File inventory and payloads"'),
    (checks_status("LEAD"), 'state "authorized" over LEAD check "Format and structure"'),
    (
        checks_status("PASS", "PASS", "NOT_TESTED"),
        'state "authorized" over unaccepted NOT_TESTED check "Hash, provenance, lineage"',
    ),
    (checks_status("MAYBE"), 'check "Format and structure" has unknown status "MAYBE"'),
    (
        both(CONDITIONAL, set_path("promotion_authorization.accepted_by", "")),
        "authorized_with_conditions names no acceptor",
    ),
    (
        both(CONDITIONAL, checks_status("PASS", "PASS", "NOT_TESTED")),
        'state "authorized_with_conditions" over unaccepted NOT_TESTED check "Hash, provenance, lineage"',
    ),
    (
        set_path("schema_version", "socair.report/v2"),
        'report schema "socair.report/v2", want "socair.report/v1"',
    ),
    (
        set_path("verification.signer_key_id", "ab" * 32),
        f'report names signer "{"ab" * 32}" but was signed by',
    ),
    (set_path("header", "oops"), "predicate is not a Socair report: header is not an object"),
    (
        set_path("promotion_authorization.state", 7),
        "predicate is not a Socair report: promotion_authorization.state is not a string",
    ),
    (
        set_path("promotion_authorization.authorized", "yes"),
        "promotion_authorization.authorized is not a bool",
    ),
    (set_path("checks", {"a": 1}), "checks is not a array"),
    (set_path("checks", ["x"]), "checks[0] is not an object"),
]


@pytest.mark.parametrize(("mutate", "message"), STATE_CASES, ids=[c[1][:40] for c in STATE_CASES])
def test_report_rules(ed25519_key: SigningKey, mutate: Mutate, message: str) -> None:
    envelope = signed_statement(ed25519_key, mutate)
    v = evaluate(envelope, TrustPolicy(Keyring([ed25519_key.public.named(None)])))
    assert not v.admitted
    assert v.message.startswith("attestation does not verify: ") and message in v.message, v.message


def test_withheld_and_escalated_skip_the_check_rules(ed25519_key: SigningKey) -> None:
    for state in ("withheld", "escalated"):
        mutate = both(
            set_path("promotion_authorization.state", state),
            set_path("promotion_authorization.authorized", False),
            checks_status("FAIL", "LEAD", "MAYBE"),
        )
        v = evaluate(
            signed_statement(ed25519_key, mutate), TrustPolicy(Keyring([ed25519_key.public.named(None)]))
        )
        assert v.reason is Reason.STATE_NOT_AUTHORIZED, v.message


def test_statement_must_have_exactly_one_subject(ed25519_key: SigningKey) -> None:
    sha = "af" * 32
    envelope = signed_statement(ed25519_key, subjects=[("a", sha), ("b", sha)])
    v = evaluate(envelope, TrustPolicy(Keyring([ed25519_key.public])))
    assert v.message == "attestation does not verify: statement has 2 subjects, want 1"
    assert v.reason is Reason.SUBJECT_INVALID


def test_subject_must_be_the_artifact_hash(ed25519_key: SigningKey) -> None:
    envelope = signed_statement(ed25519_key, subjects=[("model.safetensors", "cd" * 32)])
    v = evaluate(envelope, TrustPolicy(Keyring([ed25519_key.public])))
    assert v.reason is Reason.SUBJECT_INVALID
    assert v.message.startswith(
        f'attestation does not verify: subject digest "{"cd" * 32}" is not the report'
    )


def test_uppercase_subject_digest_is_refused(ed25519_key: SigningKey) -> None:
    def upper(report: dict[str, Any]) -> None:
        report["artifact"]["sha256"] = report["artifact"]["sha256"].upper()

    v = evaluate(signed_statement(ed25519_key, upper), TrustPolicy(Keyring([ed25519_key.public])))
    assert v.reason is Reason.SUBJECT_INVALID


def test_issuer_claim_must_match_a_named_trusted_key(ed25519_key: SigningKey) -> None:
    named = Keyring([ed25519_key.public])  # named "modelseal testdata"
    claims = set_path("issuer", {"signed_by": "Mallory", "authority": "Mallory"})
    v = evaluate(signed_statement(ed25519_key, claims), TrustPolicy(named))
    assert v.reason is Reason.ISSUER_MISMATCH
    assert v.message == (
        'attestation issuer does not match the trusted key: it claims "Mallory",'
        f' but key {ed25519_key.public.short_id} is "modelseal testdata" in the trust list'
    )
    fine = set_path("issuer", {"signed_by": "modelseal testdata", "authority": "modelseal testdata"})
    v = evaluate(signed_statement(ed25519_key, fine), TrustPolicy(named))
    assert v.admitted and v.details["issuer_confirmed"] is True


def test_strict_mode_catches_a_stale_document_hash(ed25519_key: SigningKey) -> None:
    stale = set_path("verification.document_hash", "00" * 32)
    ring = Keyring([ed25519_key.public.named(None)])
    assert evaluate(signed_statement(ed25519_key, stale), TrustPolicy(ring)).admitted
    v = evaluate(signed_statement(ed25519_key, stale), TrustPolicy(ring, strict=True))
    assert v.reason is Reason.DOCUMENT_HASH_MISMATCH
    assert v.message.endswith(f"does not match the recorded {'00' * 32}")


def test_issued_time_must_be_rfc3339_when_age_is_checked(ed25519_key: SigningKey) -> None:
    ring = Keyring([ed25519_key.public.named(None)])
    bad = set_path("header.issued_utc", "yesterday")
    v = evaluate(signed_statement(ed25519_key, bad), TrustPolicy(ring, max_age=timedelta(hours=1)))
    assert v.reason is Reason.ISSUED_TIME_INVALID
    assert v.message.endswith('issued time "yesterday" is not RFC 3339, so its age cannot be checked')
    assert evaluate(signed_statement(ed25519_key, bad), TrustPolicy(ring)).admitted


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("2026-10-03T02:50:10Z", True),
        ("2026-10-03t02:50:10.123456789+02:00", True),
        ("2026-10-03 02:50:10Z", False),
        ("2026-10-03", False),
        ("2026-13-03T02:50:10Z", False),
        ("2026-10-03T02:50:10", False),
    ],
)
def test_rfc3339(text: str, ok: bool) -> None:
    assert (socair.parse_rfc3339(text) is not None) is ok
