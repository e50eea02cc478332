"""Advice that fits the mistake: a public key given to sign, an unsigned report or an attest
envelope given to verify."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Run

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "testdata" / "reports" / "sample.report.json"
MODEL = ROOT / "testdata" / "sample-model"


def _keys(cli: Run, tmp_path: Path) -> Path:
    assert cli("key", "gen", "--out", tmp_path / "ci").code == 0
    return tmp_path / "ci"


def test_sign_with_a_public_key_says_so_and_not_chmod(cli: Run, tmp_path: Path) -> None:
    ci = _keys(cli, tmp_path)
    r = cli("sign", "--key", f"{ci}.pub", "--report", REPORT)  # a .pub is mode 0644: was "chmod 600 it"
    assert r.code == 1
    assert r.err.splitlines() == [
        f"error: {ci}.pub is a public key; sign with its private key (the .key file key gen wrote)"
    ]


def test_a_loose_private_key_still_gets_the_chmod_advice(cli: Run, tmp_path: Path) -> None:
    ci = _keys(cli, tmp_path)
    Path(f"{ci}.key").chmod(0o644)
    r = cli("sign", "--key", f"{ci}.key", "--report", REPORT)
    assert r.code == 1
    assert "is readable by other users" in r.err and "chmod 600" in r.err


def test_an_unsigned_report_given_to_verify_names_sign(cli: Run, tmp_path: Path) -> None:
    ci = _keys(cli, tmp_path)
    r = cli("verify", REPORT, "--trusted", f"{ci}.pub")
    assert r.code == 1
    [line] = r.err.splitlines()
    assert line.startswith(
        'error: attestation does not verify: not a DSSE envelope: missing field "payloadType"; '
    )
    assert f"{REPORT} looks like an unsigned Socair report" in line
    assert f"modelseal sign --key KEY.key --report {REPORT}" in line
    # the verdict's message, what --json prints, is socair's alone
    assert "sign it first" not in cli("verify", REPORT, "--trusted", f"{ci}.pub", "--json").out


def test_an_envelope_that_is_not_a_report_gets_no_report_hint(cli: Run, tmp_path: Path) -> None:
    ci = _keys(cli, tmp_path)
    (tmp_path / "x.json").write_text('{"payload": "e30=", "signatures": []}')
    r = cli("verify", tmp_path / "x.json", "--trusted", f"{ci}.pub")
    assert r.code == 1 and "unsigned Socair report" not in r.err


def test_an_attest_envelope_hints_at_predicate_type(cli: Run, tmp_path: Path) -> None:
    ci = _keys(cli, tmp_path)
    out = tmp_path / "eval.dsse.json"
    assert (
        cli(
            "attest",
            "--key",
            f"{ci}.key",
            "--predicate-type",
            "https://example.com/eval/v1",
            "--out",
            out,
            MODEL,
        ).code
        == 0
    )
    r = cli("verify", out, "--trusted", f"{ci}.pub")
    assert r.code == 1
    assert r.err.splitlines() == [
        'error: attestation does not verify: predicate type "https://example.com/eval/v1", want'
        ' "https://socair.ai/attestation/v1"; to admit it (an attestation from modelseal attest),'
        " pass --predicate-type https://example.com/eval/v1"
    ]
    # asked for other types already: no hint
    other = cli("verify", out, "--trusted", f"{ci}.pub", "--predicate-type", "https://example.com/other/v1")
    assert other.code == 1 and "to admit it" not in other.err
    assert (
        cli("verify", out, "--trusted", f"{ci}.pub", "--predicate-type", "https://example.com/eval/v1").code
        == 0
    )


def test_a_hostile_predicate_type_is_escaped_and_quoted_in_the_hint(cli: Run, tmp_path: Path) -> None:
    ci = _keys(cli, tmp_path)
    out = tmp_path / "evil.dsse.json"
    assert (
        cli(
            "attest", "--key", f"{ci}.key", "--predicate-type", "x; rm -rf ~\x1b[2J", "--out", out, MODEL
        ).code
        == 0
    )
    r = cli("verify", out, "--trusted", f"{ci}.pub")
    assert "\x1b" not in r.err
    assert "pass --predicate-type 'x; rm -rf ~" in r.err
