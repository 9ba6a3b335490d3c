"""Where each element of a tile lives: which thread, which of its registers.

Tile extents and thread counts are powers of two, so a layout is a map of
bits (as in Triton's linear layouts, restricted to permutations): every bit
of an element's coordinates comes from exactly one bit of either the
register index or the thread index. Thread bits that feed no coordinate
bit replicate: threads differing only there hold the same elements.

    element coords of (thread t, register r) = OR of the bits of r and t, placed by ``reg`` and ``thread``

Everything the lowering does with a tile follows from this one shape of
data: global accesses vectorise over the leading register bits, a reduction
combines register bits in a thread, lane bits with shuffles and warp bits
through shared memory, and broadcasting, ``reshape`` and ``permute`` only
relabel bits, so they move no data.
"""

from __future__ import annotations

from dataclasses import dataclass

Bit = tuple[int, int]          # (axis, bit of the coordinate along that axis)


def log2(n: int) -> int:
    return n.bit_length() - 1


@dataclass(frozen=True)
class Layout:
    shape: tuple[int, ...]
    reg: tuple[Bit, ...]                 # register-index bit k supplies reg[k]
    thread: tuple[Bit | None, ...]       # thread-index bit k (lanes 0-4, then warps) supplies thread[k]

    def __post_init__(self) -> None:
        seen = [b for b in (*self.reg, *self.thread) if b is not None]
        want = {(d, b) for d, n in enumerate(self.shape) for b in range(log2(n))}
        if len(seen) != len(set(seen)) or set(seen) != want:
            raise ValueError(f"not a layout of shape {self.shape}: reg={self.reg} thread={self.thread}")

    # ------------------------------------------------------------ sizes
    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def nregs(self) -> int:
        return 1 << len(self.reg)

    @property
    def nthreads(self) -> int:
        return 1 << len(self.thread)

    @property
    def replicated_mask(self) -> int:
        """Thread-index bits that feed no coordinate (threads there hold copies)."""
        return sum(1 << k for k, b in enumerate(self.thread) if b is None)

    # ------------------------------------------------------------ coordinates
    def reg_coords(self, r: int) -> tuple[int, ...]:
        """The register part of the coordinates of register ``r`` (add the thread part)."""
        coords = [0] * self.rank
        for k, (d, b) in enumerate(self.reg):
            if r >> k & 1:
                coords[d] |= 1 << b
        return tuple(coords)

    def thread_coords(self, t: int) -> tuple[int, ...]:
        coords = [0] * self.rank
        for k, bit in enumerate(self.thread):
            if bit is not None and t >> k & 1:
                coords[bit[0]] |= 1 << bit[1]
        return tuple(coords)

    def thread_runs(self, axis: int) -> list[tuple[int, int, int]]:
        """``(thread bit, length, coordinate bit)`` runs that build the thread part of ``axis``."""
        runs: list[list[int]] = []
        for k, bit in enumerate(self.thread):
            if bit is None or bit[0] != axis:
                continue
            if runs and runs[-1][0] + runs[-1][1] == k and runs[-1][2] + runs[-1][1] == bit[1]:
                runs[-1][1] += 1
            else:
                runs.append([k, 1, bit[1]])
        return [tuple(r) for r in runs]

    def reg_index(self, coords: tuple[int, ...]) -> int:
        """The register holding the element whose register part of the coordinates is ``coords``."""
        r = 0
        for k, (d, b) in enumerate(self.reg):
            if coords[d] >> b & 1:
                r |= 1 << k
        return r

    def vector_run(self) -> int:
        """How many consecutive registers hold consecutive elements along the last axis."""
        k = 0
        while k < len(self.reg) and self.reg[k] == (self.rank - 1, k):
            k += 1
        return 1 << k

    # ------------------------------------------------------------ relabelling
    def slice(self, axis: int) -> Layout:
        """The layout of a reduction along ``axis``: that axis removed, its threads replicated."""
        def move(bit):
            if bit is None or bit[0] == axis:
                return None
            return (bit[0] - (bit[0] > axis), bit[1])
        shape = self.shape[:axis] + self.shape[axis + 1:]
        return Layout(shape, tuple(move(b) for b in self.reg if b[0] != axis), tuple(move(b) for b in self.thread))

    def slice_reg_map(self, axis: int) -> list[int]:
        """For each register, the register of :meth:`slice` holding its reduction."""
        keep = [k for k, b in enumerate(self.reg) if b[0] != axis]
        return [sum(((r >> k) & 1) << j for j, k in enumerate(keep)) for r in range(self.nregs)]

    def expand(self, axis: int) -> Layout:
        """``t[..., None, ...]``: a new axis of extent 1 at ``axis``."""
        def move(bit):
            return None if bit is None else (bit[0] + (bit[0] >= axis), bit[1])
        shape = self.shape[:axis] + (1,) + self.shape[axis:]
        return Layout(shape, tuple(move(b) for b in self.reg), tuple(move(b) for b in self.thread))

    def squeeze(self, axis: int) -> Layout:
        assert self.shape[axis] == 1
        return self.slice(axis)

    def broadcast_from(self, src_shape: tuple[int, ...]) -> Layout:
        """The layout a tile of ``src_shape`` needs to broadcast into this one without moving data."""
        wide = {d for d, (s, n) in enumerate(zip(src_shape, self.shape)) if s != n}
        reg = tuple(b for b in self.reg if b[0] not in wide)
        thread = tuple(None if b is None or b[0] in wide else b for b in self.thread)
        return Layout(tuple(src_shape), reg, thread)

    def broadcast_reg_map(self, src_shape: tuple[int, ...]) -> list[int]:
        """For each register of this layout, the register of ``broadcast_from(src_shape)`` it copies."""
        wide = {d for d, (s, n) in enumerate(zip(src_shape, self.shape)) if s != n}
        keep = [k for k, b in enumerate(self.reg) if b[0] not in wide]
        return [sum(((r >> k) & 1) << j for j, k in enumerate(keep)) for r in range(self.nregs)]

    def reshape(self, shape: tuple[int, ...]) -> Layout:
        """Row-major reshape: the linear index's bits keep their place."""
        def linear_offsets(dims):
            offs, acc = [0] * len(dims), 0
            for d in reversed(range(len(dims))):
                offs[d] = acc
                acc += log2(dims[d])
            return offs
        old, new = linear_offsets(self.shape), linear_offsets(shape)

        def move(bit):
            if bit is None:
                return None
            pos = old[bit[0]] + bit[1]
            for d in range(len(shape)):
                if new[d] <= pos < new[d] + log2(shape[d]):
                    return (d, pos - new[d])
            raise AssertionError("reshape changed the number of elements")
        return Layout(tuple(shape), tuple(move(b) for b in self.reg), tuple(move(b) for b in self.thread))

    def permute(self, perm: tuple[int, ...]) -> Layout:
        """Axis ``k`` of the result is axis ``perm[k]`` of this layout."""
        where = {old: new for new, old in enumerate(perm)}

        def move(bit):
            return None if bit is None else (where[bit[0]], bit[1])
        shape = tuple(self.shape[p] for p in perm)
        return Layout(shape, tuple(move(b) for b in self.reg), tuple(move(b) for b in self.thread))

    def inverse_permute(self, perm: tuple[int, ...]) -> Layout:
        inverse = [0] * len(perm)
        for new, old in enumerate(perm):
            inverse[old] = new
        return self.permute(tuple(inverse))


# ------------------------------------------------------------------ the layouts the compiler chooses


def canonical(shape: tuple[int, ...], threads: int, elem_bytes: int, reduced: frozenset[int] = frozenset()) -> Layout:
    """The layout for global memory traffic: each thread owns runs of 16 bytes along the last
    axis, consecutive lanes own consecutive runs (coalesced), then warps, then repeats.

    Warps take the bits of the axes not in ``reduced`` first, so a reduction along those axes
    stays inside a warp (registers, then shuffles) wherever the tile has other axes to spread
    the warps over; the bits left over repeat in registers.
    """
    bits = [(d, b) for d in reversed(range(len(shape))) for b in range(log2(shape[d]))]
    vec = min(log2(access_elements(elem_bytes)), log2(shape[-1])) if shape else 0
    reg, rest = bits[:vec], bits[vec:]
    t = log2(threads)
    lanes, rest = rest[:min(5, t)], rest[min(5, t):]
    ordered = [b for b in rest if b[0] not in reduced] + [b for b in rest if b[0] in reduced]
    warps = ordered[:t - len(lanes)]
    thread = lanes + warps + [None] * (t - len(lanes) - len(warps))
    reg += [b for b in rest if b not in warps]
    return Layout(tuple(shape), tuple(reg), tuple(thread))


def access_elements(elem_bytes: int) -> int:
    """Elements of one 16-byte access; 1-byte elements (masks) get the runs of 4-byte data,
    which they usually select between."""
    return 16 // (4 if elem_bytes == 1 else elem_bytes)


def access_vector(layout: Layout, elem_bytes: int) -> int:
    """Elements per global access in ``layout``: its run along the last axis, at most 16 bytes,
    at least 4 bytes (else 1: scalar accesses)."""
    vec = min(layout.vector_run(), max(1, 16 // elem_bytes))
    return vec if vec * elem_bytes >= 4 else 1


@dataclass(frozen=True)
class MmaShape:
    """How a ``tile.mma`` of an (M, N) accumulator is spread over the warps."""

    m: int
    n: int
    warps_m: int          # warps along M
    warps_n: int          # warps along N
    replicas: int         # warps beyond warps_m * warps_n compute copies

    @property
    def warp_m(self) -> int:
        return self.m // self.warps_m

    @property
    def warp_n(self) -> int:
        return self.n // self.warps_n

    @property
    def frags_m(self) -> int:          # 16-row fragments per warp
        return self.warp_m // 16

    @property
    def frags_n(self) -> int:          # 8-column fragments per warp
        return self.warp_n // 8


def mma_shape(m: int, n: int, threads: int, rows_only: bool = False) -> MmaShape:
    """Split the warps over M and N, keeping each warp's part at least 16 x 16 and near square.

    ``rows_only``: every warp takes whole rows (all N columns) where M has 16 rows for each, so
    that a result computed from this accumulator is, in the same registers, the A operand of a
    further mma with the same M (see :func:`mma_a_layout`)."""
    warps = threads // 32
    if rows_only and m // warps >= 16:
        return MmaShape(m, n, warps, 1, 1)
    wm = wn = 1
    replicas = 1
    for _ in range(log2(threads // 32)):
        can_m, can_n = m // (wm * 2) >= 16, n // (wn * 2) >= 16
        if can_m and (m // wm >= n // wn or not can_n):
            wm *= 2
        elif can_n:
            wn *= 2
        else:
            replicas *= 2
    return MmaShape(m, n, wm, wn, replicas)


def mma_accumulator(m: int, n: int, threads: int, rows_only: bool = False) -> Layout:
    """The register layout of mma.sync m16n8k16 accumulators (PTX ISA, "Matrix fragments for
    mma.m16n8k16"): lane = 4 * row + col / 2 within each 16 x 8 fragment, two registers per row
    pair, the fragments of a warp's part in registers, the warps' parts across the tile."""
    s = mma_shape(m, n, threads, rows_only)
    lwm, lwn = log2(s.warp_m), log2(s.warp_n)
    reg = [(1, 0), (0, 3)] + [(1, b) for b in range(3, lwn)] + [(0, b) for b in range(4, lwm)]
    lanes = [(1, 1), (1, 2), (0, 0), (0, 1), (0, 2)]
    warps = ([(1, lwn + k) for k in range(log2(s.warps_n))] + [(0, lwm + k) for k in range(log2(s.warps_m))]
             + [None] * log2(s.replicas))
    return Layout((m, n), tuple(reg), tuple(lanes + warps))


def mma_a_layout(s: MmaShape, k: int) -> Layout:
    """The layout of an M x ``k`` A operand held in registers as the A fragments of the mma that
    ``s`` spreads over the warps: that of an accumulator of M x ``k`` (the C fragments of two
    adjacent 16 x 8 blocks are the four registers of one 16 x 16 A fragment), with the rows of
    each warp's part and every column; warps along N hold copies."""
    lwm = log2(s.warp_m)
    reg = [(1, 0), (0, 3)] + [(1, b) for b in range(3, log2(k))] + [(0, b) for b in range(4, lwm)]
    lanes = [(1, 1), (1, 2), (0, 0), (0, 1), (0, 2)]
    warps = [None] * log2(s.warps_n) + [(0, lwm + j) for j in range(log2(s.warps_m))] + [None] * log2(s.replicas)
    return Layout((s.m, k), tuple(reg), tuple(lanes + warps))


def mma_reg(s: MmaShape, fm: int, fn: int, c: int) -> int:
    """Accumulator register ``c`` (0-3) of fragment (``fm``, ``fn``) in :func:`mma_accumulator`."""
    return c + 4 * (fn + s.frags_n * fm)
