"""Kernels and NumPy references for the index and product reductions (``tile.argmax``,
``tile.argmin``, ``tile.prod``), run on the CPU emulator (tests/test_tile_reductions.py) and on a
GPU (tests/gpu/test_tile_reductions_on_gpu.py).

:func:`source` writes one kernel module with a copy of each kernel per element type (the padding
that keeps a ragged edge out of a reduction depends on it)."""

from __future__ import annotations

import numpy as np

from buildtile.runtime.dtypes import bf16_bits, bf16_values

DTYPES = ("f32", "f16", "bf16", "i32", "u8")
FLOATS = ("f32", "f16", "bf16")
NUMPY = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "i32": np.int32, "u8": np.uint8}
#: padding below (above) every value, so a ragged edge is never the maximum (minimum)
LOWEST = {"f32": "-math.inf", "f16": "-math.inf", "bf16": "-math.inf", "i32": "-2147483648", "u8": "0"}
HIGHEST = {"f32": "math.inf", "f16": "math.inf", "bf16": "math.inf", "i32": "2147483647", "u8": "255"}
#: (rows, cols) tiles of the row kernels: 4 rows of 1024 (each row inside a warp) and one row
#: of 4096 (spread over the block's warps, combined through shared memory)
ROW_TILES = ((4, 1024), (1, 4096))
#: columns a step of the streamed argmax loads
CHUNK = 256
#: rows of the column reduction's tile, which spans several warps along the reduced axis
COL_ROWS = 64


def source() -> str:
    out = ['"""Index and product reductions, one kernel per element type (generated)."""', "",
           "import math", "", "from buildtile import tile",
           "from buildtile.types import Tensor, bf16, f16, f32, i32, u8", "",
           f"CHUNK = {CHUNK}", ""]
    specs = ", ".join(f'{{"best": [{r}, 1], "worst": [{r}, 1], "product": [{r}, 1]}}' for r, _ in ROW_TILES)
    for d in DTYPES:
        low, high, one = LOWEST[d], HIGHEST[d], "1.0" if d in FLOATS else "1"
        out += [f'''
@tile.kernel(specialize=[{specs}])
def rows_{d}(x: Tensor[{d}, 2], best: tile.Out[i32, 2], worst: tile.Out[i32, 2], product: tile.Out[{d}, 2]):
    """Per row: the first position of its maximum, of its minimum, and the product of the row."""
    rows = best.tile_shape[0]
    cols = {ROW_TILES[0][1]} if rows == {ROW_TILES[0][0]} else {ROW_TILES[1][1]}
    row = best.tile_id(0)
    best.store(tile.argmax(tile.load(x, (row, 0), (rows, cols), padding={low}), axis=1, keepdims=True))
    worst.store(tile.load(x, (row, 0), (rows, cols), padding={high}).argmin(axis=-1, keepdims=True))
    product.store(tile.prod(tile.load(x, (row, 0), (rows, cols), padding={one}), axis=1, keepdims=True))


@tile.kernel(specialize=[{{"best": [32], "worst": [32]}}])
def cols_{d}(x: Tensor[{d}, 2], best: tile.Out[i32, 1], worst: tile.Out[i32, 1]):
    """Per column of at most {COL_ROWS} rows: the first positions of its maximum and minimum (axis 0)."""
    j = best.tile_id(0)
    best.store(tile.load(x, (0, j), ({COL_ROWS}, 32), padding={low}).argmax(axis=0))
    worst.store(tile.argmin(tile.load(x, (0, j), ({COL_ROWS}, 32), padding={high}), axis=0))


@tile.kernel(specialize=[{{"best": [1, 1], "product": [1, 1]}}])
def blocks_{d}(x: Tensor[{d}, 2], best: tile.Out[i32, 2], product: tile.Out[{d}, 2]):
    """Per 16 x 64 block of x: the position of its maximum in the block flattened row-major, and its product."""
    i, j = best.tile_id(0), best.tile_id(1)
    best.store(tile.argmax(tile.load(x, (i, j), (16, 64), padding={low}), keepdims=True))
    product.store(tile.prod(tile.load(x, (i, j), (16, 64), padding={one}), keepdims=True))
''']
    out += ['''
@tile.kernel(specialize=[{"best": [4], "value": [4]}])
def streamed_argmax(x: Tensor[f32, 2], best: tile.Out[i32, 1], value: tile.Out[f32, 1]):
    """Rows longer than a tile: a running (value, index) pair over CHUNK-wide steps; a later
    step takes over only with a strictly larger value, so ties keep the lowest index."""
    rows = best.tile_shape[0]
    row_ids = best.tile_id(0) * rows + tile.arange(rows)
    top = tile.full((rows,), -math.inf, f32)
    where = tile.zeros((rows,), i32)
    for k in tile.range(tile.cdiv(x.shape[1], CHUNK)):
        chunk = tile.load(x, (best.tile_id(0), k), (rows, CHUNK), padding=-math.inf)
        index = k * CHUNK + tile.argmax(chunk, axis=1)
        found = tile.gather(x, (row_ids, index), padding=-math.inf)
        larger = found > top
        where = tile.where(larger, index, where)
        top = tile.where(larger, found, top)
    best.store(where)
    value.store(top)
''']
    return "\n".join(out)


def rng(seed: int):
    return np.random.default_rng(seed)


def values(dtype: str, shape, seed: int, spread: int = 8) -> np.ndarray:
    """Small integers (many ties), stored as ``dtype``: bf16 as its bit patterns."""
    x = rng(seed).integers(-spread, spread + 1, shape)
    return stored(x + spread if dtype == "u8" else x, dtype)


def powers_of_two(dtype: str, shape, seed: int) -> np.ndarray:
    """Values of +-1, +-2 and +-0.5 (1 and 2, negated for signed integers): every product of a row
    is exact in every order in floats, and wraps the same in every order in integers. Mostly +-1,
    so that no partial product of a row of thousands leaves f32's exponent range."""
    choices, p = {"i32": ([1, -1, 2, -2], [0.45, 0.45, 0.05, 0.05]), "u8": ([1, 2], [0.9, 0.1])}.get(
        dtype, ([1.0, -1.0, 2.0, -2.0, 0.5, -0.5], [0.45, 0.45, 0.025, 0.025, 0.025, 0.025]))
    return stored(rng(seed).choice(np.array(choices), shape, p=p), dtype)


def numbers(x: np.ndarray, dtype: str) -> np.ndarray:
    """The values of a stored array (bf16 bit patterns as float32)."""
    return bf16_values(x) if dtype == "bf16" else x


def stored(x: np.ndarray, dtype: str) -> np.ndarray:
    """Values in ``dtype``'s storage, rounded to nearest (bf16 as its bit patterns); integers wrap."""
    if dtype == "bf16":
        return bf16_bits(np.asarray(x, np.float32))
    with np.errstate(over="ignore"):          # a product past f16's range is inf, as the kernel's
        return np.asarray(x).astype(NUMPY[dtype])


def row_product(x: np.ndarray, dtype: str) -> np.ndarray:
    """Each row's product, in ``dtype``'s storage (exact before the one rounding, for floats)."""
    v = numbers(x, dtype)
    return stored(v.prod(axis=1, dtype=np.float64 if dtype in FLOATS else NUMPY[dtype]), dtype)


def block_reference(x: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Per 16 x 64 block (padded below every value for the argmax, as the kernel pads it): the
    flat position of its first maximum, and its product (in ``dtype``'s storage)."""
    v = numbers(x, dtype)
    low = -np.inf if dtype in FLOATS else np.iinfo(NUMPY[dtype]).min
    rows, cols = -(-v.shape[0] // 16), -(-v.shape[1] // 64)
    best = np.zeros((rows, cols), np.int32)
    product = np.zeros((rows, cols), np.float64 if dtype in FLOATS else NUMPY[dtype])
    for i in range(rows):
        for j in range(cols):
            block = v[i * 16:(i + 1) * 16, j * 64:(j + 1) * 64]
            padded = np.full((16, 64), low, v.dtype)
            padded[:block.shape[0], :block.shape[1]] = block
            best[i, j] = np.argmax(padded)
            product[i, j] = block.prod(dtype=product.dtype)
    return best, stored(product, dtype)
