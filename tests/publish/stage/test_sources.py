"""Sources: what of a URL may be shown or recorded."""

from __future__ import annotations

import pytest

from modelseal.publish.stage.sources import public_url


@pytest.mark.parametrize(
    ("url", "public"),
    [
        (
            "https://bucket.s3.amazonaws.com/m.gguf?X-Amz-Signature=abc&X-Amz-Credential=k",
            "https://bucket.s3.amazonaws.com/m.gguf",
        ),
        ("https://user:secret@mirror.example.com:8443/m.gguf#frag", "https://mirror.example.com:8443/m.gguf"),
        ("hf://Qwen/Qwen3-8B-GGUF@main", "hf://Qwen/Qwen3-8B-GGUF@main"),
        ("/models/m.gguf", "/models/m.gguf"),
    ],
)
def test_public_url_drops_what_may_be_secret(url: str, public: str) -> None:
    assert public_url(url) == public
