"""The in-Pod binding proven beside LLMKube v0.9.19's own controller, the kubelet played (issue 29,
item 4): Models of one file, downloaded over http.

deploy/'s webhooks are registered for an operator out of cluster; LLMKube's InferenceService
controller writes the Deployment, the ReplicaSet controller makes its Pods, ``/mutate-pods`` adds
the verifier and ``/validate-pods`` admits them. Each Pod is read back from the API server as
admitted, and :class:`~tests.cluster.kubelet.Kubelet` runs its init containers in order, each with
its own command, env, mounts and security context, in a private mount namespace: LLMKube's
``model-cache-prep``, its ``model-downloader`` (this machine's ``sh`` and ``curl`` against a
loopback file server, which LLMKube's SSRF guard lets through: ``up`` passes
``--allowed-remote-hosts=127.0.0.1``), then ``modelseal-verify`` (the installed ``modelseal``). The
model cache claim is one folder per namespace, shared by the Pods there as the claim is. What the
kubelet would write goes through ``pods/status``, and ``kubectl describe pod`` shows it
(:mod:`tests.cluster.binding` holds the scenarios' world).

Before the verifier (main before a48c34f), every one of these Pods ran its runtime on whatever its
downloader left: the bytes at the URL, or the file in the cache, unchecked.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
from typing import Any

from modelseal.operator.podverify.container import NAME
from tests.cluster.binding import EVIL, GENUINE, IMAGE, Bench, codes, env, one_file, replace, verifier
from tests.cluster.control_plane import CLUSTER
from tests.cluster.overlays import kubectl

pytestmark = CLUSTER


async def test_genuine_bytes_pass_and_the_runtime_would_start(bench: Bench) -> None:
    """Before, the runtime loaded what curl fetched, whatever it was; now it starts after the check.
    A download broken off leaves ``$MODEL_PATH.tmp`` and stops the Pod at LLMKube's downloader; the
    next start removes it and fetches again. The Pod's init containers cannot be reordered
    afterwards: the API server refuses the update (Pods are immutable there)."""
    [pod] = await one_file(bench)
    path = env(pod, "MODEL_PATH")
    digest = hashlib.sha256(GENUINE).hexdigest()
    assert verifier(pod)["args"] == ["--expect", digest, path, "--size", str(len(GENUINE)), path]
    bench.server.cut_after["/m/chat.gguf"] = 100  # the first download breaks off: curl leaves its .tmp
    cut = await bench.run(pod)
    assert codes(cut) == {"model-cache-prep": 0, "model-downloader": 18}, cut  # curl: partial file
    assert bench.cached(path + ".tmp").stat().st_size == 100 and not bench.cached(path).exists()
    ran = await bench.run(pod)  # the kubelet starts the init containers again: the .tmp is removed first
    assert codes(ran) == {"model-cache-prep": 0, "model-downloader": 0, NAME: 0}, ran
    assert "Model downloaded successfully" in ran[1].log and not bench.cached(path + ".tmp").exists()
    assert ran[2].log.startswith(f"verified 1 file(s), {len(GENUINE)} bytes, in ")
    assert bench.cached(path).read_bytes() == GENUINE
    shown = await bench.report(pod, ran)
    assert (
        "Initialized True" in shown and shown.count("State: Terminated Reason: Completed Exit Code: 0") == 3
    )
    assert "llama-server: Container ID: Image: ghcr.io/ggml-org/llama.cpp:server" in shown
    assert "State: Waiting Reason: ContainerCreating" in shown, shown
    where = f"/api/v1/namespaces/{bench.namespace}/pods/{pod['metadata']['name']}"
    inits = pod["spec"]["initContainers"]
    moved = {"spec": {"initContainers": [inits[-1], *inits[:-1]]}}
    r = await bench.admin.request(
        "PATCH", where, json=moved, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert r.status_code == 422 and "pod updates may not change fields" in r.text, r.text


async def test_bytes_swapped_at_the_url_stop_the_pod_naming_the_file(bench: Bench) -> None:
    """Before: curl fetched the attacker's bytes into the cache and llama.cpp loaded them."""
    bench.server.files["/m/chat.gguf"] = EVIL
    [pod] = await one_file(bench)
    ran = await bench.run(pod)
    assert codes(ran) == {"model-cache-prep": 0, "model-downloader": 0, NAME: 1}, ran
    path, evil = env(pod, "MODEL_PATH"), hashlib.sha256(EVIL).hexdigest()
    said = f"error: {path}: digest mismatch: expected {hashlib.sha256(GENUINE).hexdigest()}, found {evil}"
    assert ran[2].message == said + "\n"
    shown = await bench.report(pod, ran)
    assert f"{NAME}: Container ID: Image: {IMAGE}" in shown, shown
    assert f"State: Terminated Reason: Error Message: {said} Exit Code: 1" in shown, shown
    assert "Initialized False" in shown
    got = kubectl(bench.plane.kubeconfig, "get", "pod", pod["metadata"]["name"], "-n", bench.namespace)
    assert "Init:Error" in got.stdout, got.stdout


async def test_a_file_swapped_in_the_shared_cache_is_refused_and_a_huge_sparse_one_at_once(
    bench: Bench,
) -> None:
    """Two replicas share the namespace's cache claim. Before: the second Pod's downloader found the
    file cached and the runtime loaded whatever another writer had put there. A tebibyte of holes
    would be hashed for hours without the attested size (the played container's 60 s end fails it
    then); with it, the verifier refuses at once."""
    first, second = await one_file(bench, replicas=2)
    assert codes(await bench.run(first))[NAME] == 0
    path = env(second, "MODEL_PATH")
    replace(bench.cached(path), EVIL)
    ran = await bench.run(second)
    assert "Model already cached, skipping download" in ran[1].log
    assert codes(ran)[NAME] == 1 and ran[2].message.startswith(f"error: {path}: digest mismatch"), ran
    replace(bench.cached(path), 1 << 40)
    again = await bench.run(second)  # the kubelet starts the init containers again
    said = f"error: {path}: size is {1 << 40} bytes, expected {len(GENUINE)}"
    assert again[2].message == said + "\n", again
    shown = await bench.report(second, again)
    assert f"Message: {said} Exit Code: 1" in shown, shown


class _Racing(dict[str, bytes]):
    """The file server's files, where the model's URL holds its first two GETs until both have
    come (two downloads in flight at once), then answers the first with ``first`` and the second
    with ``second``."""

    def __init__(self, files: dict[str, bytes], path: str, first: bytes, second: bytes) -> None:
        super().__init__(files)
        self.path, self.answers, self.lock = path, [first, second], threading.Lock()
        self.barrier = threading.Barrier(2, timeout=20)

    def get(self, key: str, default: Any = None) -> Any:
        with self.lock:
            answer = self.answers.pop(0) if key == self.path and self.answers else None
        if answer is None:
            return super().get(key, default)
        with contextlib.suppress(threading.BrokenBarrierError):  # one download alone: all holds the same
            self.barrier.wait()
        return answer


async def test_a_second_pod_whose_downloader_races_the_first_never_runs_other_bytes(bench: Bench) -> None:
    """Two replicas start at once on an empty cache, their downloads in flight together, and the URL
    answers the second with other bytes of the same size. Both shells removed ``$MODEL_PATH.tmp``
    before either curl wrote, so both curls write one file; the first to finish moves it into
    place while the other may still write it, and that one's ``mv`` then fails. Whatever the
    interleaving, a verifier passes only while the file holds the attested bytes, and a Pod that
    stopped stops again on what the cache then holds (a mixed or wrong file stays until someone
    removes it). Before, each Pod's runtime loaded what the shared file held when it started."""
    first, second = await one_file(bench, replicas=2)
    path = env(first, "MODEL_PATH")
    bench.server.files = _Racing(bench.server.files, "/m/chat.gguf", GENUINE, EVIL)
    results = await asyncio.gather(bench.run(first), bench.run(second))
    held = bench.cached(path).read_bytes()
    for pod, ran in zip((first, second), results, strict=True):
        print(pod["metadata"]["name"], [(r.name, r.code, r.message.strip()) for r in ran])
        if codes(ran).get(NAME) == 0:
            assert held == GENUINE, "a verifier passed, and the cache holds other bytes"
        else:
            assert ran[-1].code != 0 and (
                ran[-1].name != NAME or ran[-1].message.startswith(f"error: {path}: ")
            )
        again = await bench.run(pod)  # the kubelet starts the init containers again
        print("again", [(r.name, r.code, r.message.strip()) for r in again])
        assert (codes(again).get(NAME) == 0) is (held == GENUINE), again
