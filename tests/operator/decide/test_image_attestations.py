"""oci:// Models admitted by an attestation bound to the image's digest (no spec.sha256)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from modelseal.attest.dsse.keys import Keyring
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.signing.private_keys import generate_key
from modelseal.attest.signing.sign import sign_payload
from modelseal.attest.socair.image_predicate import IMAGE_PREDICATE_TYPE, image_statement
from modelseal.attest.socair.report import PREDICATE_TYPE as SOCAIR_TYPE
from modelseal.operator.decide.gate import ConfigMapRead, GateOutcome, evaluate_gate
from modelseal.operator.settings import GROUP, VERSION
from modelseal.operator.sources.source_image import RegistryAccess
from modelseal.publish.referrers.attestations import sign_image
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import parse_reference
from tests.conftest import FIXTURE_NOW
from tests.operator.cluster import ENFORCE, Cluster, condition, phase, running_operator
from tests.publish.helpers import model_files, push
from tests.publish.servers import Registry

KEY = generate_key("ed25519")
KEYS = ConfigMapRead({"ci.pub": KEY.public_pem()})
A, B = "sha256:" + "a" * 64, "sha256:" + "b" * 64
REF = {"configMapKeyRef": {"name": "image-attestation", "key": "attestation.dsse.json"}}


def bound_to(digest: str, predicate: dict[str, Any] | None = None) -> ConfigMapRead:
    files = [{"path": "model.gguf", "sha256": "c" * 64, "size": 1, "layer": "sha256:" + "d" * 64}]
    body = predicate or {"image": {"name": "r.example/m", "digest": digest, "mediaType": "m"},
                         "issued": "2026-01-01T00:00:00Z", "files": files}  # fmt: skip
    envelope = sign_payload(image_statement("r.example/m", digest, IMAGE_PREDICATE_TYPE, body), [KEY])
    return ConfigMapRead({"attestation.dsse.json": envelope.to_json().decode()})


def gate(spec: dict[str, Any], attestation: ConfigMapRead) -> GateOutcome:
    outcome = evaluate_gate(spec, "default", ENFORCE, trusted=KEYS, attestation=attestation, now=FIXTURE_NOW)
    assert outcome is not None
    return outcome


def test_a_pinned_image_needs_no_sha256() -> None:
    outcome = gate({"source": f"oci://r.example/m@{A}", "attestation": REF}, bound_to(A))
    assert outcome.admitted, outcome.message
    assert outcome.message == (
        f"signed by trusted key {KEY.public.short_id}, predicate {IMAGE_PREDICATE_TYPE};"
        f" bound to image {A}, so every file of it (1 file(s))"
    )


def test_the_statement_for_another_digest_is_refused_naming_both() -> None:
    outcome = gate({"source": f"oci://r.example/m@{A}", "attestation": REF}, bound_to(B))
    assert not outcome.admitted and outcome.blocks
    assert outcome.message == (
        f"attestation rejected: attestation not admitted by policy: attestation is for {B[7:]},"
        f" not the artifact {A[7:]}"
    )


def test_llmkube_texts_stay_for_everything_else() -> None:
    needs_sha = "attestation rejected: the attestation policy requires spec.sha256, the digest the attestation must be for"
    for source in ("oci://r.example/m:v1", "https://example.com/m.gguf", "oci://r.example/UPPER@" + A, None):
        spec = {"attestation": REF, **({"source": source} if source else {})}
        assert gate(spec, bound_to(A)).message == needs_sha
    unset = gate({"source": f"oci://r.example/m@{A}"}, bound_to(A))
    assert unset.message.startswith("attestation rejected: no attestation is referenced")


def test_an_image_statement_does_not_admit_a_file_model() -> None:
    """The image predicate is admitted only on the image path: a file Model keeps socair's type."""
    outcome = gate({"source": "https://example.com/m.gguf", "sha256": A[7:], "attestation": REF}, bound_to(A))
    assert not outcome.admitted and f'predicate type "{IMAGE_PREDICATE_TYPE}"' in outcome.message


async def test_an_attested_image_is_admitted_in_the_cluster(
    k8s: Any, cluster: Cluster, registry: Registry, tmp_path: Path
) -> None:
    genuine = push(
        registry.host, "models/m:v1", model_files(tmp_path / "a", {"model.gguf": 3000, "config.json": 10})
    )
    other = push(registry.host, "models/m:v2", model_files(tmp_path / "b", {"model.gguf": 3000}))
    ref = parse_reference(genuine.image, allow_oci_scheme=True)
    with RegistryClient(ref, plain_http=True) as client:
        envelope = sign_image(client, ref, [KEY]).envelope.to_json()
    await cluster.trusted_keys(KEY.public_pem(), name="ci.pub")
    await cluster.attestation("image-attestation", envelope)
    settings = replace(ENFORCE, registry_access=RegistryAccess(plain_http=frozenset({registry.host})))
    async with running_operator(k8s, settings) as reconciler:
        for name, image in (("genuine", genuine.image), ("other", other.image)):
            await cluster.create(cluster.models, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Model",
                                                  "metadata": {"name": name, "namespace": "default"},
                                                  "spec": {"source": image, "attestation": REF}})  # fmt: skip
        ok = await cluster.wait("genuine", phase("Ready"))
        refused = await cluster.wait("other", phase("Failed"))
        assert reconciler.sources.reads == 0  # the digest binds every byte: no content pass
    verified = condition(ok, "AttestationVerified")
    assert verified is not None and verified["status"] == "True"
    assert (
        f"bound to image {genuine.reference.digest}, so every file of it (2 file(s))" in verified["message"]
    )
    degraded = condition(refused, "Degraded")
    assert degraded is not None and degraded["reason"] == "ModelAttestationRejected"
    assert (genuine.reference.digest or "")[7:] in degraded["message"]
    assert (other.reference.digest or "")[7:] in degraded["message"]


def test_a_policy_file_decides_whether_image_statements_are_admitted() -> None:
    spec = {"source": f"oci://r.example/m@{A}", "attestation": REF}
    for types, admitted in (((SOCAIR_TYPE,), False), ((SOCAIR_TYPE, IMAGE_PREDICATE_TYPE), True)):
        settings = replace(ENFORCE, policy=TrustPolicy(Keyring(), predicate_types=types))
        outcome = evaluate_gate(
            spec, "default", settings, trusted=KEYS, attestation=bound_to(A), now=FIXTURE_NOW
        )
        assert outcome is not None
        assert outcome.admitted is admitted, outcome.message
