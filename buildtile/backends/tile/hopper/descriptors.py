"""Operand tiles in shared memory as the copy engine writes them and ``wgmma`` reads them.

A row-major tile of 16-bit elements (A: M x K, B: K x N) is stored as column
panels: panel ``p`` holds columns ``p * panel_cols ...`` of every row, a row of
the panel being ``width`` bytes (32, 64 or 128, the largest that fits the
tile's row), rows one after another. Inside a panel the 16-byte chunks of each
row are XOR-swizzled with the row's position in its 8-row group -- the pattern
TMA's ``CU_TENSOR_MAP_SWIZZLE_{width}B`` writes and a descriptor with the same
swizzle mode reads, both computed from address bits, so every panel starts at
a multiple of 1024 bytes.

``wgmma`` reads an operand through a 64-bit shared-memory matrix descriptor
(PTX ISA, "Matrix Descriptor Format"):

    bits  0-13  start address >> 4
    bits 16-29  leading dimension byte offset >> 4  (LBO)
    bits 32-45  stride dimension byte offset >> 4   (SBO)
    bits 62-63  swizzle mode: 1 = 128-byte, 2 = 64-byte, 3 = 32-byte

A is K-major (its rows run along K): 8-row groups lie ``8 * width`` bytes apart
(SBO), and one instruction's 16 K-elements (32 bytes) never leave a panel row,
so LBO is unused. B is MN-major (its rows run along N, the instruction's
"transposed" B): SBO is again ``8 * width`` (between groups of 8 K-rows), LBO
the distance between panels along N.
"""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as lir

from buildtile.backends.common.llvm import I32, I64

#: the alignment of every panel: the period of the widest (128-byte) swizzle pattern
PANEL_ALIGN = 1024
#: bytes of one 16-bit element
ELEM_BYTES = 2
#: K-elements one ``wgmma`` of 16-bit inputs consumes
MMA_K = 16
#: rows of A (and of the accumulator) one ``wgmma`` covers
MMA_M = 64

#: the descriptor's swizzle-mode field, by panel width in bytes
DESCRIPTOR_SWIZZLE = {128: 1, 64: 2, 32: 3}
#: ``CUtensorMapSwizzle`` (cuda.h), by panel width in bytes
TENSOR_MAP_SWIZZLE = {32: 1, 64: 2, 128: 3}


def panel_width(cols: int) -> int | None:
    """The panel width in bytes for a tile ``cols`` 16-bit elements wide; None when no swizzle
    mode stores it (rows of 16 bytes, or of a width that is no multiple of a panel)."""
    row = cols * ELEM_BYTES
    width = min(128, row)
    if width not in DESCRIPTOR_SWIZZLE or row % width:
        return None
    return width


@dataclass(frozen=True)
class Panels:
    """A ``rows`` x ``cols`` tile of 16-bit elements stored as swizzled column panels."""

    rows: int
    cols: int

    def __post_init__(self) -> None:
        if panel_width(self.cols) is None:
            raise ValueError(f"no swizzled panel layout holds rows of {self.cols} 16-bit elements")

    @property
    def width(self) -> int:              # bytes of one row of one panel
        return panel_width(self.cols)    # type: ignore[return-value]

    @property
    def panel_cols(self) -> int:         # elements of one row of one panel: the TMA box's inner extent
        return self.width // ELEM_BYTES

    @property
    def count(self) -> int:
        return self.cols // self.panel_cols

    @property
    def panel_bytes(self) -> int:
        return self.rows * self.width

    @property
    def nbytes(self) -> int:
        """Bytes of the whole tile, rounded up to a panel boundary."""
        return -(-self.count * self.panel_bytes // PANEL_ALIGN) * PANEL_ALIGN

    def element_offset(self, row: int, col: int) -> int:
        """The byte offset of element (``row``, ``col``), swizzle included (for tests and tools)."""
        panel, inner = divmod(col, self.panel_cols)
        chunk, byte = divmod(inner * ELEM_BYTES, 16)
        line = row * self.width // 128          # the 128-byte line: address bits 7 and up give the XOR key
        key = line & (self.width // 16 - 1)
        return panel * self.panel_bytes + row * self.width + ((chunk ^ key) * 16) + byte


def descriptor_constant(lbo: int, sbo: int, width: int) -> int:
    """The fields of a descriptor other than its start address."""
    return ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | DESCRIPTOR_SWIZZLE[width] << 62


def a_descriptor_constant(a: Panels) -> int:
    """A, K-major: LBO unused (one in its field, as CUTLASS writes it), SBO between 8-row groups."""
    return descriptor_constant(16, 8 * a.width, a.width)


def b_descriptor_constant(b: Panels) -> int:
    """B, MN-major: LBO between panels along N, SBO between groups of 8 K-rows."""
    return descriptor_constant(b.panel_bytes, 8 * b.width, b.width)


def a_offset(a: Panels, row_block: int, k_step: int) -> int:
    """Byte offset in A's tile of the 64-row block ``row_block`` at K-step ``k_step`` (16 elements)."""
    panel, inner = divmod(k_step * MMA_K, a.panel_cols)
    return panel * a.panel_bytes + row_block * MMA_M * a.width + inner * ELEM_BYTES


def b_offset(b: Panels, k_step: int) -> int:
    """Byte offset in B's tile of K-step ``k_step``: its 16 rows in every panel."""
    return k_step * MMA_K * b.width


def descriptor(b: lir.IRBuilder, address: lir.Value, constant: int) -> lir.Value:
    """The i64 descriptor of the operand starting at shared address ``address`` (i32)."""
    start = b.lshr(b.and_(address, I32(0x3FFFF)), I32(4))
    return b.or_(b.zext(start, I64), I64(constant))
