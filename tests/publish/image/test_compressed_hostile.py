"""Compressed and multi-file ModelPack tar layers written to deceive, pushed to a real registry.

Each is refused by ``modelseal publish inspect --sha256`` in one line (exit 1,
or 3 where the registry's bytes are at fault), never a traceback; a sound
one is listed file by file.
"""

from __future__ import annotations

import io
import json
import tarfile
import zlib
from collections.abc import Callable

import pytest

from modelseal.publish.image import inflate, media_types
from tests.cli.conftest import Run
from tests.publish.modelpack_helpers import (
    Entry,
    Layer,
    compress,
    config_for,
    packed_layer,
    push_modelpack,
    raw_layer,
    sha256,
    tar_stream,
)
from tests.publish.servers import Registry

WEIGHTS = b"weights" * 1000
REG, DIR, SYM, LNK = tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE
CODE: list[Entry] = [("code", None, DIR), ("code/a.py", b"print(1)\n", REG), ("code/sub", None, DIR),
                     ("code/sub/b.py", b"x = 2\n", REG)]  # fmt: skip
FORMS = ["tar", "tar+gzip", "tar+zstd"]
GOOD = tar_stream(CODE)
EVIL = tar_stream([("code/evil.py", b"import os\n", REG)])


def push(registry: Registry, layers: list[Layer], diff_ids: list[str] | None = None) -> str:
    """A ModelPack of the weights (raw, the primary file) and ``layers``."""
    every = [raw_layer("model.gguf", WEIGHTS), *layers]
    config = config_for(diff_ids) if diff_ids is not None else None
    return push_modelpack(registry.host, "h/packed:v1", every, config=config)


def inspect(cli: Run, image: str) -> tuple[int, str, str]:
    got = cli("publish", "inspect", image, "--sha256", sha256(WEIGHTS), "--plain-http", "--json")
    return got.code, got.out, got.err


def layer_of(entries: list[Entry], form: str, path: str = "code") -> Layer:
    tar = tar_stream(entries)
    return packed_layer(path, compress(tar, form) if form != "tar" else tar, form)


def diff_ids_for(*tars: bytes) -> list[str]:
    return ["sha256:" + sha256(WEIGHTS), *("sha256:" + sha256(t) for t in tars)]


@pytest.mark.parametrize("form", FORMS)
def test_a_directory_layer_is_listed_file_by_file(cli: Run, registry: Registry, form: str) -> None:
    """KitOps writes the filepath's parents as directory entries too; oras does not."""
    entries: list[Entry] = [("src", None, DIR), *[(f"src/{n}", d, k) for n, d, k in CODE]]
    tar = tar_stream(entries)
    image = push(registry, [layer_of(entries, form, "src/code")], diff_ids_for(tar))
    code, out, err = inspect(cli, image)
    assert code == 0, err
    files = [(f["path"], f["sha256"], f["size"]) for f in json.loads(out)["files"]]
    assert files == [("model.gguf", sha256(WEIGHTS), len(WEIGHTS)),
                     ("src/code/a.py", sha256(b"print(1)\n"), 9), ("src/code/sub/b.py", sha256(b"x = 2\n"), 6)]  # fmt: skip
    assert "read 1 layer(s), 15 B; 1 raw layer(s)" in err


def bomb(form: str, size: int = inflate.FLOOR + 2**20) -> bytes:
    """A sound tar, then zeros (tar's end blocks are zeros) past what a small layer may inflate to,
    compressed as they stream."""
    parts = [GOOD, *[b"\0" * 2**20] * (size // 2**20)]
    if form == "tar+gzip":
        z = zlib.compressobj(1, zlib.DEFLATED, 31)
        return b"".join(z.compress(p) for p in parts) + z.flush()
    from backports import zstd

    c = zstd.ZstdCompressor()
    return b"".join(c.compress(p) for p in parts) + c.flush()


def huge_entry(form: str) -> bytes:
    """A header claiming more bytes than the layer may inflate to."""
    info = tarfile.TarInfo("code/zeros")
    info.size = inflate.inflate_limit(1000) + 1
    return compress(info.tobuf(tarfile.PAX_FORMAT) + b"\0" * 4096, form)


def entries_only(tar: bytes) -> bytes:
    """A tar's entries without its end blocks."""
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        last = t.getmembers()[-1]
    return tar[: last.offset_data + -(-last.size // 512) * 512]


def two_frames(form: str, first: bytes, second: bytes) -> bytes:
    return compress(first, form) + compress(second, form)


CASES: dict[str, tuple[Callable[[str], bytes], str, int]] = {
    "bomb": (lambda f: bomb(f), "refused as a decompression bomb", 1),
    "huge-entry": (huge_entry, "more than the layer may inflate to", 1),
    "second-member": (lambda f: two_frames(f, GOOD, EVIL), "bytes follow the layer's", 1),
    "trailing": (lambda f: compress(GOOD, f) + b"garbage", "bytes follow the layer's", 1),
    "trailing-zeros": (lambda f: compress(GOOD, f) + b"\0" * 8, "bytes follow the layer's", 1),
    "truncated": (lambda f: compress(GOOD, f)[:-9], "stream is truncated", 1),
    "traversal": (lambda f: compress(tar_stream([("code/../../etc/cron.d/x", b"x", REG)]), f),
                  "'code/../../etc/cron.d/x' is not a normalised relative path", 1),
    "absolute": (lambda f: compress(tar_stream([("/etc/passwd", b"x", REG)]), f), "is absolute", 1),
    "outside": (lambda f: compress(tar_stream([("other/x.py", b"x", REG)]), f),
                "'other/x.py' is outside the layer's filepath 'code'", 1),
    "duplicate": (lambda f: compress(tar_stream([*CODE, ("code/a.py", b"evil", REG)]), f),
                  "the tar entry 'code/a.py' repeats", 1),
    "file-and-dir": (lambda f: compress(tar_stream([("code/a", b"x", REG), ("code/a/b", b"y", REG)]), f),
                     "'code/a/b' is a file and a directory at once", 1),
    "symlink": (lambda f: compress(tar_stream([*CODE, ("code/link", None, SYM)]), f), "is a symlink", 1),
    "hardlink": (lambda f: compress(tar_stream([*CODE, ("code/link", None, LNK)]), f), "is a hard link", 1),
    "gnu-long-name": (lambda f: compress(tar_stream([("code/" + "x" * 120, b"x", REG)], tarfile.GNU_FORMAT), f),
                      "not POSIX ustar", 1),
    "after-a-lone-zero-block": (lambda f: compress(entries_only(GOOD) + b"\0" * 512 + EVIL, f),
                                "more follows the first end block", 1),
}  # fmt: skip


@pytest.mark.parametrize("form", ["tar+gzip", "tar+zstd"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_compressed_layer_is_refused_in_one_line(
    cli: Run, registry: Registry, form: str, case: str
) -> None:
    make, why, exit_code = CASES[case]
    image = push(registry, [packed_layer("code", make(form), form)], diff_ids_for(GOOD))
    code, out, err = inspect(cli, image)
    assert code == exit_code, err
    assert why in err and err.startswith("error: ") and err.count("\n") == 1, err
    assert out == ""


def test_a_layer_that_inflates_to_another_diff_id(cli: Run, registry: Registry) -> None:
    """The config's diffId is what a runtime checks the inflated tar against: a lie is refused."""
    image = push(registry, [layer_of(CODE, "tar+gzip")], diff_ids_for(EVIL))
    code, _, err = inspect(cli, image)
    assert (
        code == 1
        and f"inflates to sha256:{sha256(GOOD)}; the config's diffId is sha256:{sha256(EVIL)}" in err
    )


def test_a_zstd_frame_that_needs_a_larger_window(cli: Run, registry: Registry) -> None:
    from backports import zstd

    wide = zstd.ZstdCompressor(options={zstd.CompressionParameter.window_log: 27})
    blob = wide.compress(GOOD) + wide.flush()
    image = push(registry, [packed_layer("code", blob, "tar+zstd")], diff_ids_for(GOOD))
    code, _, err = inspect(cli, image)
    assert code == 1 and "the tar+zstd stream does not decode (" in err and "memory" in err, err


@pytest.mark.parametrize("form", FORMS)
def test_a_primary_file_that_is_a_directory_is_not_checked(cli: Run, registry: Registry, form: str) -> None:
    """No weight is a raw file: the primary is the first weight layer, a directory here."""
    blob, _, notes = layer_of(CODE, form)
    tar = tar_stream(CODE)
    layers = [(blob, media_types.layer_type("weight", form), notes)]
    image = push_modelpack(registry.host, "h/dir:v1", layers, config=config_for(["sha256:" + sha256(tar)]))
    got = cli("publish", "inspect", image, "--sha256", sha256(b"print(1)\n"), "--plain-http")
    assert got.code == 1
    assert "the primary file code is a directory in its layer" in got.err, got.err


def test_two_layers_claiming_one_path(cli: Run, registry: Registry) -> None:
    image = push(registry, [layer_of(CODE, "tar+gzip"), layer_of(CODE, "tar+zstd")],
                 diff_ids_for(GOOD, GOOD))  # fmt: skip
    code, _, err = inspect(cli, image)
    assert code == 1 and "'code' is given twice" in err, err


@pytest.mark.parametrize("entry", ["code/model.gguf", "code/model.gguf/deeper"])
def test_a_directory_entry_where_another_layer_has_a_file(cli: Run, registry: Registry, entry: str) -> None:
    """An empty directory that would replace another layer's verified file when the layers are
    unpacked (a red team's case) cannot be written: a directory layer's entries are at its
    filepath, under it or above it, and no layer's filepath may be at, under or above another's."""
    config = tar_stream([("code/model.gguf", b"{}", REG)])
    dirs = [*CODE, (entry, None, DIR)]
    image = push(registry, [packed_layer("code/model.gguf", config, "tar"), layer_of(dirs, "tar+gzip")],
                 diff_ids_for(config, tar_stream(dirs)))  # fmt: skip
    code, _, err = inspect(cli, image)
    assert code == 1 and err.count("\n") == 1, err
    assert "image path 'code' is a file, but 'code/model.gguf' needs it to be a directory" in err, err
