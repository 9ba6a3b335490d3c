"""Kernel handles, launch configurations, images and modules, on a fake GPU."""

from __future__ import annotations

import json

import pytest

from buildtile.errors import (
    BuildtileError,
    ContractError,
    CudaError,
    NoImageError,
    TypeMismatchError,
)
from buildtile.interop.abi import mangle
from buildtile.runtime.kernel import Kernel
from buildtile.runtime.launch import PreparedLaunch


def refused(fake_gpu, exc_type, fn, *args, **kwargs) -> str:
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    assert fake_gpu.queued == []
    return str(info.value)


def vec(fake_gpu, n=1000):
    return fake_gpu.array(n), fake_gpu.array(n), fake_gpu.array(n)


# ----------------------------------------------------------------------------- the handle

def test_decorator_returns_a_kernel_handle_that_reads_like_the_function(ops):
    assert isinstance(ops.vecadd, Kernel)
    assert ops.vecadd.__name__ == "vecadd" and ops.vecadd.kind == "simt"
    assert ops.vecadd.__wrapped__.__name__ == "vecadd"
    assert "vecadd" in repr(ops.vecadd)


def test_import_reads_nothing_and_first_use_reads_the_manifest(ops):
    assert ops.vecadd._signature is None
    assert ops.vecadd.signature.name == "vecadd"
    assert ops.vecadd.record["symbol"] == mangle(ops.__name__, "vecadd")


def test_calling_a_kernel_without_a_grid_is_explained(ops, fake_gpu):
    text = refused(fake_gpu, ContractError, ops.vecadd, *vec(fake_gpu))
    assert "needs a launch configuration: call it as `vecadd[grid](...)`" in text


def test_missing_manifest_tells_the_user_to_build(make_kernel_package, fake_gpu):
    ops = make_kernel_package("from buildtile import simt\n@simt.kernel\ndef k(a):\n    pass\n",
                              {"k": dict(params=[("a", "disjoint_slice", "f32")])})
    from pathlib import Path

    manifest = Path(ops.__file__).parent / "_buildtile" / "manifest.json"
    manifest.unlink()
    with pytest.raises(BuildtileError) as info:
        ops.k[1](fake_gpu.array(4))
    assert info.value.code == "BT0620"
    assert "no compiled kernels found" in str(info.value) and "pip install" in str(info.value)


def test_kernel_missing_from_manifest_says_to_rebuild(make_kernel_package, fake_gpu):
    ops = make_kernel_package(
        "from buildtile import simt\n@simt.kernel\ndef k(a):\n    pass\n@simt.kernel\ndef added_later(a):\n    pass\n",
        {"k": dict(params=[("a", "disjoint_slice", "f32")])},
    )
    with pytest.raises(BuildtileError) as info:
        ops.added_later[1](fake_gpu.array(4))
    assert info.value.code == "BT0620"
    assert "`added_later`" in str(info.value) and "rebuild" in str(info.value)


def test_kernel_defined_in_a_script_is_explained():
    def script_kernel(a):
        pass

    script_kernel.__module__ = "__main__"
    with pytest.raises(BuildtileError, match="defined in a script"):
        Kernel(script_kernel).prepare(grid=1)


def test_manifest_of_another_abi_version_is_refused(make_kernel_package, fake_gpu):
    ops = make_kernel_package("from buildtile import simt\n@simt.kernel\ndef k(a):\n    pass\n",
                              {"k": dict(params=[("a", "disjoint_slice", "f32")])})
    from pathlib import Path

    path = Path(ops.__file__).parent / "_buildtile" / "manifest.json"
    data = json.loads(path.read_text())
    data["abi_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(BuildtileError) as info:
        ops.k[1](fake_gpu.array(4))
    assert info.value.code == "BT0622"


def test_unknown_parameter_kind_in_the_manifest_is_a_manifest_error(make_kernel_package, fake_gpu):
    ops = make_kernel_package("from buildtile import simt\n@simt.kernel\ndef k(a):\n    pass\n",
                              {"k": dict(params=[("a", "disjoint_slice", "f32")])})
    from pathlib import Path

    path = Path(ops.__file__).parent / "_buildtile" / "manifest.json"
    data = json.loads(path.read_text())
    data["kernels"][0]["params"][0]["kind"] = "ring_buffer"
    path.write_text(json.dumps(data))
    with pytest.raises(BuildtileError) as info:
        ops.k[1](fake_gpu.array(4))
    assert info.value.code == "BT0621" and "ring_buffer" in str(info.value)


# ----------------------------------------------------------------------------- configurations

def test_grid_forms(ops, fake_gpu):
    a, b, c = vec(fake_gpu)
    ops.vecadd[4](a, b, c)
    ops.vecadd[(4,)](a, b, c)
    ops.vecadd[4, (256,)](a, b, c)
    ops.vecadd[(4,), 256](a, b, c)
    ops.vecadd[(4, 1, 1), (256, 1, 1)](a, b, c)
    ops.vecadd.prepare(grid=4, block=256)(a, b, c)
    assert {(r.grid, r.block) for r in fake_gpu.launches} == {((4, 1, 1), (256, 1, 1))}


def test_configurations_are_prepared_once(ops, fake_gpu):
    assert ops.vecadd[4] is ops.vecadd[4]
    assert isinstance(ops.vecadd[4], PreparedLaunch)
    assert ops.vecadd[[4]] is not ops.vecadd[[4]]  # unhashable keys still work, uncached


def test_block_must_equal_the_contract(ops, fake_gpu):
    text = refused(fake_gpu, ContractError, ops.vecadd.prepare, grid=4, block=128)
    assert "compiled for block (256, 1, 1), got block (128, 1, 1)" in text
    refused(fake_gpu, ContractError, lambda: ops.vecadd[4, (128,)])


def test_index_1d_kernel_needs_a_1d_grid(ops, fake_gpu):
    text = refused(fake_gpu, ContractError, lambda: ops.vecadd[4, 4])
    assert "grid must be 1-D, got grid (4, 4, 1)" in text
    assert "vecadd[n_blocks, (256,)]" in text  # how to pass a block instead


def test_index_2d_kernel_needs_z_equal_1(ops, fake_gpu):
    ops.matadd.prepare(grid=(3, 2))
    text = refused(fake_gpu, ContractError, ops.matadd.prepare, grid=(3, 2, 2))
    assert "z == 1" in text


def test_kernel_without_index_writes_takes_any_grid(ops, fake_gpu):
    launch = ops.histogram.prepare(grid=(4, 4, 4))
    assert launch.grid == (4, 4, 4)
    launch(fake_gpu.array(10, "u32"), fake_gpu.array(4, "u32"))
    assert fake_gpu.launches[-1].grid == (4, 4, 4)


@pytest.mark.parametrize("grid, why", [
    (0, "at least 1"),
    ((4, 0), "at least 1"),
    (2**31, "at most 2147483647 blocks along x"),
    ((1, 65536), "at most 65535 blocks along y"),
    ((1, 1, 65536), "at most 65535 blocks along z"),
    ((1, 2, 3, 4), "1 to 3 ints"),
    ("4", "1 to 3 ints"),
    (4.0, "1 to 3 ints"),
    (True, "1 to 3 ints"),
])
def test_grid_limits(ops, fake_gpu, grid, why):
    text = refused(fake_gpu, ContractError, ops.histogram.prepare, grid=grid)
    assert why in text


def test_numpy_integers_are_grid_sizes(ops, fake_gpu):
    import numpy as np

    assert ops.vecadd.prepare(grid=np.int64(7)).grid == (7, 1, 1)


def test_kernel_without_contract_needs_unsafe_launch(ops, fake_gpu):
    src, dst = fake_gpu.array(10), fake_gpu.array(10)
    text = refused(fake_gpu, ContractError, lambda: ops.raw_copy[1])
    assert "no launch contract" in text and "unsafe_launch" in text
    ops.raw_copy.unsafe_launch((1, 2), (32, 4), src, dst, stream=5, shared_mem=1024)
    record = fake_gpu.launches[-1]
    assert (record.grid, record.block, record.shared_mem, record.stream) == ((1, 2, 1), (32, 4, 1), 1024, 5)


def test_unsafe_launch_still_checks_arguments_and_cuda_limits(ops, fake_gpu):
    src = fake_gpu.array(10)
    refused(fake_gpu, TypeMismatchError, ops.raw_copy.unsafe_launch, 1, 32, src, fake_gpu.array(10, "f64"))
    text = refused(fake_gpu, ContractError, ops.raw_copy.unsafe_launch, 1, (64, 32), src, fake_gpu.array(10))
    assert "2048 threads" in text
    text = refused(fake_gpu, ContractError, ops.raw_copy.unsafe_launch, 1, 32, src, fake_gpu.array(10),
                   shared_mem=-1)
    assert "shared_mem" in text


def test_grid_for_covers_the_extents_in_shape_order(ops):
    assert ops.vecadd.grid_for(1000) == (4,)
    assert ops.vecadd.grid_for(1024) == (4,)
    assert ops.vecadd.grid_for(0) == (1,)
    assert ops.matadd.grid_for(37, 1000) == (63, 3)  # (cols along x, rows along y)
    assert ops.volume.grid_for(5, 17, 9) == (2, 3, 2)
    with pytest.raises(ContractError):
        ops.vecadd.grid_for(-1)
    with pytest.raises(ContractError):
        ops.raw_copy.grid_for(10)


def test_min_compute_capability_is_checked_per_device(ops, fake_gpu):
    out = fake_gpu.array(10)
    text = refused(fake_gpu, ContractError, ops.sm100_only[1], out)
    assert "needs compute capability 10.0 or newer, but device 0 is 9.0 (sm_90)" in text
    refused(fake_gpu, ContractError, ops.sm100_only.prepare, grid=1, device=0)
    ops.sm100_only.prepare(grid=1)  # no device named: checked at launch


def test_dynamic_shared_memory_above_48k_is_opted_into(ops, fake_gpu):
    ops.big_shared[1](fake_gpu.array(4))
    assert ("set_dynamic_shared", (ops.big_shared.record["symbol"], 64 * 1024)) in fake_gpu.calls
    assert fake_gpu.launches[-1].shared_mem == 64 * 1024


# ----------------------------------------------------------------------------- images and modules

def test_module_is_loaded_once_per_device_and_exact_cubin_is_preferred(ops, fake_gpu):
    for _ in range(3):
        ops.vecadd[4](*vec(fake_gpu))
    loads = [c for c in fake_gpu.calls if c[0] == "load_module"]
    assert loads == [("load_module", (0, "cubin for sm_90 of kernel `vecadd`"))]
    assert fake_gpu.loaded_images[0][1].startswith(b"fake cubin")


def test_each_device_gets_its_own_module(ops, fake_gpu):
    fake_gpu.capabilities.append((9, 0))
    ops.vecadd[4](*vec(fake_gpu))
    ops.vecadd[4](*(fake_gpu.array(10, device=1) for _ in range(3)))
    ops.vecadd[4](*vec(fake_gpu))
    assert [c[1][0] for c in fake_gpu.calls if c[0] == "load_module"] == [0, 1]
    assert [r.device for r in fake_gpu.launches] == [0, 1, 0]


def test_newer_gpu_gets_the_ptx(ops, fake_gpu):
    fake_gpu.capabilities[0] = (12, 0)
    ops.vecadd[4](*vec(fake_gpu))
    _device, image = fake_gpu.loaded_images[0]
    assert image.startswith(b"// fake PTX") and image.endswith(b"\0")


def test_gpu_without_any_usable_image_names_the_targets(make_kernel_package, fake_gpu):
    ops = make_kernel_package("from buildtile import simt\n@simt.kernel\ndef k(a):\n    pass\n",
                              {"k": dict(params=[("a", "disjoint_slice", "f32")])},
                              targets=("sm_90",), ptx_target="sm_90")
    fake_gpu.capabilities[0] = (8, 6)
    text = refused(fake_gpu, NoImageError, ops.k[1], fake_gpu.array(4))
    assert "BT0610" in text
    assert "device 0 (Fake GPU 0, sm_86)" in text and "sm_90 (cubin), PTX for sm_90" in text


def test_damaged_image_is_refused(ops, fake_gpu):
    from pathlib import Path

    path = Path(ops.__file__).parent / "_buildtile" / ops.vecadd.record["artifacts"]["sm_90"]["path"]
    path.write_bytes(b"tampered")
    with pytest.raises(BuildtileError) as info:
        ops.vecadd[4](*vec(fake_gpu))
    assert info.value.code == "BT0623" and "sha256" in str(info.value)
    assert fake_gpu.launches == []


def test_driver_errors_surface_as_cuda_errors(ops, fake_gpu):
    fake_gpu.fail_launch = CudaError("CUDA driver call cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")
    with pytest.raises(CudaError) as info:
        ops.vecadd[4](*vec(fake_gpu))
    assert info.value.code == "BT0700"


# ----------------------------------------------------------------------------- streams

def test_stream_forms_reach_the_launch(ops, fake_gpu):
    from cuda.bindings import driver as cu

    class ProtocolStream:
        def __cuda_stream__(self):
            return (0, 0xABC)

    a, b, c = vec(fake_gpu)
    for given, expected in [(None, 0), (7, 7), (ProtocolStream(), 0xABC), (cu.CUstream(0x55), 0x55)]:
        ops.vecadd[4](a, b, c, stream=given)
        assert fake_gpu.launches[-1].stream == expected


def test_bad_stream_is_refused(ops, fake_gpu):
    text = refused(fake_gpu, TypeMismatchError, ops.vecadd[4], *vec(fake_gpu), stream="default")
    assert "`stream=` does not accept builtins.str" in text
    refused(fake_gpu, TypeMismatchError, ops.vecadd[4], *vec(fake_gpu), stream=-1)


def test_producer_stream_of_the_array_interface_is_waited_on(ops, fake_gpu):
    a, b = fake_gpu.array(10, stream=0x77), fake_gpu.array(10, stream=0x99)
    c = fake_gpu.array(10, stream=0x99)
    ops.vecadd[1](a, b, c, stream=0x99)
    assert [call for call in fake_gpu.calls if call[0] == "stream_wait"] == [("stream_wait", (0x99, 0x77))]
