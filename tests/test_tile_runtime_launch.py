"""The Python host of Tile kernels on a fake GPU: partitions, checks, grids, packing, streams.

Ownership (moves, BT0382) has its own file, tests/test_tile_runtime_moves.py; the same kernels on a
real GPU are in tests/gpu/test_tile_runtime.py.
"""

from __future__ import annotations

import gc
import struct
import warnings

import pytest
from tile_support import TILE_KERNELS, make_tile_package

from buildtile.errors import (
    AliasingError,
    BuildtileError,
    ContractError,
    MovedError,
    NoImageError,
    TypeMismatchError,
)
from buildtile.interop.abi import PARAM_KINDS, kernel_params
from buildtile.runtime.testing import FakeCudaArray
from buildtile.runtime.tile.kernel import TileKernel
from buildtile.runtime.tile.launch import PendingLaunch
from buildtile.runtime.tile.grid import tile_grid
from buildtile.runtime.tile.handles import Partition, partition
from buildtile.runtime.tile.handles import TileTensor, is_moved, tensor


@pytest.fixture
def tiles(make_kernel_package, fake_gpu):
    """A package with TILE_KERNELS (fake sm_90 cubins, PTX for sm_80) on a fake GPU."""
    return make_tile_package(make_kernel_package, TILE_KERNELS)


def refused(fake_gpu, exc_type, fn, *args, **kwargs) -> str:
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    assert fake_gpu.queued == []
    return str(info.value)


def vectors(fake_gpu, n=1000):
    return fake_gpu.array(n), fake_gpu.array(n), fake_gpu.array(n)


def unpack(record, fmt: str) -> tuple:
    return struct.unpack_from(fmt, record.params)


# ----------------------------------------------------------------------------- partitions

def test_partition_counts_ragged_tiles_per_axis(fake_gpu):
    p = partition(fake_gpu.array(1000), [128])
    assert isinstance(p, Partition)
    assert (p.shape, p.tile_shape, p.num_tiles) == ((1000,), (128,), (8,))
    assert partition(fake_gpu.array((37, 100)), (16, 32)).num_tiles == (3, 4)
    assert partition(fake_gpu.array(1024), 128).num_tiles == (8,)  # an int for 1-D


def test_tile_grid_runs_the_last_axis_along_x():
    assert tile_grid((1000,), (128,)) == (8, 1, 1)
    assert tile_grid((37, 100), (16, 32)) == (4, 3, 1)
    assert tile_grid((3, 9, 17), (2, 4, 8)) == (3, 3, 2)
    assert tile_grid((), ()) == (1, 1, 1)
    assert tile_grid((0, 5), (4, 4)) == (2, 0, 1)


@pytest.mark.parametrize("tile_shape, words", [
    ([128, 2], "cannot cut a 1-D array of shape (1000,) into 2-D tiles (128, 2)"),
    ([0], "tile extents must be at least 1, got tile shape (0,)"),
    ([-4], "at least 1"),
    ([True], "a tile shape is a list of ints"),
    ([1.5], "a tile shape is a list of ints"),
    ("128", "a tile shape is a list of ints"),
])
def test_partition_refuses_bad_tile_shapes_with_bt0600(fake_gpu, tile_shape, words):
    t = tensor(fake_gpu.array(1000))
    with pytest.raises(ContractError) as info:
        partition(t, tile_shape)
    assert info.value.code == "BT0600" and words in str(info.value)
    assert not is_moved(t)  # a refused partition moves nothing


def test_partition_needs_an_array_and_is_not_repartitioned(fake_gpu):
    with pytest.raises(TypeMismatchError, match="a TileTensor wraps a CUDA array, got int 7"):
        partition(7, [1])
    p = partition(fake_gpu.array(10), [4])
    with pytest.raises(ContractError, match="cannot partition a partition again"):
        partition(p, [2])
    assert p.into_tensor().shape == (10,)


# ----------------------------------------------------------------------------- TileTensor

def test_tile_tensor_is_a_transparent_stand_in_for_its_array(fake_gpu):
    a = fake_gpu.array((4, 5), "f64")
    t = tensor(a, name="a")
    assert t.array is a and t.name == "a"
    assert t.shape == (4, 5) and t.typestr == "<f8"  # other attributes are the array's
    assert t.__cuda_array_interface__ == a.__cuda_array_interface__
    assert tensor(t) is t
    assert "`a`" in repr(t) and "(4, 5)" in repr(t)


def test_tile_tensor_exports_dlpack_of_its_array(fake_gpu):
    from buildtile.runtime.testing import FakeDLPackArray

    producer = FakeDLPackArray(fake_gpu.allocate(40), (10,))
    t = tensor(producer)
    assert t.__dlpack_device__() == (2, 0)
    capsule = t.__dlpack__(stream=None)
    assert type(capsule).__name__ == "PyCapsule" and producer.exported == 1


def test_tile_tensor_refuses_what_is_not_an_array_and_cannot_be_copied(fake_gpu):
    import copy
    import pickle

    with pytest.raises(TypeMismatchError) as info:
        tensor([1.0, 2.0])
    assert info.value.code == "BT0308" and "got list" in str(info.value)
    t = tensor(fake_gpu.array(4))
    for attempt in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match="cannot be copied"):
            attempt(t)


# ----------------------------------------------------------------------------- launching

def test_calling_checks_and_returns_a_pending_launch_that_queues_nothing(tiles, fake_gpu):
    x, y, z = vectors(fake_gpu)
    pending = tiles.add(tensor(x), tensor(y), partition(z, [128]))
    assert isinstance(pending, PendingLaunch)
    assert (pending.grid, pending.block, pending.shared_mem) == ((8, 1, 1), (128, 1, 1), 0)
    assert pending.tile_shapes == {"z": (128,)}
    assert fake_gpu.queued == []
    assert "pending tile launch of add" in repr(pending)
    pending.cancel()


def test_sync_on_enqueues_on_the_stream_and_returns_fresh_handles(tiles, fake_gpu):
    x, y, z = vectors(fake_gpu)
    hx, hy = tensor(x), tensor(y)
    out = tiles.add(hx, hy, partition(z, [128])).sync_on(7)
    assert len(out) == 3 and all(isinstance(h, TileTensor) for h in out)
    assert [h.array for h in out] == [x, y, z]
    assert out[0] is not hx and out[1] is not hy
    record = fake_gpu.launches[-1]
    assert record.symbol == tiles.add.signature.specializations[0].symbol
    assert (record.grid, record.block, record.shared_mem, record.stream) == ((8, 1, 1), (128, 1, 1), 0, 7)
    # kernel ABI v1: each tensor as pointer, shape, strides (elements)
    assert unpack(record, "<QqqQqqQqq") == (x.ptr, 1000, 1, y.ptr, 1000, 1, z.ptr, 1000, 1)


def test_the_partition_tile_shape_picks_the_specialization(tiles, fake_gpu):
    x, y, z = vectors(fake_gpu)
    tiles.add(x, y, partition(z, [256])).sync_on(None)
    record = fake_gpu.launches[-1]
    assert record.symbol.endswith("3add__t256")
    assert (record.grid, record.block) == ((4, 1, 1), (256, 1, 1))


def test_a_tile_shape_that_was_not_compiled_is_bt0600_listing_the_compiled_ones(tiles, fake_gpu):
    x, y, z = vectors(fake_gpu)
    hx = tensor(x)
    text = refused(fake_gpu, ContractError, tiles.add, hx, y, partition(z, [64]))
    assert ("launch contract violated: kernel `add` has no specialization for tile shape (64,) of `z`; "
            "it was compiled for tile shapes (128,), (256,)") in text
    assert "specialize=" in text
    assert not is_moved(hx)


def test_several_outputs_select_by_every_tile_shape(tiles, fake_gpu):
    x, m, s = fake_gpu.array((40, 30)), fake_gpu.array((40, 30)), fake_gpu.array(40)
    tiles.row_stats(x, partition(m, [16, 16]), partition(s, [16])).sync_on(0)
    assert fake_gpu.launches[-1].symbol.endswith("__t16x16_16")
    assert fake_gpu.launches[-1].grid == (2, 3, 1)  # from m, the grid parameter
    fake_gpu.calls.clear()
    text = refused(fake_gpu, ContractError, tiles.row_stats, x, partition(m, [16, 16]), partition(s, [8]))
    assert "no specialization for tile shapes m: (16, 16), s: (8,)" in text
    assert "compiled for (m: (8, 8), s: (8,)); (m: (16, 16), s: (16,))" in text


@pytest.mark.parametrize("shape, tiles_, grid", [
    ((37, 100), (16, 32), (4, 3, 1)),   # ragged on both axes
    ((32, 64), (16, 32), (2, 2, 1)),    # exact
    ((1, 1), (16, 32), (1, 1, 1)),
])
def test_two_dimensional_grids_cover_ragged_shapes(tiles, fake_gpu, shape, tiles_, grid):
    a, b = fake_gpu.array(shape), fake_gpu.array(shape)
    tiles.add2d(a, partition(b, tiles_)).sync_on(0)
    record = fake_gpu.launches[-1]
    assert (record.grid, record.block) == (grid, (32, 8, 1))
    rows, cols = shape
    assert unpack(record, "<Qqqqq Qqqqq".replace(" ", "")) == (a.ptr, rows, cols, cols, 1, b.ptr, rows, cols, cols, 1)


def test_a_three_dimensional_grid_takes_axis_0_along_z(tiles, fake_gpu):
    tiles.fill3d(partition(fake_gpu.array((3, 9, 17), "f64"), [2, 4, 8])).sync_on(0)
    assert fake_gpu.launches[-1].grid == (3, 3, 2)


def test_a_grid_past_65535_tiles_along_y_is_linearised(tiles, fake_gpu, monkeypatch):
    monkeypatch.setattr(fake_gpu, "pointer_memory", lambda ptr: ("device", 0))  # too large to back
    rows = 16 * 65535 + 1
    a = FakeCudaArray(0x7E00_0000_0000, (rows, 32))
    b = FakeCudaArray(0x7D00_0000_0000, (rows, 32))
    tiles.add2d(a, partition(b, [16, 32])).sync_on(0)
    assert fake_gpu.launches[-1].grid == (65536, 1, 1)   # tests/test_tile_grid.py has the rule


def test_an_empty_output_launches_nothing_and_gives_the_tensors_back(tiles, fake_gpu):
    x, y, z = vectors(fake_gpu, 0)
    out = tiles.add(x, y, partition(z, [128])).sync_on(3)
    assert fake_gpu.launches == [] and [h.array for h in out] == [x, y, z]


def test_scalars_are_packed_in_place_and_returned_as_given(tiles, fake_gpu):
    x, z = fake_gpu.array(100), fake_gpu.array(100)
    out = tiles.scale(x, 2.5, 7, partition(z, [64])).sync_on(0)
    assert out[1:3] == (2.5, 7)
    record = fake_gpu.launches[-1]
    assert record.grid == (2, 1, 1)
    assert unpack(record, "<Qqq f i Qqq".replace(" ", "")) == (x.ptr, 100, 1, 2.5, 7, z.ptr, 100, 1)
    assert len(record.params) == tiles.scale.signature.layout.size
    assert [p.ctype for p in kernel_params(tiles.scale.record["params"])] == [
        "ptr", "i64", "i64", "f32", "i32", "ptr", "i64", "i64"]


def test_shared_memory_past_48k_is_opted_into_once(tiles, fake_gpu):
    for _ in range(2):
        tiles.big_shared(partition(fake_gpu.array(10000), [4096])).sync_on(0)
    symbol = tiles.big_shared.signature.specializations[0].symbol
    assert [c for c in fake_gpu.calls if c[0] == "set_dynamic_shared"] == [("set_dynamic_shared", (symbol, 96 * 1024))]
    assert fake_gpu.launches[-1].shared_mem == 96 * 1024 and fake_gpu.launches[-1].grid == (3, 1, 1)


def test_each_specialization_loads_its_image_once_per_device(tiles, fake_gpu):
    for tile in (128, 256, 128, 256):
        tiles.add(*vectors(fake_gpu)[:2], partition(fake_gpu.array(1000), [tile])).sync_on(0)
    loads = [c[1] for c in fake_gpu.calls if c[0] == "load_module"]
    assert loads == [(0, "cubin for sm_90 of kernel `add`")] * 2
    assert len({image for _, image in fake_gpu.loaded_images}) == 2


def test_a_newer_gpu_jit_compiles_the_specializations_ptx(tiles, fake_gpu):
    fake_gpu.capabilities[0] = (12, 0)
    tiles.add(*vectors(fake_gpu)[:2], partition(fake_gpu.array(1000), [256])).sync_on(0)
    _, image = fake_gpu.loaded_images[0]
    assert image.startswith(b"// fake PTX of ") and b"3add__t256" in image


def test_no_usable_image_is_refused_at_the_call_before_anything_moves(tiles, fake_gpu):
    fake_gpu.capabilities[0] = (7, 5)
    hz = partition(fake_gpu.array(1000), [128])
    text = refused(fake_gpu, NoImageError, tiles.add, *vectors(fake_gpu)[:2], hz)
    assert "BT0610" in text and "sm_90 (cubin), PTX for sm_80" in text
    assert not is_moved(hz)


def test_min_compute_capability_is_checked_at_the_call(tiles, fake_gpu):
    text = refused(fake_gpu, ContractError, tiles.sm100_only, partition(fake_gpu.array(10), [128]))
    assert "needs compute capability 10.0 or newer, but device 0 is 9.0" in text


# ----------------------------------------------------------------------------- argument checks

ADD = "mismatched types: parameter `{}` of kernel `add` expects {}, got "


@pytest.mark.parametrize("make_args, words", [
    (lambda g: (g.array(1000, "f64"), g.array(1000), partition(g.array(1000), [128])),
     ADD.format("x", "Tensor[f32, 1]") + "float64 array of shape (1000,)"),
    (lambda g: (g.array((10, 100)), g.array(1000), partition(g.array(1000), [128])),
     ADD.format("x", "Tensor[f32, 1]") + "float32 array of shape (10, 100)"),
    (lambda g: (g.array(1000), g.array(1000), partition(g.array(2000).view(0, (1000,), (8,)), [128])),
     "(not contiguous: strides (2,) in elements; tile kernels take row-major contiguous tensors)"),
    (lambda g: (g.array(1000), g.array(1000), partition(g.array(1000, readonly=True), [128])),
     "(it is read-only, and the kernel writes it)"),
    (lambda g: (g.array(1000), g.array(1000), g.array(1000)),
     ADD.format("z", "tile.Out[f32, 1]") + "buildtile.runtime.testing.FakeCudaArray "
     "(an output must be partitioned into tiles)\n  = help: partition it: `tile.partition(z, tile_shape)` "
     "with a compiled tile shape ([128], [256])"),
    (lambda g: (g.array(1000), g.array(1000), tensor(g.array(1000))), "got a TileTensor (an output must be partitioned"),
    (lambda g: (partition(g.array(1000), [128]), g.array(1000), partition(g.array(1000), [128])),
     "got a partition (tile shape (128,))"),
    (lambda g: (1.0, g.array(1000), partition(g.array(1000), [128])), "got float 1.0 (not a GPU array)"),
    (lambda g: (g.array(1000), g.array(1000, device=1), partition(g.array(1000), [128])),
     "arguments of kernel `add` are on different devices: `x` is on cuda:0, `y` is on cuda:1"),
    (lambda g: (g.array(1000), g.array(1000)),
     "kernel `add` takes 3 arguments (x: Tensor[f32, 1], y: Tensor[f32, 1], z: tile.Out[f32, 1]), got 2"),
])
def test_wrong_arguments_are_bt0308(tiles, fake_gpu, make_args, words):
    fake_gpu.capabilities.append((9, 0))
    args = make_args(fake_gpu)
    text = refused(fake_gpu, TypeMismatchError, tiles.add, *args)
    assert text.startswith("error[BT0308]: mismatched types: ")
    assert words in text
    assert not any(is_moved(a) for a in args if isinstance(a, (TileTensor, Partition)))


def test_host_arrays_are_refused(tiles, fake_gpu):
    import numpy as np

    text = refused(fake_gpu, TypeMismatchError, tiles.add, np.zeros(1000, np.float32), fake_gpu.array(1000),
                   partition(fake_gpu.array(1000), [128]))
    assert "NumPy array of shape (1000,) in host memory (the kernel reads GPU memory)" in text
    # a CUDA array interface whose pointer the driver places in host memory
    host = FakeCudaArray(0x1000, (1000,))
    text = refused(fake_gpu, TypeMismatchError, tiles.add, host, fake_gpu.array(1000),
                   partition(fake_gpu.array(1000), [128]))
    assert "expects Tensor[f32, 1] in GPU memory, but the pointer of the float32 array passed is in host memory" in text


def test_a_scalar_that_does_not_fit_is_bt0308(tiles, fake_gpu):
    x, z = fake_gpu.array(100), fake_gpu.array(100)
    text = refused(fake_gpu, TypeMismatchError, tiles.scale, x, 1.0, 2**40, partition(z, [64]))
    assert "parameter `n` of kernel `scale` expects i32, got int 1099511627776" in text
    text = refused(fake_gpu, TypeMismatchError, tiles.scale, x, tensor(z), 1, partition(z, [64]))
    assert "parameter `alpha` of kernel `scale` expects f32, got a TileTensor" in text


def test_requires_is_bt0600_with_the_values(tiles, fake_gpu):
    x, y, z = fake_gpu.array(999), fake_gpu.array(1000), fake_gpu.array(1000)
    text = refused(fake_gpu, ContractError, tiles.add, x, y, partition(z, [128]))
    assert "kernel `add` requires `len(x) == len(z)` but len(x) = 999, len(z) = 1000" in text
    a, b = fake_gpu.array((4, 8)), fake_gpu.array((4, 9))
    text = refused(fake_gpu, ContractError, tiles.add2d, a, partition(b, [16, 32]))
    assert "requires `a.shape[1] == b.shape[1]` but a.shape[1] = 8, b.shape[1] = 9" in text


@pytest.mark.parametrize("make_args, words", [
    (lambda g, x: (x, x, partition(g.array(1000), [128])),
     "cannot move the same array into `add` twice: it is passed as `x` and as `y`"),
    (lambda g, x: (x, g.array(1000), partition(x, [128])),
     ("cannot borrow `z` as mutable because it is also borrowed as immutable (as `x`): kernel `add` writes `z`, "
      "and the same array is passed as `x` and as `z`")),
    (lambda g, x: (x.view(1, (1000,)), g.array(1000), partition(x.view(0, (1000,)), [128])),
     ("cannot borrow `z` as mutable because it is also borrowed as immutable (as `x`): kernel `add` writes `z`, "
      "and `z` (bytes")),
])
def test_a_tensor_passed_twice_or_overlapping_an_output_is_bt0502(tiles, fake_gpu, make_args, words):
    x = fake_gpu.array(1001)
    x.shape = (1000,)
    text = refused(fake_gpu, AliasingError, tiles.add, *make_args(fake_gpu, x))
    assert text.startswith("error[BT0502]: ") and words in text


def test_the_same_handle_twice_is_bt0502_and_moves_nothing(tiles, fake_gpu):
    hx = tensor(fake_gpu.array(1000))
    text = refused(fake_gpu, AliasingError, tiles.add, hx, hx, partition(fake_gpu.array(1000), [128]))
    assert "cannot move the same TileTensor into `add` twice: it is passed as `x` and as `y`" in text
    assert not is_moved(hx)
    m = partition(fake_gpu.array((40, 30)), [8, 8])
    text = refused(fake_gpu, AliasingError, tiles.row_stats, fake_gpu.array((40, 30)), m, m)
    assert ("cannot borrow `m` as mutable more than once: kernel `row_stats` writes `m`, and the same "
            "Partition is passed as `m` and as `s`") in text
    assert not is_moved(m)


def test_inputs_may_overlap_each_other(tiles, fake_gpu):
    x = fake_gpu.array(1001)
    a, b = x.view(0, (1000,)), x.view(1, (1000,))
    tiles.add(a, b, partition(fake_gpu.array(1000), [128])).sync_on(0)
    assert len(fake_gpu.launches) == 1


# ----------------------------------------------------------------------------- pending launches

def test_a_pending_launch_runs_once(tiles, fake_gpu):
    pending = tiles.add(*vectors(fake_gpu)[:2], partition(fake_gpu.array(1000), [128]))
    pending.launch()
    with pytest.raises(MovedError) as info:
        pending.sync_on(0)
    assert info.value.code == "BT0382"
    assert "this launch of `add` was already enqueued" in str(info.value)
    with pytest.raises(MovedError, match="already enqueued"):
        pending.cancel()
    assert len(fake_gpu.launches) == 1


def test_cancel_gives_the_tensors_back_without_launching(tiles, fake_gpu):
    x, y, z = vectors(fake_gpu)
    out = tiles.add(tensor(x), y, partition(z, [128])).cancel()
    assert [h.array for h in out] == [x, y, z] and fake_gpu.launches == []
    assert isinstance(out[2], TileTensor)


def test_a_failed_enqueue_keeps_the_launch_pending(tiles, fake_gpu):
    from buildtile.errors import CudaError

    pending = tiles.add(*vectors(fake_gpu)[:2], partition(fake_gpu.array(1000), [128]))
    fake_gpu.fail_launch = CudaError("CUDA driver call cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")
    with pytest.raises(CudaError):
        pending.sync_on(0)
    fake_gpu.fail_launch = None
    pending.sync_on(0)
    assert len(fake_gpu.launches) == 1


def test_dropping_a_pending_launch_warns_that_its_tensors_are_lost(tiles, fake_gpu):
    pending = tiles.add(*vectors(fake_gpu)[:2], partition(fake_gpu.array(1000), [128]))
    with pytest.warns(RuntimeWarning, match="dropped without being enqueued"):
        del pending  # the last reference: collected at once


def test_stream_forms_and_producer_streams(tiles, fake_gpu):
    class ProtocolStream:
        def __cuda_stream__(self):
            return (0, 0xABC)

    for given, expected in [(None, 0), (9, 9), (ProtocolStream(), 0xABC)]:
        tiles.add(*vectors(fake_gpu)[:2], partition(fake_gpu.array(1000), [128])).sync_on(given)
        assert fake_gpu.launches[-1].stream == expected
    pending = tiles.add(*vectors(fake_gpu)[:2], partition(fake_gpu.array(1000), [128]))
    with pytest.raises(TypeMismatchError, match="`stream=` does not accept builtins.str"):
        pending.sync_on("default")
    pending.cancel()  # a refused stream leaves the launch pending
    x = fake_gpu.array(1000, stream=0x77)
    tiles.add(x, fake_gpu.array(1000), partition(fake_gpu.array(1000), [128])).sync_on(0x99)
    assert [c for c in fake_gpu.calls if c[0] == "stream_wait"] == [("stream_wait", (0x99, 0x77))]


def test_dlpack_arguments_are_synchronised_onto_the_launch_stream(tiles, fake_gpu):
    from buildtile.runtime.testing import FakeDLPackArray

    x = FakeDLPackArray(fake_gpu.allocate(4000), (1000,))
    tiles.add(x, fake_gpu.array(1000), partition(fake_gpu.array(1000), [128])).sync_on(0x42)
    # checked (and exported) on the default stream, launched on 0x42: 0x42 waits for the default stream
    assert [c for c in fake_gpu.calls if c[0] == "stream_wait"] == [("stream_wait", (0x42, 0))]
    assert x.released == 1  # the capsule was released


# ----------------------------------------------------------------------------- the handle and its manifest

def test_tile_kernels_take_no_grid(tiles, fake_gpu):
    assert isinstance(tiles.add, TileKernel) and tiles.add.kind == "tile"
    with pytest.raises(ContractError, match="takes no launch configuration"):
        tiles.add[4]
    assert tiles.add.tile_shapes == [{"z": (128,)}, {"z": (256,)}]
    assert "tile kernel" in repr(tiles.add)


def test_simt_and_tile_handles_refuse_each_others_records(make_kernel_package, fake_gpu):
    from buildtile.runtime.kernel import Kernel

    module = make_tile_package(make_kernel_package, {"add": TILE_KERNELS["add"]})
    simt_view = Kernel(module.add.pyfunc)
    with pytest.raises(BuildtileError, match="declared as a simt kernel .* lists it as 'tile'") as info:
        simt_view.prepare(grid=1)
    assert info.value.code == "BT0620"
    ops = make_kernel_package("from buildtile import simt\n@simt.kernel\ndef k(a):\n    pass\n",
                              {"k": dict(params=[("a", "disjoint_slice", "f32")])})
    with pytest.raises(BuildtileError, match="declared as a tile kernel") as info:
        TileKernel(ops.k.pyfunc)(fake_gpu.array(4))
    assert info.value.code == "BT0620"


@pytest.mark.parametrize("edit, words", [
    (lambda r: r.pop("tile"), "has no `tile` object"),
    (lambda r: r["tile"].update(grid_param="x"), "tile.grid_param 'x' is not a tile.Out parameter"),
    (lambda r: r["tile"].update(specializations=[]), "tile.specializations is missing or empty"),
    (lambda r: r["tile"]["specializations"][0].update(tile_shapes={"z": [0]}), "expected 1 positive integers"),
    (lambda r: r["tile"]["specializations"][0].update(tile_shapes={"q": [1]}), "exactly `z`"),
    (lambda r: r["tile"]["specializations"][0].update(block=[2048]), "block (2048, 1, 1)"),
    (lambda r: r["tile"]["specializations"][1].update(tile_shapes={"z": [128]}), "two specializations"),
    (lambda r: r["params"][0].update(kind="slice"), "kind 'slice', which tile kernels do not take"),
    (lambda r: r["params"][2].update(kind="tensor"), "needs at least one tile.Out parameter"),
])
def test_a_malformed_tile_record_is_bt0621(make_kernel_package, fake_gpu, edit, words):
    import json
    from pathlib import Path

    module = make_tile_package(make_kernel_package, {"add": TILE_KERNELS["add"]})
    path = Path(module.__file__).parent / "_buildtile" / "manifest.json"
    data = json.loads(path.read_text())
    edit(data["kernels"][0])
    path.write_text(json.dumps(data))
    with pytest.raises(BuildtileError) as info:
        _ = module.add.signature
    assert info.value.code == "BT0621" and words in str(info.value)


def test_tile_out_crosses_the_abi_like_a_tensor():
    assert PARAM_KINDS["tile_out"] == "out"
    flat = kernel_params([{"name": "z", "kind": "tile_out", "dtype": "f32", "rank": 2}])
    assert [(p.name, p.ctype) for p in flat] == [("z.data", "ptr"), ("z.shape0", "i64"), ("z.shape1", "i64"),
                                                 ("z.stride0", "i64"), ("z.stride1", "i64")]


def dropped_launch_warnings(make_launches) -> list[str]:
    """The dropped-launch warnings raised while ``make_launches`` runs and its garbage is collected.

    They are raised from ``__del__``, where an error filter cannot turn them into exceptions (the
    finaliser swallows them), so they are recorded instead."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        make_launches()
        gc.collect()
    return [str(w.message) for w in seen if "dropped without being enqueued" in str(w.message)]


def test_no_warning_for_launches_that_were_enqueued(tiles, fake_gpu):
    def enqueued():
        tiles.add(*vectors(fake_gpu)[:2], partition(fake_gpu.array(1000), [128])).sync_on(0)

    def dropped():
        tiles.add(*vectors(fake_gpu)[:2], partition(fake_gpu.array(1000), [128]))

    assert dropped_launch_warnings(enqueued) == []
    assert len(dropped_launch_warnings(dropped)) == 1   # the recorder does see the warning


# ----------------------------------------------------------------------------- forging and re-pointing

def test_a_pending_launch_is_made_only_by_calling_its_kernel(tiles, fake_gpu):
    x, y, z = vectors(fake_gpu)
    pending = tiles.add(tensor(x), tensor(y), partition(z, [128]))
    for token in (None, object()):
        text = refused(fake_gpu, ContractError, PendingLaunch, token, tiles.add, pending._binding, pending._entry)
        assert text.startswith("error[BT0600]: ") and "calling its kernel" in text
    text = refused(fake_gpu, ContractError, PendingLaunch, tiles.add, pending._binding, pending._entry)
    assert text.startswith("error[BT0600]: ")
    pending.cancel()


@pytest.mark.parametrize("name", ["kernel", "_binding", "_entry", "_state", "_lock"])
def test_a_pending_launch_cannot_be_re_pointed(tiles, fake_gpu, name):
    x, y, z = vectors(fake_gpu)
    pending = tiles.add(tensor(x), tensor(y), partition(z, [128]))
    other = tiles.add(*(tensor(fake_gpu.array(1000)) for _ in range(2)), partition(fake_gpu.array(1000), [256]))
    before = getattr(pending, name)
    text = refused(fake_gpu, ContractError, setattr, pending, name, getattr(other, name))
    assert text.startswith("error[BT0600]: ") and f"`{name}`" in text
    refused(fake_gpu, ContractError, delattr, pending, name)
    assert getattr(pending, name) is before
    pending.sync_on(0)
    assert fake_gpu.launches[-1].symbol == tiles.add.signature.specializations[0].symbol
    other.cancel()
