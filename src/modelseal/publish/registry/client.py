"""A client for the OCI distribution API: blobs, uploads and manifests.

Requests go out through :class:`~modelseal.publish.registry.session.RegistrySession`
(origin-bound credentials, on-demand authentication, retries, capped
bodies). This module checks every digest the registry returns; a manifest
is read with a 4 MiB cap. Large blobs go up through
:mod:`modelseal.publish.registry.upload`, in constant memory and resumably, and come
down through :mod:`modelseal.publish.registry.blobs`.
"""

from __future__ import annotations

import contextlib
import hashlib
import urllib.parse
from collections.abc import Iterator

import httpx

from modelseal.errors import RegistryError
from modelseal.publish.registry.blobs import open_blob
from modelseal.publish.registry.reference import is_tag
from modelseal.publish.registry.replies import json_object, registry_error
from modelseal.publish.registry.session import RETRY_STATUSES, RegistrySession

__all__ = ["MANIFEST_TYPES", "RETRY_STATUSES", "RegistryClient", "registry_error"]

MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
#: a tag list is read with this cap, and this many of its tags looked at for blobs to reuse
MAX_TAG_LIST_BYTES = 256 * 1024
MAX_LISTED_TAGS = 16


class RegistryClient(RegistrySession):
    """Talks to one repository of one registry: its blobs and manifests."""

    # -- blobs -------------------------------------------------------------------------

    def blob_exists(self, digest: str) -> bool:
        """Whether the repository already has the blob."""
        r = self.request(
            "HEAD", f"/v2/{self.repository}/blobs/{digest}", what=f"check blob {digest[:19]}", ok=(200, 404)
        )
        return r.status_code == 200

    def mount_blob(self, digest: str, from_repository: str) -> bool:
        """Cross-repository mount; False when the registry opened an upload instead."""
        self._scopes.add(f"repository:{from_repository}:pull")
        q = urllib.parse.urlencode({"mount": digest, "from": from_repository})
        r = self.request(
            "POST",
            f"/v2/{self.repository}/blobs/uploads/?{q}",
            what=f"mount blob {digest[:19]}",
            ok=(201, 202),
        )
        if r.status_code == 201:
            return True
        location = r.headers.get("Location")
        if location:
            self.request("DELETE", location, what="cancel upload", ok=(200, 202, 204, 404))
        return False

    def start_upload(self) -> str:
        """Open a blob upload; return its location."""
        r = self.request("POST", f"/v2/{self.repository}/blobs/uploads/", what="start upload", ok=(202,))
        location = r.headers.get("Location")
        if not location:
            raise RegistryError(f"start upload: {self.host} gave no upload location")
        return self.resolve(location)

    def finish_upload(self, location: str, digest: str, content: bytes = b"") -> None:
        """Close an upload with its digest (and a last piece); the registry must agree on the digest."""
        sep = "&" if "?" in location else "?"
        url = f"{location}{sep}{urllib.parse.urlencode({'digest': digest})}"
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(len(content))}
        r = self.request(
            "PUT", url, what=f"finish upload of {digest[:19]}", headers=headers, content=content, ok=(201,)
        )
        reported = r.headers.get("Docker-Content-Digest")
        if reported and reported != digest:
            raise RegistryError(f"the registry stored blob {reported}, expected {digest}")

    def upload_bytes(self, data: bytes) -> str:
        """Upload a small blob in one request (skipped when present); return its digest."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if not self.blob_exists(digest):
            self.finish_upload(self.start_upload(), digest, data)
        return digest

    # -- manifests -------------------------------------------------------------------

    def put_manifest(self, reference: str, body: bytes, media_type: str) -> str:
        """PUT a manifest under a tag or digest; return the digest the registry confirms.

        Raises:
            RegistryError: refused (for instance a blob is missing) or a digest mismatch.
        """
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        r = self.request(
            "PUT",
            f"/v2/{self.repository}/manifests/{reference}",
            what=f"push manifest {reference}",
            headers={"Content-Type": media_type},
            content=body,
            ok=(201,),
        )
        reported = r.headers.get("Docker-Content-Digest")
        if reported and reported != digest:
            raise RegistryError(
                f"push manifest {reference}: the registry reports {reported}, expected {digest}"
            )
        return digest

    def get_manifest(
        self,
        reference: str,
        *,
        repository: str | None = None,
        what: str | None = None,
        cap: int = MAX_MANIFEST_BYTES,
    ) -> tuple[bytes, str, str] | None:
        """Fetch a manifest by tag or digest: (bytes, media type, digest), or None if absent.

        ``repository`` reads another repository of the same registry (for reuse);
        ``what`` names the read in errors; at most ``cap`` bytes are read.
        A manifest fetched by digest must hash to that digest.

        Raises:
            RegistryError: unreachable, refused, oversized, or the wrong digest.
        """
        repo = repository or self.repository
        if repo != self.repository:
            self._scopes.add(f"repository:{repo}:pull")  # a token asked for after a 401 covers it
        r = self.request(
            "GET",
            f"/v2/{repo}/manifests/{reference}",
            what=what or f"fetch manifest {reference}",
            headers={"Accept": ", ".join(MANIFEST_TYPES)},
            ok=(200, 404),
            limit=cap,
        )
        if r.status_code == 404:
            return None
        body = r.content
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        if reference.startswith("sha256:") and digest != reference:
            raise RegistryError(f"{what or 'fetch manifest'}: {self.host} served {digest} for {reference}")
        media_type = r.headers.get("Content-Type", "").split(";")[0].strip()
        return body, media_type, digest

    def list_tags(self, *, limit: int = MAX_LISTED_TAGS) -> list[str]:
        """The repository's tags (at most ``limit``, the last in the registry's order); [] if none.

        A name the registry lists that is not a valid tag is left out: it never reaches a URL.

        Raises:
            RegistryError: unreachable, refused, oversized, or not a tag list.
        """
        status, _, body = self.get_capped(
            f"/v2/{self.repository}/tags/list",
            what="list tags",
            accept="application/json",
            cap=MAX_TAG_LIST_BYTES,
        )
        if status == 404:
            return []
        tags = json_object(body, "list tags").get("tags")
        valid = [t for t in tags if isinstance(t, str) and is_tag(t)] if isinstance(tags, list) else []
        return valid[-limit:] if limit > 0 else []

    # -- reading blobs ---------------------------------------------------------------

    def open_blob(
        self, digest: str, *, chunk_size: int = 1024 * 1024
    ) -> contextlib.AbstractContextManager[Iterator[bytes]]:
        """Stream a blob: see :func:`modelseal.publish.registry.blobs.open_blob`.

        Raises:
            RegistryError: absent, refused, unreachable, or broken off mid-stream.
        """
        return open_blob(self, digest, chunk_size=chunk_size)

    # -- small documents read with a cap (the referrers API) ------------------------------

    def get_capped(
        self, path: str, *, what: str, accept: str, cap: int, ok: tuple[int, ...] = (200, 404)
    ) -> tuple[int, httpx.Headers, bytes]:
        """GET a small document from this registry, reading at most ``cap`` bytes of it.

        Authenticates and retries as :meth:`request` does. Returns (status, headers, body).

        Raises:
            RegistryError: larger than ``cap``, unreachable, refused, or a status not in ``ok``.
        """
        r = self.request("GET", path, what=what, headers={"Accept": accept}, ok=ok, limit=cap)
        return r.status_code, r.headers, r.content
