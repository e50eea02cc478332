"""A ConfigMap as the API returned it: its data and binaryData entries, or the API's error text.

The gate, the attached-image gate and admission policies read trusted keys, envelopes and policies
from ConfigMaps; this is the one shape they share.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from modelseal.attest.dsse.keys import Keyring, PublicKey
from modelseal.errors import KeyFileError

__all__ = ["ConfigMapRead"]


@dataclass(frozen=True)
class ConfigMapRead:
    """A ConfigMap as the API returned it, or the API's error text."""

    data: Mapping[str, str] = field(default_factory=dict)
    binary_data: Mapping[str, str] = field(default_factory=dict)  # base64, as the API sends it
    error: str | None = None
    #: the API server did not answer (429, 5xx, unreachable): nothing was learnt of the ConfigMap
    transient: bool = False
    # the trusted keys parsed from this read, by source name: once per read, not per Model
    _keys: dict[str, tuple[PublicKey, ...] | KeyFileError] = field(
        default_factory=dict, compare=False, repr=False
    )

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ConfigMapRead:
        """From a ConfigMap object (fields of the wrong type count as absent)."""
        data = obj.get("data") or {}
        binary = obj.get("binaryData") or {}
        return cls(
            {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {},
            {k: v for k, v in binary.items() if isinstance(v, str)} if isinstance(binary, dict) else {},
        )

    def get(self, key: str) -> bytes | None:
        """``data[key]``, else the decoded ``binaryData[key]``."""
        if key in self.data:
            return self.data[key].encode("utf-8")
        if key in self.binary_data:
            try:
                return base64.b64decode(self.binary_data[key], validate=True)
            except binascii.Error:
                return None
        return None

    def entries(self) -> list[str]:
        """Every entry name in data and binaryData."""
        return sorted({*self.data, *self.binary_data})

    def trusted_keys(self, source: str) -> tuple[PublicKey, ...]:
        """The ``*.pub`` entries as keys, parsed on first use and kept with this read.

        Raises:
            KeyFileError: no ``.pub`` entries, or one that is not a usable key (``source`` names it).
        """
        found = self._keys.get(source)
        if found is None:
            try:
                ring = Keyring.from_mapping({n: self.get(n) or b"" for n in self.entries()}, source=source)
                found = tuple(ring.values())
            except KeyFileError as e:
                found = e
            self._keys[source] = found
        if isinstance(found, KeyFileError):
            raise found
        return found
