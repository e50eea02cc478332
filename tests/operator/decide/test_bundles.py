"""Sigstore and OpenSSF Model Signing bundles in attestation ConfigMaps, under the operator's policy.

The pure gate first (bindings, refusals, malformed bundles), then the emulated
cluster with a real registry: an OMS signature admits an ``oci://`` Model only
once every file of the image was read and found to be the signed ones.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from modelseal.attest.bundles.oms import PREDICATE_TYPE as OMS
from modelseal.attest.bundles.oms import ResourceKey, Serialization
from modelseal.attest.bundles.oms_sign import make_bundle, oms_statement
from modelseal.attest.policy.policy_file import parse_policy
from modelseal.attest.signing.private_keys import generate_key
from modelseal.attest.verdict import Mode, Reason
from modelseal.operator.decide.gate import ConfigMapRead, GateOutcome, evaluate_gate
from modelseal.operator.decide.loaded_files import LoadedFile, LoadedFiles
from modelseal.operator.settings import GROUP, VERSION, OperatorSettings
from modelseal.operator.sources.source_image import RegistryAccess
from modelseal.publish.image.publisher import StagedFile
from tests.conftest import FIXTURE_NOW, TESTDATA
from tests.operator.cluster import ENFORCE, Cluster, condition, phase, running_operator
from tests.publish.helpers import push
from tests.publish.servers import Registry

KEY = generate_key("ecdsa-p256")
KEYS = ConfigMapRead({"ci.pub": KEY.public_pem()})
REF = {"configMapKeyRef": {"name": "model-attestation", "key": "attestation.dsse.json"}}
HEAD = "apiVersion: modelseal.dev/v1\nkind: TrustPolicy\n"
KEYLESS = TESTDATA / "sigstore"
CONDA = "https://schemas.conda.org/attestations-publish-1.schema.json"
CONDA_SUBJECT = "3862a3677d33a45134a2ce3452b23f8f7459fe581cefbc3818272648cd987cfb"
CONDA_IDENTITY = (
    "https://github.com/prefix-dev/sigstore-example/.github/workflows/action.yaml@refs/heads/main"
)
GITHUB = "https://token.actions.githubusercontent.com"
STEFAN = "identities:\n  - identity: stefanb@us.ibm.com\n    issuer: https://sigstore.verify.ibm.com/oauth2\n"


def settings(body: str | None, mode: Mode = Mode.ENFORCE) -> OperatorSettings:
    """The operator with the trusted-keys ConfigMap and, when given, a policy file (a key is required)."""
    policy = parse_policy(HEAD + body, base=TESTDATA) if body is not None else None
    max_age = policy.max_age if policy else None  # as OperatorSettings.from_flags takes it from the file
    return replace(ENFORCE, mode=mode, policy=policy, max_age=max_age)


OMS_POLICY = f"keys:\n  - file: keys/ecdsa-p256.pub\npredicateTypes: [{OMS}]\n"


def cm(data: bytes) -> ConfigMapRead:
    return ConfigMapRead({"attestation.dsse.json": data.decode()})


def gate(spec: dict[str, Any], data: bytes, body: str | None = OMS_POLICY) -> GateOutcome:
    spec = {"attestation": REF, **spec}
    outcome = evaluate_gate(
        spec, "default", settings(body), trusted=KEYS, attestation=cm(data), now=FIXTURE_NOW
    )
    assert outcome is not None
    return outcome


def signed_bundle(files: dict[str, bytes], name: str = "model") -> bytes:
    """An OMS bundle by KEY over files with these contents (files serialization, sha256)."""
    digests: dict[ResourceKey, str] = {
        (p, None, None): hashlib.sha256(d).hexdigest() for p, d in files.items()
    }
    payload, _ = oms_statement(name, Serialization("files", "sha256", None, False, ()), digests)
    return make_bundle(payload, KEY)


FILES = {"model.gguf": b"weights" * 100, "config.json": b'{"layers": 2}'}
GGUF_SHA = hashlib.sha256(FILES["model.gguf"]).hexdigest()


def test_a_single_file_source_binds_through_spec_sha256() -> None:
    bundle = signed_bundle(FILES)
    spec = {"source": "https://models.example.com/m.gguf", "sha256": GGUF_SHA}
    ok = gate(spec, bundle)
    assert ok.admitted and ok.binding is None, ok.message
    assert ok.message == (
        f"signed by trusted key {KEY.public.short_id}, OpenSSF Model Signing v1.0 over 2 signed file(s);"
        " spec.sha256 is the signed file model.gguf"
    )
    other = gate({**spec, "sha256": "ab" * 32}, bundle)
    assert not other.admitted and other.code is Reason.DIGEST_MISMATCH
    assert other.message.startswith(
        f"attestation rejected: attestation not admitted by policy: spec.sha256 {'ab' * 32}"
    )
    assert ok.loaded == LoadedFiles((LoadedFile("", GGUF_SHA, "spec.source"),))


def test_a_folder_from_a_download_source_binds_each_file_to_its_signed_digest() -> None:
    """Each staged file gets the digest the signature gives its path; the serving Pod's verifier
    checks them. Before, the gate refused every folder not published as an image."""
    bundle = signed_bundle(FILES)
    spec = {"source": "hf://org/repo", "files": ["model.gguf", "config.json"]}
    several = gate(spec, bundle)
    assert several.admitted, several.message
    assert several.message.endswith("; its files are bound to the signed digests in the serving Pod")
    config = hashlib.sha256(FILES["config.json"]).hexdigest()
    assert several.loaded == LoadedFiles((LoadedFile("model.gguf", GGUF_SHA, "spec.files[0]"),
                                          LoadedFile("config.json", config, "spec.files[1]")), folder=True)  # fmt: skip
    extra = gate({**spec, "mmproj": "mmproj.gguf"}, bundle)
    assert not extra.admitted and extra.code is Reason.DIGEST_MISMATCH
    assert extra.message == (
        "attestation rejected: spec.mmproj 'mmproj.gguf' has no attested digest: it is not among the"
        " files an attestation listing 2 file(s) names"
    )


@pytest.mark.parametrize(
    ("body", "reason", "text"),
    [
        (None, Reason.PREDICATE_TYPE, f'predicate type "{OMS}" (an OpenSSF Model Signing signature)'),
        ("keys:\n  - file: keys/ecdsa-p256.pub\n", Reason.PREDICATE_TYPE, "want one of [https://socair.ai/attestation/v1]"),
        (f"keys:\n  - file: keys/ecdsa-p256.pub\npredicateTypes: [{OMS}]\nmaxAge: 24h\n", Reason.ISSUED_TIME_INVALID, "carries no issue time"),
        (f"keys:\n  - file: keys/ecdsa-p256.pub\n  - file: socair/operator.pub\npredicateTypes: [{OMS}]\nthreshold: 2\n",
         Reason.THRESHOLD_NOT_MET, "a Sigstore bundle carries one signature, and the policy requires 2"),
        (STEFAN + f"predicateTypes: [{OMS}]\nrevokedKeyIds: ['{KEY.public.keyid}']\n", Reason.KEY_INACTIVE, "is revoked"),
    ],
)  # fmt: skip
def test_the_policy_decides(body: str | None, reason: Reason, text: str) -> None:
    outcome = gate({"source": "https://m.example/m.gguf", "sha256": GGUF_SHA}, signed_bundle(FILES), body)
    assert not outcome.admitted and outcome.blocks and outcome.code is reason, outcome.message
    assert text in outcome.message


def test_oci_sources_are_bound_by_reading_the_image_or_refused() -> None:
    bundle, digest = signed_bundle(FILES), "sha256:" + "c" * 64
    pinned = gate({"source": f"oci://r.example/m@{digest}"}, bundle)
    assert pinned.admitted and pinned.binding is not None
    assert dict(pinned.binding.files) == {p: hashlib.sha256(d).hexdigest() for p, d in FILES.items()}
    assert pinned.message.endswith("; its files are compared with the image's (SourceImageVerified)")
    assert "bound to image" not in pinned.message  # the signature is not for the image's digest
    # admitted by the gate, not by the webhook, until the source check found the files served
    from modelseal.operator.decide.judgement import Judgement
    from modelseal.operator.status.conditions import desired_status

    assert not Judgement(pinned).verdict(1).admitted
    assert desired_status({}, 1, pinned, FIXTURE_NOW)["phase"] == "Failed"
    tag = gate({"source": "oci://r.example/m:v1", "sha256": GGUF_SHA}, bundle)
    assert not tag.admitted and "oci://r.example/m:v1 is not pinned by digest" in tag.message


def test_shards_or_another_hash_cannot_be_compared() -> None:
    digests: dict[ResourceKey, str] = {("model.gguf", 0, 700): GGUF_SHA}
    payload, _ = oms_statement("m", Serialization("shards", "sha256", 1024, False, ()), digests)
    outcome = gate({"source": "https://m.example/m.gguf", "sha256": GGUF_SHA}, make_bundle(payload, KEY))
    assert (
        not outcome.admitted
        and "hashes shards with sha256; the operator compares whole files" in outcome.message
    )


def test_generic_keyless_bundles_bind_spec_sha256() -> None:
    data = (KEYLESS / "dsse_v001_bundle.sigstore.json").read_bytes()
    body = f"identities:\n  - identity: {CONDA_IDENTITY}\n    issuer: {GITHUB}\npredicateTypes: [{CONDA}]\n"
    spec = {"source": "https://example.com/p.conda", "sha256": CONDA_SUBJECT}
    ok = gate(spec, data, body)
    assert ok.admitted and ok.message == f"signed by {CONDA_IDENTITY}, predicate {CONDA}"
    other = gate({**spec, "sha256": "ab" * 32}, data, body)
    assert (
        not other.admitted
        and f"attestation is for {CONDA_SUBJECT}, not the artifact {'ab' * 32}" in other.message
    )
    unknown = gate(spec, data, None)  # the ConfigMap's keys only: nobody vouches for a certificate
    assert not unknown.admitted and unknown.code is Reason.NO_TRUSTED_KEYS
    assert "no certificate root or Sigstore identity is trusted" in unknown.message


def _edit(data: bytes, change: Any) -> bytes:
    doc = json.loads(data)
    change(doc)
    return json.dumps(doc).encode()


def _payload(doc: dict[str, Any], payload: bytes) -> None:
    doc["dsseEnvelope"]["payload"] = base64.b64encode(payload).decode()


GOOD = signed_bundle(FILES)
MALFORMED = {
    "media type only": b'{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}',
    "envelope a list": _edit(GOOD, lambda d: d.update(dsseEnvelope=[])),
    "two signatures": _edit(GOOD, lambda d: d["dsseEnvelope"]["signatures"].append(d["dsseEnvelope"]["signatures"][0])),
    "signature not base64": _edit(GOOD, lambda d: d["dsseEnvelope"]["signatures"][0].update(sig="%%%")),
    "certificate garbage": _edit(GOOD, lambda d: d["verificationMaterial"].update(certificate={"rawBytes": "AAAA"})),
    "certificate a number": _edit(GOOD, lambda d: d["verificationMaterial"].update(certificate=5)),
    "payload edited": _edit(GOOD, lambda d: _payload(d, b'{"_type": "x"}')),
    "payload not JSON": _edit(GOOD, lambda d: _payload(d, b"\xff\xfe")),
    "over the cap": _edit(GOOD, lambda d: d.update(padding="x" * (1024 * 1024))),
    "deep nesting": b'{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    "duplicate keys": GOOD.replace(b'"mediaType"', b'"mediaType": "x", "mediaType"', 1),
}  # fmt: skip


def _resources_signed(resources: Any) -> bytes:
    payload, _ = oms_statement(
        "m", Serialization("files", "sha256", None, False, ()), {("a", None, None): "00" * 32}
    )
    statement = json.loads(payload)
    statement["predicate"]["resources"] = resources
    return make_bundle(json.dumps(statement).encode(), KEY)


MALFORMED.update({
    "signed resources not a list": _resources_signed("x"),
    "signed resource escaping": _resources_signed([{"name": "../etc/passwd", "algorithm": "sha256", "digest": "00" * 32}]),
    "signed root digest wrong": _resources_signed([{"name": "b", "algorithm": "sha256", "digest": "11" * 32}]),
})  # fmt: skip


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_bundles_are_one_line_refusals(name: str) -> None:
    for spec in (
        {"source": "https://m.example/m.gguf", "sha256": GGUF_SHA},
        {"source": "oci://r.example/m@sha256:" + "c" * 64},
    ):
        outcome = gate(spec, MALFORMED[name])
        assert not outcome.admitted and outcome.blocks and outcome.binding is None, outcome.message
        assert (
            outcome.message.startswith("attestation rejected: attestation ") and "\n" not in outcome.message
        )


# -- in the emulated cluster, with a real registry ----------------------------------------


def staged(root: Path, files: dict[str, bytes]) -> list[StagedFile]:
    out = []
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        out.append(StagedFile(name, path))
    return out


async def run_models(
    k8s: Any, cluster: Cluster, registry: Registry, operator: OperatorSettings, models: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """Create Models (name -> oci:// source) and wait until each is Ready or Failed."""
    access = RegistryAccess(plain_http=frozenset({registry.host}))
    async with running_operator(k8s, replace(operator, registry_access=access)):
        for name, source in models.items():
            await cluster.create(cluster.models, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Model",
                                                  "metadata": {"name": name, "namespace": "default"},
                                                  "spec": {"source": source, "attestation": REF}})  # fmt: skip
        done = lambda m: (m.get("status") or {}).get("phase") in ("Ready", "Failed")  # noqa: E731
        return {name: await cluster.wait(name, done, timeout=30) for name in models}


async def test_an_oms_signature_admits_the_image_holding_its_files(
    k8s: Any, cluster: Cluster, registry: Registry, tmp_path: Path
) -> None:
    genuine = push(registry.host, "models/m:v1", staged(tmp_path / "a", FILES))
    changed = push(registry.host, "models/m:v2", staged(tmp_path / "b", {**FILES, "config.json": b"{}"}))
    extra = push(registry.host, "models/m:v3", staged(tmp_path / "c", {**FILES, "extra.py": b"import os"}))
    await cluster.trusted_keys(KEY.public_pem(), name="ci.pub")
    await cluster.attestation("model-attestation", signed_bundle(FILES))
    sources = {"genuine": genuine.image, "changed": changed.image, "extra": extra.image}
    models = await run_models(k8s, cluster, registry, settings(OMS_POLICY), sources)
    ok = models["genuine"]
    assert ok["status"]["phase"] == "Ready", ok["status"]
    served = condition(ok, "SourceImageVerified")
    assert served is not None and served["status"] == "True"
    assert served["message"] == (
        f"{genuine.image}: its 2 file(s) are the ones the OpenSSF Model Signing signature names"
        f" (model digest {json.loads(base64.b64decode(json.loads(signed_bundle(FILES))['dsseEnvelope']['payload']))['subject'][0]['digest']['sha256']};"
        " their bytes were read)"
    )
    verified = condition(ok, "AttestationVerified")
    assert verified is not None and verified["message"].endswith("(SourceImageVerified)")
    for name, what in (("changed", "changed: config.json"), ("extra", "added: extra.py")):
        degraded = condition(models[name], "Degraded")
        assert models[name]["status"]["phase"] == "Failed" and degraded is not None
        assert degraded["reason"] == "SourceImageMismatch" and degraded["message"].endswith(what), degraded


async def test_without_the_authority_the_signature_admits_nothing(
    k8s: Any, cluster: Cluster, registry: Registry, tmp_path: Path
) -> None:
    genuine = push(registry.host, "models/m:v1", staged(tmp_path / "a", FILES))
    await cluster.trusted_keys(KEY.public_pem(), name="ci.pub")
    await cluster.attestation("model-attestation", signed_bundle(FILES))
    models = await run_models(k8s, cluster, registry, settings(None), {"m": genuine.image})
    degraded = condition(models["m"], "Degraded")
    assert models["m"]["status"]["phase"] == "Failed" and degraded is not None
    assert (
        degraded["reason"] == "ModelAttestationRejected" and f'predicate type "{OMS}"' in degraded["message"]
    )
    assert condition(models["m"], "SourceImageVerified") is None  # the image is never read for a refusal


async def test_the_keyless_oms_vector_admits_its_image(
    k8s: Any, cluster: Cluster, registry: Registry, tmp_path: Path
) -> None:
    model = KEYLESS / "v1.1.0-sigstore"
    files = {name: (model / name).read_bytes() for name in ("signme-1", "signme-2")}
    genuine = push(registry.host, "models/keyless:v1", staged(tmp_path / "a", files))
    signed_too = push(
        registry.host, "models/keyless:v2", staged(tmp_path / "b", {**files, "model.sig": b"x"})
    )
    await cluster.trusted_keys(KEY.public_pem(), name="ci.pub")
    await cluster.attestation("model-attestation", (model / "model.sig").read_bytes())
    operator = settings(STEFAN + f"predicateTypes: [{OMS}]\n")
    models = await run_models(
        k8s, cluster, registry, operator, {"keyless": genuine.image, "sig": signed_too.image}
    )
    ok = models["keyless"]
    assert ok["status"]["phase"] == "Ready", ok["status"]
    verified = condition(ok, "AttestationVerified")
    assert verified is not None and verified["message"].startswith(
        "signed by stefanb@us.ibm.com, OpenSSF Model Signing v1.0 over 2 signed file(s)"
    )
    # a file the signature ignores is still served, so it is not admitted: every served byte is signed
    degraded = condition(models["sig"], "Degraded")
    assert degraded is not None and degraded["message"].endswith("added: model.sig")


async def test_a_malformed_bundle_is_refused_and_the_operator_goes_on(
    k8s: Any, cluster: Cluster, registry: Registry, tmp_path: Path
) -> None:
    genuine = push(registry.host, "models/m:v1", staged(tmp_path / "a", FILES))
    await cluster.trusted_keys(KEY.public_pem(), name="ci.pub")
    await cluster.attestation("model-attestation", MALFORMED["certificate garbage"])
    await cluster.create(cluster.configmaps, {"apiVersion": "v1", "kind": "ConfigMap",
                                              "metadata": {"name": "good", "namespace": "default"},
                                              "data": {"attestation.dsse.json": signed_bundle(FILES).decode()}})  # fmt: skip
    access = RegistryAccess(plain_http=frozenset({registry.host}))
    async with running_operator(k8s, replace(settings(OMS_POLICY), registry_access=access)):
        for name, configmap in (("bad", "model-attestation"), ("good", "good")):
            ref = {"configMapKeyRef": {"name": configmap, "key": "attestation.dsse.json"}}
            await cluster.create(cluster.models, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Model",
                                                  "metadata": {"name": name, "namespace": "default"},
                                                  "spec": {"source": genuine.image, "attestation": ref}})  # fmt: skip
        bad = await cluster.wait("bad", phase("Failed"), timeout=30)
        await cluster.wait("good", phase("Ready"), timeout=30)
    degraded = condition(bad, "Degraded")
    assert degraded is not None and degraded["reason"] == "ModelAttestationRejected"
    assert degraded["message"].startswith("attestation rejected: attestation does not verify: ")


async def test_a_generic_keyless_bundle_admits_the_model_of_its_subject(k8s: Any, cluster: Cluster) -> None:
    await cluster.trusted_keys(KEY.public_pem(), name="ci.pub")
    await cluster.attestation("model-attestation", (KEYLESS / "dsse_v001_bundle.sigstore.json").read_bytes())
    body = f"identities:\n  - identity: {CONDA_IDENTITY}\n    issuer: {GITHUB}\npredicateTypes: [{CONDA}]\n"
    async with running_operator(k8s, settings(body)):
        for name, sha in (("attested", CONDA_SUBJECT), ("other", "ab" * 32)):
            await cluster.create(cluster.models, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Model",
                                                  "metadata": {"name": name, "namespace": "default"},
                                                  "spec": {"source": "https://example.com/p.conda", "sha256": sha,
                                                           "attestation": REF}})  # fmt: skip
        ok = await cluster.wait("attested", phase("Ready"))
        refused = await cluster.wait("other", phase("Failed"))
    verified = condition(ok, "AttestationVerified")
    assert verified is not None and verified["message"] == f"signed by {CONDA_IDENTITY}, predicate {CONDA}"
    degraded = condition(refused, "Degraded")
    assert (
        degraded is not None
        and f"attestation is for {CONDA_SUBJECT}, not the artifact" in degraded["message"]
    )
