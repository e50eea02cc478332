"""The world of the kubelet-played scenarios (tests/cluster/test_pod_binding*.py): one namespace
beside LLMKube v0.9.19, a loopback file server its Models' sources name, the operator with
deploy/'s webhooks, and :class:`~tests.cluster.kubelet.Kubelet` playing the node.

A one-file Model is downloaded over ``http://`` (``/m/chat.gguf``); a folder Model (``spec.files``)
from ``s3://`` (LLMKube v0.9.19 stages spec.files from Hugging Face or ``s3://`` only: an
``http(s)://`` folder is ``InvalidFileSet``), whose downloader signs each request to the endpoint
the Model's Secret names: the file server here, which ignores the signature. Attestations are
Socair reports of the served bytes, signed at test time by a key the operator trusts.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelseal.attest.signing.private_keys import generate_key
from modelseal.operator.decide.reference import ANNOTATION
from modelseal.operator.podverify.container import NAME
from tests.attest.helpers import file_report, folder_report
from tests.cluster.control_plane import ControlPlane
from tests.cluster.kube import Kube, eventually
from tests.cluster.kubelet import CURL, Kubelet, Ran, curl_image, verifier_image
from tests.cluster.llmkube import inference_service, services
from tests.cluster.models import Models, condition_is, enforce
from tests.cluster.overlays import Applied, kubectl
from tests.cluster.webhooks import CONFIGURATIONS, MUTATING, flags, register
from tests.publish.fileserver import FileServer, file_server

__all__ = ["BUCKET", "EVIL", "GENUINE", "IMAGE", "KEY", "S3_SOURCE", "SECOND", "SHARDS", "Bench", "Pod", "codes",
           "env", "one_file", "open_bench", "replace", "shards", "verifier"]  # fmt: skip

OURS = "modelseal.dev/AttestationVerified"
IMAGE = "registry.example/acme/modelseal:2.0.1"
KEY = generate_key()
GENUINE = b"weights: the attested bytes " * 64
EVIL = b"weights: an attacker's bytes" * 64  # the same size: only the digest tells them apart
SHARDS = {"model-00001-of-00002.gguf": b"shard one " * 50, "model-00002-of-00002.gguf": b"shard two " * 70}
SECOND = "model-00002-of-00002.gguf"
CLAIM = "llmkube-model-cache"
S3_SOURCE, BUCKET = "s3://models/repo", "/models/repo"
Pod = dict[str, Any]


@dataclass
class Bench:
    """One namespace beside LLMKube: the file server its Models' sources name, the operator and its
    webhooks, and the played kubelet."""

    admin: Kube
    plane: ControlPlane
    deployed: Applied
    namespace: str
    server: FileServer
    kubelet: Kubelet
    start_operator: Any
    folder: Path
    hook: str = ""

    async def start(self) -> None:
        """The operator (enforce, conditions, the verifier's image), and deploy/'s webhooks for it."""
        await Models(self.admin, self.namespace).trusted_keys(KEY.public_pem(), name="ci.pub")
        hook_flags, ca = flags(self.folder / "webhook")
        operator = await self.start_operator(
            enforce(self.namespace, "--model-status=conditions", f"--verifier-image={IMAGE}", *hook_flags)
        )
        self.hook = (await register(self.admin, self.deployed, self.namespace, operator, ca)).name

    async def s3_secret(self) -> None:
        """The Secret an ``s3://`` Model's downloader takes its credentials and endpoint from."""
        data = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
                "AWS_ENDPOINT_URL": self.server.url}  # fmt: skip
        await self.admin.create(f"/api/v1/namespaces/{self.namespace}/secrets",
                                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3"}, "stringData": data})  # fmt: skip

    async def model(self, name: str, envelope: bytes, *, admitted: bool = True, **spec: Any) -> None:
        """A Model naming ``envelope`` by the annotation (a ConfigMap of its own); wait for its verdict."""
        models = Models(self.admin, self.namespace)
        await models.attestation(f"{name}-attestation", envelope)
        body = models.body(self.namespace, name, spec)
        body["metadata"]["annotations"] = {ANNOTATION: f"{name}-attestation/attestation.dsse.json"}
        await models.create(models.models, body)
        await models.until(name, condition_is(OURS, "True" if admitted else "False"))

    async def serve(self, name: str, model: str, replicas: int = 1) -> list[Pod]:
        """An InferenceService; its Pods as LLMKube's Deployment and the ReplicaSet controller made them."""
        service = inference_service(self.namespace, name, model, replicas=replicas)
        await self.admin.create(services(self.namespace), service)
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        try:
            found = await eventually(lambda: self.admin.items(path, labelSelector=f"inference.llmkube.dev/service={name}"),
                                     lambda items: len(items) == replicas, timeout=90, what=f"{replicas} Pod(s) of {name}")  # fmt: skip
        except AssertionError as e:  # say why: the namespace's Events (FailedCreate, LLMKube's)
            events = await self.admin.items(f"/api/v1/namespaces/{self.namespace}/events")
            raise AssertionError(
                f"{e}; Events: {[(v['reason'], v['message'][:300]) for v in events]}"
            ) from None
        return sorted(found, key=lambda p: str(p["metadata"]["name"]))

    def cached(self, path: str) -> Path:
        """Where a path under the cache claim (mounted at /models) is on this machine."""
        assert path.startswith("/models/"), path
        return self.kubelet.claim(self.namespace, CLAIM) / path.removeprefix("/models/")

    async def run(self, pod: Pod, **after: Any) -> list[Ran]:
        """The Pod's init containers run (again), as the kubelet starts them; ``after``: by container name."""
        return await self.kubelet.start(
            self.admin, pod, after={k.replace("_", "-"): v for k, v in after.items()}
        )

    async def report(self, pod: Pod, ran: list[Ran]) -> str:
        """Write the Pod's status as the kubelet would; return what ``kubectl describe pod`` shows
        (its runs of blanks made one)."""
        await self.kubelet.report(self.admin, pod, ran)
        shown = kubectl(
            self.plane.kubeconfig, "describe", "pod", pod["metadata"]["name"], "-n", self.namespace
        )
        assert shown.returncode == 0, shown.stderr
        return " ".join(shown.stdout.split())


async def open_bench(
    admin: Kube, plane: ControlPlane, deployed: Applied, namespace: str, start_operator: Any, folder: Path
) -> AsyncIterator[Bench]:
    """The ``bench`` fixture (tests/cluster/conftest.py): the file server serves the genuine bytes;
    the webhook configurations a test registered are removed at the end."""
    files = {"/m/chat.gguf": GENUINE, **{f"{BUCKET}/{n}": d for n, d in SHARDS.items()}}
    with file_server(files=files) as server:
        kubelet = Kubelet(folder / "kubelet", {CURL: curl_image(), IMAGE: verifier_image()})
        found = Bench(admin, plane, deployed, namespace, server, kubelet, start_operator, folder)
        yield found
        if found.hook:
            await admin.delete(f"{CONFIGURATIONS}/{found.hook}")
            await admin.delete(f"{MUTATING}/{found.hook}")


def verifier(pod: Pod) -> dict[str, Any]:
    inits = pod["spec"]["initContainers"]
    assert [c["name"] for c in inits] == ["model-cache-prep", "model-downloader", NAME]
    found: dict[str, Any] = inits[-1]
    return found


def env(pod: Pod, name: str) -> str:
    downloader = pod["spec"]["initContainers"][1]
    return str(next(v["value"] for v in downloader["env"] if v["name"] == name))


def codes(ran: list[Ran]) -> dict[str, int]:
    return {r.name: r.code for r in ran}


def replace(path: Path, data: bytes | int) -> None:
    """Another writer of the claim: a new file (these bytes, or a sparse one of this size) renamed over ``path``."""
    new = path.with_name(path.name + ".new")
    with new.open("wb") as f:
        if isinstance(data, int):
            f.truncate(data)
        else:
            f.write(data)
    new.rename(path)


async def one_file(bench: Bench, replicas: int = 1) -> list[Pod]:
    await bench.start()
    source = f"{bench.server.url}/m/chat.gguf"
    await bench.model("chat", file_report(KEY, "chat.gguf", GENUINE), source=source,
                      sha256=hashlib.sha256(GENUINE).hexdigest())  # fmt: skip
    return await bench.serve("chat", "chat", replicas)


async def shards(bench: Bench, replicas: int = 1) -> list[Pod]:
    await bench.start()
    await bench.s3_secret()
    await bench.model("shards", folder_report(KEY, SHARDS), source=S3_SOURCE, sourceSecretRef={"name": "s3"},
                      files=sorted(SHARDS))  # fmt: skip
    return await bench.serve("shards", "shards", replicas)
