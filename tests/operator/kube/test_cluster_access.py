"""``operator run`` without a cluster: one line saying where it looked, exit 3, kopf never started."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from modelseal.errors import KubeError
from modelseal.operator.kube import cluster_access
from modelseal.operator.kube.cluster_access import find_cluster
from tests.cli.conftest import Run


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No service account, no KUBECONFIG, an empty home."""
    monkeypatch.setattr(cluster_access, "SERVICE_ACCOUNT_TOKEN", tmp_path / "no-token")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def _never_started(monkeypatch: pytest.MonkeyPatch) -> None:
    import kopf

    def operator(**_: object) -> None:
        raise AssertionError("kopf was started")

    monkeypatch.setattr(kopf, "operator", operator)


def test_no_cluster_is_one_line_naming_where_it_looked(
    cli: Run, nowhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _never_started(monkeypatch)
    r = cli("operator", "run", "--metrics-port=0", "--liveness=", "--readiness=")
    assert r.code == 3
    [line] = r.err.splitlines()
    assert line.startswith("error: no Kubernetes cluster to talk to: ")
    for place in ("in-cluster service account", "$KUBECONFIG (unset)", str(nowhere / ".kube" / "config")):
        assert place in line
    assert "set KUBECONFIG" in line


def test_a_kubeconfig_that_does_not_exist_is_named(
    cli: Run, nowhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _never_started(monkeypatch)
    monkeypatch.setenv("KUBECONFIG", "/nonexistent")
    r = cli("operator", "run", "--metrics-port=0", "--liveness=", "--readiness=")
    assert r.code == 3
    assert r.err.splitlines() == [
        "error: $KUBECONFIG names /nonexistent, which does not exist; set KUBECONFIG to a kubeconfig file,"
        " or run the operator in a cluster (deploy/)"
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not: [yaml", "is not YAML"),
        ("- a list\n", "is not a YAML mapping"),
        ("apiVersion: v1\nclusters: []\n", "names no current-context"),
    ],
)
def test_a_kubeconfig_that_cannot_serve_is_refused(nowhere: Path, content: str, message: str) -> None:
    config = nowhere / "config"
    config.write_text(content)
    with pytest.raises(KubeError, match=message):
        find_cluster({"KUBECONFIG": str(config)})


def test_the_places_kopf_logs_in_from_are_found(nowhere: Path) -> None:
    (nowhere / ".kube").mkdir()
    (nowhere / ".kube" / "config").write_text("current-context: lab\n")
    assert find_cluster({}, home=nowhere) == f"the kubeconfig {nowhere / '.kube' / 'config'}"
    other = nowhere / "other"
    other.write_text("current-context: prod\n")
    assert find_cluster({"KUBECONFIG": str(other)}) == f"the kubeconfig {other}"
    token = nowhere / "token"
    token.write_text("t")
    assert "service account" in find_cluster({"KUBECONFIG": "/nonexistent"}, token=token)


def test_a_missing_operator_extra_is_an_environment_failure(
    cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "kopf", None)  # `import kopf` raises ImportError
    r = cli("operator", "run")
    assert r.code == 3
    [line] = r.err.splitlines()
    # modelseal is not on PyPI: the hint names this source tree, not 'modelseal[operator]' (issue 21, point 14)
    root = Path(__file__).resolve().parents[3]
    assert line == (
        f"error: the operator needs its extra (kopf is missing): pip install '{root}[operator]'"
        " (in a source tree: pip install '.[operator]')"
    )


def test_a_kubeconfig_pipe_is_left_for_kopf_and_a_directory_is_refused(nowhere: Path) -> None:
    import os

    fifo = nowhere / "fifo"
    os.mkfifo(fifo)  # reading it would hang: it is not read
    assert find_cluster({"KUBECONFIG": str(fifo)}) == f"the kubeconfig {fifo}"
    with pytest.raises(KubeError, match="cannot be read"):
        find_cluster({"KUBECONFIG": str(nowhere)})
