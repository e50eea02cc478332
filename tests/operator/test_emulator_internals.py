"""Fail loudly if kmock's internals that tests/operator/emulator.py relies on change."""

import kmock
from kmock import _version
from kmock._internal import aiobus, enums


def test_kmock_is_the_pinned_version() -> None:
    assert _version.__version__ == "0.8"


def test_the_internals_the_emulator_uses_exist() -> None:
    emulator = kmock.KubernetesEmulator
    for name in ("_handle", "_serve_list", "_serve_watch", "_render_error",
                 "_KubernetesEmulator__get_objs", "_KubernetesEmulator__check"):  # fmt: skip
        assert hasattr(emulator, name), name
    assert {"_lock", "_buses", "_objects"} <= {a.name for a in emulator.__attrs_attrs__}
    assert hasattr(enums.action, "CREATE") and hasattr(enums.action, "UPDATE")
    assert hasattr(aiobus.Bus, "mark") and hasattr(aiobus.Bus, "unmark") and hasattr(aiobus.Bus, "stream")
