"""Shared fixtures: the committed test data, keys made usable, a fixed clock."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from modelseal.attest.dsse.keys import Keyring
from modelseal.attest.signing.private_keys import SigningKey, load_signing_key
from modelseal.cli import main
from tests.cli.conftest import Result, Run

# Properties are judged by their examples, not by wall time: on a loaded two-core machine a
# single draw can take a second (imports, a busy neighbour), which is not a failure.
settings.register_profile("modelseal", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("modelseal")

TESTDATA = Path(__file__).resolve().parent.parent / "testdata"
SOCAIR = TESTDATA / "socair"
#: The subject of the three real Socair fixtures.
FIXTURE_SHA256 = "2698a97669c07822cf69e98d3f6b7d0ad1018df83fb19aee8921e9b037aae80d"
FIXTURE_KEYID = "b4f69dad730db4cb338d58dc0f71bc734d48679e32d4303211ad77a1b8ae4ec7"
#: A day after the fixtures were issued (2026-10-03T02:50:10Z).
FIXTURE_NOW = datetime(2026, 10, 4, 2, 50, 10, tzinfo=UTC)


@pytest.fixture(scope="session")
def testdata() -> Path:
    assert TESTDATA.is_dir(), "testdata/ is missing"
    return TESTDATA


def socair_envelope(name: str) -> bytes:
    """The bytes of ``testdata/socair/<name>.dsse.json``."""
    return (SOCAIR / f"{name}.dsse.json").read_bytes()


@pytest.fixture(scope="session")
def operator_ring() -> Keyring:
    """The key that signed the real Socair fixtures."""
    return Keyring.from_path(SOCAIR / "operator.pub")


def private_key_copy(tmp_path: Path, name: str) -> Path:
    """A copy of ``testdata/keys/<name>.key`` with mode 0600 (git keeps no modes)."""
    dest = tmp_path / f"{name}.key"
    shutil.copyfile(TESTDATA / "keys" / f"{name}.key", dest)
    dest.chmod(0o600)
    shutil.copyfile(TESTDATA / "keys" / f"{name}.pub", tmp_path / f"{name}.pub")
    return dest


@pytest.fixture
def ed25519_key_file(tmp_path: Path) -> Path:
    return private_key_copy(tmp_path, "ed25519")


@pytest.fixture
def ed25519_key(ed25519_key_file: Path) -> SigningKey:
    """The fixed Ed25519 test key (issuer ``modelseal testdata``)."""
    return load_signing_key(ed25519_key_file)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Run:
    """Run ``modelseal`` in-process; returns its exit code and output, and asserts no traceback."""

    def run(*argv: object) -> Result:
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        return Result(code, captured.out, captured.err)

    return run


# Real registries for the publish and CLI tests.
from tests.publish.fixtures import _no_proxy, basic_registry, proxy, registry, token_registry  # noqa: E402, F401
