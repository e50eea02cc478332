"""The repository stands alone: every document it points to is in it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / p for p in out.splitlines() if (ROOT / p).is_file()]


def test_no_file_points_outside_the_repository() -> None:
    shared = "shared"  # spelled in two pieces so that this file does not name the path itself
    outside = re.compile(rf"\.\./{shared}|/work/{shared}|\bDESIGN\.md\b")
    found = []
    for path in tracked():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in outside.finditer(text)]
    assert found == []


def test_every_relative_link_in_the_docs_resolves() -> None:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "mkdocs.yml"]
    broken = []
    for doc in docs:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if "://" not in target and not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_the_design_notes_pyproject_names_exist() -> None:
    named = re.findall(r"\b(docs/[\w.-]+\.md)\b", (ROOT / "pyproject.toml").read_text())
    assert named == ["docs/design.md"]
    assert (ROOT / named[0]).is_file()
