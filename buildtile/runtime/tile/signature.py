"""A Tile kernel's signature: its checked manifest record plus what launching needs (no driver, no arrays).

The record (see :mod:`buildtile.interop.manifest`) gives the parameters —
``tensor`` inputs, ``tile_out`` outputs and scalars —, the ``requires``
relations, the output whose partition fixes the grid, and one
specialization per compiled tile shape, each with its own PTX entry, block
shape, shared memory and images. :class:`TileSignature` adds what the
format leaves to the runtime: the relations compiled, CUDA's block limits
checked, the packed parameter layout (kernel ABI v1, identical for every
specialization) and :meth:`~TileSignature.specialization_for`, which picks
the specialization that matches the tile shapes of a launch's partitions
exactly (BT0600 if none does), among those compiled for the arguments'
dtypes (:meth:`~TileSignature.dtype_group_for`, BT0308 if none is); an
output partitioned without a tile shape takes the specialization ranked best
for its extents (:mod:`buildtile.interop.tile_choice`).
"""

from __future__ import annotations

from collections.abc import Mapping

from dataclasses import replace

from buildtile.errors import ContractError, TypeMismatchError
from buildtile.interop.abi import TENSOR_MAP, TILE_SCHEDULE, PtxParam
from buildtile.interop.manifest import KernelRecord, ParamRecord, SpecializationRecord, malformed
from buildtile.interop.tile_choice import choose
from buildtile.runtime.contract import LaunchContract, check_block_limits
from buildtile.runtime.requires import Requirement, combined_check
from buildtile.runtime.signature import ParamLayout, compile_requirements


class TileSignature:
    """The device-independent description of one compiled Tile kernel."""

    def __init__(self, record: KernelRecord) -> None:
        tile = record.tile  # the manifest gives every tile kernel one
        self.name: str = record.name
        self.module: str = record.module
        self.where = record.where
        self.params: tuple[ParamRecord, ...] = record.params
        self.outs: tuple[ParamRecord, ...] = record.outs
        self.contract = LaunchContract.from_manifest(record.contract, tile=True)
        self.requirements: tuple[Requirement, ...] = compile_requirements(record)
        #: env -> index of the first relation that fails, or -1 (None without relations)
        self.check_requires = combined_check(self.requirements)
        #: the trailing tile schedule, after the declared parameters (interop.abi.TILE_SCHEDULE)
        self.takes_schedule: bool = tile.takes_schedule  # type: ignore[union-attr]
        self.layout = ParamLayout.of(record, trailing=[TILE_SCHEDULE] if self.takes_schedule else [])
        self._record = record
        self._tma_layouts: dict[int, ParamLayout] = {}
        self.grid_param: ParamRecord = next(p for p in self.outs if p.name == tile.grid_param)  # type: ignore[union-attr]
        self.specializations: tuple[SpecializationRecord, ...] = tile.specializations  # type: ignore[union-attr]
        self.fill_tiles: int = tile.fill_tiles  # type: ignore[union-attr]
        #: generic kernels: the parameters that follow a dtype variable, and each compiled binding of them
        self.generic_params: frozenset[str] = frozenset(n for n, _ in self.specializations[0].param_dtypes)
        self.dtype_groups: dict[tuple, tuple[ParamRecord, ...]] = {}
        #: (tile shapes, param_dtypes) -> specialization: a launch with every tile shape given
        self._exact = {(spec.tile_shapes, spec.param_dtypes): spec for spec in self.specializations}
        for spec in self.specializations:
            if spec.param_dtypes not in self.dtype_groups:
                self.dtype_groups[spec.param_dtypes] = tuple(
                    replace(p, dtype=spec.dtype_of(p)) for p in self.params)
        for i, spec in enumerate(self.specializations):
            try:
                check_block_limits(spec.block, self.name)
            except ContractError as exc:
                raise malformed(f"{self.where}, tile.specializations[{i}].block", exc.message) from None

    def tma_layout(self, maps: int) -> ParamLayout:
        """The parameter layout of a TMA entry that takes ``maps`` tensor maps (interop.abi)."""
        layout = self._tma_layouts.get(maps)
        if layout is None:
            trailing = [TILE_SCHEDULE] if self.takes_schedule else []
            trailing += [PtxParam(f"map{k}", TENSOR_MAP) for k in range(maps)]
            layout = self._tma_layouts[maps] = ParamLayout.of(self._record, trailing=trailing)
        return layout

    def describe_params(self) -> str:
        return ", ".join(f"{p.name}: {p.type_text}" for p in self.params)

    def available(self) -> str:
        """The compiled tile shapes, for messages: ``(128,), (256,)``."""
        return ", ".join(dict.fromkeys(spec.describe() for spec in self.specializations))

    def dtype_group_for(self, dtypes: Mapping[str, str]) -> tuple[tuple, tuple[ParamRecord, ...]]:
        """(the ``param_dtypes`` compiled for the generic arrays' ``dtypes``, the parameters with those
        dtypes); BT0308 naming the compiled bindings when none matches."""
        for group, params in self.dtype_groups.items():
            if all(dtypes.get(name, dtype) == dtype for name, dtype in group):
                return group, params
        given = ", ".join(f"`{name}` is {dtypes[name]}" for name in sorted(dtypes, key=self._param_index))
        compiled = "; ".join(dict.fromkeys(s.describe_dtypes() for s in self.specializations))
        raise TypeMismatchError(
            f"mismatched types: kernel `{self.name}` has no specialization for these dtypes ({given}); "
            f"it was compiled for {compiled}",
            help="convert the arrays to a compiled dtype, or add this one to the kernel's specializations "
                 "(its dtype variable or `tile.product`) and rebuild")

    def _param_index(self, name: str) -> int:
        return next(p.index for p in self.params if p.name == name)

    def exact_specialization(self, tiles: tuple, group: tuple = ()) -> SpecializationRecord | None:
        """The specialization compiled for the tile shapes ``tiles`` (one tuple per tile.Out
        parameter, in order) and dtypes ``group``; None when there is none."""
        return self._exact.get((tuple((p.name, t) for p, t in zip(self.outs, tiles)), group))

    def specialization_for(self, tile_shapes: Mapping[str, tuple[int, ...] | None], group: tuple = (),
                           extents: tuple[int, ...] = ()) -> SpecializationRecord:
        """The specialization compiled for exactly these tile shapes (one per tile.Out parameter) and
        dtypes (``group``, from :meth:`dtype_group_for`); an output without a tile shape (None) takes
        the compiled one ranked best for the grid output's ``extents``."""
        if all(tile_shapes[p.name] is not None for p in self.outs):
            spec = self._exact.get((tuple((p.name, tuple(tile_shapes[p.name])) for p in self.outs), group))
            if spec is not None:
                return spec
        specs = [(i, s) for i, s in enumerate(self.specializations) if s.param_dtypes == group]
        given = {p.name: tuple(tile_shapes[p.name]) for p in self.outs if tile_shapes[p.name] is not None}
        matching = [(i, s) for i, s in specs
                    if all(s.tile_shape_of(name) == shape for name, shape in given.items())]
        if matching and len(given) < len(self.outs):
            grid = self.grid_param.name
            best = choose(extents, [(i, s.tile_shape_of(grid)) for i, s in matching], self.fill_tiles)
            return self.specializations[best]
        if matching:
            return matching[0][1]
        wanted = tuple((p.name, tuple(tile_shapes[p.name] or ())) for p in self.outs)
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
