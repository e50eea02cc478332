"""One container of a Pod, run on this machine as a kubelet's runtime would run it: the part that runs
inside a private mount namespace (``unshare --mount``; see :mod:`tests.cluster.kubelet`).

The container's root is a new, empty tmpfs, mounted in the namespace only (the host's ``/`` is
never written, and paths such as ``/models`` are never made on it). Into it go, read-only, the
folders of this machine that stand for the image (``/usr``, ``/etc``, the virtual environment
``modelseal`` runs from, ...), a few device nodes, a fresh ``/proc`` of the container's own PID
namespace, and the Pod's volumes at their ``mountPath``s, read-only where the Pod mounts them so.
The root is then made read-only if ``readOnlyRootFilesystem`` is set (else it is writable, as a
container's own layer is, and vanishes with it), the process ``chroot``s into it, changes to its
working directory, and ``setpriv`` runs the command as the container's user and groups, with its
capability bounding set and ``no_new_privs``, in the container's environment.

Run as ``python -m tests.cluster.sandbox SPEC.json`` (standard library only); SPEC is written by
:func:`tests.cluster.kubelet.run_container`. Mount failures exit 125 (as runc's do), with the
reason on stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["DEVICES", "enter"]

#: the device nodes a container gets (a bind of each; the rest of the host's /dev is not there)
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise OSError(f"mount {' '.join(args)}: {done.stderr.strip()}")


def _bind(source: str, target: Path, read_only: bool) -> None:
    """Bind ``source`` at ``target`` (made as a folder or an empty file to mount over)."""
    if Path(source).is_dir():
        target.mkdir(parents=True, exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    _mount("--bind", source, str(target))
    if read_only:  # a bind keeps the source's flags until it is remounted
        _mount("-o", "remount,bind,ro,nosuid,nodev", str(target))


def _inside(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def enter(spec: dict[str, Any]) -> None:
    """Make the container's root, enter it and exec its command (never returns)."""
    root = Path(spec["root"])
    _mount("-t", "tmpfs", "-o", "mode=0755,nosuid,nodev", "tmpfs", str(root))
    for link, to in spec["links"].items():  # a merged /usr: /bin -> usr/bin, ...
        _inside(root, link).symlink_to(to)
    for path in spec["image"]:
        _bind(path, _inside(root, path), True)
    for name in DEVICES:
        _bind(f"/dev/{name}", root / "dev" / name, False)
    (root / "proc").mkdir()
    _mount("-t", "proc", "-o", "nosuid,nodev,noexec", "proc", str(root / "proc"))
    for directory in ("tmp", "dev/shm"):
        (root / directory).mkdir(mode=0o1777, parents=True, exist_ok=True)
        os.chmod(root / directory, 0o1777)
    for mount in sorted(spec["mounts"], key=lambda m: m["target"].count("/")):  # parents first
        _bind(mount["source"], _inside(root, mount["target"]), mount["readOnly"])
    workdir = _inside(root, spec["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)  # as runc makes a missing working directory
    if spec["readOnlyRoot"]:
        _mount("-o", "remount,ro,nosuid,nodev", str(root))
    os.chroot(root)
    os.chdir(spec["workdir"])
    os.umask(0o022)  # a container's
    caps = ",".join(["-all", *(f"+{c.lower()}" for c in spec["capabilities"])])
    argv = ["/usr/bin/setpriv", f"--reuid={spec['user']}", f"--regid={spec['group']}"]
    argv += [f"--groups={','.join(map(str, spec['groups']))}"] if spec["groups"] else ["--clear-groups"]
    argv += [f"--bounding-set={caps}", "--inh-caps=-all"]
    argv += ["--no-new-privs"] if spec["noNewPrivs"] else []
    argv += ["--pdeathsig=SIGKILL"]  # ended with unshare (a change of user clears --kill-child's)
    os.execve(argv[0], [*argv, "--", *spec["argv"]], spec["env"])


if __name__ == "__main__":
    try:
        enter(json.loads(Path(sys.argv[1]).read_text()))
    except OSError as e:  # the container never started: runc's "container create failed"
        print(f"sandbox: {e}", file=sys.stderr)
        sys.exit(125)
