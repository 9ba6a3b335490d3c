"""Types of the tile IR.

Scalars (and weakly typed literals) are the shared ones of
``buildtile.backends.common.types``; on top of them
a tile value has a dtype and a compile-time shape, and parameters are
read-only ``Tensor`` inputs or partitioned ``tile.Out`` outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from buildtile.backends.common.contract import ParamFacts
from buildtile.backends.common.types import (  # noqa: F401 - the tile typer speaks of scalars through this module
    BF16,
    BOOL,
    F16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    SCALARS,
    WEAK_FLOAT,
    WEAK_INT,
    Scalar,
    Weak,
)

#: element types a tile (and a tile kernel's arrays) may hold
TILE_DTYPES = {t.name: t for t in (F16, BF16, F32, F64, I8, U8, I16, U16, I32, U32, I64, BOOL)}
#: the most axes a tile kernel's tensors (and its tiles) may have
MAX_RANK = 5
#: the operand types of tile.mma
MMA_DTYPES = (F16, BF16)


def is_pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


@dataclass(frozen=True)
class TileT:
    """A tile: ``dtype`` elements in a compile-time ``shape`` (every extent a power of two)."""

    dtype: Scalar
    shape: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __str__(self) -> str:
        return f"tile[{self.dtype}, ({', '.join(map(str, self.shape))}{',' if len(self.shape) == 1 else ''})]"


@dataclass(frozen=True)
class ArrayT:
    """A kernel's array parameter: a read-only ``Tensor`` input or a ``tile.Out`` output."""

    elem: Scalar
    rank: int
    is_out: bool
    #: a ``tile.Atomic`` output: shared by every block, written only by atomic adds
    atomic: bool = False

    @property
    def access(self) -> str:
        return "atomic" if self.atomic else "disjoint" if self.is_out else "read"

    def __str__(self) -> str:
        kind = "tile.Atomic" if self.atomic else "tile.Out" if self.is_out else "Tensor"
        return f"{kind}[{self.elem}, {self.rank}]"


@dataclass(frozen=True)
class TileIdT:
    """``z.tile_id(axis)``: this tile's own index along one axis of ``z``'s partition.

    In arithmetic it is an i64; only an unmodified tile id may index a
    ``tile.store`` into ``z`` (the ownership proof, BT0499).
    """

    param: str
    axis: int

    def __str__(self) -> str:
        return f"TileId[{self.param}, axis {self.axis}]"


@dataclass(frozen=True)
class ShapeT:
    """``x.shape`` (dynamic) or ``z.tile_shape`` (constant): only subscripted by a constant axis."""

    param: str
    rank: int


def value_type(ty):
    """The arithmetic type a value acts as (a tile id acts as an i64)."""
    return I64 if isinstance(ty, TileIdT) else ty


def elem_bytes(ty: Scalar) -> int:
    return 1 if ty == BOOL else ty.bits // 8


def param_facts(ty) -> ParamFacts:
    """What a ``requires`` relation may say of a parameter of type ``ty``."""
    if isinstance(ty, Scalar):
        return ParamFacts.scalar(ty.is_int)
    return ParamFacts.array(ty.rank)
