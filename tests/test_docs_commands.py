"""Every ``modelseal ...`` command the README and the docs site show parses with the real parser.

Commands are read from code blocks (``$ modelseal ...`` in transcripts, ``modelseal ...`` in
shell blocks, continuation lines joined, ``$(...)`` unwrapped) and from inline code spans; what
follows a pipe, ``;``, ``&&``, a redirection or a comment is not part of the command. A sketch
with ``...`` in it is a usage outline, not a command, and is left out. An inline span may
name a command or a flag in prose (`modelseal sign`, `modelseal verify --artifact`): it may
leave out what the command requires, but every word it does give must be right.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from modelseal.cli import build_parser
from modelseal.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _cut(command: str) -> str:
    """The command alone: up to a pipe, a list operator, a redirection, a comment or ``)``."""
    words = shlex.shlex(command, posix=True, punctuation_chars="|&;<>()")
    words.whitespace_split = True
    words.commenters = "#"
    kept = []
    for word in words:
        if word and set(word) <= set("|&;<>()"):
            break
        kept.append(word)
    return shlex.join(kept)


#: what a prose reference may leave out (argparse's words for it)
INCOMPLETE = ("the following arguments are required", "expected one argument")


def commands() -> list[tuple[str, str, bool]]:
    found: list[tuple[str, str, bool]] = []
    for page in PAGES:
        text = page.read_text()
        where = str(page.relative_to(ROOT))
        # every fence pairs with the next (a json block's closing fence is never taken for an opening)
        for language, block in re.findall(r"```([a-z]*)\n(.*?)```", text, flags=re.S):
            if language not in ("", "sh", "text", "console", "bash"):
                continue
            joined = re.sub(r"\\\n\s*", " ", block)
            for line in joined.splitlines():
                line = line.strip()
                line = line.removeprefix("$ ")
                for m in re.finditer(r"(?:^|\$\()(modelseal (?:[a-z][a-z-]*)(?: .*)?)$", line):
                    found.append((where, m.group(1), True))
        for span in re.findall(r"`(modelseal [a-z][^`]*)`", text.replace("\n", " ")):
            found.append((where, span, False))
    out = []
    for where, command, whole in found:
        if "..." in command or "…" in command:
            continue
        try:
            cut = _cut(command)
        except ValueError:  # an unbalanced quote: a span broken across lines
            continue
        out.append((where, cut, whole))
    return sorted(set(out))


COMMANDS = commands()


def test_the_docs_show_many_commands() -> None:
    assert len(COMMANDS) >= 60
    assert {w for w, _, _ in COMMANDS} >= {"README.md", "docs/cli.md", "docs/ci.md", "docs/operator.md"}


def test_every_transcript_line_is_collected() -> None:
    """A ``json`` block's closing fence was once taken for an opening, so the blocks after one were
    read as prose and the commands in them never parsed (20 of them in docs/cli.md)."""
    whole = {(w, c) for w, c, full in COMMANDS if full}
    for page in PAGES:
        where = str(page.relative_to(ROOT))
        for line in page.read_text().splitlines():
            if line.startswith("$ modelseal ") and "..." not in line:
                assert (where, _cut(line[2:])) in whole, f"{where}: {line}"


@pytest.mark.parametrize(
    ("where", "command", "whole"), COMMANDS, ids=[f"{w}: {c[:80]}" for w, c, _ in COMMANDS]
)
def test_every_command_shown_parses(where: str, command: str, whole: bool) -> None:
    words = shlex.split(command)[1:]
    if words[:2] == ["publish", "inspect"]:
        words[:2] = ["publish-inspect"]
    try:
        build_parser().parse_args(words)
    except SystemExit as e:  # --help or --version
        if e.code != 0:
            pytest.fail(f"{where}: {command}: exit {e.code}")
    except UsageError as e:
        if whole or not any(words in str(e) for words in INCOMPLETE):
            pytest.fail(f"{where}: {command}: {e}")
