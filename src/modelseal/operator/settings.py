"""The operator's flags, validated with LLMKube's texts."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from modelseal import __version__
from modelseal.attest.policy.admission_policy import AdmissionPolicy
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.verdict import Mode
from modelseal.durations import parse_max_age
from modelseal.errors import UsageError
from modelseal.operator.admission import webhook_limits
from modelseal.operator.decide.policy_source import parse_policy_flag
from modelseal.operator.kube.names import parse_flag_ref
from modelseal.operator.sources.source_image import RegistryAccess
from modelseal.publish.registry.reference import parse_reference
from modelseal.text import one_line

__all__ = [
    "DEFAULT_PUBLISHER_IMAGE",
    "DEFAULT_VERIFIER_IMAGE",
    "GROUP",
    "PLURAL",
    "SERVICES",
    "VERSION",
    "OperatorSettings",
    "StatusMode",
    "WebhookSettings",
    "parse_listen",
    "parse_mode",
    "parse_signing_secret",
    "parse_trusted_keys",
    "verifier_image_warning",
]

GROUP = "inference.llmkube.dev"
VERSION = "v1alpha1"
PLURAL = "models"
SERVICES = "inferenceservices"
DEFAULT_PUBLISHER_IMAGE = f"modelseal:{__version__}"
DEFAULT_VERIFIER_IMAGE = DEFAULT_PUBLISHER_IMAGE


def parse_mode(text: str) -> Mode:
    """LLMKube's ``ParseAttestationMode``: trimmed, case-insensitive; empty is off.

    Raises:
        UsageError: ``invalid --model-attestation "x": want off, warn, or enforce``.
    """
    value = text.strip().lower()
    if value in ("", "off"):
        return Mode.OFF
    if value in ("warn", "enforce"):
        return Mode(value)
    raise UsageError(f'invalid --model-attestation "{text}": want off, warn, or enforce')


def parse_trusted_keys(text: str, mode: Mode) -> tuple[str, str] | None:
    """``namespace/name`` of the trusted keys ConfigMap; required unless the mode is off.

    Raises:
        UsageError: LLMKube's text when it is not namespace/name.
    """
    if mode is Mode.OFF and not text:
        return None
    flag = "--model-attestation-trusted-keys"
    shape = f'{flag} must be namespace/name when --model-attestation is warn or enforce (got "{text}")'
    return parse_flag_ref(text, flag, shape)


def parse_signing_secret(text: str | None, mode: Mode) -> tuple[str, str] | None:
    """``--publisher-signing-key-secret NAMESPACE/NAME``; only where the gate admits what is signed.

    Raises:
        UsageError: not namespace/name, or the gate is off (nothing would ever be signed).
    """
    if text is None:
        return None
    flag = "--publisher-signing-key-secret"
    found = parse_flag_ref(text, flag, f"{flag} must be namespace/name (got {text!r})", kind="name")
    if mode is Mode.OFF:
        raise UsageError(
            f"{flag} needs --model-attestation warn or enforce: a publication is signed only when its"
            " Model's attestation is admitted"
        )
    return found


class StatusMode(enum.Enum):
    """How much of a Model's status modelseal writes (see :mod:`modelseal.operator.status.modes`)."""

    FULL = "full"
    CONDITIONS = "conditions"

    @classmethod
    def parse(cls, text: str) -> StatusMode:
        """
        Raises:
            UsageError: neither full nor conditions.
        """
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise UsageError(f'invalid --model-status "{text}": want full or conditions') from None


@dataclass(frozen=True)
class WebhookSettings:
    """Where the admission webhook listens, its certificate files (None: self-signed at start), and
    what a client may hold: how long a request may take to arrive (handshake, headers and body),
    how many connections at once, and how large a body."""

    host: str
    port: int
    cert_file: str | None = None
    key_file: str | None = None
    deadline: timedelta = webhook_limits.DEADLINE
    max_connections: int = webhook_limits.MAX_CONNECTIONS
    max_body: int = webhook_limits.MAX_BODY


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6).

    Raises:
        UsageError: not host:port with a port from 1 to 65535.
    """
    host, sep, port = text.strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--admission-webhook {text!r}: give HOST:PORT, as in 0.0.0.0:9443")
    return host, int(port)


def _webhook(
    listen: str | None, cert: str | None, key: str | None, limits: tuple[timedelta, int, int]
) -> WebhookSettings | None:
    """
    Raises:
        UsageError: a certificate without its key (or the other way round), a missing file.
    """
    if listen is None:
        if cert or key:
            raise UsageError("--admission-webhook-cert and --admission-webhook-key need --admission-webhook")
        return None
    if bool(cert) != bool(key):
        raise UsageError("give both --admission-webhook-cert and --admission-webhook-key, or neither")
    for flag, path in (("--admission-webhook-cert", cert), ("--admission-webhook-key", key)):
        if path and not Path(path).is_file():
            raise UsageError(f"{flag} {path}: no such file")
    host, port = parse_listen(listen)
    return WebhookSettings(host, port, cert or None, key or None, *limits)


@dataclass(frozen=True)
class OperatorSettings:
    """Everything the operator's behaviour depends on."""

    mode: Mode = Mode.OFF
    trusted_keys: tuple[str, str] | None = None
    allow_conditions: bool = False
    max_age: timedelta | None = None
    policy: TrustPolicy | None = None
    recheck_interval: timedelta = timedelta(minutes=10)
    refused_retry: timedelta = timedelta(minutes=1)
    publisher_image: str = DEFAULT_PUBLISHER_IMAGE
    registry_access: RegistryAccess = field(default_factory=RegistryAccess)
    model_status: StatusMode = StatusMode.FULL
    webhook: WebhookSettings | None = None
    evict_on_revoke: bool = False
    #: prefetchOCI Jobs may download ``http://`` sources (labs only: nothing protects the bytes in transit)
    allow_plain_http_sources: bool = False
    #: (namespace, name): the Secret whose ``signing.key`` publication Jobs sign with, and the ConfigMap
    #: whose ``*.pub`` entries admit what they signed (:mod:`modelseal.operator.decide.attached_gate`)
    publisher_signing: tuple[str, str] | None = None
    #: admit a pinned ``oci://`` Model without ``spec.attestation`` by an attestation attached to its image
    discover_image_attestations: bool = False
    #: judge such a Model by an admission policy instead: a file's, or the ConfigMap (namespace, name)'s
    admission_policy: AdmissionPolicy | None = None
    admission_policy_ref: tuple[str, str] | None = None
    #: ``--allow-unattested-weight-paths``: the webhook admits weights no Model attests (LoRA and draft
    #: paths, volumes, LoRAAdapters, ...; :mod:`modelseal.operator.admission.served_weights`), with a warning
    allow_unattested_weight_paths: bool = False
    #: ``--verifier-image``: the image of a serving Pod's ``modelseal-verify`` init container (the
    #: operator's own; :mod:`modelseal.operator.podverify`)
    verifier_image: str = DEFAULT_VERIFIER_IMAGE

    @property
    def trusted_keys_ref(self) -> str:
        """``namespace/name``, for messages."""
        return "/".join(self.trusted_keys) if self.trusted_keys else ""

    @property
    def discovers(self) -> bool:
        """Whether attestations attached to a Model's image are looked for (either flag)."""
        return self.mode is not Mode.OFF and (
            self.discover_image_attestations or self.publisher_signing is not None or self.admits_by_policy
        )

    @property
    def admits_by_policy(self) -> bool:
        """Whether an admission policy (a file's or a ConfigMap's) judges what is attached to an image."""
        return self.admission_policy is not None or self.admission_policy_ref is not None

    @classmethod
    def from_flags(
        cls,
        *,
        mode: str,
        trusted_keys: str = "",
        allow_conditions: bool = False,
        max_age: str = "0",
        policy_file: str | None = None,
        recheck_interval: str = "10m",
        publisher_image: str | None = None,
        registry_config: str | None = None,
        registry_ca_file: str | None = None,
        plain_http_registries: tuple[str, ...] = (),
        model_status: str = "full",
        admission_webhook: str | None = None,
        admission_webhook_cert: str | None = None,
        admission_webhook_key: str | None = None,
        admission_webhook_deadline: str | None = None,
        admission_webhook_max_connections: int | None = None,
        admission_webhook_max_body: str | None = None,
        evict_on_revoke: bool = False,
        allow_plain_http_sources: bool = False,
        publisher_signing_key_secret: str | None = None,
        discover_image_attestations: bool = False,
        allow_unattested_weight_paths: bool = False,
        verifier_image: str | None = None,
    ) -> OperatorSettings:
        """Validate the flags as LLMKube does, plus modelseal's own.

        Raises:
            UsageError: a flag is invalid; PolicyFileError, KeyFileError: the policy file.
        """
        parsed_mode = parse_mode(mode)
        try:
            age = parse_max_age(max_age)
        except ValueError as e:
            raise UsageError(f"--model-attestation-max-age: {e}") from None
        try:
            recheck = parse_max_age(recheck_interval)
        except ValueError as e:
            raise UsageError(f"--recheck-interval: {e}") from None
        if recheck < timedelta(seconds=10):
            raise UsageError("--recheck-interval must be at least 10s")
        loaded, admission_ref = parse_policy_flag(policy_file, parsed_mode)
        admission = loaded if isinstance(loaded, AdmissionPolicy) else None
        policy = loaded if isinstance(loaded, TrustPolicy) else None
        judged_by = policy or admission or admission_ref
        keys = parse_trusted_keys(trusted_keys, parsed_mode) if (trusted_keys or not judged_by) else None
        if discover_image_attestations and parsed_mode is Mode.OFF:
            raise UsageError("--discover-image-attestations needs --model-attestation warn or enforce")
        if (
            parsed_mode is not Mode.OFF
            and keys is None
            and policy is None
            and not (admission or admission_ref)
        ):
            raise UsageError(
                "--model-attestation-trusted-keys must be namespace/name when --model-attestation is warn"
                ' or enforce (got "")'
            )
        limits = webhook_limits.parse_limits(
            admission_webhook is not None, admission_webhook_deadline, admission_webhook_max_connections,
            admission_webhook_max_body,
        )  # fmt: skip
        if allow_unattested_weight_paths and admission_webhook is None:
            raise UsageError(
                "--allow-unattested-weight-paths needs --admission-webhook (it is what it allows)"
            )
        signing = parse_signing_secret(publisher_signing_key_secret, parsed_mode)
        if signing is not None and signing == keys:  # its keys would admit images as the publisher's
            raise UsageError(
                f"--publisher-signing-key-secret {'/'.join(signing)} names the trusted keys ConfigMap:"
                " give the publisher's public keys a ConfigMap of their own"
            )
        return cls(
            mode=parsed_mode,
            trusted_keys=keys,
            allow_conditions=allow_conditions or (policy.allow_conditions if policy else False),
            max_age=age if age > timedelta(0) else (policy.max_age if policy else None),
            policy=policy,
            recheck_interval=recheck,
            publisher_image=DEFAULT_PUBLISHER_IMAGE if publisher_image is None else _image(publisher_image),
            registry_access=_registry_access(registry_config, registry_ca_file, plain_http_registries),
            model_status=StatusMode.parse(model_status),
            webhook=_webhook(admission_webhook, admission_webhook_cert, admission_webhook_key, limits),
            evict_on_revoke=evict_on_revoke,
            allow_plain_http_sources=allow_plain_http_sources,
            publisher_signing=signing,
            discover_image_attestations=discover_image_attestations,
            admission_policy=admission,
            admission_policy_ref=admission_ref,
            allow_unattested_weight_paths=allow_unattested_weight_paths,
            verifier_image=_image(verifier_image, "--verifier-image") if verifier_image is not None else (
                DEFAULT_VERIFIER_IMAGE if publisher_image is None else _image(publisher_image)),
        )  # fmt: skip


def _image(text: str, flag: str = "--publisher-image") -> str:
    """An image modelseal's own Jobs or init containers run.

    Raises:
        UsageError: empty or with whitespace.
    """
    value = text.strip()
    if not value or any(ch.isspace() for ch in value):
        raise UsageError(f"{flag} {text!r}: give an image reference, as in ghcr.io/org/modelseal:0.1.0")
    return value


def verifier_image_warning(image: str) -> str | None:
    """Why ``--verifier-image`` leaves what every serving Pod's verifier runs to someone else (None:
    it is a registry host's image pinned by digest). A tag is what whoever can push it makes it;
    a name without a registry host is resolved by the node's container runtime, which may search
    several registries (short-name resolution) and take the first that has it."""
    try:
        pinned = parse_reference(image).digest is not None
    except UsageError:
        return (f"--verifier-image {one_line(image, 200)} is not registry/repository pinned by digest: a"
                " name without a registry host is resolved by the node's container runtime (a short"
                " name can be found on any registry it searches), a tag is what whoever can push"
                " it makes it; give registry/repository@sha256:... (kustomize images: digest:)")  # fmt: skip
    if pinned:
        return None
    return (f"--verifier-image {one_line(image, 200)} is not pinned by digest: whoever can push that tag"
            " decides what every serving Pod's verifier runs; give registry/repository@sha256:..."
            " (kustomize images: with digest:)")  # fmt: skip


def _registry_access(config: str | None, ca_file: str | None, plain_http: tuple[str, ...]) -> RegistryAccess:
    """Check the registry flags now, so a typo fails at start rather than at the first oci:// Model.

    Raises:
        UsageError: a named file is missing, or a host is malformed.
    """
    for flag, path in (("--registry-config", config), ("--registry-ca-file", ca_file)):
        if path is not None and not Path(path).is_file():
            raise UsageError(f"{flag} {path}: no such file")
    for host in plain_http:
        if not host or "/" in host or any(ch.isspace() for ch in host):
            raise UsageError(f"--plain-http {host!r}: give a host[:port]")
    return RegistryAccess(docker_config=config, ca_file=ca_file, plain_http=frozenset(plain_http))
