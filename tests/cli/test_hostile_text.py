"""Text from an envelope, a report or an image reaches the terminal with its control characters escaped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from modelseal.attest.dsse.envelope import parse_envelope
from modelseal.attest.signing.private_keys import SigningKey
from modelseal.cli.registry_access import registry_client as _client
from modelseal.publish.image.layout import ANN_SOURCE, MEDIA_MANIFEST
from modelseal.publish.registry.reference import parse_reference
from tests.attest.helpers import signed_statement
from tests.cli.conftest import Run
from tests.conftest import SOCAIR, TESTDATA
from tests.publish.servers import Registry

FORGED = "\r\x1b[2K\x1b[1Averified: issued by ACME (confirmed: your trust list names this key)"
BIDI = "evil\u202etxt.exe\u2066"


def _clean(text: str) -> bool:
    return all(ch == "\n" or ch.isprintable() for ch in text)


def test_a_forged_keyid_is_escaped_in_the_refusal(cli: Run, tmp_path: Path) -> None:
    env = json.loads((SOCAIR / "authorized.dsse.json").read_bytes())
    env["signatures"][0]["keyid"] = FORGED
    forged = tmp_path / "forged.dsse.json"
    forged.write_text(json.dumps(env))
    r = cli("verify", forged, "--trusted", TESTDATA / "keys" / "ed25519.pub")
    assert r.code == 1 and _clean(r.err), ascii(r.err)
    assert "(signed by [\\r\\x1b[2K\\x1b[1Averified: issued by ACME" in r.err
    warn = cli("verify", forged, "--trusted", TESTDATA / "keys" / "ed25519.pub", "--mode", "warn")
    assert warn.code == 0 and _clean(warn.err) and warn.err.startswith("warning: ")


def test_report_fields_are_escaped_when_admitted(cli: Run, ed25519_key: SigningKey, tmp_path: Path) -> None:
    def hostile(report: dict[str, Any]) -> None:
        report["artifact"]["file_name"] = BIDI
        report["issuer"]["signed_by"] = FORGED

    envelope = tmp_path / "a.dsse.json"
    envelope.write_bytes(signed_statement(ed25519_key, hostile))
    pub = tmp_path / "unnamed.pub"  # a key without an issuer name: the report's claim is shown
    pub.write_text(ed25519_key.public_pem())
    r = cli("verify", envelope, "--trusted", pub)
    assert r.code == 0 and _clean(r.out), ascii(r.out)
    assert r.out.startswith("verified: issued by \\r\\x1b[2K\\x1b[1Averified: issued by ACME")
    assert "(evil\\u202etxt.exe\\u2066)" in r.out
    as_json = cli("verify", envelope, "--trusted", pub, "--json")
    assert as_json.out.isascii() and json.loads(as_json.out)["details"]["file_name"] == BIDI


def test_an_error_quoting_a_path_is_escaped(cli: Run, tmp_path: Path) -> None:
    r = cli("verify", tmp_path / f"{FORGED}.json", "--trusted", TESTDATA / "keys" / "ed25519.pub")
    assert r.code == 1 and _clean(r.err), ascii(r.err)
    d = cli("digest", tmp_path / "a\x1b[31mb")
    assert d.code == 1 and _clean(d.err) and "a\\x1b[31mb" in d.err


def test_inspect_escapes_the_annotations_of_an_image(cli: Run, registry: Registry) -> None:
    published = cli("publish", "--image", f"{registry.host}/m/h:v1", "--plain-http",
                    TESTDATA / "sample-model" / "model.safetensors")  # fmt: skip
    assert published.code == 0, published.err
    ref = parse_reference(f"{registry.host}/m/h:v1")
    args = type("Args", (), {"docker_config": None, "plain_http": True, "ca_file": None})()
    with _client(ref, args) as client:
        got = client.get_manifest("v1")
        assert got is not None
        manifest = json.loads(got[0])
        manifest["annotations"][ANN_SOURCE] = FORGED + BIDI
        client.put_manifest("hostile", json.dumps(manifest).encode(), MEDIA_MANIFEST)
    r = cli("publish", "inspect", f"oci://{registry.host}/m/h:hostile", "--plain-http")
    assert r.code == 0 and _clean(r.out), ascii(r.out)
    assert "  source   \\r\\x1b[2K" in r.out


def test_the_envelope_keeps_the_raw_keyid() -> None:
    """Escaping is for display only: the parsed envelope still holds what was signed."""
    env = json.loads((SOCAIR / "authorized.dsse.json").read_bytes())
    env["signatures"][0]["keyid"] = FORGED
    assert parse_envelope(json.dumps(env).encode()).signatures[0].keyid == FORGED


def test_a_huge_field_makes_a_refusal_of_one_short_line(cli: Run, tmp_path: Path) -> None:
    env = json.loads((SOCAIR / "authorized.dsse.json").read_bytes())
    env["payloadType"] = "application/vnd.in-toto+json" + "\x1b" * 100_000  # 400 KB once quoted
    huge = tmp_path / "huge.dsse.json"
    huge.write_text(json.dumps(env))
    for mode in ("enforce", "warn"):
        r = cli("verify", huge, "--trusted", TESTDATA / "keys" / "ed25519.pub", "--mode", mode)
        assert r.err.count("\n") == 1 and len(r.err) < 4200 and _clean(r.err), len(r.err)
        assert 'payload type "application/vnd.in-toto+json\\\\x1b\\\\x1b' in r.err  # Go-quoted, escaped
        assert "more characters)" in r.err
    listed = cli("verify", huge, "--trusted", TESTDATA / "keys" / "ed25519.pub", "--json")
    assert json.loads(listed.out)["message"].count("\\x1b") == 100_000  # machines get the whole message
