"""Where the operator's admission policy comes from: ``--model-attestation-policy``.

The flag takes a policy file, as before (a TrustPolicy, or now an
AdmissionPolicy), or, when no such file exists, ``NAMESPACE/NAME`` of a
ConfigMap whose ``policy.yaml`` entry is an AdmissionPolicy. In a ConfigMap,
a requirement's ``file:`` (in ``keys``, ``certificateRoots``, ``trustedRoot``)
names another entry of the same ConfigMap, nothing else: no paths, no
``dir:``, so a policy in the cluster never reads the operator's own files.
The entries are written to a private temporary folder only while the policy
is parsed. A ConfigMap's policy is parsed once per content (a small cache),
so every Model judged by it shares one parse and one compile of its rules.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelseal.attest.policy.admission_policy import (
    KIND,
    AdmissionPolicy,
    load_any_policy,
    parse_admission_policy,
)
from modelseal.attest.policy.policy_file import MAX_POLICY_BYTES
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.verdict import Mode
from modelseal.errors import InputError, PolicyFileError, UsageError
from modelseal.operator.kube.names import parse_flag_ref
from modelseal.text import printable

if TYPE_CHECKING:
    from modelseal.operator.kube.configmap_read import ConfigMapRead

__all__ = ["POLICY_ENTRY", "configmap_admission_policy", "parse_policy_flag"]

POLICY_ENTRY = "policy.yaml"
_ENTRY = re.compile(r"[-._a-zA-Z0-9]{1,253}")
_CACHE: OrderedDict[str, AdmissionPolicy | InputError] = OrderedDict()
_CACHE_SIZE = 16
_LOCK = threading.Lock()  # Models are judged in threads


def parse_policy_flag(
    text: str | None, mode: Mode
) -> tuple[TrustPolicy | AdmissionPolicy | None, tuple[str, str] | None]:
    """A policy file's policy, or the ConfigMap ``(namespace, name)`` that holds one.

    Raises:
        UsageError: neither; PolicyFileError, KeyFileError: the file.
    """
    if not text:
        return None, None
    if Path(text).exists():
        return load_any_policy(text), None
    flag = "--model-attestation-policy"
    found = parse_flag_ref(text, flag, f"{flag} {text}: no such file, nor a ConfigMap's namespace/name")
    if mode is Mode.OFF:
        raise UsageError(f"{flag} NAMESPACE/NAME needs --model-attestation warn or enforce")
    return None, found


def _files(trust: Any) -> Iterator[tuple[str, Any]]:
    """Every (field, value) of a trust mapping that names a file or a folder."""
    if not isinstance(trust, dict):
        return
    if "trustedRoot" in trust:
        yield "trustedRoot", trust["trustedRoot"]
    for group in ("keys", "certificateRoots"):
        for entry in trust.get(group) or [] if isinstance(trust.get(group), list) else []:
            if isinstance(entry, dict):
                yield from ((f"{group}.{k}", entry[k]) for k in ("file", "dir") if k in entry)


def _check_references(raw: Any, entries: list[str], where: str) -> None:
    requirements = raw.get("require") if isinstance(raw, dict) else None
    for i, requirement in enumerate(requirements if isinstance(requirements, list) else []):
        trust = requirement.get("trust") if isinstance(requirement, dict) else None
        for field, value in _files(trust):
            if field.endswith(".dir"):
                raise PolicyFileError(
                    f"{where}: require.{i}: trust: {field}: not in a ConfigMap; list each key"
                )
            if not isinstance(value, str) or not _ENTRY.fullmatch(value) or value in (".", ".."):
                raise PolicyFileError(f"{where}: require.{i}: trust: {field}: name an entry of the ConfigMap")
            if value not in entries:
                raise PolicyFileError(f"{where}: require.{i}: trust: {field}: no entry {printable(value)!r}")


def _parse(read: ConfigMapRead, where: str) -> AdmissionPolicy:
    from modelseal.attest.policy.yaml_file import load_policy_yaml

    text = read.get(POLICY_ENTRY)
    if text is None:
        raise PolicyFileError(f"{where}: no entry {POLICY_ENTRY}")
    if len(text) > MAX_POLICY_BYTES:
        raise PolicyFileError(f"{where}: {POLICY_ENTRY} is larger than {MAX_POLICY_BYTES} bytes")
    raw = load_policy_yaml(text, where)
    if not isinstance(raw, dict) or raw.get("kind") != KIND:
        raise PolicyFileError(f"{where}: {POLICY_ENTRY} is not an {KIND}")
    entries = [e for e in read.entries() if _ENTRY.fullmatch(e) and e not in (".", "..", POLICY_ENTRY)]
    _check_references(raw, entries, where)
    with tempfile.TemporaryDirectory(prefix="modelseal-policy-") as folder:
        for entry in entries:
            fd = os.open(Path(folder) / entry, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(read.get(entry) or b"")
        return parse_admission_policy(raw, base=Path(folder), source=where)


def configmap_admission_policy(read: ConfigMapRead, where: str) -> AdmissionPolicy:
    """The AdmissionPolicy a ConfigMap holds (``where`` names it in errors), parsed once per content.

    Raises:
        InputError: no ``policy.yaml``, not an AdmissionPolicy, a bad reference, key or rule.
    """
    digest = hashlib.sha256(where.encode() + b"\0")
    for entry in read.entries():
        digest.update(entry.encode() + b"\0" + hashlib.sha256(read.get(entry) or b"").digest())
    key = digest.hexdigest()
    with _LOCK:
        found = _CACHE.get(key)
        if found is None:
            try:
                found = _parse(read, where)
            except InputError as e:
                found = e
            _CACHE[key] = found
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
        _CACHE.move_to_end(key)
    if isinstance(found, InputError):
        raise found
    return found
