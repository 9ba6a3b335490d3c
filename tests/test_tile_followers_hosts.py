"""Both hosts launch a kernel with outputs of different ranks as the compiler records it: the grid
from the primary output (the highest rank), which need not be the first output.

The manifest record is the one the Tile compiler writes for
tests/tile_follower_cases.py; the images are stand-ins, so the launch reaches
the fake driver (Python: buildtile.runtime.testing; C: tests/fake_libcuda.c).
"""

from __future__ import annotations

import ctypes
import shutil

import c_abi_support as support
import pytest
from test_c_abi import CC, WARNINGS, FakeState, run, tensor
from test_c_abi_tile import A, B, C, TileShim, expect_params, param, tile_config
from test_tile_followers import compiled
from tile_support import add_1d_ptx, add_tile_kernels, make_tile_package, spec_symbol, tile_record

from buildtile.interop.c_abi import emit
from buildtile.runtime.tile.handles import partition

KERNEL = "softmax_with_stats"
MODULE = "example_kernels.tiles"
D = 0x7F0000300000


def record_of_the_compiler():
    """(params as (name, kind, dtype, rank), grid parameter, [(tile shapes, block)]) of KERNEL."""
    impl, kernel = compiled(KERNEL)
    params = [(p["name"], p["kind"], p["dtype"], p["rank"]) for p in kernel.params]
    specs = [(s.tile_shapes, s.block) for s in impl.specializations(kernel)]
    return params, kernel.grid_param, specs


def label_of_the_compiler(tile_shapes: dict) -> str:
    impl, kernel = compiled(KERNEL)
    (spec,) = [s for s in impl.specializations(kernel) if s.tile_shapes == tile_shapes]
    return spec.label


def test_the_compiler_records_the_highest_rank_output_as_the_grid():
    params, grid, specs = record_of_the_compiler()
    assert [p[0] for p in params if p[1] == "tile_out"] == ["row_max", "z", "row_sum"]
    assert grid == "z"
    assert [shapes for shapes, _ in specs] == [{"z": [1, 1024], "row_max": [1], "row_sum": [1]},
                                                {"z": [4, 256], "row_max": [4], "row_sum": [4]}]


def test_the_python_host_takes_the_grid_from_the_primary_output(make_kernel_package, fake_gpu):
    params, grid, specs = record_of_the_compiler()
    ops = make_tile_package(make_kernel_package, {KERNEL: dict(
        params=params, grid_param=grid, specializations=[dict(tiles=t, block=b) for t, b in specs])})
    x, z = fake_gpu.array((37, 1000)), fake_gpu.array((37, 1000))
    row_max, row_sum = fake_gpu.array(37), fake_gpu.array(37)
    getattr(ops, KERNEL)(x, partition(row_max, [4]), partition(z, [4, 256]), partition(row_sum, [4])).sync_on(0)
    launch = fake_gpu.launches[-1]
    assert launch.symbol.endswith("__" + label_of_the_compiler({"z": [4, 256], "row_max": [4], "row_sum": [4]}))
    assert launch.grid == (4, 10, 1)          # ceil(1000 / 256) along x, ceil(37 / 4) along y: from z


@pytest.fixture(scope="module")
def shim_path(tmp_path_factory):
    if CC is None:
        pytest.skip("needs a C compiler")
    params, grid, specs = record_of_the_compiler()
    root = tmp_path_factory.mktemp("followers")
    manifest = support.write_package(root, support.example_kernels())
    record = tile_record(MODULE, KERNEL, params, [
        dict(tiles=t, block=b, ptx=add_1d_ptx(spec_symbol(MODULE, KERNEL, t), 8, b[0])) for t, b in specs],
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


def test_the_c_host_takes_the_grid_from_the_primary_output(shim_path, fake_driver_path, tmp_path, monkeypatch):
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
    shim = TileShim(copy, manifest)
    expect_params(state, shim.records[KERNEL])
    x, z = tensor(A, [37, 1000]), tensor(C, [37, 1000])
    row_max, row_sum = tensor(B, [37]), tensor(D, [37])
    # the dispatcher takes the outputs' tile extents in parameter order: row_max, z, row_sum
    assert shim.tiled(KERNEL)(tile_config(), [4, 4, 256, 4], x, row_max, z, row_sum) == 0, shim.last_error
    assert tuple(state.grid) == (4, 10, 1)
    assert [param(state, i) for i in (0, 5, 8, 13)] == [A, B, C, D]
