"""LLVM IR text -> PTX, through llvmlite's NVPTX backend."""

from __future__ import annotations

import threading

import llvmlite.binding as llvm

from buildtile.errors import ToolchainError
from buildtile.toolchain.libdevice import link_libdevice
from buildtile.toolchain.targets import ptx_isa, target_arch  # noqa: F401 (target_arch: part of this module's API)

_lock = threading.Lock()   # LLVM's global state is not safe to build target machines concurrently
_initialized = False


def _ensure_nvptx() -> None:
    global _initialized
    if not _initialized:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        _initialized = True


def ptx_features(target: str) -> str:
    """LLVM's feature string for ``target``: the PTX ISA version it is emitted with."""
    major, minor = ptx_isa(target)
    return f"+ptx{major}{minor}"


def llvm_to_ptx(llvm_ir: str, target: str, opt_level: int = 3) -> str:
    """Optimise ``llvm_ir`` at ``opt_level`` and emit PTX for ``target`` (``sm_XX``)."""
    features = ptx_features(target)
    with _lock:
        _ensure_nvptx()
        try:
            module = llvm.parse_assembly(llvm_ir)
            module.verify()
        except RuntimeError as exc:
            raise ToolchainError(f"LLVM rejected the generated IR (a buildtile bug): {exc}") from None
        if any(fn.is_declaration and fn.name.startswith("__nv_") for fn in module.functions):
            link_libdevice(module, keep={fn.name for fn in module.functions if not fn.is_declaration})
        machine = llvm.Target.from_triple(module.triple).create_target_machine(
            cpu=target, features=features, opt=opt_level, codemodel="default",
        )
        if opt_level > 0:
            tuning = llvm.create_pipeline_tuning_options(speed_level=opt_level)
            builder = llvm.create_pass_builder(machine, tuning)
            builder.getModulePassManager().run(module, builder)
        return machine.emit_assembly(module)
