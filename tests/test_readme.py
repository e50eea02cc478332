"""The README's and the docs' CLI examples are real: every example that uses only bundled data is run."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from modelseal.cli import main

ROOT = Path(__file__).resolve().parent.parent
#: the README and every page of the docs site, where the manual now lives
#: (the policy cookbook's examples need the files its recipes make: tests/attest/policy/test_cookbook.py runs them)
PAGES = [
    ROOT / "README.md",
    *sorted(p for p in (ROOT / "docs").rglob("*.md") if p.name != "policy-cookbook.md"),
]
README = "\n".join(p.read_text() for p in PAGES)


def examples() -> list[tuple[str, str]]:
    """(command, expected output) for each ``$ modelseal`` line in a text block."""
    found = []
    for block in re.findall(r"```text\n(.*?)```", README, flags=re.S):
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("$ modelseal "):
                continue
            out = []
            for follow in lines[i + 1 :]:
                if follow.startswith("$ ") or follow.startswith("== ") or follow.startswith("exit code"):
                    break
                out.append(follow)
            while out and not out[-1]:
                out.pop()
            command = line[2:]
            words = shlex.split(command)
            needs_registry = words[1] == "publish"  # tests/cli/test_publish_cli.py covers those
            # and tests/cli/test_image_attestations.py the image attestations
            needs_registry = needs_registry or any(w.startswith("oci://") for w in words)
            # tests/cli/test_verify_files.py runs the in-Pod verifier's /models transcript
            if not needs_registry and all(
                not p.startswith(("demo-out", "ci.", "eval", "broken", "/models/")) for p in words
            ):
                found.append((command, "\n".join(out)))
    return found


EXAMPLES = examples()


def test_the_readme_has_runnable_examples() -> None:
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize(("command", "expected"), EXAMPLES, ids=[c[:70] for c, _ in EXAMPLES])
def test_example_output(
    command: str, expected: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    main(shlex.split(command)[1:])
    captured = capsys.readouterr()
    assert (captured.out + captured.err).rstrip("\n") == expected
