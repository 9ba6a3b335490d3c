"""Kernels run on NumPy arrays straight from a source file, without a built package.

For tests and tools that hold a kernel module rather than an installed
package: :class:`SimtKernel` launches a SIMT kernel of a file with a chosen
grid and block, :class:`TileKernel` one specialization of a Tile kernel over
the tiles of its output. Arguments are C-contiguous (SIMT) or strided (Tile)
NumPy arrays and Python scalars, passed to the kernel as its ABI packs them;
nothing is checked but what the emulator checks (bounds, writers, ...). An
installed package's kernels go through the runtime's launch path instead
(``BUILDTILE_DEVICE=cpu``, see :mod:`buildtile.emulate`).
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from buildtile.backend import CompileOptions
from buildtile.emulate.hostir import host_ir
from buildtile.emulate.machine import HostKernel
from buildtile.emulate.sources import host_params, module_entries
from buildtile.interop.abi import DTYPES, launch_extras
from buildtile.interop.manifest import TensorMapRecord
from buildtile.runtime.dtypes import bf16_bits, bf16_values  # noqa: F401 (bf16 arrays of the callers)


def _dim3(value) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, int) else tuple(value)
    return (*dims, *(1,) * (3 - len(dims)))  # type: ignore[return-value]


def _scalar_bits(dtype: str, value) -> int:
    """A scalar argument as the integer bits of its flat parameter."""
    if dtype in ("f32", "f64"):
        return float(value)
    if dtype == "f16":
        return int(np.array(value, np.float16).view(np.uint16))
    if dtype == "bf16":
        return int(np.array(value, np.float32).view(np.uint32)) >> 16
    if dtype == "bool":
        return int(bool(value))
    return int(value)


def flat_values(params: list[dict], args: tuple) -> list:
    """The flat PTX parameter values of ``args`` (NumPy arrays and scalars) for ``params``."""
    flat: list = []
    for p, arg in zip(params, args, strict=True):
        if p["kind"] == "scalar":
            flat.append(_scalar_bits(p["dtype"], arg))
            continue
        if p["dtype"] not in DTYPES:   # a record: a NumPy structured array, whose layout is the caller's to check
            if arg.dtype.names is None:
                raise TypeError(f"`{p['name']}` takes records of {p['dtype']}, got a {arg.dtype} array")
        elif arg.itemsize != DTYPES[p["dtype"]][0]:   # bf16 travels as uint16 bit patterns
            raise TypeError(f"`{p['name']}` takes {p['dtype']}, got a {arg.dtype} array")
        flat.append(arg.ctypes.data)
        if p["kind"].endswith("slice"):
            flat.append(arg.size)
        else:
            flat += [int(n) for n in arg.shape] + [s // arg.itemsize for s in arg.strides]
    return flat


class SimtKernel:
    """A SIMT kernel of a source file, called as ``kernel(grid, block, *args)``."""

    def __init__(self, path: Path, name: str, module: str | None = None,
                 options: CompileOptions | None = None) -> None:
        path = Path(path)
        entries = module_entries(path, module or path.stem, options)
        # the plain entry (a kernel may also have one compiled for 16-byte-aligned arrays)
        (lowered,) = [e for e in entries.values()
                      if e.kernel.source.name == name and e.entry.symbol == e.kernel.symbol]
        self.kernel = lowered.kernel
        self.params = host_params(lowered.kernel)
        self.contract = lowered.kernel.contract
        self.host = HostKernel(host_ir(lowered.entry.llvm_ir, lowered.entry.symbol), name, self.params,
                               per_tile=False, source_file=lowered.display_file)

    def __call__(self, grid, block, *args, shared_mem: int = 0) -> None:
        """Launch ``grid`` blocks of ``block`` threads; arrays are written in place. A coarsened
        kernel runs on fewer physical blocks, as a host launches it; a cooperative one has every
        block resident at once."""
        grid3, block3 = _dim3(grid), _dim3(block)
        launched_x, extras = launch_extras(self.contract, grid3[0])
        self.host.launch((launched_x, grid3[1], grid3[2]), block3, shared_mem,
                         flat_values(self.params, args) + extras, cooperative=bool(self.contract.get("cooperative")))


class TileKernel:
    """One specialization of a Tile kernel, called on NumPy arrays over the tiles of its output;
    ``tma``: its TMA entry (sm_90a: wgmma fed by TMA), with tensor maps of the arrays."""

    def __init__(self, specialization, params: list[dict], name: str = "", tma: bool = False,
                 source_file: str | None = None) -> None:
        self.spec = specialization
        # a generic kernel's parameters take this specialization's dtypes
        self.params = [dict(p, dtype=specialization.param_dtypes.get(p["name"], p["dtype"])) for p in params]
        entry = specialization.tma if tma else specialization
        if entry is None:
            raise ValueError(f"specialization `{specialization.symbol}` has no TMA entry")
        self.maps = [TensorMapRecord(m["param"], tuple(m["box"]), m["swizzle"]) for m in entry.record()["maps"]] \
            if tma else []
        llvm_ir = entry.lowered.llvm_ir
        self.block = _dim3(tuple(entry.record()["block"]))
        self.shared_bytes = entry.lowered.shared_bytes
        self.host = HostKernel(host_ir(llvm_ir, entry.symbol), name or entry.symbol, self.params,
                               per_tile=True, source_file=source_file)

    def __call__(self, *args, grid: tuple[int, int, int] | None = None, schedule: int = -1) -> None:
        """Launch over the tiles of the primary output (the first tile.Out of the highest rank);
        arrays are written in place. ``grid`` (default: one block per tile, the last axis along x,
        the axes before rank-3 folded into z) is any launch grid a host may use; ``schedule`` the
        kernel's trailing tile schedule (-1: the compiler's order; 1: rows; G > 1: bands of G rows)."""
        grid_shape = None
        for p, value in zip(self.params, args):
            if p["kind"] == "tile_out" and (grid_shape is None or value.ndim > len(grid_shape)):
                tile_shape = self.spec.tile_shapes[p["name"]]
                grid_shape = [-(-n // t) for n, t in zip(value.shape, tile_shape)]
        along = list(reversed(grid_shape)) + [1] * (3 - len(grid_shape))
        dims = tuple(grid) if grid is not None else (along[0], along[1], math.prod(along[2:]))
        values = flat_values(self.params, args)
        if len(values) + 1 + len(self.maps) == len(self.host.formats):   # the tile schedule (interop.abi.TILE_SCHEDULE)
            values.append(schedule)
        values += self._tensor_maps(args)
        self.host.launch(dims, self.block, self.shared_bytes, values)

    def _tensor_maps(self, args: tuple) -> list[bytes]:
        """The encoded maps of the TMA entry's inputs, by the hosts' rule (runtime.tensor_maps)."""
        from buildtile.emulate.tensor_maps import encode
        from buildtile.runtime.tensor_maps import request_for

        arrays = {p["name"]: (p, a) for p, a in zip(self.params, args)}
        maps = []
        for record in self.maps:
            p, a = arrays[record.param]
            view = SimpleNamespace(dtype=p["dtype"], shape=a.shape, strides=tuple(s // a.itemsize for s in a.strides),
                                   itemsize=a.itemsize, ptr=a.ctypes.data)
            request = request_for(record, view)
            if request is None:
                raise ValueError(f"`{record.param}` breaks a rule of the copy engine: the hosts launch the plain entry")
            maps.append(encode(request))
        return maps


