"""Admission policies: several attestations of a model, each from its own signers, with CEL rules.

::

    apiVersion: modelseal.dev/v1
    kind: AdmissionPolicy
    require:
      - name: tagged-provenance
        predicateType: https://slsa.dev/provenance/v1
        trust: {keys: [{file: builder.pub}]}     # any TrustPolicy fields
        rule: 'predicate.buildDefinition.externalParameters.workflow.ref.startsWith("refs/tags/")'

Each requirement's ``trust`` is read as a TrustPolicy file's body
(:func:`modelseal.attest.policy.policy_file.policy_from_mapping`), admitting only the
requirement's ``predicateType``; its ``rule`` is compiled and type-checked
here (:mod:`modelseal.attest.policy.cel_rules`), so a policy that loads has rules
that parse. :func:`load_any_policy` reads either kind of file, so a
TrustPolicy file stays valid wherever ``--policy`` takes one.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from modelseal.attest.policy.cel_rules import Rule, compile_rule
from modelseal.attest.policy.field_errors import invalid_field
from modelseal.attest.policy.policy_file import MAX_POLICY_BYTES, policy_from_mapping, read_policy_file
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.errors import PolicyFileError
from modelseal.text import printable

__all__ = ["AdmissionPolicy", "Requirement", "load_any_policy", "parse_admission_policy"]

API_VERSION = "modelseal.dev/v1"
KIND = "AdmissionPolicy"
MAX_REQUIREMENTS = 64


@dataclass(frozen=True)
class Requirement:
    """One attestation the model must have: its type, who may sign it, and what it must say."""

    name: str
    predicate_type: str
    trust: TrustPolicy
    rule: Rule | None = None

    @property
    def label(self) -> str:
        """The name as it may be printed: quoted, control characters escaped."""
        return f'"{printable(self.name)}"'


@dataclass(frozen=True)
class AdmissionPolicy:
    """Every requirement must be met by at least one attestation of the judged digest."""

    requirements: tuple[Requirement, ...]

    def fingerprint(self) -> str:
        """A digest of every requirement, for caches keyed by policy."""
        parts = [
            f"{r.name}\0{r.predicate_type}\0{r.trust.fingerprint()}\0{r.rule.source if r.rule else ''}"
            for r in self.requirements
        ]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()


class _RequirementEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, max_length=200)
    predicateType: str = Field(min_length=1, max_length=1000)  # noqa: N815 - YAML names
    trust: dict[str, Any]
    rule: str | None = None


class _AdmissionFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    apiVersion: str  # noqa: N815
    kind: str
    require: list[_RequirementEntry] = Field(min_length=1, max_length=MAX_REQUIREMENTS)


def _requirement(entry: _RequirementEntry, index: int, base: Path, source: str) -> Requirement:
    where = f"{source}: require.{index} ({printable(entry.name)!r})"
    for field in ("apiVersion", "kind", "predicateTypes"):
        if field in entry.trust:
            hint = "; give predicateType on the requirement" if field == "predicateTypes" else ""
            raise PolicyFileError(f"{where}: trust: {field} does not belong here{hint}")
    raw = {"apiVersion": API_VERSION, "kind": "TrustPolicy", **entry.trust}
    trust = policy_from_mapping(raw, base=base, source=f"{where}: trust")
    rule = None
    if entry.rule is not None:
        try:
            rule = compile_rule(entry.rule)
        except ValueError as e:
            raise PolicyFileError(f"{where}: rule: {printable(str(e))}") from None
    trust = replace(trust, predicate_types=(entry.predicateType,))
    return Requirement(entry.name, entry.predicateType, trust, rule)


def _named(message: str, raw: dict[str, Any]) -> str:
    """``message`` about ``require.N`` with that requirement's name, as every requirement's error has it."""
    at = re.match(r"require\.(\d+)[.:]", message)
    entries = raw.get("require")
    if at is None or not isinstance(entries, list) or int(at[1]) >= len(entries):
        return message
    entry = entries[int(at[1])]
    name = entry.get("name") if isinstance(entry, dict) else None
    if not isinstance(name, str):
        return message
    rest = message[at.end() :].lstrip()
    return f"require.{at[1]} ({printable(name)!r}): {rest}"


def parse_admission_policy(raw: dict[str, Any], *, base: Path, source: str) -> AdmissionPolicy:
    """Build an admission policy from a parsed document; relative key paths resolve against ``base``.

    Raises:
        PolicyFileError: unknown or missing fields, a repeated name, a bad trust
            or a rule that does not compile (naming the requirement);
            KeyFileError: a key it names cannot be loaded.
    """
    try:
        doc = _AdmissionFile.model_validate(raw)
    except ValidationError as e:
        raise PolicyFileError(f"{source}: {_named(invalid_field(e, _AdmissionFile), raw)}") from None
    if doc.apiVersion != API_VERSION:
        raise PolicyFileError(f"{source}: want apiVersion {API_VERSION}")
    seen: dict[str, int] = {}
    for i, entry in enumerate(doc.require):
        if entry.name in seen:
            first = seen[entry.name]
            raise PolicyFileError(
                f"{source}: require.{i}: the name {printable(entry.name)!r} is require.{first}'s"
            )
        seen[entry.name] = i
    return AdmissionPolicy(tuple(_requirement(e, i, base, source) for i, e in enumerate(doc.require)))


def load_any_policy(path: str | Path) -> TrustPolicy | AdmissionPolicy:
    """A TrustPolicy or an AdmissionPolicy file, told apart by its ``kind``.

    Raises:
        PolicyFileError: unreadable or invalid; KeyFileError: a named key is bad.
    """
    from modelseal.attest.policy.yaml_file import load_policy_yaml

    p = Path(path)
    data = read_policy_file(p)
    if len(data) > MAX_POLICY_BYTES:
        raise PolicyFileError(f"{p}: larger than {MAX_POLICY_BYTES} bytes")
    raw = load_policy_yaml(data, str(p))
    if isinstance(raw, dict) and raw.get("kind") == KIND:
        return parse_admission_policy(raw, base=p.parent, source=str(p))
    return policy_from_mapping(raw, base=p.parent, source=str(p))
