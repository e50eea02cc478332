"""deploy/overlays/llmkube-own-cert and the steps docs/beside-llmkube.md gives with it (issue 31, point 10).

The overlay once made the webhook's Secret from ``tls.crt`` and ``tls.key`` written into its own
folder in the checkout, so the private key sat in a repository's folder and in every rendered
manifest. Now the user creates the Secret (``kubectl create secret tls``), the overlay only names
it, and the webhooks' ``caBundle`` comes from the user's own overlay over it, which holds the CA
(public). The page's commands are run here as written, kubectl's against no server (the Secret
made ``--dry-run=client``, the overlays rendered); tests/cluster/overlays.py runs them against a
real API server.
"""

from __future__ import annotations

import base64
import re
import shlex
import shutil
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from modelseal.operator.admission.webhook import make_self_signed
from modelseal.operator.admission.webhook_tls import ServingCertificate
from tests.test_deploy_overlays import DEPLOY, KUBECTL, ROOT, one, render

PAGE = ROOT / "docs" / "beside-llmkube.md"
WEBHOOKS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
#: the user's overlay, as the page names its folder
MINE = "my-webhook"


def _block(marker: str) -> str:
    """The one fenced block of the page holding ``marker``."""
    [block] = [b.split("\n", 1)[1] for b in PAGE.read_text().split("```")[1::2] if marker in b]
    return block


def documented_steps() -> list[list[str]]:
    """The page's commands for a certificate you make, one word list each (comments left out)."""
    joined = _block("create secret tls").replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in joined.splitlines() if line.strip()]


def rotation() -> tuple[list[str], list[str]]:
    """The page's rotation, ``kubectl ... --dry-run=client -o yaml | kubectl replace -f -``: the two
    commands' words."""
    text = " ".join(PAGE.read_text().split())
    [command] = re.findall(
        r"`(kubectl -n modelseal-system create secret tls [^`|]*\| kubectl replace -f -)`", text
    )
    make, replace = command.split("|")
    return shlex.split(make), shlex.split(replace)


def lay_out(work: Path, deploy: Path = DEPLOY) -> Path:
    """The folders the page's commands run among: ``work/modelseal/deploy`` (a copy of ``deploy``)
    and ``work/my-webhook`` holding the page's kustomization; return the latter."""
    shutil.copytree(deploy, work / "modelseal" / "deploy")
    (work / MINE).mkdir()
    (work / MINE / "kustomization.yaml").write_text(_block("modelseal-webhook-ca"))
    return work / MINE


def run_steps(work: Path, kubectl: Callable[[list[str]], None]) -> None:
    """Run the page's commands in ``work``: openssl, rm and cp as they are, kubectl's by ``kubectl``
    (given the words after ``kubectl``). A command of another kind is a step no test runs."""
    for words in documented_steps():
        if words[0] in ("openssl", "rm", "cp"):
            done = subprocess.run(words, cwd=work, capture_output=True, text=True, check=False)
            assert done.returncode == 0, f"{shlex.join(words)}: {done.stderr}"
        else:
            assert words[0] == "kubectl", f"a step of the page no test runs: {shlex.join(words)}"
            kubectl(words[1:])


class Offline:
    """kubectl's steps against no server: the namespace file read, the Secret made client side, the
    overlay rendered."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.secret: dict[str, Any] = {}
        self.rendered: list[dict[str, Any]] = []
        self.text = ""

    def __call__(self, words: list[str]) -> None:
        assert KUBECTL
        if words[:2] == ["apply", "-f"]:
            namespace = yaml.safe_load((self.work / words[2]).read_text())
            assert namespace["kind"] == "Namespace" and namespace["metadata"]["name"] == "modelseal-system"
        elif words[:2] == ["apply", "-k"]:
            out = subprocess.run([KUBECTL, "kustomize", words[2]], cwd=self.work, capture_output=True, text=True,
                                 check=False)  # fmt: skip
            assert out.returncode == 0, out.stderr
            self.text, self.rendered = out.stdout, [d for d in yaml.safe_load_all(out.stdout) if d]
        else:
            assert words[2:5] == ["create", "secret", "tls"], words
            made = subprocess.run([KUBECTL, *words, "--dry-run=client", "-o", "yaml"], cwd=self.work,
                                  capture_output=True, text=True, check=False)  # fmt: skip
            assert made.returncode == 0, made.stderr
            self.secret = yaml.safe_load(made.stdout)


def _handshake(server: ssl.SSLContext, ca: bytes, hostname: str) -> None:
    """A TLS handshake in memory, as the API server makes it: the CA bundle trusted, the Service's
    name checked. Raises ssl.SSLError when the server's certificate is not trusted for it."""
    client = ssl.create_default_context(cadata=ca.decode())
    bios = [ssl.MemoryBIO() for _ in range(4)]
    ends = [client.wrap_bio(bios[0], bios[1], server_hostname=hostname), server.wrap_bio(bios[2], bios[3], server_side=True)]  # fmt: skip
    done = [False, False]
    for _ in range(20):
        for i, end in enumerate(ends):
            if not done[i]:
                try:
                    end.do_handshake()
                    done[i] = True
                except ssl.SSLWantReadError:
                    pass
        bios[2].write(bios[1].read())  # client -> server
        bios[0].write(bios[3].read())  # server -> client
        if all(done):
            return
    raise AssertionError("the handshake did not finish")


def test_the_overlay_renders_from_the_repository_as_it_is_with_no_key_in_it() -> None:
    """It needed tls.crt and tls.key in its folder to render at all; now it reads no file, makes no
    Secret, and names the one the user creates."""
    kustomization = yaml.safe_load(
        (DEPLOY / "overlays" / "llmkube-own-cert" / "kustomization.yaml").read_text()
    )
    assert not {k for k in kustomization if k.endswith("Generator")}
    docs = render(DEPLOY / "overlays" / "llmkube-own-cert")
    assert "PRIVATE KEY" not in yaml.safe_dump_all(docs)
    assert not [d for d in docs if d["kind"] == "Secret" or d["apiVersion"].startswith("cert-manager.io/")]
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "webhook-tls", "secret": {"secretName": "modelseal-webhook-tls"}}]
    for kind in WEBHOOKS:  # applied alone: no caBundle (fails closed), and no cert-manager injection
        config = one(docs, kind)
        assert not (config["metadata"].get("annotations") or {})
        assert all("caBundle" not in hook["clientConfig"] for hook in config["webhooks"])
    for path in DEPLOY.rglob("*"):
        assert not path.is_file() or b"PRIVATE KEY" not in path.read_bytes(), path


def test_the_documented_steps_give_the_operator_its_secret_and_the_api_server_its_ca(tmp_path: Path) -> None:
    lay_out(tmp_path)
    offline = Offline(tmp_path)
    run_steps(tmp_path, offline)
    # the overlay was rendered after the key was removed: nothing it reads holds a private key
    assert not (tmp_path / "tls.key").exists()
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and b"PRIVATE KEY" in p.read_bytes()]
    assert "PRIVATE KEY" not in offline.text and offline.rendered
    assert not [d for d in offline.rendered if d["kind"] == "Secret"]  # the CA's carrier is local-config
    # the Secret is the one the operator mounts, with the files its flags name
    deployment = one(offline.rendered, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    secret = offline.secret
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"] == {"name": pod["volumes"][0]["secret"]["secretName"],
                                  "namespace": deployment["metadata"]["namespace"]}  # fmt: skip
    mount = container["volumeMounts"][0]["mountPath"]
    flags = {
        a.split("=", 1)[0]: a.split("=", 1)[1]
        for a in container["args"]
        if a.startswith("--admission-webhook-")
    }
    assert {flags["--admission-webhook-cert"], flags["--admission-webhook-key"]} == {
        f"{mount}/{k}" for k in secret["data"]
    }
    # every webhook trusts the CA, and the certificate the operator serves from the Secret is trusted
    # by it for the Service's name, as the API server checks it
    ca = (tmp_path / MINE / "ca.crt").read_bytes()
    assert ca.startswith(b"-----BEGIN CERTIFICATE") and b"PRIVATE KEY" not in ca  # decoded, as caBundle is
    bundles = {
        hook["clientConfig"]["caBundle"]
        for kind in WEBHOOKS
        for hook in one(offline.rendered, kind)["webhooks"]
    }
    assert len(bundles) == 1 and base64.b64decode(bundles.pop()) == ca
    served = tmp_path / "served"
    served.mkdir()
    for name, value in secret["data"].items():
        (served / name).write_bytes(base64.b64decode(value))
    context = ServingCertificate(str(served / "tls.crt"), str(served / "tls.key")).context
    service = one(offline.rendered, "Service")["metadata"]
    _handshake(context, ca, f"{service['name']}.{service['namespace']}.svc")
    other, _ = make_self_signed([f"{service['name']}.{service['namespace']}.svc"], tmp_path)
    with pytest.raises(ssl.SSLCertVerificationError):  # the check is live: another CA is not trusted
        _handshake(context, other.read_bytes(), f"{service['name']}.{service['namespace']}.svc")
    with pytest.raises(ssl.SSLCertVerificationError):  # nor is the certificate for another name
        _handshake(context, ca, "modelseal-webhook.default.svc")


def test_the_documented_rotation_replaces_the_same_secret(tmp_path: Path) -> None:
    """Rotation makes the Secret of the creation line client side, from other files, for ``kubectl
    replace`` (tests/cluster/overlays.py runs it against the API server)."""
    [create] = [w for w in documented_steps() if "secret" in w]
    make, replace = rotation()
    assert replace == ["kubectl", "replace", "-f", "-"]
    assert make[: len(create) - 2] == create[:-2]  # the same Secret
    assert [w.split("=")[0] for w in make[len(create) - 2 : len(create)]] == ["--cert", "--key"]
    assert make[len(create) :] == ["--dry-run=client", "-o", "yaml"]
    cert, key = make_self_signed(["modelseal-webhook.modelseal-system.svc"], tmp_path)
    cert.rename(tmp_path / "new.crt")
    key.rename(tmp_path / "new.key")
    made = subprocess.run(
        [KUBECTL or "kubectl", *make[1:]], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert made.returncode == 0, made.stderr
    secret = yaml.safe_load(made.stdout)
    assert secret["metadata"] == {"name": "modelseal-webhook-tls", "namespace": "modelseal-system"}
    assert base64.b64decode(secret["data"]["tls.crt"]) == (tmp_path / "new.crt").read_bytes()
