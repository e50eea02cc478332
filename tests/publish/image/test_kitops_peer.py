"""Round trips with KitOps ``kit`` v1.7.0 (built from its release archive by scripts/peers.sh).

kit v1.7.0 packs and pushes ModelKits, not ModelPack artifacts (its ``--use-model-pack``
came later): modelseal reads them under a stated rule (modelkit_read), lists each file
a layer holds, checks them against the originals' SHA-256, attests and verifies
them, and refuses one changed byte. kit unpacks ModelKits byte for byte and refuses
to unpack modelseal's ModelPack artifacts. What kit writes without checking is pinned
here too, so a newer release that changes it shows up.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from modelseal.publish.image.contents import describe
from modelseal.publish.image.modelpack import ModelPackShape
from modelseal.publish.registry.reference import parse_reference
from tests.cli.conftest import Run
from tests.cli.test_image_attestations import keys
from tests.publish.helpers import model_files, push
from tests.publish.image.test_modctl_peer import tree
from tests.publish.image.test_modelpack import client_for
from tests.publish.image.test_modelspec_peer import check, fetched
from tests.publish.modelpack_helpers import blob_file, sha256
from tests.publish.peers import peer, run
from tests.publish.servers import Registry

FILES = {"model.gguf": b"kit weights" * 9000, "code/train.py": b"print('train')\n",
         "code/lib/util.py": b"x = 1\n", "data/train.csv": b"a,b\n1,2\n", "docs/README.md": b"# tiny\n"}  # fmt: skip
KITFILE = """manifestVersion: "1.0"
package:
  name: tiny
  version: 1.0.0
model:
  name: tiny
  path: model.gguf
code:
  - path: code
datasets:
  - name: train
    path: data/train.csv
docs:
  - path: docs/README.md
"""


@dataclass
class Kit:
    """kit with its HOME and its home (KITOPS_HOME: storage, cache, credentials) under ``root``;
    ``home`` names one (a pull into the storage a pack filled finds the ModelKit there)."""

    root: Path

    def __call__(self, *argv: str, ok: bool = True, home: str = "packed") -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HOME": str(self.root / "home"), "KITOPS_HOME": str(self.root / "kitops" / home)}
        return run(peer("kit"), *argv, env=env, ok=ok, cwd=self.root)


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    (tmp_path / "home").mkdir()
    return Kit(tmp_path)


def packed(kit: Kit, registry: Registry, tmp_path: Path, target: str, *flags: str) -> str:
    """``kit pack`` a context directory and ``kit push`` it; the ModelKit's oci:// by digest."""
    root = tmp_path / "context"
    for name, data in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    (root / "Kitfile").write_text(KITFILE)
    kit("pack", str(root), *flags, "-t", f"{registry.host}/{target}")
    kit("push", "--plain-http", f"{registry.host}/{target}")
    pushed = f"oci://{registry.host}/{target}"
    with client_for(pushed) as c:
        image: str = describe(c, parse_reference(pushed, allow_oci_scheme=True))["image"]
    return image


def want() -> dict[str, str]:
    return {p: sha256(d) for p, d in FILES.items()}


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_modelseal_reads_attests_and_verifies_what_kit_packs(
    cli: Run, kit: Kit, registry: Registry, tmp_path: Path, compression: str
) -> None:
    image = packed(kit, registry, tmp_path, f"kit/{compression}:v1", "--compression", compression)
    done = cli("publish", "inspect", image, "--sha256", sha256(FILES["model.gguf"]), "--plain-http", "--json")
    assert done.code == 0, done.err
    info: dict[str, Any] = json.loads(done.out)
    assert (info["format"], info["package"], info["primary"]) == (
        "modelkit", {"name": "tiny", "version": "1.0.0"}, "model.gguf")  # fmt: skip
    # every file each layer holds, as modelseal read it, is the original
    assert {f["path"]: f["sha256"] for f in info["files"]} == want()
    assert [f["role"] for f in info["files"]] == ["weight", "code", "code", "dataset", "doc"]
    shown = cli("publish", "inspect", image, "--plain-http")
    assert "  format   KitOps ModelKit, tiny\n" in shown.out
    key, pub = keys(cli, tmp_path)
    attested = cli("attest", image, "--key", key, "--attach", "--plain-http")
    assert attested.code == 0, attested.err
    verified = cli("verify", "--image", image, "--trusted", pub, "--plain-http", "--json")
    assert verified.code == 0, verified.err
    assert {f["path"]: f["sha256"] for f in json.loads(verified.out)["files"]} == want()
    # and kit unpacks the same bytes (and the Kitfile beside them, as YAML)
    target = f"{registry.host}/kit/{compression}:v1"
    kit("unpack", "--plain-http", target, "-d", str(tmp_path / "out"), home="unpacked")  # from the registry
    assert tree(tmp_path / "out") == {**want(), "Kitfile": sha256((tmp_path / "out/Kitfile").read_bytes())}


def test_one_changed_byte_of_a_modelkit_layer_and_what_kit_writes_without_checking(
    cli: Run, kit: Kit, registry: Registry, tmp_path: Path
) -> None:
    """The consumer check and the signer read the changed layer and refuse it in one line naming the
    file; ``kit pull`` refuses it; ``kit unpack`` straight from the registry (v1.7.0) writes the
    changed bytes and exits 0: modelseal relies on no consumer's check."""
    image = packed(kit, registry, tmp_path, "kit/tamper:v1")
    target = f"{registry.host}/kit/tamper:v1"
    with client_for(image) as c:
        layer = describe(c, parse_reference(image, allow_oci_scheme=True))["files"][0]["layer"]
    stored = blob_file(registry.root, layer)
    data = bytearray(stored.read_bytes())
    data[4096] ^= 1  # a byte of model.gguf, past its tar header
    stored.write_bytes(bytes(data))
    key, _ = keys(cli, tmp_path)
    for argv in (
        ("publish", "inspect", image, "--sha256", sha256(FILES["model.gguf"])),
        ("attest", image, "--key", key),
    ):
        refused = cli(*argv, "--plain-http")
        assert refused.code == 3 and refused.err.count("\n") == 1, refused.err
        assert (
            f"layer 0 (model.gguf): the registry served sha256:{sha256(bytes(data))}, not {layer}"
            in refused.err
        )
    pulled = kit("pull", "--plain-http", target, ok=False, home="pulled")
    assert pulled.returncode != 0 and "downloaded file hash does not match descriptor" in pulled.stderr
    kit("unpack", "--plain-http", target, "-d", str(tmp_path / "out"), home="unpacked")
    changed = bytes(data[512 : 512 + len(FILES["model.gguf"])])  # the tar's one file, after its header
    assert (tmp_path / "out/model.gguf").read_bytes() == changed != FILES["model.gguf"]


def test_kit_refuses_to_unpack_a_modelpack(kit: Kit, registry: Registry, tmp_path: Path) -> None:
    """kit v1.7.0 reads ModelKits only: modelseal's ModelPack artifacts, tar or raw, are not one."""
    files = model_files(tmp_path, {"model.gguf": 10_000, "README.md": 20})
    for form in ("tar", "raw"):
        push(registry.host, f"ms/{form}:v1", files, shape=ModelPackShape(raw=form == "raw"))
        refused = kit(
            "unpack", "--plain-http", f"{registry.host}/ms/{form}:v1", "-d", str(tmp_path / form), ok=False
        )
        assert refused.returncode == 1
        assert "Failed to read model: reference exists but is not a modelkit" in refused.stderr


def test_the_spec_validator_refuses_a_modelkit(kit: Kit, registry: Registry, tmp_path: Path) -> None:
    """A ModelKit is no ModelPack, and the spec's validator says so: its Kitfile config is not the
    spec's config, and no layer has the spec's types or filepath."""
    manifest_file, config_file = fetched(packed(kit, registry, tmp_path, "kit/spec:v1"), tmp_path)
    code, findings = check(manifest_file, config_file)
    assert code == 1
    assert findings[0].startswith("config: the spec's validator refuses it:")
    assert 'manifest: mediaType "", not "application/vnd.oci.image.manifest.v1+json"' in findings
    assert 'manifest: artifactType "", not "application/vnd.cncf.model.manifest.v1+json"' in findings
    assert (
        'layer 0: media type "application/vnd.kitops.modelkit.model.v1.tar" is not one of the spec\'s'
        in findings
    )
    assert "layer 0: no org.cncf.model.filepath annotation" in findings
