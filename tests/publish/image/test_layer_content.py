"""Reading one layer's tar stream: one regular file named as its title, nothing else."""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelseal.errors import Error, RegistryError, VerificationError
from modelseal.publish.image.layer_content import LayerFile, LayerRead, read_layer, read_layer_files
from modelseal.publish.image.layout import tar_header, tar_trailer

DATA = b"the weights" * 100


def layer(path: str, data: bytes = DATA) -> bytes:
    """A layer exactly as modelseal publishes it."""
    return tar_header(path, len(data)) + data + tar_trailer(len(data))


def tar_of(*entries: tuple[tarfile.TarInfo, bytes | None], fmt: int = tarfile.PAX_FORMAT) -> bytes:
    """A tar written by Python's tarfile (it pads to a 10 KiB record with zeros)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def entry(
    name: str,
    data: bytes | None = DATA,
    kind: bytes = tarfile.REGTYPE,
    pax: dict[str, str] | None = None,
    **records: str,
) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if data is not None else 0
    info.pax_headers = {**(pax or {}), **records}
    if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
        info.linkname = "/etc/shadow"
    return info, data


def chunked(blob: bytes, size: int = 7) -> Iterator[bytes]:
    for i in range(0, len(blob), size):
        yield blob[i : i + size]


def read(
    blob: bytes, title: str = "model.gguf", *, size: int | None = None, digest: str | None = None
) -> LayerFile:
    return read_layer(chunked(blob), digest=digest or "sha256:" + hashlib.sha256(blob).hexdigest(),
                      size=len(blob) if size is None else size, title=title, where="layer 0")  # fmt: skip


@pytest.mark.parametrize("path", ["model.gguf", "a" * 150, "modèle.gguf", "sub/dir/model.gguf", "empty"])
def test_a_modelseal_layer_reads_back(path: str) -> None:
    data = b"" if path == "empty" else DATA
    got = read(layer(path, data), path)
    assert got == LayerFile(path, len(data), hashlib.sha256(data).hexdigest())


def test_a_tar_from_another_writer_with_record_padding_reads_back() -> None:
    got = read(tar_of(entry("model.gguf")))
    assert got.sha256 == hashlib.sha256(DATA).hexdigest()


def test_a_pax_path_is_the_name_an_unpacker_uses() -> None:
    renamed = tar_of(entry("innocent.txt", path="model.gguf"))
    assert read(renamed).path == "model.gguf"
    with pytest.raises(
        VerificationError, match=re.escape("the tar entry is named 'evil.gguf', its title 'model.gguf'")
    ):
        read(tar_of(entry("model.gguf", path="evil.gguf")))


@pytest.mark.parametrize(
    ("blob", "why"),
    [
        (tar_of(entry("model.gguf"), entry("model.gguf", b"evil")), "more follows the file than tar's end blocks"),
        (tar_of(entry("model.gguf"), entry("other.txt")), "more follows the file than tar's end blocks"),
        (tar_of(entry("model.gguf", None, tarfile.SYMTYPE)), "the tar entry is a symlink"),
        (tar_of(entry("model.gguf", None, tarfile.LNKTYPE)), "the tar entry is a hard link"),
        (tar_of(entry("model.gguf", None, tarfile.DIRTYPE)), "the tar entry is a directory"),
        (tar_of(entry("model.gguf", None, tarfile.CHRTYPE)), "the tar entry is type b'3'"),
        (tar_of(entry("model.gguf", None, tarfile.FIFOTYPE)), "the tar entry is type b'6'"),
        (tar_of(entry("model.gguf", pax={"GNU.sparse.map": "0,1"})), "'GNU.sparse.map' is not allowed"),
        (tar_of(entry("model.gguf", pax={"SCHILY.xattr.security.capability": "x"})), "is not allowed"),
        (tar_of(entry("model.gguf", linkpath="/etc/shadow")), "'linkpath' is not allowed"),
        (tar_of(entry("m" * 120), fmt=tarfile.GNU_FORMAT), "not POSIX ustar"),
        (tar_of(entry("other.gguf")), "the tar entry is named 'other.gguf'"),
        (tar_of(entry("./model.gguf")), "the tar entry is named './model.gguf'"),
        (layer("model.gguf")[:-1024], "does not end with two zero blocks"),
        (layer("model.gguf")[:1700], "the tar stream ends inside an entry"),
        (layer("model.gguf") + b"\0" * 512 + b"garbage", "more follows the file than tar's end blocks"),
        (b"\0" * 1024, "the tar stream holds no entry"),
    ],
    ids=["second-entry-same-name", "second-entry", "symlink", "hardlink", "directory", "chardev", "fifo",
         "sparse", "xattr", "linkpath", "gnu", "other-name", "dot-slash", "no-end", "truncated", "garbage", "empty"],
)  # fmt: skip
def test_anything_but_one_regular_file_named_as_the_title_is_refused(blob: bytes, why: str) -> None:
    with pytest.raises(VerificationError, match=re.escape(why)):
        read(blob)


def test_handmade_header_tricks_are_refused() -> None:
    good = bytearray(layer("model.gguf"))
    bad_sum = bytearray(good)
    bad_sum[0:1] = b"n"  # the name changes, the checksum does not
    with pytest.raises(VerificationError, match="checksum does not match"):
        read(bytes(bad_sum), "nodel.gguf")
    # the size field says more than the blob holds, or less (then the data reads as a second header)
    for size in (b"77777777777\0", b"00000000001\0"):
        forged = bytearray(good)
        forged[124:136] = size
        forged[148:156] = b"%06o\0 " % (sum(forged[:148]) + 256 + sum(forged[156:512]))
        with pytest.raises(VerificationError):
            read(bytes(forged))
    # star reads 131 bytes of prefix (then times), ustar 155: one header, two names
    star = bytearray(good)
    star[345:476], star[476:479], star[508:512] = b"d" * 131, b"ir2", b"tar\0"
    star[148:156] = b"%06o\0 " % (sum(star[:148]) + 256 + sum(star[156:512]))
    with pytest.raises(VerificationError, match="uses the name prefix field"):
        read(bytes(star), "d" * 131 + "ir2/model.gguf")
    # a prefix of more than 131 bytes: star and ustar readers take different names
    with pytest.raises(VerificationError, match="uses the name prefix field"):
        read(tar_of(entry("d" * 140 + "/model.gguf"), fmt=tarfile.USTAR_FORMAT), "d" * 140 + "/model.gguf")
    # bytes hidden after the prefix's end, which readers that stop at the NUL never see
    hidden = bytearray(tar_of(entry("d" * 120 + "/model.gguf"), fmt=tarfile.USTAR_FORMAT))
    hidden[345 + 121 : 345 + 124] = b"evl"
    hidden[148:156] = b"%06o\0 " % (sum(hidden[:148]) + 256 + sum(hidden[156:512]))
    with pytest.raises(VerificationError, match="uses the name prefix field"):
        read(bytes(hidden), "d" * 120 + "/model.gguf")


def test_a_long_name_in_the_ustar_prefix_as_go_writes_it_is_read() -> None:
    """Go's archive/tar (oras, KitOps, modctl, containerd) puts a path of 101 to 255 bytes in the
    ustar prefix and name fields, not a PAX header; within 131 bytes of prefix every reader agrees."""
    path = "d" * 120 + "/model.gguf"
    blob = tar_of(entry(path), fmt=tarfile.USTAR_FORMAT)
    assert blob[345:465] == b"d" * 120 and blob[:10] == b"model.gguf"  # the prefix field holds it
    assert read(blob, path) == LayerFile(path, len(DATA), hashlib.sha256(DATA).hexdigest())
    unicode_size = tar_of(entry("model.gguf", size="²"))  # "²".isdigit() is True
    with pytest.raises(VerificationError, match="the PAX size is not a decimal number"):
        read(unicode_size)
    with pytest.raises(VerificationError, match="not allowed \\(or repeats\\)"):
        read(
            tar_of(entry("model.gguf", path="model.gguf", size=str(len(DATA)))).replace(b"size=", b"path=", 1)
        )


def test_the_blob_must_be_the_manifests_bytes() -> None:
    blob = layer("model.gguf")
    with pytest.raises(RegistryError, match="the registry served sha256:"):
        read(blob, digest="sha256:" + "0" * 64)
    with pytest.raises(RegistryError, match="sent more than the manifest's"):
        read(blob, size=len(blob) - 1)
    with pytest.raises(RegistryError, match="the blob has 3072 bytes, the manifest says 3073"):
        read(blob, size=len(blob) + 1)


def test_a_refusal_reads_the_blob_to_its_end_and_checks_its_digest() -> None:
    evil = tar_of(entry("model.gguf", None, tarfile.SYMTYPE))
    chunks = chunked(evil)
    with pytest.raises(VerificationError, match="symlink"):
        read_layer(chunks, digest="sha256:" + hashlib.sha256(evil).hexdigest(), size=len(evil),
                   title="model.gguf", where="layer 0")  # fmt: skip
    assert next(chunks, None) is None
    with pytest.raises(RegistryError, match="the registry served"):
        read(evil, digest="sha256:" + "0" * 64)  # a refusal of bytes that are not the blob is not a verdict


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=4096), st.integers(min_value=0, max_value=4096))
def test_any_bytes_are_a_layer_or_a_one_line_refusal(noise: bytes, at: int) -> None:
    blob = bytearray(layer("model.gguf"))
    blob[at : at + len(noise)] = noise
    outcome: LayerFile | Error
    try:
        outcome = read(bytes(blob))
    except Error as e:
        outcome = e
    if isinstance(outcome, Error):
        assert "\n" not in str(outcome)
    else:
        assert outcome.path == "model.gguf"


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["tar", "tar+gzip", "tar+zstd"]), st.binary(max_size=64), st.integers(0, 4096))
def test_any_bytes_of_a_directory_layer_are_files_under_it_or_a_one_line_refusal(
    form: str, noise: bytes, at: int
) -> None:
    from tests.publish.modelpack_helpers import compress, tar_stream

    tar = tar_stream([("code", None, tarfile.DIRTYPE), ("code/a.py", DATA, tarfile.REGTYPE),
                      ("code/b/c.py", b"x", tarfile.REGTYPE)])  # fmt: skip
    blob = bytearray(compress(tar, form) if form != "tar" else tar)
    blob[at : at + len(noise)] = noise
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    outcome: LayerRead | Error
    try:
        outcome = read_layer_files(chunked(bytes(blob), 1000), digest=digest, size=len(blob), title="code",
                                   where="layer 0", form=form, directory=True)  # fmt: skip
    except Error as e:
        outcome = e
    if isinstance(outcome, Error):
        assert "\n" not in str(outcome)
    else:
        assert outcome.files and all(f.path.startswith("code/") for f in outcome.files)
