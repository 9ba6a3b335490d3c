"""A launch without a tile shape, and a generic kernel's launch: both hosts pick the same specialization.

`tile.partition(z)` (Python) and a null ``tile_shape`` (C, C++) leave the
choice to the runtime, which ranks the compiled specializations by the
manifest's rule (buildtile/interop/tile_choice.py; bt_tile_choose in the C
shim). The table below says, for extents, which one each host must launch;
the Python host runs on the fake driver of buildtile.runtime.testing, the C
host on tests/fake_libcuda.c.
"""

from __future__ import annotations

import ctypes
import shutil

import pytest
from test_c_abi import CC, WARNINGS, LaunchConfig, run, tensor
from tile_support import add_1d_ptx, add_tile_kernels, make_tile_package, spec_symbol, tile_record

import c_abi_support as support
from buildtile.errors import TypeMismatchError
from buildtile.interop.abi import mangle
from buildtile.interop.c_abi import emit
from buildtile.interop.tile_choice import FILL_TILES, choose
from buildtile.runtime.tile.handles import partition

MODULE = "example_kernels.tiles"
F32 = {"x": "f32", "z": "f32"}
BF16 = {"x": "bf16", "z": "bf16"}

#: name -> (params, specializations): tiles, and for the generic kernel its dtypes
KERNELS = {
    "pick1d": ([("x", "tensor", "f32", 1), ("z", "tile_out", "f32", 1)],
               [dict(tiles={"z": [128]}), dict(tiles={"z": [256]}), dict(tiles={"z": [1024]})]),
    "pick2d": ([("x", "tensor", "f32", 2), ("z", "tile_out", "f32", 2)],
               [dict(tiles={"z": [1, 1024]}), dict(tiles={"z": [4, 256]}), dict(tiles={"z": [1, 256]}),
                dict(tiles={"z": [16, 64]})]),
    "generic": ([("x", "tensor", "f32", 1), ("z", "tile_out", "f32", 1)],
                [dict(tiles={"z": [128]}, dtypes={"T": "f32"}, param_dtypes=F32),
                 dict(tiles={"z": [128]}, dtypes={"T": "bf16"}, param_dtypes=BF16, suffix="_bf16"),
                 dict(tiles={"z": [256]}, dtypes={"T": "f32"}, param_dtypes=F32),
                 dict(tiles={"z": [256]}, dtypes={"T": "bf16"}, param_dtypes=BF16, suffix="_bf16")]),
}

#: (kernel, extents, dtype) -> the tile shape the rule picks, and why
TABLE = [
    ("pick1d", (1000,), "f32", (1024,)),          # every tile pads 24; none fills the GPU: the largest
    ("pick1d", (307200,), "f32", (1024,)),        # no padding, all fill: the largest
    ("pick1d", (102400,), "f32", (256,)),         # no padding; 100 tiles of 1024 do not fill: 256 (400)
    ("pick1d", (128001,), "f32", (128,)),         # the fewest padded: 127 against 255 and 1023
    ("pick1d", (0,), "f32", (1024,)),             # nothing to pad or fill: the largest
    ("pick2d", (16384, 1024), "f32", (1, 1024)),  # three 1024-element tiles tie: the first listed
    ("pick2d", (1000, 200), "f32", (1, 256)),     # [4, 256] pads as little but makes only 250 tiles
    ("pick2d", (100, 4096), "f32", (1, 1024)),    # [16, 64] pads 12 rows
    ("pick2d", (70000, 256), "f32", (4, 256)),    # 70000 tiles along y are not launchable
    ("pick2d", (3, 3000), "f32", (1, 1024)),      # ties on padding, neither fills: the larger
    ("generic", (1000,), "f32", (256,)),
    ("generic", (1000,), "bf16", (256,)),         # the bf16 specialization of that shape
    ("generic", (200 * 128,), "bf16", (256,)),    # 200 tiles of 128 or 100 of 256: neither fills, the larger
    ("generic", (300 * 128,), "bf16", (128,)),    # 300 tiles of 128 fill the GPU, 150 of 256 do not
]


def expected_symbol(module: str, kernel: str, tiles: tuple, dtype: str) -> str:
    suffix = "_bf16" if dtype == "bf16" else ""
    return spec_symbol(module, kernel, {"z": list(tiles)}) + suffix


# ----------------------------------------------------------------------------- the rule itself

def test_the_rule_ranks_padding_before_filling_before_size():
    assert choose((128001,), [(0, (128,)), (1, (256,)), (2, (1024,))]) == 0
    assert choose((102400,), [(0, (128,)), (1, (256,)), (2, (1024,))]) == 1
    assert choose((70000, 256), [(0, (1, 1024)), (1, (4, 256))]) == 1
    assert FILL_TILES == 264


# ----------------------------------------------------------------------------- the Python host

@pytest.fixture
def py_tiles(make_kernel_package, fake_gpu):
    kernels = {name: dict(params=params, specializations=specs) for name, (params, specs) in KERNELS.items()}
    return make_tile_package(make_kernel_package, kernels)


@pytest.mark.parametrize("kernel, extents, dtype, tiles", TABLE)
def test_the_python_host_launches_the_ranked_specialization(py_tiles, fake_gpu, kernel, extents, dtype, tiles):
    x, z = fake_gpu.array(extents, dtype), fake_gpu.array(extents, dtype)
    launch = getattr(py_tiles, kernel)(x, partition(z))
    assert launch.tile_shapes == {"z": tiles}
    launch.sync_on(0)
    if all(extents):
        assert fake_gpu.launches[-1].symbol == expected_symbol(py_tiles.__name__, kernel, tiles, dtype)


def test_the_python_host_refuses_a_dtype_nobody_compiled_with_bt0308(py_tiles, fake_gpu):
    x, z = fake_gpu.array(1000, "f16"), fake_gpu.array(1000, "f16")
    with pytest.raises(TypeMismatchError) as info:
        py_tiles.generic(x, partition(z, [128]))
    assert str(info.value).startswith(
        "error[BT0308]: mismatched types: kernel `generic` has no specialization for these dtypes "
        "(`x` is f16, `z` is f16); it was compiled for T = f32; T = bf16")
    assert fake_gpu.queued == []


def test_the_python_host_takes_a_given_tile_shape_of_the_arrays_dtype(py_tiles, fake_gpu):
    x, z = fake_gpu.array(1000, "bf16"), fake_gpu.array(1000, "bf16")
    py_tiles.generic(x, partition(z, [128])).sync_on(0)
    assert fake_gpu.launches[-1].symbol.endswith("__t128_bf16")


def test_mixed_dtypes_of_one_variable_are_refused(py_tiles, fake_gpu):
    x, z = fake_gpu.array(1000, "bf16"), fake_gpu.array(1000, "f32")
    with pytest.raises(TypeMismatchError) as info:
        py_tiles.generic(x, partition(z))
    assert "(`x` is bf16, `z` is f32)" in str(info.value)


# ----------------------------------------------------------------------------- the C host

def c_records() -> list[dict]:
    out = []
    for name, (params, specs) in KERNELS.items():
        with_ptx = []
        for s in specs:
            symbol = spec_symbol(MODULE, name, s["tiles"]) + s.get("suffix", "")
            with_ptx.append({**s, "block": 128, "ptx": add_1d_ptx(symbol, s["tiles"]["z"][-1], 128)})
        out.append(tile_record(MODULE, name, params, with_ptx))
    return out


@pytest.fixture(scope="module")
def c_package(tmp_path_factory):
    """(root, the generated CMake project) of a package with the kernels above."""
    if CC is None:
        pytest.skip("needs a C compiler")
    root = tmp_path_factory.mktemp("choicepkg")
    manifest = support.write_package(root, support.example_kernels())
    add_tile_kernels(root, manifest, c_records())
    return root, emit(manifest, root / support.PACKAGE / "_buildtile", root / "build", None).cmake_source_dir


@pytest.fixture(scope="module")
def c_shim(c_package):
    _, project = c_package
    out = project.parent / "libshim.so"
    run([CC, "-std=c11", *WARNINGS, "-Wpedantic", "-O1", "-fPIC", "-shared", "-fvisibility=hidden",
         "-I", project / "include", "-I", project / "src",
         *sorted((project / "src").glob("*.c")), "-o", out, "-ldl", "-lpthread"])
    return out


@pytest.fixture
def c_host(c_shim, tmp_path, monkeypatch):
    from test_c_abi import HERE, FakeState

    fake = tmp_path / "libcuda.so.1"
    run([CC, "-std=c11", *WARNINGS, "-fPIC", "-shared", HERE / "fake_libcuda.c", "-o", fake])
    monkeypatch.setenv("BUILDTILE_LIBCUDA", str(fake))
    driver = ctypes.CDLL(str(fake))
    state = FakeState.in_dll(driver, "fake")
    state.cc_major, state.cc_minor, state.device_count = 9, 0, 1
    state.init_result = state.refuse_cubin = state.refuse_ptx = 0
    driver.fake_reset_observations()
    driver.fake_make_current(0, 1)
    copy = tmp_path / "libshim.so"
    shutil.copy(c_shim, copy)
    lib = ctypes.CDLL(str(copy))
    lib.example_kernels_last_error.restype = ctypes.c_char_p
    return lib, state


def c_launch(lib, kernel: str, x, z, tile_shape=None) -> int:
    from test_c_abi import DLTensor, config

    fn = getattr(lib, f"bt_{mangle(MODULE, kernel)}_tiled")
    fn.argtypes = [ctypes.POINTER(LaunchConfig), ctypes.POINTER(ctypes.c_int64),
                   ctypes.POINTER(DLTensor), ctypes.POINTER(DLTensor)]
    fn.restype = ctypes.c_int
    shape = None if tile_shape is None else (ctypes.c_int64 * len(tile_shape))(*tile_shape)
    return fn(ctypes.byref(config(0, 0, 0)), shape, ctypes.byref(x), ctypes.byref(z))


@pytest.mark.parametrize("kernel, extents, dtype, tiles", TABLE)
def test_the_c_host_launches_the_same_specialization(c_host, kernel, extents, dtype, tiles):
    lib, state = c_host
    x, z = tensor(0x7F0000000000, list(extents), dtype), tensor(0x7F1000000000, list(extents), dtype)
    status = c_launch(lib, kernel, x, z)
    assert status == 0, lib.example_kernels_last_error().decode()
    if all(extents):
        assert state.function.decode() == expected_symbol(MODULE, kernel, tiles, dtype)
        assert state.launches == 1


def test_the_c_host_refuses_a_dtype_nobody_compiled_as_python_does(c_host):
    lib, state = c_host
    x, z = tensor(0x7F0000000000, [1000], "f16"), tensor(0x7F0000100000, [1000], "f16")
    assert c_launch(lib, "generic", x, z, [128]) == 308
    assert lib.example_kernels_last_error().decode().startswith(
        "error[BT0308]: mismatched types: kernel `example_kernels.tiles.generic` has no specialization for these "
        "dtypes (`x` is f16, `z` is f16); it was compiled for T = f32; T = bf16")
    assert state.launches == 0


def test_the_c_host_takes_a_given_tile_shape_of_the_arrays_dtype(c_host):
    lib, state = c_host
    x, z = tensor(0x7F0000000000, [1000], "bf16"), tensor(0x7F0000100000, [1000], "bf16")
    assert c_launch(lib, "generic", x, z, [128]) == 0
    assert state.function.decode().endswith("__t128_bf16")


CPP_HOST = r"""
#include <cstdio>
#include <utility>
#include "example_kernels/kernels.hpp"

namespace tiles = example_kernels::tiles;
using buildtile::TileTensor;

static float* at(unsigned long long address) { return reinterpret_cast<float*>(address); }

int main()
{
    TileTensor<float, 1> x(at(0x7f0000000000), {128001}), z(at(0x7f1000000000), {128001});
    auto zp = buildtile::partition(std::move(z));         // no tile shape: the launcher picks
    std::printf("chosen at launch %d\n", zp.chosen_at_launch() ? 1 : 0);
    try {
        (void)zp.num_tiles();
        return 1;
    } catch (const buildtile::Error& e) {
        std::printf("%d|%s\n", e.code(), e.what());
    }
    auto [x2, z2] = tiles::pick1d(std::move(x), std::move(zp)).sync_on(nullptr);
    std::printf("back %lld %lld\n", static_cast<long long>(x2.shape()[0]), static_cast<long long>(z2.shape()[0]));
    return 0;
}
"""


def test_a_cpp_partition_without_a_tile_shape_launches_through_the_dispatcher(c_package, c_shim, tmp_path):
    from test_c_abi import CXX, HERE

    if CXX is None:
        pytest.skip("needs a C++ compiler")
    import subprocess

    include = c_package[0] / support.PACKAGE / "_buildtile" / "include"
    fake = tmp_path / "libcuda.so.1"
    run([CC, "-std=c11", *WARNINGS, "-fPIC", "-shared", HERE / "fake_libcuda.c", "-o", fake])
    source = tmp_path / "host.cpp"
    source.write_text(CPP_HOST)
    run([CXX, "-std=c++17", *WARNINGS, "-Wpedantic", "-I", include, source, c_shim,
         f"-Wl,-rpath,{c_shim.parent}", "-o", tmp_path / "host"])
    result = subprocess.run([tmp_path / "host"], capture_output=True, text=True, check=False,
                            env={"BUILDTILE_LIBCUDA": str(fake)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ("chosen at launch 1\n"
                             "600|error[BT0600]: a partition without a tile shape has its tiles chosen at launch\n"
                             "back 128001 128001\n")
