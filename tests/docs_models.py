"""Every Model the README and docs/ show, for the tests that apply them to LLMKube's schemas.

A Model is a YAML document of ``kind: Model`` in a ```yaml block. A block that says it needs
LLMKube's newer Model schema (:data:`NEWER_ONLY`, a comment in the block) holds a Model that
v0.9.19's CRD cannot take (``spec.prefetchOCI``, an ``oci://`` source): the v0.9.19 test expects
exactly those fields refused, and the docs say so beside it. A bare ``spec:`` fragment is
reported, so that every example stays a whole Model a user can apply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["NEWER_ONLY", "DocModel", "doc_models", "fragments"]

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
NEWER_ONLY = "needs LLMKube's newer Model schema"


@dataclass(frozen=True)
class DocModel:
    """A Model the docs show: where, the object, and whether only the newer schema takes it."""

    where: str
    body: dict[str, Any]
    newer_only: bool


def _blocks() -> list[tuple[str, str]]:
    return [(f"{page.relative_to(ROOT)}#{i}", block) for page in PAGES
            for i, block in enumerate(re.findall(r"```yaml\n(.*?)```", page.read_text(), flags=re.S))]  # fmt: skip


def doc_models() -> list[DocModel]:
    """Every whole Model in the README's and docs' YAML blocks."""
    found = []
    for where, block in _blocks():
        for doc in yaml.safe_load_all(block):
            if isinstance(doc, dict) and doc.get("kind") == "Model":
                found.append(DocModel(where, doc, NEWER_ONLY in block))
    return found


def fragments() -> list[str]:
    """Where a block holds a Model's ``spec`` without the Model around it."""
    return [where for where, block in _blocks() for doc in yaml.safe_load_all(block)
            if isinstance(doc, dict) and "spec" in doc and "kind" not in doc]  # fmt: skip
