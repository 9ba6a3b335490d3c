"""Counter-based random numbers for kernels: Philox-4x32-10, reproducible from a seed and an offset.

Inside a ``@simt.kernel`` these functions are compiled inline; on the host they
compute the same numbers with NumPy (scalars or arrays), so a kernel's stream
can be checked against them.

The stream (the definition every kernel language follows):

* ``philox(seed, offset, counter, word)`` is word ``word`` (0..3) of
  Philox-4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy
  as 1, 2, 3", SC 2011; the Random123 reference) of the counter
  ``(lo(offset), hi(offset), lo(counter), hi(counter))`` under the key
  ``(lo(seed), hi(seed))``, where ``lo``/``hi`` are the low and high 32 bits of
  the argument taken as a u64 (a signed integer is sign-extended first).
  One round maps ``(c0, c1, c2, c3)`` under key ``(k0, k1)`` to
  ``(hi(M1*c2) ^ c1 ^ k0, lo(M1*c2), hi(M0*c0) ^ c3 ^ k1, lo(M0*c0))`` with
  ``M0 = 0xD2511F53``, ``M1 = 0xCD9E8D57`` (``hi``/``lo``: the halves of the
  64-bit product); the key grows by ``(W0, W1) = (0x9E3779B9, 0xBB67AE85)``
  (mod 2**32) between rounds; there are 10 rounds.
* ``uniform(seed, offset)`` is ``(x0 >> 8) * 2**-24``, an f32 in [0, 1), where
  ``x0, x1, x2, x3`` is the block ``philox(seed, offset, 0, *)``.
* ``normal(seed, offset)`` is ``sqrt(-2 ln u1) * cos(2 pi u2)`` in f32 (Box-Muller)
  with ``u1 = ((x0 >> 8) + 1) * 2**-24`` in (0, 1] and ``u2 = (x1 >> 8) * 2**-24``;
  the kernel computes it with the device's ``logf``/``cospif``, so it matches the
  host's value to a few ulp, not bit for bit.

Give each thread its own offset (its index) and each draw of one thread its own
seed or counter: equal (seed, offset, counter) give equal numbers.
"""

from __future__ import annotations

import numpy as np

M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
ROUNDS = 10

_MASK32 = np.uint64(0xFFFFFFFF)


def _u64(value) -> np.ndarray:
    """Integers (Python, NumPy, signed or not) as u64 words, a signed one sign-extended."""
    arr = np.asarray(value)
    if arr.dtype.kind == "u":
        return arr.astype(np.uint64)
    if arr.dtype.kind == "i":
        return arr.astype(np.int64).astype(np.uint64)   # two's complement, as the kernel's cast
    if arr.dtype.kind == "O" and all(isinstance(v, int) for v in arr.flat):
        return np.vectorize(lambda v: v & 0xFFFFFFFFFFFFFFFF, otypes=[np.uint64])(arr)
    raise TypeError(f"seeds, offsets and counters are integers, not {arr.dtype}")


def philox_block(counter, key) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Philox-4x32-10 of four u32 counter words under two u32 key words (arrays broadcast)."""
    c = [np.asarray(w, dtype=np.uint64) & _MASK32 for w in counter]
    k0, k1 = (np.asarray(w, dtype=np.uint64) & _MASK32 for w in key)
    for r in range(ROUNDS):
        if r:
            k0, k1 = (k0 + np.uint64(W0)) & _MASK32, (k1 + np.uint64(W1)) & _MASK32
        p0 = c[0] * np.uint64(M0)
        p1 = c[2] * np.uint64(M1)
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & _MASK32, (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & _MASK32]
    return tuple(w.astype(np.uint32) for w in c)


def _block(seed, offset, counter=0):
    seed, offset, counter = _u64(seed), _u64(offset), _u64(counter)
    words = (offset & _MASK32, offset >> np.uint64(32), counter & _MASK32, counter >> np.uint64(32))
    return philox_block(words, (seed & _MASK32, seed >> np.uint64(32)))


def philox(seed, offset, counter, word: int):
    """Word ``word`` (0..3) of the Philox block of ``(offset, counter)`` under ``seed`` (u32)."""
    return _block(seed, offset, counter)[word]


def uniform(seed, offset):
    """An f32 in [0, 1): the top 24 bits of the block's first word, times 2**-24."""
    x0 = _block(seed, offset)[0]
    return (x0 >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)


def normal(seed, offset):
    """A standard normal f32 (Box-Muller over the block's first two words)."""
    x0, x1 = _block(seed, offset)[:2]
    u1 = ((x0 >> np.uint32(8)).astype(np.float64) + 1.0) * 2.0 ** -24
    u2 = (x1 >> np.uint32(8)).astype(np.float64) * 2.0 ** -24
    return (np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)).astype(np.float32)


__all__ = ["philox", "uniform", "normal", "philox_block"]
