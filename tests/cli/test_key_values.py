"""Repeatable KEY=VALUE flags (``publish --role``, ``stage --file-sha256``): one reading for both."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.cli.conftest import Run
from tests.conftest import TESTDATA
from tests.publish.servers import Registry

SAMPLE = TESTDATA / "sample-model"
WEIGHTS = (SAMPLE / "model.safetensors").read_bytes()
SHA = hashlib.sha256(WEIGHTS).hexdigest()


def test_a_pin_given_twice_with_two_digests_is_refused_not_the_last_taken(cli: Run, tmp_path: Path) -> None:
    two = cli("stage", "--to", tmp_path / "out", "--source", SAMPLE, "model.safetensors",
              "--file-sha256", f"model.safetensors={'0' * 64}", "--file-sha256", f"model.safetensors={SHA}")  # fmt: skip
    assert two.code == 2, two.err
    assert two.err.startswith(
        f"error: --file-sha256 gives 'model.safetensors' twice: '{'0' * 64}', then '{SHA}'"
    )
    assert not (tmp_path / "out" / "model.safetensors").exists()
    same = cli("stage", "--to", tmp_path / "out", "--source", SAMPLE, "model.safetensors", "--json",
               "--file-sha256", f"model.safetensors={SHA}", "--file-sha256", f"model.safetensors={SHA}")  # fmt: skip
    assert same.code == 0, same.err
    assert json.loads(same.out)[0]["sha256"] == SHA
    shapeless = cli("stage", "--to", tmp_path / "out", "--source", SAMPLE, "--file-sha256", SHA)
    assert (shapeless.code, shapeless.err.splitlines()[0]) == (
        2,
        f"error: --file-sha256 '{SHA}': want FILE=HEX (modelseal stage --help)",
    )


def test_a_role_given_twice_with_two_roles_is_refused(cli: Run, registry: Registry) -> None:
    r = cli("publish", "--image", f"{registry.host}/m/x:v1", "--plain-http", "--from", SAMPLE,
            "--primary", "model.safetensors", "--format", "modelpack",
            "--role", "config.json=doc", "--role", "config.json=code")  # fmt: skip
    assert (r.code, r.err) == (
        2,
        "error: --role gives 'config.json' twice: 'doc', then 'code' (modelseal publish --help)\n",
    )
