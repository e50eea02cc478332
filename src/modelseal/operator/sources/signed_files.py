"""What an OpenSSF Model Signing signature binds for the operator, and how it is checked.

An OMS signature's subject is the model's root digest over its files, not a
Model's ``spec.sha256``. The operator admits one only when it bound the
signed files to the bytes that will be served:

- an ``oci://`` source pinned by digest: every layer of the image is read
  (the consumer check's reader, :func:`modelseal.publish.image.contents.served_files`)
  and the image's files must be exactly the signed ones, byte for byte (no
  file added, none missing, none changed; a file the signature ignores is
  still served, so it counts as added). The gate admits the signature with a
  :class:`SignedFiles` binding, and the ``SourceImageVerified`` check
  (:mod:`modelseal.operator.sources.source_image`) compares; until it has, the Model
  waits, and a Model whose binding was not confirmed is never admitted
  (:meth:`modelseal.operator.decide.judgement.Judgement.verdict`).
- a download or pre-staged source (``https://``, ``s3://``, ``pvc://``, ...): a
  one-file Model's ``spec.sha256`` must be the digest of a signed file, and a
  folder Model's files (``spec.files``, ``spec.mmproj``) each get their signed
  digest (:mod:`modelseal.operator.decide.file_binding`). No release of LLMKube
  compares those bytes; the serving Pod's verifier does, right before the
  runtime reads them (:mod:`modelseal.operator.podverify`).

Only the ``files`` serialization with SHA-256 can be compared: shards are
hashed per byte range and the image's files by SHA-256.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from modelseal.attest.bundles.oms import OmsManifest
from modelseal.attest.bundles.oms_model import ModelComparison
from modelseal.attest.verdict import Reason
from modelseal.errors import PolicyError
from modelseal.publish.image.layer_content import LayerFile

__all__ = ["SignedFiles"]


def _refuse(message: str) -> PolicyError:
    return PolicyError(f"attestation not admitted by policy: {message}", reason=Reason.DIGEST_MISMATCH.value)


@dataclass(frozen=True)
class SignedFiles:
    """The files an OMS signature names (path -> SHA-256; ``.`` for a single-file model)."""

    root_digest: str
    files: Mapping[str, str]

    @classmethod
    def from_manifest(cls, manifest: OmsManifest) -> SignedFiles:
        """
        Raises:
            PolicyError: a shards serialization or a hash other than SHA-256.
        """
        serialization = manifest.serialization
        if serialization.method != "files" or serialization.hash_type != "sha256":
            raise _refuse(
                f"the OpenSSF Model Signing signature hashes {serialization.method} with"
                f" {serialization.hash_type}; the operator compares whole files by SHA-256"
                " (sign with the files serialization and sha256)"
            )
        return cls(
            manifest.root_digest, {path: digest for (path, _, _), digest in manifest.resources.items()}
        )

    def signed_file_with(self, sha256: str) -> str:
        """The signed file whose digest is ``sha256`` (a single-file source's binding).

        Raises:
            PolicyError: no signed file has that digest.
        """
        want = sha256.strip().lower()
        for path, digest in sorted(self.files.items()):
            if digest == want:
                return path
        raise _refuse(
            f"spec.sha256 {want} is not the digest of any of the {len(self.files)} file(s)"
            f" the OpenSSF Model Signing signature names (model digest {self.root_digest})"
        )

    def compare(self, served: Sequence[LayerFile]) -> ModelComparison:
        """The image's files against the signed ones: what was added, removed, changed."""
        have = {f.path: f.sha256 for f in served}
        signed = dict(self.files)
        if set(signed) == {"."} and len(have) == 1:  # a single-file signature: the image's one file
            signed = {next(iter(have)): signed["."]}
        return ModelComparison(
            files=len(have),
            added=tuple(sorted(have.keys() - signed.keys())),
            removed=tuple(sorted(signed.keys() - have.keys())),
            changed=tuple(sorted(p for p in have.keys() & signed.keys() if have[p] != signed[p])),
        )
