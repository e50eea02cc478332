"""Start-up cost: a command imports only what it uses (no timing; the modules loaded are counted).

``python -X importtime`` showed where the time of a short command went: the
operator's asyncio, the digest's thread pool and PyYAML were imported by every
``modelseal`` call, including ``--version`` and ``verify``.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import SOCAIR

_LOADED = (
    "import json, sys\n"
    "from modelseal.cli import main\n"
    "code = main(sys.argv[1:]) if sys.argv[1:] else 0\n"
    "sys.stdout.flush()\n"
    "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
)

#: Never needed to verify an attestation or print the version.
HEAVY = ("httpx", "kopf", "asyncio", "yaml", "concurrent", "ssl", "modelseal.operator", "modelseal.publish")


def _modules(*argv: str) -> set[str]:
    run = subprocess.run([sys.executable, "-c", _LOADED, *argv], capture_output=True, text=True, check=False)
    return set(json.loads(run.stderr.strip().splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_loading_the_cli_imports_no_command_libraries() -> None:
    loaded = _modules()
    assert _heavy(loaded) == []
    assert not [m for m in loaded if m.startswith(("pydantic", "cryptography"))]


def test_verify_imports_neither_the_network_nor_the_operator_nor_yaml() -> None:
    loaded = _modules(
        "verify", str(SOCAIR / "authorized.dsse.json"), "--trusted", str(SOCAIR / "operator.pub")
    )
    assert "modelseal.attest.verifier" in loaded  # it did verify
    assert _heavy(loaded) == []
