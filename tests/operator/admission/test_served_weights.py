"""Every weight an InferenceService or LoRAAdapter brings, read from LLMKube-shaped objects (v0.9.19)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelseal.operator.admission.served_weights import (
    MAX_ITEMS,
    ModelReference,
    ServedWeights,
    WeightPath,
    inference_service_weights,
    lora_adapter_weights,
)


def isvc(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "inference.llmkube.dev/v1alpha1", "kind": "InferenceService",
            "metadata": {"name": "chat", "namespace": "ml"}, "spec": {"modelRef": "llama", **spec}}  # fmt: skip


def test_a_plain_inferenceservice_names_its_model_only() -> None:
    assert inference_service_weights(isvc(runtime="llamacpp", replicas=2), "ml") == ServedWeights(
        models=(ModelReference("ml", "llama", "spec.modelRef"),)
    )


def test_the_llamacpp_draft_is_a_model_in_the_same_namespace() -> None:
    found = inference_service_weights(
        isvc(speculativeDecoding={"type": "draft-simple", "draftModelRef": "llama-draft", "nDraftMax": 8}),
        "ml",
    )
    assert found.models == (
        ModelReference("ml", "llama", "spec.modelRef"),
        ModelReference("ml", "llama-draft", "spec.speculativeDecoding.draftModelRef"),
    )
    assert found.paths == () and found.malformed == ()
    assert found.names("ml") == {"llama", "llama-draft"} and found.names("other") == frozenset()


def test_a_companion_draft_file_brings_nothing_new() -> None:
    found = inference_service_weights(
        isvc(speculativeDecoding={"type": "draft-dflash", "draftModel": "d.gguf"}), "ml"
    )
    assert found == ServedWeights(models=(ModelReference("ml", "llama", "spec.modelRef"),))


@pytest.mark.parametrize("draft", ["../other-model/evil.gguf", "sub/../../evil.gguf", "..", "a/.."])
def test_a_companion_draft_file_that_climbs_out_of_the_model_is_unattested(draft: str) -> None:
    """Red team: LLMKube joins draftModel to the Model's staged folder (path.Join), so a ".."
    reaches other Models' files in the shared cache; it passed as "nothing new" before."""
    found = inference_service_weights(
        isvc(speculativeDecoding={"type": "draft-dflash", "draftModel": draft}), "ml"
    )
    assert [(p.field, p.value) for p in found.paths] == [("spec.speculativeDecoding.draftModel", draft)]
    assert found.malformed == ()


def test_the_vllm_speculative_model_is_a_model_and_unattested_weights() -> None:
    found = inference_service_weights(
        isvc(runtime="vllm", vllmConfig={"speculative": {"enabled": True, "model": "llama-draft"}}), "ml"
    )
    assert ModelReference("ml", "llama-draft", "spec.vllmConfig.speculative.model") in found.models
    [path] = found.paths
    assert path.field == "spec.vllmConfig.speculative.model" and "--speculative-model" in path.what
    # a Hugging Face repository is no Model name, but still weights vLLM loads
    repo = inference_service_weights(isvc(vllmConfig={"speculative": {"model": "org/draft"}}), "ml")
    assert [m.name for m in repo.models] == ["llama"] and repo.paths[0].value == "org/draft"
    assert repo.malformed == ()


@pytest.mark.parametrize(
    ("spec", "field", "value"),
    [
        ({"sglangConfig": {"loraAdapters": [{"name": "a", "path": "/adapters/a"}]}},
         "spec.sglangConfig.loraAdapters[0].path", "/adapters/a"),
        ({"sglangConfig": {"loraModules": ["b=/adapters/b"]}}, "spec.sglangConfig.loraModules[0]", "b=/adapters/b"),
        ({"sglangConfig": {"speculative": {"enabled": False, "algorithm": "EAGLE", "draftModelPath": "/d"}}},
         "spec.sglangConfig.speculative.draftModelPath", "/d"),
        ({"extraVolumes": [{"name": "w", "persistentVolumeClaim": {"claimName": "weights"}}]},
         "spec.extraVolumes[0]", "w"),
        ({"extraVolumes": [{"name": "i", "image": {"reference": "r.example/w@sha256:" + "a" * 64}}]},
         "spec.extraVolumes[0]", "i"),
        ({"extraVolumes": [{"name": "h", "hostPath": {"path": "/srv/models"}}]}, "spec.extraVolumes[0]", "h"),
        ({"extraVolumes": [{"name": "c", "configMap": {"name": "adapter"}}]}, "spec.extraVolumes[0]", "c"),
        ({"extraVolumes": [{"name": "x"}]}, "spec.extraVolumes[0]", "x"),
        ({"modelCache": {"claimName": "my-cache"}}, "spec.modelCache.claimName", "my-cache"),
        ({"runtime": "generic", "image": "x", "args": ["serve"]}, "spec.runtime", "generic"),
        ({"runtime": "llamacpp-router"}, "spec.runtime", "llamacpp-router"),
        ({"runtime": "personaplex"}, "spec.runtime", "personaplex"),
        ({"runtime": "tgi"}, "spec.runtime", "tgi"),
        ({"skipModelInit": True}, "spec.skipModelInit", "true"),
        ({"command": ["sh", "-c", "curl -o /m x"]}, "spec.command", "sh -c curl -o /m x"),
        ({"extraArgs": ["--seed", "42", "--lora", "/l.gguf"]}, "spec.extraArgs[2]", "--lora"),
        ({"extraArgs": ["--model-draft=/d.gguf"]}, "spec.extraArgs[0]", "--model-draft=/d.gguf"),
        ({"extraArgs": ["--lora-modules", "a=/a"]}, "spec.extraArgs[0]", "--lora-modules"),
        ({"args": ["--model-path", "/m"]}, "spec.args[0]", "--model-path"),
        # red team: vLLM reads --a_b as --a-b and --a.key=v as a key of --a's JSON; Python's argparse
        # (vLLM, SGLang) takes any unambiguous prefix of a long flag: each passed as no weights before
        ({"extraArgs": ["--speculative_model", "/d"]}, "spec.extraArgs[0]", "--speculative_model"),
        ({"extraArgs": ["--speculative-config.model=/d"]}, "spec.extraArgs[0]", "--speculative-config.model=/d"),
        ({"extraArgs": ["--speculative_config.model", "/d"]}, "spec.extraArgs[0]", "--speculative_config.model"),
        ({"extraArgs": ["--lora_modules", "a=/a"]}, "spec.extraArgs[0]", "--lora_modules"),
        ({"extraArgs": ["--speculative-conf", '{"model": "/d"}']}, "spec.extraArgs[0]", "--speculative-conf"),
        ({"extraArgs": ["--lora-mod=a=/a"]}, "spec.extraArgs[0]", "--lora-mod=a=/a"),
        ({"args": ["--model-pa", "/m"]}, "spec.args[0]", "--model-pa"),
        ({"extraArgs": ["--speculative-draft-model", "/d"]}, "spec.extraArgs[0]", "--speculative-draft-model"),
        # red team: a tokenizer or config from another repository is files no attestation covers, and
        # with --trust-remote-code (which the attested repository may need) its Python runs in the Pod
        ({"extraArgs": ["--tokenizer", "org/evil", "--trust-remote-code"]}, "spec.extraArgs[0]", "--tokenizer"),
        ({"extraArgs": ["--hf_config_path=org/evil"]}, "spec.extraArgs[0]", "--hf_config_path=org/evil"),
        ({"extraArgs": ["--tokenizer-path", "/t"]}, "spec.extraArgs[0]", "--tokenizer-path"),
        # red team: vLLM then serves /v1/load_lora_adapter, so any client loads weights after admission
        ({"env": [{"name": "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "value": "True"}]}, "spec.env[0]",
         "VLLM_ALLOW_RUNTIME_LORA_UPDATING"),
        ({"env": [{"name": "HF_TOKEN", "value": "x"}, {"name": "LLAMA_ARG_MODEL_DRAFT", "value": "/d"}]},
         "spec.env[1]", "LLAMA_ARG_MODEL_DRAFT"),
        # red team 2: a library or module beside the checked file (on a pvc:// Model's own claim, or
        # left in the shared cache by a download its verifier refused) loaded into the runtime, which
        # then serves anything; passed as no weights before
        ({"env": [{"name": "LD_PRELOAD", "value": "/model-source/evil.so"}]}, "spec.env[0]", "LD_PRELOAD"),
        ({"env": [{"name": "LD_LIBRARY_PATH", "value": "/model-source"}]}, "spec.env[0]", "LD_LIBRARY_PATH"),
        ({"env": [{"name": "PYTHONPATH", "value": "/model-source"}]}, "spec.env[0]", "PYTHONPATH"),
        ({"env": [{"name": "VLLM_CACHE_ROOT", "value": "/model-source/c"}]}, "spec.env[0]", "VLLM_CACHE_ROOT"),
        ({"extraArgs": ["--tool-parser-plugin", "/model-source/p.py"]}, "spec.extraArgs[0]", "--tool-parser-plugin"),
        ({"extraArgs": ["--reasoning-parser-plugin=/m/p.py"]}, "spec.extraArgs[0]", "--reasoning-parser-plugin=/m/p.py"),
        ({"extraArgs": ["--config", "/model-source/flags.yaml"]}, "spec.extraArgs[0]", "--config"),
        ({"extraArgs": ["--load-format", "tensorizer", "--model-loader-extra-config", '{"tensorizer_uri": "s3://e/m"}']},
         "spec.extraArgs[2]", "--model-loader-extra-config"),
        ({"extraArgs": ["--rpc", "evil.example:50052"]}, "spec.extraArgs[0]", "--rpc"),
        ({"env": [{"name": "LLAMA_ARG_RPC", "value": "evil.example:50052"}]}, "spec.env[0]", "LLAMA_ARG_RPC"),
        # red team 2: the kubelet expands $(NAME) in args from the container's env, so a weight flag can
        # be assembled from spec.env ("--model /tmp/m -mu https://..."), or come from a Secret
        ({"extraArgs": ["$(A)", "/tmp/m.gguf"], "env": [{"name": "A", "value": "--model"}]},
         "spec.extraArgs[0]", "$(A)"),
        ({"extraArgs": ["--lo$(X)=/l.gguf"], "env": [{"name": "X", "value": "ra"}]},
         "spec.extraArgs[0]", "--lo$(X)=/l.gguf"),
        ({"extraArgs": ["$(A)", "org/evil"], "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
         "spec.extraArgs[0]", "$(A)"),
        ({"args": ["--$(UNSET)"]}, "spec.args[0]", "--$(UNSET)"),
    ],
)  # fmt: skip
def test_each_way_weights_arrive_without_a_model(spec: dict[str, Any], field: str, value: str) -> None:
    found = inference_service_weights(isvc(**spec), "ml")
    assert [(p.field, p.value) for p in found.paths] == [(field, value)]
    assert found.malformed == () and [m.name for m in found.models] == ["llama"]


@pytest.mark.parametrize(
    "spec",
    [
        {
            "extraVolumes": [
                {"name": "scratch", "emptyDir": {}},
                {"name": "info", "downwardAPI": {"items": []}},
            ]
        },
        {"extraArgs": ["--seed", "42", "--log-disable", "--ctx-size", "8192"]},
        {"extraArgs": ["--tokenizer-mode", "auto", "--trust-remote-code"]},
        {
            "extraArgs": ["--api-key=$(KEY)", "--alias", "$$(literal)"],
            "env": [{"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
        },
        {"extraArgs": ["--ctx-size", "$(CTX)"], "env": [{"name": "CTX", "value": "8192"}]},
        {"env": [{"name": "HF_HUB_OFFLINE", "value": "1"}]},
        {"runtime": "vllm"},
        {"runtime": "sglang", "sglangConfig": {"toolCallParser": "qwen3"}},
        {"skipModelInit": False},
        {"modelCache": {"persistence": "Ephemeral"}},
    ],
)
def test_what_brings_no_weights_is_not_counted(spec: dict[str, Any]) -> None:
    assert inference_service_weights(isvc(**spec), "ml").paths == ()


@pytest.mark.parametrize(
    ("obj", "text"),
    [
        ({"spec": {}}, "spec.modelRef names no Model"),
        ({"spec": {"modelRef": ""}}, "spec.modelRef names no Model"),
        ({"spec": {"modelRef": 7}}, "spec.modelRef is not a string"),
        ({"spec": {"modelRef": ["good"]}}, "spec.modelRef is not a string"),
        ({"spec": {"modelRef": "other-ns/llama"}}, "'other-ns/llama' is not a Model name"),
        ({"spec": {"modelRef": "../kube-system/x"}}, "is not a Model name"),
        ({"spec": {"modelRef": "Llama"}}, "is not a Model name"),
        ({"spec": {"modelRef": "m", "speculativeDecoding": "draft"}}, "spec.speculativeDecoding is not an object"),
        ({"spec": {"modelRef": "m", "speculativeDecoding": {"draftModelRef": {"name": "d", "namespace": "x"}}}},
         "spec.speculativeDecoding.draftModelRef is not a string"),
        ({"spec": {"modelRef": "m", "speculativeDecoding": {"draftModelRef": "prod/draft"}}}, "is not a Model name"),
        ({"spec": {"modelRef": "m", "sglangConfig": {"loraAdapters": {"a": "/a"}}}},
         "spec.sglangConfig.loraAdapters is not a list"),
        ({"spec": {"modelRef": "m", "sglangConfig": {"loraAdapters": ["/a"]}}},
         "spec.sglangConfig.loraAdapters[0] is not an object"),
        ({"spec": {"modelRef": "m", "sglangConfig": {"loraModules": [["a", "/a"]]}}},
         "spec.sglangConfig.loraModules[0] is not a string"),
        ({"spec": {"modelRef": "m", "extraArgs": ["--seed", 42]}}, "spec.extraArgs[1] is not a string"),
        ({"spec": {"modelRef": "m", "extraArgs": ["-v"] * (MAX_ITEMS + 1)}}, "over the gate's limit"),
        ({"spec": {"modelRef": "m", "skipModelInit": "yes"}}, "spec.skipModelInit is not a boolean"),
        ({"spec": {"modelRef": "m", "env": [{"name": 5}]}}, "spec.env[0].name is not a string"),
        ({"spec": "x"}, "spec is not an object"),
        ("an InferenceService", "the InferenceService is not an object"),
    ],
)  # fmt: skip
def test_a_malformed_field_is_reported_not_raised(obj: Any, text: str) -> None:
    found = inference_service_weights(obj, "ml")
    assert any(text in m for m in found.malformed), found.malformed


def test_hostile_values_are_escaped_and_cut() -> None:
    found = inference_service_weights(
        isvc(sglangConfig={"loraModules": ["a=\x1b[2K/evil\r" + "x" * 500]}), "ml"
    )
    [path] = found.paths
    assert path.value.isprintable() and "\\x1b[2K" in path.value and len(path.value) <= 120


def test_a_lora_adapter_brings_its_path_even_into_another_namespace() -> None:
    adapter = {"apiVersion": "inference.llmkube.dev/v1alpha1", "kind": "LoRAAdapter",
               "metadata": {"name": "sql", "namespace": "team-a"},
               "spec": {"inferenceServiceRef": {"name": "chat", "namespace": "ml"}, "name": "sql",
                        "path": "/adapters/sql"}}  # fmt: skip
    found = lora_adapter_weights(adapter, "team-a")
    assert found.paths == (
        WeightPath("spec.path", "/adapters/sql", "a LoRA adapter loaded into InferenceService ml/chat"),
    )
    assert lora_adapter_weights({"spec": {"inferenceServiceRef": {"name": "chat"}}}, "team-a").malformed == (
        "spec.path names no adapter",
    )
    assert lora_adapter_weights({"spec": {"path": 3}}, "ml").malformed == ("spec.path is not a string",)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
fields = st.sampled_from(["modelRef", "speculativeDecoding", "vllmConfig", "sglangConfig", "extraVolumes",
                          "modelCache", "runtime", "skipModelInit", "command", "extraArgs", "args", "env"])  # fmt: skip


@settings(max_examples=120, deadline=None)
@given(st.dictionaries(fields, json_values, max_size=6), json_values)
def test_any_json_never_raises(spec: dict[str, Any], anything: Any) -> None:
    for obj in (
        {"spec": spec},
        anything,
        {"spec": {"sglangConfig": spec, "vllmConfig": {"speculative": spec}}},
    ):
        found = inference_service_weights(obj, "ml")
        assert isinstance(found, ServedWeights)
        assert all(isinstance(m.name, str) for m in found.models)
        lora_adapter_weights(obj, "ml")
