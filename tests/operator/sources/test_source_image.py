"""The consumer check for oci:// sources, against a real registry."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from modelseal.errors import RegistryError, VerificationError
from modelseal.operator.sources.check import SourceCheck, judge
from modelseal.operator.sources.source_image import RegistryAccess, SourceImageChecker
from modelseal.publish.image.publisher import StagedFile
from modelseal.publish.registry.auth import Credentials
from modelseal.publish.registry.reference import parse_reference
from tests.conftest import TESTDATA
from tests.publish.fixtures import USERS
from tests.publish.helpers import docker_config, push
from tests.publish.servers import Registry, TokenService

SAMPLE = TESTDATA / "sample-model"
SAMPLE_SHA256 = hashlib.sha256((SAMPLE / "model.safetensors").read_bytes()).hexdigest()


def sample_files() -> list[StagedFile]:
    return [StagedFile(p.name, p) for p in (SAMPLE / "model.safetensors", SAMPLE / "config.json")]


def test_judge() -> None:
    pinned = parse_reference("oci://r.example.com/m@sha256:" + "a" * 64, allow_oci_scheme=True)
    tagged = parse_reference("oci://r.example.com/m:v1", allow_oci_scheme=True)
    ok = judge(pinned, "B" * 64, "m.gguf", None)
    assert (ok.verified, ok.reason, ok.blocks, ok.pending) == (True, "Verified", False, False)
    assert ok.message == f"{pinned.oci}: the primary file m.gguf has SHA-256 {'b' * 64} (its bytes were read)"
    moved = judge(tagged, "b" * 64, "m.gguf", None)
    assert (moved.verified, moved.reason, moved.blocks) == (False, "SourceNotPinned", False)
    assert "a tag can move, pin it with @sha256:" in moved.message
    other = judge(pinned, "c" * 64, None, VerificationError("the primary file m.gguf has SHA-256 b, not c"))
    assert (other.reason, other.blocks) == ("SourceImageMismatch", True)
    down = judge(pinned, "c" * 64, None, RegistryError("the registry is unreachable"))
    assert (down.reason, down.blocks, down.message) == (
        "SourceImageUnreadable",
        True,
        f"{pinned.oci}: the registry is unreachable",
    )
    crash = judge(pinned, "c" * 64, None, ValueError("invalid literal for int()"))
    assert crash.reason == "SourceImageUnreadable" and crash.blocks
    assert crash.message == f"{pinned.oci}: the check failed unexpectedly (ValueError)"


async def settled(checker: SourceImageChecker, spec: dict[str, Any]) -> SourceCheck | None:
    """The check once its background read is over (the first answer is Pending)."""
    await checker.check(spec)
    await checker.settle()
    return await checker.check(spec)


async def test_checker_reads_the_bytes_in_the_background_and_caches_by_digest(registry: Registry) -> None:
    published = push(registry.host, "models/sample:v1", sample_files())
    checker = SourceImageChecker(RegistryAccess(plain_http=frozenset({registry.host})))
    spec = {"source": published.image, "sha256": SAMPLE_SHA256}
    pending = await checker.check(spec)
    assert pending == SourceCheck(False, "VerifyingSourceImage", "verifying source image", pending=True)
    assert await checker.check(spec) == pending and checker.reads == 1  # one read per image at a time
    await checker.settle()
    first = await checker.check(spec)
    assert first is not None and first.verified and "model.safetensors has SHA-256" in first.message
    assert (
        await checker.check(spec) == first and checker.reads == 1
    )  # an image pinned by digest never changes
    wrong = await settled(checker, {**spec, "sha256": "0" * 64})
    assert wrong is not None and wrong.reason == "SourceImageMismatch" and wrong.blocks
    tagged = await checker.check({**spec, "source": f"oci://{registry.host}/models/sample:v1"})
    assert tagged is not None and tagged.reason == "SourceNotPinned" and not tagged.blocks
    assert checker.reads == 2  # a tag resolves to the digest already read
    missing = await checker.check({**spec, "source": f"oci://{registry.host}/models/none@sha256:{'1' * 64}"})
    assert missing is not None and missing.pending
    await checker.settle()
    missing = await checker.check({**spec, "source": f"oci://{registry.host}/models/none@sha256:{'1' * 64}"})
    assert (
        missing is not None
        and missing.reason == "SourceImageUnreadable"
        and "no such image" in missing.message
    )
    assert await checker.check({"source": "hf://org/repo", "sha256": SAMPLE_SHA256}) is None
    assert await checker.check({"source": published.image}) is None
    await checker.close()


async def test_the_models_that_waited_are_handed_back(registry: Registry) -> None:
    published = push(registry.host, "models/sample:v1", sample_files())
    handed: list[set[Any]] = []

    async def again(waiters: set[Any]) -> None:
        handed.append(waiters)

    checker = SourceImageChecker(RegistryAccess(plain_http=frozenset({registry.host})), on_settled=again)
    spec = {"source": published.image, "sha256": SAMPLE_SHA256}
    await checker.check(spec, waiter=("default", "a"))
    await checker.check(spec, waiter=("default", "b"))
    await checker.settle()
    assert handed == [{("default", "a"), ("default", "b")}]
    await checker.close()


async def test_checker_fails_closed_when_the_registry_is_down(registry: Registry) -> None:
    published = push(registry.host, "models/sample:v1", sample_files())
    checker = SourceImageChecker(RegistryAccess(plain_http=frozenset({registry.host})), retry_after=0)
    spec = {"source": published.image, "sha256": SAMPLE_SHA256}
    registry.stop()
    down = await settled(checker, spec)
    assert down is not None and down.reason == "SourceImageUnreadable" and down.blocks
    registry.start()
    still = await checker.check(spec)  # the failure stands while the read is tried again
    assert still == down
    up = await settled(checker, spec)
    assert up is not None and up.verified  # a read error was not cached
    await checker.close()


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
    result = await settled(checker, {"source": published.image, "sha256": SAMPLE_SHA256})
    assert result is not None and result.verified
    scopes = {s for r in tokens.requests for s in r["query"].get("scope", [])}
    assert scopes == {"repository:models/sample:pull"}
    anonymous = SourceImageChecker(RegistryAccess(plain_http=frozenset({registry.host})))
    refused = await settled(anonymous, {"source": published.image, "sha256": SAMPLE_SHA256})
    assert refused is not None and refused.reason == "SourceImageUnreadable"
    assert password not in refused.message


@pytest.mark.parametrize("bad", ["oci://no-registry", "oci://r.example.com/UPPER@sha256:" + "a" * 64])
async def test_a_malformed_source_is_unreadable(bad: str) -> None:
    result = await SourceImageChecker().check({"source": bad, "sha256": SAMPLE_SHA256})
    assert result is not None and result.reason == "SourceImageUnreadable" and result.blocks
