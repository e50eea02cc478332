"""Every ``--help`` reads well, and the docs' CLI reference prints what argparse prints."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelseal.cli import build_parser, main

#: the CLI reference's usage blocks (and the operator page's), as the docs site shows them
README = "\n".join(
    p.read_text() for p in sorted((Path(__file__).resolve().parents[2] / "docs").rglob("*.md"))
)


def commands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command's words (``("key", "gen")``), groups included; the hidden alias left out."""
    yield words
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if name != "publish-inspect":
                    yield from commands(sub, (*words, name))
                else:
                    yield ("publish", "inspect")


ALL = list(commands(build_parser()))


def parser_of(words: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for word in ("publish-inspect",) if words == ("publish", "inspect") else words:
        [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = sub.choices[word]
    return parser


def help_text(words: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*words, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


@pytest.fixture(autouse=True)
def _columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")  # as the README's usage blocks were made


@pytest.mark.parametrize("words", ALL, ids=[" ".join(w) or "modelseal" for w in ALL])
def test_help_says_what_every_option_is(words: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(words, capsys)
    assert "SUPPRESS" not in text
    assert "publish-inspect" not in text
    parser = parser_of(words)
    visible = {a.dest for a in parser._actions if a.help != argparse.SUPPRESS}
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:  # only an old spelling of a listed option is hidden
            assert action.dest in visible, action.option_strings
        else:
            assert action.help, f"{action.option_strings or action.dest} has no help"
    if words and words[-1] not in ("key", "operator"):
        assert "-v, --verbose" in text  # -v is taken after the command too


def test_a_group_alone_prints_its_own_help(cli: object, capsys: pytest.CaptureFixture[str]) -> None:
    for group, sub in (("key", "gen"), ("operator", "run")):
        assert main([group]) == 0  # help asked for, not a usage error (issue 21, point 16)
        out = capsys.readouterr().out
        assert out.startswith(f"usage: modelseal {group} ")
        assert f"    {sub} " in out


def test_a_mistyped_command_lists_only_real_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pubish"]) == 2
    err = capsys.readouterr().err
    assert "'publish'" in err
    assert "publish-inspect" not in err


def usage_blocks() -> dict[str, str]:
    """The README's usage blocks, by command."""
    blocks = re.findall(r"```text\n(usage: modelseal .*?)```", README, flags=re.S)
    name = r"usage: modelseal ((?:[a-z][a-z-]* )*)"  # verify-files
    return {re.match(name, b).group(1).strip(): b.rstrip("\n") for b in blocks}  # type: ignore[union-attr]


LEAVES = [w for w in ALL if w and w[-1] not in ("key", "operator")]


@pytest.mark.parametrize("words", LEAVES, ids=[" ".join(w) for w in LEAVES])
def test_the_readme_usage_block_is_what_argparse_prints(
    words: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = usage_blocks()
    name = " ".join(words)
    assert name in blocks, f"the docs' CLI reference has no usage block for modelseal {name}"
    printed = help_text(words, capsys).split("\n\n")[0]
    assert blocks[name] == printed


def test_the_cli_reference_has_a_section_for_every_command_and_no_benchmarks() -> None:
    """Issue 31, point 9: operator run had no section, and Exit codes held three benchmarks."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    sections = set(re.findall(r"^### `modelseal ([a-z -]+)`", page, flags=re.M))
    assert {" ".join(w) for w in LEAVES} <= sections
    assert "python -m benchmarks" not in page and "## Library use" not in page
