"""A small progress bar for long work, drawn on stderr at a terminal; elsewhere, a line now and then."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

__all__ = ["LINE_INTERVAL", "ProgressBar", "human_bytes"]

#: seconds between progress lines when stderr is not a terminal
LINE_INTERVAL = 5.0


def human_bytes(n: float) -> str:
    """``1.5 GiB``, ``320.0 MiB``, ``12 B``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


class ProgressBar:
    """Counts bytes; redraws at most ten times a second; thread-safe.

    Disabled (every call a no-op) unless both stdout and the stream are
    terminals, so pipes, files and ``--json`` output stay clean. A total of 0
    means unknown (downloads whose size the origin does not say): the bar then
    shows bytes and rate without a percentage.
    """

    def __init__(
        self,
        label: str,
        total: int = 0,
        *,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        lines: bool = False,
    ) -> None:
        self._stream = stream or sys.stderr
        self.enabled = self.wanted(self._stream) if enabled is None else enabled
        #: without a terminal (CI), a line every LINE_INTERVAL seconds instead, as ``docker push`` does
        self.lines = lines and not self.enabled
        self.label, self.total, self.done = label, total, 0
        self._start = time.monotonic()
        self._drawn = 0.0
        self._said = self._start
        self._lock = threading.Lock()

    @staticmethod
    def wanted(stream: TextIO | None = None) -> bool:
        """Whether a bar would be drawn (both stdout and the stream are terminals).

        Callers use it to skip work that only a bar needs, such as sizing a directory.
        """
        return (stream or sys.stderr).isatty() and sys.stdout.isatty()

    def advance(self, n: int) -> None:
        """Record ``n`` more bytes done."""
        if self.lines:
            self._line(n)
            return
        if not self.enabled:
            return
        with self._lock:
            self.done += n
            now = time.monotonic()
            if now - self._drawn >= 0.1 or (self.total and self.done >= self.total):
                self._drawn = now
                self._draw(now)

    def _draw(self, now: float) -> None:
        rate = self.done / max(now - self._start, 1e-6)
        if not self.total:
            self._stream.write(f"\r{self.label} {human_bytes(self.done)} {human_bytes(rate)}/s ")
            self._stream.flush()
            return
        frac = min(1.0, self.done / self.total)
        width = 30
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        self._stream.write(
            f"\r{self.label} [{bar}] {frac * 100:5.1f}% {human_bytes(self.done)}/{human_bytes(self.total)}"
            f" {human_bytes(rate)}/s "
        )
        self._stream.flush()

    def _line(self, n: int) -> None:
        with self._lock:
            self.done += n
            now = time.monotonic()
            if now - self._said < LINE_INTERVAL:
                return
            self._said = now
            rate = human_bytes(self.done / max(now - self._start, 1e-6))
            if self.total:
                share = f"{human_bytes(self.done)} of {human_bytes(self.total)}"
                share += f" ({min(100.0, self.done / self.total * 100):.0f}%)"
            else:
                share = human_bytes(self.done)
            self._stream.write(f"{self.label}: {share}, {rate}/s\n")
            self._stream.flush()

    def close(self) -> None:
        """End the line the bar was drawn on."""
        if self.enabled and self._drawn:
            self._stream.write("\n")
            self._stream.flush()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
