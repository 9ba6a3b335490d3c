"""`buildtile doctor`: one status line per tool, a fix under each missing one, and an exit code that
fails only when a build cannot work (a missing GPU, libdevice, ptxas or launch module does not stop a build)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from buildtile import doctor
from buildtile.cli import main

NAMES = ("buildtile", "LLVM", "nvJitLink", "libdevice", "ptxas", "launch module", "C compiler", "CMake", "GPU")


def run(capsys) -> tuple[int, dict[str, str], str]:
    """Exit code, ``{tool: "ok" or "!!"}`` and the whole output of `buildtile doctor`."""
    code = main(["doctor"])
    out = capsys.readouterr().out
    statuses = dict((name, status) for status, name in re.findall(r"^\[(ok|!!)\] ([^:]+):", out, re.M))
    assert list(statuses) == list(NAMES)
    return code, statuses, out


@pytest.fixture
def healthy(monkeypatch, tmp_path):
    """Every tool found, a GPU with a driver: the checks' inputs, not the checks, are replaced."""
    from cuda.bindings import driver

    from buildtile.toolchain import libdevice, ptxas

    bitcode = tmp_path / "cuda" / "nvvm" / "libdevice" / libdevice.LIBDEVICE
    bitcode.parent.mkdir(parents=True)
    bitcode.write_bytes(b"BC")
    (tmp_path / "cuda" / "version.json").write_text('{"cuda": {"version": "12.4.1"}}')
    monkeypatch.setattr(libdevice, "candidate_paths", lambda: [tmp_path / "missing.bc", bitcode])
    monkeypatch.setattr(ptxas, "candidate_paths", lambda: [Path("/usr/bin/sh")])
    monkeypatch.setattr(doctor.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(doctor.subprocess, "run", lambda cmd, **kw: type("R", (), {"stdout": f"{cmd[0]} 1.0\n"})())
    ok = driver.CUresult.CUDA_SUCCESS
    monkeypatch.setattr(driver, "cuInit", lambda flags: (ok,))
    monkeypatch.setattr(driver, "cuDriverGetVersion", lambda: (ok, 12040))
    monkeypatch.setattr(driver, "cuDeviceGetCount", lambda: (ok, 0))
    return monkeypatch


def test_every_tool_found_is_ok_and_exits_0(healthy, capsys):
    code, statuses, out = run(capsys)
    assert code == 0 and set(statuses.values()) == {"ok"}
    assert "fix:" not in out
    assert "CUDA driver 12.4" in out and "CMake: cmake: /usr/bin/cmake 1.0" in out
    from buildtile import __version__

    assert f"buildtile: buildtile {__version__}" in out
    assert re.search(r"libdevice: libdevice\.10\.bc from CUDA 12\.4\.1 \(/.*/cuda/nvvm/libdevice/libdevice\.10\.bc\)",
                     out)
    assert "launch module: buildtile.runtime._native" in out


def test_no_gpu_is_reported_with_its_fix_but_a_build_still_works(healthy, capsys):
    from cuda.bindings import driver

    healthy.setattr(driver, "cuInit", lambda flags: (driver.CUresult.CUDA_ERROR_NO_DEVICE,))
    code, statuses, out = run(capsys)
    assert code == 0
    assert statuses == {**dict.fromkeys(NAMES, "ok"), "GPU": "!!"}
    assert "cuInit failed (CUDA_ERROR_NO_DEVICE)" in out and "fix: install the NVIDIA driver" in out


@pytest.mark.parametrize("missing, fix", [("cc", "apt-get install gcc"), ("cmake", "pip install cmake")])
def test_a_missing_c_toolchain_tool_fails(healthy, capsys, missing, fix):
    healthy.setattr(doctor.shutil, "which", lambda name: None if name == missing else f"/usr/bin/{name}")
    code, statuses, out = run(capsys)
    assert code == 1
    name = {"cc": "C compiler", "cmake": "CMake"}[missing]
    assert statuses == {**dict.fromkeys(NAMES, "ok"), name: "!!"}
    assert f"{missing} not found" in out and f"fix: {fix}" in out


def test_llvm_without_nvptx_fails(healthy, capsys):
    import llvmlite.binding as llvm

    def no_nvptx(triple):
        raise RuntimeError("No available targets are compatible with triple")

    healthy.setattr(llvm.Target, "from_triple", staticmethod(no_nvptx))
    code, statuses, out = run(capsys)
    assert code == 1 and statuses["LLVM"] == "!!" and statuses["nvJitLink"] == "ok"
    assert "fix: pip install -U llvmlite" in out


def test_missing_nvjitlink_fails(healthy, capsys):
    from buildtile.toolchain import nvjitlink

    def absent():
        raise OSError("libnvJitLink.so.12: cannot open shared object file")

    healthy.setattr(nvjitlink, "nvjitlink_version", absent)
    code, statuses, out = run(capsys)
    assert code == 1 and statuses["nvJitLink"] == "!!" and statuses["LLVM"] == "ok"
    assert "fix: pip install nvidia-nvjitlink" in out


def test_this_machine_is_reported_as_it_is(capsys):
    code, statuses, _ = run(capsys)
    assert statuses["C compiler"] == ("ok" if shutil.which("cc") else "!!")
    assert statuses["CMake"] == ("ok" if shutil.which("cmake") else "!!")
    assert statuses["LLVM"] == statuses["nvJitLink"] == "ok"    # the test suite itself builds kernels
    assert code == (0 if shutil.which("cc") and shutil.which("cmake") else 1)


@pytest.mark.parametrize("missing", ["libdevice", "ptxas", "launch module"])
def test_an_optional_piece_missing_is_reported_with_its_fix_but_a_build_still_works(healthy, capsys, missing):
    from buildtile.toolchain import libdevice

    if missing == "libdevice":
        healthy.setattr(libdevice, "candidate_paths", lambda: [Path("/nowhere") / libdevice.LIBDEVICE])
    elif missing == "ptxas":
        from buildtile.toolchain import ptxas

        healthy.setattr(ptxas, "candidate_paths", list)
    else:
        def no_native(name):
            raise ImportError(f"No module named {name!r}")

        healthy.setattr(doctor.importlib, "import_module", no_native)
    code, statuses, out = run(capsys)
    assert code == 0
    assert statuses == {**dict.fromkeys(NAMES, "ok"), missing: "!!"}
    fix = {"libdevice": "pip install nvidia-nvvm", "ptxas": "pip install nvidia-cuda-nvcc",
           "launch module": "reinstall buildtile"}[missing]
    assert f"fix: {fix}" in out


def test_ptxas_is_reported_with_its_version_path_and_use(healthy, capsys):
    _, statuses, out = run(capsys)
    assert statuses["ptxas"] == "ok"
    assert "ptxas: /usr/bin/sh 1.0 (/usr/bin/sh); assembles warp-specialised kernels (setmaxnreg)" in out
    assert "not used yet" not in out


def test_missing_ptxas_says_which_kernels_need_it_and_where_it_looked(healthy, capsys):
    from buildtile.toolchain import ptxas

    healthy.setattr(ptxas, "candidate_paths", lambda: [Path("/nowhere/cu13/bin/ptxas")])
    code, statuses, out = run(capsys)
    assert code == 0 and statuses["ptxas"] == "!!"
    assert "ptxas not found (warp-specialised kernels, those that use setmaxnreg, cannot build" in out
    assert "fix: pip install nvidia-cuda-nvcc" in out and "searched" not in out
    main(["doctor", "-v"])
    assert "searched /nowhere/cu13/bin/ptxas" in capsys.readouterr().out


def test_verbose_lists_where_libdevice_was_looked_for(healthy, capsys):
    from buildtile.toolchain import libdevice

    healthy.setattr(libdevice, "candidate_paths", lambda: [Path("/nowhere/a.bc"), Path("/nowhere/b.bc")])
    main(["doctor", "-v"])
    out = capsys.readouterr().out
    assert "searched /nowhere/a.bc" in out and "searched /nowhere/b.bc" in out
    main(["doctor"])
    assert "searched" not in capsys.readouterr().out
