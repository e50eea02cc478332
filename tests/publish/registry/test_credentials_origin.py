"""Registry credentials follow scheme, host and port, and never go down from HTTPS to plain HTTP.

Loopback with ``--plain-http`` stays the exception (tests/publish/registry/test_registry_auth.py
runs a token flow over plain HTTP on 127.0.0.1).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelseal.errors import RegistryError
from modelseal.publish.image.publisher import publish
from modelseal.publish.registry.auth import Credentials
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import parse_reference
from modelseal.publish.registry.urls import is_loopback, join_location, origin
from tests.publish.helpers import model_files
from tests.publish.hostile import Answer, Seen, ToLoopback, hostile_server
from tests.publish.servers import tls_files

ALICE = Credentials("alice", "s3cret-pass")


def bearer_with_realm_on_the_same_host(seen: Seen) -> Answer:
    """A registry whose token service is ``http://<the Host it was asked as>/token``."""
    if seen.path.startswith("/token"):
        return Answer(200, {"Content-Type": "application/json"}, b'{"token": "t"}')
    if seen.headers.get("authorization") == "Bearer t":
        return Answer(404)
    return Answer(
        401, {"WWW-Authenticate": f'Bearer realm="http://{seen.headers["host"]}/token",service="lab"'}
    )


def test_a_plain_http_token_realm_on_the_registry_host_gets_no_password() -> None:
    """Finding 6a: registry.lab over --plain-http names http://registry.lab:PORT/token."""
    with hostile_server(bearer_with_realm_on_the_same_host) as server:
        port = server.port
        ref = parse_reference(f"registry.lab:{port}/m/x:v1")
        with (
            RegistryClient(ref, credentials=ALICE, plain_http=True, transport=ToLoopback()) as client,
            pytest.raises(
                RegistryError, match=f"refusing to send credentials to registry.lab:{port} over plain HTTP"
            ),
        ):
            client.get_manifest("v1")
    assert [(r.path.split("?")[0], "authorization" in r.headers) for r in server.requests] == [
        ("/v2/m/x/manifests/v1", False)
    ]


def test_a_plain_http_registry_off_loopback_never_gets_a_basic_password() -> None:
    with hostile_server(lambda seen: Answer(401, {"WWW-Authenticate": 'Basic realm="lab"'})) as server:
        ref = parse_reference(f"registry.lab:{server.port}/m/x:v1")
        with (
            RegistryClient(ref, credentials=ALICE, plain_http=True, transport=ToLoopback()) as client,
            pytest.raises(RegistryError, match="refusing to send credentials"),
        ):
            client.get_manifest("v1")
    assert all("authorization" not in r.headers for r in server.requests)


def test_an_anonymous_token_may_come_over_plain_http_from_the_registry_host() -> None:
    """Without credentials nothing secret travels: a lab registry's anonymous pull still works."""
    with hostile_server(bearer_with_realm_on_the_same_host) as server:
        ref = parse_reference(f"registry.lab:{server.port}/m/x:v1")
        with RegistryClient(ref, plain_http=True, transport=ToLoopback()) as client:
            assert client.get_manifest("v1") is None
    token_requests = [r for r in server.requests if r.path.startswith("/token")]
    assert len(token_requests) == 1 and "authorization" not in token_requests[0].headers


def test_an_https_registry_never_sends_anything_to_a_plain_http_realm(tmp_path: Path) -> None:
    ca, cert, key = tls_files(tmp_path)
    with hostile_server(bearer_with_realm_on_the_same_host, tls=(cert, key)) as server:
        ref = parse_reference(f"{server.host}/m/x:v1")
        with (
            RegistryClient(ref, credentials=ALICE, ca_file=str(ca)) as client,
            pytest.raises(
                RegistryError, match=f"refusing to fetch a token from {server.host} over plain HTTP"
            ),
        ):
            client.get_manifest("v1")
    assert {r.scheme for r in server.requests} == {"https"}


def test_an_https_registry_is_not_followed_to_a_plain_http_upload_location(tmp_path: Path) -> None:
    """Finding 6b: a TLS-terminating proxy makes the registry hand out http:// on the same host:port."""
    ca, cert, key = tls_files(tmp_path)

    def script(seen: Seen) -> Answer:
        if "authorization" not in seen.headers:
            return Answer(401, {"WWW-Authenticate": 'Basic realm="r"'})
        if seen.method == "POST":
            return Answer(202, {"Location": f"http://{server.host}/v2/m/x/blobs/uploads/1"})
        if seen.method in ("PATCH", "PUT"):
            return Answer(202 if seen.method == "PATCH" else 201, {"Location": "/v2/m/x/blobs/uploads/1"})
        return Answer(404)

    files = model_files(tmp_path, {"model.gguf": 1000})
    with hostile_server(script, tls=(cert, key)) as server:
        ref = parse_reference(f"{server.host}/m/x:v1", require="tag")
        with (
            RegistryClient(ref, credentials=ALICE, ca_file=str(ca), backoff=0, retries=1) as client,
            pytest.raises(
                RegistryError, match=f"refusing to follow the HTTPS registry {server.host} to plain HTTP"
            ),
        ):
            publish(ref, files, client)
    assert {r.scheme for r in server.requests} == {"https"}
    assert server.requests[-1].method == "POST"


def test_authorization_goes_to_the_registry_origin_only(tmp_path: Path) -> None:
    """An upload Location on another port of the same host gets no Authorization."""
    ca, cert, key = tls_files(tmp_path)
    with hostile_server(lambda seen: Answer(202, {"Location": "/next"}), tls=(cert, key)) as other:

        def script(seen: Seen) -> Answer:
            if "authorization" not in seen.headers:
                return Answer(401, {"WWW-Authenticate": 'Basic realm="r"'})
            return Answer(202, {"Location": f"https://{other.host}/v2/m/x/blobs/uploads/1"})

        with hostile_server(script, tls=(cert, key)) as server:
            ref = parse_reference(f"{server.host}/m/x:v1")
            with RegistryClient(ref, credentials=ALICE, ca_file=str(ca)) as client:
                location = client.start_upload()
                client.send("PATCH", location, content=b"x").close()
                client.send("PATCH", f"https://127.0.0.1:{server.port}/v2/again", content=b"x").close()
    assert "authorization" not in other.requests[0].headers
    assert server.requests[-1].headers["authorization"].startswith("Basic ")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://Registry.Example.com/v2/", ("https", "registry.example.com", 443)),
        ("http://127.0.0.1:5000/x", ("http", "127.0.0.1", 5000)),
        ("https://[::1]:8443/", ("https", "::1", 8443)),
        ("http://[bad", None),
        ("ftp://host/x", None),
        ("https:///x", None),
        ("http://host:²/x", None),
        ("http://host:١٢/x", None),
        ("http://host:99999/x", None),
        ("http://ho\x00st/x", None),
        ("http://host/x\r\nX: y", None),
    ],
)
def test_origin(url: str, expected: tuple[str, str, int] | None) -> None:
    assert origin(url) == expected


def test_join_location_and_loopback() -> None:
    assert join_location("https://r.example/", "/v2/x?_state=1") == "https://r.example/v2/x?_state=1"
    assert join_location("https://r.example/", "http://[bad") is None
    assert join_location("https://r.example/", "javascript:alert(1)") is None
    assert [is_loopback(h) for h in ("127.0.0.1", "127.8.9.1", "[::1]", "localhost", "LocalHost")] == [
        True
    ] * 5
    assert [is_loopback(h) for h in ("10.0.0.1", "registry.lab", "127.0.0.1.nip.io", "::ffff:8.8.8.8")] == [
        False
    ] * 4
