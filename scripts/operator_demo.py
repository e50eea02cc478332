#!/usr/bin/env python3
"""The operator on a laptop: LLMKube Models gated against an emulated API server (kmock).

Starts the API emulator the tests use, the operator in enforce mode, and shows
three Models: one admitted, one refused and then healed by fixing its
ConfigMap, and a key rotation that refuses every Model. No cluster is needed.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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

from modelseal.attest.private_keys import generate_key
from modelseal.operator.settings import GROUP, PLURAL, VERSION


async def show(cluster: Cluster, names: list[str]) -> None:
    for name in names:
        model = await cluster.model(name)
        status = model.get("status") or {}
        verified: dict[str, Any] = next(
            (c for c in status.get("conditions", []) if c["type"] == "AttestationVerified"), {}
        )
        reason, message = verified.get("reason", "-"), verified.get("message", "")
        print(f"  {name:<9} {status.get('phase', '-'):<7} {reason:<25} {message}")


async def main() -> None:
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
        async with running_operator(emulator, ENFORCE, tick=0.2):
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
            events = await cluster.events()
            first = events[0]
            example = f"{first['type']} {first['reason']}: {first['message']}"
            print(f"\n{len(events)} Events posted, for example: {example}")
        await cluster.client.aclose()


if __name__ == "__main__":
    asyncio.run(main())
