"""Tile launches on a real GPU, with hand-written PTX specializations instead of the Tile compiler.

The kernels (tests/tile_support.py) follow kernel ABI v1 and take their tile
shape as a constant, as compiled specializations do, so these tests pin
down the Tile host — the grid of one block per tile, ragged edges, the
specialization picked by the partition, dynamic shared memory past 48 KiB,
moves and fresh handles, streams — and the C shim's tile launchers,
independently of the compiler. Skipped without a GPU.
"""

from __future__ import annotations

import ctypes
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from buildtile.errors import AliasingError, ContractError, MovedError
from buildtile.interop.abi import mangle

pytestmark = pytest.mark.gpu
TESTS = Path(__file__).parents[1]


def _load(name: str):
    """A helper module of tests/ (loaded by path: tests/ need not be on sys.path)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, TESTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


tile_support = _load("tile_support")


def _arch() -> str:
    from buildtile.runtime.driver import get_driver

    _, (major, minor) = get_driver().device_properties(0)
    return f"sm_{major}{minor}"


def _cubin(ptx: str, arch: str) -> bytes:
    from cuda.bindings import nvjitlink

    data = ptx.encode()
    handle = nvjitlink.create(1, [f"-arch={arch}"])
    try:
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "tile.ptx")
        nvjitlink.complete(handle)
        out = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, out)
    finally:
        nvjitlink.destroy(handle)
    return bytes(out)


_count = iter(range(10**6))
SHARED = 64 * 1024


def _package(make_kernel_package, mode: str = "cubin"):
    """``add`` (tiles 128 and 256, block 128), ``double2d`` (tile (16, 32), block (32, 8)) and
    ``reverse`` (tile 128 through 64 KiB of dynamic shared memory); "cubin" for this GPU or "ptx" (JIT)."""
    arch = _arch()
    name = f"bttile_{mode}_{next(_count)}"
    module = f"{name}.ops"
    symbol = tile_support.spec_symbol

    def spec(kernel, tiles, block, ptx_of, **extra):
        # PTX for sm_80 links (or JIT-compiles) for any newer GPU
        text = ptx_of(symbol(module, kernel, tiles), "sm_80")
        images = {arch: _cubin(text, arch)} if mode == "cubin" else {}
        return dict(tiles=tiles, block=block, images=images, ptx=None if mode == "cubin" else ("sm_80", text),
                    **extra)

    kernels = {
        "add": dict(
            params=[("x", "tensor", "f32", 1), ("y", "tensor", "f32", 1), ("z", "tile_out", "f32", 1)],
            requires=["len(x) == len(z)", "len(y) == len(z)"],
            specializations=[
                spec("add", {"z": [t]}, 128, lambda s, target, t=t: tile_support.add_1d_ptx(s, t, 128, target))
                for t in (128, 256)
            ]),
        "double2d": dict(
            params=[("x", "tensor", "f32", 2), ("z", "tile_out", "f32", 2)],
            requires=["x.shape[0] == z.shape[0]", "x.shape[1] == z.shape[1]"],
            specializations=[spec("double2d", {"z": [16, 32]}, (32, 8),
                                  lambda s, target: tile_support.double_2d_ptx(s, (16, 32), (32, 8), target))]),
        "reverse": dict(
            params=[("x", "tensor", "f32", 1), ("z", "tile_out", "f32", 1)],
            requires=["len(x) == len(z)"],
            specializations=[spec("reverse", {"z": [128]}, 128,
                                  lambda s, target: tile_support.reverse_shared_ptx(s, 128, SHARED, target),
                                  shared_bytes=SHARED)]),
    }
    return tile_support.make_tile_package(make_kernel_package, kernels, name=name, targets=(arch,),
                                          ptx_target="sm_80")


@pytest.fixture
def tiles(make_kernel_package):
    return _package(make_kernel_package)


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    return torch


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _reversed_tiles(x: np.ndarray, tile: int) -> np.ndarray:
    """What ``reverse`` computes: each tile reversed, reading 0 past the end."""
    n = len(x)
    padded = np.zeros(-(-n // tile) * tile, np.float32)
    padded[:n] = x
    return padded.reshape(-1, tile)[:, ::-1].reshape(-1)[:n]


# ----------------------------------------------------------------------------- DeviceArray

@pytest.mark.parametrize("tile", [128, 256])
@pytest.mark.parametrize("n", [1, 127, 128, 129, 1000, 1_000_003])
def test_add_matches_numpy_at_ragged_sizes(tiles, tile, n):
    from buildtile.runtime import DeviceArray
    from buildtile.runtime.tile.handles import partition

    x, y = _rand(n, 1), _rand(n, 2)
    z = DeviceArray.empty(n)
    z.fill_bytes(0xFF)  # NaN everywhere a tile would be missed
    pending = tiles.add(DeviceArray.from_numpy(x), DeviceArray.from_numpy(y), partition(z, [tile]))
    assert pending.grid == (-(-n // tile), 1, 1)
    _, _, out = pending.sync_on(0)
    np.testing.assert_array_equal(out.array.to_numpy(stream=0), x + y)


def test_the_ptx_only_package_is_jit_compiled(make_kernel_package):
    from buildtile.runtime import DeviceArray
    from buildtile.runtime.tile.handles import partition

    tiles = _package(make_kernel_package, "ptx")
    x, y = _rand(1000, 3), _rand(1000, 4)
    _, _, z = tiles.add(DeviceArray.from_numpy(x), DeviceArray.from_numpy(y),
                        partition(DeviceArray.empty(1000), [256])).sync_on(0)
    np.testing.assert_array_equal(z.array.to_numpy(stream=0), x + y)
    assert all(f.image.jit for f in tiles.add._functions.values())


@pytest.mark.parametrize("shape", [(1, 1), (16, 32), (37, 100), (129, 65)])
def test_double2d_covers_ragged_tiles_on_both_axes(tiles, shape):
    from buildtile.runtime import DeviceArray
    from buildtile.runtime.tile.handles import partition

    x = _rand(shape, 5)
    z = DeviceArray.empty(shape)
    z.fill_bytes(0xFF)
    _, out = tiles.double2d(DeviceArray.from_numpy(x), partition(z, [16, 32])).sync_on(0)
    np.testing.assert_array_equal(out.array.to_numpy(stream=0), x + x)


@pytest.mark.parametrize("n", [128, 1000])
def test_dynamic_shared_memory_past_48k_is_provided(tiles, n):
    from buildtile.runtime import DeviceArray
    from buildtile.runtime.tile.handles import partition

    x = _rand(n, 6)
    _, z = tiles.reverse(DeviceArray.from_numpy(x), partition(DeviceArray.zeros(n), [128])).sync_on(0)
    np.testing.assert_array_equal(z.array.to_numpy(stream=0), _reversed_tiles(x, 128))
    function = next(iter(tiles.reverse._functions.values()))
    assert function.shared_limit == SHARED


# ----------------------------------------------------------------------------- PyTorch

def test_moves_and_fresh_handles_on_torch_tensors(tiles, torch):
    from buildtile.runtime.tile.handles import partition
    from buildtile.runtime.tile.handles import TileTensor, tensor

    n = 100_003
    x, y = tensor(torch.randn(n, device="cuda"), name="x"), tensor(torch.randn(n, device="cuda"), name="y")
    zp = partition(torch.full((n,), float("nan"), device="cuda"), [256])
    expected = x.array + y.array
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    x2, y2, z2 = tiles.add(x, y, zp).sync_on(stream)
    for moved in (lambda: x.shape, lambda: y.array, lambda: zp.tile_shape, lambda: x.__cuda_array_interface__,
                  lambda: y.__dlpack__()):
        with pytest.raises(MovedError, match="BT0382"):
            moved()
    stream.synchronize()  # sync_on named the stream; the host waits on it before reading
    assert all(isinstance(h, TileTensor) for h in (x2, y2, z2))
    assert torch.equal(z2.array, expected)
    # fresh handles go straight into the next launch, on the stream that orders them
    _, x3, y3 = tiles.add(z2, x2, y2.partition([128])).sync_on(stream)
    stream.synchronize()
    assert torch.equal(y3.array, expected + x3.array)


def test_tile_tensor_is_a_cuda_array_for_torch(tiles, torch):
    from buildtile.runtime.tile.handles import tensor

    t = torch.arange(10, dtype=torch.float32, device="cuda")
    h = tensor(t)
    assert torch.equal(torch.as_tensor(h, device="cuda"), t)  # through __cuda_array_interface__
    assert torch.equal(torch.from_dlpack(h), t)               # through __dlpack__


def test_refused_launches_move_nothing_and_queue_nothing(tiles, torch):
    from buildtile.runtime.tile.handles import partition
    from buildtile.runtime.tile.handles import is_moved, tensor

    n = 1000
    x, y = tensor(torch.randn(n, device="cuda")), tensor(torch.randn(n, device="cuda"))
    z = torch.full((n,), -7.0, device="cuda")
    with pytest.raises(ContractError, match=r"compiled for tile shapes \(128,\), \(256,\)"):
        tiles.add(x, y, partition(z, [64]))
    with pytest.raises(AliasingError, match="BT0502"):
        tiles.add(x, x, partition(z, [128]))
    with pytest.raises(AliasingError, match="BT0502"):
        tiles.add(x, y, partition(x.array, [128]))
    assert not is_moved(x) and not is_moved(y)
    torch.cuda.synchronize()
    assert bool((z == -7.0).all())


def test_default_stream_follows_torch(tiles, torch):
    from stream_hold import TorchHold, launched_on

    from buildtile.runtime.tile.handles import partition

    n = 70_001
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")
    stream = torch.cuda.Stream()

    def on_the_current_stream():
        with torch.cuda.stream(stream):
            tiles.add(a, b, partition(c, [128])).launch()  # stream=None: PyTorch's current stream

    written = launched_on(TorchHold(torch, stream), c, on_the_current_stream)
    np.testing.assert_array_equal(written, (a + b).cpu().numpy())


# ----------------------------------------------------------------------------- the C shim

CC = shutil.which("cc") or shutil.which("gcc")


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Config(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint32 * 3), ("shared_mem", ctypes.c_uint32), ("stream", ctypes.c_void_p)]


def _dl(array) -> _DLTensor:
    """A float32 DLTensor over a DeviceArray (it keeps its shape alive)."""
    t = _DLTensor(array.ptr, 2, array.device, len(array.shape), 2, 32, 1)
    t._shape = (ctypes.c_int64 * len(array.shape))(*array.shape)
    t.shape = ctypes.cast(t._shape, ctypes.POINTER(ctypes.c_int64))
    return t


@pytest.mark.skipif(CC is None, reason="needs a C compiler")
def test_c_tile_launchers_compute_the_grid_and_match_numpy(tmp_path):
    from buildtile.interop.c_abi import emit
    from buildtile.runtime import DeviceArray

    support = _load("c_abi_support")
    arch = _arch()
    module = "example_kernels.tiles"
    sym = tile_support.spec_symbol
    records = [
        tile_support.tile_record(module, "add", [("x", "tensor", "f32", 1), ("y", "tensor", "f32", 1),
                                                 ("z", "tile_out", "f32", 1)], [
            dict(tiles={"z": [t]}, block=128,
                 ptx=tile_support.add_1d_ptx(sym(module, "add", {"z": [t]}), t, 128)) for t in (128, 256)]),
        tile_support.tile_record(module, "reverse", [("x", "tensor", "f32", 1), ("z", "tile_out", "f32", 1)], [
            dict(tiles={"z": [128]}, block=128, shared_bytes=SHARED,
                 ptx=tile_support.reverse_shared_ptx(sym(module, "reverse", {"z": [128]}), 128, SHARED))]),
    ]
    manifest = support.write_package(tmp_path, [], targets=(arch,), ptx=True)
    manifest["ptx_target"] = "sm_80"
    tile_support.add_tile_kernels(tmp_path, manifest, records,
                                  link=_cubin)
    project = emit(manifest, tmp_path / support.PACKAGE / "_buildtile", tmp_path / "build", None).cmake_source_dir
    library = tmp_path / "libtiles.so"
    subprocess.run([CC, "-std=c11", "-O1", "-fPIC", "-shared", "-fvisibility=hidden", "-I", str(project / "include"),
                    "-I", str(project / "src"), *map(str, sorted((project / "src").glob("*.c"))), "-o", str(library),
                    "-ldl", "-lpthread"], check=True)
    lib = ctypes.CDLL(str(library))
    lib.example_kernels_last_error.restype = ctypes.c_char_p
    add_tiled = getattr(lib, f"bt_{mangle('example_kernels.tiles', 'add')}_tiled")
    reverse = getattr(lib, f"bt_{mangle('example_kernels.tiles', 'reverse')}__t128")
    cfg = _Config((ctypes.c_uint32 * 3)(0, 0, 0), 0, None)

    for n, tile in [(1, 128), (129, 128), (1000, 256), (100_003, 256)]:
        x, y = _rand(n, 7), _rand(n, 8)
        dx, dy, dz = DeviceArray.from_numpy(x), DeviceArray.from_numpy(y), DeviceArray.empty(n)
        dz.fill_bytes(0xFF)
        tile_shape = (ctypes.c_int64 * 1)(tile)
        status = add_tiled(ctypes.byref(cfg), tile_shape, ctypes.byref(_dl(dx)), ctypes.byref(_dl(dy)),
                           ctypes.byref(_dl(dz)))
        assert status == 0, lib.example_kernels_last_error().decode()
        np.testing.assert_array_equal(dz.to_numpy(stream=0), x + y)

    x = _rand(1000, 9)
    dx, dz = DeviceArray.from_numpy(x), DeviceArray.zeros(1000)
    assert reverse(ctypes.byref(cfg), ctypes.byref(_dl(dx)), ctypes.byref(_dl(dz))) == 0, \
        lib.example_kernels_last_error().decode()
    np.testing.assert_array_equal(dz.to_numpy(stream=0), _reversed_tiles(x, 128))

    status = add_tiled(ctypes.byref(cfg), (ctypes.c_int64 * 1)(64), ctypes.byref(_dl(dx)), ctypes.byref(_dl(dx)),
                       ctypes.byref(_dl(dz)))
    assert status == 600 and b"(128,), (256,)" in lib.example_kernels_last_error()
