"""What the verifier in the Pod costs the webhook: a serving Pod through /mutate-pods and /validate-pods,
against a Pod the webhook judges by its Model label alone (what it did before) as the baseline.

Run: .venv/bin/python -m benchmarks.bench_pod_verifier [--requests N] [--models N] [--files N]

One operator webhook on loopback HTTPS, one keep-alive connection, AdmissionReviews one after
another. The serving Pod is LLMKube v0.9.19's shape (cache prep, downloader, llama.cpp given the
path on the cache claim) for a folder Model of ``--files`` files; the mutated one carries the
verifier, so /validate-pods places the files again and compares it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.bench_webhook import free_port, timed_reviews
from benchmarks.common import machine
from modelseal.attest.verdict import Mode
from modelseal.operator.admission.served_weights import inference_service_weights
from modelseal.operator.admission.verdicts import MODEL_LABEL, SERVICE_LABEL, ModelVerdict
from modelseal.operator.admission.webhook import make_self_signed, serve
from modelseal.operator.decide.loaded_files import LoadedFile, LoadedFiles
from modelseal.operator.settings import WebhookSettings


def serving_pod(files: int) -> dict[str, Any]:
    first = f"model-00001-of-{files:05d}.gguf"
    cache = {"name": "model-cache", "mountPath": "/models"}
    inits = [
        {
            "name": "model-cache-prep",
            "image": "curl",
            "command": ["sh", "-c", "chown"],
            "volumeMounts": [cache],
        },
        {
            "name": "model-downloader",
            "image": "curl",
            "command": ["sh", "-c", "curl"],
            "volumeMounts": [cache],
        },
    ]
    runtime = {
        "name": "llama-server",
        "image": "llama.cpp",
        "args": ["--model", f"/models/k/{first}", "--port", "8080"],
        "volumeMounts": [{**cache, "readOnly": True}],
    }
    volume = {"name": "model-cache", "persistentVolumeClaim": {"claimName": "c"}}
    spec = {"initContainers": inits, "containers": [runtime], "volumes": [volume]}
    return {"metadata": {"labels": {MODEL_LABEL: "m0", SERVICE_LABEL: "svc"}}, "spec": spec}


def review(pod: dict[str, Any]) -> dict[str, Any]:
    kind = {"group": "", "version": "v1", "kind": "Pod"}
    request = {"uid": "u", "kind": kind, "operation": "CREATE", "namespace": "ml", "object": pod}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


async def main(requests: int, models: int, files: int) -> None:
    folder = Path(tempfile.mkdtemp())
    cert, key = make_self_signed(["127.0.0.1"], folder)
    shards = [f"model-{i + 1:05d}-of-{files:05d}.gguf" for i in range(files)]
    loaded = LoadedFiles(
        tuple(LoadedFile(name, f"{i:064x}", f"spec.files[{i}]") for i, name in enumerate(shards)), folder=True
    )
    verdicts = {("ml", f"m{i}"): (1, ModelVerdict(1, True, "admitted", loaded=loaded)) for i in range(models)}
    service = inference_service_weights({"spec": {"modelRef": "m0"}}, "ml")
    port = free_port()
    settings = WebhookSettings("127.0.0.1", port, str(cert), str(key))
    task = asyncio.create_task(serve(settings, lambda: Mode.ENFORCE, lambda ns, n: verdicts.get((ns, n)),
                                     lambda ns, n: service if n == "svc" else None))  # fmt: skip
    base = f"https://127.0.0.1:{port}"
    pod = serving_pod(files)
    label_only = {"metadata": {"labels": {MODEL_LABEL: "m0"}}}
    baseline = await timed_reviews(f"{base}/validate-pods", cert, [review(label_only)] * requests)
    mutate = await timed_reviews(f"{base}/mutate-pods", cert, [review(pod)] * requests, keep=True)
    patch = json.loads(base64.b64decode(mutate.last["response"]["patch"]))
    pod["spec"]["initContainers"] = patch[0]["value"]
    validate = await timed_reviews(f"{base}/validate-pods", cert, [review(pod)] * requests, keep=True)
    assert validate.last["response"]["allowed"] is True, validate.last
    task.cancel()

    def line(name: str, times: list[float]) -> str:
        ms = sorted(t * 1000 for t in times)
        p99 = ms[int(len(ms) * 0.99) - 1]
        return f"{name:<46} p50 {statistics.median(ms):6.2f} ms   p99 {p99:6.2f} ms"

    print(machine())
    print(
        f"{requests} AdmissionReviews each, one keep-alive HTTPS connection, {models} Models, {files} files"
    )
    print(line("/validate-pods, model label only (baseline)", baseline.times))
    print(line("/mutate-pods, serving Pod", mutate.times))
    print(line("/validate-pods, serving Pod with its verifier", validate.times))
    for name, run in (("mutate", mutate), ("validate", validate)):
        print(f"ratio p50 {name}: {statistics.median(run.times) / statistics.median(baseline.times):.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--models", type=int, default=10000)
    parser.add_argument("--files", type=int, default=4)
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.models, args.files))
