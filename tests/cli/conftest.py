"""Run the CLI in-process and capture what it prints (the ``cli`` fixture lives in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Result:
    code: int
    out: str
    err: str


Run = Callable[..., Result]
