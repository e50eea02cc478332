"""A bug anywhere below the CLI is one line and exit 3, never a traceback."""

from __future__ import annotations

import argparse

import pytest

from modelseal.cli import attest_commands, main


def test_an_unexpected_exception_is_one_line_and_exit_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def crash(args: argparse.Namespace) -> int:
        raise ValueError("invalid literal for int() with base 10: 'hf_s3cr3t'")

    monkeypatch.setattr(attest_commands, "digest_cmd", crash)
    code = main(["digest", "README.md"])
    out, err = capsys.readouterr()
    assert code == 3 and out == ""
    assert err == "error: internal error (ValueError); this is a bug in modelseal\n"
    assert "Traceback" not in err and "hf_s3cr3t" not in err
