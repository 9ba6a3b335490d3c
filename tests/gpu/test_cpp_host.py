"""The C++ host of example_project/cpp, built with CMake and run on a GPU.

Its results are compared with NumPy. Two packages serve it:

- a stand-in example_kernels whose kernels are hand-written PTX
  (tests/c_abi_support.py), emitted and built here, once with a cubin for
  this GPU and once with PTX only (JIT) — this tests the C ABI alone;
- the installed example_kernels (``pip install ./example_project``), when
  there is one — this tests the whole build.

Skipped without an NVIDIA GPU, CMake, or a CUDA toolkit (the host uses
cudaMalloc).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from buildtile.interop.c_abi import emit

ROOT = Path(__file__).parents[2]
HOST = ROOT / "example_project" / "cpp"
CMAKE = shutil.which("cmake")


def _gpu_compute_capability() -> tuple[int, int] | None:
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        err, count = driver.cuDeviceGetCount()
        if err != driver.CUresult.CUDA_SUCCESS or count == 0:
            return None
        attr = driver.CUdevice_attribute
        _, major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0)
        _, minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0)
        return major, minor
    except Exception:  # any failure to ask the driver means: no usable GPU
        return None


def _has_cuda_toolkit() -> bool:
    return bool(shutil.which("nvcc") or os.environ.get("CUDAToolkit_ROOT") or Path("/usr/local/cuda/bin/nvcc").exists())


def _load_support():
    """tests/c_abi_support.py, which the CPU tests share (tests/ need not be on sys.path)."""
    spec = importlib.util.spec_from_file_location("c_abi_support", ROOT / "tests" / "c_abi_support.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


support = _load_support()
CC = _gpu_compute_capability()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(CC is None, reason="needs an NVIDIA GPU with its driver"),
    pytest.mark.skipif(CMAKE is None, reason="needs cmake"),
    pytest.mark.skipif(not _has_cuda_toolkit(), reason="the C++ host needs a CUDA toolkit (cudart)"),
]


def run(cmd, **kwargs) -> str:
    result = subprocess.run([str(c) for c in cmd], check=False, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, cmd))}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def build_and_run_host(cmake_dir: Path, work: Path) -> tuple[str, Path]:
    build, out = work / "host-build", work / "dump"
    out.mkdir()
    run([CMAKE, "-S", HOST, "-B", build, f"-Dexample_kernels_DIR={cmake_dir}", "-DCMAKE_BUILD_TYPE=Release"])
    run([CMAKE, "--build", build])
    return run([build / "example_host", "--dump", out]), out


def check_against_numpy(stdout: str, dump: Path) -> None:
    lines = stdout.splitlines()
    assert lines[0] == "vecadd n=1000003 max_abs_err=0 OK", stdout
    assert lines[1].startswith("saxpy n=1000003 alpha=2.5 ") and lines[1].endswith(" OK"), stdout
    assert lines[2] == "matadd shape=(1023, 517) max_abs_err=0 OK", stdout
    assert lines[3].startswith("refused vecadd with an output shorter than its inputs: error[BT0600]: "), stdout
    assert "`len(a) == len(c)` but len(a) = 1000003, len(c) = 1000002" in lines[3]
    assert any(line.startswith("refused vecadd writing into its own input: error[BT0502]: ") for line in lines)

    def load(name, shape=None):
        values = np.fromfile(dump / f"{name}.f32", dtype=np.float32)
        return values.reshape(shape) if shape else values

    a, b = load("vecadd.a"), load("vecadd.b")
    np.testing.assert_array_equal(load("vecadd.c"), a + b)
    np.testing.assert_allclose(load("saxpy.out"), np.float32(2.5) * a + b, rtol=0, atol=1e-6)
    ma, mb = load("matadd.a", (1023, 517)), load("matadd.b", (1023, 517))
    np.testing.assert_array_equal(load("matadd.c", (1023, 517)), ma + mb)


@pytest.mark.parametrize("image", ["cubin", "ptx"])
def test_cpp_host_runs_hand_written_kernels_through_the_c_abi(tmp_path, image):
    """cubin: built for this GPU's target; ptx: only for sm_80's PTX, JIT-compiled here."""
    major, minor = CC
    own = f"sm_{major}{minor}"
    targets = ("sm_80", own) if image == "cubin" and own != "sm_80" else ("sm_80",)
    if image == "ptx" and (major, minor) == (8, 0):
        from gpu_gate import not_this_hardware

        not_this_hardware("on sm_80 the PTX target is the device's own")
    site = tmp_path / "site"
    manifest = support.write_package(site, support.example_kernels(), targets=targets, real_cubins=True)
    result = emit(manifest, site / support.PACKAGE / "_buildtile", tmp_path / "build", None)
    build = tmp_path / "shim-build"
    run([CMAKE, "-S", result.cmake_source_dir, "-B", build, f"-DSKBUILD_PLATLIB_DIR={site}"])
    run([CMAKE, "--build", build])
    run([CMAKE, "--install", build])
    stdout, dump = build_and_run_host(site / support.PACKAGE / "_buildtile" / "cmake", tmp_path)
    check_against_numpy(stdout, dump)


def test_cpp_host_runs_the_installed_example_kernels(tmp_path):
    if importlib.util.find_spec("example_kernels") is None:
        pytest.skip("example_kernels is not installed (pip install ./example_project)")
    cmake_dir = run([sys.executable, "-m", "example_kernels", "--cmake-dir"]).strip()
    stdout, dump = build_and_run_host(Path(cmake_dir), tmp_path)
    check_against_numpy(stdout, dump)
