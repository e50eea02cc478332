"""Stage a Model's files into a folder: fetch, hash, verify, then move into place.

Each file streams to a ``.partial`` under ``<dir>/.cache/modelseal-stage/``
(a folder the publisher's walk skips) while it is hashed; an interrupted
transfer resumes with ``Range`` (and a restarted process re-hashes what it
already has); only a file whose SHA-256 matches its pin is renamed into
place. The bytes hashed are the bytes served (``Accept-Encoding: identity``,
never inflated). ``HF_TOKEN`` goes to ``https://huggingface.co`` only (scheme,
host and port): redirects are followed by hand, the token is dropped when one
leaves that origin, and a redirect from HTTPS down to plain HTTP, or to
anything but an http(s) URL, is refused. Messages show a URL without its user
info or query. Files start in list order, ``concurrency`` at a time, and
while the bytes in flight fit ``max_in_flight`` (or nothing else is in
flight). Each staged file is flushed to disk before its rename unless
``fsync=False`` (for a folder that does not outlive its node, such as the
prefetch Job's emptyDir).
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

from modelseal.attest.digests.digest import sha256_file
from modelseal.errors import InputError, OperationalError, VerificationError
from modelseal.files import read_blocks
from modelseal.publish.registry.transport_errors import (
    NO_SUCH_HOST,
    REFUSED,
    describe_transport_error,
    failed_host,
    tls_refusal,
)
from modelseal.publish.registry.urls import host_port, origin
from modelseal.publish.stage.body import BodyFailed, receive_body
from modelseal.publish.stage.fetch import READ_TIMEOUT, Fetcher
from modelseal.publish.stage.partial import Digest, PartialWriter
from modelseal.publish.stage.sources import HF_HOST, StagePlan, public_url

__all__ = ["StagedFile", "Stager"]

_logger = logging.getLogger(__name__)
BLOCK = 4 * 1024 * 1024
_CA_HINT = "set SSL_CERT_FILE to the CA that signed it"


@dataclass(frozen=True)
class StagedFile:
    """A file now in place, with what was measured while it arrived."""

    dest: str
    size: int
    sha256: str
    restarts: int = 0
    skipped: bool = False


class _Interrupted(Exception):  # noqa: N818 - internal control flow
    """The transfer stopped early; worth another try."""


class Stager:
    """Fetches a staging plan into ``target``."""

    def __init__(
        self,
        target: Path,
        *,
        concurrency: int = 1,
        max_in_flight: int | None = None,
        retries: int = 5,
        backoff: float = 0.5,
        hf_token: str | None = None,
        transport: httpx.BaseTransport | None = None,
        progress: Callable[[int], None] | None = None,
        on_retry: Callable[[str], None] | None = None,
        fsync: bool = True,
    ) -> None:
        self.target = target
        self.on_retry = on_retry  # told each retry in one line (the CLI prints it on stderr)
        self.fsync = fsync
        self.concurrency = max(1, concurrency)
        self.max_in_flight = max_in_flight
        self.retries = retries
        self.backoff = backoff
        self.progress = progress
        self._fetch = Fetcher(hf_token=hf_token, transport=transport)
        self._lock = threading.Condition()
        self._in_flight = 0
        self._running = 0

    def close(self) -> None:
        self._fetch.close()

    def __enter__(self) -> Stager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- scheduling --------------------------------------------------------------------

    def stage(self, plans: list[StagePlan]) -> list[StagedFile]:
        """Stage every file; the results are in plan order.

        Raises:
            VerificationError: a file's bytes do not match its pin.
            OperationalError: a source failed (not found, refused, unreachable,
                disk full) after the retries it deserved.
            InputError: a local source is missing.
        """
        (self.target / ".cache" / "modelseal-stage").mkdir(parents=True, exist_ok=True)
        if self.concurrency == 1:
            return [self._admitted(p) for p in plans]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures = []
            for plan in plans:  # list order: a later file never starts before an earlier one
                size = self._size(plan)
                self._admit(size)
                futures.append(pool.submit(self._run, plan, size))
            return [f.result() for f in futures]

    def _size(self, plan: StagePlan) -> int:
        if self.max_in_flight is None:
            return 0
        if plan.is_local:
            try:
                return Path(plan.origin).stat().st_size
            except OSError:
                return self.max_in_flight
        size = self._fetch.size(plan.origin)
        return self.max_in_flight if size is None else size

    def _admit(self, size: int) -> None:
        with self._lock:
            while self._running and (
                self._running >= self.concurrency
                or (self.max_in_flight is not None and self._in_flight + size > self.max_in_flight)
            ):
                self._lock.wait()
            self._running += 1
            self._in_flight += size

    def _run(self, plan: StagePlan, size: int) -> StagedFile:
        try:
            return self._admitted(plan)
        finally:
            with self._lock:
                self._running -= 1
                self._in_flight -= size
                self._lock.notify_all()

    # -- one file ----------------------------------------------------------------------

    def _admitted(self, plan: StagePlan) -> StagedFile:
        final = self.target / plan.dest
        if plan.sha256 and final.is_file() and sha256_file(final) == plan.sha256:
            return StagedFile(plan.dest, final.stat().st_size, plan.sha256, skipped=True)
        key = hashlib.sha256(plan.dest.encode()).hexdigest()[:32]
        partial = self.target / ".cache" / "modelseal-stage" / f"{key}.partial"
        hasher = Digest()
        restarts = 0
        if plan.is_local:
            self._copy_local(plan, partial, hasher)
        else:
            restarts = self._download(plan, partial, hasher)
        digest = hasher.hexdigest()
        size = partial.stat().st_size
        if plan.sha256 and digest != plan.sha256:
            partial.unlink(missing_ok=True)
            raise VerificationError(
                f"{plan.dest}: the downloaded bytes hash to {digest}, but {plan.sha256} is pinned"
            )
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(partial, final)
        _logger.info("staged %s (%d bytes, sha256 %s)", plan.dest, size, digest)
        return StagedFile(plan.dest, size, digest, restarts)

    def _copy_local(self, plan: StagePlan, partial: Path, hasher: Digest) -> None:
        """Copy a regular file: a FIFO, a device (``/dev/zero``) or a directory is refused, never read."""
        try:
            fd = os.open(plan.origin, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO's open does not wait
        except FileNotFoundError:
            raise InputError(f"{plan.dest}: local source {plan.origin} does not exist") from None
        except OSError as e:
            raise InputError(f"{plan.dest}: local source {plan.origin}: {e.strerror or e}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise InputError(f"{plan.dest}: local source {plan.origin} is not a regular file")
        with (
            os.fdopen(fd, "rb") as src,
            PartialWriter(partial, 0, hasher, plan.dest, self.progress, fsync=self.fsync) as out,
        ):
            for block in read_blocks(src, BLOCK):
                out.feed(block)

    def _download(self, plan: StagePlan, partial: Path, hasher: Digest) -> int:
        have = 0
        if partial.exists():  # left by an earlier run: keep it, and hash it again
            with partial.open("rb") as f:
                for block in read_blocks(f, BLOCK):
                    hasher.update(block)
                    have += len(block)
        restarts, attempt = 0, 0
        while True:
            try:
                have, restarted = self._transfer(plan, partial, hasher, have)
                return restarts + restarted
            except _Interrupted as e:
                host = host_port(plan.origin)  # as the fetcher records it; no user info
                if str(e) in (REFUSED, NO_SUCH_HOST) and host not in self._fetch.answered:
                    raise OperationalError(
                        f"{plan.dest}: {public_url(plan.origin)}: {e}; check the source's host"
                    ) from None
                if attempt >= self.retries:
                    raise OperationalError(
                        f"{plan.dest}: {public_url(plan.origin)} failed {attempt + 1} times, last: {e}"
                    ) from None
                attempt += 1
                have = partial.stat().st_size if partial.exists() else 0
                if have == 0:
                    hasher.reset()
                delay = min(self.backoff * 2 ** (attempt - 1), 8.0)
                notice = f"{plan.dest}: {host}: {e}; retry {attempt}/{self.retries} in {delay:g} s"
                _logger.info("%s (resuming at byte %d)", notice, have)
                if self.on_retry is not None:
                    self.on_retry(notice)
                time.sleep(delay)

    def _transfer(self, plan: StagePlan, partial: Path, hasher: Digest, have: int) -> tuple[int, int]:
        headers = {"Range": f"bytes={have}-"} if have else {}
        try:
            response = self._fetch.open("GET", plan.origin, headers)
        except (httpx.LocalProtocolError, httpx.UnsupportedProtocol, httpx.InvalidURL) as e:
            # not worth a retry; the message may quote a header, so only its type is named
            raise OperationalError(f"{plan.dest}: {public_url(plan.origin)}: {type(e).__name__}") from None
        except httpx.TransportError as e:
            why = tls_refusal(e, failed_host(e, host_port(plan.origin)), _CA_HINT)
            if why is not None:  # the same on every retry
                raise OperationalError(f"{plan.dest}: {public_url(plan.origin)}: {why}") from None
            raise _Interrupted(describe_transport_error(e)) from None
        restarted = 0
        try:
            status = response.status_code
            if status in (500, 502, 503, 504, 429, 408):
                raise _Interrupted(f"HTTP {status}")
            if status == 404:
                raise OperationalError(f"{plan.dest}: {public_url(plan.origin)} was not found (HTTP 404)")
            if status in (401, 403):
                hint = "; set HF_TOKEN" if (origin(plan.origin) or ("", ""))[1] == HF_HOST else ""
                raise OperationalError(
                    f"{plan.dest}: {public_url(plan.origin)} refused access (HTTP {status}){hint}"
                )
            if status == 416 and have:
                return have, 0  # the server has no bytes past what we hold: complete
            if status == 200 and have:
                have, restarted = 0, 1  # no Range support: start again
                hasher.reset()
            elif status == 206:
                start = response.headers.get("Content-Range", "").removeprefix("bytes ").split("-")[0]
                if start != str(have):
                    hasher.reset()
                    partial.unlink(missing_ok=True)
                    raise _Interrupted(f"the server resumed at {start}, not {have}; starting again")
            elif status != 200:
                raise OperationalError(f"{plan.dest}: {public_url(plan.origin)} answered HTTP {status}")
            expected = response.headers.get("Content-Length", "")
            length = int(expected) if expected.isascii() and expected.isdigit() else None
            with PartialWriter(partial, have, hasher, plan.dest, self.progress, fsync=self.fsync) as out:
                try:
                    got = receive_body(response, out, length, READ_TIMEOUT)
                except BodyFailed as e:
                    if e.transient:
                        raise _Interrupted(f"{e.kind} after {have + e.got} bytes") from None
                    raise OperationalError(
                        f"{plan.dest}: {public_url(plan.origin)}: {e.kind} after {have + e.got} bytes"
                    ) from None
            if length is not None and got != length:
                raise _Interrupted(f"the connection closed after {got} of {expected} bytes")
            return have + got, restarted
        finally:
            response.close()
