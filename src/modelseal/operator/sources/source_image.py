"""The consumer check for ``oci://`` sources: the primary file's bytes are the attested ones.

LLMKube mounts an ``oci://`` source as an ImageVolume and neither downloads
nor fingerprints it, so the attestation's digest (``spec.sha256``) is never
compared with the bytes served. This check closes that gap: it streams every
layer of the image once (:func:`modelseal.publish.image.contents.check_served`),
checks each blob against the manifest's digest and each tar stream for
exactly one regular file named as its title, and hashes the primary file.
Layer annotations are not trusted: whoever pushes an image writes them.
A ModelPack artifact's raw layer is the file itself: its digest, which the
runtime checks on pull, is compared with ``spec.sha256`` and no byte is read.

The read runs in a thread of the checker's own pool of two, so the event
loop never blocks and at most two images are read at once, each in chunks
of 1 MiB. The first reconcile starts it and the Model reads Pending
("verifying source image"); when it ends, ``on_settled`` is called with the
Models that waited, and the reconciler judges them again. A verdict (the
bytes match, or they do not) is cached by image digest and ``spec.sha256``:
an image pinned by digest cannot change. A failure to read is not: it is
reported, and the read is tried again on a later reconcile, at most every
``retry_after`` seconds. A tag is resolved to its digest on every check
and reported, since it can move after the check.

In enforce mode a failed check blocks the Model as a refused attestation
does; in warn mode it is reported only.

For an OpenSSF Model Signing signature the gate admitted, the check reads
every file of the image (pinned by digest; once per digest) and compares
them all with the signed ones (:mod:`modelseal.operator.sources.signed_files`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from modelseal.errors import Error, VerificationError
from modelseal.operator.sources.check import (
    REASON_MISMATCH,
    REASON_UNREADABLE,
    REASON_VERIFYING,
    VERIFYING,
    SourceCheck,
    judge,
)
from modelseal.operator.sources.signed_files import SignedFiles
from modelseal.publish.image.contents import check_served, describe, primary_file, served_files
from modelseal.publish.image.layer_content import LayerFile
from modelseal.publish.registry.auth import load_docker_config
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import ImageReference, parse_reference

__all__ = ["RegistryAccess", "SourceImageChecker"]

_logger = logging.getLogger(__name__)

_CACHE_SIZE = 1024
#: a read of one image: its digest, and the primary file's SHA-256 it must have, or None when
#: every file is read and kept for comparison (an OMS binding), which no spec.sha256 can name
_ReadKey = tuple[str, str | None]

Waiters = set[Hashable]


@dataclass(frozen=True)
class RegistryAccess:
    """How the operator reaches registries: credentials, a CA, plain-HTTP hosts (tests and labs only)."""

    docker_config: str | None = None
    ca_file: str | None = None
    plain_http: frozenset[str] = frozenset()


@dataclass(frozen=True)
class _Verdict:
    primary: str | None  # the primary file's path when its bytes matched (or were all read)
    error: Exception | None
    at: float
    files: tuple[LayerFile, ...] | None = None  # every file, when all were read
    raw: bool = False  # the primary file is a ModelPack raw layer: bound by its digest, not read


class SourceImageChecker:
    """Checks ``oci://`` sources against the bytes their registry serves, in the background."""

    def __init__(
        self,
        access: RegistryAccess | None = None,
        *,
        on_settled: Callable[[Waiters], Awaitable[None]] | None = None,
        concurrency: int = 2,
        retry_after: float = 30.0,
    ) -> None:
        self.access = access or RegistryAccess()
        self.on_settled = on_settled
        self.retry_after = retry_after
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="source-image")
        self._stop = threading.Event()
        self._verdicts: OrderedDict[_ReadKey, _Verdict] = OrderedDict()
        self._failures: OrderedDict[_ReadKey, _Verdict] = OrderedDict()
        self._running: dict[_ReadKey, asyncio.Task[None]] = {}
        self._waiters: dict[_ReadKey, Waiters] = {}
        self.reads = 0  # content checks started

    def _client(self, ref: ImageReference) -> RegistryClient:
        credentials = load_docker_config(self.access.docker_config).credentials_for(ref.registry)
        plain = ref.registry in self.access.plain_http
        return RegistryClient(ref, credentials=credentials, plain_http=plain, ca_file=self.access.ca_file,
                              retries=2, push=False, user_agent="modelseal-operator")  # fmt: skip

    def _resolve(self, ref: ImageReference) -> ImageReference:
        with self._client(ref) as client:
            return ref.pinned(describe(client, ref)["digest"])

    def _read(self, ref: ImageReference, sha256: str | None) -> _Verdict:
        """Blocking: the primary file's path once its bytes hash to ``sha256`` (a ModelPack raw
        layer: once its digest is ``sha256``); with None, every file, each read and hashed."""
        with self._client(ref) as client:
            info = describe(client, ref)
            primary = primary_file(info)
            if sha256 is None:
                files = tuple(served_files(client, info, stop=self._stop))
                return _Verdict(str(primary["path"]), None, time.monotonic(), files)
            check_served(client, info, sha256, stop=self._stop)
            return _Verdict(str(primary["path"]), None, time.monotonic(), raw=bool(primary.get("raw")))

    async def check(
        self, spec: Mapping[str, Any], waiter: Hashable | None = None, binding: SignedFiles | None = None
    ) -> SourceCheck | None:
        """The check for this Model, or None when its source is not ``oci://`` or it has no sha256.

        With an OpenSSF Model Signing ``binding`` (the gate's), every file of the image is read
        and compared with the signed ones, and there is always a check. Pending
        (``pending=True``) while the image is read; ``waiter`` is then handed to
        ``on_settled`` when the verdict is known.
        """
        source = spec.get("source")
        if binding is not None and (not isinstance(source, str) or not source.startswith("oci://")):
            return SourceCheck(False, REASON_MISMATCH, "spec.source is not an oci:// image", blocks=True)
        if not isinstance(source, str) or not source.startswith("oci://"):
            return None
        try:
            ref = parse_reference(source, allow_oci_scheme=True)
        except Error as e:
            return SourceCheck(False, REASON_UNREADABLE, f"spec.source: {e}", blocks=True)
        sha256 = spec.get("sha256")
        if binding is not None:
            return self._check_files(ref, binding, sha256 if isinstance(sha256, str) else None, waiter)
        if not isinstance(sha256, str) or not sha256:
            return None  # no spec.sha256: refused by the gate, or admitted by an image-bound attestation
        pinned = ref
        if not ref.digest:
            try:
                pinned = await asyncio.to_thread(self._resolve, ref)
            except Exception as e:  # a manifest that breaks the parser is a refusal, never an escape
                if not isinstance(e, Error):
                    _logger.exception("resolving %s failed unexpectedly", ref.oci)
                return judge(ref, sha256, None, e)
        assert pinned.digest is not None
        key: _ReadKey = (pinned.digest, sha256.strip().lower())
        verdict = self._verdicts.get(key)
        if verdict is not None:
            self._verdicts.move_to_end(key)
            return judge(ref, sha256, verdict.primary, verdict.error, raw=verdict.raw)
        failure = self._start(key, pinned, waiter)
        if failure is not None:
            return judge(ref, sha256, None, failure.error)
        return SourceCheck(False, REASON_VERIFYING, VERIFYING, pending=True)

    def _start(self, key: _ReadKey, ref: ImageReference, waiter: Hashable | None) -> _Verdict | None:
        """Start reading the image unless a read runs or failed lately; return that failure, if any."""
        if waiter is not None:
            self._waiters.setdefault(key, set()).add(waiter)
        failure = self._failures.get(key)
        if key not in self._running and (
            failure is None or time.monotonic() - failure.at >= self.retry_after
        ):
            self.reads += 1
            self._running[key] = asyncio.create_task(self._verify(key, ref))
        return failure

    def _check_files(
        self, ref: ImageReference, binding: SignedFiles, sha256: str | None, waiter: Hashable | None
    ) -> SourceCheck:
        """An OMS binding: the image, pinned by digest, read whole (once per digest) and compared."""
        from modelseal.operator.sources.check import judge_files

        if not ref.digest:
            why = f"{ref.oci} is not pinned by digest: an OpenSSF Model Signing signature binds files, pin it"
            return SourceCheck(False, REASON_MISMATCH, why, blocks=True)
        key: _ReadKey = (ref.digest, None)
        verdict = self._verdicts.get(key)
        if verdict is not None:
            self._verdicts.move_to_end(key)
            return judge_files(ref, binding, verdict.files, verdict.primary, sha256, verdict.error)
        failure = self._start(key, ref, waiter)
        if failure is not None:
            return judge_files(ref, binding, None, None, sha256, failure.error)
        return SourceCheck(False, REASON_VERIFYING, VERIFYING, pending=True)

    async def _verify(self, key: _ReadKey, ref: ImageReference) -> None:
        try:
            loop = asyncio.get_running_loop()
            verdict = await loop.run_in_executor(self._pool, self._read, ref, key[1])
        except asyncio.CancelledError:
            raise
        except Exception as e:  # every failure is a verdict: none may escape a background task
            if not isinstance(e, Error):
                _logger.exception("checking %s failed unexpectedly", ref.oci)
            verdict = _Verdict(None, e, time.monotonic())
        finally:
            self._running.pop(key, None)
        final = verdict.error is None or isinstance(verdict.error, VerificationError)
        cache, other = (self._verdicts, self._failures) if final else (self._failures, self._verdicts)
        cache[key] = verdict
        other.pop(key, None)
        while len(cache) > _CACHE_SIZE:
            cache.popitem(last=False)
        waiters = self._waiters.pop(key, set())
        if waiters and self.on_settled is not None:
            await self.on_settled(waiters)

    async def settle(self) -> None:
        """Wait until no check is running (the Models that waited judged again)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def close(self) -> None:
        """Stop the checks that run: a thread stops at its next chunk."""
        self._stop.set()
        for task in list(self._running.values()):
            task.cancel()
        await asyncio.gather(*self._running.values(), return_exceptions=True)
        self._pool.shutdown(wait=False, cancel_futures=True)
