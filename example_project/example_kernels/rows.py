"""Row kernels: softmax, layernorm, rmsnorm and cross-entropy over the last axis of a 2-D array.

Each comes in f32, bf16 and f16 (inputs and outputs in that type, statistics
in f32) with identical bodies. One block owns a tile of whole rows and keeps
it in registers, so each element is read from memory once and written once;
the specialisations cover rows of 256 to 32,768 elements (more rows a tile
for short rows, which keeps the grid within its limits for ~1 GiB inputs).
A row longer than the largest tile spans several tiles: each block then
streams the rest of the row for the statistics, in chunks of a quarter
tile, with a running maximum (softmax, cross-entropy) or running sums, then
reads its own tile again to write it (the blocks of one row run together,
so those reads mostly hit L2).

    from buildtile import tile
    from example_kernels import rows

    rows.softmax_f32(x, tile.partition(z, [4, 1024])).sync_on(stream)   # rows of up to 1024

Cross-entropy writes one loss a row, ``logsumexp(logits) - logits[target]``,
walking each row once in chunks of ``CE_CHUNK // rows`` columns.
"""

import math

from buildtile import tile
from buildtile.types import Tensor, bf16, f16, f32, i32, i64

LOG2E = 1.4426950408889634
#: a row over several tiles: the other tiles are streamed in chunks of this fraction of a tile
#: (registers hold the block's own tile and one chunk)
STREAM_SPLIT = 4
#: elements of logits one block reads per step of the cross-entropy loop
CE_CHUNK = 8192
#: a cross-entropy slot's maximum before it has seen an element: finite, so that padding
#: (-inf) against it gives no inf - inf, and below every finite logit in log2 units
SLOT_FLOOR = -3.0e38

#: the tile shapes each kernel is compiled for, by row length (the decorators spell them out)
ROW_TILES = {
    4: {256: (32, 256), 1024: (4, 1024), 4096: (2, 4096), 16384: (1, 16384), 32768: (1, 32768)},
    2: {256: (64, 256), 1024: (8, 1024), 4096: (4, 4096), 16384: (1, 16384), 32768: (1, 32768)},
}
#: rows of a cross-entropy tile, by row length (chunks of CE_CHUNK // rows columns)
LOSS_ROWS = {256: 32, 1024: 8, 4096: 2, 8192: 1}


@tile.kernel(specialize=[{"z": [32, 256]}, {"z": [4, 1024]}, {"z": [2, 4096]}, {"z": [1, 16384]}, {"z": [1, 32768]}],
             requires=["x.shape[0] == z.shape[0]", "x.shape[1] == z.shape[1]"])
def softmax_f32(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
    """Softmax of each row."""
    rows, cols = z.tile_shape
    t = tile.load_like(x, z, padding=-math.inf).astype(f32) * LOG2E
    top = tile.max(t, axis=1)
    if z.num_tiles(1) == 1:
        e = tile.exp2(t - top[:, None])
        z.store((e * (1.0 / tile.sum(e, axis=1))[:, None]).astype(f32))
    else:
        i, j = z.tile_id(0), z.tile_id(1)
        total = tile.sum(tile.exp2(t - top[:, None]), axis=1)
        for k in tile.range(tile.cdiv(x.shape[1], cols // STREAM_SPLIT)):
            if k // STREAM_SPLIT != j:
                part = tile.load(x, (i, k), (rows, cols // STREAM_SPLIT), padding=-math.inf).astype(f32) * LOG2E
                new_top = tile.maximum(top, tile.max(part, axis=1))
                total = total * tile.exp2(top - new_top) + tile.sum(tile.exp2(part - new_top[:, None]), axis=1)
                top = new_top
        own = tile.load_like(x, z).astype(f32) * LOG2E
        z.store((tile.exp2(own - top[:, None]) * (1.0 / total)[:, None]).astype(f32))


@tile.kernel(specialize=[{"z": [64, 256]}, {"z": [8, 1024]}, {"z": [4, 4096]}, {"z": [1, 16384]}, {"z": [1, 32768]}],
             requires=["x.shape[0] == z.shape[0]", "x.shape[1] == z.shape[1]"])
def softmax_bf16(x: Tensor[bf16, 2], z: tile.Out[bf16, 2]):
    """Softmax of each row."""
    rows, cols = z.tile_shape
    t = tile.load_like(x, z, padding=-math.inf).astype(f32) * LOG2E
    top = tile.max(t, axis=1)
    if z.num_tiles(1) == 1:
        e = tile.exp2(t - top[:, None])
        z.store((e * (1.0 / tile.sum(e, axis=1))[:, None]).astype(bf16))
    else:
        i, j = z.tile_id(0), z.tile_id(1)
        total = tile.sum(tile.exp2(t - top[:, None]), axis=1)
        for k in tile.range(tile.cdiv(x.shape[1], cols // STREAM_SPLIT)):
            if k // STREAM_SPLIT != j:
                part = tile.load(x, (i, k), (rows, cols // STREAM_SPLIT), padding=-math.inf).astype(f32) * LOG2E
                new_top = tile.maximum(top, tile.max(part, axis=1))
                total = total * tile.exp2(top - new_top) + tile.sum(tile.exp2(part - new_top[:, None]), axis=1)
                top = new_top
        own = tile.load_like(x, z).astype(f32) * LOG2E
        z.store((tile.exp2(own - top[:, None]) * (1.0 / total)[:, None]).astype(bf16))


@tile.kernel(specialize=[{"z": [64, 256]}, {"z": [8, 1024]}, {"z": [4, 4096]}, {"z": [1, 16384]}, {"z": [1, 32768]}],
             requires=["x.shape[0] == z.shape[0]", "x.shape[1] == z.shape[1]"])
def softmax_f16(x: Tensor[f16, 2], z: tile.Out[f16, 2]):
    """Softmax of each row."""
    rows, cols = z.tile_shape
    t = tile.load_like(x, z, padding=-math.inf).astype(f32) * LOG2E
    top = tile.max(t, axis=1)
    if z.num_tiles(1) == 1:
        e = tile.exp2(t - top[:, None])
        z.store((e * (1.0 / tile.sum(e, axis=1))[:, None]).astype(f16))
    else:
        i, j = z.tile_id(0), z.tile_id(1)
        total = tile.sum(tile.exp2(t - top[:, None]), axis=1)
        for k in tile.range(tile.cdiv(x.shape[1], cols // STREAM_SPLIT)):
            if k // STREAM_SPLIT != j:
                part = tile.load(x, (i, k), (rows, cols // STREAM_SPLIT), padding=-math.inf).astype(f32) * LOG2E
                new_top = tile.maximum(top, tile.max(part, axis=1))
                total = total * tile.exp2(top - new_top) + tile.sum(tile.exp2(part - new_top[:, None]), axis=1)
                top = new_top
        own = tile.load_like(x, z).astype(f32) * LOG2E
        z.store((tile.exp2(own - top[:, None]) * (1.0 / total)[:, None]).astype(f16))


@tile.kernel(specialize=[{"z": [32, 256]}, {"z": [4, 1024]}, {"z": [2, 4096]}, {"z": [1, 16384]}, {"z": [1, 32768]}],
             requires=["x.shape[0] == z.shape[0]", "x.shape[1] == z.shape[1]", "weight.shape[0] == z.shape[1]",
                       "bias.shape[0] == z.shape[1]"])
def layernorm_f32(x: Tensor[f32, 2], weight: Tensor[f32, 1], bias: Tensor[f32, 1], eps: f32,
                  z: tile.Out[f32, 2]):
    """Layer normalisation of each row, then a per-column weight and bias. One pass of
    statistics: the sum and the sum of squares of the row less its first element (a shift
    that keeps the variance exact for rows far from zero)."""
    rows, cols = z.tile_shape
    n = x.shape[1]
    i, j = z.tile_id(0), z.tile_id(1)
    shift = tile.load(x, (i, 0), (rows, 1)).astype(f32)
    inside = tile.arange(cols)[None, :] + j * cols < n
    d = tile.where(inside, tile.load_like(x, z).astype(f32) - shift, 0.0)
    s1 = tile.sum(d, axis=1)
    s2 = tile.sum(d * d, axis=1)
    if z.num_tiles(1) > 1:
        for k in tile.range(tile.cdiv(n, cols // STREAM_SPLIT)):
            if k // STREAM_SPLIT != j:
                within = tile.arange(cols // STREAM_SPLIT)[None, :] + k * (cols // STREAM_SPLIT) < n
                e = tile.where(within, tile.load(x, (i, k), (rows, cols // STREAM_SPLIT)).astype(f32) - shift, 0.0)
                s1 = s1 + tile.sum(e, axis=1)
                s2 = s2 + tile.sum(e * e, axis=1)
        d = tile.load_like(x, z).astype(f32) - shift
    mean = s1 / n
    rstd = tile.rsqrt(tile.maximum(s2 / n - mean * mean, 0.0) + eps)
    w = tile.load(weight, (j,), (cols,)).astype(f32)
    b = tile.load(bias, (j,), (cols,)).astype(f32)
    z.store(((d - mean[:, None]) * rstd[:, None] * w[None, :] + b[None, :]).astype(f32))


@tile.kernel(specialize=[{"z": [64, 256]}, {"z": [8, 1024]}, {"z": [4, 4096]}, {"z": [1, 16384]}, {"z": [1, 32768]}],
             requires=["x.shape[0] == z.shape[0]", "x.shape[1] == z.shape[1]", "weight.shape[0] == z.shape[1]",
                       "bias.shape[0] == z.shape[1]"])
def layernorm_bf16(x: Tensor[bf16, 2], weight: Tensor[bf16, 1], bias: Tensor[bf16, 1], eps: f32,
                  z: tile.Out[bf16, 2]):
    """Layer normalisation of each row, then a per-column weight and bias. One pass of
    statistics: the sum and the sum of squares of the row less its first element (a shift
    that keeps the variance exact for rows far from zero)."""
    rows, cols = z.tile_shape
    n = x.shape[1]
    i, j = z.tile_id(0), z.tile_id(1)
    shift = tile.load(x, (i, 0), (rows, 1)).astype(f32)
    inside = tile.arange(cols)[None, :] + j * cols < n
    d = tile.where(inside, tile.load_like(x, z).astype(f32) - shift, 0.0)
    s1 = tile.sum(d, axis=1)
    s2 = tile.sum(d * d, axis=1)
    if z.num_tiles(1) > 1:
        for k in tile.range(tile.cdiv(n, cols // STREAM_SPLIT)):
            if k // STREAM_SPLIT != j:
                within = tile.arange(cols // STREAM_SPLIT)[None, :] + k * (cols // STREAM_SPLIT) < n
                e = tile.where(within, tile.load(x, (i, k), (rows, cols // STREAM_SPLIT)).astype(f32) - shift, 0.0)
                s1 = s1 + tile.sum(e, axis=1)
                s2 = s2 + tile.sum(e * e, axis=1)
        d = tile.load_like(x, z).astype(f32) - shift
    mean = s1 / n
    rstd = tile.rsqrt(tile.maximum(s2 / n - mean * mean, 0.0) + eps)
    w = tile.load(weight, (j,), (cols,)).astype(f32)
    b = tile.load(bias, (j,), (cols,)).astype(f32)
    z.store(((d - mean[:, None]) * rstd[:, None] * w[None, :] + b[None, :]).astype(bf16))


@tile.kernel(specialize=[{"z": [64, 256]}, {"z": [8, 1024]}, {"z": [4, 4096]}, {"z": [1, 16384]}, {"z": [1, 32768]}],
             requires=["x.shape[0] == z.shape[0]", "x.shape[1] == z.shape[1]", "weight.shape[0] == z.shape[1]",
                       "bias.shape[0] == z.shape[1]"])
def layernorm_f16(x: Tensor[f16, 2], weight: Tensor[f16, 1], bias: Tensor[f16, 1], eps: f32,
                  z: tile.Out[f16, 2]):
    """Layer normalisation of each row, then a per-column weight and bias. One pass of
    statistics: the sum and the sum of squares of the row less its first element (a shift
    that keeps the variance exact for rows far from zero)."""
    rows, cols = z.tile_shape
    n = x.shape[1]
    i, j = z.tile_id(0), z.tile_id(1)
    shift = tile.load(x, (i, 0), (rows, 1)).astype(f32)
    inside = tile.arange(cols)[None, :] + j * cols < n
    d = tile.where(inside, tile.load_like(x, z).astype(f32) - shift, 0.0)
    s1 = tile.sum(d, axis=1)
    s2 = tile.sum(d * d, axis=1)
    if z.num_tiles(1) > 1:
        for k in tile.range(tile.cdiv(n, cols // STREAM_SPLIT)):
            if k // STREAM_SPLIT != j:
                within = tile.arange(cols // STREAM_SPLIT)[None, :] + k * (cols // STREAM_SPLIT) < n
                e = tile.where(within, tile.load(x, (i, k), (rows, cols // STREAM_SPLIT)).astype(f32) - shift, 0.0)
                s1 = s1 + tile.sum(e, axis=1)
                s2 = s2 + tile.sum(e * e, axis=1)
        d = tile.load_like(x, z).astype(f32) - shift
    mean = s1 / n
    rstd = tile.rsqrt(tile.maximum(s2 / n - mean * mean, 0.0) + eps)
    w = tile.load(weight, (j,), (cols,)).astype(f32)
    b = tile.load(bias, (j,), (cols,)).astype(f32)
    z.store(((d - mean[:, None]) * rstd[:, None] * w[None, :] + b[None, :]).astype(f16))


@tile.kernel(specialize=[{"z": [32, 256]}, {"z": [4, 1024]}, {"z": [2, 4096]}, {"z": [1, 16384]}, {"z": [1, 32768]}],
             requires=["x.shape[0] == z.shape[0]", "x.shape[1] == z.shape[1]", "weight.shape[0] == z.shape[1]"])
def rmsnorm_f32(x: Tensor[f32, 2], weight: Tensor[f32, 1], eps: f32, z: tile.Out[f32, 2]):
    """Each row divided by its root mean square, then a per-column weight."""
    rows, cols = z.tile_shape
    i, j = z.tile_id(0), z.tile_id(1)
    t = tile.load_like(x, z).astype(f32)
    squares = tile.sum(t * t, axis=1)
    if z.num_tiles(1) > 1:
        for k in tile.range(tile.cdiv(x.shape[1], cols // STREAM_SPLIT)):
            if k // STREAM_SPLIT != j:
                part = tile.load(x, (i, k), (rows, cols // STREAM_SPLIT)).astype(f32)
                squares = squares + tile.sum(part * part, axis=1)
        t = tile.load_like(x, z).astype(f32)
    w = tile.load(weight, (j,), (cols,)).astype(f32)
    z.store((t * tile.rsqrt(squares / x.shape[1] + eps)[:, None] * w[None, :]).astype(f32))


@tile.kernel(specialize=[{"z": [64, 256]}, {"z": [8, 1024]}, {"z": [4, 4096]}, {"z": [1, 16384]}, {"z": [1, 32768]}],
             requires=["x.shape[0] == z.shape[0]", "x.shape[1] == z.shape[1]", "weight.shape[0] == z.shape[1]"])
def rmsnorm_bf16(x: Tensor[bf16, 2], weight: Tensor[bf16, 1], eps: f32, z: tile.Out[bf16, 2]):
    """Each row divided by its root mean square, then a per-column weight."""
    rows, cols = z.tile_shape
    i, j = z.tile_id(0), z.tile_id(1)
    t = tile.load_like(x, z).astype(f32)
    squares = tile.sum(t * t, axis=1)
    if z.num_tiles(1) > 1:
        for k in tile.range(tile.cdiv(x.shape[1], cols // STREAM_SPLIT)):
            if k // STREAM_SPLIT != j:
                part = tile.load(x, (i, k), (rows, cols // STREAM_SPLIT)).astype(f32)
                squares = squares + tile.sum(part * part, axis=1)
        t = tile.load_like(x, z).astype(f32)
    w = tile.load(weight, (j,), (cols,)).astype(f32)
    z.store((t * tile.rsqrt(squares / x.shape[1] + eps)[:, None] * w[None, :]).astype(bf16))


@tile.kernel(specialize=[{"z": [64, 256]}, {"z": [8, 1024]}, {"z": [4, 4096]}, {"z": [1, 16384]}, {"z": [1, 32768]}],
             requires=["x.shape[0] == z.shape[0]", "x.shape[1] == z.shape[1]", "weight.shape[0] == z.shape[1]"])
def rmsnorm_f16(x: Tensor[f16, 2], weight: Tensor[f16, 1], eps: f32, z: tile.Out[f16, 2]):
    """Each row divided by its root mean square, then a per-column weight."""
    rows, cols = z.tile_shape
    i, j = z.tile_id(0), z.tile_id(1)
    t = tile.load_like(x, z).astype(f32)
    squares = tile.sum(t * t, axis=1)
    if z.num_tiles(1) > 1:
        for k in tile.range(tile.cdiv(x.shape[1], cols // STREAM_SPLIT)):
            if k // STREAM_SPLIT != j:
                part = tile.load(x, (i, k), (rows, cols // STREAM_SPLIT)).astype(f32)
                squares = squares + tile.sum(part * part, axis=1)
        t = tile.load_like(x, z).astype(f32)
    w = tile.load(weight, (j,), (cols,)).astype(f32)
    z.store((t * tile.rsqrt(squares / x.shape[1] + eps)[:, None] * w[None, :]).astype(f16))


@tile.kernel(specialize=[{"loss": [32]}, {"loss": [8]}, {"loss": [2]}, {"loss": [1]}],
             requires=["logits.shape[0] == loss.shape[0]", "target.shape[0] == loss.shape[0]"])
def cross_entropy_f32(logits: Tensor[f32, 2], target: Tensor[i64, 1], loss: tile.Out[f32, 1]):
    """``logsumexp(logits[r]) - logits[r, target[r]]`` for each row ``r``, in one pass over
    chunks of the row, the next chunk's load in flight while one is summed. Each element slot
    of a chunk keeps its own running maximum and sum of exponentials, so the loop needs no
    reduction, and takes one exponential an element: of the smaller of (its value, its
    maximum) less the larger, which rescales the sum when the maximum moves and adds the
    element's share otherwise. The slots are combined once, after the loop, and the target's
    logit is gathered then. A target outside ``[0, logits.shape[1])`` picks nothing (the
    loss is the logsumexp)."""
    rows = loss.tile_shape[0]
    cols = CE_CHUNK // rows
    i = loss.tile_id(0)
    top = tile.full((rows, cols), SLOT_FLOOR, f32)      # per slot, in log2 units
    total = tile.zeros((rows, cols), f32)               # relative to the slot's top
    part = tile.load(logits, (i, 0), (rows, cols), padding=-math.inf)
    for k in tile.range(tile.cdiv(logits.shape[1], cols)):
        ahead = tile.load(logits, (i, k + 1), (rows, cols), padding=-math.inf)    # in flight meanwhile
        chunk = part.astype(f32) * LOG2E
        gap = chunk - top
        share = tile.exp2(-tile.abs(gap))
        total = tile.where(gap > 0.0, total * share + 1.0, total + share)
        top = tile.maximum(top, chunk)
        part = ahead
    row_top = tile.max(top, axis=1)
    row_total = tile.sum(total * tile.exp2(top - row_top[:, None]), axis=1)
    row = tile.arange(rows, i64) + i * rows
    want = tile.load(target, (i,), (rows,))
    picked = tile.gather(logits, (row, want)).astype(f32)
    loss.store((row_top + tile.log2(row_total)) * (1.0 / LOG2E) - picked)


@tile.kernel(specialize=[{"loss": [32]}, {"loss": [8]}, {"loss": [2]}, {"loss": [1]}],
             requires=["logits.shape[0] == loss.shape[0]", "target.shape[0] == loss.shape[0]"])
def cross_entropy_bf16(logits: Tensor[bf16, 2], target: Tensor[i64, 1], loss: tile.Out[f32, 1]):
    """``logsumexp(logits[r]) - logits[r, target[r]]`` for each row ``r``, in one pass over
    chunks of the row, the next chunk's load in flight while one is summed. Each element slot
    of a chunk keeps its own running maximum and sum of exponentials, so the loop needs no
    reduction, and takes one exponential an element: of the smaller of (its value, its
    maximum) less the larger, which rescales the sum when the maximum moves and adds the
    element's share otherwise. The slots are combined once, after the loop, and the target's
    logit is gathered then. A target outside ``[0, logits.shape[1])`` picks nothing (the
    loss is the logsumexp)."""
    rows = loss.tile_shape[0]
    cols = CE_CHUNK // rows
    i = loss.tile_id(0)
    top = tile.full((rows, cols), SLOT_FLOOR, f32)      # per slot, in log2 units
    total = tile.zeros((rows, cols), f32)               # relative to the slot's top
    part = tile.load(logits, (i, 0), (rows, cols), padding=-math.inf)
    for k in tile.range(tile.cdiv(logits.shape[1], cols)):
        ahead = tile.load(logits, (i, k + 1), (rows, cols), padding=-math.inf)    # in flight meanwhile
        chunk = part.astype(f32) * LOG2E
        gap = chunk - top
        share = tile.exp2(-tile.abs(gap))
        total = tile.where(gap > 0.0, total * share + 1.0, total + share)
        top = tile.maximum(top, chunk)
        part = ahead
    row_top = tile.max(top, axis=1)
    row_total = tile.sum(total * tile.exp2(top - row_top[:, None]), axis=1)
    row = tile.arange(rows, i64) + i * rows
    want = tile.load(target, (i,), (rows,))
    picked = tile.gather(logits, (row, want)).astype(f32)
    loss.store((row_top + tile.log2(row_total)) * (1.0 / LOG2E) - picked)


@tile.kernel(specialize=[{"loss": [32]}, {"loss": [8]}, {"loss": [2]}, {"loss": [1]}],
             requires=["logits.shape[0] == loss.shape[0]", "target.shape[0] == loss.shape[0]"])
def cross_entropy_f16(logits: Tensor[f16, 2], target: Tensor[i64, 1], loss: tile.Out[f32, 1]):
    """``logsumexp(logits[r]) - logits[r, target[r]]`` for each row ``r``, in one pass over
    chunks of the row, the next chunk's load in flight while one is summed. Each element slot
    of a chunk keeps its own running maximum and sum of exponentials, so the loop needs no
    reduction, and takes one exponential an element: of the smaller of (its value, its
    maximum) less the larger, which rescales the sum when the maximum moves and adds the
    element's share otherwise. The slots are combined once, after the loop, and the target's
    logit is gathered then. A target outside ``[0, logits.shape[1])`` picks nothing (the
    loss is the logsumexp)."""
    rows = loss.tile_shape[0]
    cols = CE_CHUNK // rows
    i = loss.tile_id(0)
    top = tile.full((rows, cols), SLOT_FLOOR, f32)      # per slot, in log2 units
    total = tile.zeros((rows, cols), f32)               # relative to the slot's top
    part = tile.load(logits, (i, 0), (rows, cols), padding=-math.inf)
    for k in tile.range(tile.cdiv(logits.shape[1], cols)):
        ahead = tile.load(logits, (i, k + 1), (rows, cols), padding=-math.inf)    # in flight meanwhile
        chunk = part.astype(f32) * LOG2E
        gap = chunk - top
        share = tile.exp2(-tile.abs(gap))
        total = tile.where(gap > 0.0, total * share + 1.0, total + share)
        top = tile.maximum(top, chunk)
        part = ahead
    row_top = tile.max(top, axis=1)
    row_total = tile.sum(total * tile.exp2(top - row_top[:, None]), axis=1)
    row = tile.arange(rows, i64) + i * rows
    want = tile.load(target, (i,), (rows,))
    picked = tile.gather(logits, (row, want)).astype(f32)
    loss.store((row_top + tile.log2(row_total)) * (1.0 / LOG2E) - picked)
