"""Which tile each block of a Tile launch computes: the block id -> tile id mapping.

The host launches a grid over the tiles of the grid output (its rule is
:func:`buildtile.runtime.tile.grid.launch_grid`, and the C host's copy of
it). Inside the kernel every block works from

* its **linear block id** ``L = ctaid.x + nctaid.x * (ctaid.y + nctaid.y * ctaid.z)``
  and the grid's **block count** ``P = nctaid.x * nctaid.y * nctaid.z`` (64-bit),
* the **tile counts** ``n[d] = ceil(extent[d] / tile[d])``, from the grid
  output's extents (kernel parameters) and its compile-time tile shape,
  and their product ``N``, the linear tile ids ``0 .. N-1``,

and runs the body for the linear tile ids ``L, L + P, L + 2P, ...`` below
``N``, each decoded by :func:`tile_of_block` (row-major: the last axis
fastest). A block whose ``L`` is ``N`` or more returns at once: a grid that
spills past grid x may hold a few such blocks.

This covers every grid the host launches. The natural one (axis ``r-1``
along x, ``r-2`` along y, ``r-3`` along z, when each fits CUDA's limits)
gives ``L = t[r-1] + n[r-1] * (t[r-2] + n[r-2] * t[r-3])``, which the
row-major decomposition maps back to ``(t[r-3], t[r-2], t[r-1])``, one tile
per block. The linearised one (``x = min(N, 2^31 - 1)``, the rest spilled
into y and z) gives each ``L`` below ``N`` exactly once, also one tile per
block. A persistent one has ``P < N`` (below).

**Grouped order** (:func:`grouped`, mma kernels: Triton's ``GROUP_SIZE_M``
swizzle) then renumbers a 2-D grid so that consecutive blocks walk a band of
``group`` tile rows column by column, sharing rows of A and columns of B in
L2. It is a bijection of ``[0, rows) x [0, cols)``: the bands cut the linear
ids into consecutive runs of ``cols * group`` (the last band, of
``rows - first`` rows, takes the ``cols * (rows - first)`` ids left), and
within a band of ``h`` rows ``(w % h, w // h)`` for ``w < cols * h`` is the
column-major enumeration of an ``h x cols`` block, each cell once. So every
tile is still computed by exactly one block, and ownership is unchanged.

**Persistent scheduling** (:func:`persistent_tiles`) launches ``P`` blocks
(about the SMs times the blocks each SM holds, :func:`persistent_blocks`) and
lets block ``b`` take the linear tile ids ``b, b + P, b + 2P, ...`` below the
total: the ids ``t`` are split by their residue ``t mod P``, one residue per
block, so each tile is taken exactly once, by block ``t mod P`` in its
iteration ``t // P``. Composed with either order above it is still a
bijection (a composition of bijections).

The order reaches the kernel as its trailing ``tile_schedule`` parameter
(interop.abi: the rows per band; 1 is row order, and grouped with one row
per band *is* row order; negative keeps the compiler's choice), a runtime
value rather than a specialization per order.

The LLVM emitters (:func:`linear_block_id`, :func:`block_count`,
:func:`tile_counts`, :func:`emit_tile_of_block`) generate exactly what the Python models
(:func:`tile_of_block`, :func:`grouped`) compute; tests enumerate the models
and run the emitted code on the CPU emulator.
"""

from __future__ import annotations

from collections.abc import Sequence

import llvmlite.ir as lir

from buildtile.backends.common.llvm import I32, I64, sreg

#: tile rows a band of the grouped order holds by default (Triton's GROUP_M)
GROUP_ROWS = 8


# ----------------------------------------------------------------------------- the mapping, as integers

def tile_of_block(linear: int, counts: Sequence[int], group: int = 0) -> tuple[int, ...] | None:
    """The tile (one index per axis) that linear tile id ``linear`` stands for, or None past the
    last tile. ``group`` > 1 applies :func:`grouped` to a 2-D grid (1 is the same as row order)."""
    total = 1
    for n in counts:
        total *= n
    if not 0 <= linear < total:
        return None
    if group > 1 and len(counts) == 2:
        return grouped(linear, counts[0], counts[1], group)
    ids = []
    for n in reversed(counts):
        ids.append(linear % n)
        linear //= n
    return tuple(reversed(ids))


def grouped(linear: int, rows: int, cols: int, group: int = GROUP_ROWS) -> tuple[int, int]:
    """(row, col) of block ``linear`` of a ``rows x cols`` grid in grouped order (see the module docstring)."""
    per_band = cols * group
    first = linear // per_band * group
    height = min(rows - first, group)
    within = linear % per_band
    return first + within % height, within // height


def persistent_blocks(total: int, sms: int, blocks_per_sm: int) -> int:
    """How many blocks a persistent launch over ``total`` tiles uses: one wave, never more than the tiles."""
    return max(1, min(total, sms * blocks_per_sm))


def persistent_tiles(block: int, blocks: int, total: int) -> range:
    """The linear tile ids block ``block`` of a persistent launch of ``blocks`` blocks takes, in order."""
    return range(block, total, blocks)


# ----------------------------------------------------------------------------- the mapping, as LLVM IR

def linear_block_id(b: lir.IRBuilder) -> lir.Value:
    """``ctaid.x + nctaid.x * (ctaid.y + nctaid.y * ctaid.z)`` as an i64."""
    rows = b.add(_reg(b, "ctaid.y"), b.mul(_reg(b, "nctaid.y"), _reg(b, "ctaid.z")))
    return b.add(_reg(b, "ctaid.x"), b.mul(_reg(b, "nctaid.x"), rows))


def block_count(b: lir.IRBuilder) -> lir.Value:
    """The grid's blocks, ``nctaid.x * nctaid.y * nctaid.z`` (i64): the step between a block's tiles."""
    return b.mul(b.mul(_reg(b, "nctaid.x"), _reg(b, "nctaid.y")), _reg(b, "nctaid.z"))


def tile_counts(b: lir.IRBuilder, extents: Sequence[lir.Value], tile_shape: Sequence[int]) -> list[lir.Value]:
    """``ceil(extent / tile)`` per axis (i64; extents are never negative, tiles are constants)."""
    return [b.udiv(b.add(n, I64(t - 1)), I64(t)) for n, t in zip(extents, tile_shape)]


def tile_total(b: lir.IRBuilder, counts: Sequence[lir.Value]) -> lir.Value:
    """The number of tiles: the product of the counts (1 for a rank-0 output)."""
    total = I64(1) if not counts else counts[0]
    for n in counts[1:]:
        total = b.mul(total, n)
    return total


def emit_group(b: lir.IRBuilder, schedule_word: lir.Value, compiled: int) -> lir.Value:
    """Rows of tiles per band from the trailing ``tile_schedule`` parameter (interop.abi): the
    word itself when positive, else ``compiled`` (the order the compiler chose; 1 is row order)."""
    return b.select(b.icmp_signed(">", schedule_word, I64(0)), schedule_word, I64(compiled))


#: tiles of at least this many elements are decoded in 32-bit arithmetic: an output of 2^32 of
#: them would hold 2^40 elements (a terabyte or more), more than any GPU's memory, so every tile
#: index fits. A 64-bit division by a run-time value is a subroutine call, and a call in a wgmma
#: kernel makes ptxas serialise its mmas (warning C7509); a 32-bit one is a short inline sequence
NARROW_DECODE_ELEMENTS = 1 << 8


def emit_tile_of_block(b: lir.IRBuilder, linear: lir.Value, counts: Sequence[lir.Value],
                       group: lir.Value | None = None, *, narrow: bool = False) -> list[lir.Value]:
    """:func:`tile_of_block` in IR, for ``linear`` below the number of tiles: the tile's index per
    axis (i64). ``group`` (rows per band, at least 1) applies :func:`grouped` to a 2-D grid.
    ``narrow``: the tile ids fit in 32 bits (see :data:`NARROW_DECODE_ELEMENTS`); decode in i32."""
    if narrow:
        if group is not None:   # at most the rows of tiles, so that a band's tiles fit too
            group = b.trunc(b.select(b.icmp_unsigned(">", group, counts[0]), counts[0], group), I32)
        ids = emit_tile_of_block(b, b.trunc(linear, I32), [b.trunc(n, I32) for n in counts], group)
        return [b.zext(i, I64) for i in ids]
    if len(counts) == 2:
        return _emit_unless_one_column(b, linear, counts, group)
    return _emit_row_major(b, linear, counts)


def _emit_unless_one_column(b: lir.IRBuilder, linear: lir.Value, counts: Sequence[lir.Value],
                            group: lir.Value | None) -> list[lir.Value]:
    """A 2-D grid of one tile column (whole rows a tile) is ``(linear, 0)`` in either order: a
    uniform branch skips the two run-time divisions of the decode."""
    ty = linear.type
    with b.if_else(b.icmp_unsigned("==", counts[1], lir.Constant(ty, 1)), likely=True) as (one_column, otherwise):
        with one_column:
            one_end = b.block
        with otherwise:
            ids = (emit_grouped(b, linear, counts[0], counts[1], group) if group is not None
                   else _emit_row_major(b, linear, counts))
            other_end = b.block
    merged = []
    for fast, slow in zip((linear, lir.Constant(ty, 0)), ids):
        phi = b.phi(ty)
        phi.add_incoming(fast, one_end)
        phi.add_incoming(slow, other_end)
        merged.append(phi)
    return merged


def _emit_row_major(b: lir.IRBuilder, linear: lir.Value, counts: Sequence[lir.Value]) -> list[lir.Value]:
    ids = []
    rest = linear
    for k, n in enumerate(reversed(counts)):
        if k == len(counts) - 1:
            ids.append(rest)     # the first axis takes what is left (below its count)
        else:
            ids.append(b.urem(rest, n))
            rest = b.udiv(rest, n)
    return ids[::-1]


def emit_grouped(b: lir.IRBuilder, linear: lir.Value, rows: lir.Value, cols: lir.Value,
                 group: lir.Value) -> list[lir.Value]:
    """:func:`grouped` in IR: [row, col] of block ``linear`` (``group`` >= 1; 1 is row order)."""
    per_band = b.mul(cols, group)
    first = b.mul(b.udiv(linear, per_band), group)
    left = b.sub(rows, first)
    height = b.select(b.icmp_unsigned("<", left, group), left, group)
    within = b.urem(linear, per_band)
    return [b.add(first, b.urem(within, height)), b.udiv(within, height)]


def _reg(b: lir.IRBuilder, name: str) -> lir.Value:
    return b.zext(sreg(b, name), I64)


__all__ = ["GROUP_ROWS", "NARROW_DECODE_ELEMENTS", "block_count", "emit_group", "emit_grouped", "emit_tile_of_block", "grouped",
           "linear_block_id", "persistent_blocks", "persistent_tiles", "tile_counts", "tile_of_block", "tile_total"]
