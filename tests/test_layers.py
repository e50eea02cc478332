"""The package's shape, read statically: no import circle, nothing imports upward, no folder over 15 modules.

The layers, bottom up: the core (``errors``, ``text``, ``durations``, ``files``),
``attest``, ``publish``, ``operator``, ``cli``. A module may import its own
layer and those below it. Every import counts, also one inside a function or
under ``TYPE_CHECKING``: a circle that only a late import keeps from failing
at start-up is still two modules sharing a concept that belongs to neither.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "modelseal"
LAYERS = ("core", "attest", "publish", "operator", "cli")
MAX_MODULES = 15


def modules(root: Path) -> dict[str, Path]:
    """Every module under ``root`` (the ``modelseal`` folder) by dotted name; a package by its own name."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of the package that ``name`` imports, wherever in the file the import is."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {m for m in found if m in known and m != name}


def graph(root: Path) -> dict[str, set[str]]:
    known = modules(root)
    return {name: imports(name, path, known) for name, path in known.items()}


def layer(name: str) -> int:
    """The layer of a module: the core is 0, ``cli`` (and ``__main__``, which runs it) the top."""
    parts = name.split(".")
    top = parts[1] if len(parts) > 1 else "core"
    if top == "__main__":
        top = "cli"
    return LAYERS.index(top) if top in LAYERS else 0


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def upward(edges: dict[str, set[str]]) -> list[str]:
    """``a -> b`` for each import of a higher layer."""
    return [f"{a} -> {b}" for a in sorted(edges) for b in sorted(edges[a]) if layer(b) > layer(a)]


def crowded(root: Path) -> list[str]:
    """The folders that hold more than :data:`MAX_MODULES` modules (``__init__.py`` not counted)."""
    folders = {p.parent for p in root.rglob("*.py")}
    counts = {d: len([p for p in d.glob("*.py") if p.name != "__init__.py"]) for d in folders}
    return [
        f"{d.relative_to(root.parent)}: {n} modules" for d, n in sorted(counts.items()) if n > MAX_MODULES
    ]


def test_no_import_circle() -> None:
    assert circles(graph(PACKAGE)) == []


def test_nothing_imports_a_higher_layer() -> None:
    assert upward(graph(PACKAGE)) == []


def test_no_folder_holds_more_than_15_modules() -> None:
    assert crowded(PACKAGE) == []


def test_the_walk_sees_every_kind_of_import(tmp_path: Path) -> None:
    """A circle through a late import, one under TYPE_CHECKING, and a relative one are all found."""
    pkg = tmp_path / "modelseal"
    (pkg / "attest").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("def f() -> None:\n    from modelseal.attest import a\n")
    (pkg / "attest" / "__init__.py").write_text("")
    (pkg / "attest" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import b\n"
    )
    (pkg / "attest" / "b.py").write_text("from modelseal.attest.a import x\n")
    for i in range(MAX_MODULES):
        (pkg / "attest" / f"m{i}.py").write_text("")
    edges = graph(pkg)
    assert circles(edges) == [["modelseal.attest.a", "modelseal.attest.b"]]
    assert upward(edges) == ["modelseal.errors -> modelseal.attest.a"]
    assert crowded(pkg) == [f"{Path('modelseal', 'attest')}: {MAX_MODULES + 2} modules"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("modelseal", "core"),
        ("modelseal.errors", "core"),
        ("modelseal.publish.image.layout", "publish"),
        ("modelseal.cli.render", "cli"),
        ("modelseal.__main__", "cli"),
    ],
)
def test_each_module_has_its_layer(name: str, expected: str) -> None:
    assert LAYERS[layer(name)] == expected
