"""The DSSE envelope as the reference reader validates it (pydantic, strict, no unknown keys).

Imported only when msgspec's fast path in :mod:`modelseal.attest.dsse.envelope` declines an
envelope, so a well-formed envelope is read without building these models.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["WireEnvelope", "WireSignature"]


class WireSignature(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    keyid: str = ""
    sig: str


class WireEnvelope(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    payloadType: str  # noqa: N815 - the wire name
    payload: str
    signatures: list[WireSignature] | None = None
