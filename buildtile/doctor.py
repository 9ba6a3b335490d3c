"""``buildtile doctor``: is everything buildtile uses here, where was it found, and how to fix what is not.

One line per piece, ``[ok]`` or ``[!!]``, with a fix under each missing one.
The exit status is 1 only when a build cannot work: a missing GPU, libdevice
(needed only by kernels that call math functions), ptxas (needed only by
warp-specialised kernels, those that use setmaxnreg) or the compiled launch
module (the runtime falls back to Python) is reported but does not fail.
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path


@dataclass(frozen=True)
class Check:
    """What one piece looks like here."""

    name: str
    ok: bool
    text: str
    fix: str = ""
    required: bool = True        # a build cannot work without it
    detail: tuple[str, ...] = () # shown with -v


def _check_buildtile() -> Check:
    from buildtile import __version__

    # the runtime ships inside buildtile's own distribution: one version for both
    return Check("buildtile", True, f"buildtile {__version__} (runtime {__version__}, in the same distribution)")


def _check_llvm() -> Check:
    try:
        import llvmlite
        import llvmlite.binding as llvm

        llvm.initialize_all_targets()
        llvm.Target.from_triple("nvptx64-nvidia-cuda")
        return Check("LLVM", True, f"LLVM {'.'.join(map(str, llvm.llvm_version_info))} with NVPTX "
                                   f"(llvmlite {llvmlite.__version__})")
    except Exception as exc:  # any failure here means the same fix
        return Check("LLVM", False, f"LLVM NVPTX unavailable: {exc}", "pip install -U llvmlite")


def _check_nvjitlink() -> Check:
    try:
        from buildtile.toolchain.nvjitlink import nvjitlink_version

        major, minor = nvjitlink_version()
        return Check("nvJitLink", True, f"nvJitLink {major}.{minor}")
    except Exception as exc:
        return Check("nvJitLink", False, f"nvJitLink unavailable: {exc}", "pip install nvidia-nvjitlink cuda-bindings")


def _check_libdevice() -> Check:
    from buildtile.toolchain import libdevice

    searched = libdevice.candidate_paths()
    found = next((path for path in searched if path.is_file()), None)
    if found is None:
        return Check("libdevice", False, f"{libdevice.LIBDEVICE} not found (kernels that call math functions "
                                         "such as exp or sqrt need it)",
                     "pip install nvidia-nvvm (or set CUDA_HOME to a CUDA toolkit)", required=False,
                     detail=tuple(f"searched {path}" for path in searched))
    return Check("libdevice", True, f"{found.name} from {_provider(found)} ({found})")


def _provider(path: Path) -> str:
    """The wheel (``nvidia-nvvm 13.0.48``) or CUDA toolkit (``CUDA 12.4.1``) a file comes from."""
    resolved = path.resolve()
    for dist in metadata.distributions():
        name = dist.metadata["Name"] or ""
        if not name.lower().startswith("nvidia-"):
            continue
        for file in dist.files or ():
            if file.name == path.name and Path(str(dist.locate_file(file))).resolve() == resolved:
                return f"{name} {dist.version}"
    for root in resolved.parents:
        version_file = root / "version.json"
        if version_file.is_file():
            try:
                return f"CUDA {json.loads(version_file.read_text())['cuda']['version']}"
            except (ValueError, KeyError, TypeError):
                break
    return "an unknown CUDA installation"


def _check_ptxas() -> Check:
    from buildtile.toolchain import ptxas

    searched = ptxas.candidate_paths()
    found = ptxas.find_ptxas()
    if found is None:
        return Check("ptxas", False, "ptxas not found (warp-specialised kernels, those that use setmaxnreg, "
                                     "cannot build; wgmma kernels go through nvJitLink, which may slow them)",
                     ptxas.INSTALL, required=False, detail=tuple(f"searched {path}" for path in searched))
    return Check("ptxas", True, f"{ptxas.ptxas_version()} ({found}); assembles warp-specialised kernels "
                                "(setmaxnreg) and wgmma kernels")


def _check_launch_module() -> Check:
    name = "buildtile.runtime._native"
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        return Check("launch module", False, f"{name} not importable ({exc}): launches go through Python, slower",
                     "reinstall buildtile where a C compiler is available", required=False)
    return Check("launch module", True, f"{name} ({Path(module.__file__ or name).name})")


def _check_driver() -> Check:
    fix = "install the NVIDIA driver; a GPU is only needed to run kernels, not to build them"
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return Check("GPU", False, f"CUDA driver: cuInit failed ({err.name})", fix, required=False)
        _, version = driver.cuDriverGetVersion()
        _, count = driver.cuDeviceGetCount()
        names = []
        for ordinal in range(count):
            _, dev = driver.cuDeviceGet(ordinal)
            _, raw = driver.cuDeviceGetName(64, dev)
            _, major = driver.cuDeviceGetAttribute(driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
            _, minor = driver.cuDeviceGetAttribute(driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
            name = raw.split(b"\x00")[0].decode()
            names.append(f"{name} (sm_{major}{minor})")
        return Check("GPU", True, f"CUDA driver {version // 1000}.{version % 1000 // 10}; GPUs: {', '.join(names) or 'none'}")
    except Exception as exc:
        return Check("GPU", False, f"CUDA driver not found ({exc})", fix, required=False)


def _check_tool(label: str, name: str, fix: str) -> Check:
    path = shutil.which(name)
    if not path:
        return Check(label, False, f"{name} not found", fix)
    first = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout.splitlines()
    return Check(label, True, f"{name}: {first[0] if first else path}")


def checks() -> list[Check]:
    """Every piece, in the order the build uses them."""
    return [
        _check_buildtile(),
        _check_llvm(),
        _check_nvjitlink(),
        _check_libdevice(),
        _check_ptxas(),
        _check_launch_module(),
        _check_tool("C compiler", "cc", "apt-get install gcc (needed for the C ABI shim)"),
        _check_tool("CMake", "cmake", "pip install cmake (needed for the C ABI shim)"),
        _check_driver(),
    ]


def run_doctor(verbose: bool = False) -> int:
    """Print one line per piece; 0 when a build can work, else 1."""
    build_ok = True
    for check in checks():
        print(f"[{'ok' if check.ok else '!!'}] {check.name}: {check.text}")
        if verbose:
            for line in check.detail:
                print(f"     {line}")
        if not check.ok:
            print(f"     fix: {check.fix}")
            build_ok &= not check.required
    return 0 if build_ok else 1
