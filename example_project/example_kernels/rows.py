"""Row kernels: softmax, layernorm, rmsnorm and cross-entropy over the last axis of a 2-D array.

Each kernel takes f32, bf16 or f16 (inputs and outputs in that type, statistics
in f32; the dtype variable ``T``). Two ways through a row, by the tile's length:

* **held** (tiles of up to ``HELD_COLS`` columns): one block owns a tile of
  whole rows and keeps it in registers, so each element is read from memory
  once and written once. Short rows take several rows a tile, which keeps the
  grid small for ~1 GiB inputs. A row longer than its tile (the tile spans
  part of it) streams the rest of the row for the statistics, in chunks of a
  quarter tile, then reads its own tile again to write it.
* **streamed** (longer tiles, ``[1, STREAMED_COLS]``): one block owns the
  whole row and walks it twice in chunks of ``STREAM_CHUNK`` columns, the
  next chunk's load in flight while one is folded in: once for the
  statistics, once to write. The second walk goes from the row's end back
  to its start: the chunks read last are the likeliest to be in L2 still (on
  an H200, 1-10% faster than walking forward again). Each element slot of a
  chunk keeps its own running statistics, so the first pass needs no
  reduction until its end.

    from buildtile import tile
    from example_kernels import rows

    rows.softmax(x, tile.partition(z, [4, 1024])).sync_on(stream)   # f32 rows of up to 1024

Cross-entropy writes one loss a row, ``logsumexp(logits) - logits[target]``,
walking each row once in chunks of ``CE_CHUNK // rows`` columns.
"""

import math

from buildtile import tile
from buildtile.types import Tensor, bf16, f16, f32, i64

T = tile.dtype_var("T", f32, bf16, f16)

LOG2E = 1.4426950408889634
#: a row over several held tiles: the other tiles are streamed in chunks of this fraction of a tile
#: (registers hold the block's own tile and one chunk)
STREAM_SPLIT = 4
#: the longest tile held in registers; longer ones are streamed
HELD_COLS = 32768
#: the tile of the streamed way, and the columns it walks a step
STREAMED_COLS = 65536
STREAM_CHUNK = 4096
#: elements of logits one block reads per step of the cross-entropy loop
CE_CHUNK = 8192
#: a slot's running maximum before it has seen an element: finite, so that padding (-inf)
#: against it gives no inf - inf, and below every finite logit in log2 units
SLOT_FLOOR = -3.0e38

#: the tile shapes each row kernel is compiled for, by element size and row length. 16-bit rows
#: take no more elements a tile than f32 rows do: they are computed in f32, so a larger tile
#: fills the registers and leaves one block an SM, whose loads then stop during its reductions
#: (measured on an H200: 64 x 256 and 4 x 4096 bf16 tiles ran 10-50% slower)
ROW_TILES = {
    4: {256: (32, 256), 1024: (4, 1024), 4096: (2, 4096), 16384: (1, 16384), 32768: (1, 32768),
        65536: (1, STREAMED_COLS)},
    2: {256: (32, 256), 1024: (4, 1024), 4096: (1, 4096), 16384: (1, 16384), 32768: (1, 32768),
        65536: (1, STREAMED_COLS)},
}
#: rows of a cross-entropy tile, by row length (chunks of CE_CHUNK // rows columns)
LOSS_ROWS = {256: 32, 1024: 8, 4096: 2, 8192: 1}

#: the specialisations, as ROW_TILES and LOSS_ROWS list them (written out: the build reads them
#: without running the module)
ROW_SPECS = [
    {"z": [32, 256], "T": f32}, {"z": [4, 1024], "T": f32}, {"z": [2, 4096], "T": f32},
    {"z": [1, 16384], "T": f32}, {"z": [1, 32768], "T": f32}, {"z": [1, 65536], "T": f32},
    {"z": [32, 256], "T": bf16}, {"z": [4, 1024], "T": bf16}, {"z": [1, 4096], "T": bf16},
    {"z": [1, 16384], "T": bf16}, {"z": [1, 32768], "T": bf16}, {"z": [1, 65536], "T": bf16},
    {"z": [32, 256], "T": f16}, {"z": [4, 1024], "T": f16}, {"z": [1, 4096], "T": f16},
    {"z": [1, 16384], "T": f16}, {"z": [1, 32768], "T": f16}, {"z": [1, 65536], "T": f16},
]
LOSS_SPECS = [
    {"loss": [32], "T": f32}, {"loss": [8], "T": f32}, {"loss": [2], "T": f32}, {"loss": [1], "T": f32},
    {"loss": [32], "T": bf16}, {"loss": [8], "T": bf16}, {"loss": [2], "T": bf16}, {"loss": [1], "T": bf16},
    {"loss": [32], "T": f16}, {"loss": [8], "T": f16}, {"loss": [2], "T": f16}, {"loss": [1], "T": f16},
]


# ------------------------------------------------------------------ shared steps


@tile.function
def logsumexp_step(top, total, chunk):
    """Fold ``chunk`` (log2 units) into each slot's running maximum ``top`` and sum of
    exponentials ``total`` (relative to ``top``), with one exponential an element: of the smaller
    of (value, maximum) less the larger, which rescales the sum when the maximum moves and adds
    the element's share otherwise."""
    gap = chunk - top
    share = tile.exp2(-tile.abs(gap))
    grown = tile.where(gap > 0.0, total * share + 1.0, total + share)
    return tile.maximum(top, chunk), grown


@tile.function
def logsumexp_rows(top, total):
    """Each row's maximum and sum of exponentials relative to it, from its slots'."""
    row_top = tile.max(top, axis=1)
    return row_top, tile.sum(total * tile.exp2(top - row_top[:, None]), axis=1)


# ------------------------------------------------------------------ softmax


@tile.kernel(specialize=ROW_SPECS, requires=["x.shape[0] == z.shape[0]", "x.shape[1] == z.shape[1]"])
def softmax(x: Tensor[T, 2], z: tile.Out[T, 2]):
    """Softmax of each row."""
    rows, cols = z.tile_shape
    i, j = z.tile_id(0), z.tile_id(1)
    if cols > HELD_COLS:
        top = tile.full((rows, STREAM_CHUNK), SLOT_FLOOR, f32)
        total = tile.zeros((rows, STREAM_CHUNK), f32)
        part = tile.load(x, (i, 0), (rows, STREAM_CHUNK), padding=-math.inf)
        for k in tile.range(tile.cdiv(x.shape[1], STREAM_CHUNK)):
            ahead = tile.load(x, (i, k + 1), (rows, STREAM_CHUNK), padding=-math.inf)    # in flight meanwhile
            top, total = logsumexp_step(top, total, part.astype(f32) * LOG2E)
            part = ahead
        row_top, row_total = logsumexp_rows(top, total)
        scale = 1.0 / row_total
        chunks = cols // STREAM_CHUNK
        first = j * chunks
        for k in tile.range(chunks):
            back = first + chunks - 1 - k      # the row's end first: its chunks are likeliest in L2
            t = tile.load(x, (i, back), (rows, STREAM_CHUNK)).astype(f32) * LOG2E
            tile.store(z, (i, back), (tile.exp2(t - row_top[:, None]) * scale[:, None]).astype(T))
    else:
        t = tile.load_like(x, z, padding=-math.inf).astype(f32) * LOG2E
        top = tile.max(t, axis=1)
        if z.num_tiles(1) == 1:
            e = tile.exp2(t - top[:, None])
            z.store((e * (1.0 / tile.sum(e, axis=1))[:, None]).astype(T))
        else:
            total = tile.sum(tile.exp2(t - top[:, None]), axis=1)
            for k in tile.range(tile.cdiv(x.shape[1], cols // STREAM_SPLIT)):
                if k // STREAM_SPLIT != j:
                    part = tile.load(x, (i, k), (rows, cols // STREAM_SPLIT), padding=-math.inf).astype(f32) * LOG2E
                    new_top = tile.maximum(top, tile.max(part, axis=1))
                    total = total * tile.exp2(top - new_top) + tile.sum(tile.exp2(part - new_top[:, None]), axis=1)
                    top = new_top
            own = tile.load_like(x, z).astype(f32) * LOG2E
            z.store((tile.exp2(own - top[:, None]) * (1.0 / total)[:, None]).astype(T))


# ------------------------------------------------------------------ layernorm


@tile.kernel(specialize=ROW_SPECS,
             requires=["x.shape[0] == z.shape[0]", "x.shape[1] == z.shape[1]", "weight.shape[0] == z.shape[1]",
                       "bias.shape[0] == z.shape[1]"])
def layernorm(x: Tensor[T, 2], weight: Tensor[T, 1], bias: Tensor[T, 1], eps: f32, z: tile.Out[T, 2]):
    """Layer normalisation of each row, then a per-column weight and bias. One pass of
    statistics: the sum and the sum of squares of the row less its first element (a shift
    that keeps the variance exact for rows far from zero)."""
    rows, cols = z.tile_shape
    n = x.shape[1]
    i, j = z.tile_id(0), z.tile_id(1)
    shift = tile.load(x, (i, 0), (rows, 1)).astype(f32)
    if cols > HELD_COLS:
        sums = tile.zeros((rows, STREAM_CHUNK), f32)
        squares = tile.zeros((rows, STREAM_CHUNK), f32)
        part = tile.load(x, (i, 0), (rows, STREAM_CHUNK))
        for k in tile.range(tile.cdiv(n, STREAM_CHUNK)):
            ahead = tile.load(x, (i, k + 1), (rows, STREAM_CHUNK))    # in flight meanwhile
            within = tile.arange(STREAM_CHUNK)[None, :] + k * STREAM_CHUNK < n
            e = tile.where(within, part.astype(f32) - shift, 0.0)
            sums = sums + e
            squares = squares + e * e
            part = ahead
        mean = tile.sum(sums, axis=1) / n
        rstd = tile.rsqrt(tile.maximum(tile.sum(squares, axis=1) / n - mean * mean, 0.0) + eps)
        chunks = cols // STREAM_CHUNK
        first = j * chunks
        for k in tile.range(chunks):
            back = first + chunks - 1 - k      # the row's end first: its chunks are likeliest in L2
            d = tile.load(x, (i, back), (rows, STREAM_CHUNK)).astype(f32) - shift
            w = tile.load(weight, (back,), (STREAM_CHUNK,)).astype(f32)
            b = tile.load(bias, (back,), (STREAM_CHUNK,)).astype(f32)
            tile.store(z, (i, back), ((d - mean[:, None]) * rstd[:, None] * w[None, :] + b[None, :]).astype(T))
    else:
        inside = tile.arange(cols)[None, :] + j * cols < n
        d = tile.where(inside, tile.load_like(x, z).astype(f32) - shift, 0.0)
        s1 = tile.sum(d, axis=1)
        s2 = tile.sum(d * d, axis=1)
        if z.num_tiles(1) > 1:
            for k in tile.range(tile.cdiv(n, cols // STREAM_SPLIT)):
                if k // STREAM_SPLIT != j:
                    within = tile.arange(cols // STREAM_SPLIT)[None, :] + k * (cols // STREAM_SPLIT) < n
                    e = tile.where(within, tile.load(x, (i, k), (rows, cols // STREAM_SPLIT)).astype(f32) - shift,
                                   0.0)
                    s1 = s1 + tile.sum(e, axis=1)
                    s2 = s2 + tile.sum(e * e, axis=1)
            d = tile.load_like(x, z).astype(f32) - shift
        mean = s1 / n
        rstd = tile.rsqrt(tile.maximum(s2 / n - mean * mean, 0.0) + eps)
        w = tile.load(weight, (j,), (cols,)).astype(f32)
        b = tile.load(bias, (j,), (cols,)).astype(f32)
        z.store(((d - mean[:, None]) * rstd[:, None] * w[None, :] + b[None, :]).astype(T))


# ------------------------------------------------------------------ rmsnorm


@tile.kernel(specialize=ROW_SPECS,
             requires=["x.shape[0] == z.shape[0]", "x.shape[1] == z.shape[1]", "weight.shape[0] == z.shape[1]"])
def rmsnorm(x: Tensor[T, 2], weight: Tensor[T, 1], eps: f32, z: tile.Out[T, 2]):
    """Each row divided by its root mean square, then a per-column weight."""
    rows, cols = z.tile_shape
    i, j = z.tile_id(0), z.tile_id(1)
    if cols > HELD_COLS:
        squares = tile.zeros((rows, STREAM_CHUNK), f32)
        part = tile.load(x, (i, 0), (rows, STREAM_CHUNK))
        for k in tile.range(tile.cdiv(x.shape[1], STREAM_CHUNK)):
            ahead = tile.load(x, (i, k + 1), (rows, STREAM_CHUNK))    # in flight meanwhile
            e = part.astype(f32)
            squares = squares + e * e
            part = ahead
        scale = tile.rsqrt(tile.sum(squares, axis=1) / x.shape[1] + eps)
        chunks = cols // STREAM_CHUNK
        first = j * chunks
        for k in tile.range(chunks):
            back = first + chunks - 1 - k      # the row's end first: its chunks are likeliest in L2
            t = tile.load(x, (i, back), (rows, STREAM_CHUNK)).astype(f32)
            w = tile.load(weight, (back,), (STREAM_CHUNK,)).astype(f32)
            tile.store(z, (i, back), (t * scale[:, None] * w[None, :]).astype(T))
    else:
        t = tile.load_like(x, z).astype(f32)
        squares = tile.sum(t * t, axis=1)
        if z.num_tiles(1) > 1:
            for k in tile.range(tile.cdiv(x.shape[1], cols // STREAM_SPLIT)):
                if k // STREAM_SPLIT != j:
                    part = tile.load(x, (i, k), (rows, cols // STREAM_SPLIT)).astype(f32)
                    squares = squares + tile.sum(part * part, axis=1)
            t = tile.load_like(x, z).astype(f32)
        w = tile.load(weight, (j,), (cols,)).astype(f32)
        z.store((t * tile.rsqrt(squares / x.shape[1] + eps)[:, None] * w[None, :]).astype(T))


# ------------------------------------------------------------------ cross-entropy


@tile.kernel(specialize=LOSS_SPECS,
             requires=["logits.shape[0] == loss.shape[0]", "target.shape[0] == loss.shape[0]"])
def cross_entropy(logits: Tensor[T, 2], target: Tensor[i64, 1], loss: tile.Out[f32, 1]):
    """``logsumexp(logits[r]) - logits[r, target[r]]`` for each row ``r``, reading the row once.
    A row that fits the block's tile of ``CE_CHUNK // rows`` columns is held: one load, its
    maximum, its sum of exponentials. A longer row is streamed in chunks of a quarter tile,
    the next chunk's load in flight while one is folded in (:func:`logsumexp_step`); the
    slots are combined once, after the loop. The target's logit is gathered last. A target
    outside ``[0, logits.shape[1])`` picks nothing (the loss is the logsumexp)."""
    rows = loss.tile_shape[0]
    cols = CE_CHUNK // rows
    step = cols // STREAM_SPLIT
    i = loss.tile_id(0)
    if logits.shape[1] <= cols:
        t = tile.load(logits, (i, 0), (rows, cols), padding=-math.inf).astype(f32) * LOG2E
        row_top = tile.max(t, axis=1)
        row_total = tile.sum(tile.exp2(t - row_top[:, None]), axis=1)
    else:
        top = tile.full((rows, step), SLOT_FLOOR, f32)      # per slot, in log2 units
        total = tile.zeros((rows, step), f32)               # relative to the slot's top
        part = tile.load(logits, (i, 0), (rows, step), padding=-math.inf)
        for k in tile.range(tile.cdiv(logits.shape[1], step)):
            ahead = tile.load(logits, (i, k + 1), (rows, step), padding=-math.inf)    # in flight meanwhile
            top, total = logsumexp_step(top, total, part.astype(f32) * LOG2E)
            part = ahead
        row_top, row_total = logsumexp_rows(top, total)
    row = tile.arange(rows, i64) + i * rows
    want = tile.load(target, (i,), (rows,))
    picked = tile.gather(logits, (row, want)).astype(f32)
    loss.store((row_top + tile.log2(row_total)) * (1.0 / LOG2E) - picked)
