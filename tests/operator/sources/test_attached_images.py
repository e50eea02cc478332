"""The reader of attached attestations: its deadline, its budgets and its cache."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from modelseal.attest.dsse.envelope import INTOTO_PAYLOAD_TYPE
from modelseal.attest.signing.private_keys import generate_key
from modelseal.errors import InputError, RegistryError
from modelseal.operator.sources import attached_images
from modelseal.operator.sources.attached_images import AttachedImages
from modelseal.operator.sources.source_image import RegistryAccess
from modelseal.publish.image import layout
from modelseal.publish.referrers.attestations import AttachedImage, read_subject, sign_image
from modelseal.publish.referrers.envelopes import FoundEnvelope
from modelseal.publish.referrers.store import attach
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import ImageReference
from tests.publish.helpers import model_files, push
from tests.publish.hostile import Answer, Seen, hostile_server
from tests.publish.servers import Registry

KEY = generate_key("ed25519")

DIGEST = "sha256:" + "a" * 64


@contextmanager
def dripping_registry() -> Iterator[str]:
    """A registry that answers every request with one byte at a time, never finishing."""
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            while not stop.wait(0.05):
                try:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                except OSError:
                    return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


def test_a_dripping_registry_holds_a_read_only_until_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the deadline, each byte within the client's 600 s read timeout keeps the read alive forever."""
    monkeypatch.setattr(attached_images, "READ_DEADLINE", 0.5)
    monkeypatch.setattr(attached_images, "BYTE_TIMEOUT", 0.3)
    with dripping_registry() as host:
        reader = AttachedImages(RegistryAccess(plain_http=frozenset({host})))
        with pytest.raises(RegistryError, match="timed out"):
            reader._fetch(ImageReference(host, "models/m", None, DIGEST), frozenset())


def found(*sizes: int) -> AttachedImage:
    envelopes = tuple(FoundEnvelope(f"sha256:{i:064x}", b"x" * n) for i, n in enumerate(sizes))
    return AttachedImage(f"oci://r.example/m@{DIGEST}", DIGEST, {}, envelopes, "referrers API", len(sizes))


def test_at_most_a_mebibyte_of_envelopes_is_read_per_image_the_trusted_first(
    registry: Registry, tmp_path: Path
) -> None:
    """Three envelopes of 600 kB attached first, then the genuine one: it is read first (its keyid is
    trusted and it is the smallest), then one more fits in the operator's 1 MiB; two are skipped."""
    ref = push(registry.host, "models/m:v1", model_files(tmp_path, {"model.gguf": 100})).reference
    with RegistryClient(ref, plain_http=True, retries=0) as c:
        _, subject = read_subject(c, ref)
        for n in range(3):
            junk = {"payloadType": INTOTO_PAYLOAD_TYPE, "payload": f"{n}" + "A" * 600_000,
                    "signatures": [{"keyid": KEY.public.keyid, "sig": "AAAA"}]}  # fmt: skip
            attach(c, subject, json.dumps(junk).encode())
        genuine = sign_image(c, ref, [KEY])
        attach(c, subject, genuine.envelope.to_json(), genuine.predicate_type)
    reader = AttachedImages(RegistryAccess(plain_http=frozenset({registry.host})))
    read = reader._fetch(ref, frozenset({KEY.public.keyid}))
    assert read.found[0].envelope == genuine.envelope.to_json()
    assert read.size <= attached_images.MAX_IMAGE_ENVELOPE_BYTES and read.listed == 4 and read.skipped == 2
    assert [f.envelope is not None for f in read.found] == [True, True]


def test_the_cache_is_bounded_in_images_and_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = AttachedImages(RegistryAccess())
    monkeypatch.setattr(attached_images, "MAX_CACHED_IMAGES", 3)
    monkeypatch.setattr(attached_images, "MAX_CACHED_BYTES", 2500)
    for i in range(5):
        reader._keep(("r", "m", f"sha256:{i:064x}"), attached_images._Read(found(10), None, 0.0))
    assert len(reader._reads) == 3
    for i in range(5, 8):
        reader._keep(("r", "m", f"sha256:{i:064x}"), attached_images._Read(found(1000), None, 0.0))
    assert sum(r.attached.size for r in reader._reads.values() if r.attached) <= 2500
    assert ("r", "m", f"sha256:{7:064x}") in reader._reads  # the newest is always kept


async def test_a_failed_read_again_keeps_the_earlier_read() -> None:
    settled: list[set[Any]] = []

    async def judged(waiters: set[Any]) -> None:
        settled.append(waiters)

    reader = AttachedImages(RegistryAccess(), on_settled=judged, retry_after=0.0)
    answers: list[Any] = [found(10), RegistryError("registry r.example: HTTP 503")]

    def fetch(ref: ImageReference, prefer: frozenset[str]) -> AttachedImage:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    reader._fetch = fetch  # type: ignore[method-assign]
    ref = ImageReference("r.example", "m", None, DIGEST)
    try:
        assert reader.lookup(ref, waiter="model-a") is None  # the first read runs
        await reader.settle()
        first = reader.lookup(ref, waiter="model-a")
        assert isinstance(first, AttachedImage) and settled == [{"model-a"}]
        reader.refresh(ref, waiter="model-a")
        await reader.settle()
        assert reader.lookup(ref, waiter="model-a") is first  # the envelopes read stay evidence
        assert reader.reads == 2
        never = ImageReference("r.example", "m", None, "sha256:" + "b" * 64)
        answers.append(RegistryError("registry r.example: HTTP 503"))
        reader.lookup(never, waiter="model-b")
        await reader.settle()
        assert str(reader.lookup(never, waiter="model-b")) == "registry r.example: HTTP 503"
    finally:
        await reader.close()


def many_layers(i: int, layers: int) -> bytes:
    """A manifest of untitled layers: within every cap, yet about 4 times its size once parsed."""
    listed = [{"mediaType": "x", "digest": f"sha256:{j:064x}", "size": 1} for j in range(layers)]
    config = {"mediaType": layout.MEDIA_CONFIG, "digest": f"sha256:{i:064x}", "size": 1}
    return json.dumps({"schemaVersion": 2, "mediaType": layout.MEDIA_MANIFEST, "config": config,
                       "layers": listed}).encode()  # fmt: skip


async def test_the_cache_counts_the_manifests_it_keeps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only envelopes were counted: 20 Models of a hostile registry's 4 MiB manifests held 270 MiB."""
    monkeypatch.setattr(attached_images, "MAX_CACHED_BYTES", 3 * 1024 * 1024)
    manifests = {"sha256:" + hashlib.sha256(body).hexdigest(): body for body in
                 (many_layers(i, 3000) for i in range(6))}  # fmt: skip

    def script(seen: Seen) -> Answer:
        digest = seen.path.rpartition("/")[2]
        if "/manifests/" in seen.path and digest in manifests:
            return Answer(200, {"Content-Type": layout.MEDIA_MANIFEST}, manifests[digest])
        if "/referrers/" in seen.path:
            return Answer(200, {"Content-Type": layout.MEDIA_INDEX}, b'{"schemaVersion":2,"manifests":[]}')
        return Answer(404)

    with hostile_server(script) as registry:
        reader = AttachedImages(RegistryAccess(plain_http=frozenset({registry.host})))
        try:
            for digest in manifests:
                ref = ImageReference(registry.host, "m", None, digest)
                assert reader.lookup(ref, waiter=digest) is None
                await reader.settle()
                assert isinstance(reader.lookup(ref, waiter=digest), AttachedImage)
        finally:
            await reader.close()
    kept = [r.attached for r in reader._reads.values() if r.attached is not None]
    assert 1 < len(kept) < len(manifests) and kept[-1].digest == list(manifests)[-1]
    assert sum(a.manifest_size for a in kept) * attached_images.PARSED_MANIFEST_FACTOR <= 3 * 1024 * 1024


def test_a_ca_file_that_is_a_fifo_is_refused_never_waited_on(tmp_path: Any) -> None:
    """Reading a FIFO waits for a writer: the read's thread would be held for ever."""
    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)
    reader = AttachedImages(RegistryAccess(ca_file=str(fifo)))
    with pytest.raises(InputError, match=r"^CA file \S+ca\.pem: not a regular file$"):
        reader._fetch(ImageReference("registry.example", "models/m", None, DIGEST), frozenset())


async def test_a_read_made_for_other_trusted_keys_is_made_again() -> None:
    """The trusted hints order the read: when the keys change, what was read first may not hold the one
    they trust, so the image is read again for them (not more often than ``retry_after``)."""
    reader = AttachedImages(RegistryAccess(), retry_after=0.0)
    asked: list[frozenset[str]] = []

    def fetch(ref: ImageReference, prefer: frozenset[str]) -> AttachedImage:
        asked.append(prefer)
        return found(10)

    reader._fetch = fetch  # type: ignore[method-assign]
    ref = ImageReference("r.example", "m", None, DIGEST)
    try:
        for prefer in ({"a"}, {"a"}, {"b"}, {"b"}):
            reader.lookup(ref, waiter="model", prefer=frozenset(prefer))
            await reader.settle()
        reader.retry_after = 3600.0
        reader.lookup(ref, waiter="model", prefer=frozenset({"c"}))  # too soon: the read stays
        await reader.settle()
    finally:
        await reader.close()
    assert asked == [frozenset({"a"}), frozenset({"b"})]
