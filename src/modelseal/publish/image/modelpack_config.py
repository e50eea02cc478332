"""The ModelPack v1 config (``application/vnd.cncf.model.config.v1+json``), written and read.

The rules are the spec's JSON schema (``schema/config-schema.json``), restated as
pydantic models: three required objects, ``descriptor``, ``config`` and ``modelfs``, no
property outside those the schema names (at any level), ``modelfs.type`` ``layers``
with at least one ``diffIds`` entry, ``descriptor.name`` non-empty when given, RFC 3339
times, two-letter lowercase languages, and the modalities the schema lists. The
properties are those of the schema's revision after v0.0.7 (``datasetsURL``,
``capabilities.reward`` and ``languages`` added, ``capabilities`` closed); its
``transformerConfig`` is not restated, so refused.

Where the spec's Go code (v0.0.7: its validator, the types a config decodes into,
and go-digest) refuses, so do these models: a date that is not in the calendar,
second 60, a lower-case ``t`` or ``z`` (Go's RFC 3339 parser takes neither), and a
diffId that is not a digest. What modelseal writes is parsed back by the same
models before it is pushed.
"""

# ruff: noqa: N815  (the field names are the schema's, camelCase as on the wire)
from __future__ import annotations

import calendar
import re
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from modelseal.attest.dsse import gojson
from modelseal.errors import RegistryError
from modelseal.publish.image.layout import canonical_json
from modelseal.text import one_line

__all__ = [
    "ModelConfig",
    "ModelDescriptor",
    "ModelFS",
    "ModelPackConfig",
    "build_config",
    "first_error",
    "parse_config",
]

MAX_CONFIG_BYTES = 1024 * 1024
MAX_FIELD_SHOWN = 120  # of a refused field's path, in a message
# RFC 3339, section 5.6 (date-time), as Go's time.RFC3339 parses it: upper-case T and Z, no second 60
_DATE_TIME = re.compile(
    r"([0-9]{4})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
    r"(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
)
_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
Modality = Literal["text", "image", "audio", "video", "embedding", "other"]
Language = Annotated[str, StringConstraints(pattern=r"^[a-z]{2}$")]
# a digest as go-digest validates one: a registered algorithm and its length of lower-case hex
Digest = Annotated[
    str, StringConstraints(pattern=r"^(sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128})$")
]


def _date_time(value: str | None) -> str | None:
    match = _DATE_TIME.fullmatch(value) if value is not None else None
    if value is not None and (match is None or int(match[3]) > _days_in(int(match[1]), int(match[2]))):
        raise ValueError(f"{value[:40]!r} is not an RFC 3339 date-time")
    return value


def _days_in(year: int, month: int) -> int:
    return 29 if month == 2 and calendar.isleap(year) else _DAYS[month - 1]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_nulls(cls, data: object) -> object:
        """The schema types every property; ``null`` is none of them."""
        for key, value in data.items() if isinstance(data, dict) else ():
            if value is None:
                raise ValueError(f"{key} is null")
        return data


class ModelCapabilities(_Strict):
    inputTypes: list[Modality] | None = None
    outputTypes: list[Modality] | None = None
    knowledgeCutoff: str | None = None
    reasoning: bool | None = None
    toolUsage: bool | None = None
    reward: bool | None = None
    languages: list[Language] | None = None

    _cutoff = field_validator("knowledgeCutoff")(_date_time)


class ModelConfig(_Strict):
    architecture: str | None = None
    format: str | None = None
    paramSize: str | None = None
    precision: str | None = None
    quantization: str | None = None
    capabilities: ModelCapabilities | None = None


class ModelDescriptor(_Strict):
    createdAt: str | None = None
    authors: list[str] | None = None
    family: str | None = None
    name: Annotated[str, Field(min_length=1)] | None = None
    docURL: str | None = None
    sourceURL: str | None = None
    datasetsURL: list[str] | None = None
    version: str | None = None
    revision: str | None = None
    vendor: str | None = None
    licenses: list[str] | None = None
    title: str | None = None
    description: str | None = None

    _created = field_validator("createdAt")(_date_time)


class ModelFS(_Strict):
    type: Literal["layers"]
    diffIds: Annotated[list[Digest], Field(min_length=1)]


class ModelPackConfig(_Strict):
    descriptor: ModelDescriptor
    config: ModelConfig
    modelfs: ModelFS


def build_config(diff_ids: list[str], *, name: str | None, source: str | None, fmt: str | None) -> bytes:
    """The config modelseal writes: no time in it, so the same files give the same bytes.

    ``name`` and ``source`` go in the descriptor, ``fmt`` (``gguf``, ``safetensors``)
    in the config, when given.
    """
    descriptor = {k: v for k, v in (("name", name), ("sourceURL", source)) if v}
    doc = {
        "descriptor": descriptor,
        "config": {"format": fmt} if fmt else {},
        "modelfs": {"type": "layers", "diffIds": diff_ids},
    }
    body = canonical_json(doc)
    parse_config(body, "the config modelseal built")  # the schema's rules hold for what we write
    return body


def parse_config(body: bytes, where: str) -> ModelPackConfig:
    """A config as the spec's schema allows it (duplicate keys refused too).

    Raises:
        RegistryError: too large, not JSON, or not valid against the schema's rules.
    """
    if len(body) > MAX_CONFIG_BYTES:
        raise RegistryError(f"{where}: the ModelPack config is over {MAX_CONFIG_BYTES} bytes")
    try:
        return ModelPackConfig.model_validate(gojson.loads(body))
    except gojson.JSONFormatError as e:
        raise RegistryError(f"{where}: the ModelPack config is not JSON: {e}") from None
    except ValidationError as e:
        raise RegistryError(
            f"{where}: the ModelPack config is not valid against the spec's schema: {first_error(e)}"
        ) from None


def first_error(e: ValidationError) -> str:
    """``field.path: message`` of a validation's first error; the field's keys (the registry's)
    escaped and cut between escapes."""
    first = e.errors()[0]
    field = one_line(".".join(str(p) for p in first["loc"]) or "(top)", MAX_FIELD_SHOWN)
    return f"{field}: {first['msg']}"
