import io
import json
import tarfile

import pytest

from modelseal.errors import InputError
from modelseal.publish.image import layout


def test_tar_header_is_deterministic_and_standard() -> None:
    header = layout.tar_header("model.gguf", 1000)
    assert header == layout.tar_header("model.gguf", 1000) and len(header) == 512
    blob = header + b"x" * 1000 + layout.tar_trailer(1000)
    assert len(blob) == layout.layer_length("model.gguf", 1000) == 512 + 1024 + 1024
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        [member] = tar.getmembers()
        assert (member.name, member.size, member.mode, member.mtime, member.uid, member.gid) == (
            "model.gguf", 1000, 0o644, 0, 0, 0,
        )  # fmt: skip
        assert member.isreg() and member.uname == "" and member.gname == ""
        assert tar.extractfile(member).read() == b"x" * 1000  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("path", "size"),
    [("d/" + "n" * 150 + ".bin", 10), ("modèle.gguf", 10), ("big.gguf", 9 * 2**30)],
    ids=["long name", "non-ASCII name", "over 8 GiB"],
)
def test_pax_headers_where_ustar_cannot(path: str, size: int) -> None:
    header = layout.tar_header(path, size)
    assert len(header) == 1536  # PAX extended header + ustar header
    with tarfile.open(fileobj=io.BytesIO(header + b"\0" * 1024)) as tar:
        # read the headers only: the content is not there
        member = tar.next()
        assert member is not None and member.name == path and member.size == size


def test_trailer_pads_to_blocks() -> None:
    assert len(layout.tar_trailer(0)) == 1024
    assert len(layout.tar_trailer(1)) == 511 + 1024
    assert len(layout.tar_trailer(512)) == 1024


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        ([], "no files to publish"),
        ([f"f{i}" for i in range(65)], "65 files is more than the 64"),
        ([""], "an image path is empty"),
        (["/etc/passwd"], "is absolute"),
        (["../x"], "not a normalised relative path"),
        (["a/../b"], "not a normalised relative path"),
        (["./a"], "not a normalised relative path"),
        (["a//b"], "not a normalised relative path"),
        (["a/"], "not a normalised relative path"),
        (["a\\b"], "backslash"),
        (["a\nb"], "line break"),
        (["a", "a"], "is given twice"),
        (["a", "a/b"], "is a file, but 'a/b' needs it to be a directory"),
        (["x" * 4097], "longer than 4096 bytes"),
        (["bad\udcff"], "not valid UTF-8"),
    ],
)
def test_validation(paths: list[str], message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        layout.validate_paths(paths)


def test_64_files_are_fine() -> None:
    layout.validate_paths([f"shard-{i}.safetensors" for i in range(64)])


def test_config_and_manifest() -> None:
    config = layout.build_config(["sha256:" + "a" * 64], layout.Platform.parse("linux/arm64/v8"))
    doc = json.loads(config)
    assert doc == {
        "created": "1970-01-01T00:00:00Z", "architecture": "arm64", "os": "linux", "variant": "v8", "config": {},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "a" * 64]},
    }  # fmt: skip
    layer = layout.Descriptor(layout.MEDIA_LAYER, "sha256:" + "a" * 64, 2048, {layout.ANN_TITLE: "m"})
    cfg = layout.Descriptor(layout.MEDIA_CONFIG, "sha256:" + "b" * 64, len(config))
    manifest = json.loads(layout.build_manifest(cfg, [layer], {"z": "1", "a": "2"}))
    assert manifest["schemaVersion"] == 2 and manifest["mediaType"] == layout.MEDIA_MANIFEST
    assert list(manifest["annotations"]) == ["a", "z"]
    assert manifest["layers"] == [
        {
            "mediaType": layout.MEDIA_LAYER,
            "digest": "sha256:" + "a" * 64,
            "size": 2048,
            "annotations": {layout.ANN_TITLE: "m"},
        }
    ]
    with pytest.raises(InputError, match="want os/architecture"):
        layout.Platform.parse("amd64")


def test_fingerprint() -> None:
    files = [("m.gguf", "a" * 64, 10)]
    fp = layout.fingerprint("r/x:v1", "https://s", files)
    assert fp.startswith("sha256:") and fp == layout.fingerprint("r/x:v1", "https://s", files)
    assert fp != layout.fingerprint("r/x:v2", "https://s", files)
    assert fp != layout.fingerprint("r/x:v1", None, files)
    assert fp != layout.fingerprint("r/x:v1", "https://s", [("m.gguf", "b" * 64, 10)])
