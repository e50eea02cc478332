"""Run the CLI in-process and capture what it prints."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from modelseal.cli import main


@dataclass
class Result:
    code: int
    out: str
    err: str


Run = Callable[..., Result]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Run:
    def run(*argv: object) -> Result:
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        return Result(code, captured.out, captured.err)

    return run
