"""Bad input of every kind: one clear line, a documented exit code, no traceback."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.conftest import Run
from tests.conftest import FIXTURE_SHA256, SOCAIR

AUTHORIZED = (SOCAIR / "authorized.dsse.json").read_bytes()
OPERATOR = (SOCAIR / "operator.pub").read_bytes()
POLICY_HEAD = "apiVersion: modelseal.dev/v1\nkind: TrustPolicy\n"


def envelope_with(**fields: object) -> bytes:
    env = json.loads(AUTHORIZED)
    env.update(fields)
    return json.dumps(env).encode()


def payload_envelope(payload: bytes) -> bytes:
    """A payload that will fail the signature; fine for tests that stop earlier."""
    return envelope_with(payload=base64.b64encode(payload).decode())


@dataclass(frozen=True)
class Case:
    """Files to write, the verify arguments that use them, and what must come out."""

    name: str
    code: int
    message: str
    envelope: bytes = AUTHORIZED
    key: bytes | None = OPERATOR
    policy: str | None = None
    extra: tuple[str, ...] = ()


CASES = [
    # The envelope
    Case("empty file", 1, "not a DSSE envelope: Expecting value", envelope=b""),
    Case("not JSON", 1, "not a DSSE envelope: Expecting value", envelope=b"hello"),
    Case("truncated JSON", 1, "not a DSSE envelope: ", envelope=AUTHORIZED[:200]),
    Case("JSON array", 1, "not a DSSE envelope: a JSON array, want an object", envelope=b"[1]"),
    Case("JSON null", 1, "not a DSSE envelope: a JSON null, want an object", envelope=b"null"),
    Case("binary garbage", 1, "not a DSSE envelope: invalid UTF-8", envelope=b"\xff\xfe\x00\x01"),
    Case("duplicate payload key", 1, 'duplicate key "payload"', envelope=b'{"payload":"","payload":"","payloadType":"x"}'),
    Case("unknown envelope field", 1, 'unknown field "cert"', envelope=envelope_with(cert="x")),
    Case("payload is a number", 1, "payload: input should be a valid string", envelope=envelope_with(payload=5)),
    Case("signatures is a string", 1, "signatures: input should be a valid list", envelope=envelope_with(signatures="x")),
    Case("signature missing sig", 1, 'missing field "signatures.0.sig"', envelope=envelope_with(signatures=[{"keyid": ""}])),
    Case("no signatures", 1, "attestation does not verify: envelope is unsigned", envelope=envelope_with(signatures=[])),
    Case("payload bad base64", 1, "payload is not base64: illegal character", envelope=envelope_with(payload="@@@@")),
    Case("signature bad base64", 1, "no valid signature by a trusted key",
         envelope=envelope_with(signatures=[{"keyid": "", "sig": "%%%"}])),
    Case("wrong payload type", 1, 'payload type "application/json", want "application/vnd.in-toto+json"',
         envelope=envelope_with(payloadType="application/json")),
    Case("deeply nested", 1, "nested deeper than 64 levels", envelope=b"[" * 100_000 + b"]" * 100_000),
    Case("oversized", 1, "larger than the 16777216 byte limit", envelope=b" " * (16 * 1024 * 1024 + 1)),
    Case("NaN in envelope", 1, "NaN is not valid JSON", envelope=b'{"payloadType": NaN}'),
    Case("tampered payload", 1, "no valid signature by a trusted key", envelope=payload_envelope(b"{}")),
    # Keys
    Case("key file is text", 1, "is not a PEM public key", key=b"not a key"),
    Case("key file is empty", 1, "is not a PEM public key", key=b""),
    Case("key body is garbage", 1, "is not a valid public key",
         key=b"-----BEGIN PUBLIC KEY-----\nQUJD\n-----END PUBLIC KEY-----\n"),
    Case("private key given as trusted", 1, "is a private key, not a public key",
         key=b"-----BEGIN PRIVATE KEY-----\nQUJD\n-----END PRIVATE KEY-----\n"),
    Case("key file is binary", 1, "not UTF-8", key=b"\xff\xd8\xff"),
    Case("trusted key missing", 1, "no such file or directory", key=None),
    # Policy files
    Case("policy not YAML", 1, "not valid YAML", key=None, policy="keys: [\n"),
    Case("policy unknown field", 1, "unknown key 'colour'", key=None,
         policy=POLICY_HEAD + "keys: [{file: k.pub}]\ncolour: red\n"),
    Case("policy wrong type", 1, "threshold: Input should be a valid integer", key=None,
         policy=POLICY_HEAD + "keys: [{file: k.pub}]\nthreshold: many\n"),
    Case("policy threshold too high", 1, "threshold 3 is more than the 1 distinct key(s) given", key=OPERATOR,
         policy=POLICY_HEAD + "keys: [{file: k.pub}]\nthreshold: 3\n"),
    Case("policy names a missing key", 1, "no such file or directory", key=None,
         policy=POLICY_HEAD + "keys: [{file: k.pub}]\n"),
    Case("policy path traversal to a non-key", 1, "is not a PEM public key", key=None,
         policy=POLICY_HEAD + "keys: [{file: ../../../../../../etc/passwd}]\n"),
    Case("policy is a list", 1, "want a mapping", key=None, policy="- 1\n"),
    # Usage
    Case("no trust given", 2, "say whom to trust: --trusted KEY.pub", key=None),
    Case("two trust sources", 2, "--trusted and --store exclude each other", extra=("--store", "/tmp")),
    Case("bad sha256", 2, "--sha256 'abc' is not 64 hex digits", extra=("--sha256", "abc")),
    Case("artifact and sha256", 2, "--artifact and --sha256 exclude each other", extra=("--sha256", FIXTURE_SHA256, "--artifact", "x")),
    Case("bad max age", 2, "--max-age: invalid duration", extra=("--max-age", "3 weeks")),
    Case("negative max age", 2, "--max-age: '-1h' must not be negative", extra=("--max-age=-1h",)),
    Case("bad --at", 2, "--at 'tomorrow' is not an RFC 3339 time", extra=("--at", "tomorrow")),
    Case("bad mode", 2, "invalid choice: 'lenient'", extra=("--mode", "lenient")),
    Case("unknown flag", 2, "unrecognized arguments: --acceptors", extra=("--acceptors", "dir")),
    Case("missing artifact", 1, "no such file or directory", extra=("--artifact", "/nonexistent/model")),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_malformed(case: Case, cli: Run, tmp_path: Path) -> None:
    env = tmp_path / "a.dsse.json"
    env.write_bytes(case.envelope)
    args: list[object] = ["verify", env, *case.extra]
    if case.key is not None:
        (tmp_path / "k.pub").write_bytes(case.key)
    if case.policy is not None:
        (tmp_path / "p.yaml").write_text(case.policy)
        args += ["--policy", tmp_path / "p.yaml"]
    elif case.name != "no trust given":
        args += ["--trusted", tmp_path / "k.pub"]
    r = cli(*args)
    assert r.code == case.code, r.err
    first = r.err.splitlines()[0]
    assert first.startswith("error: ") and case.message in first, r.err
    assert r.out == ""


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 30


MUTATIONS: list[Callable[[bytes], bytes]] = [
    lambda b: b[: len(b) // 2],
    lambda b: b.replace(b'"', b"'", 1),
    lambda b: b.replace(b"payloadType", b"payloadtype"),
    lambda b: b.replace(b"[", b"{", 1),
    lambda b: b + b"}",
]


@pytest.mark.parametrize("mutate", MUTATIONS)
def test_installed_entry_point_never_prints_a_traceback(
    mutate: Callable[[bytes], bytes], tmp_path: Path
) -> None:
    env = tmp_path / "bad.dsse.json"
    env.write_bytes(mutate(AUTHORIZED))
    proc = subprocess.run(
        [sys.executable, "-m", "modelseal", "verify", str(env), "--trusted", str(SOCAIR / "operator.pub")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: attestation does not verify:")
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("predicate", "message"),
    [
        ('{"a": 1e400}', "number 1e400 is out of range"),
        ('{"a": "\\ud800"}', "a string holds a lone UTF-16 surrogate"),
    ],
)
def test_attest_refuses_a_predicate_it_cannot_encode(
    cli: Run, ed25519_key_file: Path, tmp_path: Path, predicate: str, message: str
) -> None:
    (tmp_path / "p.json").write_text(predicate)
    r = cli("attest", SOCAIR / "operator.pub", "--key", ed25519_key_file, "--predicate-type", "x",
            "--predicate", tmp_path / "p.json")  # fmt: skip
    assert r.code == 1 and r.err.startswith("error: predicate ") and message in r.err


def test_attest_refuses_a_predicate_type_that_is_not_utf8(cli: Run, ed25519_key_file: Path) -> None:
    r = cli("attest", SOCAIR / "operator.pub", "--key", ed25519_key_file, "--predicate-type", "x\udcff")
    assert (
        r.code == 1
        and r.err == "error: cannot encode the statement: a string holds a lone UTF-16 surrogate\n"
    )
