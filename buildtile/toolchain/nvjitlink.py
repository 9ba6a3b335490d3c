"""PTX -> cubin: nvJitLink (no GPU and no CUDA toolkit needed), or standalone ptxas.

:func:`link_ptx` is the one way to a cubin. Kernels that nvJitLink would slow
down go to standalone ptxas (:mod:`buildtile.toolchain.ptxas`): those that use
``setmaxnreg`` must (without ptxas their build stops), those that issue wgmma do
when it is installed. Either assembler's log is then read for performance-loss
reports (:mod:`buildtile.toolchain.perf_warnings`), which stop the build.
"""

from __future__ import annotations

import ctypes
import sys
from functools import lru_cache
from pathlib import Path

from buildtile.errors import ToolchainError
from buildtile.toolchain import ptxas
from buildtile.toolchain.perf_warnings import check_log
from buildtile.toolchain.registers import fit_registers

_LIB_DIRS = ("nvidia/cu13/lib", "nvidia/nvjitlink/lib")


@lru_cache(maxsize=1)
def _load_nvjitlink():
    """cuda.bindings' nvjitlink module, with the shared library loaded.

    cuda-bindings looks for libnvJitLink in the site-packages folders only; in
    pip's isolated build environment the nvidia-nvjitlink wheel sits elsewhere
    on ``sys.path``, so find it there and load it first, process-wide.
    """
    try:
        from cuda.bindings import nvjitlink
    except ImportError:  # pragma: no cover - a dependency of buildtile
        raise ToolchainError("nvJitLink is not installed", help="pip install nvidia-nvjitlink cuda-bindings") from None
    for entry in sys.path:
        for sub in _LIB_DIRS:
            for lib in sorted(Path(entry or ".").joinpath(sub).glob("libnvJitLink.so*"), reverse=True):
                try:
                    ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
                    return nvjitlink
                except OSError:
                    continue
    return nvjitlink


def ptx_to_cubin(ptx: str, target: str, *, name: str = "kernel.ptx", opt_level: int = 3) -> bytes:
    """Assemble and link PTX into a cubin for ``target`` (``sm_XX``)."""
    return link_ptx(ptx, target, name=name, opt_level=opt_level)[0]


def link_ptx(ptx: str, target: str, *, name: str = "kernel.ptx", opt_level: int = 3,
             verbose: bool = False) -> tuple[bytes, str]:
    """The cubin of ``ptx`` for ``target`` and the assembler's log (with ``verbose``, ptxas'
    registers and spills of every function), from nvJitLink or standalone ptxas.

    Above ``opt_level`` 0, a performance-loss report in the log is a :class:`ToolchainError`
    (BT0025-BT0027); a kernel that needs ptxas where there is none is BT0022."""
    kernel = kernel_name(name, target)
    use_ptxas = _goes_to_ptxas(ptx)
    if use_ptxas:
        cubin, log = ptxas.assemble(ptx, target, kernel=kernel, opt_level=opt_level, verbose=verbose)
    else:
        cubin, log = _nvjitlink_link(ptx, target, name=name, opt_level=opt_level, verbose=verbose)
    if opt_level > 0:
        # at -O0 a slow kernel is what was asked for
        check_log(log, kernel=kernel, target=target, assembler="ptxas" if use_ptxas else "nvJitLink")
    return cubin, log


def _goes_to_ptxas(ptx: str) -> bool:
    """PTX that needs standalone ptxas goes to it (where there is none, that is BT0022); PTX that
    gains from it goes to it where it is installed."""
    if ptxas.why_ptxas(ptx) is not None:
        return True
    return ptxas.prefers_ptxas(ptx) and ptxas.find_ptxas() is not None


def kernel_name(name: str, target: str) -> str:
    """The kernel a PTX file name (a compile job's ``"pkg.ops.mm -> sm_90a.ptx"``) stands for."""
    return name.removesuffix(".ptx").removesuffix(f" -> {target}")


def _nvjitlink_link(ptx: str, target: str, *, name: str, opt_level: int, verbose: bool) -> tuple[bytes, str]:
    """nvJitLink's cubin and info log (which holds ptxas' warnings even without ``verbose``)."""
    nvjitlink = _load_nvjitlink()
    # nvJitLink (ptxas) takes -O0 or -O3 only; LLVM did the level-specific work already
    options = [f"-arch={target}", "-O0" if opt_level == 0 else "-O3"] + (["-verbose"] if verbose else [])
    try:
        handle = nvjitlink.create(len(options), options)
    except nvjitlink.nvJitLinkError as exc:
        raise ToolchainError(f"nvJitLink refused the options {options}: {exc}") from None
    except Exception as exc:  # the library itself could not be loaded
        raise ToolchainError(f"nvJitLink could not be loaded: {exc}",
                             help="pip install nvidia-nvjitlink (its library must match cuda-bindings' major version)") from None
    try:
        data = ptx.encode()
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), name)
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            raise ToolchainError(f"nvJitLink could not link {name} for {target}: {exc}\n{_error_log(nvjitlink, handle)}") from None
        size = nvjitlink.get_linked_cubin_size(handle)
        cubin = bytearray(size)
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin), _info_log(nvjitlink, handle)
    finally:
        nvjitlink.destroy(handle)


def _info_log(nvjitlink, handle) -> str:
    size = nvjitlink.get_info_log_size(handle)
    log = bytearray(size)
    nvjitlink.get_info_log(handle, log)
    return log.decode(errors="replace").rstrip("\x00")


def ptx_to_fitted_cubin(ptx: str, target: str, *, name: str = "kernel.ptx", opt_level: int = 3) -> tuple[str, bytes]:
    """The PTX with register budgets (:mod:`buildtile.toolchain.registers`) and its cubin; at
    ``opt_level`` 0 the PTX as it is."""
    if opt_level == 0:
        return ptx, ptx_to_cubin(ptx, target, name=name, opt_level=0)
    return fit_registers(ptx, lambda text: link_ptx(text, target, name=name, opt_level=opt_level, verbose=True))


def _error_log(nvjitlink, handle) -> str:
    try:
        size = nvjitlink.get_error_log_size(handle)
        log = bytearray(size)
        nvjitlink.get_error_log(handle, log)
        return log.decode(errors="replace").rstrip("\x00")
    except Exception:  # the log is a nicety; the error above already says what failed
        return ""


def nvjitlink_version() -> tuple[int, int]:
    return tuple(_load_nvjitlink().version())
