"""``-v`` anywhere, and one spelling per registry flag with the old ones as hidden aliases."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from modelseal.cli import build_parser, main

SAMPLE = Path(__file__).resolve().parents[2] / "testdata" / "sample-model"


@pytest.mark.parametrize(
    "argv",
    [
        ["-v", "digest", str(SAMPLE)],
        ["digest", "-v", str(SAMPLE)],
        ["digest", str(SAMPLE), "--verbose"],
    ],
)
def test_verbose_is_taken_before_or_after_the_command(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    monkeypatch.setattr(logging, "basicConfig", lambda **kw: seen.append(kw["level"]))
    assert main(argv) == 0
    assert seen == [logging.DEBUG]
    assert capsys.readouterr().out.startswith("e90ff16f")


def test_without_verbose_logging_stays_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    monkeypatch.setattr(logging, "basicConfig", lambda **kw: seen.append(kw["level"]))
    assert main(["digest", str(SAMPLE)]) == 0
    assert seen == [logging.WARNING]


def test_verbose_after_publish_inspect_and_operator_run() -> None:
    parser = build_parser()
    assert parser.parse_args(["publish-inspect", "oci://r/x@sha256:" + "a" * 64, "-v"]).verbose
    assert parser.parse_args(["operator", "run", "-v"]).verbose
    assert parser.parse_args(["-v", "operator", "run"]).verbose
    assert not parser.parse_args(["operator", "run"]).verbose


@pytest.mark.parametrize("command", [["publish", "--image", "r/x:v1"], ["publish-inspect", "oci://r/x:v1"]])
def test_registry_flags_have_one_spelling_and_keep_the_old_one(command: list[str]) -> None:
    parser = build_parser()
    new = parser.parse_args([*command, "--registry-config", "c.json", "--registry-ca-file", "ca.pem"])
    old = parser.parse_args([*command, "--docker-config", "c.json", "--ca-file", "ca.pem"])
    assert (new.docker_config, new.ca_file) == (old.docker_config, old.ca_file) == ("c.json", "ca.pem")


def test_inspect_takes_sha256_as_verify_and_stage_do() -> None:
    parser = build_parser()
    digest = "ab" * 32
    for flag in ("--sha256", "--expect-sha256"):
        assert parser.parse_args(["publish-inspect", "oci://r/x:v1", flag, digest]).expect_sha256 == digest


def test_operator_plain_http_names_hosts_under_either_spelling() -> None:
    args = build_parser().parse_args(
        ["operator", "run", "--plain-http", "a:5000", "--plain-http-registry", "b:5000", "--plain-http=c"]
    )
    assert args.plain_http_registry == ["a:5000", "b:5000", "c"]
