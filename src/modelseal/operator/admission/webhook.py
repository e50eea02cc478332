"""The validating admission webhook, served by the operator over HTTPS.

Three validating paths, ``/validate-pods``, ``/validate-inferenceservices`` and
``/validate-loraadapters``, answer AdmissionReviews from the verdicts the
reconciler keeps in memory and the InferenceServices it watched (see
:mod:`modelseal.operator.admission.decision`), and one mutating path,
``/mutate-pods``, gives a serving Pod the init container that checks its model
files (:mod:`modelseal.operator.podverify.mutation`): no API call per request. The
server (:mod:`modelseal.operator.admission.webhook_server`) gives every request
a deadline and holds a bounded number of connections. The certificate comes
from files (cert-manager's Secret, mounted; read again when the files change)
or, when none is given, is made at start: a self-signed ECDSA P-256
certificate for localhost, 127.0.0.1 and the listen address (for trying the
webhook locally; in a cluster, use cert-manager).
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import logging
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from modelseal.attest.verdict import Mode
from modelseal.operator.admission.decision import ServiceLookup, VerdictLookup, review_response
from modelseal.operator.admission.webhook_server import WebhookServer
from modelseal.operator.podverify.container import DEFAULT_IMAGE
from modelseal.operator.podverify.mutation import PATH as MUTATE_PODS
from modelseal.operator.podverify.mutation import mutation_response
from modelseal.operator.settings import WebhookSettings

__all__ = ["PATHS", "make_self_signed", "serve"]

_logger = logging.getLogger(__name__)
PATHS = ("validate-pods", "validate-inferenceservices", "validate-loraadapters", MUTATE_PODS)
SELF_SIGNED_DAYS = 365


def make_self_signed(names: Sequence[str], folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate and key for ``names`` in ``folder``; return (cert, key) paths."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0][:64])])
    sans: list[x509.GeneralName] = []
    for name in dict.fromkeys(names):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=SELF_SIGNED_DAYS))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "tls.crt", folder / "tls.key"
    key_path.touch(mode=0o600)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def _certificate(settings: WebhookSettings) -> tuple[str, str]:
    """The certificate and key files: the given ones, or a self-signed pair made now."""
    cert, key = settings.cert_file, settings.key_file
    if cert is not None and key is not None:
        return cert, key
    folder = Path(tempfile.mkdtemp(prefix="modelseal-webhook-"))
    names = ["localhost", "127.0.0.1"]
    if settings.host not in ("0.0.0.0", "::"):  # noqa: S104 - comparing, not binding
        names.insert(0, settings.host)
    cert_path, key_path = make_self_signed(names, folder)
    _logger.info("admission webhook: self-signed certificate for %s in %s", ", ".join(names), cert_path)
    return str(cert_path), str(key_path)


async def serve(
    settings: WebhookSettings,
    mode: Callable[[], Mode],
    lookup: VerdictLookup,
    services: ServiceLookup | None = None,
    *,
    allow_weight_paths: bool = False,
    verifier_image: str = DEFAULT_IMAGE,
    on_listening: Callable[[], None] | None = None,
) -> None:
    """Serve the webhook until cancelled.

    ``services`` finds a Pod's InferenceService (None: none is known, so a Pod labelled
    with one is denied in enforce mode); ``allow_weight_paths`` is
    ``--allow-unattested-weight-paths``; ``verifier_image`` is ``--verifier-image``.

    Raises:
        OSError: the address cannot be bound.
        InputError, ssl.SSLError: the certificate files cannot be read, or hold no certificate and key.
    """

    def unknown(_namespace: str, _name: str) -> None:
        return None

    def answer(review: Any, webhook: str) -> dict[str, Any]:
        if webhook not in PATHS:  # the API server calls only the registered paths: refuse the rest
            return review_response(review, Mode.ENFORCE, unknown, unknown)
        respond = mutation_response if webhook == MUTATE_PODS else review_response
        return respond(
            review, mode(), lookup, services or unknown, allow_weight_paths=allow_weight_paths,
            verifier_image=verifier_image,
        )  # fmt: skip

    server = WebhookServer(settings, *_certificate(settings), answer)
    try:
        await server.start()
        _logger.info(
            "admission webhook listening on %s:%d (deadline %gs, at most %d connections, bodies to %d bytes)",
            settings.host, server.port, server.deadline, settings.max_connections, settings.max_body,
        )  # fmt: skip
        if on_listening is not None:
            on_listening()
        await asyncio.Event().wait()  # until cancelled
    finally:
        await server.close()
