"""A policy document's first invalid field as one line, the way a person fixes it.

pydantic reports a misspelt key twice: the key as an extra input, and the field it was
meant to be as missing (``predicatetype:`` reads ``predicateType: Field required``). The
unknown key is the cause, so it is reported first, by name, with the field it is closest to.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from modelseal.text import printable

__all__ = ["field_path", "invalid_field"]


def field_path(loc: Sequence[int | str]) -> str:
    """A pydantic location as the policy errors write it: ``require.1.trust``."""
    return ".".join(str(p) for p in loc)


def invalid_field(error: ValidationError, model: type[BaseModel] | None = None) -> str:
    """``where: what`` for the first invalid field of a document ``model`` describes, escaped.

    An unknown key comes before everything else and is named, with the field of ``model`` at that
    place it is closest to (``unknown key 'predicatetype'; did you mean predicateType?``). The
    path holds the document's own keys, so it is escaped like the message; a number where text is
    wanted gets a hint.
    """
    errors = error.errors()
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = tuple(err["loc"])
    if err["type"] == "extra_forbidden":
        key, parent = str(loc[-1]), field_path(loc[:-1])
        known = _fields_at(model, loc[:-1]) if model is not None else []
        return printable(f"{parent + ': ' if parent else ''}unknown key '{key}'{_closest(key, known)}")
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "string_type" and isinstance(err.get("input"), int | float):
        msg += " (quote it: YAML reads a bare number)"
    return printable(f"{field_path(loc) or 'policy'}: {msg}")


def _closest(key: str, known: list[str]) -> str:
    same = [k for k in known if k.lower() == key.lower()]
    close = same or difflib.get_close_matches(key, known, n=1, cutoff=0.7)
    if close:
        return f"; did you mean {close[0]}?"
    return f" (known: {', '.join(known)})" if known else ""


def _fields_at(model: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """The field names of the model found at ``loc`` under ``model``; none when that is no model."""
    at: type[BaseModel] | None = model
    for part in loc:
        if at is None:
            return []
        if isinstance(part, str):  # a list index stays on the list's model
            field = at.model_fields.get(part)
            at = _model_in(field.annotation) if field is not None else None
    return list(at.model_fields) if at is not None else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model an annotation holds (``list[X] | None`` -> ``X``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (list, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None
