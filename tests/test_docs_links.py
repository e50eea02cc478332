"""The manual's links land, its headings nest, and what it says of the README names a README section
(issue 31, point 9).

``mkdocs build --strict`` checks links between pages of the site, but not a page's links to its own
anchors, the README's links into the site, or prose such as "the README's security model" after the
section moved. Anchors are read from the HTML that Python-Markdown makes with the site's own
extensions (mkdocs.yml), so a heading's id is the one the site gives it.
"""

from __future__ import annotations

import re
from functools import cache
from itertools import pairwise
from pathlib import Path

import markdown  # type: ignore[import-untyped]  # mkdocs brings it; no stubs in the venv
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
#: text that may speak of the README's sections (prose, comments)
PROSE = [*PAGES, *sorted((ROOT / "deploy").rglob("*.yaml")), *sorted((ROOT / "examples").rglob("*.y*ml")),
         *sorted((ROOT / "src").rglob("*.py"))]  # fmt: skip
_FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code."""
    return re.sub(r"`[^`\n]*`", "", _FENCE.sub("", text))


@cache
def anchors(page: Path) -> frozenset[str]:
    """The ids the site gives ``page``'s headings (and any element with an explicit id)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    extensions = [e if isinstance(e, str) else next(iter(e)) for e in config["markdown_extensions"]]
    html = markdown.markdown(page.read_text(), extensions=extensions)
    return frozenset(re.findall(r'\bid="([^"]+)"', html))


def links() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", _prose(page.read_text())):
            if not re.match(r"[a-z]+:", target):  # not https:, mailto:
                found.append((str(page.relative_to(ROOT)), target))
    return found


LINKS = links()


def test_there_are_links_to_check() -> None:
    assert len(LINKS) > 100
    assert any("#" in t for _, t in LINKS)


@pytest.mark.parametrize(("where", "target"), LINKS, ids=[f"{w}: {t}" for w, t in LINKS])
def test_every_link_lands_on_a_file_and_an_anchor_it_has(where: str, target: str) -> None:
    path, _, anchor = target.partition("#")
    page = ROOT / where
    landing = (page.parent / path).resolve() if path else page
    assert landing.exists(), f"{where}: {target}: no such file"
    if anchor and landing.suffix == ".md":
        assert anchor in anchors(landing), f"{where}: {target}: {landing.name} has no heading #{anchor}"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_headings_start_at_one_and_skip_no_level(page: Path) -> None:
    levels = [len(m) for m in re.findall(r"^(#+) ", _FENCE.sub("", page.read_text()), flags=re.M)]
    assert levels[:1] == [1], "a page starts with one # heading"
    assert levels.count(1) == 1, "one # heading a page"
    skipped = [(a, b) for a, b in pairwise(levels) if b > a + 1]
    assert not skipped, f"a heading of level {skipped[0][1]} follows one of level {skipped[0][0]}"
    titles = re.findall(r"^#+ (.*)$", _FENCE.sub("", page.read_text()), flags=re.M)
    assert len(titles) == len(set(titles)) or page.name == "README.md", "a heading repeated"


def _readme_sections() -> set[str]:
    return {t.strip().lower() for t in re.findall(r"^#+ (.*)$", _FENCE.sub("", (ROOT / "README.md").read_text()),
                                                 flags=re.M)}  # fmt: skip


@pytest.mark.parametrize("path", PROSE, ids=[str(p.relative_to(ROOT)) for p in PROSE])
def test_what_is_said_of_the_readme_names_a_section_it_has(path: Path) -> None:
    """'the README's "Exit codes"' names its section in quotes, and the README has it; an unquoted
    'the README's security model' is what drifted when sections moved to docs/."""
    text = " ".join(path.read_text().split())
    sections = _readme_sections()
    for m in re.finditer(r"README(?:\.md)?(?:'s|,) (\"([^\"]+)\"|\S+)", text):
        assert m[2] is not None, f"{path.name}: {m[0]!r}: name the README's section in quotes"
        assert m[2].lower() in sections, f"{path.name}: the README has no section {m[2]!r}"
