"""Both hosts launch a kernel with a tile.Atomic output as the compiler records it: the atomic
output is passed as a plain array (no partition), treated as written (aliasing refused), and the
grid comes from the tile.Out. The images are stand-ins, so the launch reaches the fake driver."""

from __future__ import annotations

import ctypes
import shutil

import c_abi_support as support
import pytest
from test_c_abi import CC, WARNINGS, FakeState, run, tensor
from test_c_abi_tile import A, B, C, TileShim, expect_params, param, tile_config
from test_tile_scatter import compiled
from tile_support import add_1d_ptx, add_tile_kernels, make_tile_package, spec_symbol, tile_record

from buildtile.errors import AliasingError, TypeMismatchError
from buildtile.interop.c_abi import emit
from buildtile.runtime.tile.handles import partition

KERNEL = "index_add"
MODULE = "example_kernels.tiles"
D = 0x7F0000300000


def record_of_the_compiler():
    impl, kernel = compiled(KERNEL)
    params = [(p["name"], p["kind"], p["dtype"], p["rank"]) for p in kernel.params]
    return params, kernel.grid_param, [(s.tile_shapes, s.block) for s in impl.specializations(kernel)]


@pytest.fixture
def ops(make_kernel_package, fake_gpu):
    params, grid, specs = record_of_the_compiler()
    return make_tile_package(make_kernel_package, {KERNEL: dict(
        params=params, grid_param=grid, specializations=[dict(tiles=t, block=b) for t, b in specs])})


def test_the_python_host_passes_an_atomic_output_as_an_array(ops, fake_gpu):
    x, idx, z, acc = fake_gpu.array(1000), fake_gpu.array(1000, dtype="i32"), fake_gpu.array(1000), fake_gpu.array(50)
    getattr(ops, KERNEL)(x, idx, partition(z, [256]), acc).sync_on(0)
    launch = fake_gpu.launches[-1]
    assert launch.grid == (4, 1, 1)                   # from z
    assert launch.offsets[-3:] == (72, 80, 88)        # acc: data, shape, stride after three 1-D arrays


def test_the_python_host_refuses_a_partition_for_an_atomic_output(ops, fake_gpu):
    x, idx, z, acc = fake_gpu.array(1000), fake_gpu.array(1000, dtype="i32"), fake_gpu.array(1000), fake_gpu.array(50)
    with pytest.raises(TypeMismatchError):
        getattr(ops, KERNEL)(x, idx, partition(z, [256]), partition(acc, [256]))
    assert fake_gpu.queued == []


def test_the_python_host_refuses_an_atomic_output_overlapping_an_input(ops, fake_gpu):
    x, idx, z = fake_gpu.array(1000), fake_gpu.array(1000, dtype="i32"), fake_gpu.array(1000)
    with pytest.raises(AliasingError) as info:
        getattr(ops, KERNEL)(x, idx, partition(z, [256]), x.view(10, shape=(50,)))
    assert "writes `acc`" in str(info.value)
    assert fake_gpu.queued == []


@pytest.fixture(scope="module")
def shim_path(tmp_path_factory):
    if CC is None:
        pytest.skip("needs a C compiler")
    params, grid, specs = record_of_the_compiler()
    root = tmp_path_factory.mktemp("atomic")
    manifest = support.write_package(root, support.example_kernels())
    record = tile_record(MODULE, KERNEL, params, [
        dict(tiles=t, block=b, ptx=add_1d_ptx(spec_symbol(MODULE, KERNEL, t), 256, b[0])) for t, b in specs],
        grid_param=grid)
    add_tile_kernels(root, manifest, [record])
    project = emit(manifest, root / support.PACKAGE / "_buildtile", root / "build", None).cmake_source_dir
    out = project.parent / "libshim.so"
    run([CC, "-std=c11", *WARNINGS, "-O1", "-fPIC", "-shared", "-fvisibility=hidden",
         "-I", project / "include", "-I", project / "src",
         *sorted((project / "src").glob("*.c")), "-o", out, "-ldl", "-lpthread"])
    return out, manifest


@pytest.fixture(scope="module")
def fake_driver_path(tmp_path_factory):
    from test_c_abi import HERE

    out = tmp_path_factory.mktemp("fake") / "libcuda.so.1"
    run([CC, "-std=c11", *WARNINGS, "-fPIC", "-shared", HERE / "fake_libcuda.c", "-o", out])
    return out


@pytest.fixture
def shim(shim_path, fake_driver_path, tmp_path, monkeypatch):
    path, manifest = shim_path
    monkeypatch.setenv("BUILDTILE_LIBCUDA", str(fake_driver_path))
    driver = ctypes.CDLL(str(fake_driver_path))
    state = FakeState.in_dll(driver, "fake")
    state.cc_major, state.cc_minor, state.device_count = 9, 0, 2
    state.init_result = state.refuse_cubin = state.refuse_ptx = 0
    driver.fake_reset_observations()
    driver.fake_make_current(0, 1)
    copy = tmp_path / "libshim.so"
    shutil.copy(path, copy)
    return TileShim(copy, manifest), state


def test_the_c_host_passes_an_atomic_output_as_a_tensor(shim):
    shim, state = shim
    expect_params(state, shim.records[KERNEL])
    x, idx, z, acc = tensor(A, [1000]), tensor(B, [1000], "i32"), tensor(C, [1000]), tensor(D, [50])
    assert shim.tiled(KERNEL)(tile_config(), [256], x, idx, z, acc) == 0, shim.last_error
    assert tuple(state.grid) == (4, 1, 1)
    assert [param(state, i) for i in (0, 3, 6, 9, 10)] == [A, B, C, D, 50]


def test_the_c_host_refuses_an_atomic_output_overlapping_an_input(shim):
    shim, _ = shim
    x, idx, z = tensor(A, [1000]), tensor(B, [1000], "i32"), tensor(C, [1000])
    assert shim.tiled(KERNEL)(tile_config(), [256], x, idx, z, tensor(A, [50])) == 502
    assert "acc" in shim.last_error
