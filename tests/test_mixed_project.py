"""Projects that build C/C++ of their own with CMake and link their kernels' C ABI in that build.

The project keeps its CMakeLists.txt as scikit-build-core's source folder;
buildtile compiles the kernels first and passes their CMake entry point as
``BUILDTILE_KERNELS_DIR``, which the project adds with ``add_subdirectory``
to link ``<package>::kernels``. Covered here without a GPU: the settings
handed to scikit-build-core, the entry point under a real CMake, the errors
of a project that leaves the kernels out or has no C ABI, and
example_project_mixed (a nanobind extension calling the kernels) built into a
wheel whose extension loads its kernels' library through an ``$ORIGIN`` RPATH.
tests/gpu/test_mixed_extension.py runs that extension on a GPU.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

import buildtile.build
from buildtile.config import load_project
from buildtile.errors import ConfigError
from buildtile.hooks.skbuild_settings import KERNELS_DIR_DEFINE, scikit_build_settings
from buildtile.hooks.staging import StagedKernels, stage_kernels
from buildtile.interop.abi import mangle

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "vecadd_project"
EXAMPLE = REPO_ROOT / "example_project_mixed"
PACKAGE = "tiny_kernels"
LIBRARY = f"lib{PACKAGE}_kernels.so"
CMAKE = shutil.which("cmake")
IGNORED = shutil.ignore_patterns("build", "dist", "_buildtile", "__pycache__")

#: a project's own CMakeLists.txt that builds nothing and never adds the kernels
UNRELATED_CMAKE = "cmake_minimum_required(VERSION 3.15)\nproject(unrelated LANGUAGES NONE)\n"


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root, ignore=IGNORED)
    return root


def set_c_abi(root: Path, enabled: bool) -> None:
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text().replace("enabled = false", "enabled = true")
    pyproject.write_text(text if enabled else text.replace("enabled = true", "enabled = false"))


def append_to_pyproject(root: Path, text: str) -> None:
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\n" + textwrap.dedent(text))


def staged_with_entry(root: Path, entry: Path) -> StagedKernels:
    return StagedKernels(artifacts_dir=root / "build" / "buildtile" / PACKAGE / "_buildtile",
                         cmake_source_dir=root / "shim", manifest={}, cmake_entry_dir=entry)


def run(cmd, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False, **kwargs)


def checked(cmd, **kwargs) -> str:
    result = run(cmd, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, cmd))}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a child process that must find libraries through RPATHs alone."""
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env.update(extra)
    return env


def elf_dynamic(path: Path) -> tuple[list[str], list[str]]:
    """``(NEEDED entries, RUNPATH/RPATH entries)`` of a 64-bit little-endian ELF file."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{path} is not a 64-bit LE ELF file"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    needed, paths = [], []
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != 6:  # SHT_DYNAMIC
            continue
        strtab = sections[link][4]

        def text(at: int) -> str:
            return data[strtab + at:data.index(b"\0", strtab + at)].decode()

        for at in range(offset, offset + size, entsize):
            tag, value = struct.unpack_from("<qQ", data, at)
            if tag == 1:  # DT_NEEDED
                needed.append(text(value))
            elif tag in (15, 29):  # DT_RPATH, DT_RUNPATH
                paths += text(value).split(":")
    return needed, paths


# --------------------------------------------------------------------------- settings for scikit-build-core


def test_own_cmakelists_stays_the_source_and_gets_the_kernels_dir(project, tmp_path):
    set_c_abi(project, True)
    (project / "CMakeLists.txt").write_text(UNRELATED_CMAKE)
    entry = tmp_path / "entry"
    settings = scikit_build_settings(load_project(project), {}, staged_with_entry(project, entry))
    assert "cmake.source-dir" not in settings
    assert settings[KERNELS_DIR_DEFINE] == str(entry)
    assert settings["wheel.cmake"] == "true"
    assert "wheel.py-api" not in settings  # an extension module decides the wheel's tags
    assert settings[f"wheel.force-include.{project / 'build/buildtile' / PACKAGE / '_buildtile'}"] \
        == f"{PACKAGE}/_buildtile"


@pytest.mark.parametrize("where", ["config setting", "pyproject"])
def test_a_cmake_source_dir_with_a_cmakelists_is_the_projects_own(project, tmp_path, where):
    set_c_abi(project, True)
    (project / "native").mkdir()
    (project / "native" / "CMakeLists.txt").write_text(UNRELATED_CMAKE)
    user = {"cmake.source-dir": "native"} if where == "config setting" else {}
    if where == "pyproject":
        append_to_pyproject(project, '[tool.scikit-build]\ncmake.source-dir = "native"\n')
    settings = scikit_build_settings(load_project(project), user, staged_with_entry(project, tmp_path / "entry"))
    assert settings.get("cmake.source-dir") == user.get("cmake.source-dir")
    assert settings[KERNELS_DIR_DEFINE] == str(tmp_path / "entry")


def test_a_cmake_source_dir_without_a_cmakelists_still_conflicts_with_the_c_abi(project):
    set_c_abi(project, True)
    with pytest.raises(ConfigError, match=r"cmake\.source-dir conflicts with .*c-abi.*native has no CMakeLists"):
        scikit_build_settings(load_project(project), {"cmake.source-dir": "native"})


@pytest.mark.parametrize("value", ["false", "OFF", False])
def test_switching_cmake_off_conflicts_with_the_c_abi_of_an_own_project(project, value):
    set_c_abi(project, True)
    (project / "CMakeLists.txt").write_text(UNRELATED_CMAKE)
    if isinstance(value, bool):
        append_to_pyproject(project, "[tool.scikit-build]\nwheel.cmake = false\n")
        user = {}
    else:
        user = {"wheel.cmake": value}
    conflict = r"wheel\.cmake( in \S+)? conflicts with tool\.buildtile\.c-abi\.enabled = true"
    with pytest.raises(ConfigError, match=conflict):
        scikit_build_settings(load_project(project), user)


def test_an_own_project_may_say_wheel_cmake_true(project, tmp_path):
    set_c_abi(project, True)
    (project / "CMakeLists.txt").write_text(UNRELATED_CMAKE)
    settings = scikit_build_settings(load_project(project), {"wheel.cmake": "true"},
                                     staged_with_entry(project, tmp_path / "entry"))
    assert settings["wheel.cmake"] == "true"


def test_without_c_abi_an_own_project_is_still_built(project, tmp_path):
    (project / "CMakeLists.txt").write_text(UNRELATED_CMAKE)
    settings = scikit_build_settings(load_project(project), {}, staged_with_entry(project, tmp_path / "entry"))
    assert "wheel.cmake" not in settings  # scikit-build-core's default: build it
    assert settings[KERNELS_DIR_DEFINE] == str(tmp_path / "entry")  # adding it explains the missing C ABI


def test_the_kernels_dir_is_buildtiles_to_set(project):
    (project / "CMakeLists.txt").write_text(UNRELATED_CMAKE)
    with pytest.raises(ConfigError, match=rf"config setting {KERNELS_DIR_DEFINE} is buildtile's to set"):
        scikit_build_settings(load_project(project), {KERNELS_DIR_DEFINE: "/elsewhere"})


# --------------------------------------------------------------------------- the entry point under CMake

HOST_CMAKE = """\
cmake_minimum_required(VERSION 3.18)
project(host LANGUAGES C CXX)
add_subdirectory("${BUILDTILE_KERNELS_DIR}" buildtile_kernels)
add_library(host SHARED host.cpp)
target_compile_features(host PRIVATE cxx_std_17)
target_link_libraries(host PRIVATE tiny_kernels::kernels)
buildtile_install_rpath(host DESTINATION "${HOST_DESTINATION}")
install(TARGETS host LIBRARY DESTINATION "${HOST_DESTINATION}")
"""

HOST_CPP = """\
#include "tiny_kernels/kernels.hpp"

// the C++ layer and the C launchers both resolve: kernels.hpp's typed wrapper
// of vecadd exists, and the library answers
using vecadd_view = void (*)(const buildtile::Launch&, buildtile::DeviceSpan<const float>,
                             buildtile::DeviceSpan<const float>, buildtile::DeviceSpan<float>);
static const vecadd_view typed = &tiny_kernels::ops::vecadd;

extern "C" __attribute__((visibility("default"))) int host_abi_version()
{
    tiny_kernels::check_abi();
    return typed != nullptr ? tiny_kernels_abi_version() : -1;
}
"""


def write_host(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "CMakeLists.txt").write_text(HOST_CMAKE)
    (folder / "host.cpp").write_text(HOST_CPP)
    return folder


def configure(host: Path, build: Path, entry: Path, prefix: Path, destination: str = "."):
    """Configure a host project as scikit-build-core would, with the kernels' entry point."""
    return run([CMAKE, "-S", host, "-B", build, f"-DBUILDTILE_KERNELS_DIR={entry}", f"-DSKBUILD_PLATLIB_DIR={prefix}",
                f"-DHOST_DESTINATION={destination}", "-DCMAKE_BUILD_TYPE=Release"])


@pytest.fixture
def staged_c_abi(project) -> StagedKernels:
    set_c_abi(project, True)
    return stage_kernels(load_project(project), log=lambda message: None)


def test_entry_point_names_the_shim_and_the_package_headers(staged_c_abi):
    text = (staged_c_abi.cmake_entry_dir / "CMakeLists.txt").read_text()
    assert "add_library(tiny_kernels::kernels ALIAS tiny_kernels_kernels)" in text
    assert f'{(staged_c_abi.artifacts_dir / "include").as_posix()}>")' in text
    assert "function(buildtile_install_rpath target)" in text
    headers = staged_c_abi.artifacts_dir / "include"
    for header in ("buildtile/abi.h", "buildtile/buildtile.hpp", "tiny_kernels/kernels.h", "tiny_kernels/kernels.hpp"):
        assert (headers / header).is_file()


@pytest.mark.parametrize(("destination", "rpath"), [
    (".", "$ORIGIN/tiny_kernels/_buildtile/lib"),
    ("tiny_kernels", "$ORIGIN/_buildtile/lib"),
    ("tiny_kernels/deeper/still", "$ORIGIN/../../_buildtile/lib"),
])
def test_a_target_linking_the_kernels_finds_them_where_the_wheel_is_installed(
        staged_c_abi, tmp_path, destination, rpath):
    prefix = tmp_path / "platlib"
    build = tmp_path / "host-build"
    result = configure(write_host(tmp_path / "host"), build, staged_c_abi.cmake_entry_dir, prefix, destination)
    assert result.returncode == 0, result.stdout + result.stderr
    checked([CMAKE, "--build", build])
    checked([CMAKE, "--install", build, "--prefix", prefix])
    # the shim installs where the wheel's C ABI lives; the host where it was told
    assert (prefix / PACKAGE / "_buildtile" / "lib" / LIBRARY).is_file()
    host = prefix / destination / "libhost.so"
    needed, paths = elf_dynamic(host)
    assert LIBRARY in needed
    assert paths == [rpath]
    # moved elsewhere (as pip does), it still loads its kernels' library
    moved = shutil.copytree(prefix, tmp_path / "site-packages")
    probe = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); print(lib.host_abi_version())")
    out = checked([sys.executable, "-c", probe, moved / destination / "libhost.so"], env=clean_env())
    assert out.strip() == "1"


def test_the_rpath_helper_says_how_it_is_called(staged_c_abi, tmp_path):
    host = write_host(tmp_path / "host")
    without_destination = HOST_CMAKE.replace('(host DESTINATION "${HOST_DESTINATION}")', "(host)", 1)
    assert without_destination != HOST_CMAKE
    (host / "CMakeLists.txt").write_text(without_destination)
    result = configure(host, tmp_path / "build", staged_c_abi.cmake_entry_dir, tmp_path / "platlib")
    assert result.returncode != 0
    assert "error[BT0010]: buildtile_install_rpath(host): expected buildtile_install_rpath(<target> DESTINATION" \
        in " ".join(result.stderr.split())


def test_entry_point_without_the_c_abi_stops_cmake_with_the_setting_to_change(project, tmp_path):
    staged = stage_kernels(load_project(project), log=lambda message: None)  # the fixture has c-abi off
    result = configure(write_host(tmp_path / "host"), tmp_path / "build", staged.cmake_entry_dir, tmp_path / "platlib")
    assert result.returncode != 0
    err = " ".join(result.stderr.split())
    assert f"error[BT0010]: BUILDTILE_KERNELS_DIR has no C ABI of the kernels of {PACKAGE} to link" in err
    assert f"tool.buildtile.c-abi.enabled is false for this build ({(project / 'pyproject.toml').as_posix()})" in err
    assert "set enabled = true under [tool.buildtile.c-abi]" in err


# --------------------------------------------------------------------------- through the PEP 517 hooks


def build_wheel(root: Path, out: Path, monkeypatch, config_settings=None) -> Path:
    monkeypatch.chdir(root)
    return out / buildtile.build.build_wheel(str(out), config_settings)


def test_an_own_project_that_leaves_the_kernels_out_gets_no_wheel(project, monkeypatch, tmp_path, capsys):
    set_c_abi(project, True)
    (project / "CMakeLists.txt").write_text(UNRELATED_CMAKE)
    with pytest.raises(SystemExit) as info:
        build_wheel(project, tmp_path / "dist", monkeypatch)
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert f"error[BT0010]: the wheel has no {PACKAGE}/_buildtile/lib/{LIBRARY}" in err
    assert 'add_subdirectory("${BUILDTILE_KERNELS_DIR}" buildtile_kernels)' in err
    assert "Traceback" not in err
    assert not list((tmp_path / "dist").glob("*.whl"))


def test_an_own_project_without_c_abi_builds_with_its_kernels(project, monkeypatch, tmp_path):
    (project / "CMakeLists.txt").write_text(UNRELATED_CMAKE)
    wheel = build_wheel(project, tmp_path / "dist", monkeypatch)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert f"{PACKAGE}/_buildtile/manifest.json" in names
    assert not any("/lib/" in name for name in names)


# --------------------------------------------------------------------------- example_project_mixed


@pytest.fixture(scope="module")
def example_wheel(tmp_path_factory) -> Path:
    """example_project_mixed built into a wheel as pip would, without build isolation."""
    work = tmp_path_factory.mktemp("mixed")
    source = shutil.copytree(EXAMPLE, work / "example_project_mixed", ignore=IGNORED)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    result = run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--skip-dependency-check",
                  "--outdir", work / "dist", source], env=env)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-6000:]
    (wheel,) = (work / "dist").glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def unpacked_example(example_wheel) -> Path:
    site = example_wheel.parent / "site-packages"
    with zipfile.ZipFile(example_wheel) as archive:
        archive.extractall(site)
    for path in site.rglob("*.so"):
        path.chmod(0o755)
    return site


def test_example_wheel_has_the_extension_and_the_kernels_c_abi(example_wheel):
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert example_wheel.name.startswith(f"example_mixed-0.1.0-{tag}-")  # it holds a CPython extension
    with zipfile.ZipFile(example_wheel) as archive:
        names = set(archive.namelist())
    assert any(n.startswith("example_mixed/_ext.") and n.endswith(".so") for n in names)
    artifacts = "example_mixed/_buildtile"
    assert {f"{artifacts}/lib/libexample_mixed_kernels.so", f"{artifacts}/manifest.json",
            f"{artifacts}/include/example_mixed/kernels.hpp", f"{artifacts}/cmake/example_mixedConfig.cmake",
            "example_mixed/__init__.py", "example_mixed/kernels.py"} <= names
    for kernel in ("saxpy", "scale"):
        for target in ("sm_80", "sm_90"):
            assert f"{artifacts}/kernels/{mangle('example_mixed.kernels', kernel)}.{target}.cubin" in names


def test_example_extension_finds_the_kernels_library_next_to_it(unpacked_example):
    (extension,) = (unpacked_example / "example_mixed").glob("_ext.*.so")
    needed, paths = elf_dynamic(extension)
    assert "libexample_mixed_kernels.so" in needed
    assert paths == ["$ORIGIN/_buildtile/lib"]  # relative: nothing of the build machine
    assert (extension.parent / "_buildtile" / "lib" / "libexample_mixed_kernels.so").is_file()


def test_example_extension_imports_and_reports_refusals_without_a_gpu(unpacked_example):
    probe = textwrap.dedent("""\
        import numpy as np
        import example_mixed
        print(example_mixed.abi_version())
        host = np.ones(300, np.float32)   # host memory: the kernels' C ABI refuses it
        try:
            example_mixed.saxpy(2.0, host, host, np.empty(300, np.float32))
        except example_mixed.KernelError as exc:
            print(str(exc).splitlines()[0])
    """)
    env = clean_env(PYTHONPATH=os.pathsep.join((str(unpacked_example), str(REPO_ROOT))))
    out = checked([sys.executable, "-c", probe], env=env, cwd=unpacked_example).splitlines()
    assert out[0] == "1"
    assert out[1].startswith("error[BT0308]: mismatched types: parameter `x` of kernel `example_mixed.kernels.saxpy`")
