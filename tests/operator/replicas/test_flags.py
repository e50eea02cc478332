"""``--leader-elect``, ``--leader-elect-lease``, ``--leader-elect-identity`` and ``--readiness``: what
they accept, and one line with exit 2 for what they refuse (before any cluster is looked for)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from modelseal.errors import UsageError
from modelseal.operator.replicas.flags import DEFAULT_LEASE, Endpoint, ReplicaSettings
from tests.cli.conftest import Run

QUIET = ("--metrics-port", "0", "--liveness", "", "--readiness", "")


@pytest.fixture(autouse=True)
def _no_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("POD_NAME", raising=False)


def settings(*, leader_elect: bool = True, lease: str | None = None, identity: str | None = None,
             readiness: str = "", env: dict[str, str] | None = None) -> ReplicaSettings:  # fmt: skip
    return ReplicaSettings.from_flags(leader_elect=leader_elect, lease=lease, identity=identity,
                                      readiness=readiness, environ=env or {})  # fmt: skip


def test_defaults() -> None:
    alone = settings(leader_elect=False, readiness="http://0.0.0.0:8082/readyz")
    assert alone == ReplicaSettings(False, DEFAULT_LEASE, "", Endpoint("http://0.0.0.0:8082/readyz", "0.0.0.0",
                                                                       8082, "/readyz"))  # fmt: skip
    assert settings(env={"POD_NAME": "modelseal-operator-7d9c-x2x"}).identity == "modelseal-operator-7d9c-x2x"
    assert settings().identity == f"{socket.gethostname()}_{os.getpid()}"
    given = settings(lease="kube-system/mine", identity="me", env={"POD_NAME": "pod"})
    assert (given.lease, given.identity) == (("kube-system", "mine"), "me")


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (
            ["--leader-elect", "--leader-elect-identity", ""],
            "--leader-elect-identity '': give this replica's"
            " identity in the Lease, 1 to 253 printable characters without spaces (in a Pod: its name, POD_NAME)",
        ),
        (["--leader-elect", "--leader-elect-identity", "a b"], "--leader-elect-identity 'a b': give"),
        (
            ["--leader-elect", "--leader-elect-identity", "a\x1b[31m"],
            "--leader-elect-identity 'a\\\\x1b[31m': give",
        ),  # no escape reaches the terminal
        (["--leader-elect", "--leader-elect-identity", "x" * 254], "--leader-elect-identity 'xxxxxxxx"),
        (
            ["--leader-elect", "--leader-elect-lease", "nolease"],
            "--leader-elect-lease must be namespace/name (got 'nolease')",
        ),
        (
            ["--leader-elect", "--leader-elect-lease", "ns/Bad_Name"],
            "--leader-elect-lease Lease 'Bad_Name' is not a valid name",
        ),
        (["--leader-elect-lease", "ns/name"], "--leader-elect-lease needs --leader-elect"),
        (["--leader-elect-identity", "me"], "--leader-elect-identity needs --leader-elect"),
    ],
)
def test_refused_flags(cli: Run, flags: list[str], error: str) -> None:
    r = cli("operator", "run", *QUIET, *flags)
    assert r.code == 2
    (line,) = r.err.splitlines()
    assert line.startswith(f"error: {error}"), line


@pytest.mark.parametrize("url", ["https://0.0.0.0:8082/readyz", "http://0.0.0.0/readyz", "0.0.0.0:8082",
                                 "http://:8082/readyz", "http://0.0.0.0:99999/readyz",
                                 "http://0.0.0.0:8082/readyz?x=1"])  # fmt: skip
def test_a_readiness_url_that_is_not_http_host_port_path(cli: Run, url: str) -> None:
    r = cli("operator", "run", "--metrics-port", "0", "--liveness", "", "--readiness", url)
    assert r.code == 2
    assert r.err.splitlines() == [
        f"error: --readiness {url!r}: give http://HOST:PORT/PATH, as in http://0.0.0.0:8082/readyz, or '' to"
        " turn it off (modelseal operator run --help)"
    ]


def test_an_empty_pod_name_is_refused() -> None:
    with pytest.raises(UsageError, match=r"^POD_NAME '': give"):
        settings(env={"POD_NAME": ""})


def test_valid_flags_go_on_to_the_cluster(cli: Run, tmp_path: Path) -> None:
    r = cli("operator", "run", *QUIET, "--leader-elect", "--leader-elect-lease", "ns/lease",
            "--leader-elect-identity", "pod-a")  # fmt: skip
    assert r.code == 3
    assert r.err.startswith(f"error: $KUBECONFIG names {tmp_path / 'absent'}, which does not exist"), r.err
