"""Start-up cost: a command imports only what it uses (no timing; the modules loaded are counted).

``python -X importtime`` showed where the time of a short command went: the
operator's asyncio, the digest's thread pool and PyYAML were imported by every
``modelseal`` call, including ``--version`` and ``verify``; ``stage`` (the
prefetch Job's downloader, where 0.06 s is a tenth of a 1 GiB download here)
imported httpx's own command-line client (rich, click, pygments).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import SOCAIR
from tests.publish.fileserver import file_server

_LOADED = (
    "import json, sys\n"
    "from modelseal.cli import main\n"
    "try:\n"
    "    code = main(sys.argv[1:]) if sys.argv[1:] else 0\n"
    "except SystemExit:  # --help, --version\n"
    "    pass\n"
    "sys.stdout.flush()\n"
    "print(json.dumps(sorted(m for m, module in sys.modules.items() if module is not None)), file=sys.stderr)\n"
)

#: Never needed to stage a file over plain HTTP.
NOT_STAGING = ("kopf", "asyncio", "yaml", "pydantic", "cryptography", "modelseal.operator", "modelseal.attest.socair.verifier",
               "rich", "click", "pygments")  # fmt: skip

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
    assert "modelseal.attest.socair.verifier" in loaded  # it did verify
    assert _heavy(loaded) == []


#: the Sigstore bundle path: never needed for a plain DSSE envelope checked against keys
BUNDLE_PATH = ("sigstore", "modelseal.attest.bundles.verifier", "modelseal.attest.bundles.oms",
               "modelseal.attest.bundles.oms_model", "modelseal.attest.bundles.keyless",
               "modelseal.attest.bundles.certificates", "modelseal.attest.bundles.routing",
               "cryptography.x509", "modelseal.attest.digests", "modelseal.attest.dsse.wire",
               "modelseal.attest.policy.policy_file", "modelseal.attest.policy.authority_entries")  # fmt: skip


def test_a_plain_verify_of_a_socair_envelope_imports_no_bundle_path() -> None:
    """Issue 21, part 4: 140 ms of a verify went to the Sigstore bundle path a DSSE envelope never
    needs; only whether the input is a bundle is asked (a JSON look, in bundles.bundle)."""
    loaded = _modules(
        "verify", str(SOCAIR / "authorized.dsse.json"), "--trusted", str(SOCAIR / "operator.pub")
    )
    assert "modelseal.attest.socair.verifier" in loaded  # it did verify
    assert sorted(m for m in loaded if any(m == b or m.startswith(b + ".") for b in BUNDLE_PATH)) == []


#: what a plain verify of a Socair envelope against a key does without: the envelope, the
#: statement and the verdict are plain records read by small strict parsers, not pydantic models
NOT_FOR_A_PLAIN_VERIFY = ("pydantic", "pydantic_core", "annotated_types", "modelseal.attest.policy.admission_policy",
                          "msgspec", "decimal", "cryptography", "bcrypt", "nacl.bindings")  # fmt: skip


def test_a_plain_verify_of_a_socair_envelope_imports_no_pydantic() -> None:
    """Issue 21, part 4: pydantic (importing it, building the envelope, statement and verdict
    models) was half of a plain verify's start-up; msgspec's fast JSON reader, imported for two
    small documents, cost more than it saved (gojson imports it once a process reads many);
    cryptography (with bcrypt, for its SSH keys) only read the Ed25519 key libsodium checks, and
    nacl.bindings loads every PyNaCl wrapper for the one check used."""
    loaded = _modules(
        "verify", str(SOCAIR / "authorized.dsse.json"), "--trusted", str(SOCAIR / "operator.pub"), "--json"
    )
    assert "modelseal.attest.socair.verifier" in loaded  # it did verify
    assert (
        sorted(m for m in loaded if any(m == n or m.startswith(n + ".") for n in NOT_FOR_A_PLAIN_VERIFY))
        == []
    )


#: the modules of the commands other than ``verify``: each is imported when its command runs
OTHER_COMMANDS = ("modelseal.cli.publish_commands", "modelseal.cli.files_commands",
                  "modelseal.cli.operator_commands", "modelseal.cli.bom_commands")  # fmt: skip


def test_a_command_imports_its_own_module_not_every_command_s() -> None:
    """Issue 21, part 4: the CLI imported every command's module to build the whole parser."""
    verify = _modules(
        "verify", str(SOCAIR / "authorized.dsse.json"), "--trusted", str(SOCAIR / "operator.pub")
    )
    assert "modelseal.cli.verify_commands" in verify
    assert sorted(m for m in verify if m in OTHER_COMMANDS) == []
    for top_level in ("--version", "--help"):
        loaded = _modules(top_level)
        assert [m for m in loaded if m.startswith("modelseal.cli.") and m.endswith("_commands")] == []


def test_staging_over_plain_http_imports_neither_the_cli_of_httpx_nor_the_operator(
    tmp_path: Path,
) -> None:
    data = b"weights" * 1000
    with file_server(files={"/m.gguf": data}) as server:
        loaded = _modules(
            "stage", "--to", str(tmp_path), "--source", f"http://127.0.0.1:{server.port}/m.gguf",
            "--sha256", hashlib.sha256(data).hexdigest(), "--no-fsync",
        )  # fmt: skip
    assert (tmp_path / "m.gguf").read_bytes() == data  # it did stage
    assert "httpx" in loaded
    assert [m for m in loaded if any(m == h or m.startswith(h + ".") for h in NOT_STAGING)] == []


#: never needed to check files against digests in the serving Pod's init container (issue 29): no
#: network, registry, operator, policy or crypto code, no thread pool, and not the digest module's
#: dataclasses and walk (whose import of ``inspect`` alone costs a few times Python's start-up)
NOT_FOR_VERIFY_FILES = (*HEAVY, "pydantic", "cryptography", "nacl", "sigstore", "msgspec", "dataclasses", "inspect",
                        "modelseal.attest.digests.digest", "modelseal.attest.digests.walk", "modelseal.attest.dsse",
                        "modelseal.attest.policy", "modelseal.attest.socair")  # fmt: skip


def test_verify_files_imports_only_the_file_check(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"weights")
    loaded = _modules(
        "verify-files", "--expect", hashlib.sha256(b"weights").hexdigest(), str(tmp_path / "m.gguf")
    )
    assert "modelseal.attest.digests.expected" in loaded  # it did check
    assert (
        sorted(m for m in loaded if any(m == n or m.startswith(n + ".") for n in NOT_FOR_VERIFY_FILES)) == []
    )
