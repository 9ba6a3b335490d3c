"""The PEP 517 backend ``buildtile.build``: wheels, sdists and editable installs of a
project that carries kernels, built through the hooks as pip and build call them."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import buildtile.build
from buildtile.config import load_project
from buildtile.errors import ConfigError
from buildtile.hooks.skbuild_settings import scikit_build_settings
from buildtile.hooks.staging import StagedKernels, stage_kernels

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "vecadd_project"
PACKAGE = "tiny_kernels"
ARTIFACTS = f"{PACKAGE}/_buildtile"
#: the kernel's store, line 9 of the fixture's ops.py
GOOD_STORE = "c[i] = a[i] + b[i]"
BAD_STORE = "c[i + 1] = a[i] + b[i]"
BAD_STORE_LINE = 9


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A fresh copy of the fixture project (builds write into their project folder)."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("build", "dist", "_buildtile"))
    return root


def enable_c_abi(root: Path) -> None:
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("enabled = false", "enabled = true"))


def move_to_src_layout(root: Path) -> None:
    (root / "src").mkdir()
    (root / PACKAGE).rename(root / "src" / PACKAGE)


def break_kernel(root: Path) -> None:
    ops = root / PACKAGE / "ops.py"
    assert GOOD_STORE in ops.read_text().splitlines()[BAD_STORE_LINE - 1]
    ops.write_text(ops.read_text().replace(GOOD_STORE, BAD_STORE))


def build_wheel(root: Path, out: Path, monkeypatch, config_settings=None) -> Path:
    monkeypatch.chdir(root)
    name = buildtile.build.build_wheel(str(out), config_settings)
    return out / name


def wheel_members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist() if not name.endswith("/")}


def manifest_of(members: dict[str, bytes]) -> dict:
    return json.loads(members[f"{ARTIFACTS}/manifest.json"])


def subprocess_env() -> dict[str, str]:
    """Run child builds against this checkout of buildtile."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    return env


def assert_kernel_images(members: dict[str, bytes], targets: list[str]) -> None:
    """One cubin per target and the PTX of the lowest, each matching its manifest sha256."""
    manifest = manifest_of(members)
    assert manifest["package"] == PACKAGE
    (vecadd,) = [k for k in manifest["kernels"] if k["name"] == "vecadd"]
    artifacts = vecadd["artifacts"]
    for target in targets:
        assert artifacts[target]["kind"] == "cubin"
    assert artifacts["ptx"]["kind"] == "ptx"
    assert artifacts["ptx"]["target"] == targets[0]
    assert set(artifacts) == {*targets, "ptx"}
    for artifact in artifacts.values():
        data = members[f"{ARTIFACTS}/{artifact['path']}"]
        assert hashlib.sha256(data).hexdigest() == artifact["sha256"]


def assert_python_files(members: dict[str, bytes], prefix: str = PACKAGE) -> None:
    for name in ("__init__.py", "ops.py", "helpers.py"):
        assert f"{prefix}/{name}" in members


# --------------------------------------------------------------------------- the module


def test_importing_the_backend_is_cheap_and_compiles_nothing():
    probe = (
        "import sys, buildtile.build\n"
        "heavy = [m for m in sys.modules if m.startswith(('scikit_build_core', 'buildtile.compiler',"
        " 'buildtile.hooks.pep517', 'buildtile.config', 'llvmlite', 'cuda', 'numpy'))]\n"
        "print(heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            env=subprocess_env(), check=True)
    assert result.stdout.strip() == "[]"


def test_backend_exports_every_pep517_and_pep660_hook():
    for hook in ("build_wheel", "build_sdist", "build_editable", "get_requires_for_build_wheel",
                 "get_requires_for_build_sdist", "get_requires_for_build_editable",
                 "prepare_metadata_for_build_wheel", "prepare_metadata_for_build_editable"):
        assert callable(getattr(buildtile.build, hook))


# --------------------------------------------------------------------------- settings for scikit-build-core


def staged_in(root: Path, cmake_source_dir: Path | None = None) -> StagedKernels:
    return StagedKernels(
        artifacts_dir=root / "build" / "buildtile" / ARTIFACTS,
        cmake_source_dir=cmake_source_dir,
        manifest={},
    )


def test_pure_python_wheel_settings(project):
    settings = scikit_build_settings(load_project(project), {}, staged_in(project))
    assert settings["wheel.cmake"] == "false"
    assert settings["wheel.packages"] == [PACKAGE]
    assert settings[f"wheel.force-include.{project / 'build/buildtile' / ARTIFACTS}"] == ARTIFACTS
    assert "cmake.source-dir" not in settings


def test_c_abi_wheel_settings_point_cmake_at_the_shim(project, tmp_path):
    enable_c_abi(project)
    shim = tmp_path / "shim"
    settings = scikit_build_settings(load_project(project), {}, staged_in(project, shim))
    assert settings["wheel.cmake"] == "true"
    assert settings["cmake.source-dir"] == str(shim)
    assert settings["wheel.py-api"] == "py3"


def test_user_config_settings_pass_through_and_buildtile_ones_stay_behind(project):
    user = {"cmake.build-type": "Debug", "wheel.packages": ["elsewhere/tiny_kernels"],
            "buildtile.targets": "sm_90"}
    settings = scikit_build_settings(load_project(project, config_settings=user), user, staged_in(project))
    assert settings["cmake.build-type"] == "Debug"
    assert settings["wheel.packages"] == ["elsewhere/tiny_kernels"]
    assert not any(key.startswith("buildtile.") for key in settings)


def test_project_scikit_build_table_is_respected(project):
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + '\n[tool.scikit-build]\nwheel.packages = ["tiny_kernels"]\n')
    settings = scikit_build_settings(load_project(project), {}, staged_in(project))
    assert "wheel.packages" not in settings


def test_c_abi_conflicts_with_a_user_cmake_project(project):
    enable_c_abi(project)
    with pytest.raises(ConfigError, match=r"config setting cmake\.source-dir conflicts with .*c-abi"):
        scikit_build_settings(load_project(project), {"cmake.source-dir": "native"}, staged_in(project))


def test_several_cmake_projects_are_built_as_one(project, monkeypatch, tmp_path):
    emitted = [tmp_path / "c_abi", tmp_path / "other"]

    def compile_with_two_emitters(project_, out_dir, *, log, emit=()):
        return {"package": PACKAGE, "kernels": [], "_cmake_source_dirs": [str(d) for d in emitted]}

    monkeypatch.setattr("buildtile.compiler.compile_project", compile_with_two_emitters)
    staged = stage_kernels(load_project(project), log=print)
    top = (staged.cmake_source_dir / "CMakeLists.txt").read_text()
    for source_dir in emitted:
        assert f'add_subdirectory("{source_dir.as_posix()}"' in top
    assert "_cmake_source_dirs" not in staged.manifest


# --------------------------------------------------------------------------- hooks that compile nothing


def test_requirements_without_c_abi_need_no_cmake(project, monkeypatch):
    monkeypatch.chdir(project)
    assert buildtile.build.get_requires_for_build_wheel() == []
    assert buildtile.build.get_requires_for_build_sdist() == []


def test_requirements_with_c_abi_ask_for_cmake_when_none_is_found(project, monkeypatch, tmp_path):
    enable_c_abi(project)
    monkeypatch.chdir(project)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CMAKE_EXECUTABLE", raising=False)
    requires = buildtile.build.get_requires_for_build_wheel()
    assert any(re.match(r"cmake\b", r) for r in requires)


def test_metadata_is_prepared_without_compiling(project, monkeypatch, tmp_path):
    monkeypatch.chdir(project)
    dist_info = buildtile.build.prepare_metadata_for_build_wheel(str(tmp_path))
    assert dist_info == "tiny_vecadd-0.2.0.dist-info"
    assert "Name: tiny-vecadd" in (tmp_path / dist_info / "METADATA").read_text()
    assert not (project / "build").exists()


def test_bad_configuration_stops_with_one_message(project, monkeypatch, tmp_path, capsys):
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"sm_80", "sm_90"', '"sm_61"'))
    with pytest.raises(SystemExit) as info:
        build_wheel(project, tmp_path / "dist", monkeypatch)
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "tool.buildtile.targets" in err and str(pyproject) in err and "sm_61" in err
    assert "Traceback" not in err
    assert not list((tmp_path / "dist").glob("*.whl"))


# --------------------------------------------------------------------------- wheels


def test_wheel_carries_manifest_kernel_images_and_python_files(project, monkeypatch, tmp_path):
    wheel = build_wheel(project, tmp_path / "dist", monkeypatch)
    assert wheel.name == "tiny_vecadd-0.2.0-py3-none-any.whl"  # no shim library: a pure wheel
    members = wheel_members(wheel)
    assert_kernel_images(members, ["sm_80", "sm_90"])
    assert_python_files(members)
    assert not any(name.startswith(("build/", "src/")) for name in members)


def test_src_layout_wheel_has_the_package_at_the_top(project, monkeypatch, tmp_path):
    move_to_src_layout(project)
    members = wheel_members(build_wheel(project, tmp_path / "dist", monkeypatch))
    assert_kernel_images(members, ["sm_80", "sm_90"])
    assert_python_files(members)


def test_c_abi_wheel_carries_library_headers_and_cmake_config(project, monkeypatch, tmp_path):
    enable_c_abi(project)
    wheel = build_wheel(project, tmp_path / "dist", monkeypatch)
    assert re.fullmatch(r"tiny_vecadd-0\.2\.0-py3-none-\w+\.whl", wheel.name)
    assert not wheel.name.endswith("-any.whl")
    members = wheel_members(wheel)
    assert_kernel_images(members, ["sm_80", "sm_90"])
    assert_python_files(members)
    inside = [name for name in members if name.startswith(f"{ARTIFACTS}/")]
    assert any(re.fullmatch(rf"{ARTIFACTS}/lib/[^/]+\.(so(\.\d+)*|dylib|dll)", n) for n in inside)
    assert any(n.endswith("/buildtile/abi.h") for n in inside)
    assert any(n.endswith((".h", ".hpp")) and not n.endswith("/abi.h") for n in inside)
    assert any(n.endswith(("Config.cmake", "-config.cmake")) for n in inside)


def test_config_settings_reach_both_buildtile_and_scikit_build_core(project, monkeypatch, tmp_path):
    wheel = build_wheel(project, tmp_path / "dist", monkeypatch,
                        {"buildtile.targets": "sm_90", "wheel.build-tag": "7"})
    assert wheel.name == "tiny_vecadd-0.2.0-7-py3-none-any.whl"
    assert_kernel_images(wheel_members(wheel), ["sm_90"])


def test_stale_staged_files_do_not_reach_the_wheel(project, monkeypatch, tmp_path):
    stale = project / "build" / "buildtile" / ARTIFACTS / "kernels" / "removed_kernel.sm_80.cubin"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    members = wheel_members(build_wheel(project, tmp_path / "dist", monkeypatch))
    assert not any("removed_kernel" in name for name in members)


def test_failing_kernel_stops_the_build_with_its_diagnostic(project, monkeypatch, tmp_path, capsys):
    break_kernel(project)
    with pytest.raises(SystemExit) as info:
        build_wheel(project, tmp_path / "dist", monkeypatch)
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "error[BT0499]" in err
    assert re.search(rf"--> {PACKAGE}/ops\.py:{BAD_STORE_LINE}:\d+", err)
    assert BAD_STORE in err and "^" in err
    assert "Traceback" not in err
    assert not list((tmp_path / "dist").glob("*.whl"))


def test_failing_kernel_through_python_m_build_leaves_no_wheel(project, tmp_path):
    break_kernel(project)
    out = tmp_path / "dist"
    result = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--skip-dependency-check",
         "--outdir", str(out), str(project)],
        check=False, capture_output=True, text=True, env=subprocess_env(),
    )
    assert result.returncode != 0
    assert "error[BT0499]" in result.stderr + result.stdout
    assert f"{PACKAGE}/ops.py:{BAD_STORE_LINE}:" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr + result.stdout
    assert not list(out.glob("*.whl"))


def test_python_m_build_makes_an_sdist_and_a_wheel_from_it(project, tmp_path):
    out = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--skip-dependency-check",
         "--outdir", str(out), str(project)],
        capture_output=True, text=True, env=subprocess_env(), check=True,
    )
    (wheel,) = out.glob("*.whl")
    members = wheel_members(wheel)
    assert_kernel_images(members, ["sm_80", "sm_90"])
    assert_python_files(members)
    assert len(list(out.glob("*.tar.gz"))) == 1


# --------------------------------------------------------------------------- sdists and editable installs


def test_sdist_has_the_sources_but_no_build_output(project, monkeypatch, tmp_path):
    build_wheel(project, tmp_path / "wheels", monkeypatch)  # leaves build/buildtile/ behind
    name = buildtile.build.build_sdist(str(tmp_path / "sdist"))
    with tarfile.open(tmp_path / "sdist" / name) as archive:
        members = {m.name.split("/", 1)[1] for m in archive.getmembers() if "/" in m.name}
    assert {"pyproject.toml", "PKG-INFO", f"{PACKAGE}/ops.py", f"{PACKAGE}/__init__.py"} <= members
    assert not any(m.startswith("build/") or "_buildtile" in m for m in members)


def test_editable_install_leaves_artifacts_next_to_the_sources(project, monkeypatch, tmp_path):
    monkeypatch.chdir(project)
    wheel = tmp_path / "dist" / buildtile.build.build_editable(str(tmp_path / "dist"))
    in_place = project / ARTIFACTS
    manifest = json.loads((in_place / "manifest.json").read_text())
    for artifact in manifest["kernels"][0]["artifacts"].values():
        assert (in_place / artifact["path"]).is_file()
    assert (in_place / ".gitignore").read_text().splitlines()[-1] == "*"
    members = wheel_members(wheel)
    assert any(name.endswith(".pth") for name in members)  # the import redirect to the sources
    assert f"{PACKAGE}/ops.py" not in members


def test_editable_c_abi_install_has_the_library_next_to_the_sources(project, monkeypatch, tmp_path):
    enable_c_abi(project)
    monkeypatch.chdir(project)
    buildtile.build.build_editable(str(tmp_path / "dist"))
    libraries = [p.name for p in (project / ARTIFACTS / "lib").iterdir()]
    assert any(re.fullmatch(r"[^/]+\.(so(\.\d+)*|dylib|dll)", name) for name in libraries)


# --------------------------------------------------------------------------- the setuptools integration


def setuptools_project(root: Path, site: Path) -> dict[str, str]:
    """Turn the fixture into a setuptools project; return the environment that makes
    setuptools see buildtile's integration (as an installed buildtile's entry point would)."""
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text().replace('requires = ["buildtile"]', 'requires = ["setuptools>=61", "buildtile"]')
    text = text.replace('build-backend = "buildtile.build"', 'build-backend = "setuptools.build_meta"')
    pyproject.write_text(text + '\n[tool.setuptools]\npackages = ["tiny_kernels"]\n')
    dist_info = site / "buildtile_setuptools_entry_point-0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: buildtile-setuptools-entry-point\nVersion: 0\n")
    (dist_info / "entry_points.txt").write_text(
        "[setuptools.finalize_distribution_options]\n"
        "buildtile = buildtile.hooks.setuptools:finalize_distribution_options\n"
    )
    env = subprocess_env()
    env["PYTHONPATH"] = os.pathsep.join((str(site), env["PYTHONPATH"]))
    return env


def build_with_setuptools(root: Path, build_lib: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """setuptools' ``build`` step, which the integration extends (a wheel packs its output)."""
    return subprocess.run(
        [sys.executable, "-c", "import setuptools; setuptools.setup()", "build", "--build-lib", str(build_lib)],
        cwd=root, check=False, capture_output=True, text=True, env=env,
    )


def test_setuptools_project_gets_its_kernels_compiled_into_the_build(project, tmp_path):
    env = setuptools_project(project, tmp_path / "site")
    build_lib = tmp_path / "build_lib"
    result = build_with_setuptools(project, build_lib, env)
    assert result.returncode == 0, result.stdout + result.stderr
    members = {p.relative_to(build_lib).as_posix(): p.read_bytes() for p in build_lib.rglob("*") if p.is_file()}
    assert_kernel_images(members, ["sm_80", "sm_90"])
    assert_python_files(members)


def test_setuptools_project_with_a_failing_kernel_stops_with_the_diagnostic(project, tmp_path):
    env = setuptools_project(project, tmp_path / "site")
    break_kernel(project)
    result = build_with_setuptools(project, tmp_path / "build_lib", env)
    assert result.returncode != 0
    assert "error[BT0499]" in result.stderr and f"{PACKAGE}/ops.py:{BAD_STORE_LINE}:" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "build_lib" / ARTIFACTS).exists()


def test_setuptools_integration_leaves_other_projects_alone(project, tmp_path):
    env = setuptools_project(project, tmp_path / "site")
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text()
    pyproject.write_text(text[:text.index("[tool.buildtile]")] + text[text.index("[tool.setuptools]"):])
    result = build_with_setuptools(project, tmp_path / "build_lib", env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "build_lib" / PACKAGE / "ops.py").is_file()
    assert not (tmp_path / "build_lib" / ARTIFACTS).exists()
    assert not (project / "build" / "buildtile").exists()
