"""The consumer check for oci:// sources, against a real registry."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from modelseal.operator.source_image import RegistryAccess, SourceImageChecker, judge
from modelseal.publish.auth import Credentials
from modelseal.publish.publisher import StagedFile
from modelseal.publish.reference import parse_reference
from tests.conftest import TESTDATA
from tests.publish.fixtures import USERS
from tests.publish.helpers import docker_config, push
from tests.publish.servers import Registry, TokenService

SAMPLE = TESTDATA / "sample-model"
SAMPLE_SHA256 = hashlib.sha256((SAMPLE / "model.safetensors").read_bytes()).hexdigest()


def sample_files() -> list[StagedFile]:
    return [StagedFile(p.name, p) for p in (SAMPLE / "model.safetensors", SAMPLE / "config.json")]


def info(sha: str | None) -> dict[str, Any]:
    return {"image": "oci://r.example.com/m@sha256:" + "a" * 64, "primary": "m.gguf",
            "files": [{"path": "m.gguf", "sha256": sha}]}  # fmt: skip


def test_judge() -> None:
    pinned = parse_reference("oci://r.example.com/m@sha256:" + "a" * 64, allow_oci_scheme=True)
    tagged = parse_reference("oci://r.example.com/m:v1", allow_oci_scheme=True)
    ok = judge(pinned, "B" * 64, info("b" * 64), None)
    assert (ok.verified, ok.reason, ok.blocks) == (True, "Verified", False)
    assert ok.message == f"{pinned.oci} records {'b' * 64} for m.gguf"
    moved = judge(tagged, "b" * 64, info("b" * 64), None)
    assert (moved.verified, moved.reason, moved.blocks) == (False, "SourceNotPinned", False)
    assert "a tag can move, pin it with @sha256:" in moved.message
    other = judge(pinned, "c" * 64, info("b" * 64), None)
    assert (other.reason, other.blocks) == ("SourceImageMismatch", True)
    assert f"the primary file m.gguf is recorded as {'b' * 64}, not {'c' * 64}" in other.message
    unrecorded = judge(pinned, "c" * 64, info(None), None)
    assert unrecorded.blocks and "records no SHA-256 for its primary file" in unrecorded.message
    down = judge(pinned, "c" * 64, None, "the registry is unreachable")
    assert (down.reason, down.blocks, down.message) == (
        "SourceImageUnreadable",
        True,
        f"{pinned.oci}: the registry is unreachable",
    )


async def test_checker_reads_the_manifest_and_caches_pinned_images(registry: Registry) -> None:
    published = push(registry.host, "models/sample:v1", sample_files())
    checker = SourceImageChecker(RegistryAccess(plain_http=frozenset({registry.host})))
    spec = {"source": published.image, "sha256": SAMPLE_SHA256}
    first = await checker.check(spec)
    assert first is not None and first.verified and first.message.endswith("for model.safetensors")
    assert (
        await checker.check(spec) == first and checker.reads == 1
    )  # an image pinned by digest never changes
    wrong = await checker.check({**spec, "sha256": "0" * 64})
    assert wrong is not None and wrong.reason == "SourceImageMismatch" and wrong.blocks
    tagged = await checker.check({**spec, "source": f"oci://{registry.host}/models/sample:v1"})
    assert tagged is not None and tagged.reason == "SourceNotPinned" and not tagged.blocks
    await checker.check({**spec, "source": f"oci://{registry.host}/models/sample:v1"})
    assert checker.reads == 4  # a tag is read every time
    missing = await checker.check({**spec, "source": f"oci://{registry.host}/models/none@sha256:{'1' * 64}"})
    assert (
        missing is not None
        and missing.reason == "SourceImageUnreadable"
        and "no such image" in missing.message
    )
    assert await checker.check({"source": "hf://org/repo", "sha256": SAMPLE_SHA256}) is None
    assert await checker.check({"source": published.image}) is None


async def test_checker_fails_closed_when_the_registry_is_down(registry: Registry) -> None:
    published = push(registry.host, "models/sample:v1", sample_files())
    checker = SourceImageChecker(RegistryAccess(plain_http=frozenset({registry.host})))
    registry.stop()
    down = await checker.check({"source": published.image, "sha256": SAMPLE_SHA256})
    assert down is not None and down.reason == "SourceImageUnreadable" and down.blocks
    registry.start()
    up = await checker.check({"source": published.image, "sha256": SAMPLE_SHA256})
    assert up is not None and up.verified  # a read error was not cached


async def test_checker_asks_only_for_pull_with_the_configured_credentials(
    token_registry: tuple[Registry, TokenService], tmp_path: Path
) -> None:
    registry, tokens = token_registry
    user, password = next(iter(USERS.items()))
    config = docker_config(tmp_path / "config.json", registry.host, user, password)
    published = push(
        registry.host, "models/sample:v1", sample_files(), credentials=Credentials(user, password)
    )
    tokens.requests.clear()
    checker = SourceImageChecker(
        RegistryAccess(docker_config=str(config), plain_http=frozenset({registry.host}))
    )
    result = await checker.check({"source": published.image, "sha256": SAMPLE_SHA256})
    assert result is not None and result.verified
    scopes = {s for r in tokens.requests for s in r["query"].get("scope", [])}
    assert scopes == {"repository:models/sample:pull"}
    anonymous = SourceImageChecker(RegistryAccess(plain_http=frozenset({registry.host})))
    refused = await anonymous.check({"source": published.image, "sha256": SAMPLE_SHA256})
    assert refused is not None and refused.reason == "SourceImageUnreadable"
    assert password not in refused.message


@pytest.mark.parametrize("bad", ["oci://no-registry", "oci://r.example.com/UPPER@sha256:" + "a" * 64])
async def test_a_malformed_source_is_unreadable(bad: str) -> None:
    result = await SourceImageChecker().check({"source": bad, "sha256": SAMPLE_SHA256})
    assert result is not None and result.reason == "SourceImageUnreadable" and result.blocks
