"""Every weight an InferenceService (or a LoRAAdapter) brings into a serving Pod, from its spec.

Read from LLMKube's API types at v0.9.19 (``api/v1alpha1/inferenceservice_types.go``,
``loraadapter_types.go``) and from how its controller builds the serving
Deployment (``internal/controller/deployment_builder.go``, ``runtime_*.go``):

Models, each resolved in the InferenceService's own namespace:

- ``spec.modelRef`` (required);
- ``spec.speculativeDecoding.draftModelRef``: llama.cpp's draft, mounted into
  the same Pod (``spec.speculativeDecoding.draftModel`` is a file of the main
  Model's ``spec.files`` and brings nothing new, unless a ``..`` segment takes
  it out of the Model's folder: LLMKube joins it to that folder as it is, and
  the shared model cache beside it holds other Models' files);
- ``spec.vllmConfig.speculative.model``: documented as a Model's name, but
  LLMKube hands the string to vLLM as ``--speculative-model`` as it is, so
  vLLM loads it itself (a Hugging Face repository or a path): it is judged as a
  Model *and* counted as unattested weights.

Weights no Model attests (:class:`WeightPath`):

- ``spec.sglangConfig.loraAdapters[].path``, ``spec.sglangConfig.loraModules[]``,
  ``spec.sglangConfig.speculative.draftModelPath``;
- ``spec.extraVolumes[]`` other than ``emptyDir`` and ``downwardAPI`` (a claim,
  an image, a host path, a ConfigMap can all hold weights);
- ``spec.modelCache.claimName``: LLMKube serves a file already in that claim
  without comparing it with ``spec.sha256``;
- ``spec.skipModelInit: true`` and the runtimes for which LLMKube mounts no
  Model at all (``generic``, ``llamacpp-router``, ``personaplex``, ``tgi``):
  the container loads what it likes, or downloads ``spec.source`` itself;
- ``spec.extraVolumeMounts[]`` of a volume that is not one of ``spec.extraVolumes``
  (LLMKube's own model cache, which holds every cached Model's files, mounted
  again where a subPath or a writable mount can swap them);
- ``spec.command`` (replaces the runtime's entrypoint) and an ``exec`` probe in
  ``spec.probeOverrides`` (a command in the serving container, as it loads);
- weight-loading flags in ``spec.extraArgs`` or ``spec.args``, read as the kubelet
  passes them (``$(NAME)`` filled in from ``spec.env``; an argument that takes a
  value modelseal cannot see there could be any flag, and counts), and llama.cpp's
  ``LLAMA_ARG_*`` variables in ``spec.env``, vLLM's ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``
  (any client may then load an adapter), and the variables with which the
  runtime loads code from a path (``LD_PRELOAD``, ``PYTHONPATH``, compiled-code
  caches: :mod:`modelseal.operator.admission.runtime_flags`);
- a ``LoRAAdapter``'s ``spec.path`` (loaded into a running SGLang server).

Remote code (``spec.sglangConfig.trustRemoteCode``, ``--trust-remote-code`` in the
arguments) is noted apart (:attr:`ServedWeights.remote_code`): it is allowed only
when the main Model's attested files include its Python modules.

A field is judged whenever it is set, whatever ``enabled`` or ``runtime`` say:
a gate that followed each switch as LLMKube reads it today would miss the one
it reads differently tomorrow. A field of the wrong type, a list longer than
:data:`MAX_ITEMS` or a Model name that is not a Kubernetes name (``ns/name``
included) is *malformed*, which the webhook refuses in enforce mode. Pure:
no I/O, and it never raises on any JSON value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from modelseal.operator.admission.arg_expansion import environment, expand, hidden_flag
from modelseal.operator.admission.runtime_flags import remote_code_flag, weight_flag, weight_variable
from modelseal.operator.kube.names import is_subdomain
from modelseal.text import printable

__all__ = [
    "MAX_ITEMS",
    "ModelReference",
    "ServedWeights",
    "WeightPath",
    "inference_service_weights",
    "lora_adapter_weights",
]

MAX_ITEMS = 256  # per list; Kubernetes' object size limit bounds them anyway
_SHOWN = 120
#: runtimes for which LLMKube v0.9.19 mounts no Model (their backend's NeedsModelInit is false)
_UNMOUNTED = {
    "generic": "runs spec.command and spec.args with no Model mounted",
    "llamacpp-router": "serves whatever spec.extraVolumes put at /models, with no Model mounted",
    "personaplex": "downloads its own weights, with no Model mounted",
    "tgi": "downloads spec.source itself, unchecked against spec.sha256",
}
_EMPTY_VOLUMES = frozenset({"emptyDir", "downwardAPI"})  # they start with no files anyone chose
_HIDDEN = (
    "the kubelet fills $(NAME) in from a value modelseal cannot see (valueFrom, envFrom, a variable"
    " LLMKube or a Service sets), so it can become any flag"
)


@dataclass(frozen=True)
class ModelReference:
    """A Model an object names: in which namespace, its name, and the field that names it."""

    namespace: str
    name: str
    field: str


@dataclass(frozen=True)
class WeightPath:
    """Weights that reach the Pod without a Model: the field, its value (escaped, cut) and what it is."""

    field: str
    value: str
    what: str


@dataclass(frozen=True)
class ServedWeights:
    """What one object brings: Models to judge, unattested weights, and malformed fields."""

    models: tuple[ModelReference, ...] = ()
    paths: tuple[WeightPath, ...] = ()
    malformed: tuple[str, ...] = ()
    #: the fields that make the runtime run the main Model's Python code (trust remote code)
    remote_code: tuple[str, ...] = ()

    def names(self, namespace: str) -> frozenset[str]:
        """The names of the Models in ``namespace`` this object uses."""
        return frozenset(m.name for m in self.models if m.namespace == namespace)


def _shown(value: object) -> str:
    text = printable(value) if isinstance(value, str) else printable(repr(value))
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


class _Reader:
    """Walks a spec, noting what it finds and every field of the wrong shape."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.models: list[ModelReference] = []
        self.paths: list[WeightPath] = []
        self.malformed: list[str] = []
        self.remote_code: list[str] = []

    def result(self) -> ServedWeights:
        return ServedWeights(
            tuple(self.models), tuple(self.paths), tuple(self.malformed), tuple(self.remote_code)
        )

    def mapping(self, value: object, field: str) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.malformed.append(f"{field} is not an object")
            return {}
        return value

    def items(self, value: object, field: str) -> list[tuple[str, Any]]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.malformed.append(f"{field} is not a list")
            return []
        if len(value) > MAX_ITEMS:
            self.malformed.append(f"{field} has {len(value)} entries, over the gate's limit of {MAX_ITEMS}")
            return []
        return [(f"{field}[{i}]", item) for i, item in enumerate(value)]

    def text(self, value: object, field: str) -> str | None:
        """A string field's value; None when absent or empty."""
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            self.malformed.append(f"{field} is not a string")
            return None
        return value

    def model(self, value: object, field: str, *, required: bool = False) -> str | None:
        name = self.text(value, field)
        if name is None:
            if required and (value is None or value == ""):
                self.malformed.append(f"{field} names no Model")
            return None
        if not is_subdomain(name):
            self.malformed.append(
                f"{field} {_shown(name)!r} is not a Model name (a Model in the object's own namespace)"
            )
            return None
        self.models.append(ModelReference(self.namespace, name, field))
        return name

    def path(self, value: object, field: str, what: str) -> None:
        found = self.text(value, field)
        if found is not None:
            self.paths.append(WeightPath(field, _shown(found), what))

    def flags(self, value: object, field: str, variables: Mapping[str, str]) -> None:
        """Arguments as the kubelet passes them (``$(NAME)`` from ``variables``, the container's)."""
        for at, arg in self.items(value, field):
            if not isinstance(arg, str):
                self.malformed.append(f"{at} is not a string")
                continue
            passed = expand(arg, variables)
            if hidden_flag(passed):
                self.paths.append(WeightPath(at, _shown(arg), _HIDDEN))
            elif remote_code_flag(passed):
                self.remote_code.append(at)
            elif (found := weight_flag(passed)) is not None:
                self.paths.append(
                    WeightPath(at, _shown(arg), f"the runtime flag {found[0]} loads {found[1]}")
                )


def _speculative(spec: Mapping[str, Any], r: _Reader) -> None:
    decoding = r.mapping(spec.get("speculativeDecoding"), "spec.speculativeDecoding")
    r.model(decoding.get("draftModelRef"), "spec.speculativeDecoding.draftModelRef")
    companion = r.text(decoding.get("draftModel"), "spec.speculativeDecoding.draftModel")
    if companion is not None and ".." in companion.split("/"):  # LLMKube path.Joins it to the Model's folder
        r.paths.append(WeightPath("spec.speculativeDecoding.draftModel", _shown(companion),
                                  "a draft file outside the Model's own files (a '..' segment)"))  # fmt: skip
    vllm = r.mapping(spec.get("vllmConfig"), "spec.vllmConfig")
    field = "spec.vllmConfig.speculative.model"
    draft = r.text(r.mapping(vllm.get("speculative"), "spec.vllmConfig.speculative").get("model"), field)
    if draft is not None:
        if is_subdomain(draft):
            r.models.append(ModelReference(r.namespace, draft, field))
        what = "vLLM loads it itself as --speculative-model (a repository or a path)"
        r.paths.append(WeightPath(field, _shown(draft), what))


def _sglang(spec: Mapping[str, Any], r: _Reader) -> None:
    sglang = r.mapping(spec.get("sglangConfig"), "spec.sglangConfig")
    for at, adapter in r.items(sglang.get("loraAdapters"), "spec.sglangConfig.loraAdapters"):
        r.path(r.mapping(adapter, at).get("path"), f"{at}.path", "an SGLang LoRA adapter")
    for at, module in r.items(sglang.get("loraModules"), "spec.sglangConfig.loraModules"):
        r.path(module, at, "an SGLang LoRA adapter (name=path)")
    trust = sglang.get("trustRemoteCode")
    if trust is not None and not isinstance(trust, bool):
        r.malformed.append("spec.sglangConfig.trustRemoteCode is not a boolean")
    elif trust:
        r.remote_code.append("spec.sglangConfig.trustRemoteCode")
    speculative = r.mapping(sglang.get("speculative"), "spec.sglangConfig.speculative")
    r.path(speculative.get("draftModelPath"), "spec.sglangConfig.speculative.draftModelPath",
           "an SGLang draft model")  # fmt: skip


def _volumes(spec: Mapping[str, Any], r: _Reader) -> None:
    extra: set[object] = set()
    for at, volume in r.items(spec.get("extraVolumes"), "spec.extraVolumes"):
        volume = r.mapping(volume, at)
        extra.add(volume.get("name"))
        kinds = sorted(k for k in volume if k != "name")
        if not kinds or any(k not in _EMPTY_VOLUMES for k in kinds):
            shown = ", ".join(kinds) or "no source"
            r.paths.append(WeightPath(at, _shown(volume.get("name", "")), f"a volume ({_shown(shown)})"))
    for at, mount in r.items(spec.get("extraVolumeMounts"), "spec.extraVolumeMounts"):
        name = r.mapping(mount, at).get("name")
        if isinstance(mount, Mapping) and name not in extra:  # one of LLMKube's own: the model cache
            r.paths.append(
                WeightPath(at, _shown(name), "mounts a volume LLMKube built (the model cache) again")
            )
    cache = r.mapping(spec.get("modelCache"), "spec.modelCache")
    r.path(cache.get("claimName"), "spec.modelCache.claimName",
           "a claim whose cached files LLMKube serves unchecked")  # fmt: skip


def _runtime(spec: Mapping[str, Any], r: _Reader) -> None:
    runtime = r.text(spec.get("runtime"), "spec.runtime")
    if runtime is not None and runtime in _UNMOUNTED:
        r.paths.append(WeightPath("spec.runtime", runtime, _UNMOUNTED[runtime]))
    skip = spec.get("skipModelInit")
    if skip is not None and not isinstance(skip, bool):
        r.malformed.append("spec.skipModelInit is not a boolean")
    elif skip:
        r.paths.append(WeightPath("spec.skipModelInit", "true", "no Model is mounted"))
    command = r.items(spec.get("command"), "spec.command")
    if command:
        r.paths.append(WeightPath("spec.command", _shown(" ".join(map(str, (c for _, c in command)))),
                                  "replaces the runtime's entrypoint"))  # fmt: skip
    probes = r.mapping(spec.get("probeOverrides"), "spec.probeOverrides")
    for kind in ("startup", "liveness", "readiness"):
        field = f"spec.probeOverrides.{kind}"
        if r.mapping(probes.get(kind), field).get("exec") is not None:
            r.paths.append(WeightPath(f"{field}.exec", "exec", "runs a command in the serving container"))
    variables = environment(spec.get("env"))  # LLMKube's own variables come first: hidden here
    r.flags(spec.get("extraArgs"), "spec.extraArgs", variables)
    r.flags(spec.get("args"), "spec.args", variables)
    for at, variable in r.items(spec.get("env"), "spec.env"):
        name = r.mapping(variable, at).get("name")
        what = weight_variable(name) if isinstance(name, str) else None
        if what is not None:
            r.paths.append(WeightPath(at, str(name), what))
        elif not isinstance(name, str) and isinstance(variable, Mapping):
            r.malformed.append(f"{at}.name is not a string")


def inference_service_weights(obj: object, namespace: str) -> ServedWeights:
    """The Models and unattested weights an InferenceService ``obj`` in ``namespace`` brings."""
    r = _Reader(namespace)
    body = r.mapping(obj, "the InferenceService")
    spec = r.mapping(body.get("spec"), "spec")
    r.model(spec.get("modelRef"), "spec.modelRef", required=True)
    _speculative(spec, r)
    _sglang(spec, r)
    _volumes(spec, r)
    _runtime(spec, r)
    return r.result()


def lora_adapter_weights(obj: object, namespace: str) -> ServedWeights:
    """A LoRAAdapter's ``spec.path``: loaded into a running SGLang server, attested by no Model."""
    r = _Reader(namespace)
    spec = r.mapping(r.mapping(obj, "the LoRAAdapter").get("spec"), "spec")
    target = r.mapping(spec.get("inferenceServiceRef"), "spec.inferenceServiceRef")
    into = f"{_shown(target.get('namespace') or namespace)}/{_shown(target.get('name', ''))}"
    r.path(spec.get("path"), "spec.path", f"a LoRA adapter loaded into InferenceService {into}")
    if not r.paths and not r.malformed:
        r.malformed.append("spec.path names no adapter")
    return r.result()
