"""``--model-attestation-policy NAMESPACE/NAME``: the operator and the webhook decide an oci:// Model
by an AdmissionPolicy held in a ConfigMap, over the attestations attached to its image (kopf against
kmock, the real registry holding the referrers)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from modelseal.attest.signing.private_keys import generate_key
from modelseal.attest.verdict import Mode
from modelseal.errors import UsageError
from modelseal.operator.admission.decision import decide
from modelseal.operator.settings import OperatorSettings
from modelseal.operator.sources.source_image import RegistryAccess
from modelseal.publish.referrers.attestations import sign_image
from modelseal.publish.referrers.store import attach
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import ImageReference
from tests.operator.admission.test_admission import pod
from tests.operator.cluster import (
    ENFORCE,
    Cluster,
    phase,
    running_operator,
)
from tests.operator.sources.test_discovered_attestations import image, said, serve

RELEASE, BUILDER = generate_key("ed25519"), generate_key("ed25519")
SLSA = "https://slsa.dev/provenance/v1"
POLICY = """apiVersion: modelseal.dev/v1
kind: AdmissionPolicy
require:
  - name: release-signature
    predicateType: https://modelseal.dev/image/v1
    trust: {keys: [{file: release.pub}]}
  - name: tagged-provenance
    predicateType: https://slsa.dev/provenance/v1
    trust: {keys: [{file: builder.pub}]}
    rule: 'predicate.buildDefinition.externalParameters.workflow.ref.startsWith("refs/tags/")'
"""


def settings(host: str) -> OperatorSettings:
    access = RegistryAccess(plain_http=frozenset({host}))
    return replace(ENFORCE, trusted_keys=None, registry_access=access, admission_policy_ref=("default", "model-policy"),
                   refused_retry=timedelta(seconds=0.2))  # fmt: skip


def attest(ref: ImageReference, key: Any, predicate_type: str | None = None, ref_name: str = "") -> None:
    predicate = {"buildDefinition": {"externalParameters": {"workflow": {"ref": ref_name}}}}
    with RegistryClient(ref, plain_http=True, retries=0) as c:
        signed = sign_image(c, ref, [key], predicate_type=predicate_type,
                            predicate=predicate if predicate_type else None)  # fmt: skip
        attach(c, signed.subject, signed.envelope.to_json(), signed.predicate_type)


async def policy_configmap(cluster: Cluster, text: str, *, create: bool = True) -> None:
    data = {"policy.yaml": text, "release.pub": RELEASE.public_pem(), "builder.pub": BUILDER.public_pem()}
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "model-policy", "namespace": "default"},
            "data": data}  # fmt: skip
    if create:
        await cluster.create(cluster.configmaps, body)
    else:
        await cluster.patch(f"{cluster.configmaps}/model-policy", {"data": data})


async def test_the_operator_and_webhook_decide_by_the_policy_in_a_configmap(
    k8s: Any, cluster: Cluster, registry: Any, tmp_path: Path
) -> None:
    ref = image(registry, tmp_path, "v1")
    attest(ref, RELEASE)
    attest(ref, BUILDER, SLSA, "refs/heads/main")
    await policy_configmap(cluster, POLICY)
    async with running_operator(k8s, settings(registry.host)) as reconciler:
        reconciler.attached.retry_after = 0.0
        await serve(cluster, "served", ref)
        refused = await cluster.wait("served", phase("Failed"))
        assert not decide(pod("served", namespace="default"), Mode.ENFORCE, reconciler.verdict_for).allowed

        attest(ref, BUILDER, SLSA, "refs/tags/v1")  # attached later: the image is read again, and heals
        ready = await cluster.wait("served", phase("Ready"))
        assert decide(pod("served", namespace="default"), Mode.ENFORCE, reconciler.verdict_for).allowed

        # the policy changes: the Model is judged again, now refused
        assert reconciler.affected_by_configmap("default", "model-policy") == [("default", "served")]
        await policy_configmap(cluster, POLICY.replace("refs/tags/", "refs/tags/v2"), create=False)
        again = await cluster.wait("served", phase("Failed"))
        assert not decide(pod("served", namespace="default"), Mode.ENFORCE, reconciler.verdict_for).allowed

        # a policy whose rule does not compile refuses, naming the requirement
        await policy_configmap(
            cluster, POLICY.replace('startsWith("refs/tags/")', "startsWith("), create=False
        )
        broken = await cluster.wait("served", lambda m: "require.1" in said(m))
    assert said(refused) == (
        "attestation rejected: attestation not admitted by policy: 1 of 2 requirement(s) not met:"
        ' requirement "tagged-provenance" rule_false: ' + said(refused).split("rule_false: ", 1)[1]
    )
    assert said(refused).endswith(
        ': its rule is false: predicate.buildDefinition.externalParameters.workflow.ref ("refs/heads/main")'
        '.startsWith("refs/tags/")'
    )
    assert said(ready).startswith(
        f"admission policy met: 2 requirement(s) by 3 attestation(s) judged, attached to image {ref.digest}:"
        " release-signature by sha256:"
    )
    assert "none of 2 attestations of its type meets it" in said(again)
    assert said(broken).startswith(
        "attestation rejected: admission policy ConfigMap default/model-policy: require.1 ('tagged-provenance'): rule:"
    )


async def test_a_missing_configmap_refuses_every_model_it_judges(
    k8s: Any, cluster: Cluster, registry: Any, tmp_path: Path
) -> None:
    ref = image(registry, tmp_path, "v1")
    attest(ref, RELEASE)
    async with running_operator(k8s, settings(registry.host)):
        await serve(cluster, "served", ref)
        refused = await cluster.wait("served", phase("Failed"))
    assert said(refused).startswith(
        "attestation rejected: read admission policy ConfigMap default/model-policy:"
    )


def test_the_flag_takes_a_file_or_a_configmap(tmp_path: Path) -> None:
    s = OperatorSettings.from_flags(mode="enforce", policy_file="ml/model-policy")
    assert s.admission_policy_ref == ("ml", "model-policy") and s.discovers
    (tmp_path / "release.pub").write_text(RELEASE.public_pem())
    (tmp_path / "policy.yaml").write_text(POLICY.split("  - name: tagged")[0])
    s = OperatorSettings.from_flags(mode="enforce", policy_file=str(tmp_path / "policy.yaml"))
    assert s.admission_policy is not None and s.policy is None and s.discovers
    with pytest.raises(UsageError, match="needs --model-attestation warn or enforce"):
        OperatorSettings.from_flags(mode="off", policy_file="ml/model-policy")
    with pytest.raises(UsageError, match="no such file, nor a ConfigMap"):
        OperatorSettings.from_flags(mode="enforce", policy_file="no/such/file.yaml")


@pytest.mark.parametrize(
    ("trust", "message"),
    [
        ("{keys: [{file: /etc/hostname}]}", "trust: keys.file: name an entry of the ConfigMap"),
        ("{keys: [{file: ../release.pub}]}", "trust: keys.file: name an entry of the ConfigMap"),
        ("{keys: [{dir: .}]}", "trust: keys.dir: not in a ConfigMap; list each key"),
        ("{keys: [{file: absent.pub}]}", "trust: keys.file: no entry 'absent.pub'"),
        (
            "{trustedRoot: /etc/hostname, identities: [{identity: a, issuer: b}]}",
            "trustedRoot: name an entry",
        ),
    ],
)
def test_a_configmap_policy_reads_only_its_own_entries(trust: str, message: str) -> None:
    from modelseal.errors import PolicyFileError
    from modelseal.operator.decide.gate import ConfigMapRead
    from modelseal.operator.decide.policy_source import configmap_admission_policy

    text = POLICY.replace("{keys: [{file: release.pub}]}", trust)
    read = ConfigMapRead(
        {"policy.yaml": text, "release.pub": RELEASE.public_pem(), "builder.pub": BUILDER.public_pem()}
    )
    with pytest.raises(PolicyFileError, match=r"require\.0: trust: ") as e:
        configmap_admission_policy(read, "admission policy ConfigMap ml/p")
    assert message in e.value.message
