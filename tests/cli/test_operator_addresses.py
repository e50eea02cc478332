"""``operator run`` with an address it would listen on taken: one line naming the flag, exit 3 (issue 31,
point 11).

Before, a second operator on one machine died at start with ``error: internal error (OSError); this is
a bug in modelseal`` (the metrics port), and a taken ``--admission-webhook`` address made kopf log
``OSError: [Errno 98] Address already in use`` tracebacks every 60 s without ever exiting. Each
address is now tried before the operator logs in or starts anything. The tests run before a cluster
is looked for: with no kubeconfig, a free address ends at the cluster check instead.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import Run


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port something listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


@pytest.fixture(autouse=True)
def _no_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))


QUIET = ("--metrics-port", "0", "--liveness", "", "--readiness", "")


def test_a_taken_metrics_port(cli: Run, taken: int) -> None:
    r = cli("operator", "run", "--metrics-port", taken, "--liveness", "", "--readiness", "")
    assert r.code == 3
    assert r.err.splitlines() == [
        f"error: --metrics-port {taken}: 0.0.0.0:{taken} is in use (another operator or server listens there);"
        " give another, or 0 to turn it off"
    ]


def test_a_taken_webhook_address(cli: Run, taken: int) -> None:
    r = cli("operator", "run", *QUIET, f"--admission-webhook=127.0.0.1:{taken}")
    assert r.code == 3
    assert r.err.splitlines() == [
        f"error: --admission-webhook 127.0.0.1:{taken}: 127.0.0.1:{taken} is in use (another operator or"
        " server listens there); give another"
    ]


def test_a_taken_liveness_address(cli: Run, taken: int) -> None:
    url = f"http://127.0.0.1:{taken}/healthz"
    r = cli("operator", "run", "--metrics-port", "0", "--liveness", url, "--readiness", "")
    assert r.code == 3
    assert r.err.splitlines() == [
        f"error: --liveness {url}: 127.0.0.1:{taken} is in use (another operator or server listens there);"
        " give another, or '' to turn it off"
    ]


def test_free_addresses_go_on_to_the_cluster(cli: Run, tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    r = cli("operator", "run", *QUIET, f"--admission-webhook=127.0.0.1:{free}")
    assert r.code == 3
    assert r.err.startswith(f"error: $KUBECONFIG names {tmp_path / 'absent'}, which does not exist"), r.err


def test_a_taken_readiness_address(cli: Run, taken: int) -> None:
    url = f"http://127.0.0.1:{taken}/readyz"
    r = cli("operator", "run", "--metrics-port", "0", "--liveness", "", "--readiness", url)
    assert r.code == 3
    assert r.err.splitlines() == [
        f"error: --readiness {url}: 127.0.0.1:{taken} is in use (another operator or server listens there);"
        " give another, or '' to turn it off"
    ]


def test_two_flags_on_one_port(cli: Run) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    url = f"http://127.0.0.1:{free}/readyz"
    r = cli("operator", "run", "--metrics-port", "0", "--liveness", f"http://127.0.0.1:{free}/healthz",
            "--readiness", url)  # fmt: skip
    assert r.code == 3
    assert r.err.splitlines() == [
        f"error: --readiness {url}: port {free} is also --liveness's; give another, or '' to turn it off"
    ]
