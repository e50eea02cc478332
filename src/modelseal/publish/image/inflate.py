"""Inflate a ``tar+gzip`` or ``tar+zstd`` layer as it streams, in bounded memory, against bombs.

:func:`inflate` turns the compressed chunks of a blob into the tar stream,
in pieces of at most :data:`PIECE` bytes: each call to the decompressor is
given a cap on its output (zlib's and ``compression.zstd``'s ``max_length``),
so memory stays constant whatever the layer's size or ratio. It refuses:

- more inflated bytes than :func:`inflate_limit` allows for the blob's size
  (a decompression bomb: 1 KiB of gzip inflates to 1 MiB, 1 KiB of zstd to
  far more);
- anything after the first gzip member or zstd frame: a second member or
  frame (Python's ``gzip``, Go's ``compress/gzip``, GNU gzip, the ``zstd``
  tool and Go's zstd readers go on to inflate it, zlib and libzstd's frame
  decoders stop: two readers, two tars), a skippable frame, or other bytes;
- a stream that ends before its member or frame does (truncated), or that
  fails its own check (gzip's CRC-32 and length, a corrupt block);
- a zstd frame that needs a window over 32 MiB (``zstd --long`` or
  ``--ultra -21`` and up): :data:`ZSTD_WINDOW_LOG_MAX` bounds the memory one
  read may take.

zstd comes from the standard library's ``compression.zstd`` (Python 3.14)
or its backport, imported only when a zstd layer is read.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Callable, Iterable, Iterator

from modelseal.errors import VerificationError

__all__ = ["FORMS", "PIECE", "ZSTD_WINDOW_LOG_MAX", "inflate", "inflate_limit"]

PIECE = 1024 * 1024  # the most one call to a decompressor returns
RATIO = 128  # inflated bytes per compressed byte, at most (text compresses 3-10x, weights ~1.1x)
FLOOR = 64 * 1024 * 1024  # a small layer may always inflate this far (64 layers: 4 GiB in all)
CEILING = 1024**4  # and no layer further than this (1 TiB)
ZSTD_WINDOW_LOG_MAX = 25  # 32 MiB: zstd up to level 20 without --long
FORMS = ("tar+gzip", "tar+zstd")


def inflate_limit(size: int) -> int:
    """The most a compressed layer of ``size`` bytes may inflate to."""
    return min(CEILING, max(FLOOR, RATIO * size))


class _Gzip:
    """One gzip member: ``step`` inflates at most :data:`PIECE` bytes."""

    name = "gzip member"
    errors: tuple[type[Exception], ...] = (zlib.error,)

    def __init__(self) -> None:
        self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # a gzip header, not zlib's or raw deflate

    def step(self, data: bytes) -> tuple[bytes, bool]:
        """Inflate ``data`` (or what is pending): (output, whether more output is pending)."""
        out = self._d.decompress(self._d.unconsumed_tail + data, PIECE)
        return out, bool(self._d.unconsumed_tail) or (len(out) == PIECE and not self._d.eof)

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def unused(self) -> bytes:
        return self._d.unused_data


class _Zstd:
    """One zstd frame, its window at most 2**:data:`ZSTD_WINDOW_LOG_MAX` bytes."""

    name = "zstd frame"

    def __init__(self) -> None:
        if sys.version_info >= (3, 14):
            from compression import zstd  # type: ignore[import-not-found,unused-ignore]
        else:
            from backports import zstd
        self.errors: tuple[type[Exception], ...] = (zstd.ZstdError,)
        option: dict[int, int] = {zstd.DecompressionParameter.window_log_max: ZSTD_WINDOW_LOG_MAX}
        self._d = zstd.ZstdDecompressor(options=option)

    def step(self, data: bytes) -> tuple[bytes, bool]:
        out: bytes = self._d.decompress(data, PIECE)
        return out, not self._d.eof and not self._d.needs_input

    @property
    def eof(self) -> bool:
        return bool(self._d.eof)

    @property
    def unused(self) -> bytes:
        return bytes(self._d.unused_data)


def inflate(
    chunks: Iterable[bytes],
    form: str,
    *,
    size: int,
    where: str,
    complete: Callable[[], bool],
) -> Iterator[bytes]:
    """The tar stream inside a ``form`` layer of ``size`` compressed bytes, in pieces.

    ``complete()`` says whether the blob was received whole: a stream that
    ends early is truncated (refused) only then; otherwise the caller's
    short-read error speaks.

    Raises:
        VerificationError: a bomb, bytes after the stream, a truncated or corrupt stream.
    """
    decoder: _Gzip | _Zstd = _Gzip() if form == "tar+gzip" else _Zstd()
    limit, total = inflate_limit(size), 0
    for chunk in chunks:
        if not chunk:
            continue
        if decoder.eof:
            raise _after(where, decoder.name)
        data, pending = bytes(chunk), True
        while pending:
            try:
                out, pending = decoder.step(data)
            except decoder.errors as e:
                raise VerificationError(
                    f"{where}: the {form} stream does not decode ({_first_line(e)})"
                ) from None
            data = b""
            total += len(out)
            if total > limit:
                raise VerificationError(
                    f"{where}: the {form} layer of {size} bytes inflates past {limit} bytes"
                    f" (at most {RATIO} times its size, or {FLOOR // 1024**2} MiB): refused as a"
                    " decompression bomb"
                )
            if out:
                yield out
            if decoder.eof:
                if decoder.unused:
                    raise _after(where, decoder.name)
                break
    if not decoder.eof and complete():
        raise VerificationError(
            f"{where}: the {form} stream is truncated (it ends inside its {decoder.name})"
        )


def _after(where: str, name: str) -> VerificationError:
    return VerificationError(
        f"{where}: bytes follow the layer's {name} (a second {name.split()[1]}, which some readers"
        f" inflate and others ignore, or other data); a compressed layer is one {name}"
    )


def _first_line(e: Exception) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0][:200]
