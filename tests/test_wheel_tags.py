"""Kernel wheels a package index accepts: the manylinux tag the C ABI shim needs, each
kernel image stored once, and a pure wheel where there is no shim."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from wheel_support import PACKAGE, dist_info_file, members, run

from buildtile.hooks.manylinux import NotSharedLibrary, platform_tag, read_dynamic_needs

SHIM = f"{PACKAGE}/_buildtile/lib/lib{PACKAGE}_kernels.so"
CC = shutil.which("cc") or shutil.which("gcc")
needs_cc = pytest.mark.skipif(CC is None, reason="needs a C compiler")


@pytest.fixture(scope="module")
def wheel(example_wheel) -> Path:
    return example_wheel


def test_the_c_abi_wheel_is_tagged_with_the_manylinux_policy_of_its_shim(wheel):
    files = members(wheel)
    tag = platform_tag(files[SHIM])
    assert tag is not None and tag.startswith("manylinux_2_")
    assert wheel.name == f"example_kernels-0.1.0-py3-none-{tag}.whl"
    assert f"Tag: py3-none-{tag}\n" in dist_info_file(wheel, "WHEEL")
    # the tag is the highest glibc symbol version the shim links
    _, needed, versions = read_dynamic_needs(files[SHIM])
    need = max(int(m.group(1)) for v in versions if (m := re.match(r"GLIBC_2\.(\d+)", v)))
    assert int(tag.split("_")[2]) >= need and "libc.so.6" in needed


def test_auditwheel_agrees_with_the_tag(wheel):
    pytest.importorskip("auditwheel")
    shown = subprocess.run([sys.executable, "-m", "auditwheel", "show", wheel], capture_output=True, text=True,
                           check=False)
    assert shown.returncode == 0, shown.stderr
    platform = wheel.name[:-len(".whl")].split("-")[-1]
    words = " ".join(shown.stdout.split())
    assert f'is consistent with the following platform tag: "{platform}"' in words


def test_the_rewritten_wheel_records_every_file_it_holds(wheel):
    files = members(wheel)
    record = dist_info_file(wheel, "RECORD")
    listed = {}
    for row in record.splitlines():
        name, digest, size = row.rsplit(",", 2)
        listed[name] = (digest, size)
    assert set(listed) == {n for n in files if not n.endswith("/")}
    for name, (digest, size) in listed.items():
        if name.endswith("/RECORD"):
            continue
        expected = base64.urlsafe_b64encode(hashlib.sha256(files[name]).digest()).rstrip(b"=").decode()
        assert (digest, size) == (f"sha256={expected}", str(len(files[name])))


def test_each_kernel_image_is_stored_once(wheel):
    files = members(wheel)
    images = {name: data for name, data in files.items() if f"{PACKAGE}/_buildtile/kernels/" in name}
    assert images and any(n.endswith(".cubin") for n in images) and any(n.endswith(".ptx") for n in images)
    shim = files[SHIM]
    embedded = [name for name, data in images.items() if data[-256:] in shim]
    assert embedded == []
    assert len(shim) < sum(map(len, images.values()))


def test_the_shim_reader_refuses_a_cubin(wheel):
    cubin = next(data for name, data in members(wheel).items() if name.endswith(".cubin"))
    with pytest.raises(NotSharedLibrary):
        read_dynamic_needs(cubin)


@needs_cc
def test_a_library_linking_outside_the_manylinux_set_gets_no_manylinux_tag(tmp_path):
    source = tmp_path / "uses_fancy.c"
    source.write_text("extern int fancy(void);\nint call(void) { return fancy(); }\n")
    (tmp_path / "libfancy.c").write_text("int fancy(void) { return 1; }\n")
    run([CC, "-shared", "-fPIC", tmp_path / "libfancy.c", "-o", tmp_path / "libfancy.so"])
    run([CC, "-shared", "-fPIC", source, "-L", tmp_path, "-lfancy", "-o", tmp_path / "libuses.so"])
    assert platform_tag(tmp_path / "libfancy.so") is not None
    assert platform_tag(tmp_path / "libuses.so") is None


# ---------------------------------------------------------------- the shim reads its images


@needs_cc
def test_a_wheel_shim_launches_from_the_image_files_and_names_a_missing_one(tmp_path, monkeypatch):
    import c_abi_support as support
    from test_c_abi import WARNINGS, Shim, config, fresh_fake_driver, vecadd_args

    from buildtile.config import BuildtileSettings
    from buildtile.interop.c_abi import emit

    root = tmp_path / "site"
    manifest = support.write_package(root, support.example_kernels())
    project = emit(manifest, root / PACKAGE / "_buildtile", tmp_path / "build", BuildtileSettings()).cmake_source_dir
    lib = root / PACKAGE / "_buildtile" / "lib" / f"lib{PACKAGE}_kernels.so"
    lib.parent.mkdir()
    run([CC, "-std=c11", *WARNINGS, "-O1", "-fPIC", "-shared", "-fvisibility=hidden", "-DBT_IMAGES_FROM_FILES",
         "-I", project / "include", "-I", project / "src", *sorted((project / "src").glob("*.c")), "-o", lib,
         "-ldl", "-lpthread"])
    fake = tmp_path / "fake" / "libcuda.so.1"
    fake.parent.mkdir()
    run([CC, "-std=c11", *WARNINGS, "-fPIC", "-shared", Path(support.__file__).parent / "fake_libcuda.c", "-o", fake])
    vecadd = next(k for k in manifest["kernels"] if k["name"] == "vecadd")
    cubin = root / PACKAGE / "_buildtile" / vecadd["artifacts"]["sm_90"]["path"]
    assert cubin.read_bytes() not in lib.read_bytes()

    _, state = fresh_fake_driver(fake, monkeypatch, devices=1)
    shim = Shim(lib, manifest)
    assert shim.vecadd(config(1), *vecadd_args()) == 0, shim.last_error
    assert state.module_loads == 1

    # a fresh copy of the library (its own module cache) beside a damaged image file
    cubin.write_bytes(cubin.read_bytes()[:-1])
    copy = lib.with_name("libcopy.so")
    shutil.copy(lib, copy)
    _, state = fresh_fake_driver(fake, monkeypatch, devices=1)
    shim = Shim(copy, manifest)
    assert shim.vecadd(config(1), *vecadd_args()) == 610
    assert shim.last_error.startswith("error[BT0610]: the image of kernel `example_kernels.ops.vecadd` for sm_90 "
                                      "is missing or damaged")
    assert str(cubin.relative_to(root / PACKAGE / "_buildtile")) in shim.last_error
    assert state.module_loads == 0


def test_a_wheel_without_the_c_abi_stays_pure(tmp_path, monkeypatch):
    from test_build_backend import FIXTURE

    from buildtile.hooks.wheel_metadata import runtime_requirement

    project = tmp_path / "project"
    shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns("build", "dist", "_buildtile"))
    monkeypatch.chdir(project)
    import buildtile.build

    wheel = tmp_path / "dist" / buildtile.build.build_wheel(str(tmp_path / "dist"))
    assert wheel.name == "tiny_vecadd-0.2.0-py3-none-any.whl"
    metadata = dist_info_file(wheel, "METADATA")
    assert f"Requires-Dist: {runtime_requirement()}\n" in metadata
    assert not [n for n in members(wheel) if n.endswith("entry_points.txt")]  # no C ABI, no CMake prefix
    # pip's metadata, prepared without compiling, says the same
    dist_info = buildtile.build.prepare_metadata_for_build_wheel(str(tmp_path / "meta"))
    assert (tmp_path / "meta" / dist_info / "METADATA").read_text() == metadata


def test_inspect_reports_image_sizes_per_kernel_and_target(wheel):
    from buildtile.image_sizes import image_sizes
    from buildtile.inspect import describe

    files = members(wheel)
    manifest = json.loads(files[f"{PACKAGE}/_buildtile/manifest.json"])
    sizes = image_sizes(manifest)
    vecadd = next(k for k in manifest["kernels"] if k["name"] == "vecadd")
    on_disk = {("PTX " if a["kind"] == "ptx" else "") + a["path"].rsplit(".", 2)[-2]:
               len(files[f"{PACKAGE}/_buildtile/{a['path']}"]) for a in vecadd["artifacts"].values()}
    assert sizes["example_kernels.ops.vecadd"] == on_disk
    add = next(k for k in manifest["kernels"] if k["module"] == "example_kernels.tiles" and k["name"] == "add")
    add_paths = {a["path"] for spec in add["tile"]["specializations"] for a in spec["artifacts"].values()}
    tile_total = sum(len(files[f"{PACKAGE}/_buildtile/{path}"]) for path in add_paths)
    assert tile_total > 0
    assert sum(sizes["example_kernels.tiles.add"].values()) == tile_total
    text = describe(str(wheel))
    line = next(x for x in text.splitlines() if x.strip().startswith("example_kernels.ops.vecadd "))
    assert str(sum(on_disk.values())) in line and f"sm_90 {on_disk['sm_90']}" in line
