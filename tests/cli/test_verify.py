"""``modelseal verify``: socair's text and exit codes on the real fixtures."""

import json
from pathlib import Path

from modelseal.attest.signing.private_keys import SigningKey
from tests.cli.conftest import Run
from tests.conftest import FIXTURE_KEYID, FIXTURE_SHA256, SOCAIR, TESTDATA

OPERATOR = SOCAIR / "operator.pub"
AUTHORIZED = SOCAIR / "authorized.dsse.json"


def test_authorized_prints_socair_lines(cli: Run) -> None:
    r = cli("verify", AUTHORIZED, "--trusted", OPERATOR)
    assert r.code == 0 and r.err == ""
    assert r.out.splitlines() == [
        "verified: issued by key b4f69dad730db4cb (the report names no issuer; your trust list does not name the key)",
        f"  signed by key {FIXTURE_KEYID}",
        f"  artifact {FIXTURE_SHA256} (model.safetensors)",
        "  promotion authorized, 4 check(s), document 0e9fca86be68020697bae07ab5a39bf1ac30b1e9936bcf753a9138945a00195f",
        "  the artifact itself was not checked; pass --artifact <path> or --sha256 <hex> to bind it",
    ]


def test_flag_equals_form_and_flags_after_positionals(cli: Run) -> None:
    assert cli("verify", f"--trusted={OPERATOR}", AUTHORIZED, f"--sha256={FIXTURE_SHA256}").code == 0
    assert cli("verify", AUTHORIZED, "--trusted", SOCAIR, "--sha256", FIXTURE_SHA256.upper()).code == 0


def test_withheld_is_refused_with_exit_1(cli: Run) -> None:
    r = cli("verify", SOCAIR / "withheld.dsse.json", "--trusted", OPERATOR)
    assert r.code == 1 and r.out == ""
    assert r.err == (
        'error: attestation not admitted by policy: attestation state "withheld" does not authorize promotion\n'
    )


def test_warn_mode_reports_and_exits_0(cli: Run) -> None:
    r = cli("verify", SOCAIR / "withheld.dsse.json", "--trusted", OPERATOR, "--mode", "warn")
    assert r.code == 0 and r.out == ""
    assert r.err.startswith('warning: attestation not admitted by policy: attestation state "withheld"')
    assert r.err.endswith("(warn mode: not blocking)\n")


def test_conditional_needs_allow_conditions(cli: Run) -> None:
    r = cli("verify", SOCAIR / "conditional.dsse.json", "--trusted", OPERATOR)
    assert r.code == 1 and "ciso@example.com" in r.err
    r = cli("verify", SOCAIR / "conditional.dsse.json", "--trusted", OPERATOR, "--allow-conditions")
    assert r.code == 0
    assert (
        "  acceptance by ciso@example.com is UNSIGNED (named at scan time); the airlock will not promote it"
        in r.out
    )


def test_wrong_digest(cli: Run) -> None:
    r = cli("verify", AUTHORIZED, "--trusted", OPERATOR, "--sha256", "ab" * 32)
    assert r.code == 1
    assert r.err == (
        f"error: attestation not admitted by policy: attestation is for {FIXTURE_SHA256}, not the artifact {'ab' * 32}\n"
    )


def test_max_age_and_at(cli: Run) -> None:
    args = ("verify", AUTHORIZED, "--trusted", OPERATOR, "--max-age", "2160h")
    assert cli(*args, "--at", "2026-10-10T00:00:00Z").code == 0
    r = cli(*args, "--at", "2027-10-10T00:00:00Z")
    assert r.code == 1 and "old, over the 2160h0m0s limit; rescan the artifact" in r.err


def test_a_report_from_the_future_is_refused_with_or_without_max_age(cli: Run) -> None:
    args = ("verify", AUTHORIZED, "--trusted", OPERATOR)
    assert cli(*args, "--at", "2026-10-03T02:46:00Z").code == 0  # 4m10s early: clock skew
    for extra in ((), ("--max-age", "24h")):
        r = cli(*args, *extra, "--at", "2026-10-01T00:00:00Z")
        assert r.code == 1 and r.err == (
            "error: attestation not admitted by policy: attestation is issued in the future"
            " (2026-10-03T02:50:10Z, 50h50m10s from now, over the 5m0s clock skew allowed);"
            " check the signer's clock\n"
        )
    verdict = json.loads(cli(*args, "--at", "2026-10-01T00:00:00Z", "--json").out)
    assert verdict["reason"] == "issued_in_future"


def test_json_verdict(cli: Run) -> None:
    r = cli("verify", SOCAIR / "withheld.dsse.json", "--trusted", OPERATOR, "--json")
    assert r.code == 1 and r.err == ""
    verdict = json.loads(r.out)
    assert verdict["admitted"] is False and verdict["reason"] == "state_not_authorized"
    assert verdict["mode"] == "enforce" and verdict["signers"][0]["keyid"] == FIXTURE_KEYID
    ok = json.loads(cli("verify", AUTHORIZED, "--trusted", OPERATOR, "--json").out)
    assert ok["admitted"] is True and ok["details"]["checks"] == 4


def test_policy_file(cli: Run) -> None:
    policies = Path(__file__).resolve().parents[2] / "policies"
    r = cli("verify", SOCAIR / "conditional.dsse.json", "--policy", policies / "socair-conditional-90d.yaml",
            "--at", "2026-10-05T00:00:00Z")  # fmt: skip
    assert r.code == 0, r.err
    r = cli("verify", SOCAIR / "conditional.dsse.json", "--policy", policies / "socair-conditional-90d.yaml",
            "--at", "2026-10-05T00:00:00Z", "--max-age", "1h")  # fmt: skip
    assert r.code == 1 and "over the 1h0m0s limit" in r.err


def test_store_layout(cli: Run, tmp_path: Path) -> None:
    (tmp_path / "trusted-keys").mkdir()
    (tmp_path / "trusted-keys" / f"{FIXTURE_KEYID}.pub").write_bytes(OPERATOR.read_bytes())
    assert cli("verify", AUTHORIZED, "--store", tmp_path).code == 0


def test_artifact_file_and_directory(cli: Run, ed25519_key_file: Path, tmp_path: Path) -> None:
    sample = TESTDATA / "reports" / "sample.dsse.json"
    pub = ed25519_key_file.with_suffix(".pub")
    model = TESTDATA / "sample-model" / "model.safetensors"
    r = cli("verify", sample, "--trusted", pub, "--artifact", model)
    assert r.code == 0 and "not checked" not in r.out
    assert "verified: issued by modelseal testdata (confirmed: your trust list names this key)" in r.out
    other = tmp_path / "model.safetensors"
    other.write_bytes(model.read_bytes() + b"\0")
    r = cli("verify", sample, "--trusted", pub, "--artifact", other)
    assert r.code == 1
    assert r.err.startswith(f"error: attestation does not verify: {other} hashes to ")
    assert r.err.rstrip().endswith(
        "but the attestation is for af3e9fec9b4b45fb08a732f5ce1f53c9f3f0d641cf02535e202738f7a7bf365c"
    )


def test_directory_attestation_and_diff(
    cli: Run, ed25519_key: SigningKey, ed25519_key_file: Path, tmp_path: Path
) -> None:
    from modelseal.attest.digests.digest import modeldir_digest
    from modelseal.attest.signing.sign import sign_report
    from tests.attest.helpers import sample_report

    model = tmp_path / "model"
    model.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (model / name).write_bytes((TESTDATA / "sample-model" / name).read_bytes())
    d = modeldir_digest(model)
    report = sample_report()
    report["artifact"].update(
        sha256=d.sha256, file_name="model", format="model directory", size_bytes=d.size,
        files=[{"path": f.path, "sha256": f.sha256, "size_bytes": f.size, "role": "other"} for f in d.files],
    )  # fmt: skip
    envelope, _ = sign_report(report, ed25519_key)
    env_path = tmp_path / "model.dsse.json"
    env_path.write_bytes(envelope.to_json())
    pub = ed25519_key_file.with_suffix(".pub")
    assert cli("verify", env_path, "--trusted", pub, "--artifact", model).code == 0
    (model / "config.json").write_text("{}")
    (model / "extra.bin").write_text("x")
    (model / "tokenizer.json").unlink()
    r = cli("verify", env_path, "--trusted", pub, "--artifact", model)
    assert r.code == 1
    assert "directory" in r.err and "has manifest digest" in r.err
    assert r.err.rstrip().endswith(": added: extra.bin; removed: tokenizer.json; changed: config.json")


def test_an_unreadable_envelope_with_json_is_a_refusal_not_a_crash(cli: Run, tmp_path: Path) -> None:
    r = cli("verify", tmp_path / "missing.dsse.json", "--trusted", SOCAIR / "operator.pub", "--json")
    assert r.code == 1, r.err
    doc = json.loads(r.out)
    assert doc["reason"] == "input_unreadable" and "missing.dsse.json" in doc["message"]


def test_an_issuer_the_trust_list_does_not_confirm_reads_in_one_pair_of_parentheses(
    cli: Run, tmp_path: Path
) -> None:
    """Issue 31, point 10: socair's 'unnamed issuer (key ...) (claimed: ...)' nested its parentheses and
    left 'claimed' unexplained."""
    assert cli("key", "gen", "--out", tmp_path / "intake", "--issuer", "demo intake").code == 0
    report = tmp_path / "report.json"
    report.write_bytes((TESTDATA / "reports" / "sample.report.json").read_bytes())
    assert cli("sign", "--key", tmp_path / "intake.key", "--report", report).code == 0
    anonymous = tmp_path / "anonymous.pub"  # the same key, without its Socair-Issuer line
    anonymous.write_text((tmp_path / "intake.pub").read_text().split("\n", 1)[1])
    r = cli("verify", tmp_path / "report.dsse.json", "--trusted", anonymous)
    assert r.code == 0, r.err
    first = r.out.splitlines()[0]
    assert (
        first
        == "verified: issued by demo intake, as the report says (your trust list does not name this key)"
    )
