"""Publishing to a real registry, checked by skopeo and umoci."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from modelseal.errors import InputError, RegistryError
from modelseal.publish.image import layout
from modelseal.publish.image.publisher import StagedFile
from tests.publish.helpers import model_files, push, skopeo
from tests.publish.servers import FaultProxy, Registry

LONG = "weights/" + "x" * 120 + ".safetensors"


def test_image_is_what_skopeo_and_umoci_expect(registry: Registry, tmp_path: Path) -> None:
    if shutil.which("umoci") is None or shutil.which("skopeo") is None:
        pytest.fail("skopeo and umoci are needed: run the README's test command")
    files = model_files(tmp_path, {"model.gguf": 300_000, "tokenizer/tokenizer.json": 1000, LONG: 513})
    signed = "https://ci:pa55@example.com/tiny?X-Amz-Signature=s3cr3t"  # recorded without its secrets
    result = push(registry.host, "models/tiny:v1", files, source=signed)
    ref = f"docker://{registry.host}/models/tiny:v1"
    raw = json.loads(skopeo("inspect", "--tls-verify=false", "--raw", ref))
    assert raw["mediaType"] == layout.MEDIA_MANIFEST and raw["config"]["mediaType"] == layout.MEDIA_CONFIG
    assert [layer["mediaType"] for layer in raw["layers"]] == [layout.MEDIA_LAYER] * 3
    assert [layer["annotations"][layout.ANN_TITLE] for layer in raw["layers"]] == [f.path for f in files]
    for layer, f in zip(raw["layers"], files, strict=True):
        assert (
            layer["annotations"][layout.ANN_FILE_SHA256] == hashlib.sha256(f.source.read_bytes()).hexdigest()
        )
        assert layer["annotations"][layout.ANN_FILE_SIZE] == str(f.source.stat().st_size)
    assert raw["annotations"][layout.ANN_PRIMARY] == "model.gguf"
    assert raw["annotations"][layout.ANN_SOURCE] == result.source == "https://example.com/tiny"
    info = json.loads(skopeo("inspect", "--tls-verify=false", ref))
    assert (
        info["Digest"] == result.reference.digest
        and info["Os"] == "linux"
        and info["Architecture"] == "amd64"
    )
    config = json.loads(skopeo("inspect", "--tls-verify=false", "--config", ref))
    assert config["rootfs"]["diff_ids"] == [layer["digest"] for layer in raw["layers"]]
    layout_dir = tmp_path / "oci"
    skopeo("copy", "--preserve-digests", "--src-tls-verify=false", ref, f"oci:{layout_dir}:v1")
    index = json.loads((layout_dir / "index.json").read_text())
    assert index["manifests"][0]["digest"] == result.reference.digest
    bundle = tmp_path / "bundle"
    subprocess.run(
        ["umoci", "unpack", "--image", f"{layout_dir}:v1", str(bundle)], check=True, capture_output=True
    )
    rootfs = bundle / "rootfs"
    found = sorted(str(p.relative_to(rootfs)) for p in rootfs.rglob("*") if p.is_file())
    assert found == sorted(f.path for f in files)
    for f in files:
        unpacked = rootfs / f.path
        assert unpacked.read_bytes() == f.source.read_bytes()
        assert unpacked.stat().st_mode & 0o777 == 0o644 and unpacked.stat().st_mtime == 0


def test_same_files_same_digest_across_runs_and_repositories(registry: Registry, tmp_path: Path) -> None:
    files = model_files(tmp_path, {"model.gguf": 70_000, "config.json": 10})
    first = push(registry.host, "a/model:v1", files)
    again = push(registry.host, "b/model:v2", files)
    assert first.reference.digest == again.reference.digest
    assert first.fingerprint != again.fingerprint  # a different destination
    moved = [StagedFile("renamed.gguf", files[0].source), files[1]]
    assert push(registry.host, "a/model:v3", moved).reference.digest != first.reference.digest


def test_republish_reuses_layers_and_mounts_across_repositories(registry: Registry, tmp_path: Path) -> None:
    files = model_files(tmp_path, {"model.gguf": 500_000, "config.json": 10})
    first = push(registry.host, "models/m:v1", files)
    assert all(f.uploaded for f in first.files)
    again = push(registry.host, "models/m:v1", files)
    assert not any(f.uploaded for f in again.files) and again.reference == first.reference
    from modelseal.publish.registry.reference import parse_reference

    other = push(
        registry.host, "teams/copy:v1", files, reuse_from=[parse_reference(f"{registry.host}/models/m:v1")]
    )
    assert not any(f.uploaded for f in other.files)
    files[0].source.write_bytes(b"changed")
    changed = push(registry.host, "models/m:v1", files)
    assert [f.uploaded for f in changed.files] == [True, False]


def test_multi_chunk_upload(registry: Registry, tmp_path: Path) -> None:
    files = model_files(tmp_path, {"model.gguf": 1_000_003})
    result = push(registry.host, "m/chunked:v1", files, chunk_size=100_000)
    assert result.files[0].sha256 == hashlib.sha256(files[0].source.read_bytes()).hexdigest()
    assert registry.tags("m/chunked") == ["v1"]


def test_5xx_answers_are_retried_and_uploads_resume(
    registry: Registry, proxy: FaultProxy, tmp_path: Path
) -> None:
    failures = {"POST": 2, "PUT": 2, "HEAD": 1}
    patches = {"n": 0}

    def flaky(method: str, path: str, number: int) -> str | None:
        if method == "PATCH":
            patches["n"] += 1
            return "503" if patches["n"] == 2 else None  # the second chunk, once
        if failures.get(method, 0) > 0:
            failures[method] -= 1
            return "503"
        return None

    proxy.rules.append(flaky)
    files = model_files(tmp_path, {"model.gguf": 300_000})
    result = push(proxy.host, "m/flaky:v1", files, chunk_size=100_000)
    assert result.reference.digest is not None and not any(failures.values())
    assert registry.tags("m/flaky") == ["v1"]
    methods = [m for m, _ in proxy.seen]
    # the registry said where the upload stood, and it went on from there: one upload session
    # for the layer (and one for the config), five PATCHes for four chunks
    assert methods.count("GET") >= 1 and methods.count("PATCH") == 5
    assert methods.count("POST") == 2 + 2  # two refused, then one for the layer, one for the config


def test_upload_cut_mid_request_starts_that_blob_again(
    registry: Registry, proxy: FaultProxy, tmp_path: Path
) -> None:
    """distribution 2.8 forgets an upload whose PATCH broke (its state no longer matches), so
    the blob starts again; the digest check proves nothing of the broken request survived."""
    cuts = {"n": 0}

    def cut_second_patch(method: str, path: str, number: int) -> str | None:
        if method == "PATCH":
            cuts["n"] += 1
            if cuts["n"] == 2:
                return "cut:70000"
        return None

    proxy.rules.append(cut_second_patch)
    files = model_files(tmp_path, {"model.gguf": 600_000})
    result = push(proxy.host, "m/resume:v1", files, chunk_size=200_000)
    assert result.files[0].sha256 == hashlib.sha256(files[0].source.read_bytes()).hexdigest()
    methods = [m for m, _ in proxy.seen]
    assert methods.count("GET") >= 1  # asked the registry where the upload stood
    assert methods.count("POST") == 3  # the layer twice (the registry lost the first), the config once
    assert registry.tags("m/resume") == ["v1"]


def test_registry_killed_mid_upload_fails_clearly_and_leaves_no_tag(
    registry: Registry, proxy: FaultProxy, tmp_path: Path
) -> None:
    def kill_on_patch(method: str, path: str, number: int) -> str | None:
        if method == "PATCH":
            threading.Thread(target=registry.stop).start()
            return "cut:1000"
        return None

    proxy.rules.append(kill_on_patch)
    files = model_files(tmp_path, {"model.gguf": 400_000})
    with pytest.raises(RegistryError, match=r"failed \d+ times") as info:
        push(proxy.host, "m/killed:v1", files, retries=2)
    assert "Traceback" not in str(info.value)
    registry.start()
    assert registry.tags("m/killed") == []


def test_file_that_changes_while_publishing_is_refused(registry: Registry, tmp_path: Path) -> None:
    files = model_files(tmp_path, {"model.gguf": 300_000})
    original = files[0].source.read_bytes()

    def shrink(method: str, path: str, number: int) -> str | None:
        if method == "PATCH":
            files[0].source.write_bytes(original[:1000])
        return None

    proxy = FaultProxy(registry.port)
    proxy.rules.append(shrink)
    try:
        with pytest.raises(InputError, match=r"(shrank|changed) while it was being published"):
            push(proxy.host, "m/changing:v1", files, chunk_size=100_000)
    finally:
        proxy.close()
    assert registry.tags("m/changing") == []


def test_missing_and_special_files(registry: Registry, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"No such file"):
        push(registry.host, "m/x:v1", [StagedFile("a.bin", tmp_path / "missing")])
    with pytest.raises(InputError, match="is not a regular file"):
        push(registry.host, "m/x:v1", [StagedFile("a.bin", tmp_path)])
