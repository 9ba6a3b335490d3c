"""PTX -> cubin with standalone ptxas, for the kernels nvJitLink would slow down.

nvJitLink assembles PTX as relocatable device code, and in that mode ptxas
drops every ``setmaxnreg`` (C7504: warp-specialised kernels lose their
register split) and treats its own helper routines, such as 64-bit
division, as calls to other compilation units, which serialises every
wgmma of the kernel (C7509). Standalone ptxas assembles one whole program
and does neither. It ships in NVIDIA's ``nvidia-cuda-nvcc`` wheel, needed at
build time only (``buildtile[hopper]``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from buildtile.errors import ToolchainError

#: the package that brings ptxas, named by every message about a missing one
PACKAGE = "nvidia-cuda-nvcc"
INSTALL = f"pip install {PACKAGE} (or build with `buildtile[hopper]`, or put a CUDA toolkit's bin on PATH)"

# instructions anywhere in a line (inline asm puts several on one), outside comments
_SETMAXNREG = re.compile(r"(?<![\w.%$])setmaxnreg\.")
_WGMMA = re.compile(r"(?<![\w.%$])wgmma\.mma_async\.")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def candidate_paths() -> list[Path]:
    """Where ptxas may be: the nvidia-cuda-nvcc wheel (wherever it is on ``sys.path``, as in pip's
    isolated build environment), then PATH, then a CUDA toolkit."""
    paths = []
    try:
        import nvidia  # namespace package of NVIDIA's wheels

        for base in nvidia.__path__:
            for sub in ("cu13/bin", "cuda_nvcc/bin"):
                paths.append(Path(base) / sub / "ptxas")
    except ImportError:
        pass
    on_path = shutil.which("ptxas")
    if on_path:
        paths.append(Path(on_path))
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            paths.append(Path(os.environ[env]) / "bin" / "ptxas")
    return paths


def find_ptxas() -> Path | None:
    """The first ptxas of :func:`candidate_paths` that exists."""
    return next((path for path in candidate_paths() if path.is_file() and os.access(path, os.X_OK)), None)


def ptxas_version() -> str | None:
    """ptxas' release line (``Cuda compilation tools, release 13.5, V13.5.37``), or None without one."""
    found = find_ptxas()
    if found is None:
        return None
    lines = subprocess.run([str(found), "--version"], capture_output=True, text=True, check=False).stdout.splitlines()
    return next((line for line in lines if "release" in line), lines[-1] if lines else "ptxas").strip()


def why_ptxas(ptx: str) -> str | None:
    """Why ``ptx`` must be assembled by standalone ptxas (it uses ``setmaxnreg``), or None."""
    if _SETMAXNREG.search(_COMMENT.sub("", ptx)):
        return "it uses `setmaxnreg` (a warp-specialised kernel), which nvJitLink drops"
    return None


def prefers_ptxas(ptx: str) -> bool:
    """Whether ``ptx`` should go to standalone ptxas when there is one: it needs it, or it issues
    wgmma, whose pipeline nvJitLink serialises around any helper call (a 64-bit division)."""
    return why_ptxas(ptx) is not None or bool(_WGMMA.search(_COMMENT.sub("", ptx)))


def missing(kernel: str, target: str, why: str) -> ToolchainError:
    """The error of a kernel that needs ptxas where there is none."""
    return ToolchainError(f"kernel `{kernel}` for {target} needs ptxas, and none was found: {why}",
                          code="BT0022", help=INSTALL)


def assemble(ptx: str, target: str, *, kernel: str = "kernel", opt_level: int = 3,
             verbose: bool = False) -> tuple[bytes, str]:
    """The cubin of ``ptx`` for ``target`` (``sm_XX``) and ptxas' log (with ``verbose``, the
    registers and spills of every function, as nvJitLink's is)."""
    found = find_ptxas()
    if found is None:
        raise missing(kernel, target, why_ptxas(ptx) or "it was sent to ptxas")
    # like nvJitLink, -O0 or -O3: LLVM did the level-specific work already
    options = [f"-arch={target}", "-O0" if opt_level == 0 else "-O3"] + (["--verbose"] if verbose else [])
    with tempfile.TemporaryDirectory(prefix="buildtile-ptxas-") as tmp:
        source, output = Path(tmp) / "kernel.ptx", Path(tmp) / "kernel.cubin"
        source.write_text(ptx)
        try:
            done = subprocess.run([str(found), *options, str(source), "-o", str(output)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
        except OSError as exc:
            raise ToolchainError(f"ptxas ({found}) could not be run: {exc}", help=INSTALL) from None
        log = done.stdout.replace(str(source), f"{kernel}.ptx")
        if done.returncode != 0 or not output.is_file():
            raise ToolchainError(f"ptxas could not assemble kernel `{kernel}` for {target} "
                                 f"(status {done.returncode}):\n{log.rstrip()}",
                                 help="the kernel passed every check, so this is a bug in buildtile or ptxas: "
                                      "please report it with the kernel's source, the target and "
                                      "`buildtile doctor`'s output")
        return output.read_bytes(), log
