"""Every Model the README and docs/ show, applied with strict field validation to the real API server
serving LLMKube v0.9.19's own Model CRD (issue 29, item 3).

The CRD is read at test time from where ``scripts/cluster.sh build`` keeps it (LLMKube's
``config/crd/bases``, built from its release), never copied into the repository. The suite's
control plane serves another Model CRD at ``inference.llmkube.dev`` (deploy/crd's, or LLMKube's),
so v0.9.19's is installed under a group of its own, ``v0919.llmkube.test``: the same schema,
patterns and CEL rules, beside it. A create with ``fieldValidation=Strict`` is what ``kubectl
apply`` does by default: an unknown field (``spec.attestation``, which v0.9.19 does not have) is
refused, not pruned. A Model the docs mark as needing LLMKube's newer schema (tests/docs_models.py)
must be refused for exactly the newer field, as the docs say beside it.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.control_plane import CLUSTER, ROOT
from tests.cluster.kube import Kube
from tests.docs_models import DocModel, doc_models

pytestmark = CLUSTER
GROUP = "v0919.llmkube.test"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def crd_file() -> Path:
    """LLMKube v0.9.19's Model CRD in the build cache (scripts/cluster.sh's CACHE)."""
    cache = os.environ.get("MODELSEAL_CLUSTER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "modelseal", "cluster"
    )
    found = sorted(Path(cache).glob("llmkube-v0.9.19-*/crd/inference.llmkube.dev_models.yaml"))
    assert found, (
        f"no LLMKube v0.9.19 CRDs under {cache}: run scripts/cluster.sh build (scripts/test.sh does)"
    )
    return found[-1]


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    """v0.9.19's Model CRD, its group renamed so it can be served beside the suite's."""
    body: dict[str, Any] = yaml.safe_load(crd_file().read_text())
    assert body["spec"]["group"] == "inference.llmkube.dev" and body["spec"]["names"]["kind"] == "Model"
    body["spec"]["group"] = GROUP
    body["metadata"] = {"name": f"{body['spec']['names']['plural']}.{GROUP}"}
    return body


async def _served(admin: Kube, crd: dict[str, Any]) -> str:
    r = await admin.request("POST", CRDS, json=crd)
    assert r.status_code in (201, 409), r.text
    name = crd["metadata"]["name"]
    for _ in range(600):
        found = await admin.get(f"{CRDS}/{name}")
        conditions = ((found or {}).get("status") or {}).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return f"/apis/{GROUP}/{crd['spec']['versions'][0]['name']}"
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name} not Established after 60s")


async def _apply(admin: Kube, api: str, namespace: str, body: dict[str, Any]) -> Any:
    """What ``kubectl apply`` (strict field validation) makes of ``body``, stored nowhere (a dry run)."""
    model = {**body, "apiVersion": f"{GROUP}/v1alpha1",
             "metadata": {**body["metadata"], "namespace": namespace, "name": f"m-{uuid.uuid4().hex[:8]}"}}  # fmt: skip
    return await admin.request("POST", f"{api}/namespaces/{namespace}/models", json=model,
                               params={"fieldValidation": "Strict", "dryRun": "All"})  # fmt: skip


MODELS = doc_models()
EXAMPLE = next(d for d in yaml.safe_load_all((ROOT / "deploy" / "example" / "model.yaml").read_text())
               if d["kind"] == "Model")  # fmt: skip


@pytest.mark.parametrize("model", MODELS, ids=[f"{m.where}:{m.body['metadata']['name']}" for m in MODELS])
async def test_every_model_the_docs_show_is_taken_by_llmkube_v0_9_19(
    admin: Kube, namespace: str, crd: dict[str, Any], model: DocModel
) -> None:
    api = await _served(admin, crd)
    r = await _apply(admin, api, namespace, model.body)
    if not model.newer_only:
        assert r.status_code == 201, f"{model.where}: {r.text}"
        assert (r.json().get("metadata") or {}).get("annotations") == model.body["metadata"].get(
            "annotations"
        )
        return
    assert r.status_code in (400, 422), r.text  # what the docs say v0.9.19 lacks, and nothing else
    said = r.json()["message"]
    assert 'unknown field "spec.prefetchOCI"' in said or "spec.source" in said, said
    if "prefetchOCI" in model.body["spec"]:  # and the rest of it is taken
        newer = {k: v for k, v in model.body["spec"].items() if k != "prefetchOCI"}
        assert (await _apply(admin, api, namespace, {**model.body, "spec": newer})).status_code == 201


async def test_the_example_is_taken_and_spec_attestation_is_not(
    admin: Kube, namespace: str, crd: dict[str, Any]
) -> None:
    """deploy/example's Model; and the reference modelseal used to document, which v0.9.19 refuses."""
    api = await _served(admin, crd)
    assert (await _apply(admin, api, namespace, EXAMPLE)).status_code == 201
    old = {
        **EXAMPLE,
        "spec": {**EXAMPLE["spec"], "attestation": {"configMapKeyRef": {"name": "a", "key": "k"}}},
    }
    refused = await _apply(admin, api, namespace, old)
    assert refused.status_code in (400, 422), refused.text
    assert 'strict decoding error: unknown field "spec.attestation"' in refused.json()["message"]
