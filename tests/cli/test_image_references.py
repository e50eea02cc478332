"""One convention for an image in every command (issue 31, point 2), against a real registry.

Before, ``verify --image`` refused ``REGISTRY/REPO@sha256:...`` without ``oci://``, ``publish --image``
refused it with ``oci://`` ("drop the oci:// prefix"), and only ``publish inspect`` took both. Now every
command that takes an image takes both spellings, and its help says which forms are pinned.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest

from modelseal.cli import build_parser
from tests.cli.conftest import Run
from tests.conftest import TESTDATA
from tests.publish.servers import Registry

SAMPLE = TESTDATA / "sample-model"

#: every command that takes an image, as (its words, how it is given the image REF)
Command = Callable[[str, Path], list[object]]
COMMANDS: dict[str, Command] = {
    "publish --image": lambda ref, tmp: [
        "publish", "--image", ref, "--from", SAMPLE, "--primary", "model.safetensors"],
    "publish --reuse-from": lambda ref, tmp: [
        "publish", "--image", ref.split("@")[0].removeprefix("oci://").replace(":v1", "") + ":again",
        "--reuse-from", ref,
        "--from", SAMPLE, "--primary", "model.safetensors"],
    "publish inspect": lambda ref, tmp: ["publish", "inspect", ref],
    "attest": lambda ref, tmp: ["attest", ref, "--key", tmp / "ci.key", "--attach"],
    "verify --image": lambda ref, tmp: ["verify", "--image", ref, "--trusted", tmp / "ci.pub"],
    "bom": lambda ref, tmp: ["bom", ref, "--out", tmp / "bom.json"],
}  # fmt: skip


def _forms(host: str, digest: str) -> dict[str, str]:
    return {
        "oci:// and a digest": f"oci://{host}/models/sample@{digest}",
        "a digest alone": f"{host}/models/sample@{digest}",
        "oci:// and a tag": f"oci://{host}/models/sample:v1",
        "a tag alone": f"{host}/models/sample:v1",
    }


FORMS = list(_forms("H", "D"))


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_takes_both_spellings(
    cli: Run, registry: Registry, tmp_path: Path, command: str, form: str
) -> None:
    assert cli("key", "gen", "--out", tmp_path / "ci").code == 0
    first = cli("publish", "--image", f"{registry.host}/models/sample:v1", "--plain-http", "--from", SAMPLE,
                "--primary", "model.safetensors", "--sign-key", tmp_path / "ci.key")  # fmt: skip
    assert first.code == 0, first.err
    digest = first.out.strip().rsplit("@", 1)[1]
    ref = _forms(registry.host, digest)[form]
    if command == "publish --image" and "@" in ref:
        ref = ref.split("@")[0] + ":v2"  # a destination is a tag
    r = cli(*COMMANDS[command](ref, tmp_path), "--plain-http")
    assert r.code == 0, r.err
    if ":v1" in ref and command in ("attest", "verify --image", "bom"):
        assert f"is a tag, resolved to {digest}" in r.err  # a tag is said to be one


def test_every_command_that_takes_an_image_is_walked() -> None:
    """A command whose help mentions an image must be in COMMANDS (a new one is not forgotten)."""
    parser = build_parser()
    found = set()
    for name, sub in _commands(parser):
        for action in sub._actions:
            text = f"{action.metavar or ''} {action.help or ''}"
            if "REGISTRY/REPO" in text:
                found.add(f"{name} {action.option_strings[0]}" if action.option_strings else name)
    assert found == set(COMMANDS)


def _commands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    out: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                leaves = _commands(sub)
                label = "publish inspect" if name == "publish-inspect" else name
                out += [(f"{label} {n}".strip(), p) for n, p in leaves] if leaves else [(label, sub)]
    return out


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["verify", "--image", "registry.example/m", "--trusted", "k.pub"],
         "--image 'registry.example/m': give a digest (@sha256:...) or a tag"),
        (["publish", "--image", "registry.example/m@sha256:" + "a" * 64, "x"],
         "--image 'registry.example/m@sha256:" + "a" * 64 + "': give a tag to publish to, as in registry/repo:tag"),
        (["publish", "inspect", "https://registry.example/m:v1"],
         "publish inspect 'https://registry.example/m:v1': only oci:// references are supported"),
    ],
)  # fmt: skip
def test_a_reference_that_is_no_image_is_one_usage_line(cli: Run, argv: list[str], line: str) -> None:
    r = cli(*argv)
    assert r.code == 2
    assert r.err.splitlines()[0].startswith(f"error: {line}")


def test_a_file_wins_over_a_reference_of_the_same_name(
    cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "localhost:5000" / "m:v1"
    path.parent.mkdir()
    path.write_bytes(b"weights")
    r = cli("bom", "localhost:5000/m:v1")
    assert r.code == 0, r.err
    assert '"name": "m:v1"' in r.out
