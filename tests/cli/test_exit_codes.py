"""The exit-code table of the CLI reference, walked row by row (issue 31, point 6).

Each code the table lists has cases here that end with it, and each case that fails prints one line.
A case is a command and what it needs made first; the walk fails when the table gains a code no
case shows, or a case ends with a code other than the one its row promises.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import Run
from tests.conftest import SOCAIR, TESTDATA

ROOT = TESTDATA.parent
SAMPLE = TESTDATA / "sample-model"
AUTHORIZED = SOCAIR / "authorized.dsse.json"
WITHHELD = SOCAIR / "withheld.dsse.json"
OPERATOR = SOCAIR / "operator.pub"

#: a case: what to make in a folder, then the arguments to run there
Case = Callable[[Path], list[object]]


def _key_pair(tmp: Path) -> list[object]:
    (tmp / "ci.key").write_text("old")
    return ["key", "gen", "--out", tmp / "ci"]


#: sockets the cases keep listening until the tests end
_HELD: list[socket.socket] = []


def _taken_port(tmp: Path) -> list[object]:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    _HELD.append(held)
    return ["operator", "run", "--metrics-port", "0", "--liveness", "", "--readiness", "",
            f"--admission-webhook=127.0.0.1:{held.getsockname()[1]}"]  # fmt: skip


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


CASES: dict[int, dict[str, Case]] = {
    0: {
        "help of a group": lambda tmp: ["key"],
        "admitted": lambda tmp: ["verify", AUTHORIZED, "--trusted", OPERATOR],
        "refused in warn mode": lambda tmp: ["verify", WITHHELD, "--trusted", OPERATOR, "--mode", "warn"],
    },
    1: {
        "refused": lambda tmp: ["verify", WITHHELD, "--trusted", OPERATOR],
        "malformed envelope": lambda tmp: ["verify", OPERATOR, "--trusted", OPERATOR],
        "a public key to sign with": lambda tmp: ["sign", "--key", OPERATOR, "--report", AUTHORIZED],
    },
    2: {
        "unknown flag": lambda tmp: ["verify", AUTHORIZED, "--trust", OPERATOR],
        "missing flag": lambda tmp: ["key", "gen"],
        "conflicting flags": lambda tmp: ["verify", AUTHORIZED, "--trusted", OPERATOR, "--artifact", "x",
                                          "--sha256", "a" * 64],
        "malformed flag value": lambda tmp: ["verify", AUTHORIZED, "--trusted", OPERATOR, "--max-age", "soon"],
        "no trust given": lambda tmp: ["verify", AUTHORIZED],
        "a key pair key gen would overwrite": _key_pair,
        "publish --from of several files without --primary": lambda tmp: [
            "publish", "--image", f"127.0.0.1:{_closed_port()}/m:v1", "--from", SAMPLE],
    },
    3: {
        "registry unreachable": lambda tmp: [
            "publish", "--image", f"127.0.0.1:{_closed_port()}/m:v1", "--plain-http", SAMPLE / "config.json"],
        "a file that cannot be written": lambda tmp: ["key", "gen", "--out", tmp / "no-such-dir" / "k"],
        "an address operator run would listen on is taken": _taken_port,
    },
}  # fmt: skip


@pytest.fixture(autouse=True)
def _release_held() -> Iterator[None]:
    yield
    while _HELD:
        _HELD.pop().close()


def _table() -> dict[int, str]:
    page = (ROOT / "docs" / "cli.md").read_text()
    section = page.split("\n## Exit codes\n", 1)[1].split("\n#", 1)[0]
    return {int(code): meaning for code, meaning in re.findall(r"^\| (\d+) \| (.*) \|$", section, flags=re.M)}


def _cases() -> Iterator[tuple[int, str, Case]]:
    for code, cases in CASES.items():
        for name, case in cases.items():
            yield code, name, case


def test_every_code_of_the_table_is_walked() -> None:
    table = _table()
    # 130 (Ctrl-C) is walked by tests/cli/test_unexpected_errors.py, an internal error too
    assert set(table) == {*CASES, 130}
    assert "`--force`" in table[2] and "`--primary`" in table[2] and "--help" in table[2]


@pytest.mark.parametrize(("code", "name", "case"), list(_cases()), ids=[f"{c}: {n}" for c, n, _ in _cases()])
def test_a_case_ends_with_the_code_its_row_promises(
    cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, name: str, case: Case
) -> None:
    monkeypatch.setattr("modelseal.publish.registry.client.RegistryClient.retry_pause", lambda *a, **k: 0)
    r = cli(*case(tmp_path))
    assert r.code == code, r.err
    if code:
        [line] = r.err.splitlines()  # one line, whatever the code
        assert line.startswith("error: ")
    if code == 2:
        assert line.endswith("--help)"), line  # where to read more
