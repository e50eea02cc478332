"""``modelseal operator run`` as a process of its own, out of cluster, as deploy/'s ServiceAccount.

The operator reads a kubeconfig holding a TokenRequest token of
``modelseal-system/modelseal-operator`` (the ServiceAccount deploy/ creates and binds), so every
call it makes is authorised by deploy/'s RBAC and nothing else. Its log goes to a file that a
failing test shows.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.cluster.control_plane import ControlPlane
from tests.cluster.kube import Credentials, Kube

__all__ = [
    "OPERATOR_ACCOUNT",
    "OPERATOR_USER",
    "OperatorProcess",
    "audit_records",
    "free_port",
    "service_account_token",
]

OPERATOR_ACCOUNT = ("modelseal-system", "modelseal-operator")
OPERATOR_USER = f"system:serviceaccount:{OPERATOR_ACCOUNT[0]}:{OPERATOR_ACCOUNT[1]}"
START_SECONDS = 90.0  # the interpreter and its imports, on a busy two-core machine


def audit_records(plane: ControlPlane) -> list[dict[str, Any]]:
    """The API server's audit records of the operator's account (scripts/cluster.sh logs those;
    with the bodies of its Model status writes)."""
    log = plane.log("audit")
    lines = log.read_text().splitlines() if log.exists() else []
    return [r for r in map(json.loads, lines) if r.get("user", {}).get("username") == OPERATOR_USER]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def service_account_token(admin: Kube, account: tuple[str, str] = OPERATOR_ACCOUNT) -> str:
    """A token for ``account`` from the TokenRequest API (what a projected volume would hold)."""
    namespace, name = account
    review = await admin.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    token: str = review["status"]["token"]
    return token


class OperatorProcess:
    """One ``modelseal operator run`` process; start, stop and start again with the same flags."""

    def __init__(
        self, credentials: Credentials, flags: list[str], folder: Path, *, source: Path | None = None
    ) -> None:
        """``flags`` may give ``--metrics-port`` (none by default); ``source``: run the ``modelseal``
        package of another checkout's ``src`` (a benchmark's baseline) instead of this one."""
        self.folder = folder
        self.source = source
        folder.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = credentials.kubeconfig(folder / "operator.kubeconfig")
        self.liveness, self.readiness = free_port(), free_port()
        # a baseline checkout from before readiness probes has no --readiness
        ready = [f"--readiness=http://127.0.0.1:{self.readiness}/readyz"] if source is None else []
        self.flags = [
            "--metrics-port=0",
            *flags,
            f"--liveness=http://127.0.0.1:{self.liveness}/healthz",
            *ready,
        ]
        self.log = folder / "operator.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def log_tail(self, size: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-size:] if self.log.exists() else "(no log)"

    async def start(self) -> None:
        """Start the process and wait until its liveness endpoint answers."""
        assert self.process is None, "already running"
        self.starts += 1
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "NO_COLOR": "1"}
        if self.source is not None:
            env["PYTHONPATH"] = str(self.source)
        with self.log.open("ab") as log:
            log.write(f"\n===== start {self.starts}\n".encode())
            self.process = subprocess.Popen(
                [sys.executable, "-m", "modelseal", "operator", "run", *self.flags],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )  # fmt: skip
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_SECONDS
        async with httpx.AsyncClient(timeout=2) as client:
            while True:
                if self.process.poll() is not None:
                    code = self.process.returncode
                    self.process = None
                    raise AssertionError(f"the operator exited with {code} at start:\n{self.log_tail()}")
                try:
                    if (await client.get(f"http://127.0.0.1:{self.liveness}/healthz")).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if loop.time() > deadline:
                    raise AssertionError(
                        f"the operator did not come up in {START_SECONDS}s:\n{self.log_tail()}"
                    )
                await asyncio.sleep(0.2)

    async def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stop the process (SIGTERM: kopf's orderly exit; SIGKILL: a crash); return its exit code."""
        process, self.process = self.process, None
        if process is None:
            return 0
        if process.poll() is None:
            process.send_signal(sig)
        try:
            await asyncio.to_thread(process.wait, 30)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait, 30)
        return process.returncode

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None
