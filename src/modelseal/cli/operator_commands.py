"""``modelseal operator run``: the kopf operator with LLMKube's attestation flags."""

from __future__ import annotations

import argparse
import errno
import logging
import os
from typing import TYPE_CHECKING

from modelseal.errors import OperationalError, UsageError

if TYPE_CHECKING:
    from modelseal.operator.replicas.flags import ReplicaSettings
    from modelseal.operator.settings import OperatorSettings

__all__ = ["add_operator"]

#: where /metrics listens (a pod's port)
_ALL = "0.0.0.0"  # noqa: S104


def _go_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "t", "true"):
        return True
    if value in ("0", "f", "false"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value {text!r}")


def add_operator(op: argparse.ArgumentParser) -> None:
    """``operator``'s commands (``operator run``)."""
    sub = op.add_subparsers(dest="operator_command", metavar="COMMAND", parser_class=type(op))
    run = sub.add_parser("run", help="gate Model Ready on an admitted attestation")
    scope = run.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace", "-n", action="append", metavar="NS", help="watch this namespace (repeat)"
    )
    scope.add_argument(
        "--all-namespaces", "-A", action="store_true", help="watch every namespace (the default)"
    )
    run.add_argument("--model-attestation", default="off", metavar="MODE",
                     help="off (default), warn (report, never block) or enforce")  # fmt: skip
    run.add_argument("--model-attestation-trusted-keys", default="", metavar="NAMESPACE/NAME",
                     help="the ConfigMap whose *.pub entries are the trusted keys")  # fmt: skip
    run.add_argument(
        "--model-attestation-allow-conditions",
        nargs="?",
        const=True,
        default=False,
        type=_go_bool,
        metavar="BOOL",
        help="also admit authorized_with_conditions",
    )
    run.add_argument("--model-attestation-max-age", default="0", metavar="DURATION",
                     help="refuse attestations issued longer ago (2160h, 90d); 0 disables")  # fmt: skip
    run.add_argument(
        "--model-attestation-policy",
        metavar="FILE|NS/NAME",
        help="a TrustPolicy or AdmissionPolicy file, or the ConfigMap whose policy.yaml is an AdmissionPolicy"
        " (NAMESPACE/NAME)",
    )
    run.add_argument("--recheck-interval", default="10m", metavar="DURATION",
                     help="re-verify admitted Models this often (default 10m)")  # fmt: skip
    run.add_argument("--publisher-image", metavar="IMAGE",
                     help="the modelseal image prefetchOCI Jobs run (default: $MODELSEAL_PUBLISHER_IMAGE,"
                          " else modelseal:VERSION)")  # fmt: skip
    run.add_argument("--verifier-image", metavar="IMAGE",
                     help="the modelseal image of a serving Pod's modelseal-verify init container (default:"
                          " $MODELSEAL_VERIFIER_IMAGE, else the publisher image)")  # fmt: skip
    run.add_argument("--registry-config", metavar="FILE",
                     help="docker config.json with credentials for reading oci:// sources")  # fmt: skip
    run.add_argument("--registry-ca-file", metavar="FILE", help="CA bundle for registries with a private CA")
    # --plain-http as publish spells it, naming the registry; --plain-http-registry is the old spelling
    run.add_argument("--plain-http", dest="plain_http_registry", action="append", default=[],
                     metavar="HOST[:PORT]",
                     help="talk plain HTTP to this registry (labs and tests only; repeat)")  # fmt: skip
    run.add_argument(
        "--plain-http-registry", dest="plain_http_registry", action="append", help=argparse.SUPPRESS
    )
    run.add_argument("--model-status", default="full", metavar="MODE",
                     help="full: write phase and conditions (modelseal is the only Model controller);"
                     " conditions: only modelseal.dev/ conditions, beside LLMKube's controller")  # fmt: skip
    run.add_argument("--admission-webhook", metavar="HOST:PORT",
                     help="serve the admission webhooks (HTTPS) here")  # fmt: skip
    run.add_argument("--admission-webhook-cert", metavar="FILE", help="the webhook's certificate (PEM)")
    run.add_argument("--admission-webhook-key", metavar="FILE",
                     help="its key (PEM); without both, a self-signed one is made at start")  # fmt: skip
    run.add_argument("--admission-webhook-deadline", metavar="DURATION",
                     help="a request's handshake, headers and body come in this (default 10s)")  # fmt: skip
    run.add_argument("--admission-webhook-max-connections", type=int, metavar="N",
                     help="connections held at once (default 128); more wait or replace stalled")  # fmt: skip
    run.add_argument("--admission-webhook-max-body", metavar="SIZE",
                     help="the largest AdmissionReview accepted (default 256Ki)")  # fmt: skip
    run.add_argument("--evict-on-revoke", action="store_true",
                     help="enforce: evict the running Pods of a Model that turns refused")  # fmt: skip
    run.add_argument("--allow-plain-http-sources", action="store_true",
                     help="prefetchOCI Jobs may download http:// sources (labs only)")  # fmt: skip
    run.add_argument("--publisher-signing-key-secret", metavar="NAMESPACE/NAME",
                     help="prefetchOCI Jobs in NAMESPACE sign what they publish with this Secret's"
                     " signing.key; the ConfigMap NAMESPACE/NAME's *.pub entries admit it")  # fmt: skip
    run.add_argument("--discover-image-attestations", action="store_true",
                     help="admit a pinned oci:// Model without spec.attestation by an attestation attached"
                     " to its image")  # fmt: skip
    run.add_argument("--allow-unattested-weight-paths", action="store_true",
                     help="the webhook admits weights no Model attests (LoRA and draft paths, volumes,"
                     " LoRAAdapters) with a warning; enforce refuses them without it")  # fmt: skip
    run.add_argument("--metrics-port", type=int, default=8080, metavar="PORT", help="/metrics port (0: off)")
    run.add_argument("--liveness", default="http://0.0.0.0:8081/healthz", metavar="URL",
                     help="kopf's liveness endpoint ('' to disable)")  # fmt: skip
    run.add_argument("--readiness", default="http://0.0.0.0:8082/readyz", metavar="URL",
                     help="200 once the watches have synced, else 503 ('' to disable)")  # fmt: skip
    run.add_argument("--leader-elect", action="store_true",
                     help="write (status, Events, evictions, Jobs) only while holding a Lease; every"
                     " replica judges and answers admission")  # fmt: skip
    run.add_argument("--leader-elect-lease", metavar="NAMESPACE/NAME",
                     help="the Lease (default modelseal-system/modelseal-operator)")  # fmt: skip
    run.add_argument("--leader-elect-identity", metavar="ID",
                     help="this replica's holderIdentity (default: $POD_NAME, else HOST_PID)")  # fmt: skip
    run.set_defaults(handler=run_cmd)


def install_hint() -> str:
    """How to add the operator's extra here: from the source tree this modelseal runs from, or
    beside an installed wheel (modelseal is not published on PyPI, so ``modelseal[operator]`` is
    no package pip can find)."""
    from pathlib import Path

    import modelseal

    root = Path(modelseal.__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "src" / "modelseal").is_dir():
        return f"pip install '{root}[operator]' (in a source tree: pip install '.[operator]')"
    return "pip install kopf prometheus-client into the environment modelseal is installed in"


def _addresses(
    args: argparse.Namespace, settings: OperatorSettings, replicas: ReplicaSettings
) -> list[tuple[str, str, str, int, str]]:
    """(flag, as given, host, port, what to do instead) for each address the operator listens on."""
    from urllib.parse import urlsplit

    found = []
    if args.metrics_port:
        found.append(
            ("--metrics-port", str(args.metrics_port), _ALL, args.metrics_port, ", or 0 to turn it off")
        )
    if args.liveness:
        url = urlsplit(args.liveness)
        try:
            port = url.port
        except ValueError:
            port = None
        if url.hostname and port:
            found.append(("--liveness", args.liveness, url.hostname, port, ", or '' to turn it off"))
    if replicas.readiness is not None:
        ready = replicas.readiness
        found.append(("--readiness", ready.url, ready.host, ready.port, ", or '' to turn it off"))
    if settings.webhook is not None:
        webhook = settings.webhook
        found.append(("--admission-webhook", args.admission_webhook, webhook.host, webhook.port, ""))
    return found


def _check_addresses(found: list[tuple[str, str, str, int, str]]) -> None:
    """Raise when two flags name one port, or an address cannot be listened on now."""
    seen: dict[int, str] = {}
    for flag, given, host, port, instead in found:
        if port in seen:
            raise OperationalError(
                f"{flag} {given}: port {port} is also {seen[port]}'s; give another{instead}"
            )
        seen[port] = flag
        _free(flag, given, host, port, instead)


def _free(flag: str, given: str, host: str, port: int, instead: str) -> None:
    """Raise when ``host:port`` cannot be listened on now (taken, or no such address here)."""
    from modelseal.operator.admission.webhook_tls import listen

    try:
        listen(host, port, backlog=1).close()
    except OSError as e:
        raise _taken(flag, given, host, port, e, instead) from None


def _taken(flag: str, given: str, host: str, port: int, error: OSError, instead: str) -> OperationalError:
    why = (
        "is in use (another operator or server listens there)"
        if error.errno == errno.EADDRINUSE
        else (f"cannot be listened on: {error.strerror or error}")
    )
    return OperationalError(f"{flag} {given}: {host}:{port} {why}; give another{instead}")


def run_cmd(args: argparse.Namespace) -> int:
    """Build the operator from the flags and run it until interrupted."""
    try:
        import kopf

        from modelseal.attest.verdict import Mode
        from modelseal.operator.handlers import build_registry, configure, namespace_scope
        from modelseal.operator.metrics import OperatorMetrics
        from modelseal.operator.reconciler import Reconciler
        from modelseal.operator.replicas.flags import ReplicaSettings
        from modelseal.operator.replicas.replication import Replication
        from modelseal.operator.settings import OperatorSettings, verifier_image_warning
    except ImportError as e:  # an environment problem, not a usage one: exit 3
        raise OperationalError(
            f"the operator needs its extra ({e.name} is missing): {install_hint()}"
        ) from None
    settings = OperatorSettings.from_flags(
        mode=args.model_attestation,
        trusted_keys=args.model_attestation_trusted_keys,
        allow_conditions=args.model_attestation_allow_conditions,
        max_age=args.model_attestation_max_age,
        policy_file=args.model_attestation_policy,
        recheck_interval=args.recheck_interval,
        # deploy/ sets MODELSEAL_PUBLISHER_IMAGE from the operator's own image
        publisher_image=args.publisher_image or os.environ.get("MODELSEAL_PUBLISHER_IMAGE") or None,
        registry_config=args.registry_config,
        registry_ca_file=args.registry_ca_file,
        plain_http_registries=tuple(args.plain_http_registry),
        model_status=args.model_status,
        admission_webhook=args.admission_webhook,
        admission_webhook_cert=args.admission_webhook_cert,
        admission_webhook_key=args.admission_webhook_key,
        admission_webhook_deadline=args.admission_webhook_deadline,
        admission_webhook_max_connections=args.admission_webhook_max_connections,
        admission_webhook_max_body=args.admission_webhook_max_body,
        evict_on_revoke=args.evict_on_revoke,
        allow_plain_http_sources=args.allow_plain_http_sources,
        publisher_signing_key_secret=args.publisher_signing_key_secret,
        discover_image_attestations=args.discover_image_attestations,
        allow_unattested_weight_paths=args.allow_unattested_weight_paths,
        # deploy/ sets MODELSEAL_VERIFIER_IMAGE from the operator's own image, as the publisher's
        verifier_image=args.verifier_image or os.environ.get("MODELSEAL_VERIFIER_IMAGE") or None,
    )
    replicas = ReplicaSettings.from_flags(
        leader_elect=args.leader_elect, lease=args.leader_elect_lease, identity=args.leader_elect_identity,
        readiness=args.readiness,
    )  # fmt: skip
    if not 0 <= args.metrics_port <= 65535:
        raise UsageError("--metrics-port must be between 0 and 65535")
    # every address the operator will listen on, tried before anything starts: a taken one is one line
    # naming its flag, not a crash of the metrics thread or kopf retrying the webhook (issue 31, point 11)
    _check_addresses(_addresses(args, settings, replicas))
    from modelseal.operator.kube.cluster_access import find_cluster

    cluster = find_cluster()  # before kopf, whose login would log tracebacks and retry
    logging.getLogger("modelseal").setLevel(logging.INFO)
    logging.info("logging in with %s", cluster)
    logging.info(
        "model attestation policy: mode=%s trustedKeys=%s allowConditions=%s maxAge=%s modelStatus=%s"
        " publisherSigning=%s discoverImageAttestations=%s allowUnattestedWeightPaths=%s verifierImage=%s",
        settings.mode.value, settings.trusted_keys_ref, settings.allow_conditions, settings.max_age,
        settings.model_status.value, "/".join(settings.publisher_signing or ()) or "off",
        settings.discover_image_attestations, settings.allow_unattested_weight_paths, settings.verifier_image,
    )  # fmt: skip
    unpinned = verifier_image_warning(settings.verifier_image)
    if unpinned is not None and settings.mode is Mode.ENFORCE:
        logging.warning("%s", unpinned)
    metrics = OperatorMetrics()
    if args.metrics_port:
        try:
            metrics.serve(args.metrics_port)
        except OSError as e:  # taken since it was tried
            raise _taken("--metrics-port", str(args.metrics_port), _ALL, args.metrics_port, e, "") from None
    if replicas.leader_elect:
        logging.info("leader election: Lease %s, identity %s", "/".join(replicas.lease), replicas.identity)
    reconciler = Reconciler(settings, metrics=metrics)
    listed, watched = namespace_scope(args.namespace or ())
    replication = Replication(replicas, reconciler, metrics, namespaces=listed, watched=watched)
    registry = build_registry(reconciler, replicas=replication)
    kopf_settings = kopf.OperatorSettings()
    configure(kopf_settings)
    import asyncio

    asyncio.run(
        kopf.operator(
            registry=registry,
            settings=kopf_settings,
            standalone=True,
            clusterwide=not args.namespace,
            namespaces=args.namespace or (),
            liveness_endpoint=args.liveness or None,
        )
    )
    return 0
