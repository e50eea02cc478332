"""Compressed and multi-file tar layers as other tools write them: `oras push` of a directory
(tar+gzip, packed by oras), GNU tar's `--zstd` and a GNU tar of a directory, pushed by oras.

modelseal lists each file the layers hold, checks the primary file against a
SHA-256 (refused when one byte differs), and attests and verifies every file.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from modelseal.errors import VerificationError
from modelseal.publish.image import media_types
from modelseal.publish.image.contents import check_served, describe
from modelseal.publish.registry.reference import parse_reference
from tests.cli.conftest import Run
from tests.cli.test_image_attestations import keys
from tests.publish.image.test_modelpack import client_for
from tests.publish.image.test_oras_peers import oras_push_modelpack
from tests.publish.peers import peer, run
from tests.publish.servers import Registry

# the last path is over 100 bytes: Go's archive/tar (oras) puts its directories in the ustar prefix
CODE = {"code/train.py": b"print('train')\n", "code/lib/util.py": b"def f():\n    return 1\n",
        f"code/{'nested' * 17}/helper.py": b"x = 1\n"}  # fmt: skip
DOCS = {"docs/README.md": b"# model\n", "docs/LICENSE": b"Apache-2.0\n"}


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


def oras_push(oras: str, host: str, repo_tag: str, root: Path, layers: list[tuple[str, str, str]],
              diff_ids: list[str]) -> tuple[str, list[dict[str, Any]]]:  # fmt: skip
    """``oras push`` a ModelPack; the image pushed and its manifest's layers."""
    image = oras_push_modelpack(oras, host, repo_tag, root, layers, diff_ids)
    manifest = json.loads(run(oras, "manifest", "fetch", "--plain-http", image.removeprefix("oci://")).stdout)
    return image, manifest["layers"]


def oras_directory(oras: str, registry: Registry, root: Path, weights: Path) -> str:
    """Weights (raw) and code/ (oras packs a directory as tar+gzip). oras records the tar's digest
    (its diffId) only once it has packed it, so a first push learns it; oras packs the same
    directory to the same bytes, so the second push, with the config's diffIds, holds the same layer."""
    layers = [("model.gguf", media_types.layer_type("weight", "raw"), "model.gguf"),
              ("code", media_types.layer_type("code", "tar+gzip"), "code")]  # fmt: skip
    _, first = oras_push(oras, registry.host, "oras/dir:probe", root, layers, ["sha256:" + "0" * 64] * 2)
    diff_id = first[1]["annotations"]["io.deis.oras.content.digest"]
    diff_ids = ["sha256:" + digest(weights.read_bytes()), diff_id]
    image, second = oras_push(oras, registry.host, "oras/dir:v1", root, layers, diff_ids)
    assert second[1]["digest"] == first[1]["digest"]
    return image


def test_a_directory_oras_packs_as_tar_gzip_is_checked_file_by_file(
    cli: Run, registry: Registry, tmp_path: Path
) -> None:
    oras = peer("oras")
    root = tmp_path / "push"
    write(root, {"model.gguf": b"oras weights" * 4000, **CODE})
    weights = root / "model.gguf"
    image = oras_directory(oras, registry, root, weights)
    want = digest(weights.read_bytes())
    with client_for(image) as c:
        info = describe(c, parse_reference(image, allow_oci_scheme=True))
        served = check_served(c, info, want)
        with pytest.raises(VerificationError, match=f"has SHA-256 {want}, not {'0' * 64}"):
            check_served(c, info, "0" * 64)
    held = {f.path: f.sha256 for layer in served for f in layer}
    assert held == {"model.gguf": want, **{p: digest(d) for p, d in CODE.items()}}
    inspected = cli("publish", "inspect", image, "--sha256", want, "--plain-http", "--json")
    assert inspected.code == 0, inspected.err
    listed = {f["path"]: f["sha256"] for f in json.loads(inspected.out)["files"]}
    assert listed == held
    # every file the directory holds is bound by an attestation, and verified against the manifest
    key, pub = keys(cli, tmp_path)
    attested = cli("attest", image, "--key", key, "--attach", "--plain-http")
    assert attested.code == 0, attested.err
    verified = cli("verify", "--image", image, "--trusted", pub, "--plain-http", "--json")
    assert verified.code == 0, verified.err
    assert {f["path"]: f["sha256"] for f in json.loads(verified.out)["files"]} == held


def test_a_zstd_tar_and_a_directory_tar_gnu_tar_wrote(registry: Registry, tmp_path: Path) -> None:
    """GNU tar (POSIX format, as the spec's reproducibility rules ask): `--zstd` of the weights,
    and docs/ as an uncompressed tar of a directory; one byte of the weights changed is refused."""
    oras = peer("oras")
    images, models = [], [b"zstd weights" * 5000, b"zstd weights" * 4999 + b"zstd weightS"]
    for i, model in enumerate(models):
        root = tmp_path / f"push{i}"
        write(root, {"model.gguf": model, **DOCS})
        tar = ["tar", "--format=posix", "--pax-option=delete=atime,delete=ctime", "--mtime=@0", "--owner=0",
               "--group=0", "--numeric-owner", "--sort=name"]  # fmt: skip
        run(*tar, "--zstd", "-cf", "model.tar.zst", "model.gguf", cwd=root)
        run(*tar, "-cf", "docs.tar", "docs", cwd=root)
        run("zstd", "-q", "-d", "model.tar.zst", "-o", "model.tar", cwd=root)
        inflated = (root / "model.tar").read_bytes()
        layers = [("model.tar.zst", media_types.layer_type("weight", "tar+zstd"), "model.gguf"),
                  ("docs.tar", media_types.layer_type("doc", "tar"), "docs")]  # fmt: skip
        diff_ids = ["sha256:" + digest(inflated), "sha256:" + digest((root / "docs.tar").read_bytes())]
        images.append(oras_push(oras, registry.host, f"gnu/zstd:v{i}", root, layers, diff_ids)[0])
    want = digest(models[0])
    with client_for(images[0]) as c:
        info = describe(c, parse_reference(images[0], allow_oci_scheme=True))
        served = check_served(c, info, want)
    assert [(f.path, f.sha256) for layer in served for f in layer] == [
        ("model.gguf", want), *sorted((p, digest(d)) for p, d in DOCS.items())]  # fmt: skip
    with client_for(images[1]) as c:
        info = describe(c, parse_reference(images[1], allow_oci_scheme=True))
        with pytest.raises(VerificationError, match=f"has SHA-256 {digest(models[1])}, not {want}"):
            check_served(c, info, want)
