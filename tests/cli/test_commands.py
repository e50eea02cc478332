"""``key gen``, ``sign``, ``attest`` and ``digest`` from the command line."""

import hashlib
import json
import stat
from pathlib import Path

from modelseal.attest.dsse.keys import load_public_key
from tests.cli.conftest import Run
from tests.conftest import TESTDATA

REPORT = TESTDATA / "reports" / "sample.report.json"
MODEL = TESTDATA / "sample-model" / "model.safetensors"


def test_key_gen_sign_verify_tamper(cli: Run, tmp_path: Path) -> None:
    prefix = tmp_path / "ci"
    r = cli("key", "gen", "--out", prefix, "--issuer", "CI pipeline")
    assert r.code == 0
    keyid = load_public_key((tmp_path / "ci.pub").read_bytes()).keyid
    assert r.out.splitlines() == [
        f"key id {keyid}",
        f"  private: {prefix}.key (keep it secret; mode 0600)",
        f"  public:  {prefix}.pub (share it; verifiers list it in their trusted keys)",
        "  issuer:  CI pipeline (reports signed with this key name it as their issuer)",
    ]
    assert stat.S_IMODE((tmp_path / "ci.key").stat().st_mode) == 0o600
    report = tmp_path / "report.json"
    report.write_bytes(REPORT.read_bytes())
    r = cli("sign", "--key", f"{prefix}.key", "--report", report)
    sha = hashlib.sha256(MODEL.read_bytes()).hexdigest()
    assert r.code == 0
    assert (
        r.out
        == f"signed {report} for artifact {sha} with key {keyid[:16]}\n  {tmp_path / 'report.dsse.json'}\n"
    )
    signed = tmp_path / "report.dsse.json"
    r = cli("verify", signed, "--trusted", f"{prefix}.pub", "--artifact", MODEL, "--strict")
    assert r.code == 0 and "issued by CI pipeline (confirmed" in r.out
    tampered = json.loads(signed.read_bytes())
    tampered["signatures"][0]["sig"] = tampered["signatures"][0]["sig"][:-4] + "AAA="
    signed.write_text(json.dumps(tampered))
    r = cli("verify", signed, "--trusted", f"{prefix}.pub")
    assert r.code == 1 and "no valid signature by a trusted key" in r.err


def test_key_gen_without_issuer_and_refusals(cli: Run, tmp_path: Path) -> None:
    r = cli("key", "gen", "--out", tmp_path / "k")
    assert r.code == 0 and "no issuer name: reports signed with it name the key id" in r.out
    r = cli("key", "gen", "--out", tmp_path / "k")
    assert r.code == 2 and r.err == (
        f"error: {tmp_path}/k.key and {tmp_path}/k.pub already exist: give another --out, or --force to replace"
        " them (modelseal key gen --help)\n"
    )
    r = cli("key", "gen", "--out", tmp_path / "j", "--issuer", " padded")
    assert r.code == 2 and "white space" in r.err
    r = cli("key", "gen", "--out", tmp_path / "no-such-dir" / "k")
    assert r.code == 3 and "No such file or directory" in r.err


def test_sign_refusals(cli: Run, tmp_path: Path, ed25519_key_file: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": "socair.report/v1", "artifact": {}}')
    r = cli("sign", "--key", ed25519_key_file, "--report", bad)
    assert r.code == 1 and "no artifact hash" in r.err
    bad.write_text("[]")
    r = cli("sign", "--key", ed25519_key_file, "--report", bad)
    assert r.code == 1 and "is not a report document: not a JSON object" in r.err
    bad.write_text("{,}")
    assert cli("sign", "--key", ed25519_key_file, "--report", bad).code == 1
    ed25519_key_file.chmod(0o644)
    r = cli("sign", "--key", ed25519_key_file, "--report", REPORT)
    assert r.code == 1 and "readable by other users" in r.err
    r = cli("sign", "--key", ed25519_key_file)
    assert r.code == 2 and "--report" in r.err


def test_sign_writes_atomically_to_out(cli: Run, tmp_path: Path, ed25519_key_file: Path) -> None:
    out = tmp_path / "x.dsse.json"
    assert cli("sign", "--key", ed25519_key_file, "--report", REPORT, "--out", out).code == 0
    assert out.read_bytes() == (TESTDATA / "reports" / "sample.dsse.json").read_bytes()
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []


def test_attest_and_verify_generic(cli: Run, tmp_path: Path, ed25519_key_file: Path) -> None:
    predicate = tmp_path / "eval.json"
    predicate.write_text('{"benchmark": "mmlu", "score": 0.71}')
    out = tmp_path / "eval.dsse.json"
    r = cli("attest", "--key", ed25519_key_file, "--predicate-type", "https://example.com/eval/v1",
            "--predicate", predicate, "--out", out, TESTDATA / "sample-model", MODEL)  # fmt: skip
    assert r.code == 0 and "attested 2 subject(s) with 1 key(s)" in r.err
    pub = ed25519_key_file.with_suffix(".pub")
    r = cli(
        "verify",
        out,
        "--trusted",
        pub,
        "--predicate-type",
        "https://example.com/eval/v1",
        "--artifact",
        MODEL,
    )
    assert r.code == 0 and r.out.startswith("verified: signed by key ")
    assert "  predicate https://example.com/eval/v1" in r.out
    r = cli("verify", out, "--trusted", pub)
    assert r.code == 1 and 'predicate type "https://example.com/eval/v1"' in r.err
    r = cli("attest", "--key", ed25519_key_file, "--predicate-type", "x", MODEL)
    assert r.code == 0 and json.loads(r.out)["payloadType"] == "application/vnd.in-toto+json"
    predicate.write_text("[1]")
    r = cli("attest", "--key", ed25519_key_file, "--predicate-type", "x", "--predicate", predicate, MODEL)
    assert r.code == 1 and "is not a JSON object" in r.err


def test_digest(cli: Run) -> None:
    sha = hashlib.sha256(MODEL.read_bytes()).hexdigest()
    assert cli("digest", MODEL).out == f"{sha}  {MODEL}\n"
    r = cli("digest", TESTDATA / "sample-model", "--json", "--jobs", "2")
    doc = json.loads(r.out)
    assert doc["kind"] == "socair.modeldir/v1" and len(doc["files"]) == 3
    assert {"path": "model.safetensors", "sha256": sha, "size": MODEL.stat().st_size} in doc["files"]
    assert cli("digest", MODEL, "--jobs", "0").code == 2
    r = cli("digest", "/nonexistent")
    assert r.code == 1 and r.err == "error: /nonexistent: no such file or directory\n"


def test_top_level(cli: Run) -> None:
    r = cli()  # help, as for a group alone (issue 21, point 16)
    assert r.code == 0 and r.out.startswith("usage: modelseal") and r.err == ""
    r = cli("frobnicate")
    assert r.code == 2 and "invalid choice: 'frobnicate'" in r.err


def test_digest_starts_without_the_heavy_imports(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys; from modelseal.cli import main; main(['digest', sys.argv[1]]);"
        "heavy = [m for m in ('pydantic', 'cryptography', 'yaml') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(MODEL)], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "[]"


def test_version(cli: Run) -> None:
    import pytest

    with pytest.raises(SystemExit) as info:
        cli("--version")
    assert info.value.code == 0
