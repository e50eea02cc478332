"""LLMKube's flag validation (ParseAttestationMode and the trusted-keys reference)."""

from datetime import timedelta
from pathlib import Path

import pytest

from modelseal.attest.verdict import Mode
from modelseal.errors import UsageError
from modelseal.operator.admission import webhook_limits
from modelseal.operator.settings import (
    DEFAULT_VERIFIER_IMAGE,
    OperatorSettings,
    parse_mode,
    verifier_image_warning,
)
from tests.cli.conftest import Run

POLICIES = Path(__file__).resolve().parents[2] / "policies"


@pytest.mark.parametrize(
    ("text", "mode"),
    [
        ("", Mode.OFF),
        ("off", Mode.OFF),
        ("warn", Mode.WARN),
        ("ENFORCE", Mode.ENFORCE),
        (" Warn ", Mode.WARN),
    ],
)
def test_parse_mode(text: str, mode: Mode) -> None:
    assert parse_mode(text) is mode


def test_parse_mode_refuses() -> None:
    with pytest.raises(UsageError, match='invalid --model-attestation "strict": want off, warn, or enforce'):
        parse_mode("strict")


@pytest.mark.parametrize("keys", ["", "name-only", "/name", "ns/", "a/b/c"])
def test_trusted_keys_must_be_namespace_name(keys: str) -> None:
    with pytest.raises(
        UsageError,
        match="--model-attestation-trusted-keys must be namespace/name when --model-attestation is warn or enforce",
    ):
        OperatorSettings.from_flags(mode="enforce", trusted_keys=keys)


@pytest.mark.parametrize(
    "keys", ["../kube-system/x", "ns/../../x", "NS/keys", "ns/Keys", "ns/k%2Fx", "a.b/keys"]
)
def test_trusted_keys_must_be_kubernetes_names(keys: str) -> None:
    with pytest.raises(UsageError, match=r"is not a valid|must be namespace/name"):
        OperatorSettings.from_flags(mode="enforce", trusted_keys=keys)


def test_flags() -> None:
    s = OperatorSettings.from_flags(mode="warn", trusted_keys="llmkube-system/socair-trusted-keys",
                                    allow_conditions=True, max_age="2160h", recheck_interval="1h")  # fmt: skip
    assert (s.mode, s.trusted_keys, s.allow_conditions, s.max_age, s.recheck_interval) == (
        Mode.WARN, ("llmkube-system", "socair-trusted-keys"), True, timedelta(hours=2160), timedelta(hours=1),
    )  # fmt: skip
    assert OperatorSettings.from_flags(mode="off").trusted_keys is None
    assert OperatorSettings.from_flags(mode="enforce", trusted_keys="a/b", max_age="0").max_age is None


def test_policy_file_replaces_the_keys_flag() -> None:
    s = OperatorSettings.from_flags(mode="enforce", policy_file=str(POLICIES / "socair-conditional-90d.yaml"))
    assert s.trusted_keys is None and s.policy is not None and len(s.policy.keys) == 1
    assert s.allow_conditions and s.max_age == timedelta(days=90)


def test_registry_and_publisher_flags(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text("{}")
    s = OperatorSettings.from_flags(mode="off", publisher_image="ghcr.io/x/modelseal:1", registry_config=str(config),
                                    plain_http_registries=("127.0.0.1:5000",))  # fmt: skip
    assert s.publisher_image == "ghcr.io/x/modelseal:1"
    assert s.registry_access.docker_config == str(config)
    assert s.registry_access.plain_http == frozenset({"127.0.0.1:5000"})
    assert OperatorSettings.from_flags(mode="off").publisher_image == "modelseal:0.1.0"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--model-attestation=strict"], 'invalid --model-attestation "strict": want off, warn, or enforce'),
        (["--model-attestation=enforce"], "--model-attestation-trusted-keys must be namespace/name"),
        (["--model-attestation=warn", "--model-attestation-trusted-keys=x"], '(got "x")'),
        (["--model-attestation=enforce", "--model-attestation-trusted-keys=a/b", "--model-attestation-max-age=soon"],
         "--model-attestation-max-age: invalid duration"),
        (["--model-attestation=enforce", "--model-attestation-trusted-keys=a/b", "--recheck-interval=1s"],
         "--recheck-interval must be at least 10s"),
        (["--model-attestation-allow-conditions=maybe"], "invalid boolean value 'maybe'"),
        (["--namespace", "a", "--all-namespaces"], "--all-namespaces and --namespace exclude each other"),
        (["--publisher-image= "], "--publisher-image ' ': give an image reference"),
        (["--registry-config=/nonexistent/config.json"], "--registry-config /nonexistent/config.json: no such file"),
        (["--registry-ca-file=/nonexistent/ca.pem"], "--registry-ca-file /nonexistent/ca.pem: no such file"),
        (["--plain-http-registry=http://r.example.com"], "--plain-http 'http://r.example.com': give a host[:port]"),
        (["--publisher-signing-key-secret=publishing/key"],
         "--publisher-signing-key-secret needs --model-attestation warn or enforce"),
        (["--model-attestation=enforce", "--model-attestation-trusted-keys=a/b", "--publisher-signing-key-secret=key"],
         "--publisher-signing-key-secret must be namespace/name (got 'key')"),
        (["--model-attestation=enforce", "--model-attestation-trusted-keys=a/b",
          "--publisher-signing-key-secret=Publishing/key"], "is not a valid"),
        (["--discover-image-attestations"], "--discover-image-attestations needs --model-attestation warn or enforce"),
        (["--model-attestation=enforce", "--model-attestation-trusted-keys=a/b", "--publisher-signing-key-secret=a/b"],
         "--publisher-signing-key-secret a/b names the trusted keys ConfigMap"),  # trusted keys as the publisher's
        (["--admission-webhook-deadline=10s"], "--admission-webhook-deadline needs --admission-webhook"),
        (["--admission-webhook-max-connections=5"], "--admission-webhook-max-connections needs --admission-webhook"),
        (["--admission-webhook=127.0.0.1:9443", "--admission-webhook-deadline=500ms"],
         "--admission-webhook-deadline '500ms': give a duration from 1s to 60s"),
        (["--admission-webhook=127.0.0.1:9443", "--admission-webhook-deadline=2m"], "from 1s to 60s"),
        (["--admission-webhook=127.0.0.1:9443", "--admission-webhook-deadline=soon"],
         "--admission-webhook-deadline: invalid duration"),
        (["--admission-webhook=127.0.0.1:9443", "--admission-webhook-max-connections=0"],
         "--admission-webhook-max-connections 0: give a number from 1 to 4096"),
        (["--admission-webhook=127.0.0.1:9443", "--admission-webhook-max-connections=many"], "invalid int value"),
        (["--admission-webhook=127.0.0.1:9443", "--admission-webhook-max-body=1Gi"],
         "--admission-webhook-max-body '1Gi': give a size from 16Ki to 3Mi"),
        (["--admission-webhook=127.0.0.1:9443", "--admission-webhook-max-body=\uff11Mi"], "give a size from 16Ki"),
        (["--admission-webhook=127.0.0.1:9443", "--admission-webhook-max-body=-1"], "give a size from 16Ki"),
    ],
)  # fmt: skip
def test_operator_run_flag_errors(cli: Run, flags: list[str], message: str) -> None:
    r = cli("operator", "run", *flags)
    assert r.code == 2 and r.err.startswith("error: ") and message in r.err.splitlines()[0], r.err


def test_image_attestation_flags() -> None:
    off = OperatorSettings.from_flags(mode="enforce", trusted_keys="a/b")
    assert (off.publisher_signing, off.discover_image_attestations, off.discovers) == (None, False, False)
    signing = OperatorSettings.from_flags(mode="enforce", trusted_keys="a/b",
                                          publisher_signing_key_secret="publishing/publisher-key")  # fmt: skip
    assert signing.publisher_signing == ("publishing", "publisher-key") and signing.discovers
    assert not signing.discover_image_attestations  # the publisher's keys only: see attached_gate
    discover = OperatorSettings.from_flags(mode="warn", trusted_keys="a/b", discover_image_attestations=True)
    assert discover.discovers and discover.publisher_signing is None


def test_webhook_limit_flags() -> None:
    default = OperatorSettings.from_flags(mode="off", admission_webhook="0.0.0.0:9443").webhook
    assert default is not None and default.deadline == webhook_limits.DEADLINE
    assert (default.max_connections, default.max_body) == (
        webhook_limits.MAX_CONNECTIONS,
        webhook_limits.MAX_BODY,
    )
    given = OperatorSettings.from_flags(
        mode="off", admission_webhook="0.0.0.0:9443", admission_webhook_deadline="5s",
        admission_webhook_max_connections=300, admission_webhook_max_body="1Mi",
    ).webhook  # fmt: skip
    assert given is not None and given.deadline == timedelta(seconds=5)
    assert (given.max_connections, given.max_body) == (300, 1024 * 1024)
    assert OperatorSettings.from_flags(mode="off").webhook is None


def test_unattested_weight_paths_are_refused_unless_the_flag_allows_them() -> None:
    base = {"mode": "enforce", "trusted_keys": "ns/keys", "admission_webhook": "127.0.0.1:9443"}
    assert OperatorSettings.from_flags(**base).allow_unattested_weight_paths is False  # type: ignore[arg-type]
    allowed = OperatorSettings.from_flags(**base, allow_unattested_weight_paths=True)  # type: ignore[arg-type]
    assert allowed.allow_unattested_weight_paths is True
    with pytest.raises(UsageError, match="--allow-unattested-weight-paths needs --admission-webhook"):
        OperatorSettings.from_flags(
            mode="enforce", trusted_keys="ns/keys", allow_unattested_weight_paths=True
        )


def test_the_verifier_image_is_the_operators_own_unless_told() -> None:
    assert OperatorSettings.from_flags(mode="off").verifier_image == "modelseal:0.1.0"
    follows = OperatorSettings.from_flags(mode="off", publisher_image="ghcr.io/x/modelseal:1")
    assert follows.verifier_image == "ghcr.io/x/modelseal:1"
    own = OperatorSettings.from_flags(mode="off", publisher_image="a/p:1", verifier_image=" ghcr.io/x/v:2 ")
    assert own.verifier_image == "ghcr.io/x/v:2"
    for bad in ("", "a b"):
        with pytest.raises(UsageError, match="--verifier-image"):
            OperatorSettings.from_flags(mode="off", verifier_image=bad)


@pytest.mark.parametrize(
    ("image", "said"),
    [
        (
            DEFAULT_VERIFIER_IMAGE,
            "a name without a registry host is resolved by the node's container runtime",
        ),
        ("modelseal@sha256:" + "a" * 64, "a name without a registry host is resolved"),
        ("ghcr.io/acme/modelseal:0.1.0", "is not pinned by digest: whoever can push that tag decides"),
        ("ghcr.io/acme/modelseal:0.1.0\x1b[2K", "ghcr.io/acme/modelseal:0.1.0\\x1b[2K is not"),
    ],
)
def test_a_verifier_image_others_can_repoint_is_warned_of(image: str, said: str) -> None:
    """Red team 2: the default (and any tag) lets whoever can push it, or a registry a node's short-name
    resolution searches first, decide what checks every serving Pod; the operator said nothing."""
    warning = verifier_image_warning(image)
    assert warning is not None and said in warning and "\x1b" not in warning, warning
    assert verifier_image_warning("ghcr.io/acme/modelseal@sha256:" + "a" * 64) is None
