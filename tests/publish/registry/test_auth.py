import base64
import json
import os
import stat
from pathlib import Path

import pytest

from modelseal.errors import InputError
from modelseal.publish.registry.auth import Credentials, load_docker_config, parse_docker_config
from modelseal.publish.registry.challenge import parse_challenge


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_auth_entries_match_the_exact_host() -> None:
    config = parse_docker_config(
        json.dumps({"auths": {
            "https://reg.example.com:5000/v1/": {"auth": b64("alice:s3cret:with:colons")},
            "other.example.com": {"username": "bob", "password": "pw"},
            "https://index.docker.io/v1/": {"identitytoken": "refresh"},
        }}).encode(),
        source="c.json",
    )  # fmt: skip
    creds = config.credentials_for("reg.example.com:5000")
    assert creds == Credentials("alice", "s3cret:with:colons")
    assert config.credentials_for("reg.example.com") is None  # another port is another registry
    assert config.credentials_for("evil.example.com") is None
    assert config.credentials_for("OTHER.example.com") == Credentials("bob", "pw")
    hub = config.credentials_for("docker.io")
    assert hub is not None and hub.identity_token == "refresh"


def test_secrets_stay_out_of_repr() -> None:
    creds = Credentials("alice", "s3cret", "tok", "reg")
    assert "s3cret" not in repr(creds) and "tok" not in repr(creds)
    assert creds.basic() == "Basic " + b64("alice:s3cret")


def test_kubernetes_dockerconfigjson_and_legacy_dockercfg() -> None:
    secret = {"auths": {"r.io": {"auth": b64("u:p")}}}
    assert parse_docker_config(json.dumps(secret).encode(), source="s").credentials_for(
        "r.io"
    ) == Credentials("u", "p")
    legacy = {"r.io": {"auth": b64("u:p"), "email": "x"}}
    assert parse_docker_config(json.dumps(legacy).encode(), source="s").credentials_for(
        "r.io"
    ) == Credentials("u", "p")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (b"not json", "is not JSON"),
        (b"[" * 100_000, "is not JSON: nested too deeply"),  # RecursionError escaped before
        (b"[]", "is not a JSON object"),
        (json.dumps({"auths": []}).encode(), "auths is not an object"),
        (json.dumps({"credHelpers": {"r.io": 1}}).encode(), "credHelpers is not an object of names"),
        (
            json.dumps({"auths": {"r.io": {"auth": "%%%"}}}).encode(),
            "r.io.auth is not base64 of user:password",
        ),
        (
            json.dumps({"auths": {"r.io": {"auth": b64("nocolon")}}}).encode(),
            "is not base64 of user:password",
        ),
        (json.dumps({"auths": {"r.io": {"password": 5}}}).encode(), "r.io.password is not a string"),
        (json.dumps({"auths": {"r.io": "x"}}).encode(), "the entry for r.io is not an object"),
    ],
)
def test_bad_configs(doc: bytes, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_docker_config(doc, source="c.json").credentials_for("r.io")


def test_config_file_locations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"auths": {"r.io": {"auth": b64("u:p")}}}))
    assert load_docker_config(tmp_path).credentials_for("r.io") == Credentials("u", "p")
    assert load_docker_config(tmp_path / "config.json").credentials_for("r.io") == Credentials("u", "p")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    assert load_docker_config().credentials_for("r.io") == Credentials("u", "p")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "empty"))
    assert load_docker_config().credentials_for("r.io") is None
    with pytest.raises(InputError, match="no such file"):
        load_docker_config(tmp_path / "missing.json")


def test_credential_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    helper = tmp_path / "docker-credential-fake"
    helper.write_text(
        "#!/bin/sh\nread host\n"
        'if [ "$host" = "r.io" ]; then echo \'{"ServerURL":"r.io","Username":"h","Secret":"s"}\'; exit 0; fi\n'
        "echo 'credentials not found in native keychain'; exit 1\n"
    )
    helper.chmod(helper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    config = parse_docker_config(
        json.dumps({"credHelpers": {"r.io": "fake"}, "credsStore": "fake"}).encode(), source="c"
    )
    assert config.credentials_for("r.io") == Credentials("h", "s")
    assert config.credentials_for("elsewhere.io") is None


def test_parse_challenge() -> None:
    c = parse_challenge(
        'Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a/b:pull,push"'
    )
    assert c.scheme == "bearer"
    assert c.params == {"realm": "https://auth.example.com/token", "service": "registry.example.com",
                        "scope": "repository:a/b:pull,push"}  # fmt: skip
    assert parse_challenge('Basic realm="Registry Realm"').params == {"realm": "Registry Realm"}
    assert parse_challenge('Bearer realm="x\\"y"').params["realm"] == 'x"y'
