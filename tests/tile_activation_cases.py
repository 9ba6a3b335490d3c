"""Tile kernels of ``tile.gelu`` in both of torch's forms, run on the CPU emulator against NumPy
and torch (tests/test_tile_gelu.py)."""

from buildtile import tile
from buildtile.types import Tensor, bf16, f16, f32, f64

#: the dtypes gelu is checked in: f32 and f64, and the half types it computes in f32 and rounds once
T = tile.dtype_var("T", f32, f64, f16, bf16)


@tile.kernel(specialize=[{"z": [256]}])
def gelu_exact(x: Tensor[T, 1], z: tile.Out[T, 1]):
    z.store(tile.gelu(tile.load_like(x, z)))


@tile.kernel(specialize=[{"z": [256]}])
def gelu_tanh(x: Tensor[T, 1], z: tile.Out[T, 1]):
    z.store(tile.gelu(tile.load_like(x, z), approximate="tanh"))


@tile.kernel(specialize=[{"z": [16, 32]}])
def gelu_shifted(x: Tensor[f32, 2], shift: f32, z: tile.Out[f32, 2]):
    """The exact form spelled out, on a 2-D tile, and on a run-time scalar broadcast over it."""
    t = tile.load_like(x, z)
    z.store(tile.gelu(t, approximate="none") - tile.gelu(shift))
