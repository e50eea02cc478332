"""``--discover-image-attestations`` in kopf against kmock, with the real registry holding the referrers.

Models without ``spec.attestation`` whose source is pinned by digest, judged by
what is attached to their image; with the flag off, LLMKube's refusal stands
and the registry is never asked.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from modelseal.attest.signing.private_keys import generate_key
from modelseal.attest.socair.image_predicate import IMAGE_PREDICATE_TYPE
from modelseal.operator.settings import GROUP, VERSION
from modelseal.operator.sources.source_image import RegistryAccess
from modelseal.publish.image import layout
from modelseal.publish.referrers.attestations import read_subject, sign_image
from modelseal.publish.referrers.order import MAX_REFERRERS_READ
from modelseal.publish.referrers.store import ARTIFACT_TYPE, attach
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import ImageReference
from tests.operator.cluster import (
    ENFORCE,
    Cluster,
    condition,
    phase,
    running_operator,
)
from tests.publish.helpers import model_files, push, push_artifact, set_referrers_index
from tests.publish.referrers_double import referrers_front
from tests.publish.servers import Registry

KEY, OTHER = generate_key("ed25519"), generate_key("ed25519")


def settings(*hosts: str, discover: bool = True) -> Any:
    access = RegistryAccess(plain_http=frozenset(hosts))
    return replace(ENFORCE, registry_access=access, discover_image_attestations=discover,
                   refused_retry=timedelta(seconds=0.2))  # fmt: skip


def image(registry: Registry, tmp_path: Path, tag: str) -> ImageReference:
    files = model_files(tmp_path / tag, {"model.gguf": 2000, "config.json": 20})
    return push(registry.host, f"models/m:{tag}", files).reference


def client(ref: ImageReference) -> RegistryClient:
    return RegistryClient(ref, plain_http=True, retries=0)


def attest(ref: ImageReference, key: Any = KEY, issued: datetime | None = None) -> None:
    with client(ref) as c:
        signed = sign_image(c, ref, [key], now=issued, read_layers=issued is None)
        attach(c, signed.subject, signed.envelope.to_json(), signed.predicate_type)


async def serve(cluster: Cluster, name: str, ref: ImageReference) -> None:
    await cluster.create(cluster.models, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Model",
                                          "metadata": {"name": name, "namespace": "default"},
                                          "spec": {"source": ref.oci}})  # fmt: skip


def said(model: dict[str, Any], kind: str = "AttestationVerified") -> str:
    found = condition(model, kind)
    assert found is not None, model.get("status")
    return str(found["message"])


async def test_the_flag_off_keeps_llmkubes_refusal_and_asks_no_registry(
    k8s: Any, cluster: Cluster, registry: Registry, tmp_path: Path
) -> None:
    ref = image(registry, tmp_path, "v1")
    attest(ref)
    await cluster.trusted_keys(KEY.public_pem(), name="ci.pub")
    async with running_operator(k8s, settings(registry.host, discover=False)) as reconciler:
        await serve(cluster, "served", ref)
        refused = await cluster.wait("served", phase("Failed"))
        assert reconciler.attached.reads == 0
    assert said(refused).startswith("attestation rejected: no attestation is referenced")


async def test_an_attached_attestation_admits_and_every_other_case_refuses(
    k8s: Any, cluster: Cluster, registry: Registry, tmp_path: Path
) -> None:
    attested, untrusted, foreign, other_digest, absent = (
        image(registry, tmp_path, t) for t in ("attested", "untrusted", "foreign", "other", "absent")
    )
    attest(attested)
    attest(untrusted, OTHER)
    with client(attested) as c:
        about_attested = sign_image(c, attested, [KEY])
        # listed under foreign's tag, the artifact still names attested as its subject
        set_referrers_index(c, foreign.digest or "", [push_artifact(c, about_attested.subject,
                                                                   about_attested.envelope.to_json())])  # fmt: skip
        # an artifact that truly refers to other_digest, holding a Statement about attested
        _, subject = read_subject(c, other_digest)
        set_referrers_index(c, subject.digest, [push_artifact(c, subject, about_attested.envelope.to_json())])
    await cluster.trusted_keys(KEY.public_pem(), name="ci.pub")
    async with running_operator(k8s, settings(registry.host)) as reconciler:
        reconciler.attached.retry_after = 0.0
        for name, ref in (("attested", attested), ("untrusted", untrusted), ("foreign", foreign),
                          ("other", other_digest), ("absent", absent)):  # fmt: skip
            await serve(cluster, name, ref)
        ready = await cluster.wait("attested", phase("Ready"))
        looking = await cluster.event("VerifyingImageAttestations", "attested")
        got = {n: await cluster.wait(n, phase("Failed")) for n in ("untrusted", "foreign", "other", "absent")}
        assert reconciler.sources.reads == 0  # the digest binds every byte: no content pass

        attest(absent)  # attached later: the refused Model is read again, and heals
        healed = await cluster.wait("absent", phase("Ready"))
    assert looking["type"] == "Normal"
    assert looking["message"] == f"looking up the attestations attached to {attested.oci}"
    assert said(ready).startswith(f"signed by trusted key {KEY.public.short_id}, predicate {IMAGE_PREDICATE_TYPE};"
                                  f" attached to image {attested.digest} as sha256:")  # fmt: skip
    assert said(ready).endswith("(referrers tag schema), so every file of it (2 file(s))")
    assert "no valid signature by a trusted key" in said(got["untrusted"])
    assert f"refers to {attested.digest}, not to the image {foreign.digest}" in said(got["foreign"])
    assert (
        f"attestation is for {(attested.digest or '')[7:]}, not the artifact {(other_digest.digest or '')[7:]}"
        in (said(got["other"]))
    )
    assert said(got["absent"]) == (
        f"attestation rejected: attestation does not verify: no attestation is attached to {absent.oci}"
        " (looked up through the referrers tag schema)"
    )
    assert said(healed).startswith(f"signed by trusted key {KEY.public.short_id}")
    for model in (*got.values(),):
        assert condition(model, "Degraded")["reason"] == "ModelAttestationRejected"  # type: ignore[index]


async def test_many_referrers_are_read_only_so_far(
    k8s: Any, cluster: Cluster, registry: Registry, tmp_path: Path
) -> None:
    genuine = image(registry, tmp_path, "v1")
    with referrers_front(registry.host) as front:
        front.extra = [{"mediaType": layout.MEDIA_MANIFEST, "digest": "sha256:" + f"{i:064x}", "size": 10,
                        "artifactType": ARTIFACT_TYPE} for i in range(500)]  # fmt: skip
        ref = ImageReference(front.host, genuine.repository, None, genuine.digest)
        await cluster.trusted_keys(KEY.public_pem(), name="ci.pub")
        async with running_operator(k8s, settings(front.host)) as reconciler:
            await serve(cluster, "flooded", ref)
            refused = await cluster.wait("flooded", phase("Failed"), timeout=60)  # 32 referrers are read
            reads = reconciler.attached.reads
    assert (
        f"none of the {MAX_REFERRERS_READ} attached attestations read (500 listed, {500 - MAX_REFERRERS_READ}"
        f" skipped: over the caps on referrers, envelope bytes and signatures judged) admits {ref.oci}"
    ) in said(refused)
    # one read (a refusal is read again 30 s later at the earliest): its listing took 5 pages of 100
    assert reads == 1 and len(front.listed) == 5


async def test_twenty_junk_attestations_attached_first_do_not_keep_a_model_from_ready(
    k8s: Any, cluster: Cluster, registry: Registry, tmp_path: Path
) -> None:
    """Issue 20, finding 4: anyone who may push attached 16 junk envelopes first, and the operator read only
    those, on every first read and after every restart: a denial of admission. Now the trusted hint is read
    first, and the junk is skipped or refused."""
    ref = image(registry, tmp_path, "v1")
    for n in range(20):
        attest(ref, OTHER, datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=n))
    attest(ref)
    await cluster.trusted_keys(KEY.public_pem(), name="ci.pub")
    async with running_operator(k8s, settings(registry.host)) as reconciler:
        await serve(cluster, "junked", ref)
        ready = await cluster.wait("junked", phase("Ready"))
        reads = reconciler.attached.reads
    assert said(ready).startswith(f"signed by trusted key {KEY.public.short_id}") and reads == 1
