"""A registry with the OCI 1.1 referrers API: a small front for Debian's docker-registry, which lacks it.

Every request goes on to the real registry (which stores everything); the
front remembers each manifest pushed with a ``subject``, answers its push with
``OCI-Subject`` as a registry with the API does, and serves
``GET /v2/<name>/referrers/<digest>`` (``artifactType`` filter, pages of
``page_size`` linked by ``Link: <...>; rel="next"``), each descriptor with
the manifest's ``artifactType`` and ``annotations`` as the distribution spec
says it must.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

INDEX = "application/vnd.oci.image.index.v1+json"
_REFERRERS = re.compile(r"/v2/(?P<name>.+)/referrers/(?P<digest>sha256:[0-9a-f]{64})")
_MANIFEST = re.compile(r"/v2/(?P<name>.+)/manifests/(?P<ref>[^/]+)")
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class ReferrersFront:
    """The front: ``host`` is where clients talk; ``referrers`` what it learnt, by (name, subject)."""

    def __init__(self, upstream: str, page_size: int = 100) -> None:
        self.upstream = upstream
        self.page_size = page_size
        self.referrers: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.listed: list[str] = []  # referrers API requests seen
        self.extra: list[dict[str, Any]] = []  # descriptors every listing also returns (a hostile registry)
        self.before: list[dict[str, Any]] = []  # and those it lists first (pushed earlier)
        front = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _forward(self, method: str) -> None:
                body = self._body() if method in ("PUT", "POST", "PATCH") else b""
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                headers["Host"] = front.host
                with httpx.Client(timeout=30) as client:
                    r = client.request(method, f"http://{front.upstream}{self.path}", headers=headers,
                                       content=body)  # fmt: skip
                extra = {}
                m = _MANIFEST.fullmatch(urllib.parse.urlsplit(self.path).path)
                if method == "PUT" and m and r.status_code == 201:
                    subject = front.learn(m.group("name"), body, self.headers.get("Content-Type", ""))
                    if subject:
                        extra["OCI-Subject"] = subject
                self.send_response(r.status_code)
                for k, v in r.headers.items():
                    if k.lower() not in _HOP:
                        self.send_header(k, v)
                for k, v in extra.items():
                    self.send_header(k, v)
                data = b"" if method == "HEAD" else r.content
                self.send_header("Content-Length", str(len(data) if method != "HEAD" else len(r.content)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                m = _REFERRERS.fullmatch(parts.path)
                if m is None:
                    self._forward("GET")
                    return
                front.listed.append(self.path)
                query = urllib.parse.parse_qs(parts.query)
                found = (
                    front.before + front.referrers.get((m.group("name"), m.group("digest")), []) + front.extra
                )
                kind = query.get("artifactType", [None])[0]
                if kind:
                    found = [d for d in found if d.get("artifactType") == kind]
                start = int(query.get("n_start", ["0"])[0])
                page = found[start : start + front.page_size]
                body = json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": page}).encode()
                self.send_response(200)
                self.send_header("Content-Type", INDEX)
                if kind:
                    self.send_header("OCI-Filters-Applied", "artifactType")
                if start + front.page_size < len(found):
                    nxt = urllib.parse.urlencode({**{k: v[0] for k, v in query.items()},
                                                  "n_start": start + front.page_size})  # fmt: skip
                    self.send_header("Link", f'<{parts.path}?{nxt}>; rel="next"')
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_HEAD(self) -> None:
                self._forward("HEAD")

            def do_PUT(self) -> None:
                self._forward("PUT")

            def do_POST(self) -> None:
                self._forward("POST")

            def do_PATCH(self) -> None:
                self._forward("PATCH")

            def do_DELETE(self) -> None:
                self._forward("DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def learn(self, name: str, body: bytes, media_type: str) -> str | None:
        """Record a pushed manifest that names a subject; return the subject's digest."""
        try:
            manifest = json.loads(body)
        except ValueError:
            return None
        subject = manifest.get("subject") if isinstance(manifest, dict) else None
        if not isinstance(subject, dict) or not isinstance(subject.get("digest"), str):
            return None
        descriptor = {"mediaType": manifest.get("mediaType") or media_type,
                      "digest": "sha256:" + hashlib.sha256(body).hexdigest(), "size": len(body)}  # fmt: skip
        if manifest.get("artifactType"):
            descriptor["artifactType"] = manifest["artifactType"]
        if manifest.get("annotations"):
            descriptor["annotations"] = manifest["annotations"]
        known = self.referrers.setdefault((name, subject["digest"]), [])
        if descriptor not in known:
            known.append(descriptor)
        return str(subject["digest"])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def referrers_front(upstream: str, page_size: int = 100) -> Iterator[ReferrersFront]:
    front = ReferrersFront(upstream, page_size)
    try:
        yield front
    finally:
        front.close()
