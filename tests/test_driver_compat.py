"""Each image states the PTX ISA it is written in and the driver it needs; a driver too old for
every image a device could run is refused by name before anything is loaded."""

from __future__ import annotations

import ctypes
import json
import re
import shutil
from pathlib import Path

import c_abi_support as support
import pytest
import test_c_abi as c_abi   # the shim's ctypes mirrors, the fake libcuda and how both are compiled

from buildtile.cli import main
from buildtile.errors import BuildtileError, NoImageError
from buildtile.interop import driver_compat
from buildtile.interop.manifest import manifest_path

ROOT = Path(__file__).parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "vecadd_project"

SOURCE = "from buildtile import simt\n\n@simt.kernel(block=256)\ndef k(out):\n    pass\n"
KERNELS = {"k": dict(params=[("out", "disjoint_slice", "f32")])}


def ptx_text(version: str) -> bytes:
    return f"//\n.version {version}\n.target sm_80\n.address_size 64\n".encode()


def needs(ops, **by_key) -> None:
    """Give the artifacts of ``ops.k`` the PTX ISA and driver floor of ``by_key`` (key -> ISA)."""
    manifest = Path(ops.__file__).parent / "_buildtile" / "manifest.json"
    data = json.loads(manifest.read_text())
    for key, isa in by_key.items():
        data["kernels"][0]["artifacts"][key].update(ptx_isa=isa, min_driver=driver_compat.min_driver_for(isa))
    manifest.write_text(json.dumps(data))


# ----------------------------------------------------------------------------- the table

def test_the_isa_table_agrees_with_cuda_python():
    utils = pytest.importorskip("cuda.bindings.utils")
    for isa in driver_compat.PTX_ISA_CUDA:
        assert driver_compat.min_driver_for(isa) == utils.get_minimal_required_cuda_ver_from_ptx_ver(isa), isa


def test_the_isa_is_read_from_the_version_directive():
    assert driver_compat.ptx_isa_of(ptx_text("8.7").decode()) == "8.7"
    assert driver_compat.ptx_isa_of("// no header\n.entry k()\n{\n}\n") is None
    assert driver_compat.min_driver_for(None) is None
    assert driver_compat.min_driver_for("99.9") is None   # newer than the table: nothing refused


def test_drivers_are_named_with_their_linux_branch():
    assert driver_compat.describe_driver(12000) == "CUDA 12.0 (Linux driver 525.60)"
    assert driver_compat.describe_driver(11080) == "CUDA 11.8"
    assert driver_compat.version_number((12, 8)) == 12080


# ----------------------------------------------------------------------------- the build records it

def test_a_build_records_each_images_isa_and_driver(tmp_path, capsys):
    project = tmp_path / "proj"
    shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns("build", "_buildtile"))
    assert main(["build", str(project)]) == 0
    out = manifest_path(project / "tiny_kernels").parent
    (kernel,) = json.loads((out / "manifest.json").read_text())["kernels"]
    assert set(kernel["artifacts"]) == {"sm_80", "sm_90", "ptx"}
    for key, artifact in kernel["artifacts"].items():
        # a cubin is held to the PTX it was assembled from: the same target's PTX text
        target = artifact.get("target", key)
        ptx = (out / "kernels" / f"{kernel['symbol']}.{target}.ptx")
        version = re.search(r"^\.version (\S+)$", ptx.read_text() if ptx.exists() else "", re.M)
        if artifact["kind"] == "ptx":
            assert version is not None
        if version is not None:
            assert artifact["ptx_isa"] == version.group(1)
        assert artifact["min_driver"] == driver_compat.min_driver_for(artifact["ptx_isa"])
        assert artifact["min_driver"] is not None


# ----------------------------------------------------------------------------- the Python host

def test_a_driver_too_old_for_every_image_is_refused_before_any_load(make_kernel_package, fake_gpu):
    ops = make_kernel_package(SOURCE, KERNELS)
    needs(ops, sm_90="8.0", ptx="8.0")
    fake_gpu.version = (11, 8)
    with pytest.raises(NoImageError) as info:
        ops.k[1](fake_gpu.array(4))
    text = str(info.value)
    assert info.value.code == "BT0610"
    assert "kernel `k`" in text and "device 0 (Fake GPU 0, sm_90)" in text
    assert "the driver is CUDA 11.8" in text
    assert "need CUDA 12.0 (Linux driver 525.60) or newer" in text
    assert "sm_90 (cubin), PTX for sm_80" in text
    assert "update the NVIDIA driver to CUDA 12.0" in info.value.help
    assert fake_gpu.loaded_images == [] and fake_gpu.launches == []


def test_prepare_for_a_device_refuses_an_old_driver_too(make_kernel_package, fake_gpu):
    ops = make_kernel_package(SOURCE, KERNELS)
    needs(ops, sm_90="8.7", ptx="8.7")
    fake_gpu.version = (12, 4)
    with pytest.raises(NoImageError, match=r"need CUDA 12\.8 \(Linux driver 570\) or newer"):
        ops.k.prepare(grid=1, device=0)
    assert fake_gpu.loaded_images == []


def test_an_image_the_driver_cannot_load_gives_way_to_one_it_can(make_kernel_package, fake_gpu):
    ops = make_kernel_package(SOURCE, {"k": {**KERNELS["k"], "ptx": ("sm_80", ptx_text("8.0"))}})
    needs(ops, sm_90="8.7", ptx="8.0")
    fake_gpu.version = (12, 4)
    ops.k[1](fake_gpu.array(4))
    ((device, image),) = fake_gpu.loaded_images
    assert image.rstrip(b"\0") == ptx_text("8.0")
    assert len(fake_gpu.launches) == 1


def test_a_new_enough_driver_gets_the_exact_cubin(make_kernel_package, fake_gpu):
    ops = make_kernel_package(SOURCE, KERNELS)
    needs(ops, sm_90="8.7", ptx="8.7")
    fake_gpu.version = (12, 8)
    ops.k[1](fake_gpu.array(4))
    ((device, image),) = fake_gpu.loaded_images
    assert image == (Path(ops.__file__).parent / "_buildtile" / ops.MANIFEST["kernels"][0]["artifacts"]["sm_90"]
                     ["path"]).read_bytes()


def test_a_manifest_without_driver_floors_is_never_refused_for_the_driver(make_kernel_package, fake_gpu):
    ops = make_kernel_package(SOURCE, KERNELS)
    fake_gpu.version = (11, 0)
    ops.k[1](fake_gpu.array(4))
    assert len(fake_gpu.launches) == 1


@pytest.mark.parametrize("field, value", [("ptx_isa", "eight"), ("min_driver", "12000"), ("min_driver", -1)])
def test_a_malformed_driver_floor_is_a_manifest_error(make_kernel_package, fake_gpu, field, value):
    ops = make_kernel_package(SOURCE, KERNELS)
    manifest = Path(ops.__file__).parent / "_buildtile" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["kernels"][0]["artifacts"]["sm_90"][field] = value
    manifest.write_text(json.dumps(data))
    with pytest.raises(BuildtileError) as info:
        ops.k.signature
    assert info.value.code == "BT0621" and field in str(info.value)


# ----------------------------------------------------------------------------- the C shim

class FakeDriverState(c_abi.FakeState):
    """The fake libcuda's state, with the driver version it reports (laid out last)."""

    _fields_ = [("driver_version", ctypes.c_int)]


@pytest.fixture(scope="module")
def built_shim(tmp_path_factory):
    """(shim library, fake libcuda, manifest) of a package whose cubins need CUDA 12.8 (PTX ISA 8.7)
    and whose PTX needs CUDA 12.0 (8.0)."""
    if c_abi.CC is None:
        pytest.skip("needs a C compiler")
    from buildtile.config import BuildtileSettings
    from buildtile.interop.c_abi import emit

    root = tmp_path_factory.mktemp("driver_pkg")
    manifest = support.write_package(root, support.example_kernels()[:1])
    for art in manifest["kernels"][0]["artifacts"].values():
        isa = "8.0" if art["kind"] == "ptx" else "8.7"
        art.update(ptx_isa=isa, min_driver=driver_compat.min_driver_for(isa))
    out = root / support.PACKAGE / "_buildtile"
    project = emit(manifest, out, root / "build", BuildtileSettings()).cmake_source_dir
    lib, fake_lib = root / "libshim.so", root / "libcuda.so.1"
    c_abi.run([c_abi.CC, "-std=c11", *c_abi.WARNINGS, "-O1", "-fPIC", "-shared", "-fvisibility=hidden",
               "-I", project / "include", "-I", project / "src", *sorted((project / "src").glob("*.c")),
               "-o", lib, "-ldl", "-lpthread"])
    c_abi.run([c_abi.CC, "-std=c11", *c_abi.WARNINGS, "-fPIC", "-shared", ROOT / "tests" / "fake_libcuda.c",
               "-o", fake_lib])
    return lib, fake_lib, manifest, out


@pytest.fixture
def c_shim(built_shim, tmp_path, monkeypatch):
    """(shim, fake driver state, package dir): a fresh copy of the shim over the fake driver."""
    lib, fake_lib, manifest, out = built_shim
    driver, _ = c_abi.fresh_fake_driver(fake_lib, monkeypatch, devices=1)
    state = FakeDriverState.in_dll(driver, "fake")
    previous = state.driver_version
    copy = tmp_path / "libshim.so"
    shutil.copy(lib, copy)
    yield c_abi.Shim(copy, manifest), state, out
    state.driver_version = previous


def test_the_fake_libcuda_reports_a_current_driver_unless_told(c_shim):
    _, state, _ = c_shim
    assert state.driver_version >= driver_compat.min_driver_for("8.7")


def test_the_shim_refuses_a_driver_too_old_for_every_image_before_loading(c_shim):
    shim, state, _ = c_shim
    state.driver_version = 11080
    assert shim.vecadd(c_abi.config(1), *c_abi.vecadd_args()) == 610, shim.last_error
    assert shim.last_error.startswith(
        "error[BT0610]: no image of kernel `example_kernels.ops.vecadd` loads with the CUDA driver of device 0 "
        "(sm_90): the driver is CUDA 11.8, and the images this device could run need CUDA 12.0 or newer")
    assert "the package was built for sm_80 (cubin), sm_90 (cubin), PTX for sm_80" in shim.last_error
    assert "update the NVIDIA driver to CUDA 12.0 or newer" in shim.last_error
    assert state.module_loads == 0 and state.launches == 0


def test_the_shim_passes_over_a_cubin_the_driver_is_too_old_for(c_shim):
    shim, state, out = c_shim
    state.driver_version = 12040
    assert shim.vecadd(c_abi.config(1), *c_abi.vecadd_args()) == 0, shim.last_error
    ptx = (out / shim.kernels["vecadd"]["artifacts"]["ptx"]["path"]).read_bytes()
    assert ctypes.string_at(state.last_image, len(ptx)) == ptx
    assert state.module_loads == 1 and state.launches == 1


def test_the_shim_loads_the_exact_cubin_for_a_new_enough_driver(c_shim):
    shim, state, out = c_shim
    state.driver_version = 12080
    assert shim.vecadd(c_abi.config(1), *c_abi.vecadd_args()) == 0, shim.last_error
    cubin = (out / shim.kernels["vecadd"]["artifacts"]["sm_90"]["path"]).read_bytes()
    assert ctypes.string_at(state.last_image, len(cubin)) == cubin
