"""One table of bad calls, made through both hosts: the same BT code, and nothing launched.

Each row of :data:`ROWS` describes a call once — the kernel, its arguments
(views of named buffers, with dtype, shape, strides, device), the grid or
tile shape — and is made twice, against ONE package (one manifest, one set
of images):

- through the Python host (``kernel[grid](...)``, ``unsafe_launch``,
  ``kernel(..., tile.partition(z, tile)).sync_on(0)``) over
  :class:`~buildtile.runtime.testing.FakeDriver`;
- through the package's C shim (``bt_<kernel>``, ``bt_<kernel>_unsafe``,
  ``bt_<kernel>_tiled``), compiled once for this module, with ctypes
  DLTensors over the same addresses, the driver being tests/fake_libcuda.c;
- the moved tile tensor row, whose "moved" state exists only in the C++
  layer (abi.h: BT_ERR_MOVED is "C++ layer only"), runs through the
  generated kernels.hpp instead of the C launchers.

For every row both hosts must give the row's code (or succeed, for the
control rows), both messages must start ``error[BTxxxx]`` and name the
row's words, and the launches counted by each fake driver must be 0 for a
refusal (1 for a control row, which shows the count would see a launch).
Runs without a GPU; needs a C compiler (and a C++ one for the moved row).

What one host cannot express is left out of the table: a block other than
the contract's for a kernel that has one (C callers pass no block; the
unsafe rows cover blocks), a scalar out of its type's range (C scalars are
typed). Calls whose values C's types cannot hold at all (a float grid, a
stream handle past 64 bits, keyword arguments) are :data:`PYTHON_ONLY`,
made through the Python host alone. "Host
pointer" is a NumPy array in Python and a kDLCPU DLTensor in C: both hosts
take a DLPack producer's word for where its memory is.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from conftest import requires_tree
from test_c_abi import CC, CXX, WARNINGS, DLTensor, FakeState, LaunchConfig, config, fake_driver_path, run, tensor
from tile_support import add_1d_ptx, add_tile_kernels, tile_record

from buildtile.errors import BuildtileError
from buildtile.interop.abi import DTYPES, PARAM_KINDS, mangle
from buildtile.interop.c_abi import emit

__all__ = ["fake_driver_path"]  # a fixture of tests/test_c_abi.py, used here (module scope: compiled once)

pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler")

PACKAGE = "btconformance"
OPS, TILES = f"{PACKAGE}.ops", f"{PACKAGE}.tiles"


# ----------------------------------------------------------------------------- the package

def _simt(name: str, params: list[tuple], block, index_dims: int, requires=(), coarsen: int = 1) -> dict:
    return {
        "name": name, "module": OPS, "symbol": mangle(OPS, name), "kind": "simt",
        "source": {"file": f"{PACKAGE}/ops.py", "line": 1},
        "params": [{"name": p[0], "kind": p[1], "dtype": p[2], "rank": p[3] if len(p) > 3 else int(p[1] != "scalar"),
                    "role": PARAM_KINDS[p[1]]} for p in params],
        "contract": {"block": block, "index_dims": index_dims, "min_blocks": None, "dynamic_shared": 0,
                     "coarsen": coarsen, "min_compute_capability": None,
                     "requires": [requires_tree(text) for text in requires]},
    }


#: the SIMT kernels, with the signatures and contracts of example_project's
SIMT_KERNELS = [
    _simt("vecadd", [("a", "slice", "f32"), ("b", "slice", "f32"), ("c", "disjoint_slice", "f32")],
          [256, 1, 1], 1, ["len(a) == len(c)", "len(b) == len(c)"], coarsen=4),
    _simt("matadd", [("a", "tensor", "f32", 2), ("b", "tensor", "f32", 2), ("c", "disjoint_tensor", "f32", 2)],
          [16, 16, 1], 2, [f"{x}.shape[{axis}] == c.shape[{axis}]" for x in "ab" for axis in (0, 1)]),
    _simt("histogram", [("values", "slice", "i32"), ("bins", "atomic_slice", "u32")], [256, 1, 1], 1),
    _simt("raw_copy", [("src", "slice", "f32"), ("dst", "disjoint_slice", "f32")], None, 1),  # no contract
]

#: the Tile kernels (the images are stand-ins: nothing runs them)
TILE_KERNELS = [
    tile_record(TILES, "add", [("x", "tensor", "f32", 1), ("y", "tensor", "f32", 1), ("z", "tile_out", "f32", 1)], [
        {"tiles": {"z": [128]}, "block": 128, "ptx": add_1d_ptx(mangle(TILES, "add") + "__t128", 128, 128)},
        {"tiles": {"z": [256]}, "block": 128, "ptx": add_1d_ptx(mangle(TILES, "add") + "__t256", 256, 128)},
    ], requires=[(text, requires_tree(text)["expr"]) for text in ("x.shape[0] == z.shape[0]",
                                                                   "y.shape[0] == z.shape[0]")]),
    tile_record(TILES, "row_sum", [("x", "tensor", "f32", 2), ("z", "tile_out", "f32", 1)], [
        {"tiles": {"z": [64]}, "block": 256, "ptx": add_1d_ptx(mangle(TILES, "row_sum") + "__t64", 64, 256)},
        {"tiles": {"z": [16]}, "block": 256, "ptx": add_1d_ptx(mangle(TILES, "row_sum") + "__t16", 16, 256)},
    ], requires=[("x.shape[0] == z.shape[0]", requires_tree("x.shape[0] == z.shape[0]")["expr"])]),
]


def _stub_module(decorator: str, kernels: list[dict]) -> str:
    """Kernel stubs the Python host binds to the manifest by module and name (never compiled here)."""
    head = ("from buildtile import simt\n\n" if decorator == "simt.kernel"
            else "from buildtile.runtime.tile.kernel import TileKernel\n\n")
    return head + "".join(f"@{decorator}\ndef {k['name']}({', '.join(p['name'] for p in k['params'])}):\n"
                          "    pass\n\n\n" for k in kernels)


def write_package(root: Path) -> dict:
    """``root/btconformance``: Python stubs, the manifest and its (stand-in) images."""
    package = root / PACKAGE
    out = package / "_buildtile"
    (out / "kernels").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "ops.py").write_text(_stub_module("simt.kernel", SIMT_KERNELS))
    (package / "tiles.py").write_text(_stub_module("TileKernel", TILE_KERNELS))
    manifest = {"manifest_version": 1, "abi_version": 1, "package": PACKAGE, "package_version": "0.1.0",
                "buildtile_version": "0.1.0", "targets": ["sm_80", "sm_90"], "ptx_target": "sm_80",
                "checks": "release", "kernels": []}
    for record in json.loads(json.dumps(SIMT_KERNELS)):
        artifacts = {}
        for key, target, kind in [("sm_80", "sm_80", "cubin"), ("sm_90", "sm_90", "cubin"), ("ptx", "sm_80", "ptx")]:
            data = (b"\x7fELF" if kind == "cubin" else b"// ") + f"stand-in {kind} of {record['symbol']}\n".encode()
            rel = f"kernels/{record['symbol']}.{target}.{kind}"
            (out / rel).write_bytes(data)
            artifacts[key] = {"kind": kind, "path": rel, "sha256": hashlib.sha256(data).hexdigest()}
            if kind == "ptx":
                artifacts[key]["target"] = target
        record["artifacts"] = artifacts
        manifest["kernels"].append(record)
    return add_tile_kernels(root, manifest, json.loads(json.dumps(TILE_KERNELS)))  # writes manifest.json


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    """(root, manifest, emitted C ABI project) of the one package both hosts launch."""
    root = tmp_path_factory.mktemp("conformance")
    manifest = write_package(root)
    project = emit(manifest, root / PACKAGE / "_buildtile", root / "build", None).cmake_source_dir
    return root, manifest, project


# ----------------------------------------------------------------------------- the table

class HostsDisagree(AssertionError):
    """The two hosts gave different codes for one call."""


@dataclass(frozen=True)
class Arr:
    """An array argument: a view of buffer ``buffer`` (views of one buffer share its memory).

    ``offset`` and ``strides`` are in elements (strides None: row-major contiguous); ``host``:
    the buffer is host memory (Python: a NumPy array; C: a kDLCPU DLTensor over it);
    ``misalign``: bytes added to the address (less than an element: a misaligned view).
    """

    buffer: str
    shape: tuple
    dtype: str = "f32"
    offset: int = 0
    strides: tuple | None = None
    device: int = 0
    host: bool = False
    misalign: int = 0

    def extent(self) -> int:
        """Elements of the buffer this view reaches (one past the last)."""
        if 0 in self.shape:
            return self.offset
        strides = self.strides or _compact(self.shape)
        return self.offset + 1 + sum((n - 1) * abs(s) for n, s in zip(self.shape, strides))


@dataclass(frozen=True)
class Out:
    """A tile.Out argument: ``array`` partitioned into tiles of ``tile`` (C: the dispatcher's tile_shape)."""

    array: Arr
    tile: tuple


@dataclass(frozen=True)
class Row:
    id: str
    kernel: str                 # "vecadd" (ops) or "tiles.add"
    args: tuple
    expect: str | None          # "BT0308" ...; None: a control row that must launch once
    words: tuple = ()           # in both hosts' messages
    grid: tuple = (4,)          # SIMT only
    block: tuple | None = None  # SIMT: given only to unsafe_launch / bt_*_unsafe
    moved: bool = False         # launch once with a tile tensor for the first argument, then use it again
    marks: tuple = field(default=(), compare=False)

    @property
    def is_tile(self) -> bool:
        return self.kernel.startswith("tiles.")

    @property
    def name(self) -> str:
        return self.kernel.partition("tiles.")[2] or self.kernel


def _compact(shape) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def vec(buffer, n=1000, **kw):
    return Arr(buffer, (n,), **kw)


def mat(buffer, rows=40, cols=30, **kw):
    return Arr(buffer, (rows, cols), **kw)


A, B, C = vec("a"), vec("b"), vec("c")
M1, M2, M3 = mat("a"), mat("b"), mat("c")

ROWS = [
    # controls: accepted by both hosts, one launch each
    Row("ok: vecadd", "vecadd", (A, B, C), None),
    Row("ok: matadd, column-major input", "matadd", (M1, Arr("b", (40, 30), strides=(1, 40)), M3), None, grid=(2, 3)),
    Row("ok: tile add", "tiles.add", (A, B, Out(C, (128,))), None),
    Row("ok: inputs share one buffer", "vecadd", (A, A, C), None),
    Row("ok: unsafe launch of a kernel without a contract", "raw_copy", (A, C), None, grid=(8,), block=(128, 1, 1)),
    # BT0308: dtype, rank, layout, memory, device
    Row("wrong dtype", "vecadd", (A, B, vec("c", dtype="f64")), "BT0308", ("`c`",)),
    Row("wrong dtype (a float for an integer)", "histogram", (vec("v", dtype="f32"), vec("h", 16, dtype="u32")),
        "BT0308", ("`values`",)),
    Row("wrong rank", "vecadd", (Arr("a", (25, 40)), B, C), "BT0308", ("`a`",)),
    Row("wrong rank of a tensor", "matadd", (vec("a", 1200), M2, M3), "BT0308", ("`a`",), grid=(2, 3)),
    Row("non-contiguous slice", "vecadd", (Arr("a", (1000,), strides=(2,)), B, C), "BT0308", ("`a`", "contiguous")),
    Row("output tensor whose strides repeat elements", "matadd", (M1, M2, Arr("c", (40, 30), strides=(0, 1))),
        "BT0308", ("`c`",), grid=(2, 3)),
    Row("host pointer", "vecadd", (vec("a", host=True), B, C), "BT0308", ("`a`", "host memory")),
    Row("arguments on two devices", "vecadd", (A, vec("b", device=1), C), "BT0308", ("`a`", "`b`", "cuda:1")),
    Row("tile: wrong dtype", "tiles.add", (A, vec("b", dtype="f64"), Out(C, (128,))), "BT0308", ("`y`",)),
    Row("tile: wrong rank of the output", "tiles.row_sum", (M1, Out(Arr("c", (40, 1)), (64, 1))), "BT0308", ("`z`",)),
    Row("tile: non-contiguous output", "tiles.add", (A, B, Out(Arr("c", (1000,), strides=(2,)), (128,))),
        "BT0308", ("`z`", "contiguous")),
    Row("tile: host pointer", "tiles.add", (A, vec("b", host=True), Out(C, (128,))), "BT0308", ("`y`", "host memory")),
    Row("tile: arguments on two devices", "tiles.add", (A, B, Out(vec("c", device=1), (128,))), "BT0308",
        ("`x`", "`z`", "cuda:1")),
    # BT0308: layouts the kernel ABI cannot hold, pointers misaligned for their element type
    Row("negative extent, no requires relating it", "histogram", (vec("v", 16, dtype="i32"), vec("h", -16, dtype="u32")),
        "BT0308", ("`bins`", "negative extent")),
    Row("negative extent of a tensor", "matadd", (M1, Arr("b", (40, -30)), M3), "BT0308", ("`b`", "negative extent"),
        grid=(2, 3)),
    Row("more elements than int64 counts", "matadd", (Arr("a", (2**32, 2**32)), M2, M3), "BT0308",
        ("`a`", "more elements than int64 counts"), grid=(2, 3)),
    Row("strides spanning more than int64 counts", "matadd", (Arr("a", (40, 30), strides=(2**62, 1)), M2, M3),
        "BT0308", ("`a`", "spans more memory than int64 counts"), grid=(2, 3)),
    Row("misaligned input", "vecadd", (vec("a", misalign=2), B, C), "BT0308", ("`a`", "not aligned to 4 bytes")),
    Row("misaligned output", "vecadd", (A, B, vec("c", misalign=1)), "BT0308", ("`c`", "not aligned to 4 bytes")),
    Row("misaligned tensor", "matadd", (M1, M2, mat("c", misalign=3)), "BT0308", ("`c`", "not aligned to 4 bytes"),
        grid=(2, 3)),
    Row("misaligned empty slice", "vecadd", (vec("a", 0, misalign=2), vec("b", 0), vec("c", 0)), "BT0308",
        ("`a`", "not aligned to 4 bytes")),
    Row("misaligned atomic output", "histogram", (vec("v", 16, dtype="i32"), vec("h", 16, dtype="u32", misalign=2)),
        "BT0308", ("`bins`", "not aligned to 4 bytes")),
    # a Tile entry picks its vector accesses at run time, from the pointers' alignment: one that is
    # only aligned for its element takes the element-wise path compiled beside them, so it launches
    Row("ok: tile add, views 4 bytes past 16-byte alignment", "tiles.add",
        (vec("a", 999, offset=1), vec("b", 999, offset=3), Out(vec("c", 999, offset=1), (128,))), None),
    Row("tile: negative extent", "tiles.add", (A, vec("b", -1000), Out(C, (128,))), "BT0308", ("`y`", "negative extent")),
    Row("tile: misaligned input", "tiles.add", (vec("a", misalign=2), B, Out(C, (128,))), "BT0308",
        ("`x`", "not aligned to 4 bytes")),
    Row("tile: misaligned output", "tiles.add", (A, B, Out(vec("c", misalign=2), (128,))), "BT0308",
        ("`z`", "not aligned to 4 bytes")),
    # BT0502: an output aliasing another argument
    Row("output is an input (same buffer)", "vecadd", (A, B, A), "BT0502", ("`c`", "`a`")),
    Row("output overlaps an input (views)", "vecadd", (vec("a", offset=500), B, vec("a")), "BT0502", ("`c`", "`a`")),
    Row("output overlaps an input by one element", "vecadd", (A, B, vec("a", offset=999)), "BT0502", ("`c`", "`a`")),
    Row("2-D output interleaved with an input (their byte ranges overlap)", "matadd",
        (Arr("a", (20, 30), strides=(60, 1)), M2, Arr("a", (20, 30), offset=30, strides=(60, 1))),
        "BT0502", ("`c`", "`a`"), grid=(2, 2)),
    Row("atomic output over an input", "histogram", (vec("v", 16, dtype="i32"), vec("v", 16, dtype="u32")),
        "BT0502", ("`bins`",)),
    Row("tile: output is an input (same buffer)", "tiles.add", (A, B, Out(A, (128,))), "BT0502", ("`z`",)),
    Row("tile: output overlaps an input (views)", "tiles.add", (A, B, Out(vec("b", offset=1), (128,))), "BT0502",
        ("`z`", "`y`")),
    Row("tile: one tensor passed for two inputs", "tiles.add", (A, A, Out(C, (128,))), "BT0502", ("`x`", "`y`")),
    # BT0600: requires
    Row("requires: output shorter", "vecadd", (A, B, vec("c", 999)), "BT0600", ("len(a) == len(c)",)),
    Row("requires: tensor shapes", "matadd", (M1, mat("b", 40, 31), mat("c", 40, 31)), "BT0600",
        ("a.shape[1] == c.shape[1]",), grid=(2, 3)),
    Row("tile requires: output shorter", "tiles.add", (A, B, Out(vec("c", 999), (128,))), "BT0600",
        ("x.shape[0] == z.shape[0]",)),
    Row("tile requires: 2-D input", "tiles.row_sum", (M1, Out(vec("c", 41), (16,))), "BT0600",
        ("x.shape[0] == z.shape[0]",)),
    # BT0600: the launch configuration against the contract or CUDA's limits
    Row("grid with a zero", "vecadd", (A, B, C), "BT0600", ("grid (0, 1, 1)",), grid=(0,)),
    Row("2-D grid for index_1d", "vecadd", (A, B, C), "BT0600", ("index_1d()",), grid=(4, 2)),
    Row("3-D grid for index_2d", "matadd", (M1, M2, M3), "BT0600", ("index_2d()",), grid=(2, 3, 2)),
    Row("grid past CUDA's y limit", "matadd", (M1, M2, M3), "BT0600", ("65535",), grid=(2, 70000)),
    Row("unsafe: block with a zero", "raw_copy", (A, C), "BT0600", ("block (128, 0, 1)",), grid=(8,),
        block=(128, 0, 1)),
    Row("unsafe: block of 2048 threads", "raw_copy", (A, C), "BT0600", ("(2048, 1, 1)",), grid=(8,),
        block=(2048, 1, 1)),
    Row("tile shape no specialization has", "tiles.add", (A, B, Out(C, (64,))), "BT0600",
        ("tile shape (64,)", "(128,), (256,)")),
    # BT0382: a tile tensor used after it was moved into a launch
    Row("tile tensor used after a move", "tiles.add", (A, B, Out(C, (128,))), "BT0382",
        ("use of moved value", "(parameter `x`)"), moved=True),
    # both hosts launch on the arguments' device whatever context is current (abi.h, step 5)
    Row("every argument on another device than the current one", "vecadd",
        (vec("a", device=1), vec("b", device=1), vec("c", device=1)), None),
]


# ----------------------------------------------------------------------------- the Python host

@pytest.fixture(scope="module")
def python_host(package):
    """(FakeDriver, ops module, tiles module): the package imported over a fake two-GPU driver."""
    from buildtile.runtime.driver import set_driver
    from buildtile.runtime.package import forget_package
    from buildtile.runtime.testing import FakeDriver

    root, _, _ = package
    driver = FakeDriver(capabilities=[(9, 0), (9, 0)])
    previous = set_driver(driver)
    sys.path.insert(0, str(root))
    try:
        yield driver, importlib.import_module(OPS), importlib.import_module(TILES)
    finally:
        sys.path.remove(str(root))
        set_driver(previous)
        forget_package(PACKAGE)
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]


class Buffers:
    """Each row's buffers, allocated once per host: ``address(view)`` and host arrays kept alive."""

    def __init__(self, row: Row, allocate) -> None:
        self.base: dict[str, int] = {}
        self.keep: list = []
        views = [a.array if isinstance(a, Out) else a for a in row.args if isinstance(a, (Arr, Out))]
        for name in dict.fromkeys(v.buffer for v in views):
            mine = [v for v in views if v.buffer == name]
            # views whose extents no memory could hold (the refusal rows) get a small buffer
            nbytes = min(max(max(v.extent() * DTYPES[v.dtype][0] for v in mine), 0), 1 << 16) + 64
            if mine[0].host:
                host = np.zeros(nbytes, np.uint8)
                self.keep.append(host)
                self.base[name] = host.ctypes.data
            else:
                self.base[name] = allocate(nbytes, mine[0].device)

    def address(self, view: Arr) -> int:
        return self.base[view.buffer] + view.offset * DTYPES[view.dtype][0] + view.misalign


def _python_array(view: Arr, buffers: Buffers, made: dict):
    from buildtile.runtime.testing import FakeCudaArray

    if view in made:  # the same argument twice is the same Python object
        return made[view]
    itemsize, typestr = DTYPES[view.dtype][0], DTYPES[view.dtype][3]
    if view.host:
        count = view.extent() - view.offset
        flat = np.frombuffer((ctypes.c_char * (count * itemsize)).from_address(buffers.address(view)),
                             dtype=np.dtype(typestr))
        array = np.lib.stride_tricks.as_strided(
            flat, view.shape, tuple(s * itemsize for s in (view.strides or _compact(view.shape))))
    else:
        strides = None if view.strides is None else tuple(s * itemsize for s in view.strides)
        array = FakeCudaArray(buffers.address(view), view.shape, typestr, strides)
    made[view] = array
    return array


def python_call(row: Row, host) -> tuple[str | None, str, int]:
    """(code or None, message, launches) of ``row`` through the Python host."""
    from buildtile import tile

    driver, ops, tiles = host
    buffers = Buffers(row, driver.allocate)
    made: dict = {}
    args = []
    for a in row.args:
        if isinstance(a, Out):
            args.append(tile.partition(_python_array(a.array, buffers, made), list(a.tile)))
        elif isinstance(a, Arr):
            args.append(_python_array(a, buffers, made))
        else:
            args.append(a)
    kernel = getattr(tiles if row.is_tile else ops, row.name)
    if row.moved:
        return _python_moved(kernel, args, driver)
    driver.calls.clear()
    driver.launches.clear()
    try:
        if row.is_tile:
            kernel(*args).sync_on(0)
        elif row.block is not None:
            kernel.unsafe_launch(row.grid, row.block, *args)
        else:
            kernel[row.grid](*args)
    except BuildtileError as exc:
        assert driver.queued == [], f"the Python host queued work before refusing: {driver.queued}"
        return exc.code, str(exc), len(driver.launches)
    return None, "", len(driver.launches)


def _python_moved(kernel, args, driver) -> tuple[str | None, str, int]:
    """Launch once with a TileTensor for `x`, then pass that (moved) handle again."""
    from buildtile import tile

    x, tile_shape = tile.tensor(args[0]), list(args[2].tile_shape)
    _, y, z = kernel(x, *args[1:]).sync_on(0)
    again = (y, tile.partition(z, tile_shape))  # fresh handles: only `x` is the moved one
    driver.calls.clear()
    driver.launches.clear()
    try:
        kernel(x, *again).sync_on(0)
    except BuildtileError as exc:
        assert driver.queued == []
        return exc.code, str(exc), len(driver.launches)
    return None, "", len(driver.launches)


# ----------------------------------------------------------------------------- the C shim

_SCALAR_CTYPES = {"bool": ctypes.c_bool, "i32": ctypes.c_int32, "i64": ctypes.c_int64, "u32": ctypes.c_uint32,
                  "u64": ctypes.c_uint64, "f16": ctypes.c_uint16, "bf16": ctypes.c_uint16,
                  "f32": ctypes.c_float, "f64": ctypes.c_double}


@pytest.fixture(scope="module")
def shim_path(package):
    _, _, project = package
    out = project.parent / "libbtconformance_shim.so"
    run([CC, "-std=c11", *WARNINGS, "-O1", "-fPIC", "-shared", "-fvisibility=hidden",
         "-I", project / "include", "-I", project / "src",
         *sorted((project / "src").glob("*.c")), "-o", out, "-ldl", "-lpthread"])
    return out


@pytest.fixture(scope="module")
def c_host(package, shim_path, fake_driver_path):
    """(shim library, fake driver library, its state): two fake devices of cc 9.0, cuda:0 current."""
    previous = os.environ.get("BUILDTILE_LIBCUDA")
    os.environ["BUILDTILE_LIBCUDA"] = str(fake_driver_path)  # read by the shim's first launch
    driver = ctypes.CDLL(str(fake_driver_path))
    state = FakeState.in_dll(driver, "fake")
    state.cc_major, state.cc_minor, state.device_count = 9, 0, 2
    state.init_result = state.refuse_cubin = state.refuse_ptx = 0
    lib = ctypes.CDLL(str(shim_path))
    lib.btconformance_last_error.restype = ctypes.c_char_p
    try:
        yield lib, driver, state
    finally:
        if previous is None:
            os.environ.pop("BUILDTILE_LIBCUDA", None)
        else:
            os.environ["BUILDTILE_LIBCUDA"] = previous


def _c_tensor(view: Arr, buffers: Buffers, made: dict) -> DLTensor:
    if view not in made:  # the same argument twice is the same DLTensor
        made[view] = tensor(buffers.address(view), list(view.shape), view.dtype, strides=view.strides,
                            device=(1, 0) if view.host else (2, view.device))
    return made[view]


def c_call(row: Row, host, manifest: dict) -> tuple[str | None, str, int]:
    """(code or None, message, launches) of ``row`` through the C launchers."""
    lib, driver, state = host
    module = TILES if row.is_tile else OPS
    record = next(k for k in manifest["kernels"] if k["module"] == module and k["name"] == row.name)
    fake_next = [0x7E00_0000_0000]

    def allocate(nbytes: int, device: int) -> int:  # addresses only: nothing dereferences them
        base = fake_next[0]
        fake_next[0] += -(-nbytes // 256) * 256 + 256
        return base

    buffers = Buffers(row, allocate)
    made: dict = {}
    values: list = []
    types: list = [ctypes.POINTER(LaunchConfig)]
    symbol = "bt_" + mangle(module, row.name)
    if row.is_tile:
        symbol += "_tiled"
        tiles = [n for a in row.args if isinstance(a, Out) for n in a.tile]
        types.append(ctypes.POINTER(ctypes.c_int64))
        values.append((ctypes.c_int64 * len(tiles))(*tiles))
        cfg = config(0, 0, 0)
    else:
        cfg = config(*row.grid)
        if record["contract"]["block"] is None:
            symbol += "_unsafe"
            types.append(ctypes.POINTER(ctypes.c_uint32 * 3))
            values.append(ctypes.byref((ctypes.c_uint32 * 3)(*row.block)))
    for p, a in zip(record["params"], row.args):
        if p["kind"] == "scalar":
            types.append(_SCALAR_CTYPES[p["dtype"]])
            values.append(a)
        else:
            types.append(ctypes.POINTER(DLTensor))
            values.append(ctypes.byref(_c_tensor(a.array if isinstance(a, Out) else a, buffers, made)))
    fn = getattr(lib, symbol)
    fn.argtypes, fn.restype = types, ctypes.c_int
    driver.fake_reset_observations()
    driver.fake_make_current(0, 0)
    status = fn(ctypes.byref(cfg), *values)
    message = lib.btconformance_last_error().decode()
    return (f"BT{status:04d}" if status else None), message, state.launches


# ----------------------------------------------------------------------------- the C++ layer (moved tensors)

CPP_MOVED = r"""
#include <dlfcn.h>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include "btconformance/kernels.hpp"

// the fake driver's launch count: the same library instance the shim opened
static int launches(long offset)
{
    void* fake = dlsym(dlopen(std::getenv("BUILDTILE_LIBCUDA"), RTLD_NOW), "fake");
    return *reinterpret_cast<int*>(static_cast<char*>(fake) + offset);
}

int main(int argc, char** argv)
{
    if (argc != 2)
        return 3;
    const long offset = std::atol(argv[1]);
    using buildtile::TileTensor;
    float* base = reinterpret_cast<float*>(0x7d0000000000);
    TileTensor<float, 1> x(base, {1000}), y(base + 4096, {1000}), z(base + 8192, {1000});
    auto [x2, y2, z2] = btconformance::tiles::add(std::move(x), std::move(y),
                                                  buildtile::partition(std::move(z), {128})).sync_on(nullptr);
    const int before = launches(offset);
    try {
        // x was moved into the first launch: the launch is refused before the launcher is called
        auto again = btconformance::tiles::add(std::move(x), std::move(y2), buildtile::partition(std::move(z2), {128}));
        (void)std::move(again).sync_on(nullptr);
    } catch (const buildtile::Error& e) {
        std::printf("%d\n%d\n%s\n", e.code(), launches(offset) - before, e.what());
        return 0;
    }
    std::printf("no error\n");
    return 1;
}
"""


@pytest.fixture(scope="module")
def cpp_moved(package, shim_path, fake_driver_path):
    """The C++ program of the moved row, built once against the generated headers and the shim."""
    if CXX is None:
        pytest.skip("the moved row runs through the C++ layer: needs a C++ compiler")
    root, _, _ = package
    source = shim_path.parent / "moved.cpp"
    source.write_text(CPP_MOVED)
    exe = shim_path.parent / "moved"
    run([CXX, "-std=c++17", *WARNINGS, "-I", root / PACKAGE / "_buildtile" / "include", source, shim_path,
         f"-Wl,-rpath,{shim_path.parent}", "-ldl", "-o", exe])
    return exe


def cpp_moved_call(exe: Path, fake_driver_path: Path) -> tuple[str | None, str, int]:
    result = subprocess.run([str(exe), str(FakeState.launches.offset)], capture_output=True, text=True,
                            check=False, env={**os.environ, "BUILDTILE_LIBCUDA": str(fake_driver_path)})
    assert result.returncode == 0, result.stdout + result.stderr
    code, launched, message = result.stdout.split("\n", 2)
    return f"BT{int(code):04d}", message, int(launched)


# ----------------------------------------------------------------------------- the test

@pytest.mark.parametrize("row", [pytest.param(row, id=row.id, marks=row.marks) for row in ROWS])
def test_both_hosts_refuse_with_the_same_code_before_anything_launches(row, package, python_host, c_host, request):
    py_code, py_message, py_launches = python_call(row, python_host)
    if row.moved:
        c_code, c_message, c_launches = cpp_moved_call(request.getfixturevalue("cpp_moved"),
                                                       request.getfixturevalue("fake_driver_path"))
    else:
        c_code, c_message, c_launches = c_call(row, c_host, package[1])
    report = f"\nPython: {py_code} {py_message}\nC:      {c_code} {c_message}"
    if py_code != c_code:
        raise HostsDisagree(report)
    assert py_code == row.expect, report
    launches = 0 if row.expect else 1
    assert (py_launches, c_launches) == (launches, launches), report
    if row.expect:
        for message in (py_message, c_message):
            assert message.startswith(f"error[{row.expect}]: "), report
            for word in row.words:
                assert word in message, f"{word!r} missing{report}"


def test_the_table_covers_every_kernel_and_refusal_code(package):
    """Every kernel of the package is called, and every code the hosts share appears."""
    _, manifest, _ = package
    called = {(TILES if r.is_tile else OPS, r.name) for r in ROWS}
    assert called == {(k["module"], k["name"]) for k in manifest["kernels"]}
    assert {r.expect for r in ROWS} >= {"BT0308", "BT0502", "BT0600", "BT0382"}


# ----------------------------------------------------------------------------- what only Python can express

#: bad calls whose values the C ABI's types cannot hold: its grid is three uint32_t, its stream a
#: CUstream pointer, and C has no keyword arguments. The Python host refuses each with the code
#: a C caller would get for the nearest thing it can write, before anything launches.
PYTHON_ONLY = [
    ("float grid", lambda ops, a, b, c: ops.vecadd[(1.0,)](a, b, c), "BT0600", "grid"),
    ("bool grid", lambda ops, a, b, c: ops.vecadd[(True,)](a, b, c), "BT0600", "grid"),
    ("bytes grid", lambda ops, a, b, c: ops.vecadd[b"\x04"](a, b, c), "BT0600", "grid"),
    ("range grid", lambda ops, a, b, c: ops.vecadd[range(4)](a, b, c), "BT0600", "grid"),
    ("float unsafe block", lambda ops, a, b, c: ops.raw_copy.unsafe_launch(8, (128.0,), a, c), "BT0600", "block"),
    ("stream handle past 64 bits", lambda ops, a, b, c: ops.vecadd[4](a, b, c, stream=2**70), "BT0308", "64 bits"),
    ("negative stream handle", lambda ops, a, b, c: ops.vecadd[4](a, b, c, stream=-1), "BT0308", "negative"),
    ("keyword argument", lambda ops, a, b, c: ops.vecadd[4](a, b, c=c), "BT0308", "by position"),
]


@pytest.mark.parametrize("call, code, words", [pytest.param(*row[1:], id=row[0]) for row in PYTHON_ONLY])
def test_calls_only_python_can_express_are_refused_before_anything_launches(python_host, call, code, words):
    driver, ops, _ = python_host
    a, b, c = (_python_array(v, Buffers(Row("", "vecadd", (v,), None), driver.allocate), {}) for v in (A, B, C))
    ops.vecadd[(1,)](a, b, c)  # cached: an equal key must not answer for the refused ones
    driver.calls.clear()
    driver.launches.clear()
    with pytest.raises(BuildtileError) as info:
        call(ops, a, b, c)
    assert info.value.code == code and str(info.value).startswith(f"error[{code}]: ") and words in str(info.value)
    assert driver.queued == [] and driver.launches == []
