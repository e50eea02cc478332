"""Round trips with modctl v0.2.2 (built from its released source by scripts/peers.sh).

modctl builds and pushes ModelPack artifacts under the spec's pre-CNCF identifiers
(``vnd.cnai``); modelseal lists their files, checks them against the originals'
SHA-256, attests and verifies them, and refuses one changed byte of a tar layer.
modctl pulls and extracts what modelseal publishes, byte for byte. What modctl does
that modelseal does not rely on (its unchecked writes) is pinned here too, so a newer
release that changes it shows up.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
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
from tests.publish.image.test_modelpack import client_for
from tests.publish.image.test_modelspec_peer import check, fetched
from tests.publish.modelpack_helpers import blob_file, push_modelpack, raw_layer, sha256
from tests.publish.peers import peer, run
from tests.publish.servers import Registry

FILES = {"model.safetensors": b"modctl weights" * 9000, "config.json": b'{"model_type": "tiny"}\n',
         "README.md": b"# tiny\n", "src/run.py": b"print('run')\n"}  # fmt: skip
MODELFILE = "NAME tiny\nARCH transformer\nFAMILY tiny\nFORMAT safetensors\nPARAMSIZE 1\nPRECISION bf16\n" \
            "CONFIG config.json\nMODEL *.safetensors\nCODE src/*.py\nDOC *.md\n"  # fmt: skip


@dataclass
class Modctl:
    """modctl with its home, temporary files (its digest cache), logs and storage under ``root``;
    ``storage`` names one (a pull into the storage a build filled finds every blob there)."""

    root: Path

    def argv(self, storage: str) -> list[str]:
        return [peer("modctl"), "--storage-dir", str(self.root / "modctl" / storage), "--log-dir",
                str(self.root / "modctl-logs"), "--no-progress"]  # fmt: skip

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "HOME": str(self.root / "home"), "TMPDIR": str(self.root / "tmp")}

    def __call__(
        self, *argv: str, ok: bool = True, storage: str = "built"
    ) -> subprocess.CompletedProcess[str]:
        return run(*self.argv(storage), *argv, env=self.env, ok=ok, cwd=self.root)

    def finds_a_wrong_digest(self, *argv: str, storage: str) -> str:
        """Run modctl until its log says a blob's digest is wrong (its first attempt), and stop it:
        it would try five more times over 135 s (5 s backoff, doubling) and exit 1. The log line."""
        log = self.root / "modctl-logs/modctl.log"
        start = log.stat().st_size if log.exists() else 0
        proc = subprocess.Popen([*self.argv(storage), *argv], env=self.env, cwd=self.root,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and proc.poll() is None:
                with log.open("rb") as f:
                    f.seek(start)
                    lines = f.read().decode().splitlines()
                line = next((x for x in lines if "failed to validate the digest" in x), "")
                if line:
                    return line
                time.sleep(0.1)
            pytest.fail(f"modctl {' '.join(argv)} did not find the digest wrong (exit {proc.returncode})")
        finally:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def modctl(tmp_path: Path) -> Modctl:
    for name in ("home", "tmp"):
        (tmp_path / name).mkdir()
    return Modctl(tmp_path)


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "model"
    for name, data in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    (tmp_path / "Modelfile").write_text(MODELFILE)
    return root


def built(modctl: Modctl, registry: Registry, tmp_path: Path, target: str, *flags: str) -> str:
    """``modctl build`` the workspace and ``push`` it; the artifact's oci:// by digest."""
    root = workspace(tmp_path)
    modctl("build", *flags, "--no-creation-time", "-t", f"{registry.host}/{target}", "-f",
           str(tmp_path / "Modelfile"), str(root))  # fmt: skip
    modctl("push", "--plain-http", f"{registry.host}/{target}")
    pushed = f"oci://{registry.host}/{target}"
    with client_for(pushed) as c:
        image: str = describe(c, parse_reference(pushed, allow_oci_scheme=True))["image"]
    return image


def tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): sha256(p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()
    }


def inspected(cli: Run, image: str, want: str) -> dict[str, Any]:
    done = cli("publish", "inspect", image, "--sha256", want, "--plain-http", "--json")
    assert done.code == 0, done.err
    info: dict[str, Any] = json.loads(done.out)
    return info


@pytest.mark.parametrize("layers", ["raw", "tar"])
def test_modelseal_reads_attests_and_verifies_what_modctl_builds(
    cli: Run, modctl: Modctl, registry: Registry, tmp_path: Path, layers: str
) -> None:
    image = built(modctl, registry, tmp_path, f"modctl/{layers}:v1", f"--raw={layers == 'raw'}")
    info = inspected(cli, image, sha256(FILES["model.safetensors"]))
    assert (info["format"], info["names"], info["primary"]) == ("modelpack", "pre-CNCF", "model.safetensors")
    # modctl's order: configs, weights, code, docs; each file's SHA-256 as modelseal read it (or the raw digest)
    assert [(f["path"], f["sha256"], f["raw"]) for f in info["files"]] == [
        (p, sha256(FILES[p]), layers == "raw") for p in ("config.json", "model.safetensors", "src/run.py", "README.md")
    ]  # fmt: skip
    assert info["descriptor"] == {"family": "tiny", "name": "tiny"}
    key, pub = keys(cli, tmp_path)
    attested = cli("attest", image, "--key", key, "--attach", "--plain-http")
    assert attested.code == 0, attested.err
    verified = cli("verify", "--image", image, "--trusted", pub, "--plain-http", "--json")
    assert verified.code == 0, verified.err
    assert {f["path"]: f["sha256"] for f in json.loads(verified.out)["files"]} == {
        p: sha256(d) for p, d in FILES.items()}  # fmt: skip


def test_one_changed_byte_of_a_tar_layer_modctl_pushed_is_refused(
    cli: Run, modctl: Modctl, registry: Registry, tmp_path: Path
) -> None:
    """A byte changed in the registry's storage: the consumer check and the signer read the tar layer
    and refuse it in one line naming the file; modctl's pull refuses it. ``verify --image`` binds
    digests and reads no layer (it says so), so the attestation made before still verifies: the
    bytes are bound where they are read. A changed file pushed under the same tag is a new manifest,
    which no attestation names."""
    image = built(modctl, registry, tmp_path, "modctl/tamper:v1", "--raw=false")
    key, pub = keys(cli, tmp_path)
    assert cli("attest", image, "--key", key, "--attach", "--plain-http").code == 0
    want = sha256(FILES["model.safetensors"])
    weights = next(f for f in inspected(cli, image, want)["files"] if f["path"] == "model.safetensors")
    stored = blob_file(registry.root, weights["layer"])
    data = bytearray(stored.read_bytes())
    data[4096] ^= 1  # a byte of the file, past the tar header
    stored.write_bytes(bytes(data))
    for argv in (("publish", "inspect", image, "--sha256", want), ("attest", image, "--key", key)):
        refused = cli(*argv, "--plain-http")
        assert refused.code == 3 and refused.err.count("\n") == 1, refused.err
        assert "layer 1 (model.safetensors): the registry served sha256:" in refused.err
    verified = cli("verify", "--image", image, "--trusted", pub, "--plain-http")
    assert verified.code == 0 and "no layer was downloaded" in verified.out, verified.err
    line = modctl.finds_a_wrong_digest(
        "pull", "--plain-http", f"{registry.host}/modctl/tamper:v1", storage="pulled"
    )
    assert (
        f"actual digest sha256:{sha256(bytes(data))} does not match the expected digest {weights['layer']}"
        in line
    )
    # the file changed and built again under the same tag
    (tmp_path / "model/model.safetensors").write_bytes(FILES["model.safetensors"][:-1] + b"X")
    modctl("build", "--raw=false", "--no-creation-time", "-t", f"{registry.host}/modctl/tamper:v1", "-f",
           str(tmp_path / "Modelfile"), str(tmp_path / "model"))  # fmt: skip
    modctl("push", "--plain-http", f"{registry.host}/modctl/tamper:v1")
    moved = cli(
        "verify", "--image", f"oci://{registry.host}/modctl/tamper:v1", "--trusted", pub, "--plain-http"
    )
    assert (
        moved.code == 1 and "error: attestation does not verify: no attestation is attached to" in moved.err
    )


def test_the_spec_validator_finds_only_the_pre_cncf_names_in_what_modctl_builds(
    modctl: Modctl, registry: Registry, tmp_path: Path
) -> None:
    """model-spec v0.0.7's validator refuses modctl v0.2.2's identifiers and nothing else: its config
    is valid, and with the names mapped one to one the artifact is the spec's."""
    image = built(modctl, registry, tmp_path, "modctl/spec:v1")
    manifest_file, config_file = fetched(image, tmp_path)
    code, findings = check(manifest_file, config_file)
    assert code == 1
    assert findings == [
        'manifest: artifactType "application/vnd.cnai.model.manifest.v1+json", not'
        ' "application/vnd.cncf.model.manifest.v1+json"',
        'manifest: config mediaType "application/vnd.cnai.model.config.v1+json", not'
        ' "application/vnd.cncf.model.config.v1+json"',
        *[line for i, kind in enumerate(("weight.config", "weight", "code", "doc")) for line in (
            f'layer {i}: media type "application/vnd.cnai.model.{kind}.v1.raw" is not one of the spec\'s',
            f"layer {i}: no org.cncf.model.filepath annotation")],
    ]  # fmt: skip
    renamed = tmp_path / "renamed.json"
    renamed.write_text(manifest_file.read_text().replace(".cnai.", ".cncf."))
    assert check(renamed, config_file) == (0, ["ok"])


@pytest.mark.parametrize("form", ["tar", "raw"])
def test_modctl_pulls_and_extracts_what_modelseal_publishes_byte_for_byte(
    modctl: Modctl, registry: Registry, tmp_path: Path, form: str
) -> None:
    files = model_files(tmp_path, {"model.safetensors": 150_000, "config.json": 300, "docs/README.md": 50})
    push(registry.host, f"ms/{form}:v1", files, shape=ModelPackShape(raw=form == "raw"))
    target = f"{registry.host}/ms/{form}:v1"  # modctl takes no reference by digest
    modctl("pull", "--plain-http", target)  # into its storage, each blob checked against its digest
    modctl("extract", target, "--output", str(tmp_path / "extracted"))
    modctl("pull", "--plain-http", target, "--extract-dir", str(tmp_path / "direct"), "--extract-from-remote",
           storage="direct")  # fmt: skip
    want = {f.path: sha256(f.source.read_bytes()) for f in files}
    assert tree(tmp_path / "extracted") == want
    assert tree(tmp_path / "direct") == want


def test_what_modctl_writes_without_checking(
    cli: Run, modctl: Modctl, registry: Registry, tmp_path: Path
) -> None:
    """modctl v0.2.2 findings, each a reason modelseal binds bytes itself:

    - ``pull --extract-from-remote`` writes a raw layer, records the descriptor's digest in the
      file's xattrs, then finds the digest wrong; its retry sees the xattrs, skips the file and
      exits 0: the changed bytes stay. ``pull`` into its storage refuses them;
    - a raw layer's filepath ``../../x`` is written outside the extract directory.

    modelseal binds a raw layer by its digest without reading it, so ``verify --image`` admits
    the artifact whose stored blob changed: the bytes are the consumer's to check.
    """
    image = built(modctl, registry, tmp_path, "modctl/unchecked:v1")
    key, pub = keys(cli, tmp_path)
    assert cli("attest", image, "--key", key, "--attach", "--plain-http").code == 0
    target = f"{registry.host}/modctl/unchecked:v1"  # modctl takes no reference by digest
    stored = blob_file(registry.root, "sha256:" + sha256(FILES["model.safetensors"]))
    changed = bytearray(stored.read_bytes())
    changed[100] ^= 1
    stored.write_bytes(bytes(changed))
    assert cli("verify", "--image", image, "--trusted", pub, "--plain-http").code == 0
    line = modctl.finds_a_wrong_digest("pull", "--plain-http", target, storage="pulled")
    assert f"actual digest sha256:{sha256(bytes(changed))} does not match" in line
    direct = modctl("pull", "--plain-http", target, "--extract-dir", str(tmp_path / "direct"),
                    "--extract-from-remote", storage="direct")  # fmt: skip
    assert direct.returncode == 0
    assert (tmp_path / "direct/model.safetensors").read_bytes() == bytes(changed)
    # a filepath that leaves the directory, which modelseal refuses (test_modelpack_hostile.py)
    escape = push_modelpack(registry.host, "modctl/escape:v1", [raw_layer("../../escaped.txt", b"out\n")])
    out = tmp_path / "a/b/out"
    out.mkdir(parents=True)
    modctl("pull", "--plain-http", f"{registry.host}/modctl/escape:v1", "--extract-dir", str(out),
           "--extract-from-remote", storage="escape")  # fmt: skip
    assert (tmp_path / "a/escaped.txt").read_bytes() == b"out\n"
    rejected = cli("publish", "inspect", escape, "--plain-http")
    assert rejected.code == 1 and "is not a normalised relative path" in rejected.err
