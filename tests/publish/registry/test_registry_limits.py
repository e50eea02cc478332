"""A hostile registry: huge or compressed bodies, lying headers, malformed locations.

Every body is read with a cap and no further; every malformed answer is a
one-line RegistryError, never a traceback.
"""

from __future__ import annotations

import gzip
import json
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from modelseal.errors import RegistryError
from modelseal.publish.image import layout
from modelseal.publish.registry.auth import Credentials
from modelseal.publish.registry.client import MAX_MANIFEST_BYTES, RegistryClient
from modelseal.publish.registry.reference import parse_reference
from tests.publish.helpers import model_files, push
from tests.publish.hostile import Answer, Seen, endless, hostile_server

DIGEST = "sha256:" + "a" * 64
HUGE = 400 * 1024 * 1024
# what a client that stops reading at the cap lets through: the cap and the socket buffers
BOUNDED = MAX_MANIFEST_BYTES + 16 * 1024 * 1024


def client(host: str, credentials: Credentials | None = None) -> RegistryClient:
    return RegistryClient(
        parse_reference(f"{host}/m/x:v1"), credentials=credentials, plain_http=True, backoff=0
    )


def manifest_answer(answer: Answer) -> Callable[[Seen], Answer]:
    def script(seen: Seen) -> Answer:
        return answer if "/manifests/" in seen.path else Answer(200)

    return script


@pytest.mark.parametrize("declared", [False, True], ids=["chunked", "content-length"])
def test_a_400_mib_manifest_is_refused_after_reading_at_most_the_cap(declared: bool) -> None:
    headers = {"Content-Type": "application/vnd.oci.image.manifest.v1+json"}
    if declared:
        headers["Content-Length"] = str(HUGE)
    with (
        hostile_server(manifest_answer(Answer(200, headers, endless(total=HUGE)))) as server,
        client(server.host) as c,
        pytest.raises(RegistryError, match=f"larger than {MAX_MANIFEST_BYTES} bytes"),
    ):
        c.get_manifest("v1")
    assert server.sent < BOUNDED


def test_publish_inspect_refuses_a_400_mib_manifest_in_little_memory() -> None:
    """Peak RSS of the CLI, measured in a process whose only child is that CLI."""
    answer = Answer(200, {"Content-Type": "application/vnd.oci.image.manifest.v1+json"}, endless(total=HUGE))
    measure = (
        "import resource, subprocess, sys;"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
        "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss);"
        "sys.stderr.write(p.stderr)"
    )
    with hostile_server(manifest_answer(answer)) as server:
        image = f"oci://{server.host}/m/x@{DIGEST}"
        argv = [sys.executable, "-m", "modelseal", "publish", "inspect", image, "--plain-http"]
        out = subprocess.run(
            [sys.executable, "-c", measure, *argv], capture_output=True, text=True, timeout=300
        )
    code, peak_kib = map(int, out.stdout.split())
    assert code == 3 and out.stderr.count("\n") == 1 and "larger than 4194304 bytes" in out.stderr, out.stderr
    assert peak_kib * 1024 < 100 * 1000 * 1000
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0  # the measure above is in KiB on Linux


def test_a_compressed_manifest_is_refused_not_inflated() -> None:
    bomb = gzip.compress(b" " * (40 * 1024 * 1024), compresslevel=1)
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/vnd.oci.image.manifest.v1+json"}
    with hostile_server(manifest_answer(Answer(200, headers, bomb))) as server:
        with client(server.host) as c, pytest.raises(RegistryError, match="came compressed"):
            c.get_manifest("v1")
        assert server.requests[-1].headers["accept-encoding"] == "identity"


def test_a_huge_error_body_is_read_no_further_than_64_kib() -> None:
    body = endless(total=HUGE)
    with (
        hostile_server(manifest_answer(Answer(400, {}, body))) as server,
        client(server.host) as c,
        pytest.raises(RegistryError, match=r"fetch manifest v1: HTTP 400$"),
    ):
        c.get_manifest("v1")
    assert server.sent < BOUNDED


def test_the_error_code_of_an_error_body_is_kept_and_bounded() -> None:
    doc = {"errors": [{"code": "DENIED", "message": "no " + "x" * 10_000}]}
    with (
        hostile_server(manifest_answer(Answer(403, {}, json.dumps(doc).encode()))) as server,
        client(server.host) as c,
        pytest.raises(RegistryError, match="HTTP 403: DENIED no x") as info,
    ):
        c.get_manifest("v1")
    assert len(str(info.value)) < 300


@pytest.mark.parametrize("value", ["²", "١٢", "-1", "1e9", "0x10", "Wed, 21 Oct 2015 07:28:00 GMT"])
def test_a_hostile_retry_after_is_ignored(value: str) -> None:
    answers = iter([Answer(503, {"Retry-After": value}), Answer(404)])
    with hostile_server(lambda seen: next(answers)) as server, client(server.host) as c:
        assert c.get_manifest("v1") is None


@pytest.mark.parametrize(
    "location", ["http://[bad", "ftp://127.0.0.1/x", "https:///nohost", "http://127.0.0.1:²/x"]
)
def test_a_malformed_upload_location_is_a_one_line_refusal(location: str, tmp_path: Path) -> None:
    def script(seen: Seen) -> Answer:
        return Answer(202, {"Location": location}) if seen.method == "POST" else Answer(404)

    files = model_files(tmp_path, {"model.gguf": 10})
    with (
        hostile_server(script) as server,
        pytest.raises(RegistryError, match="gave a location that is not an http") as info,
    ):
        push(server.host, "m/x:v1", files, retries=1)
    assert "\n" not in str(info.value) and server.requests[-1].method == "POST"


def test_a_crlf_token_is_refused_and_never_quoted(tmp_path: Path) -> None:
    secret = "tok\r\nX-Leak: en1gma"

    def script(seen: Seen) -> Answer:
        if seen.path.startswith("/token"):
            return Answer(200, {"Content-Type": "application/json"}, json.dumps({"token": secret}).encode())
        realm = f'Bearer realm="http://127.0.0.1:{server.port}/token",service="s"'
        return Answer(401, {"WWW-Authenticate": realm})

    with (
        hostile_server(script) as server,
        client(server.host, credentials=Credentials("alice", "pw")) as c,
        pytest.raises(RegistryError, match="is not a token that can be sent") as info,
    ):
        c.get_manifest("v1")
    assert "en1gma" not in str(info.value)


def test_a_huge_token_response_is_refused() -> None:
    def script(seen: Seen) -> Answer:
        if seen.path.startswith("/token"):
            return Answer(200, {"Content-Type": "application/json"}, endless(total=HUGE))
        return Answer(401, {"WWW-Authenticate": f'Bearer realm="http://127.0.0.1:{server.port}/token"'})

    with (
        hostile_server(script) as server,
        client(server.host) as c,
        pytest.raises(RegistryError, match="larger than 1048576 bytes"),
    ):
        c.get_manifest("v1")
    assert server.sent < BOUNDED


def test_an_error_body_nested_past_the_recursion_limit_is_one_line() -> None:
    """64 KiB of "[" raised RecursionError out of the client: an operator reading a discovered
    attestation logged a traceback, and `verify --image` exited 3 as for a bug."""
    with (
        hostile_server(manifest_answer(Answer(400, {}, b"[" * 60_000))) as server,
        client(server.host) as c,
        pytest.raises(RegistryError, match=r"^fetch manifest v1: HTTP 400$"),
    ):
        c.get_manifest("v1")


def test_a_token_nested_past_the_recursion_limit_is_one_line() -> None:
    def script(seen: Seen) -> Answer:
        if seen.path.startswith("/token"):
            return Answer(200, {"Content-Type": "application/json"}, b'{"token":' + b"[" * 60_000)
        return Answer(401, {"WWW-Authenticate": f'Bearer realm="http://127.0.0.1:{server.port}/token"'})

    with (
        hostile_server(script) as server,
        client(server.host) as c,
        pytest.raises(RegistryError, match="returned no token"),
    ):
        c.get_manifest("v1")


def test_an_earlier_manifest_nested_past_the_recursion_limit_is_nothing_to_reuse() -> None:
    """The reuse lookup parsed an earlier image's manifest with json.loads: 60,000 "[" raised
    RecursionError out of publish (a traceback, exit 3) rather than reusing nothing."""
    from modelseal.publish.image.publisher import _reuse_candidates

    nested = Answer(200, {"Content-Type": "application/vnd.oci.image.manifest.v1+json"}, b"[" * 60_000)
    with hostile_server(manifest_answer(nested)) as server, client(server.host) as c:
        ref = parse_reference(f"{server.host}/m:v1")
        assert _reuse_candidates(c, [(ref, "v1")]) == {}


def test_an_earlier_layer_whose_annotations_are_not_an_object_is_nothing_to_reuse() -> None:
    """A layer whose ``annotations`` was a list raised AttributeError out of publish (a traceback)."""
    from modelseal.publish.image.publisher import _reuse_candidates

    layers = [
        {"mediaType": layout.MEDIA_LAYER, "digest": "sha256:" + "a" * 64, "size": 3, "annotations": [1]},
        {"mediaType": layout.MEDIA_LAYER, "digest": "sha256:" + "b" * 64, "size": 4,
         "annotations": {layout.ANN_TITLE: "kept.bin"}},
    ]  # fmt: skip
    body = json.dumps({"schemaVersion": 2, "layers": layers}).encode()
    answer = Answer(200, {"Content-Type": "application/vnd.oci.image.manifest.v1+json"}, body)
    with hostile_server(manifest_answer(answer)) as server, client(server.host) as c:
        ref = parse_reference(f"{server.host}/m:v1")
        assert _reuse_candidates(c, [(ref, "v1")]) == {("kept.bin", 4): "sha256:" + "b" * 64}


HOSTILE_TAGS = ["../../v2/other/manifests/x", "a?b=c", "x#y", "%2e%2e", "with/slash", "-lead", "a" * 129,
                "x\r\nX-Injected: 1", "é", 7, None]  # fmt: skip


def tag_list_script(tags: list[object]) -> Callable[[Seen], Answer]:
    body = json.dumps({"name": "m/x", "tags": tags}).encode()

    def script(seen: Seen) -> Answer:
        if seen.path.endswith("/tags/list"):
            return Answer(200, {"Content-Type": "application/json"}, body)
        return Answer(404) if "/manifests/" in seen.path else Answer(200)

    return script


def test_a_new_tag_reads_at_most_16_listed_tags_and_only_valid_ones() -> None:
    """The lookup for a new tag's reusable blobs reads the registry's tag list: a name in it that
    is not a tag never reaches a URL, and however long the list, at most 16 manifests are read."""
    from modelseal.publish.image.publisher import _reuse_candidates, _sibling_tags
    from modelseal.publish.registry.client import MAX_LISTED_TAGS

    valid = [f"v{i:04d}" for i in range(1000)]
    with hostile_server(tag_list_script([*valid, *HOSTILE_TAGS])) as server, client(server.host) as c:
        siblings = _sibling_tags(c, "v0999")
        assert siblings == valid[-MAX_LISTED_TAGS:-1]  # the last 16 valid names listed, less the new tag
        ref = parse_reference(f"{server.host}/m/x:new")
        assert _reuse_candidates(c, [(ref, t) for t in siblings]) == {}
    fetched = [s.path for s in server.requests if "/manifests/" in s.path]
    assert fetched == [f"/v2/m/x/manifests/{t}" for t in siblings]


def test_an_endless_tag_list_is_read_to_its_cap_and_nothing_is_reused() -> None:
    from modelseal.publish.image.publisher import _sibling_tags
    from modelseal.publish.registry.client import MAX_TAG_LIST_BYTES

    def script(seen: Seen) -> Answer:
        return Answer(200, {"Content-Type": "application/json"}, endless(total=HUGE))

    with hostile_server(script) as server, client(server.host) as c:
        with pytest.raises(RegistryError, match=f"larger than {MAX_TAG_LIST_BYTES} bytes"):
            c.list_tags()
        assert _sibling_tags(c, "v1") == []
    assert server.sent < 2 * (MAX_TAG_LIST_BYTES + 16 * 1024 * 1024)
