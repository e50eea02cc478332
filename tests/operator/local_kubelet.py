"""A stand-in for the Job controller and the kubelet: runs a Job's containers as local processes.

The containers run exactly as the Job says (``python -m modelseal`` for the
container image, whose entrypoint is ``modelseal``), with the container paths
mapped to folders; their exit codes and termination messages are reported
through the API as a pod and the Job's status. Used by the end-to-end tests
and by ``scripts/operator_demo.py``.
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.operator.cluster import Cluster

__all__ = ["JOBS", "LocalKubelet"]

JOBS = "/apis/batch/v1/namespaces/default/jobs"


class LocalKubelet:
    """Runs a Job's containers as local processes and reports them through the API."""

    def __init__(self, cluster: Cluster, root: Path) -> None:
        self.cluster, self.root = cluster, root
        self.namespace = cluster.namespace

    def _mapped(self, args: list[str]) -> list[str]:
        paths = {"/staging": self.root / "staging", "/docker-config": self.root / "docker-config",
                 "/dev/termination-log": self.root / "termination-log"}  # fmt: skip
        out = []
        for arg in args:  # a path alone, or as --flag=path
            flag, eq, value = arg.rpartition("=") if arg.startswith("--") else ("", "", arg)
            out.append(f"{flag}{eq}{paths.get(value, value)}")
        return out

    async def _secret(self, name: str) -> dict[str, Any]:
        r = await self.cluster.client.get(f"/api/v1/namespaces/{self.namespace}/secrets/{name}")
        assert r.status_code == 200, r.text
        secret: dict[str, Any] = r.json()
        return secret

    async def _env(self, container: dict[str, Any]) -> dict[str, str]:
        """A container's ``env``: values, and ``secretKeyRef``s read from the Secret as the kubelet does."""
        out = {}
        for entry in container.get("env") or []:
            ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
            if ref is None:
                out[entry["name"]] = entry.get("value", "")
                continue
            data = (await self._secret(ref["name"])).get("data") or {}
            if ref["key"] in data:
                out[entry["name"]] = base64.b64decode(data[ref["key"]]).decode()
            else:
                assert ref.get("optional"), (
                    f"secret {ref['name']} has no key {ref['key']}: the pod would not start"
                )
        return out

    async def run(self, job: dict[str, Any]) -> dict[str, tuple[int, str]]:
        await self.cluster.patch(f"{JOBS}/{job['metadata']['name']}/status", {"status": {"active": 1}})
        results = await self.run_containers(job["spec"]["template"]["spec"])
        await self._report(job, results)
        return results

    async def run_containers(self, pod: dict[str, Any]) -> dict[str, tuple[int, str]]:
        """Run a publication pod's init container, then its container; (exit code, message) of each run."""
        volumes = {v["name"]: v for v in pod["volumes"]}
        config = await self._secret(volumes["docker-config"]["secret"]["secretName"])
        (self.root / "docker-config").mkdir(parents=True)
        (self.root / "docker-config" / "config.json").write_bytes(
            base64.b64decode(config["data"][".dockerconfigjson"])
        )
        (self.root / "termination-log").write_bytes(b"")
        results: dict[str, tuple[int, str]] = {}
        for container in [*pod["initContainers"], *pod["containers"]]:
            env = {**os.environ, "NO_COLOR": "1", **await self._env(container)}
            done = await asyncio.to_thread(
                subprocess.run, [sys.executable, "-m", "modelseal", *self._mapped(container["args"])],
                capture_output=True, text=True, timeout=120, env=env,
            )  # fmt: skip
            message = (self.root / "termination-log").read_text() if container["name"] == "publisher" else ""
            if done.returncode != 0 and not message:  # terminationMessagePolicy: FallbackToLogsOnError
                message = done.stderr[-2048:]
            results[container["name"]] = (done.returncode, message)
            if done.returncode != 0:
                break
        return results

    async def _report(self, job: dict[str, Any], results: dict[str, tuple[int, str]]) -> None:
        meta = job["metadata"]
        statuses = [
            {"name": n, "state": {"terminated": {"exitCode": c, "message": m}}}
            for n, (c, m) in results.items()
        ]
        await self.cluster.create("/api/v1/namespaces/default/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{meta['name']}-abcde", "namespace": "default", "labels": {"job-name": meta["name"]},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                                              "uid": meta["uid"], "controller": True}]},
            "spec": job["spec"]["template"]["spec"],  # as the Job controller makes its pods
            "status": {"initContainerStatuses": statuses[:1], "containerStatuses": statuses[1:]},
        })  # fmt: skip
        ok = all(code == 0 for code, _ in results.values()) and len(results) == 2
        state = "Complete" if ok else "Failed"
        await self.cluster.patch(f"{JOBS}/{meta['name']}/status", {"status": {
            "active": 0, "succeeded" if ok else "failed": 1, "conditions": [{"type": state, "status": "True"}]}})  # fmt: skip
