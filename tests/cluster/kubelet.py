"""Playing the kubelet for a Pod read back from a real API server (there is no kubelet here).

:meth:`Kubelet.run_init` runs the Pod's init containers in order, each with its own ``command``,
``args``, ``env``, ``volumeMounts`` and ``securityContext`` as the API server stored them (after
every mutating webhook), and stops at the first that exits non-zero, as a kubelet does;
:meth:`Kubelet.report` writes what the kubelet would through ``pods/status``
(:mod:`tests.cluster.kubelet_status`). Each container runs
in a private mount namespace (``unshare --mount``, and ``--pid``, ``--ipc``, ``--uts``; ``--net``
too unless it needs the network) whose root is a tmpfs holding this machine's folders that stand
for its image and the Pod's volumes (:mod:`tests.cluster.sandbox`):

- **Images.** An :class:`Image` says what runs for an image reference: its user and group, its
  environment (``PATH``), entrypoint and working directory, and the folders of this machine that
  are its file system. LLMKube's ``curlimages/curl`` is this machine's ``sh`` and ``curl``; the
  verifier's image (the operator's) is the virtual environment ``modelseal`` is installed in.
- **Volumes.** A claim is a folder per namespace and claim name, shared by every Pod that mounts
  it (LLMKube's ``llmkube-model-cache``); an emptyDir a folder per Pod; the service account token's
  projected volume an empty folder (nothing here reads a token). Each is bound at the container's
  ``mountPath`` (``subPath`` honoured), read-only where ``readOnly`` is set. ``fsGroup`` is applied
  as the kubelet applies it to a volume it mounts (group owner, group read-write, setgid folders).
- **Security context.** ``runAsUser``/``runAsGroup`` (the container's, else the Pod's, else the
  image's user and group; a user given without a group runs in the group the image's
  /etc/passwd gives it, else 0, as containerd does), ``fsGroup`` and ``supplementalGroups`` as
  extra groups, the capability
  bounding set (containerd's defaults, ``drop``, ``add``), ``no_new_privs`` where
  ``allowPrivilegeEscalation`` is false, a read-only root where ``readOnlyRootFilesystem`` is set.
  Not played: seccomp and AppArmor profiles, resource limits, service links, ``fieldRef`` and
  ``resourceFieldRef`` values (refused, so no test passes on a value it did not give).
- **Env.** The image's, then ``HOSTNAME``, then ``envFrom`` (Secrets and ConfigMaps read from
  the API server, as the kubelet reads them: LLMKube's downloader takes an ``s3://`` Model's
  credentials and endpoint so), then ``env`` (a ``value``, or ``valueFrom`` a Secret's or a
  ConfigMap's key), each value expanded with ``$(VAR)`` (``$$`` for ``$``) over the declared
  variables before it, as the kubelet does; ``command`` and ``args`` expanded with all the
  declared ones (never the image's, nor ``HOSTNAME``, which the kubelet's map does not hold).
- **Results.** The log is stdout and stderr together; a container that exits non-zero with
  ``terminationMessagePolicy: FallbackToLogsOnError`` gets the last 80 lines of it, at most
  2,048 bytes, as its termination message.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tests.cluster.control_plane import ROOT
from tests.cluster.kube import Kube
from tests.cluster.kubelet_status import Ran, now, report

__all__ = ["CURL", "Image", "Kubelet", "Ran", "curl_image", "verifier_image"]

CURL = "docker.io/curlimages/curl:8.18.0"
#: containerd's default capabilities for a container that is not privileged
DEFAULT_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
                        "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE")  # fmt: skip
LOG_LINES, LOG_BYTES = 80, 2048  # the kubelet's FallbackToLogsOnError tail
CONTAINER_SECONDS = 60
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_SYSTEM = ("/usr", "/etc")
_LINKS = {"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib64"}
_REFS = {"secretRef": "secrets", "configMapRef": "configmaps"}
#: what env comes from: (secretRef | configMapRef, name) -> its data
Sources = dict[tuple[str, str], dict[str, str]]
_SETUP = threading.Lock()  # Pods started at once (threads) set their shared claim up one at a time


@dataclasses.dataclass(frozen=True)
class Image:
    """What stands for an image on this machine: its user and group, and ``passwd``, the groups
    its /etc/passwd gives users by uid (where containerd finds the group of a ``runAsUser``)."""

    user: int
    group: int
    env: Mapping[str, str]
    entrypoint: tuple[str, ...] = ()
    workdir: str = "/"
    folders: tuple[str, ...] = _SYSTEM
    passwd: Mapping[int, int] = dataclasses.field(default_factory=dict)


def curl_image() -> Image:
    """LLMKube's init image: ``curl_user`` (uid 101, gid 102, as LLMKube's notes give it); this
    machine's ``sh`` and ``curl``."""
    return Image(101, 102, {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
                 ("/entrypoint.sh",), "/home/curl_user", passwd={0: 0, 101: 102})  # fmt: skip


def verifier_image() -> Image:
    """The operator's image (Dockerfile: USER 65532:65532, WORKDIR /tmp, ENTRYPOINT modelseal; its
    /etc/passwd, python:slim's, has no user 65532): the virtual environment this test runs in,
    where ``modelseal`` is installed."""
    venv = Path(sys.prefix)
    folders = (*_SYSTEM, str(venv), sys.base_prefix, str(ROOT / "src"))  # src: an editable install
    return Image(65532, 65532, {"PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin"}, ("modelseal",),
                 "/tmp", folders)  # fmt: skip


def expand(text: str, env: Mapping[str, str]) -> str:
    """``$(VAR)`` replaced by its value where VAR is defined, ``$$`` by ``$`` (the kubelet's rule)."""
    return _REFERENCE.sub(lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


def _tail(log: bytes) -> str:
    lines = log.decode("utf-8", "replace").splitlines(keepends=True)[-LOG_LINES:]
    return "".join(lines).encode()[-LOG_BYTES:].decode("utf-8", "replace")


def _owned_by_group(folder: Path, group: int) -> None:
    """What the kubelet does to a volume for ``fsGroup``: group owner, group read-write, setgid
    folders, each file changed only where it differs (as the kubelet skips a file already so; a
    file another Pod's container removes meanwhile is passed over)."""
    with _SETUP:
        for path in [folder, *folder.rglob("*")]:
            with contextlib.suppress(FileNotFoundError):
                st = path.lstat()
                if stat.S_ISLNK(st.st_mode):
                    continue
                want = st.st_mode & 0o7777 | (0o2070 if stat.S_ISDIR(st.st_mode) else 0o060)
                if st.st_gid != group:
                    os.chown(path, -1, group)
                if st.st_mode & 0o7777 != want:
                    os.chmod(path, want)


def _sub_path(volume: Path, sub: Path) -> None:
    """Make a ``subPath`` as the kubelet does: each missing folder with the volume root's mode and
    owners (so ``fsGroup`` may write it), none reached through a symlink."""
    st, at = volume.stat(), volume
    for part in sub.parts:
        at = at / part
        assert not at.is_symlink(), f"subPath {sub} goes through a symlink"
        if not at.exists():
            at.mkdir(mode=st.st_mode & 0o7777)
            os.chown(at, st.st_uid, st.st_gid)
            os.chmod(at, st.st_mode & 0o7777)


def _security(pod: Mapping[str, Any], container: Mapping[str, Any], image: Image) -> dict[str, Any]:
    psc, sc = pod["spec"].get("securityContext") or {}, container.get("securityContext") or {}
    user = sc.get("runAsUser", psc.get("runAsUser"))
    given = sc.get("runAsGroup", psc.get("runAsGroup"))
    if user is None:  # the image's user and group
        user, group = image.user, image.group if given is None else given
    else:  # containerd: the group /etc/passwd gives that uid, else 0
        group = image.passwd.get(user, 0) if given is None else given
    assert not (sc.get("runAsNonRoot", psc.get("runAsNonRoot")) and user == 0), "runAsNonRoot with user 0"
    groups = [g for g in [psc.get("fsGroup"), *(psc.get("supplementalGroups") or [])] if g is not None]
    assert not sc.get("privileged"), "privileged containers are not played"
    caps = sc.get("capabilities") or {}
    drop = set(caps.get("drop") or [])
    kept = set() if "ALL" in drop else set(DEFAULT_CAPABILITIES) - drop
    return {"user": user, "group": group, "groups": groups, "capabilities": sorted(kept | set(caps.get("add") or [])),
            "noNewPrivs": sc.get("allowPrivilegeEscalation") is False,
            "readOnlyRoot": sc.get("readOnlyRootFilesystem") is True}  # fmt: skip


@dataclasses.dataclass
class Kubelet:
    """Runs Pods' init containers on this machine (see the module's text)."""

    folder: Path
    images: Mapping[str, Image]
    #: containers that keep this machine's network (LLMKube's downloader reaches a loopback server)
    network: frozenset[str] = frozenset({"model-downloader"})

    def claim(self, namespace: str, name: str) -> Path:
        """The folder standing for a claim: one per namespace and name, shared between Pods."""
        path = self.folder / "claims" / namespace / name
        with _SETUP:
            if not path.exists():
                path.mkdir(parents=True)
                path.chmod(0o755)  # a new volume's root: root's, as a provisioner makes it
        return path

    def volumes(self, pod: Mapping[str, Any]) -> dict[str, Path]:
        """Each of the Pod's volumes as a folder here, ``fsGroup`` applied."""
        found: dict[str, Path] = {}
        namespace, uid = pod["metadata"]["namespace"], pod["metadata"]["uid"]
        for volume in pod["spec"].get("volumes") or []:
            name = volume["name"]
            if "persistentVolumeClaim" in volume:
                found[name] = self.claim(namespace, volume["persistentVolumeClaim"]["claimName"])
            elif "emptyDir" in volume or "projected" in volume:  # the token's volume: nothing reads it
                found[name] = self.folder / "pods" / uid / name
                found[name].mkdir(parents=True, exist_ok=True)
                found[name].chmod(0o777 if "emptyDir" in volume else 0o755)
            else:
                raise AssertionError(f"the played kubelet has no folder for volume {volume}")
        group = (pod["spec"].get("securityContext") or {}).get("fsGroup")
        if group is not None:  # while no container runs (the kubelet sets a volume up before)
            for name, path in found.items():
                if "projected" not in next(v for v in pod["spec"]["volumes"] if v["name"] == name):
                    _owned_by_group(path, group)
        return found

    def _mounts(self, container: Mapping[str, Any], volumes: Mapping[str, Path]) -> list[dict[str, Any]]:
        out = []
        for m in container.get("volumeMounts") or []:
            assert not m.get("subPathExpr") and m.get("mountPropagation") in (None, "None"), m
            source = volumes[m["name"]]
            if m.get("subPath"):
                sub = Path(os.path.normpath(m["subPath"]))
                assert not sub.is_absolute() and ".." not in sub.parts, m
                _sub_path(source, sub)
                source = source / sub
            out.append(
                {"source": str(source), "target": m["mountPath"], "readOnly": m.get("readOnly") is True}
            )
        return out

    def command(self, container: Mapping[str, Any], image: Image, declared: Mapping[str, str]) -> list[str]:
        """What runs: ``command`` (else the image's entrypoint) and ``args``, the container's own
        expanded with the variables it declares (the kubelet's map: not the image's)."""
        command = [expand(a, declared) for a in container.get("command") or []] or list(image.entrypoint)
        return command + [expand(a, declared) for a in container.get("args") or []]

    def environment(self, container: Mapping[str, Any], sources: Sources) -> dict[str, str]:
        """The variables the container declares (``envFrom``, then ``env``), each ``value`` expanded
        over those before it."""
        env: dict[str, str] = {}
        for source in container.get("envFrom") or []:
            kind = "secretRef" if "secretRef" in source else "configMapRef"
            data = sources.get((kind, source[kind]["name"]))
            assert data is not None or source[kind].get("optional"), f"{source} names nothing"
            env.update({source.get("prefix", "") + k: v for k, v in (data or {}).items()})
        for variable in container.get("env") or []:
            if "valueFrom" in variable:
                kind = next(iter(variable["valueFrom"]))
                assert kind in ("secretKeyRef", "configMapKeyRef"), f"{kind} is not played: {variable}"
                ref = variable["valueFrom"][kind]
                env[variable["name"]] = (sources.get((kind[:-6] + "Ref", ref["name"])) or {})[ref["key"]]
            else:
                env[variable["name"]] = expand(variable.get("value", ""), env)
        return env

    async def sources(self, kube: Kube, pod: Mapping[str, Any]) -> Sources:
        """The Secrets and ConfigMaps the Pod's init containers take env from, read as the kubelet reads them."""
        found: Sources = {}
        namespace = pod["metadata"]["namespace"]
        for container in pod["spec"].get("initContainers") or []:
            refs = [(k, s[k]["name"]) for s in container.get("envFrom") or [] for k in _REFS if k in s]
            refs += [(k[:-6] + "Ref", v["valueFrom"][k]["name"]) for v in container.get("env") or []
                     for k in ("secretKeyRef", "configMapKeyRef") if k in (v.get("valueFrom") or {})]  # fmt: skip
            for kind, name in refs:
                obj = await kube.get(f"/api/v1/namespaces/{namespace}/{_REFS[kind]}/{name}")
                data = (obj or {}).get("data") or {}
                if obj is not None:
                    found[(kind, name)] = {k: base64.b64decode(v).decode() for k, v in data.items()} \
                        if kind == "secretRef" else dict(data)  # fmt: skip
        return found

    async def start(
        self, kube: Kube, pod: Mapping[str, Any], *, after: Mapping[str, Callable[[], object]] | None = None
    ) -> list[Ran]:
        """:meth:`run_init`, once what the Pod's env comes from is read (the containers run in a thread)."""
        sources = await self.sources(kube, pod)
        return await asyncio.to_thread(self.run_init, pod, sources, after)

    def run_container(
        self,
        pod: Mapping[str, Any],
        container: Mapping[str, Any],
        volumes: Mapping[str, Path],
        sources: Sources,
    ) -> Ran:
        """Run one container to its end; its exit code, log and termination message."""
        image = self.images[container["image"]]
        declared = self.environment(container, sources)
        env = {**image.env, "HOSTNAME": pod["metadata"]["name"], **declared}
        place = Path(tempfile.mkdtemp(prefix=f"{container['name']}-", dir=self.folder / "runs"))
        (place / "root").mkdir()
        spec = {"root": str(place / "root"), "links": _LINKS, "image": list(image.folders),
                "mounts": self._mounts(container, volumes), "workdir": container.get("workingDir") or image.workdir,
                "argv": self.command(container, image, declared), "env": env, **_security(pod, container, image)}  # fmt: skip
        (place / "spec.json").write_text(json.dumps(spec))
        isolate = [] if container["name"] in self.network else ["--net"]
        started = now()
        with (place / "log").open("wb") as log:
            done = subprocess.run(
                ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "--ipc",
                 "--uts", *isolate, "--", sys.executable, "-m", "tests.cluster.sandbox", str(place / "spec.json")],
                stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                timeout=CONTAINER_SECONDS, check=False,
            )  # fmt: skip
        output = (place / "log").read_bytes()
        fallback = container.get("terminationMessagePolicy") == "FallbackToLogsOnError"
        message = _tail(output) if done.returncode != 0 and fallback else ""
        return Ran(container["name"], container["image"], done.returncode, output.decode("utf-8", "replace"),
                   message, started, now())  # fmt: skip

    def run_init(
        self,
        pod: Mapping[str, Any],
        sources: Sources,
        after: Mapping[str, Callable[[], object]] | None = None,
    ) -> list[Ran]:
        """Run the Pod's init containers in order until one exits non-zero (``sources``: the Secrets
        and ConfigMaps their env comes from; ``after``: what happens on this machine once the named
        container has run, such as another writer of a shared claim)."""
        volumes = self.volumes(pod)
        (self.folder / "runs").mkdir(parents=True, exist_ok=True)
        ran: list[Ran] = []
        for container in pod["spec"].get("initContainers") or []:
            assert container.get("restartPolicy") != "Always", "native sidecars are not played"
            ran.append(self.run_container(pod, container, volumes, sources))
            if after and container["name"] in after:
                after[container["name"]]()
            if ran[-1].code != 0:
                break
        return ran

    async def report(self, kube: Kube, pod: Mapping[str, Any], ran: list[Ran]) -> dict[str, Any]:
        """Write the Pod's status as the kubelet would after ``ran``; return the Pod as stored."""
        return await report(kube, pod, ran)
