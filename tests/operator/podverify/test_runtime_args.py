"""What a serving Pod's containers are told to load, read from their command lines as the kubelet runs them."""

from __future__ import annotations

from modelseal.operator.podverify.container import NAME
from modelseal.operator.podverify.runtime_args import beside_the_runtime, read_args, runtime_containers


def test_vllm_serves_the_positional_path_and_each_weight_flag_is_sorted() -> None:
    args = read_args({"name": "vllm", "command": ["vllm", "serve"], "env": [{"name": "D", "value": "/m/d.gguf"}],
                      "args": ["/m/main", "--model-draft=$(D)", "--mmproj", "/m/p.gguf", "--lora", "/x/a",
                               "--trust-remote-code"]})  # fmt: skip
    assert (args.model, args.draft, args.mmproj) == (["/m/main"], ["/m/d.gguf"], ["/m/p.gguf"])
    assert args.remote_code and args.unreadable is None and not args.hidden
    assert args.other == ["--lora '/x/a' (a LoRA adapter)"]


def test_a_command_it_cannot_read_and_a_value_it_cannot_see_are_reported() -> None:
    shell = read_args({"name": "s", "command": ["sh", "-c"], "args": ["llama-server -m /m/x.gguf"]})
    assert shell.unreadable == "runs 'sh -c', not a runtime whose arguments modelseal reads"
    hidden = read_args({"name": "h", "args": ["--model", "/m/x.gguf", "$(FROM_SECRET)"],
                        "env": [{"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]})  # fmt: skip
    assert hidden.model == ["/m/x.gguf"] and hidden.hidden == ["$(FROM_SECRET)"]


def test_native_sidecars_run_beside_the_runtime_and_the_verifier_does_not() -> None:
    spec = {"containers": [{"name": "runtime"}],
            "initContainers": [{"name": "once"}, {"name": "side", "restartPolicy": "Always"},
                               {"name": NAME, "restartPolicy": "Always"}]}  # fmt: skip
    assert [c["name"] for c in runtime_containers(spec)] == ["runtime", "side"]


def test_what_a_container_brings_besides_its_arguments_is_listed_in_order() -> None:
    found = beside_the_runtime({"env": [{"name": "LD_PRELOAD", "value": "/m/x.so"}], "workingDir": "/m",
                                "envFrom": [{"configMapRef": {"name": "c"}}],
                                "lifecycle": {"postStart": {"exec": {"command": ["true"]}}},
                                "readinessProbe": {"exec": {"command": ["true"]}}}, "'c'")  # fmt: skip
    assert [line.split(" ", 3)[2] for line in found] == ["sets", "runs", "takes", "runs", "runs"]
    assert found[0].startswith("container 'c' sets LD_PRELOAD: ")
    assert "(lifecycle.postStart.exec)" in found[3] and "(readinessProbe.exec)" in found[4]
