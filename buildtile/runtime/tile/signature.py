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
exactly (BT0600 if none does).
"""

from __future__ import annotations

from collections.abc import Mapping

from buildtile.errors import ContractError
from buildtile.interop.abi import TILE_SCHEDULE
from buildtile.interop.manifest import KernelRecord, ParamRecord, SpecializationRecord, malformed
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
        self.grid_param: ParamRecord = next(p for p in self.outs if p.name == tile.grid_param)  # type: ignore[union-attr]
        self.specializations: tuple[SpecializationRecord, ...] = tile.specializations  # type: ignore[union-attr]
        for i, spec in enumerate(self.specializations):
            try:
                check_block_limits(spec.block, self.name)
            except ContractError as exc:
                raise malformed(f"{self.where}, tile.specializations[{i}].block", exc.message) from None

    def describe_params(self) -> str:
        return ", ".join(f"{p.name}: {p.type_text}" for p in self.params)

    def available(self) -> str:
        """The compiled tile shapes, for messages: ``(128,), (256,)``."""
        return ", ".join(spec.describe() for spec in self.specializations)

    def specialization_for(self, tile_shapes: Mapping[str, tuple[int, ...]]) -> SpecializationRecord:
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
