"""Tile kernels in the C ABI: launchers per specialization, the dispatching launcher, the C++ layer.

Runs without a GPU, like tests/test_c_abi.py (with the ctypes helpers of tests/c_abi_support.py):
the checks run in the shim itself, and the grid and parameters it computes
reach tests/fake_libcuda.c, which records them.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import c_abi_support as support
import pytest
from c_abi_support import (
    CC,
    CXX,
    WARNINGS,
    DLTensor,
    LaunchConfig,
    config,
    fresh_fake_driver,
    run,
    tensor,
)
from tile_support import add_1d_ptx, add_tile_kernels, double_2d_ptx, tile_record

from buildtile.errors import BuildtileError, MovedError
from buildtile.interop.abi import kernel_params, mangle
from buildtile.interop.c_abi import emit

pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler")
needs_cxx = pytest.mark.skipif(CXX is None, reason="needs a C++ compiler")

PKG = support.PACKAGE
MODULE = "example_kernels.tiles"
A, B, C = 0x7F0000000000, 0x7F0000100000, 0x7F0000200000


def entry(kernel: str, tail: str = "") -> str:
    """The PTX entry name of a kernel of MODULE, with a specialization's tail (``add``, ``__t128``)."""
    return mangle(MODULE, kernel) + tail


def entry_of(symbol_tail: str) -> str:
    """``add__t128`` -> the PTX entry name of that specialization of ``add``."""
    kernel, _, shape = symbol_tail.partition("__")
    return entry(kernel, f"__{shape}")


ADD = "bt_" + entry("add")


def _eq(lhs: dict, rhs: dict) -> dict:
    return {"op": "cmp", "fn": "==", "lhs": lhs, "rhs": rhs}


def _len(param: str) -> dict:
    return {"op": "len", "param": param}


def tile_kernels() -> list[dict]:
    return [
        tile_record(MODULE, "add", [("x", "tensor", "f32", 1), ("y", "tensor", "f32", 1), ("z", "tile_out", "f32", 1)], [
            dict(tiles={"z": [128]}, block=128, ptx=add_1d_ptx(entry("add", "__t128"), 128, 128)),
            dict(tiles={"z": [256]}, block=128, ptx=add_1d_ptx(entry("add", "__t256"), 256, 128)),
        ], requires=[("len(x) == len(z)", _eq(_len("x"), _len("z"))), ("len(y) == len(z)", _eq(_len("y"), _len("z")))]),
        tile_record(MODULE, "double2d", [("x", "tensor", "f32", 2), ("z", "tile_out", "f32", 2)], [
            dict(tiles={"z": [16, 32]}, block=(32, 8), ptx=double_2d_ptx(entry("double2d", "__t16x32"), (16, 32), (32, 8))),
            dict(tiles={"z": [1, 32]}, block=32, ptx=add_1d_ptx(entry("double2d", "__t1x32"), 32, 32)),
        ]),
        tile_record(MODULE, "stats", [("x", "tensor", "f32", 2), ("alpha", "scalar", "f16"),
                                      ("m", "tile_out", "f32", 2), ("s", "tile_out", "f32", 1)], [
            dict(tiles={"m": [8, 8], "s": [8]}, block=64, shared_bytes=64 * 1024,
                 ptx=add_1d_ptx(entry("stats", "__t8x8_8"), 8, 64)),
            dict(tiles={"m": [16, 16], "s": [16]}, block=256, ptx=add_1d_ptx(entry("stats", "__t16x16_16"), 16, 256)),
        ], grid_param="m"),
        tile_record(MODULE, "fill3d", [("v", "tile_out", "f64", 3)], [
            dict(tiles={"v": [2, 4, 8]}, block=(8, 4, 2), ptx=add_1d_ptx(entry("fill3d", "__t2x4x8"), 8, 64)),
        ]),
        tile_record(MODULE, "fill5d", [("v", "tile_out", "i8", 5)], [
            dict(tiles={"v": [1, 2, 2, 4, 8]}, block=64, ptx=add_1d_ptx(entry("fill5d", "__t1x2x2x4x8"), 8, 64)),
        ]),
        # as kernels are compiled now: the trailing tile schedule after the declared parameters
        tile_record(MODULE, "sched", [("x", "tensor", "f32", 2), ("z", "tile_out", "f32", 2)], [
            dict(tiles={"z": [64, 64]}, block=256, shared_bytes=64 * 1024, schedule=True,
                 ptx=add_1d_ptx(entry("sched", "__t64x64"), 64, 256)),
        ]),
    ]


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    """(root, manifest, project): the example SIMT kernels plus the tile kernels above."""
    root = tmp_path_factory.mktemp("tilepkg")
    manifest = support.write_package(root, support.example_kernels())
    add_tile_kernels(root, manifest, tile_kernels())
    project = emit(manifest, root / PKG / "_buildtile", root / "build", None).cmake_source_dir
    return root, manifest, project


@pytest.fixture(scope="module")
def shim_path(package):
    _, _, project = package
    return support.compile_shim(project, project.parent / "libshim.so")


_SCALARS = {"f16": ctypes.c_uint16, "f32": ctypes.c_float, "i32": ctypes.c_int32}


class TileShim:
    """The shim's tile launchers with types: ``shim.add(cfg, x, y, z)`` (dispatcher: ``add_tiled(cfg,
    [128], x, y, z)``; one specialization: ``shim.launcher("add__t256")(cfg, x, y, z)``)."""

    def __init__(self, path, manifest: dict) -> None:
        self.lib = ctypes.CDLL(str(path))
        self.lib.example_kernels_last_error.restype = ctypes.c_char_p
        self.records = {k["name"]: k for k in manifest["kernels"] if k.get("kind") == "tile"}

    def _types(self, record: dict) -> list:
        return [_SCALARS[p["dtype"]] if p["kind"] == "scalar" else ctypes.POINTER(DLTensor) for p in record["params"]]

    def launcher(self, symbol_tail: str):
        kernel = symbol_tail.partition("__")[0]
        fn = getattr(self.lib, f"bt_{entry_of(symbol_tail)}")
        fn.argtypes = [ctypes.POINTER(LaunchConfig), *self._types(self.records[kernel])]
        fn.restype = ctypes.c_int
        return lambda cfg, *args: fn(_ref(cfg), *map(_ref, args))

    def tiled(self, kernel: str):
        fn = getattr(self.lib, f"bt_{entry(kernel)}_tiled")
        fn.argtypes = [ctypes.POINTER(LaunchConfig), ctypes.POINTER(ctypes.c_int64), *self._types(self.records[kernel])]
        fn.restype = ctypes.c_int

        def call(cfg, tile_shape, *args):
            shape = None if tile_shape is None else (ctypes.c_int64 * max(len(tile_shape), 1))(*tile_shape)
            return fn(_ref(cfg), shape, *map(_ref, args))
        return call

    def scheduled(self, kernel: str):
        fn = getattr(self.lib, f"bt_{entry(kernel)}_scheduled")
        fn.argtypes = [ctypes.POINTER(LaunchConfig), ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(TileSchedule),
                       *self._types(self.records[kernel])]
        fn.restype = ctypes.c_int

        def call(cfg, tile_shape, schedule, *args):
            shape = (ctypes.c_int64 * max(len(tile_shape), 1))(*tile_shape)
            return fn(_ref(cfg), shape, None if schedule is None else ctypes.byref(schedule), *map(_ref, args))
        return call

    @property
    def last_error(self) -> str:
        return self.lib.example_kernels_last_error().decode()


class TileSchedule(ctypes.Structure):
    """bt_tile_schedule (buildtile/abi.h)."""
    _fields_ = [("order", ctypes.c_int32), ("group", ctypes.c_int32), ("persistent", ctypes.c_int32)]


COMPILED_ORDER, ROW, GROUPED = 0, 1, 2


def _ref(x):
    return ctypes.byref(x) if isinstance(x, (DLTensor, LaunchConfig)) else x


@pytest.fixture
def shim(shim_path, package, tmp_path, monkeypatch):
    """A fresh copy of the shim whose driver is missing: a launch that passes every check returns 701."""
    monkeypatch.setenv("BUILDTILE_LIBCUDA", str(tmp_path / "no" / "libcuda.so.1"))
    copy = tmp_path / "libshim.so"
    shutil.copy(shim_path, copy)
    return TileShim(copy, package[1])


@pytest.fixture(scope="module")
def fake_driver_path(tmp_path_factory):
    return support.compile_fake_driver(tmp_path_factory.mktemp("fake") / "libcuda.so.1")


@pytest.fixture
def fake(fake_driver_path, package, shim_path, tmp_path, monkeypatch):
    """(shim, fake driver state) over tests/fake_libcuda.c, device 0 current (cc 9.0)."""
    _, state = fresh_fake_driver(fake_driver_path, monkeypatch, devices=2)
    copy = tmp_path / "libshim.so"
    shutil.copy(shim_path, copy)
    return TileShim(copy, package[1]), state


def tile_config(stream=None):
    """A configuration that leaves the grid to the launcher (zeros)."""
    return config(0, 0, 0, stream=stream)


def vectors(n=1000, *, z_len=None):
    return tensor(A, [n]), tensor(B, [n]), tensor(C, [n if z_len is None else z_len])


def expect_params(state, record: dict) -> None:
    sizes = {"ptr": 8, "i64": 8, "f32": 4, "f16": 2}
    flat = kernel_params(record["params"])
    state.param_count = len(flat)
    for i, p in enumerate(flat):
        state.param_sizes[i] = sizes[p.ctype]


def param(state, i: int, size: int = 8) -> int:
    return int.from_bytes(bytes(state.params[i])[:size], "little", signed=True)


# --------------------------------------------------------------------------- the generated files

def test_every_specialization_and_the_dispatcher_are_exported(shim_path):
    nm = run(["nm", "-D", "--defined-only", shim_path]).stdout
    exported = {line.split()[-1] for line in nm.splitlines() if " T " in line}
    tile = {name for name in exported if name.startswith("bt_" + mangle(MODULE, "")[:-1])}
    assert tile == {f"{ADD}__t128", f"{ADD}__t256", f"{ADD}_tiled",
                    f"bt_{entry('double2d', '__t16x32')}", f"bt_{entry('double2d', '__t1x32')}",
                    f"bt_{entry('double2d')}_tiled",
                    f"bt_{entry('stats', '__t8x8_8')}", f"bt_{entry('stats', '__t16x16_16')}",
                    f"bt_{entry('stats')}_tiled",
                    f"bt_{entry('fill3d', '__t2x4x8')}", f"bt_{entry('fill3d')}_tiled",
                    f"bt_{entry('fill5d', '__t1x2x2x4x8')}", f"bt_{entry('fill5d')}_tiled",
                    f"bt_{entry('sched', '__t64x64')}", f"bt_{entry('sched')}_tiled",
                    *(f"bt_{entry(k)}_scheduled" for k in ("add", "double2d", "stats", "fill3d", "fill5d", "sched"))}
    assert "bt_example_kernels_ops__vecadd" in exported  # SIMT kernels beside them (hand-made records)


def test_the_c_header_declares_the_launchers_and_tile_extents(package):
    root, _, _ = package
    header = (root / PKG / "_buildtile" / "include" / PKG / "kernels.h").read_text()
    assert (f"BUILDTILE_API int {ADD}_tiled(const bt_launch_config* cfg, const int64_t* tile_shape, "
            "const DLTensor* x, const DLTensor* y, const DLTensor* z);") in header
    assert f"BUILDTILE_API int {ADD}__t256(const bt_launch_config* cfg, const DLTensor* x" in header
    assert f"#define BT_{entry('stats').upper()}_TILE_EXTENTS 3" in header
    assert "compiled for tile shapes (128,), (256,)" in header


def test_each_specialization_embeds_its_own_images(package):
    root, manifest, project = package
    text = (project / "src" / "kernels.c").read_text()
    record = next(k for k in manifest["kernels"] if k["name"] == "add")
    for spec in record["tile"]["specializations"]:
        ptx = (root / PKG / "_buildtile" / spec["artifacts"]["ptx"]["path"]).read_text()
        assert f".visible .entry {spec['symbol']}(" in ptx
        assert f'"{spec["symbol"]}"' in text  # the entry the shim looks up


@pytest.mark.parametrize("edit, code, words", [
    (lambda r: r.pop("tile"), "BT0621", "has no `tile` object"),
    (lambda r: r["tile"].update(grid_param="x"), "BT0621", "tile.grid_param 'x' is not a tile.Out parameter"),
    (lambda r: r["tile"]["specializations"][0].update(tile_shapes={"z": [0]}), "BT0621", "expected 1 positive"),
    (lambda r: r["tile"]["specializations"][1].update(tile_shapes={"z": [128]}), "BT0621", "same tile shapes"),
    (lambda r: r["tile"]["specializations"][0].update(block=None), "BT0621", "needs its block shape"),
    (lambda r: r["params"][0].update(kind="slice"), "BT0621", "which tile kernels do not take"),
    (lambda r: r["tile"]["specializations"][1].update(symbol=r["tile"]["specializations"][0]["symbol"]),
     "BT0621", "share the PTX entry name"),
])
def test_a_malformed_tile_record_stops_the_emitter(package, tmp_path, edit, code, words):
    import json

    root, manifest, _ = package
    broken = json.loads(json.dumps(manifest))
    edit(next(k for k in broken["kernels"] if k["name"] == "add"))
    with pytest.raises(BuildtileError) as info:
        emit(broken, root / PKG / "_buildtile", tmp_path / "build", None)
    assert info.value.code == code and words in str(info.value)


# --------------------------------------------------------------------------- checks, without a GPU

T128 = "add__t128"
ADD_MISMATCH = "mismatched types: parameter `{}` of kernel `example_kernels.tiles.add` expects {}, got "


@pytest.mark.parametrize("make_args, words", [
    (lambda: (tensor(A, [8], "f64"), tensor(B, [8]), tensor(C, [8])),
     ADD_MISMATCH.format("x", "Tensor[f32, 1]") + "a f64 DLTensor of shape (8,) on cuda:0"),
    (lambda: (tensor(A, [8]), tensor(B, [8]), tensor(C, [2, 4])),
     ADD_MISMATCH.format("z", "tile.Out[f32, 1]") + "a f32 DLTensor of shape (2, 4)"),
    (lambda: (tensor(A, [8]), tensor(B, [8]), tensor(C, [8], strides=[2])),
     "(not contiguous: strides (2,) in elements; tile kernels take row-major contiguous tensors)"),
    (lambda: (tensor(A, [8], device=(1, 0)), tensor(B, [8]), tensor(C, [8])), "(the kernel reads GPU memory)"),
    (lambda: (tensor(A, [8]), tensor(B, [8], device=(2, 1)), tensor(C, [8])),
     "arguments of kernel `example_kernels.tiles.add` are on different devices"),
])
def test_wrong_arguments_are_bt0308(shim, make_args, words):
    assert shim.launcher(T128)(tile_config(), *make_args()) == 308
    assert shim.last_error.startswith("error[BT0308]: mismatched types: ") and words in shim.last_error


def test_a_transposed_2d_output_is_not_contiguous_but_a_transposed_input_is_read(shim):
    out = tensor(C, [4, 8], strides=[1, 4])
    assert shim.launcher("double2d__t16x32")(tile_config(), tensor(A, [4, 8]), out) == 308
    assert "(not contiguous: strides (1, 4) in elements;" in shim.last_error
    # an input is read through its strides: the checks pass (701: no driver here)
    x = tensor(A, [4, 8], strides=[1, 4])
    assert shim.launcher("double2d__t16x32")(tile_config(), x, tensor(C, [4, 8])) == 701
    # extents of 1 take any stride, as in the Python host
    assert shim.launcher("double2d__t16x32")(tile_config(), tensor(A, [1, 8]), tensor(C, [1, 8], strides=[99, 1])) == 701


def test_one_dltensor_passed_twice_is_bt0502(shim):
    x, y, z = vectors(8)
    assert shim.launcher(T128)(tile_config(), x, x, z) == 502
    assert ("cannot move the same DLTensor into `example_kernels.tiles.add` twice: it is passed as `x` and as `y`"
            in shim.last_error)
    assert shim.launcher(T128)(tile_config(), x, y, y) == 502
    assert ("cannot borrow `z` as mutable because it is also borrowed as immutable (as `y`): kernel "
            "`example_kernels.tiles.add` writes `z`, and the same DLTensor is passed as `y` and as `z`") in shim.last_error
    assert shim.last_error.endswith("= help: pass a separate buffer for `z`")


def test_an_output_overlapping_an_input_is_bt0502(shim):
    assert shim.launcher(T128)(tile_config(), tensor(A, [8]), tensor(B, [8]), tensor(A + 16, [8])) == 502
    assert "writes `z`, and `z` (bytes" in shim.last_error and "overlaps `x`" in shim.last_error


def test_requires_is_bt0600_with_the_values(shim):
    assert shim.launcher(T128)(tile_config(), *vectors(1000, z_len=999)) == 600
    assert ("kernel `example_kernels.tiles.add` requires `len(x) == len(z)` but len(x) = 1000, len(z) = 999"
            in shim.last_error)


def test_the_launch_configuration_is_checked(shim):
    add = shim.launcher(T128)
    assert add(None, *vectors()) == 600
    assert "got no launch configuration (cfg is NULL)" in shim.last_error
    assert add(config(4), *vectors()) == 600
    assert ("kernel `example_kernels.tiles.add` launches one block per tile of `z`, grid (8, 1, 1), but "
            "cfg->grid is (4, 1, 1)") in shim.last_error
    assert add(config(8), *vectors()) == 701  # the grid it computes is accepted
    assert add(tile_config(), *vectors()) == 701
    assert add(config(0), *vectors()) == 600  # (0, 1, 1) is neither


def test_a_grid_past_cuda_limits_is_bt0600(shim):
    far = 0x7E0000000000  # the output does not overlap the input
    n = 128 * 2**31
    assert shim.launcher(T128)(tile_config(), tensor(A, [n]), tensor(B, [n]), tensor(far, [n])) == 600
    assert ("kernel `example_kernels.tiles.add` needs 2147483648 tiles along axis 0 of `z` (shape (274877906944,), "
            "tile shape (128,)), but CUDA runs at most 2147483647 blocks along x") in shim.last_error


def test_an_empty_output_launches_nothing(shim):
    # every check passes and nothing needs the (missing) driver
    assert shim.launcher(T128)(tile_config(), *vectors(0)) == 0
    assert shim.last_error == ""


def test_the_dispatcher_refuses_a_tile_shape_nobody_compiled(shim):
    assert shim.tiled("add")(tile_config(), [64], *vectors()) == 600
    assert shim.last_error == (
        "error[BT0600]: launch contract violated: kernel `example_kernels.tiles.add` has no specialization for "
        "tile shape (64,) of `z`; it was compiled for tile shapes (128,), (256,)\n"
        "  = help: partition the output into tiles of a compiled shape, or add this shape to the kernel's "
        "specializations (`@tile.kernel(specialize=...)` or pyproject) and rebuild")
    # no tile shape: the dispatcher picks a compiled one, which passes every check (701: no driver here)
    assert shim.tiled("add")(tile_config(), None, *vectors()) == 701
    x, m, s = tensor(A, [40, 30]), tensor(B, [40, 30]), tensor(C, [40])
    assert shim.tiled("stats")(tile_config(), [16, 16, 8], x, 0, m, s) == 600
    assert ("no specialization for tile shapes m: (16, 16), s: (8,); it was compiled for (m: (8, 8), s: (8,)); "
            "(m: (16, 16), s: (16,))") in shim.last_error


def test_python_and_c_word_the_unknown_tile_shape_alike(shim, make_kernel_package, fake_gpu):
    from tile_support import make_tile_package

    from buildtile.errors import ContractError
    from buildtile.runtime.tile.handles import partition

    ops = make_tile_package(make_kernel_package, {"add": dict(
        params=[("x", "tensor", "f32", 1), ("y", "tensor", "f32", 1), ("z", "tile_out", "f32", 1)],
        specializations=[dict(tiles={"z": [128]}), dict(tiles={"z": [256]})])})
    with pytest.raises(ContractError) as info:
        ops.add(fake_gpu.array(10), fake_gpu.array(10), partition(fake_gpu.array(10), [64]))
    assert shim.tiled("add")(tile_config(), [64], *vectors()) == 600
    assert shim.last_error.replace("example_kernels.tiles.add", "add") == str(info.value)


# --------------------------------------------------------------------------- the launch, on the fake driver

@pytest.mark.parametrize("tile, symbol, grid", [(128, "add__t128", 8), (256, "add__t256", 4)])
def test_the_dispatcher_launches_the_matching_specialization_over_every_tile(fake, package, tile, symbol, grid):
    shim, state = fake
    record = shim.records["add"]
    expect_params(state, record)
    x, y, z = vectors(1000)
    assert shim.tiled("add")(tile_config(stream=0x55), [tile], x, y, z) == 0, shim.last_error
    assert state.function.decode() == entry_of(symbol)
    assert (tuple(state.grid), tuple(state.block), state.shared) == ((grid, 1, 1), (128, 1, 1), 0)
    assert state.stream == 0x55
    assert [param(state, i) for i in range(9)] == [A, 1000, 1, B, 1000, 1, C, 1000, 1]


@pytest.mark.parametrize("shape, grid", [((37, 100), (4, 3, 1)), ((32, 64), (2, 2, 1)), ((1, 1), (1, 1, 1))])
def test_two_dimensional_grids_cover_ragged_outputs(fake, shape, grid):
    shim, state = fake
    expect_params(state, shim.records["double2d"])
    rows, cols = shape
    assert shim.tiled("double2d")(tile_config(), [16, 32], tensor(A, list(shape)), tensor(C, list(shape))) == 0
    assert (tuple(state.grid), tuple(state.block)) == (grid, (32, 8, 1))
    assert [param(state, i) for i in range(10)] == [A, rows, cols, cols, 1, C, rows, cols, cols, 1]


def test_a_three_dimensional_grid_takes_axis_0_along_z(fake):
    shim, state = fake
    assert shim.tiled("fill3d")(tile_config(), [2, 4, 8], tensor(A, [3, 9, 17], "f64")) == 0, shim.last_error
    assert (tuple(state.grid), tuple(state.block)) == ((3, 3, 2), (8, 4, 2))


def test_a_five_dimensional_grid_folds_its_leading_axes_into_z(fake):
    from buildtile.runtime.tile.grid import tile_grid

    shim, state = fake
    shape = [3, 5, 3, 9, 17]
    assert shim.tiled("fill5d")(tile_config(), [1, 2, 2, 4, 8], tensor(A, shape, "i8")) == 0, shim.last_error
    # z counts the tiles of axes 0..2 (3 * 3 * 2), axis 2 fastest; the Python host agrees
    assert tuple(state.grid) == (3, 3, 18) == tile_grid(tuple(shape), (1, 2, 2, 4, 8))
@pytest.mark.parametrize("shape, tiles, grid", [
    ((1_000_000, 32), [1, 32], (1_000_000, 1, 1)),        # a million rows of [1, C]
    ((1_000_000, 20), [1, 32], (1_000_000, 1, 1)),        # ragged columns
    ((16 * 65535 + 1, 32), [16, 32], (65536, 1, 1)),      # 65,536 rows of tiles: was refused along y
    ((70000, 40000 * 32), [1, 32], (2**31 - 1, 2, 1)),    # 2.8e9 tiles: spills into y
])
def test_two_dimensional_grids_past_65535_rows_are_linearised(fake, shape, tiles, grid):
    from buildtile.runtime.tile.grid import tile_grid

    shim, state = fake
    far = 0x7E0000000000
    assert shim.tiled("double2d")(tile_config(), tiles, tensor(A, list(shape)), tensor(far, list(shape))) == 0, \
        shim.last_error
    assert tuple(state.grid) == grid == tile_grid(shape, tuple(tiles))   # the Python host's rule
    assert shim.launcher("double2d__t1x32" if tiles[0] == 1 else "double2d__t16x32")(
        config(*grid), tensor(A, list(shape)), tensor(far, list(shape))) == 0   # and that grid, given, is accepted


@pytest.mark.parametrize("shape", [(70000 * 2, 3 * 4, 8), (2, 70000 * 4, 16), (2 * 65535 + 2, 4 * 65535 + 1, 9),
                                   (3, 9, 17), (1, 1, 1)])
def test_three_dimensional_grids_agree_with_the_python_host(fake, shape):
    from buildtile.runtime.tile.grid import natural_grid, tile_counts, tile_grid

    shim, state = fake
    assert shim.tiled("fill3d")(tile_config(), [2, 4, 8], tensor(A, list(shape), "f64")) == 0, shim.last_error
    assert tuple(state.grid) == tile_grid(shape, (2, 4, 8))
    linearised = tile_grid(shape, (2, 4, 8)) != natural_grid(tile_counts(shape, (2, 4, 8)))
    assert linearised == (max(tile_counts(shape, (2, 4, 8))[:2]) > 65535)


@pytest.mark.parametrize("schedule, word", [
    (None, -1), (TileSchedule(COMPILED_ORDER, 0, 0), -1), (TileSchedule(ROW, 0, 0), 1),
    (TileSchedule(GROUPED, 0, 0), 8), (TileSchedule(GROUPED, 3, 0), 3),
])
def test_the_tile_schedule_is_the_last_kernel_parameter(fake, schedule, word):
    shim, state = fake
    expect_params(state, shim.records["sched"])
    state.param_count += 1
    state.param_sizes[10] = 8
    x, z = tensor(A, [1000, 3000]), tensor(0x7E0000000000, [1000, 3000])
    assert shim.scheduled("sched")(tile_config(), [64, 64], schedule, x, z) == 0, shim.last_error
    assert tuple(state.grid) == (47, 16, 1)             # one block per tile in every order
    assert param(state, 10) == word
    assert shim.tiled("sched")(tile_config(), [64, 64], x, z) == 0
    assert param(state, 10) == -1


def test_a_persistent_launch_is_one_wave_along_x(fake):
    from buildtile.runtime.tile.grid import persistent_grid

    shim, state = fake
    x, z = tensor(A, [1000, 3000]), tensor(0x7E0000000000, [1000, 3000])
    assert shim.scheduled("sched")(tile_config(), [64, 64], TileSchedule(GROUPED, 4, 1), x, z) == 0, shim.last_error
    assert tuple(state.grid) == (132 * 3, 1, 1) == persistent_grid((16, 47), 132, 256, 64 * 1024)  # as in Python
    small = tensor(0x7E0000000000, [100, 100])
    assert shim.scheduled("sched")(tile_config(), [64, 64], TileSchedule(ROW, 0, 1), tensor(A, [100, 100]), small) == 0
    assert tuple(state.grid) == (4, 1, 1)                # fewer tiles than a wave: one block each


@pytest.mark.parametrize("schedule, words", [
    (TileSchedule(7, 0, 0), "unknown tile order: `order` is 7"),
    (TileSchedule(-1, 0, 0), "unknown tile order: `order` is -1"),
    (TileSchedule(GROUPED, -2, 0), "`group` must be at least 1 (tile rows per band), got -2"),
    (TileSchedule(ROW, 4, 0), "`group` is an option of the grouped order, but `order` is 1"),
    (TileSchedule(ROW, 0, 2), "`persistent` is 1 or 0, got 2"),
])
def test_bad_schedules_are_bt0600_naming_the_option(shim, schedule, words):
    x, z = tensor(A, [100, 100]), tensor(0x7E0000000000, [100, 100])
    assert shim.scheduled("sched")(tile_config(), [64, 64], schedule, x, z) == 600
    assert words in shim.last_error and shim.last_error.startswith("error[BT0600]")


def test_a_schedule_is_refused_where_it_does_not_apply(shim):
    assert shim.scheduled("add")(tile_config(), [128], TileSchedule(GROUPED, 8, 0), *vectors()) == 600
    assert "the grouped order is an order of 2-D tile grids, but the tile shape has 1 axis" in shim.last_error
    x, z = tensor(A, [100, 100]), tensor(0x7E0000000000, [100, 100])
    assert shim.scheduled("double2d")(tile_config(), [16, 32], TileSchedule(ROW, 0, 0), x, z) == 600
    assert ("kernel `example_kernels.tiles.double2d` visits its tiles in the order it was compiled with, but the "
            "launch asks for another schedule") in shim.last_error
    assert shim.scheduled("double2d")(tile_config(), [16, 32], TileSchedule(COMPILED_ORDER, 0, 0), x, z) == 701


def test_the_grid_output_fixes_the_grid_and_shared_memory_past_48k_is_opted_into(fake):
    shim, state = fake
    expect_params(state, shim.records["stats"])
    x, m, s = tensor(A, [40, 30]), tensor(B, [40, 30]), tensor(C, [40])
    assert shim.tiled("stats")(tile_config(), [8, 8, 8], x, 0x3C00, m, s) == 0, shim.last_error  # alpha = 1.0 (f16 bits)
    assert tuple(state.grid) == (4, 5, 1)  # from m: ceil(30 / 8) along x, ceil(40 / 8) along y
    assert state.shared == 64 * 1024 and state.set_attribute_value == 64 * 1024
    assert param(state, 5, 2) == 0x3C00
    assert shim.tiled("stats")(tile_config(), [16, 16, 16], x, 0x3C00, m, s) == 0
    assert (tuple(state.grid), tuple(state.block), state.shared) == ((2, 3, 1), (256, 1, 1), 0)


def test_each_specialization_loads_its_own_image_once_per_context(fake):
    shim, state = fake
    for tile in (128, 256, 128, 256):
        assert shim.tiled("add")(tile_config(), [tile], *vectors()) == 0
    assert state.module_loads == 2 and state.launches == 4


# --------------------------------------------------------------------------- C++

CPP_TILE_HOST = r"""
#include <cstdio>
#include <utility>
#include "example_kernels/kernels.hpp"

namespace tiles = example_kernels::tiles;
using buildtile::TileTensor;

static float* at(unsigned long long address) { return reinterpret_cast<float*>(address); }

#define EXPECT_ERROR(expected, statement)                                                     \
    try {                                                                                    \
        statement;                                                                           \
        std::printf("no error from line %d\n", __LINE__);                                    \
        return 1;                                                                            \
    } catch (const buildtile::Error& e) {                                                    \
        std::printf("%d|%s\n", e.code(), e.what());                                          \
        if (e.code() != (expected))                                                          \
            return 2;                                                                        \
    }

int main()
{
    TileTensor<float, 1> x(at(0x7f0000000000), {1000}), y(at(0x7f0000100000), {1000});
    TileTensor<float, 1> z(at(0x7f0000200000), {1000});
    auto zp = buildtile::partition(std::move(z), {128});
    std::printf("tiles %lld\n", static_cast<long long>(zp.num_tiles()[0]));
    auto [x2, y2, z2] = tiles::add(std::move(x), std::move(y), std::move(zp)).sync_on(nullptr);
    std::printf("back %lld %lld %lld\n", static_cast<long long>(x2.shape()[0]),
                static_cast<long long>(y2.shape()[0]), static_cast<long long>(z2.shape()[0]));

    EXPECT_ERROR(382, (void)x.data())
    EXPECT_ERROR(382, (void)zp.tile_shape())
    EXPECT_ERROR(382, (void)z.dl())
    std::printf("moved %d %d %d\n", x.moved(), zp.moved(), x2.moved());

    // a tile shape nobody compiled: refused, and the tensors come back with cancel()
    auto pending = tiles::add(std::move(x2), std::move(y2), buildtile::partition(std::move(z2), {64}));
    EXPECT_ERROR(600, std::move(pending).sync_on(nullptr))
    auto [x3, y3, z3] = std::move(pending).cancel();
    EXPECT_ERROR(382, std::move(pending).sync_on(nullptr))

    // the output overlapping an input
    TileTensor<float, 1> alias(at(0x7f0000000000), {1000});
    EXPECT_ERROR(502, tiles::add(std::move(x3), std::move(y3), buildtile::partition(std::move(alias), {128})).sync_on(nullptr))

    // a refused partition leaves the tensor usable; a tile shape held in a std::array works too
    EXPECT_ERROR(600, buildtile::partition(std::move(z3), {0}))
    std::printf("still %lld\n", static_cast<long long>(z3.shape()[0]));
    const std::array<std::int64_t, 1> shape{250};
    auto zp3 = buildtile::partition(std::move(z3), shape);
    std::printf("array shape %lld\n", static_cast<long long>(zp3.num_tiles()[0]));

    // a schedule: checked when the partition is made, and passed to the launch
    TileTensor<float, 1> z4(at(0x7f0000200000), {1000});
    EXPECT_ERROR(600, buildtile::partition(std::move(z4), {128}, bt_tile_schedule{BT_TILE_ORDER_GROUPED, 8, 0}))
    EXPECT_ERROR(600, buildtile::partition(std::move(z4), {128}, bt_tile_schedule{BT_TILE_ORDER_ROW, 0, 3}))
    auto zp4 = buildtile::partition(std::move(z4), {128}, bt_tile_schedule{BT_TILE_ORDER_ROW, 0, 0});
    std::printf("order %d\n", static_cast<int>(zp4.schedule().order));
    TileTensor<float, 1> x4(at(0x7f0000000000), {1000}), y4(at(0x7f0000100000), {1000});
    EXPECT_ERROR(600, tiles::add(std::move(x4), std::move(y4), std::move(zp4)).sync_on(nullptr))
    return 0;
}
"""


def _include(package):
    root, _, _ = package
    return root / PKG / "_buildtile" / "include"


@needs_cxx
def test_cpp_tile_wrappers_compile_warning_free_as_cpp17(package, tmp_path):
    source = tmp_path / "host.cpp"
    source.write_text(CPP_TILE_HOST)
    run([CXX, "-std=c++17", *WARNINGS, "-Wpedantic", "-Wshadow", "-fsyntax-only", "-I", _include(package), source])


@needs_cxx
def test_cpp_moves_structured_bindings_and_errors_on_the_fake_driver(package, shim_path, fake_driver_path, tmp_path):
    source = tmp_path / "host.cpp"
    source.write_text(CPP_TILE_HOST)
    run([CXX, "-std=c++17", *WARNINGS, "-I", _include(package), source, shim_path,
         f"-Wl,-rpath,{shim_path.parent}", "-o", tmp_path / "host"])
    result = subprocess.run([tmp_path / "host"], capture_output=True, text=True, check=False,
                            env={"BUILDTILE_LIBCUDA": str(fake_driver_path)})
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "tiles 8\nback 1000 1000 1000\n" in out
    assert ("382|error[BT0382]: use of moved value: a TileTensor was moved into `example_kernels.tiles.add` "
            "(parameter `x`)\n  = help: use what it was moved into; a launch gives its tensors back from "
            ".sync_on(stream)") in out
    assert "382|error[BT0382]: use of moved value: a Partition was moved into `example_kernels.tiles.add` (parameter `z`)" in out
    assert "382|error[BT0382]: use of moved value: a TileTensor was moved into a partition (buildtile::partition)" in out
    assert "moved 1 1 0\n" in out
    assert "600|error[BT0600]: launch contract violated: kernel `example_kernels.tiles.add` has no specialization for tile shape (64,)" in out
    assert "382|error[BT0382]: use of moved value: a Partition was moved into the tensors returned by `sync_on` or `cancel`" in out
    assert "502|error[BT0502]: cannot borrow `z` as mutable because it is also borrowed as immutable (as `x`)" in out
    assert "600|error[BT0600]: tile extents must be at least 1, got tile shape (0,)\nstill 1000\narray shape 4\n" in out
    assert "600|error[BT0600]: the grouped order is an order of 2-D tile grids\n" in out
    assert "600|error[BT0600]: `persistent` is 1 or 0\norder 1\n" in out
    # this package's add predates the tile schedule: its launcher refuses one, as the Python host does
    assert ("600|error[BT0600]: launch contract violated: kernel `example_kernels.tiles.add` visits its tiles in the "
            "order it was compiled with, but the launch asks for another schedule") in out


MUST_NOT_COMPILE = {  # name: (main's body, words of the compiler's refusal)
    "copying a TileTensor": (
        "buildtile::TileTensor<float, 1> a(nullptr, {4});\n    auto b = a;\n    (void)b;",
        "deleted"),
    "copying a Partition": (
        ("auto p = buildtile::partition(buildtile::TileTensor<float, 1>(nullptr, {4}), {2});\n"
         "    auto q = p;\n    (void)q;"),
        "deleted"),
    "passing without std::move": (
        ("buildtile::TileTensor<float, 1> x(nullptr, {4}), y(nullptr, {4}), z(nullptr, {4});\n"
         "    auto zp = buildtile::partition(std::move(z), {2});\n"
         "    example_kernels::tiles::add(x, y, std::move(zp));"),
        "rvalue"),
    "a TileTensor of const elements": (
        "buildtile::TileTensor<const float, 1> a(nullptr, {4});\n    (void)a;",
        "owns its elements"),
}


@needs_cxx
@pytest.mark.parametrize("name", list(MUST_NOT_COMPILE))
def test_misuse_of_tile_tensors_does_not_compile(package, tmp_path, name):
    body, why = MUST_NOT_COMPILE[name]
    source = tmp_path / "misuse.cpp"
    source.write_text(f'#include <utility>\n#include "example_kernels/kernels.hpp"\nint main()\n{{\n    {body}\n}}\n')
    result = subprocess.run([CXX, "-std=c++17", "-fsyntax-only", "-I", str(_include(package)), str(source)],
                            capture_output=True, text=True, check=False)
    assert result.returncode != 0, f"{name} compiled"
    assert why in result.stderr, result.stderr


def test_the_moved_status_is_bt0382_in_every_host():
    from test_c_abi import abi_enum

    assert f"BT{abi_enum()['BT_ERR_MOVED']:04d}" == MovedError.code == "BT0382"
