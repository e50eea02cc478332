"""The ``SourceImageVerified`` condition: what a read of an ``oci://`` source's bytes concludes.

Pure functions of a read's outcome, shared by the checker that reads the image
(:mod:`modelseal.operator.sources.source_image`) and the comparison with the
files an OpenSSF Model Signing signature binds
(:mod:`modelseal.operator.sources.signed_files`): the primary file's digest
matched, the image's files are the signed ones, or the error that stopped the
read, each as one condition with its reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from modelseal.errors import Error, VerificationError
from modelseal.operator.sources.signed_files import SignedFiles
from modelseal.publish.image.layer_content import LayerFile
from modelseal.publish.registry.reference import ImageReference

__all__ = ["SOURCE_IMAGE_VERIFIED", "SourceCheck", "judge", "judge_files"]

SOURCE_IMAGE_VERIFIED = "SourceImageVerified"
REASON_VERIFIED = "Verified"
REASON_NOT_PINNED = "SourceNotPinned"
REASON_MISMATCH = "SourceImageMismatch"
REASON_UNREADABLE = "SourceImageUnreadable"
REASON_VERIFYING = "VerifyingSourceImage"
VERIFYING = "verifying source image"


@dataclass(frozen=True)
class SourceCheck:
    """The ``SourceImageVerified`` condition, and whether enforce mode blocks (or waits) on it."""

    verified: bool
    reason: str
    message: str
    blocks: bool = False
    pending: bool = False
    #: the root digest of the OpenSSF Model Signing signature whose files this check found served
    bound: str | None = None


def judge(
    ref: ImageReference, sha256: str, primary: str | None, error: Exception | None, *, raw: bool = False
) -> SourceCheck:
    """The condition for ``ref`` from a check's outcome: the primary file that matched, or the error."""
    want = sha256.strip().lower()
    if isinstance(error, VerificationError):
        return SourceCheck(False, REASON_MISMATCH, str(error), blocks=True)
    if isinstance(error, Error):
        return SourceCheck(False, REASON_UNREADABLE, f"{ref.oci}: {error}", blocks=True)
    if error is not None:
        why = f"{ref.oci}: the check failed unexpectedly ({type(error).__name__})"
        return SourceCheck(False, REASON_UNREADABLE, why, blocks=True)
    how = "its raw layer's digest, which the runtime checks on pull" if raw else "its bytes were read"
    served = f"the primary file {primary} has SHA-256 {want} ({how})"
    if not ref.digest:
        unpinned = f"{ref.oci} is not pinned by digest: a tag can move, pin it with @sha256:"
        return SourceCheck(False, REASON_NOT_PINNED, f"{served}; {unpinned}")
    return SourceCheck(True, REASON_VERIFIED, f"{ref.oci}: {served}")


def judge_files(
    ref: ImageReference,
    signed: SignedFiles,
    served: Sequence[LayerFile] | None,
    primary: str | None,
    sha256: str | None,
    error: Exception | None,
) -> SourceCheck:
    """The ``SourceImageVerified`` condition from the image's files (or the error reading them)."""
    if isinstance(error, VerificationError):
        return SourceCheck(False, REASON_MISMATCH, str(error), blocks=True)
    if isinstance(error, Error):
        return SourceCheck(False, REASON_UNREADABLE, f"{ref.oci}: {error}", blocks=True)
    if error is not None or served is None:
        why = f"{ref.oci}: the check failed unexpectedly ({type(error).__name__})"
        return SourceCheck(False, REASON_UNREADABLE, why, blocks=True)
    comparison = signed.compare(served)
    if not comparison.matches:
        text = f"{ref.oci}: the image's files are not the ones the OpenSSF Model Signing signature names: "
        return SourceCheck(False, REASON_MISMATCH, text + comparison.summary(), blocks=True)
    if sha256:  # spec.sha256 as well: the primary file must have it (LLMKube's field, as the consumer check)
        want = sha256.strip().lower()
        got = next((f.sha256 for f in served if f.path == primary), None)
        if got != want:
            text = f"{ref.oci}: the primary file {primary} has SHA-256 {got}, not {want}"
            return SourceCheck(False, REASON_MISMATCH, text, blocks=True)
    message = (
        f"{ref.oci}: its {comparison.files} file(s) are the ones the OpenSSF Model Signing signature"
        f" names (model digest {signed.root_digest}; their bytes were read)"
    )
    return SourceCheck(True, REASON_VERIFIED, message, bound=signed.root_digest)
