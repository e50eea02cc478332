"""A usage error is one line: what is wrong, what to do, then the command's ``--help`` (issue 31, point 5).

Before, argparse's errors printed the whole usage (15 lines for ``verify``) and ``verify`` without a
trust flag printed a hand-written usage of three lines.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelseal.cli import _HIDDEN_COMMANDS, build_parser
from tests.cli.conftest import Run
from tests.conftest import SOCAIR

AUTHORIZED = SOCAIR / "authorized.dsse.json"
OPERATOR = SOCAIR / "operator.pub"


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    subs = next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if subs is None:
        yield path
        return
    for name, sub in subs.items():
        if name not in _HIDDEN_COMMANDS:
            yield from _leaves(sub, (*path, name))
    if path == ():
        yield ("publish", "inspect")


COMMANDS = sorted(_leaves(build_parser()))


def test_every_command_is_walked() -> None:
    assert {"verify", "key gen", "publish inspect", "operator run", "bom"} <= {" ".join(c) for c in COMMANDS}


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_an_unknown_flag_is_one_line_naming_the_commands_help(cli: Run, command: tuple[str, ...]) -> None:
    r = cli(*command, "--no-such-flag")  # a command with required arguments names those first
    assert r.code == 2
    [line] = r.err.splitlines()
    assert line.startswith("error: ") and line.endswith(f" (modelseal {' '.join(command)} --help)")


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["verify", AUTHORIZED, "--trust", OPERATOR],
         "ambiguous option: --trust could match --trusted, --trusted-root: spell the option out"),
        (["verify", AUTHORIZED, "--trusted", OPERATOR, "--artifact", "x", "--sha256", "a" * 64],
         "--sha256 and --artifact exclude each other: give one of them"),
        (["verify", AUTHORIZED],
         "say whom to trust: --trusted KEY.pub (or a folder of them), --store PATH or --policy FILE"),
        (["verify", "--trusted", OPERATOR],
         "give the envelope to verify, or --image oci://REGISTRY/REPO@sha256:... to judge what is attached"),
        (["verify", AUTHORIZED, "--trusted", OPERATOR, "--max-agee", "1h"],
         "unrecognized arguments: --max-agee 1h; did you mean --max-age?"),
    ],
)  # fmt: skip
def test_the_first_days_usage_errors_are_one_line(cli: Run, argv: list[object], line: str) -> None:
    r = cli(*argv)
    assert r.code == 2
    assert r.err.splitlines() == [f"error: {line} (modelseal verify --help)"]


def test_key_gen_force_replaces_the_pair_it_refused_to_overwrite(cli: Run, tmp_path: Path) -> None:
    assert cli("key", "gen", "--out", tmp_path / "ci").code == 0
    old = (tmp_path / "ci.pub").read_bytes()
    r = cli("key", "gen", "--out", tmp_path / "ci")
    assert r.code == 2 and "give another --out, or --force to replace them" in r.err
    assert (tmp_path / "ci.pub").read_bytes() == old
    r = cli("key", "gen", "--out", tmp_path / "ci", "--force")
    assert r.code == 0, r.err
    assert (tmp_path / "ci.pub").read_bytes() != old
    assert (tmp_path / "ci.key").stat().st_mode & 0o777 == 0o600
