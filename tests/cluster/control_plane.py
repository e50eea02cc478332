"""The control planes the real-cluster suite runs against: $KUBECONFIG's, or ones of our own.

Two kinds, as users run modelseal: **beside LLMKube** (LLMKube's own CRDs and its controller
manager reconciling the same Models), and **modelseal alone** (the Model CRD of deploy/crd, the
standalone overlay, no LLMKube). Without ``KUBECONFIG`` the suite starts the first with
``scripts/cluster.sh up`` and the second, only when a test asks for it, with ``scripts/cluster.sh
up --without-llmkube`` (building the binaries first if this machine has none: that can take many
minutes, so the wait is bounded by :data:`BUILD_AND_START_SECONDS`, not by a test's timeout), and
stops them at the end. With ``KUBECONFIG``, that cluster must run LLMKube already; the tests of
modelseal alone use ``MODELSEAL_STANDALONE_KUBECONFIG`` (a cluster without LLMKube, where the suite
creates deploy/crd's Model CRD) or, without it, a control plane of their own.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster.kube import Credentials, read_kubeconfig

__all__ = ["CLUSTER", "ROOT", "STANDALONE", "ControlPlane", "start_control_plane"]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "cluster.sh"
#: a first build of Kubernetes and etcd on a busy two-core machine, then the start
BUILD_AND_START_SECONDS = 3 * 3600
#: per test, once the control plane is up (fixtures keep deadlines of their own)
TEST_SECONDS = 300
CLUSTER = [pytest.mark.cluster, pytest.mark.timeout(TEST_SECONDS, func_only=True)]
#: a test of modelseal alone: the control plane with deploy/crd's Model CRD and no LLMKube
STANDALONE = pytest.mark.standalone


@dataclass
class ControlPlane:
    """A running API server: its admin kubeconfig, and (our own only) the folder `up` wrote."""

    kubeconfig: Path
    folder: Path | None  # None: $KUBECONFIG's cluster, which the suite neither started nor stops
    llmkube: bool = True  # LLMKube's CRDs and controller manager run there; else deploy/crd alone

    @property
    def admin(self) -> Credentials:
        return read_kubeconfig(self.kubeconfig)

    @property
    def own(self) -> bool:
        return self.folder is not None

    def log(self, component: str) -> Path:
        assert self.folder is not None
        return self.folder / "logs" / f"{component}.log"

    def restart(self, component: str) -> None:
        """Stop and start one component of our own control plane, with the flags `up` gave it."""
        assert self.folder is not None, "only a control plane the suite started can be restarted"
        _run("restart", self.folder, component, timeout=300)

    def stop(self) -> None:
        if self.folder is not None:
            _run("down", self.folder, timeout=120)

    def pid(self, component: str) -> int:
        """The process id ``up`` recorded for a component of our own control plane."""
        assert self.folder is not None, "only a control plane the suite started has known processes"
        return int((self.folder / f"{component}.pid").read_text())


def _run(*args: object, timeout: float) -> str:
    log = None
    for arg in args:
        if isinstance(arg, Path):
            log = arg / "cluster.sh.log"
    assert log is not None
    with log.open("a") as out:
        done = subprocess.run(
            ["bash", str(SCRIPT), *map(str, args)], stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
            check=False,
        )  # fmt: skip
    if done.returncode != 0:
        raise AssertionError(
            f"scripts/cluster.sh {' '.join(map(str, args))} failed:\n{log.read_text()[-4000:]}"
        )
    return log.read_text()


def start_control_plane(folder: Path, *, llmkube: bool = True) -> ControlPlane:
    """Beside LLMKube: $KUBECONFIG's cluster when set, else ``scripts/cluster.sh up folder``.
    Alone: $MODELSEAL_STANDALONE_KUBECONFIG's, else ``scripts/cluster.sh up folder --without-llmkube``."""
    given = os.environ.get("KUBECONFIG" if llmkube else "MODELSEAL_STANDALONE_KUBECONFIG", "")
    if given:
        return ControlPlane(Path(given.split(os.pathsep)[0]), None, llmkube)
    folder.mkdir(parents=True, exist_ok=True)
    _run("up", folder, *([] if llmkube else ["--without-llmkube"]), timeout=BUILD_AND_START_SECONDS)
    return ControlPlane(folder / "kubeconfig", folder, llmkube)
