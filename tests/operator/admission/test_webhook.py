"""The webhook server over real HTTPS: certificates, paths, AdmissionReview bodies."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509

from modelseal.attest.verdict import Mode
from modelseal.errors import UsageError
from modelseal.operator.admission.decision import MODEL_LABEL, ModelVerdict
from modelseal.operator.admission.webhook import make_self_signed, serve
from modelseal.operator.settings import WebhookSettings, parse_listen

VERDICTS = {
    ("ml", "good"): (1, ModelVerdict(1, True, "ok")),
    ("ml", "bad"): (1, ModelVerdict(1, False, "no")),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def review(model: str) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "abc", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
                        "namespace": "ml", "userInfo": {"username": "system:serviceaccount:ml:deployer"},
                        "object": {"metadata": {"labels": {MODEL_LABEL: model}}}}}  # fmt: skip


@asynccontextmanager
async def webhook(settings: WebhookSettings, mode: Mode = Mode.ENFORCE) -> AsyncIterator[None]:
    listening = asyncio.Event()
    task = asyncio.create_task(serve(settings, lambda: mode, lambda ns, n: VERDICTS.get((ns, n)),
                                     on_listening=listening.set))  # fmt: skip
    try:
        await asyncio.wait_for(listening.wait(), 10)
        yield
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_answers_over_https_with_the_given_certificate(tmp_path: Path) -> None:
    cert, key = make_self_signed(["modelseal-webhook.modelseal-system.svc", "127.0.0.1"], tmp_path)
    port = free_port()
    async with (
        webhook(WebhookSettings("127.0.0.1", port, str(cert), str(key))),
        httpx.AsyncClient(verify=ssl.create_default_context(cafile=str(cert))) as client,
    ):
        url = f"https://127.0.0.1:{port}"
        allowed = (await client.post(f"{url}/validate-pods", json=review("good"))).json()
        assert allowed["response"] == {"uid": "abc", "allowed": True}
        denied = (await client.post(f"{url}/validate-pods", json=review("bad"))).json()["response"]
        assert denied["allowed"] is False and "is not admitted: no" in denied["status"]["message"]
        unknown = (await client.post(f"{url}/validate-inferenceservices", json=review("other"))).json()
        assert unknown["response"]["allowed"] is False
        stray = (await client.post(f"{url}/mutate-anything", json=review("good"))).json()
        assert stray["response"]["allowed"] is False
        garbage = await client.post(f"{url}/validate-pods", content=b"{not json")
        assert garbage.status_code == 400


async def test_without_a_certificate_it_makes_a_self_signed_one() -> None:
    port = free_port()
    async with webhook(WebhookSettings("127.0.0.1", port), Mode.WARN):
        pem = await asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", port))
        names = x509.load_pem_x509_certificate(pem.encode()).extensions.get_extension_for_class(
            x509.SubjectAlternativeName
        )
        assert "localhost" in names.value.get_values_for_type(x509.DNSName)
        context = ssl.create_default_context(cadata=pem)
        async with httpx.AsyncClient(verify=context) as client:
            warned = (await client.post(f"https://127.0.0.1:{port}/validate-pods", json=review("bad"))).json()
    assert warned["response"]["allowed"] is True and warned["response"]["warnings"]


async def test_plain_http_is_not_served() -> None:
    port = free_port()
    async with webhook(WebhookSettings("127.0.0.1", port)), httpx.AsyncClient() as client:
        with pytest.raises(httpx.HTTPError):
            await client.post(f"http://127.0.0.1:{port}/validate-pods", json=review("good"))


@pytest.mark.parametrize(
    "text", ["9443", ":9443", "host:", "host:0", "host:65536", "host:\uff19443", "[::1]"]
)
def test_listen_address_is_checked(text: str) -> None:
    with pytest.raises(UsageError, match="give HOST:PORT"):
        parse_listen(text)


def test_listen_address_forms() -> None:
    assert parse_listen("0.0.0.0:9443") == ("0.0.0.0", 9443)
    assert parse_listen("[::1]:8443") == ("::1", 8443)


def test_the_self_signed_key_is_private(tmp_path: Path) -> None:
    _cert, key = make_self_signed(["a.example", "10.0.0.1"], tmp_path)
    assert key.stat().st_mode & 0o077 == 0
