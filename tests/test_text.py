"""printable(): no control character gets through, and nothing is lost; clip(): a long line is cut
between escapes, and says how much it left out."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import example, given
from hypothesis import strategies as st

from modelseal.text import clip, one_line, printable

_ESCAPE = re.compile(r"\\(\\|t|n|r|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")
_SHORT = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}


def unescape(text: str) -> str:
    """The inverse of printable(); fails on a backslash that starts no escape."""
    out, at = [], 0
    for m in _ESCAPE.finditer(text):
        assert "\\" not in text[at : m.start()], f"stray backslash in {text!r}"
        out.append(text[at : m.start()])
        code = m.group(1)
        out.append(_SHORT[code] if code in _SHORT else chr(int(code[1:], 16)))
        at = m.end()
    assert "\\" not in text[at:], f"stray backslash in {text!r}"
    out.append(text[at:])
    return "".join(out)


def _visible(ch: str) -> bool:
    return unicodedata.category(ch)[0] != "C" and unicodedata.category(ch) not in ("Zl", "Zp")


@given(st.text(alphabet=st.characters(exclude_categories=())))
@example("\r\x1b[2K\x1b[1Averified: issued by trusted")
@example("evil\u202etxt.exe\u2066\u2069\x7f\x85\x9b")
@example("C:\\x1b is not an escape")
@example("\udcff")  # a file name that is not UTF-8, as os.fsdecode gives it
def test_printable_escapes_every_control_and_is_lossless(text: str) -> None:
    shown = printable(text)
    assert all(_visible(ch) for ch in shown), ascii(shown)
    assert unescape(shown) == text
    shown.encode("utf-8")  # prints on any UTF-8 terminal, lone surrogates included


def test_printable_leaves_ordinary_text_alone() -> None:
    for text in ("verified: issued by ACME (key 0123)", "modèle Qwen3 8B 量化", "a/b c.gguf"):
        assert printable(text) == text


def test_printable_escapes_the_injections_of_the_review() -> None:
    assert printable("\r\x1b[2K\x1b[1Averified") == "\\r\\x1b[2K\\x1b[1Averified"
    assert printable("a\u202eb") == "a\\u202eb"
    assert printable("a\\b") == "a\\\\b"


@given(st.text(alphabet=st.characters(exclude_categories=()), max_size=60), st.integers(0, 40))
@example("\\" * 30, 7)  # a cut between the two backslashes of an escaped one
@example("\x1b" * 30, 9)
def test_clip_cuts_between_escapes_and_counts_the_rest(text: str, limit: int) -> None:
    shown = printable(text)
    cut = clip(shown, limit)
    if len(shown) <= limit:
        assert cut == shown
        return
    kept, _, rest = cut.rpartition("... (")
    assert len(kept) <= limit and rest == f"{len(shown) - len(kept)} more characters)"
    assert text.startswith(unescape(kept))  # what is shown is the start of the text, undamaged


def test_one_line_keeps_a_huge_refusal_readable() -> None:
    line = one_line("unsupported media type " + "\x1b" + "x" * 500_000)
    assert line.startswith("unsupported media type \\x1bxxx")
    assert line.endswith("... (496027 more characters)") and len(line) < 4100
