"""The plugin manager: backends and interop emitters, all through entry points."""

from __future__ import annotations

import importlib
from functools import lru_cache

import pluggy

from buildtile import hookspecs
from buildtile.backend import Backend, BackendImpl, Emitter
from buildtile.errors import BuildtileError

ENTRY_POINT_GROUP = "buildtile.backends"

#: buildtile's own plugins. They are declared in the same entry-point group as
#: third-party ones; this list only serves a source checkout that was never
#: installed (no entry-point metadata), such as running from a clone.
DEFAULT_PLUGINS = ("buildtile.backends.simt.plugin", "buildtile.backends.tile.plugin", "buildtile.interop.plugin")


@lru_cache(maxsize=1)
def plugin_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager("buildtile")
    pm.add_hookspecs(hookspecs)
    pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    for name in DEFAULT_PLUGINS:
        module = importlib.import_module(name)
        if not pm.is_registered(module):
            pm.register(module, name=name)
    return pm


def backends(pm: pluggy.PluginManager | None = None) -> dict[str, Backend]:
    """Every registered backend by kind; two plugins claiming one kind is an error."""
    pm = pm or plugin_manager()
    found: dict[str, Backend] = {}

    def register(backend: Backend) -> None:
        if not isinstance(backend, Backend):
            raise BuildtileError(f"a plugin registered {backend!r}, which is not a buildtile.backend.Backend",
                                 code="BT0030")
        if backend.kind in found and found[backend.kind] is not backend:
            raise BuildtileError(f"two plugins register a backend for kernel kind `{backend.kind}`",
                                 code="BT0030", help="uninstall one of them")
        if not isinstance(backend.impl, BackendImpl):
            raise BuildtileError(f"the backend for kernel kind `{backend.kind}` has {type(backend.impl).__name__} "
                                 "as its impl, which is not a buildtile.backend.BackendImpl",
                                 code="BT0030", help="subclass BackendImpl: its methods are the stages the build calls")
        found[backend.kind] = backend

    pm.hook.buildtile_register_backends(register=register)
    return found


def emitters(pm: pluggy.PluginManager | None = None) -> list[Emitter]:
    pm = pm or plugin_manager()
    found: list[Emitter] = []
    pm.hook.buildtile_register_emitters(register=found.append)
    return found
