"""Sign an image by its digest, and verify the attestations stored beside it.

:func:`sign_image` reads the image's manifest (by digest, strictly parsed:
:func:`modelseal.publish.image.contents.describe`) and signs an in-toto Statement
whose subject is the image (:mod:`modelseal.attest.socair.image_predicate`).
:func:`verify_image` evaluates a given envelope, or every envelope attached
as a referrer (:mod:`modelseal.publish.referrers.store`), against the image's
digest, and admits when one is admitted by the trust policy; an admitted
image predicate must list exactly the files the manifest holds. The operator
reads (:func:`read_attached`, in a thread, cached) apart from judging
(:func:`judge_attached`, again whenever its keys change).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from modelseal.attest.bundles.any_attestation import evaluate_any
from modelseal.attest.dsse.envelope import Envelope
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.signing.sign import sign_payload
from modelseal.attest.signing.signers import KeySigner
from modelseal.attest.socair.image_predicate import (
    IMAGE_PREDICATE_TYPE,
    image_predicate,
    image_statement,
    predicate_files,
)
from modelseal.attest.socair.verifier import ExpectedDigest
from modelseal.attest.verdict import Reason, Verdict
from modelseal.publish.image.contents import describe_manifest, served_layers
from modelseal.publish.image.modelpack_read import MODEL_FORMATS, served_info, signed_as_held
from modelseal.publish.referrers.envelopes import FoundEnvelope, fetch_envelopes
from modelseal.publish.referrers.order import DEFAULT_BUDGET, MAX_SIGNATURES_JUDGED, ReadBudget, judging_order
from modelseal.publish.referrers.store import Subject
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import ImageReference

__all__ = [
    "AttachedImage",
    "ImageVerdict",
    "SignedImage",
    "bound_files",
    "image_policy",
    "judge_attached",
    "read_attached",
    "read_subject",
    "sign_image",
    "verify_image",
]

#: one envelope's verdict under one policy, for the image's digest (hex)
Check = Callable[[bytes, TrustPolicy, str], Verdict]
#: (referrer, envelope or None, why it is unusable, the keyids its descriptor and manifest hint at)
Candidate = tuple[str | None, bytes | None, str | None, frozenset[str]]


@dataclass(frozen=True)
class SignedImage:
    """An envelope over an image, and what was read to make it."""

    envelope: Envelope
    subject: Subject
    name: str
    info: dict[str, Any]
    predicate_type: str


@dataclass(frozen=True)
class ImageVerdict:
    """The verdict for an image, the referrer that gave it, and every attestation tried."""

    verdict: Verdict
    image: str  # oci://registry/repo@sha256:...
    digest: str
    referrer: str | None = None
    via: str | None = None
    files: list[dict[str, Any]] = field(default_factory=list)
    tried: list[tuple[str, str]] = field(default_factory=list)  # (referrer, why it was refused)
    policy: int = 0  # which of the policies given admitted it
    listed: int = 0  # referrers the registry listed
    skipped: int = 0  # of those, left unread or unjudged by the caps


@dataclass(frozen=True)
class AttachedImage:
    """An image's manifest as read, and what is attached to it (each envelope, or why it is unusable)."""

    image: str  # oci://registry/repo@sha256:...
    digest: str
    info: dict[str, Any]
    found: tuple[FoundEnvelope, ...]
    via: str
    listed: int  # how many referrers the registry listed
    manifest_size: int = 0  # the bytes of the image's manifest, which ``info`` was parsed from
    skipped: int = 0  # of those listed, how many were not read (over the caps)

    @property
    def size(self) -> int:
        """The bytes of envelope it holds."""
        return sum(len(f.envelope or b"") for f in self.found)


def read_subject(client: RegistryClient, ref: ImageReference) -> tuple[dict[str, Any], Subject]:
    """The image as :func:`describe` reads it, and its descriptor (a tag resolved once).

    Raises:
        RegistryError: no such image, or not a single image manifest.
        VerificationError: unsafe titles or a foreign layer.
    """
    info, body, media_type = describe_manifest(client, ref)
    return info, Subject(info["digest"], media_type, len(body))


def sign_image(
    client: RegistryClient,
    ref: ImageReference,
    keys: Sequence[KeySigner],
    *,
    predicate_type: str | None = None,
    predicate: dict[str, Any] | None = None,
    now: datetime | None = None,
    read_layers: bool = True,
) -> SignedImage:
    """Sign a Statement about the image ``ref`` names (resolving a tag to its digest).

    Without ``predicate_type`` the predicate is the image predicate listing its
    files, and every layer is streamed once: its bytes must hash to the SHA-256
    and size its annotations record, so a signer never vouches for a hash a
    pusher merely wrote down. ``read_layers=False``
    takes the annotations as they are, for a publisher that has just pushed
    the image by digest with annotations it computed itself.

    Raises:
        RegistryError, VerificationError: the image cannot be read, is malformed,
            or a layer's bytes disagree with its annotations.
        InputError: the image records no files (for the default predicate).
    """
    info, subject = read_subject(client, ref)
    if predicate_type is None and read_layers:
        served = served_layers(client, info)  # raises unless every layer's bytes agree with its annotations
        if info.get("format") in MODEL_FORMATS:
            # another tool's tar layers record no digest, or hold a directory: as their bytes were read
            info = served_info(info, served)
    name = f"{ref.registry}/{ref.repository}"
    kind = predicate_type or IMAGE_PREDICATE_TYPE
    body = (
        predicate
        if predicate_type is not None
        else image_predicate(name, subject.digest, subject.media_type, info, issued=now)
    )
    statement = image_statement(name, subject.digest, kind, body or {})
    return SignedImage(sign_payload(statement, keys), subject, name, info, kind)


def image_policy(policy: TrustPolicy, *, explicit_types: bool) -> TrustPolicy:
    """The policy for an image: it admits the image predicate too, unless the types were given."""
    if explicit_types or IMAGE_PREDICATE_TYPE in policy.predicate_types:
        return policy
    return replace(policy, predicate_types=(*policy.predicate_types, IMAGE_PREDICATE_TYPE))


def bound_files(verdict: Verdict, info: dict[str, Any]) -> tuple[Verdict, list[dict[str, Any]]]:
    """An admitted image predicate must list the files the manifest holds; return them."""
    if not verdict.admitted or verdict.predicate_type != IMAGE_PREDICATE_TYPE:
        return verdict, []
    listed = predicate_files({"files": verdict.details.get("files")})
    held = [{k: f.get(k) for k in ("path", "sha256", "size", "layer")} for f in info.get("files") or []]
    if info.get("format") in MODEL_FORMATS:
        held = signed_as_held(listed, held)
    if listed != held:
        message = (
            f"attestation does not verify: it lists {len(listed)} file(s) the image's manifest does not"
            f" hold as listed ({len(held)} file(s) in {info.get('image')})"
        )
        return replace(verdict, admitted=False, reason=Reason.DIGEST_MISMATCH, message=message), []
    return verdict, listed


def read_attached(
    client: RegistryClient,
    ref: ImageReference,
    prefer: frozenset[str] = frozenset(),
    budget: ReadBudget = DEFAULT_BUDGET,
) -> AttachedImage:
    """The image ``ref`` names (a tag resolved once) and the envelopes attached to it: those
    hinted with a keyid in ``prefer`` first, within ``budget``.

    Raises:
        RegistryError, VerificationError: the image or its referrers cannot be read.
    """
    info, subject = read_subject(client, ref)
    read = fetch_envelopes(client, subject.digest, prefer, budget)
    pinned = ref.pinned(subject.digest).oci
    return AttachedImage(pinned, subject.digest, info, tuple(read.found), read.via, read.listed, subject.size,
                         read.skipped)  # fmt: skip


def judge_attached(
    attached: AttachedImage,
    policies: Sequence[TrustPolicy],
    check: Check,
    max_checks: int = MAX_SIGNATURES_JUDGED,
) -> ImageVerdict:
    """Each attached envelope under each policy in turn: admitted when one is.

    Trusted hints first (:mod:`modelseal.publish.referrers.order`), cheapest
    first within a rank, while the signatures they carry (once for each
    policy) fit in ``max_checks``. Otherwise the first refusal speaks for all (``tried``
    lists them, ``skipped`` counts what the caps left out); ``check``
    computes one verdict (the operator's caches its verdicts).
    """
    candidates = [(f.referrer, f.envelope, f.error, f.hints) for f in attached.found]
    read = (attached.via, attached.listed, attached.skipped)
    return _judge(
        attached.image, attached.digest, attached.info, candidates, read, policies, check, max_checks
    )


def _judge(
    image: str,
    digest: str,
    info: dict[str, Any],
    candidates: Sequence[Candidate],
    read: tuple[str | None, int, int],  # how the referrers were found, how many listed and skipped
    policies: Sequence[TrustPolicy],
    check: Check,
    max_checks: int,
) -> ImageVerdict:
    tried: list[tuple[str, str]] = []
    first: Verdict | None = None
    (via, listed, skipped), spent = read, 0
    prefer = frozenset(k for p in policies for k in p.keys)
    for at, cost in judging_order([(c[1], c[3]) for c in candidates], prefer, len(policies)):
        referrer, data, error, _ = candidates[at]
        if spent + cost > max_checks:
            skipped += 1
            continue
        spent += cost
        refusal: Verdict | None = None
        for index, policy in enumerate(policies if data is not None else ()):
            assert data is not None
            verdict, files = bound_files(check(data, policy, digest.removeprefix("sha256:")), info)
            if verdict.admitted:
                return ImageVerdict(verdict, image, digest, referrer, via, files, tried, index,
                                    listed, skipped)  # fmt: skip
            if refusal is None or (refusal.reason == Reason.SIGNATURE_INVALID != verdict.reason):
                refusal = verdict  # the first policy that knows the signer speaks for the others
        if refusal is None:  # unreadable (or no policy to judge it by)
            why = error or "no policy to judge it by"
            refusal = Verdict(admitted=False, reason=Reason.INPUT_UNREADABLE,
                              message=f"attestation does not verify: {why}")  # fmt: skip
        tried.append((referrer or "(given)", refusal.message))
        first = first or refusal
    caps = f"{skipped} skipped: over the caps on referrers, envelope bytes and signatures judged"
    looked = f"looked up through the {via}"
    if first is None:
        none = (
            f"none of the {listed} attestations attached to {image} was read ({caps}; {looked})"
            if skipped
            else f"no attestation is attached to {image} ({looked})"
        )
        first = Verdict(
            admitted=False, reason=Reason.UNSIGNED, message=f"attestation does not verify: {none}"
        )
    elif len(tried) > 1 or skipped:
        counted = [f"{listed} listed"] * (listed > len(tried)) + [caps] * bool(skipped)
        counts = f" ({', '.join(counted)})" if counted else ""
        message = f"none of the {len(tried)} attached attestations read{counts} admits {image}; the first: "
        first = replace(first, message=message + first.message)
    return ImageVerdict(first, image, digest, None, via, [], tried, 0, listed, skipped)


def verify_image(
    client: RegistryClient,
    ref: ImageReference,
    policy: TrustPolicy,
    *,
    envelope: bytes | None = None,
    now: datetime | None = None,
) -> ImageVerdict:
    """Evaluate ``envelope``, or each attestation attached to the image, against its digest.

    An attached Sigstore bundle may carry cosign's in-toto v0.1 statement; a given one may not
    (:mod:`modelseal.attest.bundles.cosign`). Admitted when one is; otherwise the first refusal
    speaks for all (``tried`` lists them).

    Raises:
        RegistryError, VerificationError: the image or its referrers cannot be read.
    """

    def check(data: bytes, policy: TrustPolicy, digest: str) -> Verdict:
        return evaluate_any(data, policy, expected=ExpectedDigest(digest), now=now, attached=envelope is None)

    if envelope is None:
        return judge_attached(read_attached(client, ref, frozenset(policy.keys)), [policy], check)
    info, subject = read_subject(client, ref)
    image = ref.pinned(subject.digest).oci
    given = [(None, envelope, None, frozenset[str]())]
    return _judge(image, subject.digest, info, given, (None, 1, 0), [policy], check, MAX_SIGNATURES_JUDGED)
