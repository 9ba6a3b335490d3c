"""NVIDIA's libdevice: the math library (``__nv_expf``...) that CUDA C++ uses.

Kernels call libdevice functions by name; the bitcode is linked into the
kernel's module only when one is called, and every function it brings is
internalized so that unused ones are dropped.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from buildtile.errors import ToolchainError

LIBDEVICE = "libdevice.10.bc"


def candidate_paths() -> list[Path]:
    """Where libdevice may be: the nvidia-nvvm wheel, then a CUDA toolkit."""
    paths = []
    try:
        import nvidia  # namespace package of NVIDIA's wheels

        for base in nvidia.__path__:
            for sub in ("cu13/nvvm/libdevice", "cuda_nvcc/nvvm/libdevice", "nvvm/libdevice"):
                paths.append(Path(base) / sub / LIBDEVICE)
    except ImportError:
        pass
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            paths.append(Path(os.environ[env]) / "nvvm" / "libdevice" / LIBDEVICE)
    paths.append(Path("/usr/local/cuda/nvvm/libdevice") / LIBDEVICE)
    return paths


@lru_cache(maxsize=1)
def libdevice_bitcode() -> bytes:
    for path in candidate_paths():
        if path.is_file():
            return path.read_bytes()
    raise ToolchainError(
        "this kernel calls math functions, which need NVIDIA's libdevice, and none was found",
        code="BT0021",
        help="pip install nvidia-nvvm (or set CUDA_HOME to a CUDA toolkit)",
    )


def link_libdevice(module, keep: set[str]) -> None:
    """Link libdevice into ``module`` (llvmlite ModuleRef); internalize all but ``keep``."""
    import llvmlite.binding as llvm

    lib = llvm.parse_bitcode(libdevice_bitcode())
    lib.triple = module.triple
    lib.data_layout = module.data_layout
    module.link_in(lib, preserve=False)
    for fn in module.functions:
        if not fn.is_declaration and fn.name not in keep:
            fn.linkage = "internal"
    for var in module.global_variables:
        if not var.is_declaration and var.name not in keep:
            var.linkage = "internal"
