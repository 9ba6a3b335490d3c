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

import numpy as np

from buildtile.backend import CompileOptions
from buildtile.emulate.hostir import host_ir
from buildtile.emulate.machine import HostKernel
from buildtile.emulate.sources import host_params, module_entries
from buildtile.interop.abi import DTYPES, launch_extras
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
    """One specialization of a Tile kernel, called on NumPy arrays over the tiles of its output."""

    def __init__(self, specialization, params: list[dict], name: str = "") -> None:
        self.spec = specialization
        # a generic kernel's parameters take this specialization's dtypes
        self.params = [dict(p, dtype=specialization.param_dtypes.get(p["name"], p["dtype"])) for p in params]
        self.host = HostKernel(host_ir(specialization.lowered.llvm_ir, specialization.symbol),
                               name or specialization.symbol, self.params, per_tile=True)

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
        if len(values) + 1 == len(self.host.formats):   # the trailing tile schedule (interop.abi.TILE_SCHEDULE)
            values.append(schedule)
        self.host.launch(dims, _dim3(self.spec.block), self.spec.shared_bytes, values)


