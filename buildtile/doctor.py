"""``buildtile doctor``: is everything buildtile needs here, and how to fix what is not."""

from __future__ import annotations

import shutil
import subprocess


def _check_llvm() -> tuple[bool, str, str]:
    try:
        import llvmlite.binding as llvm

        llvm.initialize_all_targets()
        llvm.Target.from_triple("nvptx64-nvidia-cuda")
        return True, f"LLVM {'.'.join(map(str, llvm.llvm_version_info))} with NVPTX (llvmlite)", ""
    except Exception as exc:  # any failure here means the same fix
        return False, f"LLVM NVPTX unavailable: {exc}", "pip install -U llvmlite"


def _check_nvjitlink() -> tuple[bool, str, str]:
    try:
        from buildtile.toolchain.nvjitlink import nvjitlink_version

        major, minor = nvjitlink_version()
        return True, f"nvJitLink {major}.{minor}", ""
    except Exception as exc:
        return False, f"nvJitLink unavailable: {exc}", "pip install nvidia-nvjitlink cuda-bindings"


def _check_driver() -> tuple[bool, str, str]:
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False, f"CUDA driver: cuInit failed ({err.name})", "install the NVIDIA driver; a GPU is only needed to run kernels, not to build them"
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
        return True, f"CUDA driver {version // 1000}.{version % 1000 // 10}; GPUs: {', '.join(names) or 'none'}", ""
    except Exception as exc:
        return False, f"CUDA driver not found ({exc})", "install the NVIDIA driver; a GPU is only needed to run kernels, not to build them"


def _check_tool(name: str, fix: str) -> tuple[bool, str, str]:
    path = shutil.which(name)
    if not path:
        return False, f"{name} not found", fix
    first = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.splitlines()
    return True, f"{name}: {first[0] if first else path}", ""


def run_doctor() -> int:
    checks = [
        ("LLVM", _check_llvm()),
        ("nvJitLink", _check_nvjitlink()),
        ("GPU", _check_driver()),
        ("C compiler", _check_tool("cc", "apt-get install gcc (needed for the C ABI shim)")),
        ("CMake", _check_tool("cmake", "pip install cmake (needed for the C ABI shim)")),
    ]
    build_ok = True
    for name, (ok, text, fix) in checks:
        print(f"[{'ok' if ok else '!!'}] {name}: {text}")
        if not ok:
            print(f"     fix: {fix}")
            build_ok &= name in ("GPU",)
    return 0 if build_ok else 1
