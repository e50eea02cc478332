"""Strict shapes of wire-format JSON: each check refuses in one line, naming where.

The DSSE envelope and the in-toto Statement are read by small parsers over
what :func:`modelseal.attest.dsse.gojson.loads` returns, with these checks: a
field of the wrong type (``a.0.b: input should be a valid string``), a
missing one (``missing field "a.b"``) and an unknown one (``unknown field
"x"``). The wording is the one these formats had when pydantic read them, so
the texts users and tests know stay; the first failure in field order is the
one named, the fields first, then any unknown key. No bool passes for a string,
no number for a bool; a JSON array is a list, never a tuple.
"""

from __future__ import annotations

from typing import Any

from modelseal.attest.dsse.gojson import go_fold, go_quote

__all__ = [
    "ShapeError",
    "array",
    "missing",
    "no_other_spelling",
    "no_unknown",
    "obj",
    "string",
    "string_map",
    "where",
]


class ShapeError(ValueError):
    """A value of the wrong shape; the message is one line naming where."""


def where(path: str, key: str | int) -> str:
    """The dotted location of ``key`` inside ``path`` (``signatures.0.sig``)."""
    return f"{path}.{key}" if path else str(key)


def missing(path: str) -> ShapeError:
    return ShapeError(f"missing field {go_quote(path)}")


def string(value: Any, path: str) -> str:
    if type(value) is not str:
        raise ShapeError(f"{path}: input should be a valid string")
    return value


def array(value: Any, path: str, *, max_length: int | None = None) -> list[Any]:
    if type(value) is not list:
        raise ShapeError(f"{path}: input should be a valid list")
    if max_length is not None and len(value) > max_length:
        raise ShapeError(
            f"{path}: list should have at most {max_length} items after validation, not {len(value)}"
        )
    return value


def obj(value: Any, path: str, *, of: str = "") -> dict[str, Any]:
    """A JSON object; ``of`` names the record it must be, as in ``... or instance of <of>``."""
    if type(value) is not dict:
        kind = f"dictionary or instance of {of}" if of else "dictionary"
        raise ShapeError(f"{path}: input should be a valid {kind}")
    return value


def string_map(value: Any, path: str) -> dict[str, str]:
    """An object of strings (a digest set): every value a string."""
    for key, item in obj(value, path).items():
        string(item, where(path, key))
    return value  # type: ignore[no-any-return]


def no_unknown(value: dict[str, Any], known: frozenset[str], path: str = "") -> None:
    """Refuse the first key of ``value`` not in ``known``."""
    if not value.keys() <= known:
        for key in value:
            if key not in known:
                raise ShapeError(f"unknown field {go_quote(where(path, key))}")


def no_other_spelling(value: dict[str, Any], fields: frozenset[str], path: str = "") -> None:
    """Refuse a key Go's decoder reads as one of ``fields`` though spelled otherwise (``Subject``,
    ``\u017fubject``): Go matches keys to struct fields case-insensitively and keeps the last,
    so where this reader ignores the key, Go reads its value instead of the field's."""
    if value.keys() <= fields:
        return
    folded = {go_fold(name): name for name in fields}
    for key in value:
        name = folded.get(go_fold(key)) if key not in fields else None
        if name is not None:
            raise ShapeError(
                f"field {go_quote(where(path, key))} is another spelling of {go_quote(name)},"
                " which Go's decoder reads in its place"
            )
