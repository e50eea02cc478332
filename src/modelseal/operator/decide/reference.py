"""Which ConfigMap key holds a Model's attestation: the annotation, or ``spec.attestation``.

LLMKube v0.9.19's Model CRD has no ``spec.attestation``: the API server prunes
it, and a strict apply (kubectl's default) refuses the Model. Annotations are
kept by every schema, so the reference modelseal reads first is one:

    metadata.annotations["modelseal.dev/attestation"] = "NAME/KEY"

the ConfigMap ``NAME`` in the Model's own namespace and its key ``KEY``.
``spec.attestation.configMapKeyRef`` is still read where a CRD keeps it
(LLMKube's newer schema). Both set and naming different envelopes is refused:
two readers of the Model (modelseal and LLMKube's own gate) must never judge
two attestations. A value that is not ``NAME/KEY`` (``../x/y``, control
characters, a key with a slash) is refused with the value escaped and cut, so
it can name nothing outside the namespace and cannot forge a line of a status.
Pure: no I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from modelseal.operator.kube.names import is_subdomain
from modelseal.text import one_line

__all__ = ["ANNOTATION", "Reference", "annotation_value", "attestation_reference"]

ANNOTATION = "modelseal.dev/attestation"
_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")  # a ConfigMap key, as the API server checks it
_SHOWN = 80


@dataclass(frozen=True)
class Reference:
    """The attestation's ConfigMap ``name`` and ``key``, and the field that named them; or, when
    ``problem`` is set, why the Model's reference cannot be used (the gate refuses with it)."""

    name: str
    key: str
    field: str
    problem: str | None = None


def _shown(value: str) -> str:
    return f"'{one_line(value, _SHOWN)}'"  # escaped once, cut between escapes


def annotation_value(model: Mapping[str, Any]) -> str | None:
    """The annotation's value as the object holds it (None: not set; a value that is not a
    string reads as its repr, so that it is refused and never taken for absent)."""
    meta = model.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(annotations, Mapping) or ANNOTATION not in annotations:
        return None
    value = annotations[ANNOTATION]
    return value if isinstance(value, str) else repr(value)


@functools.lru_cache(maxsize=1024)  # a function of the string alone; Models share few values
def _from_annotation(value: str) -> Reference:
    field = f"annotation {ANNOTATION}"
    name, sep, key = value.partition("/")
    bad_key = (
        _KEY.fullmatch(key) is None or key in (".", "..") or key.startswith("..")
    )  # as the API checks it
    if not sep or "/" in key or not is_subdomain(name) or bad_key:
        return Reference("", "", field, f"{field} {_shown(value)} is not NAME/KEY (a ConfigMap in the"
                                        " Model's namespace, and the key holding the envelope)")  # fmt: skip
    return Reference(name, key, field)


def _from_spec(spec: Mapping[str, Any]) -> Reference | None:
    attestation = spec.get("attestation")
    if attestation is None:
        return None
    ref = attestation.get("configMapKeyRef") if isinstance(attestation, Mapping) else None
    field = "spec.attestation.configMapKeyRef"
    if not isinstance(ref, Mapping):
        return Reference("", "", field, f"{field} is not set")
    name, key = ref.get("name", ""), ref.get("key", "")
    if not isinstance(name, str) or not isinstance(key, str):
        return Reference("", "", field, f"{field} has a name or key that is not a string")
    if not is_subdomain(name):
        return Reference(name, key, field, f"{field}.name {_shown(name)} is not a valid ConfigMap name"
                                           " (a DNS-1123 subdomain)")  # fmt: skip
    return Reference(name, key, field)


def attestation_reference(model: Mapping[str, Any]) -> Reference | None:
    """Where the Model's attestation is (None: neither the annotation nor ``spec.attestation``)."""
    value = annotation_value(model)
    spec = model.get("spec")
    given = _from_spec(spec) if isinstance(spec, Mapping) else None
    annotated = _from_annotation(value) if value is not None else None
    if annotated is None or given is None:
        return annotated or given
    if annotated.problem or given.problem:
        return annotated if annotated.problem else given
    if (annotated.name, annotated.key) != (given.name, given.key):
        return Reference("", "", annotated.field, (
            f"{annotated.field} names {_shown(f'{annotated.name}/{annotated.key}')} and"
            f" spec.attestation names {_shown(f'{given.name}/{given.key}')}: set one of them, so that"
            " every reader of the Model judges the same envelope"))  # fmt: skip
    return Reference(given.name, given.key, f"{annotated.field} and spec.attestation")
