import pytest

from modelseal.errors import UsageError
from modelseal.publish.registry.reference import parse_reference


@pytest.mark.parametrize(
    ("text", "registry", "repository", "tag", "digest"),
    [
        ("127.0.0.1:5000/models/tiny:v1", "127.0.0.1:5000", "models/tiny", "v1", None),
        ("localhost/m:latest", "localhost", "m", "latest", None),
        ("ghcr.io/org/team/model-x_1.2:2026.11", "ghcr.io", "org/team/model-x_1.2", "2026.11", None),
        (
            "reg.example.com:443/a/b@sha256:" + "a" * 64,
            "reg.example.com:443",
            "a/b",
            None,
            "sha256:" + "a" * 64,
        ),
        ("[::1]:5000/m:t", "[::1]:5000", "m", "t", None),
    ],
)
def test_parse(text: str, registry: str, repository: str, tag: str | None, digest: str | None) -> None:
    ref = parse_reference(text)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (registry, repository, tag, digest)


def test_oci_forms() -> None:
    ref = parse_reference("oci://r.io/m@sha256:" + "b" * 64, allow_oci_scheme=True, require="digest")
    assert ref.oci == "oci://r.io/m@sha256:" + "b" * 64
    assert parse_reference("r.io/m:v1").pinned("sha256:" + "c" * 64).oci == "oci://r.io/m@sha256:" + "c" * 64
    assert parse_reference("docker.io/library/x:1").api_host == "registry-1.docker.io"


@pytest.mark.parametrize(
    ("text", "kwargs", "message"),
    [
        ("oci://r.io/m:v1", {}, "drop the oci:// prefix"),
        ("https://r.io/m:v1", {"allow_oci_scheme": True}, "only oci:// references"),
        ("models/tiny:v1", {}, "name the registry host first"),
        ("tiny:v1", {}, "name the registry host first"),
        ("r.io/Models:v1", {}, "must be lowercase"),
        ("r.io/m:v1!", {}, "is not a valid tag"),
        ("r.io/m@sha256:abc", {}, "64 lowercase hex"),
        ("r.io/m", {"require": "tag"}, "give a tag to publish to"),
        ("r.io/m@sha256:" + "a" * 64, {"require": "tag"}, "give a tag to publish to"),
        ("r.io/m:v1", {"require": "digest"}, "pin the image by digest"),
        ("r.io/" + "a" * 256 + ":v1", {}, "longer than 255"),
    ],
)
def test_refused(text: str, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_reference(text, **kwargs)  # type: ignore[arg-type]
