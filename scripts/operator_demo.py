#!/usr/bin/env python3
"""The operator on a laptop: LLMKube Models gated against an emulated API server (kmock).

Starts the API emulator the tests use, the operator in enforce mode, and shows
three Models: one admitted, one refused and then healed by fixing its
ConfigMap, and a key rotation that refuses every Model. With ``--registry
HOST:PORT`` (a plain-HTTP registry, as the demo starts on loopback) it also
publishes a Model's files with ``prefetchOCI``: the Job the operator creates
runs here as local processes, downloading from a loopback HTTP server and
pushing to the registry, and a second Model consumes the published image
through ``oci://``. No cluster is needed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import importlib.util
import logging
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _reexec_in_venv() -> None:
    """Run again with the project's venv (made by scripts/setup.sh) when started with another Python.

    The demo uses the test helpers (kmock, the emulator), which only the venv has.
    """
    if importlib.util.find_spec("kmock") is not None:
        return
    venv = Path(os.environ.get("MODELSEAL_VENV") or Path(__file__).resolve().parent.parent / ".venv")
    python = venv / "bin" / "python"
    if python.exists() and Path(sys.prefix).resolve() != venv.resolve():
        os.execv(python, [str(python), __file__, *sys.argv[1:]])  # noqa: S606 - our own venv's Python
    sys.exit(
        "operator_demo.py needs the development venv: run `bash -c 'source scripts/setup.sh'`"
        " once, then `.venv/bin/python scripts/operator_demo.py`"
    )


_reexec_in_venv()

import kmock
from tests.operator.cluster import (
    ENFORCE,
    OPERATOR_PUB,
    Cluster,
    kmock_resource,
    phase,
    running_operator,
    socair_envelope,
)
from tests.operator.emulator import RealisticEmulator
from tests.operator.local_kubelet import LocalKubelet
from tests.publish.fileserver import file_server

from modelseal.attest.signing.private_keys import generate_key
from modelseal.operator.settings import GROUP, PLURAL, VERSION
from modelseal.operator.sources.source_image import RegistryAccess

TESTDATA = Path(__file__).resolve().parent.parent / "testdata"


async def show(cluster: Cluster, names: list[str]) -> None:
    for name in names:
        model = await cluster.model(name)
        status = model.get("status") or {}
        verified: dict[str, Any] = next(
            (c for c in status.get("conditions", []) if c["type"] == "AttestationVerified"), {}
        )
        reason, message = verified.get("reason", "-"), verified.get("message", "")
        print(f"  {name:<9} {status.get('phase', '-'):<7} {reason:<25} {message}")


async def publication_demo(cluster: Cluster, registry: str) -> None:
    """Step 4: prefetchOCI publishes the sample model; a consumer Model checks the image."""
    weights = (TESTDATA / "sample-model" / "model.safetensors").read_bytes()
    await cluster.patch(
        f"{cluster.configmaps}/socair-trusted-keys",
        {"data": {"ci.pub": (TESTDATA / "keys" / "ed25519.pub").read_text()}},
    )
    await cluster.attestation("sample-attestation", (TESTDATA / "reports" / "sample.dsse.json").read_bytes())
    await cluster.create(
        "/api/v1/namespaces/default/secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": "registry-push", "namespace": "default"},
            "data": {".dockerconfigjson": base64.b64encode(b'{"auths": {}}').decode()},
        },
    )
    attested = {
        "sha256": hashlib.sha256(weights).hexdigest(),
        "attestation": {"configMapKeyRef": {"name": "sample-attestation", "key": "attestation.dsse.json"}},
    }
    with (
        file_server(files={"/sample/model.safetensors": weights}) as server,
        tempfile.TemporaryDirectory() as root,
    ):
        await cluster.create(
            cluster.models,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "Model",
                "metadata": {"name": "sample", "namespace": "default"},
                "spec": {
                    **attested,
                    "source": f"{server.url}/sample/model.safetensors",
                    "prefetchOCI": {
                        "image": f"{registry}/models/sample:v1",
                        "ephemeralStorage": "1Gi",
                        "pushSecretRef": {"name": "registry-push"},
                    },
                },
            },
        )
        model = await cluster.wait("sample", lambda m: bool((m.get("status") or {}).get("prefetchOCI")))
        job_name = model["status"]["prefetchOCI"]["jobName"]
        print(f"  sample    {model['status']['phase']:<11} Job {job_name} created")
        job = (await cluster.client.get(f"/apis/batch/v1/namespaces/default/jobs/{job_name}")).json()
        results = await LocalKubelet(cluster, Path(root)).run(job)
        print(
            "  the Job's containers ran here:", ", ".join(f"{n} exited {c}" for n, (c, _) in results.items())
        )
        model = await cluster.wait("sample", phase("Ready"))
    published = model["status"]["prefetchOCI"]
    print(
        f"  sample    {model['status']['phase']:<11} prefetchOCI {published['phase']}: {published['image']}"
    )
    await cluster.create(
        cluster.models,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Model",
            "metadata": {"name": "served", "namespace": "default"},
            "spec": {**attested, "source": published["image"]},
        },
    )
    served = await cluster.wait("served", phase("Ready"))
    check = next(c for c in served["status"]["conditions"] if c["type"] == "SourceImageVerified")
    print(f"  served    {served['status']['phase']:<11} {check['reason']}: {check['message']}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--registry", metavar="HOST:PORT", help="a plain-HTTP registry for the prefetchOCI step"
    )
    args = parser.parse_args()
    logging.getLogger("kopf").setLevel(logging.ERROR)  # its shutdown notes are not the demo's
    async with RealisticEmulator() as emulator, kmock.Server(emulator):
        emulator.resources.load_bundled()
        emulator.resources[f"{GROUP}/{VERSION}/{PLURAL}"] = kmock_resource()
        cluster = Cluster(str(emulator.url))
        await cluster.trusted_keys(OPERATOR_PUB)
        await cluster.attestation("qwen-attestation", socair_envelope("authorized"))
        await cluster.attestation("llama-attestation", socair_envelope("withheld"))
        print(
            "operator: --model-attestation=enforce",
            "--model-attestation-trusted-keys=default/socair-trusted-keys",
        )
        settings = ENFORCE
        if args.registry:
            access = RegistryAccess(plain_http=frozenset({args.registry}))
            # the demo's file server speaks plain HTTP on 127.0.0.1: the lab case the flag is for
            settings = replace(ENFORCE, publisher_image="modelseal:0.1.0", registry_access=access,
                               allow_plain_http_sources=True)  # fmt: skip
        async with running_operator(emulator, settings, tick=0.2):
            await cluster.new_model("qwen", attestation="qwen-attestation")
            await cluster.new_model("llama", attestation="llama-attestation")
            await cluster.new_model("unsigned")
            for name, wanted in (("qwen", "Ready"), ("llama", "Failed"), ("unsigned", "Failed")):
                await cluster.wait(name, phase(wanted))
            print("\n1. three Models: an authorized attestation, a withheld one, none")
            await show(cluster, ["qwen", "llama", "unsigned"])
            print("\n2. the intake team re-signs llama's report as authorized; only its ConfigMap changes")
            authorized: Any = socair_envelope("authorized").decode()
            await cluster.patch(
                f"{cluster.configmaps}/llama-attestation", {"data": {"attestation.dsse.json": authorized}}
            )
            await cluster.wait("llama", phase("Ready"))
            await show(cluster, ["llama"])
            print("\n3. the signing key is rotated out of the trusted keys")
            await cluster.patch(
                f"{cluster.configmaps}/socair-trusted-keys",
                {"data": {"operator.pub": generate_key().public_pem()}},
            )
            await cluster.wait("qwen", phase("Failed"))
            await cluster.wait("llama", phase("Failed"))
            await show(cluster, ["qwen", "llama"])
            if args.registry:
                print(f"\n4. prefetchOCI publishes a Model's files to {args.registry} (its Job runs here)")
                await publication_demo(cluster, args.registry)
            events = await cluster.events()
            first = events[0]
            example = f"{first['type']} {first['reason']}: {first['message']}"
            print(f"\n{len(events)} Events posted, for example: {example}")
        await cluster.client.aclose()


if __name__ == "__main__":
    asyncio.run(main())
