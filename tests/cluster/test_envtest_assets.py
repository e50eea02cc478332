"""scripts/cluster.sh and the envtest convention (issue 28, item 5).

``KUBEBUILDER_ASSETS`` naming a folder with ``etcd`` and ``kube-apiserver`` (controller-runtime's
``setup-envtest`` layout) is used as it is: those binaries run and none is built; a
``kube-controller-manager`` beside them runs too, and without one the script takes the one it
built before (it builds that one alone only when it has none). The folder here links to the
binaries scripts/test.sh built, so nothing is built by these tests either.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.cluster.control_plane import CLUSTER, SCRIPT

pytestmark = CLUSTER

K8S, ETCD = "v1.36.3", "v3.6.8"  # scripts/cluster.sh's pins
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager")


def built() -> Path:
    """The folder of the binaries ``scripts/cluster.sh build`` made (the test fails if it has not run)."""
    cache = os.environ.get("MODELSEAL_CLUSTER_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "modelseal" / "cluster"
    )
    folder = Path(cache) / f"kubernetes-{K8S}-etcd-{ETCD}" / "bin"
    missing = [c for c in COMPONENTS if not (folder / c).is_file()]
    if missing:
        pytest.fail(f"{folder} lacks {', '.join(missing)}: run bash scripts/cluster.sh build first")
    return folder


def assets(tmp_path: Path, components: tuple[str, ...]) -> Path:
    folder = tmp_path / "envtest" / "k8s" / "1.36.3-linux-amd64"
    folder.mkdir(parents=True)
    for name in components:
        (folder / name).symlink_to(built() / name)
    return folder


def script(*args: str, envtest: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBEBUILDER_ASSETS": str(envtest)}
    env.pop("KUBECONFIG", None)
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env,
                          timeout=240, check=False)  # fmt: skip


def builds(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The steps that built something (each build says so in a step of its own)."""
    return [line for line in done.stdout.splitlines() if re.search(r"\] (go build|building) ", line)]


def test_envtest_binaries_are_used_and_nothing_is_built(tmp_path: Path) -> None:
    envtest = assets(tmp_path, COMPONENTS)
    done = script("build", envtest=envtest)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"KUBEBUILDER_ASSETS: etcd and kube-apiserver from {envtest} (Kubernetes {K8S})" in done.stdout
    assert "kube-controller-manager from there too; nothing of the control plane is built" in done.stdout
    assert not builds(done)


def test_a_control_plane_runs_the_envtest_binaries(tmp_path: Path) -> None:
    envtest = assets(tmp_path, COMPONENTS)
    folder = tmp_path / "plane"
    done = script("up", str(folder), "--without-llmkube", envtest=envtest)
    try:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        for name in COMPONENTS:  # what `up` started, read from the process itself
            pid = int((folder / f"{name}.pid").read_text())
            assert os.readlink(f"/proc/{pid}/exe") == os.path.realpath(envtest / name)
            assert (folder / f"{name}.exe").read_text().strip() == os.path.realpath(envtest / name)
    finally:
        script("down", str(folder), envtest=envtest)
    assert not any((folder / f"{name}.pid").exists() for name in COMPONENTS)


def test_without_a_controller_manager_beside_them_the_one_built_before_runs(tmp_path: Path) -> None:
    envtest = assets(tmp_path, ("etcd", "kube-apiserver"))
    done = script("build", envtest=envtest)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"KUBEBUILDER_ASSETS: etcd and kube-apiserver from {envtest}" in done.stdout
    assert f"kube-controller-manager {K8S}: {built()} (cached; envtest's layout has none)" in done.stdout
    assert not builds(done)


def test_a_folder_without_kube_apiserver_is_not_taken_for_envtest(tmp_path: Path) -> None:
    envtest = assets(tmp_path, ("etcd",))
    done = script("build", envtest=envtest)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "KUBEBUILDER_ASSETS" not in done.stdout
    assert f"control plane: {built()} (cached" in done.stdout
