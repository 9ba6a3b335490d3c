"""CMake finds an installed kernel package's config as scikit-build-core finds packages:
through the wheel's ``cmake.prefix`` entry point, or ``python -m <package> --cmake-prefix``."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from wheel_support import PACKAGE, env, pip, run

CMAKE = shutil.which("cmake")
pytestmark = pytest.mark.skipif(CMAKE is None or shutil.which("cc") is None, reason="needs cmake and a C compiler")

FIND_KERNELS = textwrap.dedent(f"""\
    cmake_minimum_required(VERSION 3.15)
    project(uses_kernels LANGUAGES C)  # the config checks the pointer size, which a language sets
    find_package({PACKAGE} CONFIG REQUIRED)
    if(NOT TARGET {PACKAGE}::kernels)
      message(FATAL_ERROR "no {PACKAGE}::kernels")
    endif()
    file(WRITE "${{CMAKE_BINARY_DIR}}/found.txt" "${{{PACKAGE}_LIBRARY}}")
""")


@pytest.fixture(scope="module")
def site(example_site) -> Path:
    """The example kernels' wheel installed (with its .dist-info, so its entry points show)."""
    return example_site


def configure(source: Path, build: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CMAKE, "-S", source, "-B", build, *args], capture_output=True, text=True, check=False)


def test_the_wheel_registers_its_cmake_prefix(site):
    entries = metadata.entry_points(group="cmake.prefix")
    found = [e for e in metadata.distributions(path=[str(site)]) if e.metadata["Name"] == "example-kernels"]
    (dist,) = found
    (entry,) = [e for e in dist.entry_points if e.group == "cmake.prefix"]
    assert (entry.name, entry.value) == (PACKAGE, f"{PACKAGE}._buildtile")
    assert entry not in entries  # the test environment itself has no such package installed


def test_a_plain_cmake_project_finds_the_package_from_its_cmake_prefix(site, tmp_path):
    prefix = run([sys.executable, "-m", PACKAGE, "--cmake-prefix"], env=env(site), cwd=tmp_path).stdout.strip()
    assert Path(prefix) == site / PACKAGE / "_buildtile"
    project = tmp_path / "host"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(FIND_KERNELS)
    # without the prefix CMake does not find it: the search is what finds it below
    assert configure(project, tmp_path / "none", f"-DCMAKE_PREFIX_PATH={site}").returncode != 0
    done = configure(project, tmp_path / "build", f"-DCMAKE_PREFIX_PATH={prefix}")
    assert done.returncode == 0, done.stdout + done.stderr
    library = Path((tmp_path / "build" / "found.txt").read_text())
    assert library == site / PACKAGE / "_buildtile" / "lib" / f"lib{PACKAGE}_kernels.so" and library.is_file()


def test_a_scikit_build_core_project_finds_the_package_with_no_dir_given(site, tmp_path):
    project = tmp_path / "consumer"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        FIND_KERNELS + 'install(FILES "${CMAKE_BINARY_DIR}/found.txt" DESTINATION "consumer_data")\n'
    )
    (project / "pyproject.toml").write_text(textwrap.dedent("""\
        [build-system]
        requires = ["scikit-build-core>=0.10"]
        build-backend = "scikit_build_core.build"

        [project]
        name = "consumer"
        version = "0.1.0"

        [tool.scikit-build]
        wheel.packages = []
    """))
    pip("wheel", "--no-build-isolation", "--no-deps", "-w", tmp_path / "dist", project, env=env(site))
    (wheel,) = (tmp_path / "dist").glob("consumer-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        found = archive.read("consumer_data/found.txt").decode()
    assert Path(found) == site / PACKAGE / "_buildtile" / "lib" / f"lib{PACKAGE}_kernels.so"
