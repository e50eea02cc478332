from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from modelseal.attest.policy.policy_file import load_policy, parse_policy
from modelseal.errors import KeyFileError, PolicyFileError
from tests.conftest import FIXTURE_KEYID, TESTDATA

POLICIES = Path(__file__).resolve().parents[3] / "policies"
OPERATOR = "../testdata/socair/operator.pub"


@pytest.mark.parametrize("path", sorted(POLICIES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_policy_loads(path: Path) -> None:
    policy = load_policy(path)
    assert len(policy.keys) >= 1 or policy.certificates
    assert policy.threshold <= max(len(policy.keys), 1)


def test_example_rotation_policy() -> None:
    policy = load_policy(POLICIES / "rotation-two-of-three.yaml")
    assert policy.threshold == 2 and policy.strict
    named = [k for k in policy.keys.values() if k.name]
    assert [k.name for k in named] == ["modelseal testdata"]
    window = policy.windows[named[0].keyid]
    assert window.not_after == datetime(2027, 7, 1, tzinfo=UTC)
    keys, inactive = policy.active_keys(datetime(2027, 8, 1, tzinfo=UTC))
    assert named[0].keyid in inactive and len(keys) == 2


def test_conditional_policy_values() -> None:
    policy = load_policy(POLICIES / "socair-conditional-90d.yaml")
    assert policy.allow_conditions and policy.max_age == timedelta(days=90)
    assert list(policy.keys) == [FIXTURE_KEYID]


def test_inline_pem_and_directory(tmp_path: Path) -> None:
    pem = (TESTDATA / "socair" / "operator.pub").read_text()
    text = "apiVersion: modelseal.dev/v1\nkind: TrustPolicy\nkeys:\n  - pem: |\n"
    text += "".join(f"      {line}\n" for line in pem.splitlines())
    text += f"  - dir: {TESTDATA / 'keys'}\nthreshold: 3\n"
    policy = parse_policy(text, base=tmp_path)
    assert len(policy.keys) == 3 and policy.threshold == 3


def test_fingerprint_changes_with_any_setting() -> None:
    a = load_policy(POLICIES / "socair-authorized-only.yaml")
    assert a.fingerprint() == load_policy(POLICIES / "socair-authorized-only.yaml").fingerprint()
    assert a.fingerprint() != a.with_overrides(allow_conditions=True).fingerprint()
    assert a.fingerprint() != a.with_overrides(max_age=timedelta(hours=1)).fingerprint()


HEAD = "apiVersion: modelseal.dev/v1\nkind: TrustPolicy\n"
KEYS = f"keys:\n  - file: {OPERATOR}\n"
BAD_POLICIES = [
    ("", "want a mapping"),
    ("- a\n- b\n", "want a mapping"),
    ("keys: [\n", "not valid YAML (line 2)"),
    (HEAD + KEYS + "threshold: 1\nthreshold: 2\n", "duplicate key 'threshold'"),
    ("apiVersion: v2\nkind: TrustPolicy\n" + KEYS, "want apiVersion modelseal.dev/v1 and kind TrustPolicy"),
    (HEAD, "p.yaml: policy: give at least one authority: keys, certificateRoots or identities"),
    (HEAD + "keys: []\n", "keys: List should have at least 1 item"),
    (HEAD + KEYS + "colour: blue\n", "p.yaml: unknown key 'colour' (known: apiVersion, kind, keys,"),
    (HEAD + KEYS + '"col\\e[2Jour": blue\n', "unknown key 'col\\x1b[2Jour'"),
    (HEAD + KEYS + "threshold: 0\n", "threshold: Input should be greater than or equal to 1"),
    (HEAD + KEYS + "threshold: '1'\n", "threshold: Input should be a valid integer"),
    (HEAD + KEYS + "threshold: 2\n", "threshold 2 is more than the 1 distinct key(s) given"),
    (HEAD + KEYS + "allowConditions: yes-please\n", "allowConditions: Input should be a valid boolean"),
    (HEAD + KEYS + "maxAge: 3 weeks\n", "maxAge: invalid duration"),
    (HEAD + KEYS + "maxAge: -1h\n", "maxAge: '-1h' must not be negative"),
    (HEAD + KEYS + "predicateTypes: []\n", "predicateTypes: List should have at least 1 item"),
    (HEAD + KEYS + "revokedKeyIds: [abc]\n", "revokedKeyIds: 'abc' is not 64 lowercase hex digits"),
    (HEAD + "keys:\n  - name: x\n", "keys.0: give exactly one of file, dir or pem"),
    (HEAD + f"keys:\n  - file: {OPERATOR}\n    pem: x\n", "keys.0: give exactly one of file, dir or pem"),
    (HEAD + f"keys:\n  - file: {OPERATOR}\n    keyid: XYZ\n", "keyid must be 64 lowercase hex digits"),
    (HEAD + f"keys:\n  - file: {OPERATOR}\n    keyid: '{'0' * 64}'\n", "but the policy pins 0000"),
    (HEAD + f"keys:\n  - file: {OPERATOR}\n    keyid: {'1' * 64}\n", "quote it: YAML reads a bare number"),
    (
        HEAD + f"keys:\n  - file: {OPERATOR}\n    notBefore: next week\n",
        "notBefore: Input should be a valid datetime",
    ),
    (
        HEAD + f"keys:\n  - file: {OPERATOR}\n    notBefore: 2026-01-01T00:00:00\n",
        "notBefore: Input should have timezone info",
    ),
    (
        HEAD
        + f"keys:\n  - file: {OPERATOR}\n    notBefore: 2027-01-01T00:00:00Z\n    notAfter: 2026-01-01T00:00:00Z\n",
        "notBefore must be earlier than notAfter",
    ),
    (HEAD + "keys:\n  - dir: ../testdata/keys\n    name: x\n", "name and keyid go with one key"),
    # what PyYAML itself raises for, besides YAMLError: a number past Python's digit limit, deep nesting
    (
        HEAD + KEYS + "threshold: " + "9" * 5000 + "\n",
        "p.yaml: not valid YAML (line 5): a number of 5000 digits, too long to read",
    ),
    (HEAD + KEYS + "x: " + "[" * 10000 + "]" * 10000 + "\n", "p.yaml: not valid YAML: nested too deeply"),
    (
        HEAD + KEYS + "x: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n",
        "p.yaml: not valid YAML: nested too deeply",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_POLICIES, ids=[m for _, m in BAD_POLICIES])
def test_bad_policies(text: str, message: str) -> None:
    with pytest.raises(PolicyFileError) as info:
        parse_policy(text, base=POLICIES, source="p.yaml")
    assert info.value.message.startswith("p.yaml")
    assert message in info.value.message
    assert "\n" not in info.value.message and "\x1b" not in info.value.message


def test_bad_key_references(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match=r"p.yaml: keys.0: trusted keys .*missing.pub: no such file"):
        parse_policy(HEAD + "keys:\n  - file: missing.pub\n", base=tmp_path, source="p.yaml")
    with pytest.raises(KeyFileError, match="is not a PEM public key"):
        parse_policy(HEAD + "keys:\n  - pem: hello\n", base=tmp_path, source="p.yaml")
    with pytest.raises(PolicyFileError, match="larger than"):
        parse_policy("#" * (1024 * 1024 + 1), base=tmp_path)
    with pytest.raises(PolicyFileError, match="read policy"):
        load_policy(tmp_path / "nope.yaml")


def test_yaml_tags_are_not_executed(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError, match="not valid YAML"):
        parse_policy("!!python/object/apply:os.system ['true']\n", base=tmp_path)


ED25519 = TESTDATA / "keys" / "ed25519.pub"


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        # the case: the second entry's name pin was dropped in silence
        (f"  - file: {ED25519}\n  - file: {ED25519}\n    name: ACME\n", r"keys\.1: key f963\w+ is listed also in keys\.0"),
        (f"  - file: {ED25519}\n    name: ACME\n  - file: {ED25519}\n    notAfter: 2027-01-01T00:00:00Z\n", "listed also in keys.0"),
        (f"  - file: {ED25519}\n  - file: {ED25519}\n", "listed also in keys.0; list each key once"),
        (f"  - dir: {TESTDATA / 'keys'}\n  - file: {ED25519}\n    name: ACME\n", "keys.1: key f963"),
    ],
)  # fmt: skip
def test_a_key_listed_twice_is_a_policy_error(tmp_path: Path, entries: str, message: str) -> None:
    with pytest.raises(PolicyFileError, match=message) as caught:
        parse_policy(HEAD + "keys:\n" + entries, base=tmp_path, source="p.yaml")
    assert str(caught.value).startswith("p.yaml: keys.1: key ") and "\n" not in str(caught.value)


def test_a_directory_holding_a_key_twice_is_a_policy_error(tmp_path: Path) -> None:
    for name in ("a.pub", "b.pub"):
        (tmp_path / name).write_bytes(ED25519.read_bytes())
    with pytest.raises(PolicyFileError, match=r"keys\.0: key f963\w+ is listed twice in it"):
        parse_policy(HEAD + f"keys:\n  - dir: {tmp_path}\n", base=tmp_path)
