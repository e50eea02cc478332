"""One line for a pydantic validation error, as wire-format errors print it."""

from __future__ import annotations

from pydantic import ValidationError

from modelseal.attest.dsse.gojson import go_quote

__all__ = ["first_error"]


def first_error(error: ValidationError) -> str:
    """``missing field "a.b"``, ``unknown field "x"``, or ``a.0.b: input should be ...``."""
    err = error.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    if err["type"] == "missing":
        return f"missing field {go_quote(where)}"
    if err["type"] == "extra_forbidden":
        return f"unknown field {go_quote(where)}"
    return f"{where}: {err['msg'].lower()}"
