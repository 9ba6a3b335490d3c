"""A Tile kernel's manifest record, read and checked once (no driver, no arrays).

The record (see :mod:`buildtile.interop.manifest`) gives the parameters —
``tensor`` inputs, ``tile_out`` outputs and scalars —, the ``requires``
relations, the output whose partition fixes the grid, and one
specialization per compiled tile shape, each with its own PTX entry, block
shape, shared memory and images. :class:`TileSignature` holds that as
plain data plus what launching needs: the packed parameter layout (kernel
ABI v1, identical for every specialization) and
:meth:`~TileSignature.specialization_for`, which picks the specialization
that matches the tile shapes of a launch's partitions exactly (BT0600 if
none does).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from buildtile.errors import BuildtileError, ContractError
from buildtile.interop.abi import PARAM_KINDS, kernel_params
from buildtile.runtime.contract import LaunchContract, check_block_limits, dim3
from buildtile.runtime.dtypes import ITEMSIZE
from buildtile.runtime.requires import Requirement, combined_check, compile_requirement
from buildtile.runtime.signature import ParamLayout

#: the parameter kinds a Tile kernel takes
TILE_PARAM_KINDS = ("tensor", "tile_out", "scalar")
#: the tile grid has one launch-grid axis per array axis
MAX_GRID_RANK = 3


@dataclass(frozen=True)
class TileParam:
    """One declared parameter of a Tile kernel."""

    index: int
    name: str
    kind: str   # one of TILE_PARAM_KINDS
    dtype: str
    rank: int

    @property
    def is_array(self) -> bool:
        return self.kind != "scalar"

    @property
    def is_out(self) -> bool:
        return self.kind == "tile_out"

    @property
    def type_text(self) -> str:
        """As written in the kernel: ``Tensor[f32, 1]``, ``tile.Out[f32, 1]``, ``f32``."""
        if self.kind == "scalar":
            return self.dtype
        return f"{'tile.Out' if self.is_out else 'Tensor'}[{self.dtype}, {self.rank}]"


@dataclass(frozen=True)
class TileSpecialization:
    """One compiled tile shape of a kernel."""

    tile_shapes: tuple[tuple[str, tuple[int, ...]], ...]   # (out parameter, tile shape), in parameter order
    symbol: str
    block: tuple[int, int, int]
    shared_bytes: int        # dynamic shared memory every launch of it gets
    image_record: dict       # {"name", "symbol", "artifacts"}: what images.select_image reads

    def tile_shape_of(self, param: str) -> tuple[int, ...]:
        return dict(self.tile_shapes)[param]

    def describe(self) -> str:
        """``(128,)`` for one output; ``z: (128,), w: (64, 64)`` for several."""
        if len(self.tile_shapes) == 1:
            return str(self.tile_shapes[0][1])
        return ", ".join(f"{name}: {shape}" for name, shape in self.tile_shapes)


class TileSignature:
    """The device-independent description of one compiled Tile kernel."""

    def __init__(self, record: dict, where: str) -> None:
        self.name: str = record["name"]
        self.module: str = record["module"]
        self.where = where
        raw_params = record.get("params") or []
        self.params: tuple[TileParam, ...] = tuple(_param(k, p, where) for k, p in enumerate(raw_params))
        if len({p.name for p in self.params}) != len(self.params):
            raise _malformed(where, "two parameters share a name")
        self.outs: tuple[TileParam, ...] = tuple(p for p in self.params if p.is_out)
        if not self.outs:
            raise _malformed(where, "a tile kernel needs at least one tile.Out parameter")
        self.contract = LaunchContract.from_record({**(record.get("contract") or {}), "block": None}, where)
        # requires.py knows tile outputs as the tensors they are
        as_tensors = [{**p, "kind": "disjoint_tensor"} if p.get("kind") == "tile_out" else p for p in raw_params]
        self.requirements: tuple[Requirement, ...] = tuple(
            compile_requirement(entry, as_tensors, where)
            for entry in (record.get("contract") or {}).get("requires") or []
        )
        #: env -> index of the first relation that fails, or -1 (None without relations)
        self.check_requires = combined_check(self.requirements)
        self.layout = ParamLayout([p.ctype for p in kernel_params(raw_params)])
        tile = record.get("tile")
        if not isinstance(tile, dict):
            raise _malformed(where, "a tile kernel's record has no `tile` object")
        grid_param = tile.get("grid_param")
        by_name = {p.name: p for p in self.outs}
        if grid_param not in by_name:
            raise _malformed(where, f"tile.grid_param {grid_param!r} is not a tile.Out parameter")
        self.grid_param: TileParam = by_name[grid_param]
        if self.grid_param.rank > MAX_GRID_RANK:
            raise _malformed(where, f"the grid parameter `{grid_param}` has rank {self.grid_param.rank}; "
                                    f"a tile grid has at most {MAX_GRID_RANK} axes")
        specs = tile.get("specializations")
        if not isinstance(specs, list) or not specs:
            raise _malformed(where, "tile.specializations is missing or empty")
        self.specializations: tuple[TileSpecialization, ...] = tuple(
            self._specialization(spec, i) for i, spec in enumerate(specs)
        )
        seen: set = set()
        for spec in self.specializations:
            if spec.tile_shapes in seen:
                raise _malformed(where, f"two specializations have tile shapes {spec.describe()}")
            seen.add(spec.tile_shapes)

    def _specialization(self, raw: object, i: int) -> TileSpecialization:
        where = f"{self.where}, tile.specializations[{i}]"
        if not isinstance(raw, dict):
            raise _malformed(where, "expected an object")
        shapes = raw.get("tile_shapes")
        if not isinstance(shapes, dict) or set(shapes) != {p.name for p in self.outs}:
            raise _malformed(where, f"tile_shapes must give the tile shape of exactly "
                                    f"{', '.join(f'`{p.name}`' for p in self.outs)}")
        tile_shapes = []
        for p in self.outs:
            shape = shapes[p.name]
            if (not isinstance(shape, list) or len(shape) != p.rank
                    or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in shape)):
                raise _malformed(where, f"the tile shape of `{p.name}` is {shape!r}; "
                                        f"expected {p.rank} positive integers")
            tile_shapes.append((p.name, tuple(shape)))
        symbol = raw.get("symbol")
        if not isinstance(symbol, str) or not symbol.isidentifier():
            raise _malformed(where, f"symbol {symbol!r} is not a PTX entry name")
        try:
            block = dim3(raw.get("block"), "block")
            check_block_limits(block, self.name)
        except ContractError as exc:
            raise _malformed(where, exc.message) from None
        shared = raw.get("shared_bytes", 0)
        if isinstance(shared, bool) or not isinstance(shared, int) or shared < 0:
            raise _malformed(where, f"shared_bytes is {shared!r}")
        artifacts = raw.get("artifacts")
        if not isinstance(artifacts, dict) or not artifacts:
            raise _malformed(where, "no artifacts")
        return TileSpecialization(tuple(tile_shapes), symbol, block, shared,
                                  {"name": self.name, "symbol": symbol, "artifacts": artifacts})

    def describe_params(self) -> str:
        return ", ".join(f"{p.name}: {p.type_text}" for p in self.params)

    def available(self) -> str:
        """The compiled tile shapes, for messages: ``(128,), (256,)``."""
        return ", ".join(spec.describe() for spec in self.specializations)

    def specialization_for(self, tile_shapes: Mapping[str, tuple[int, ...]]) -> TileSpecialization:
        """The specialization compiled for exactly these tile shapes (one per tile.Out parameter)."""
        wanted = tuple((p.name, tuple(tile_shapes[p.name])) for p in self.outs)
        for spec in self.specializations:
            if spec.tile_shapes == wanted:
                return spec
        if len(self.outs) == 1:
            name, shape = wanted[0]
            what = f"tile shape {shape} of `{name}`"
            listing = f"tile shapes {self.available()}"
        else:
            what = "tile shapes " + ", ".join(f"{name}: {shape}" for name, shape in wanted)
            listing = "; ".join(f"({spec.describe()})" for spec in self.specializations)
        raise ContractError(
            f"launch contract violated: kernel `{self.name}` has no specialization for {what}; "
            f"it was compiled for {listing}",
            help="partition the output into tiles of a compiled shape, or add this shape to the kernel's "
                 "specializations (`@tile.kernel(specialize=...)` or pyproject) and rebuild",
        )


def _param(index: int, raw: object, where: str) -> TileParam:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"].isidentifier():
        raise _malformed(where, f"parameter {index} has no identifier for a name")
    name, kind, dtype = raw["name"], raw.get("kind"), raw.get("dtype")
    if kind not in TILE_PARAM_KINDS:
        known = "which this runtime cannot pass" if kind not in PARAM_KINDS else "which tile kernels do not take"
        raise BuildtileError(f"{where}: parameter `{name}` has kind {kind!r}, {known}", code="BT0621",
                             help="rebuild the package with the buildtile that is installed")
    if dtype not in ITEMSIZE:
        raise _malformed(where, f"parameter `{name}` has unknown dtype {dtype!r}")
    rank = raw.get("rank", 0)
    if kind == "scalar":
        rank = 0
    elif isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank <= 8:
        raise _malformed(where, f"parameter `{name}` has invalid rank {rank!r}")
    return TileParam(index, name, kind, dtype, rank)


def _malformed(where: str, problem: str) -> BuildtileError:
    return BuildtileError(f"{where}: {problem}", code="BT0621",
                          help="the manifest is written by the build; rebuild the package with this buildtile")
