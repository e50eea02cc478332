"""The played kubelet itself (:mod:`tests.cluster.kubelet`): a container sees what its Pod gives it and
nothing more, so what the binding scenarios show is what a node would do. No API server: a Pod
spec written here, run by :meth:`~tests.cluster.kubelet.Kubelet.run_init`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cluster.control_plane import CLUSTER
from tests.cluster.kubelet import CURL, Image, Kubelet, curl_image
from tests.publish.fileserver import file_server

pytestmark = CLUSTER
ROOT_IMAGE = "root.example/shell:1"


def _pod(*inits: dict[str, Any], fs_group: int | None = 102) -> dict[str, Any]:
    security = {} if fs_group is None else {"fsGroup": fs_group}
    return {"metadata": {"name": "p-1", "namespace": "ns", "uid": "u-1"},
            "spec": {"securityContext": security, "initContainers": list(inits), "containers": [],
                     "volumes": [{"name": "cache", "persistentVolumeClaim": {"claimName": "claim"}},
                                 {"name": "scratch", "emptyDir": {}}]}}  # fmt: skip


def _sh(name: str, script: str, image: str = CURL, **more: Any) -> dict[str, Any]:
    return {"name": name, "image": image, "command": ["sh", "-c", script],
            "terminationMessagePolicy": "FallbackToLogsOnError", **more}  # fmt: skip


@pytest.fixture
def kubelet(tmp_path: Path) -> Kubelet:
    return Kubelet(tmp_path, {CURL: curl_image(), ROOT_IMAGE: Image(0, 0, {"PATH": "/usr/bin:/bin"})})


def test_mounts_root_and_users_are_the_pods(kubelet: Kubelet) -> None:
    mounts = [{"name": "cache", "mountPath": "/models", "readOnly": True},
              {"name": "cache", "mountPath": "/sub", "subPath": "a/b"},
              {"name": "scratch", "mountPath": "/scratch"}]  # fmt: skip
    script = ("id -u; id -g; id -G; echo x > /sub/written; echo x > /scratch/s; touch /models/no || echo ro-mount;"
              " touch /tmp/no || echo ro-root; ls /models/a/b")  # fmt: skip
    sc = {
        "readOnlyRootFilesystem": True,
        "runAsUser": 4000,
        "runAsGroup": 4001,
        "allowPrivilegeEscalation": False,
    }
    assert not Path("/models").exists() and not Path("/sub").exists()
    [ran] = kubelet.run_init(_pod(_sh("look", script, volumeMounts=mounts, securityContext=sc)), {})
    assert ran.code == 0, ran
    assert ran.log.split("\n")[:3] == ["4000", "4001", "4001 102"]
    assert "ro-mount" in ran.log and "ro-root" in ran.log and ran.log.rstrip().endswith("written")
    assert (kubelet.claim("ns", "claim") / "a" / "b" / "written").read_text() == "x\n"
    assert not Path("/models").exists() and not Path("/sub").exists()  # nothing made on this machine's root
    [image_user] = kubelet.run_init(_pod(_sh("who", "id -u; id -g; touch /tmp/yes && echo rw-root")), {})
    assert image_user.log.split("\n")[:2] == ["101", "102"] and "rw-root" in image_user.log
    as_verifier = {"runAsUser": 65532}  # a uid the image's /etc/passwd does not name: group 0
    [other] = kubelet.run_init(_pod(_sh("other", "id -u; id -g", securityContext=as_verifier)), {})
    assert other.log.split("\n")[:2] == ["65532", "0"]


def test_capabilities_network_and_env_are_the_containers(kubelet: Kubelet) -> None:
    """Root with every capability dropped cannot chown, with CHOWN added it can; only a container
    named to keep the network reaches this machine's loopback; $(VAR) is expanded as the kubelet does."""
    mount = [{"name": "cache", "mountPath": "/c"}]
    drop = {"runAsUser": 0, "capabilities": {"drop": ["ALL"]}}
    add = {"runAsUser": 0, "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}}
    with file_server(files={"/f": b"served"}) as server:
        env = [{"name": "URL", "value": server.url}, {"name": "FILE", "value": "$(URL)/f"},
               {"name": "LITERAL", "value": "$$(URL)"}]  # fmt: skip
        fetch = "curl -sf $0; echo; echo $LITERAL $1 $2"
        ran = kubelet.run_init(_pod(
            _sh("denied", "chown 7:7 /c || echo denied", ROOT_IMAGE, volumeMounts=mount, securityContext=drop),
            _sh("allowed", "chown 7:7 /c && echo allowed", ROOT_IMAGE, volumeMounts=mount, securityContext=add),
            {**_sh("model-downloader", fetch), "args": ["$(FILE)", "$(PATH)", "$(HOSTNAME)"], "env": env},
            {**_sh("isolated", "curl -sf $0 || echo unreachable $?"), "args": ["$(FILE)"], "env": env},
        ), {})  # fmt: skip
    assert [r.code for r in ran] == [0, 0, 0, 0], ran
    assert "denied" in ran[0].log and "allowed" in ran[1].log
    assert ran[2].log == "served\n$(URL) $(PATH) $(HOSTNAME)\n", ran[2]  # the image's are not the kubelet's
    assert ran[3].log.strip() == "unreachable 7"


def test_a_failed_init_container_stops_the_pod_with_its_last_log_lines(kubelet: Kubelet) -> None:
    ran = kubelet.run_init(_pod(_sh("fails", "seq 1 100; exit 3"), _sh("never", "echo ran")), {})
    assert [(r.name, r.code) for r in ran] == [("fails", 3)]
    assert ran[0].message == "".join(f"{i}\n" for i in range(21, 101))  # the last 80 lines
    [quiet] = kubelet.run_init(_pod({**_sh("quiet", "exit 1"), "terminationMessagePolicy": "File"}), {})
    assert quiet.code == 1 and quiet.message == ""
