"""The prefetchOCI Job, built as a pure function from a Model."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from modelseal.errors import InputError
from modelseal.operator.prefetch.job import SIGNING_KEY_VARIABLE, build_job, job_name
from modelseal.operator.prefetch.spec import plan_prefetch, prefetch_fingerprint

MODEL: dict[str, Any] = {
    "apiVersion": "inference.llmkube.dev/v1alpha1",
    "kind": "Model",
    "metadata": {"name": "qwen3", "namespace": "models", "uid": "1234-abcd"},
    "spec": {
        "source": "hf://Qwen/Qwen3-8B-GGUF",
        "files": ["Qwen3-8B-Q4_K_M.gguf", "tokenizer/tokenizer.json"],
        "fileSha256": {"Qwen3-8B-Q4_K_M.gguf": "a" * 64},
        "sourceSecretRef": {"name": "hf-token"},
        "downloadConcurrency": 2,
        "downloadMaxInFlightSize": "90Gi",
        "prefetchNodeSelector": {"disk": "fast"},
        "prefetchTolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "prefetchAffinity": {"nodeAffinity": {}},
        "prefetchOCI": {"image": "registry.example.com/models/qwen3:8b-q4", "ephemeralStorage": "40Gi",
                        "pushSecretRef": {"name": "registry-push"}},
    },
}  # fmt: skip
IMAGE = "ghcr.io/example/modelseal:0.1.0"


def containers(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    pod = job["spec"]["template"]["spec"]
    return {c["name"]: c for c in pod["initContainers"] + pod["containers"]}


def test_job_shape() -> None:
    job = build_job(MODEL, IMAGE)
    meta, spec = job["metadata"], job["spec"]
    assert meta["name"].startswith("qwen3-publish-") and meta["namespace"] == "models"
    assert meta["ownerReferences"] == [{"apiVersion": "inference.llmkube.dev/v1alpha1", "kind": "Model", "name": "qwen3",
                                        "uid": "1234-abcd", "controller": True, "blockOwnerDeletion": True}]  # fmt: skip
    assert meta["labels"]["inference.llmkube.dev/model"] == "qwen3"
    assert meta["annotations"]["modelseal.dev/fingerprint"] == prefetch_fingerprint(MODEL["spec"])
    assert spec["backoffLimit"] == 2 and spec["ttlSecondsAfterFinished"] == 86400
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert (
        pod["nodeSelector"] == {"disk": "fast"}
        and pod["tolerations"][0]["key"] == "gpu"
        and "affinity" in pod
    )
    assert {"name": "staging", "emptyDir": {"sizeLimit": "40Gi"}} in pod["volumes"]


def test_the_signing_key_reaches_the_publisher_alone_by_reference() -> None:
    unsigned = containers(build_job(MODEL, IMAGE))
    assert not any(a.startswith("--sign-key") for a in unsigned["publisher"]["args"])
    job = build_job(MODEL, IMAGE, signing_secret="publisher-key")
    c = containers(job)
    assert c["publisher"]["env"] == [
        {"name": "MODELSEAL_SIGNING_KEY",
         "valueFrom": {"secretKeyRef": {"name": "publisher-key", "key": "signing.key"}}},  # never optional
    ]  # fmt: skip
    assert f"--sign-key=envvar:{SIGNING_KEY_VARIABLE}" in c["publisher"]["args"]
    assert "envFrom" not in c["publisher"] and "envFrom" not in c["downloader"]
    assert "publisher-key" not in repr(c["downloader"])  # the downloader sees only HF_TOKEN
    assert [e["name"] for e in c["downloader"]["env"]] == ["HF_TOKEN"]
    pod = job["spec"]["template"]["spec"]
    assert "publisher-key" not in repr(pod["volumes"])  # never mounted: no file holds it
    assert job["metadata"]["name"] == build_job(MODEL, IMAGE)["metadata"]["name"]  # the same publication
    # both commands parse as the real CLI parses them
    from modelseal.cli import build_parser

    parsed = build_parser().parse_args(c["publisher"]["args"])
    assert parsed.sign_key == [f"envvar:{SIGNING_KEY_VARIABLE}"]


def test_a_signing_secret_that_is_not_a_secret_name_is_refused() -> None:
    with pytest.raises(InputError, match="is not a valid"):
        build_job(MODEL, IMAGE, signing_secret="../x")


def test_secrets_go_only_where_they_belong() -> None:
    c = containers(build_job(MODEL, IMAGE))
    # only the key the downloader reads, by reference: never the whole Secret (envFrom)
    assert c["downloader"]["env"] == [
        {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN", "optional": True}},
        }
    ]
    assert (
        "envFrom" not in c["downloader"] and "envFrom" not in c["publisher"] and "env" not in c["publisher"]
    )
    assert all(m["name"] != "docker-config" for m in c["downloader"]["volumeMounts"])
    assert {"name": "docker-config", "mountPath": "/docker-config", "readOnly": True} in c["publisher"][
        "volumeMounts"
    ]
    pod = build_job(MODEL, IMAGE)["spec"]["template"]["spec"]
    [secret] = [v for v in pod["volumes"] if v["name"] == "docker-config"]
    assert secret["secret"] == {
        "secretName": "registry-push",
        "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
    }


def test_commands_are_the_cli_the_end_to_end_test_runs() -> None:
    c = containers(build_job(MODEL, IMAGE))
    assert c["downloader"]["args"] == [
        "stage", "--to=/staging", "--source=hf://Qwen/Qwen3-8B-GGUF", f"--file-sha256=Qwen3-8B-Q4_K_M.gguf={'a' * 64}",
        "--download-concurrency=2", "--download-max-in-flight=90Gi", "--no-fsync", "--", "Qwen3-8B-Q4_K_M.gguf",
        "tokenizer/tokenizer.json",
    ]  # fmt: skip
    assert c["publisher"]["args"] == [
        "publish", "--image=registry.example.com/models/qwen3:8b-q4", "--from=/staging",
        "--primary=Qwen3-8B-Q4_K_M.gguf", "--result-file=/dev/termination-log",
        "--docker-config=/docker-config", "--source=hf://Qwen/Qwen3-8B-GGUF",
    ]  # fmt: skip
    for container in c.values():
        assert container["image"] == IMAGE
        assert container["resources"]["requests"]["ephemeral-storage"] == "40Gi"
        assert container["resources"]["limits"]["ephemeral-storage"] == "40Gi"
    assert {"name": "staging", "mountPath": "/staging", "readOnly": True} in c["publisher"]["volumeMounts"]


def test_the_cli_accepts_the_job_arguments() -> None:
    from modelseal.cli import build_parser

    c = containers(build_job(MODEL, IMAGE))
    for name in ("downloader", "publisher"):
        args = build_parser().parse_args(c[name]["args"])
        assert args.handler is not None


def mutated(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = copy.deepcopy(MODEL["spec"])
    for key, value in changes.items():
        *parents, last = key.split("__")
        node = spec
        for p in parents:
            node = node[p]
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return spec


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (mutated(files=["*.gguf"]), "is a glob"),
        (
            mutated(files=[f"shard-{i}.gguf" for i in range(65)], fileSha256=None),
            "65 files is more than the 64",
        ),
        (mutated(prefetchOCI__image="oci://registry.example.com/m:v1"), "drop the oci:// prefix"),
        (mutated(prefetchOCI__image="registry.example.com/m"), "give a tag to publish to"),
        (
            mutated(prefetchOCI__pushSecretRef=None),
            "pushSecretRef names no kubernetes.io/dockerconfigjson Secret",
        ),
        (mutated(prefetchOCI__ephemeralStorage=None), "ephemeralStorage is required"),
        (
            mutated(source="oci://registry.example.com/m@sha256:" + "a" * 64),
            "not a source the downloader stages",
        ),
        (mutated(sha256="b" * 64), "mutually exclusive"),
        (mutated(prefetchOCI=None), "spec.prefetchOCI is not set"),
        (mutated(files=["model.gguf", 7]), "spec.files must be a list of strings"),
        (mutated(mmproj=["x"]), "spec.mmproj a string"),
        (mutated(fileSha256={"Qwen3-8B-Q4_K_M.gguf": 1}), "spec.fileSha256 must map file entries"),
        (mutated(fileSha256=["Qwen3-8B-Q4_K_M.gguf"]), "spec.fileSha256 must map file entries"),
        (mutated(fileSha256=None, sha256=5), "spec.sha256 must be a string"),
    ],
)
def test_admission_rules(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        plan_prefetch(spec)
    assert prefetch_fingerprint(spec).startswith("sha256:")  # the refusal is recorded under a fingerprint


def test_fingerprint_follows_what_is_published() -> None:
    base = prefetch_fingerprint(MODEL["spec"])
    assert base == prefetch_fingerprint(mutated(prefetchTolerations=[], downloadConcurrency=4))
    assert base != prefetch_fingerprint(mutated(files=["Qwen3-8B-Q4_K_M.gguf"]))
    assert base != prefetch_fingerprint(mutated(prefetchOCI__image="registry.example.com/models/qwen3:other"))
    assert base != prefetch_fingerprint(mutated(fileSha256={"Qwen3-8B-Q4_K_M.gguf": "c" * 64}))
    assert base != prefetch_fingerprint(mutated(source="hf://Qwen/Other"))


def test_job_name_fits_a_label() -> None:
    name = job_name("m" * 80, "sha256:" + "f" * 64)
    assert len(name) <= 63 and name.endswith("-publish-ffffffff")


def test_the_pod_is_schedulable_under_quotas_and_has_no_api_token() -> None:
    job = build_job(MODEL, IMAGE)
    pod = job["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    for c in containers(job).values():
        assert c["resources"]["requests"]["memory"] == "64Mi" and c["resources"]["limits"]["memory"] == "1Gi"
        assert (
            c["resources"]["requests"]["ephemeral-storage"]
            == c["resources"]["limits"]["ephemeral-storage"]
            == "40Gi"
        )


@pytest.mark.parametrize(
    ("source", "files", "message"),
    [
        ("file:///proc/self/environ", None, "'/proc/self/environ' is not a remote source"),
        ("/proc/self/environ", None, "'/proc/self/environ' is not a remote source"),
        ("file:///var/run/secrets", ["token"], "is not a remote source"),
        ("http://models.example.com/m.gguf", None, "is plain http://"),
        ("hf://Qwen/Qwen3-8B-GGUF", ["http://evil.example.com/m.gguf"], "is plain http://"),
        (
            "https://user:pw@models.example.com/m.gguf?X-Amz-Signature=s3cr3t",
            ["http://x.example.com/a"],
            "x.example.com",
        ),
    ],
)
def test_jobs_download_remote_sources_only(source: str, files: list[str] | None, message: str) -> None:
    spec = mutated(source=source, files=files, fileSha256=None)
    with pytest.raises(InputError, match=message) as refused:
        plan_prefetch(spec)
    assert "s3cr3t" not in str(refused.value) and "pw@" not in str(refused.value)


def test_plain_http_sources_only_with_the_operators_flag() -> None:
    spec = mutated(source="http://models.example.com/m.gguf", files=None, fileSha256=None)
    plans, _ = plan_prefetch(spec, allow_plain_http=True)
    assert plans[0].origin == "http://models.example.com/m.gguf"
    job = build_job({**MODEL, "spec": spec}, IMAGE, allow_plain_http_sources=True)
    assert "env" not in containers(job)["downloader"]  # HF_TOKEN only ever goes to huggingface.co


def test_a_file_entry_cannot_pose_as_an_option() -> None:
    """An entry such as --source=/proc/self/environ would re-point the downloader at its own secrets."""
    from modelseal.cli import build_parser

    spec = mutated(
        files=["--source=/proc/self/environ", "--to=tmp", f"--file-sha256=Qwen3-8B-Q4_K_M.gguf={'b' * 64}"],
        fileSha256=None,
    )
    args = build_parser().parse_args(
        containers(build_job({**MODEL, "spec": spec}, IMAGE))["downloader"]["args"]
    )
    assert args.source == "hf://Qwen/Qwen3-8B-GGUF" and args.to == "/staging"
    assert args.fsync is False  # the staging emptyDir does not outlive the node
    assert args.files == [
        "--source=/proc/self/environ",
        "--to=tmp",
        f"--file-sha256=Qwen3-8B-Q4_K_M.gguf={'b' * 64}",
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sourceSecretRef": {"name": "../../kube-system/secrets/x"}}, "spec.sourceSecretRef.name"),
        ({"sourceSecretRef": "hf-token"}, "spec.sourceSecretRef must be an object"),
        ({"prefetchOCI__pushSecretRef": {"name": "Push"}}, "spec.prefetchOCI.pushSecretRef.name 'Push'"),
        ({"downloadConcurrency": "2; rm -rf"}, "spec.downloadConcurrency must be an integer"),
        ({"downloadConcurrency": 99}, "spec.downloadConcurrency must be an integer from 1 to 16"),
        ({"downloadMaxInFlightSize": 5}, "spec.downloadMaxInFlightSize must be a quantity"),
        ({"prefetchNodeSelector": ["x"]}, "spec.prefetchNodeSelector must be an object"),
        ({"prefetchTolerations": {"key": "gpu"}}, "spec.prefetchTolerations must be a list"),
        ({"source": 7}, "spec.source must be a string"),
    ],
)
def test_fields_of_the_wrong_shape_are_refused_before_the_job_is_built(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        plan_prefetch(mutated(**change))


def test_a_model_name_that_is_not_one_is_refused() -> None:
    for meta in ({"name": "../x", "namespace": "models"}, {"name": "qwen3", "namespace": "kube-system/../x"}):
        with pytest.raises(InputError, match="is not a valid"):
            build_job({**MODEL, "metadata": meta}, IMAGE)


def test_a_long_model_name_makes_valid_label_values() -> None:
    long = "m" * 62 + ".x"  # cut at 63 characters, it would end in "."
    job = build_job({**MODEL, "metadata": {**MODEL["metadata"], "name": long}}, IMAGE)
    assert job["metadata"]["labels"]["inference.llmkube.dev/model"] == "m" * 62
