"""The operator's ``oci://`` consumer check on ModelPack artifacts, modelseal's and another tool's."""

from __future__ import annotations

import hashlib

import pytest

from modelseal.operator.sources.source_image import RegistryAccess, SourceImageChecker
from modelseal.publish.image.modelpack import ModelPackShape
from tests.operator.sources.test_source_image import SAMPLE_SHA256, sample_files, settled
from tests.publish.helpers import push
from tests.publish.modelpack_helpers import blob_file, push_modelpack, raw_layer, tar_layer
from tests.publish.servers import Registry


@pytest.mark.parametrize("form", ["tar", "raw"])
async def test_a_modelpack_source_is_checked(registry: Registry, form: str) -> None:
    published = push(registry.host, "models/pack:v1", sample_files(), shape=ModelPackShape(raw=form == "raw"))
    checker = SourceImageChecker(RegistryAccess(plain_http=frozenset({registry.host})))
    spec = {"source": published.image, "sha256": SAMPLE_SHA256}
    ok = await settled(checker, spec)
    how = (
        "its raw layer's digest, which the runtime checks on pull" if form == "raw" else "its bytes were read"
    )
    assert ok is not None and ok.verified
    assert (
        ok.message
        == f"{published.image}: the primary file model.safetensors has SHA-256 {SAMPLE_SHA256} ({how})"
    )
    wrong = await settled(checker, {**spec, "sha256": "0" * 64})
    assert wrong is not None and wrong.reason == "SourceImageMismatch" and wrong.blocks
    await checker.close()


async def test_a_raw_source_is_checked_without_its_bytes(registry: Registry) -> None:
    published = push(registry.host, "models/pack:v1", sample_files(), shape=ModelPackShape(raw=True))
    for f in published.files:  # other bytes, same length: a read would see them
        stored = blob_file(registry.root, f.layer_digest)
        stored.write_bytes(b"\0" * stored.stat().st_size)
    checker = SourceImageChecker(RegistryAccess(plain_http=frozenset({registry.host})))
    ok = await settled(checker, {"source": published.image, "sha256": SAMPLE_SHA256})
    assert ok is not None and ok.verified
    await checker.close()


@pytest.mark.parametrize("make", [raw_layer, tar_layer])
async def test_another_tools_modelpack_is_refused_when_its_bytes_differ(
    registry: Registry, make: object
) -> None:
    weights = b"served weights" * 100
    image = push_modelpack(registry.host, "third/p:v1", [make("model.gguf", weights)])  # type: ignore[operator]
    checker = SourceImageChecker(RegistryAccess(plain_http=frozenset({registry.host})))
    ok = await settled(checker, {"source": image, "sha256": hashlib.sha256(weights).hexdigest()})
    assert ok is not None and ok.verified
    other = hashlib.sha256(b"attested weights").hexdigest()
    refused = await settled(checker, {"source": image, "sha256": other})
    assert refused is not None and refused.reason == "SourceImageMismatch" and refused.blocks
    assert refused.message.endswith(f"has SHA-256 {hashlib.sha256(weights).hexdigest()}, not {other}")
    await checker.close()
