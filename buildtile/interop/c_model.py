"""What the C and C++ generators read: the manifest's records, with the bytes of their images.

The manifest is parsed and checked by :mod:`buildtile.interop.manifest`;
this module adds what only C needs — names usable as C identifiers,
launcher names that do not collide, the images read from disk and
verified, in the order the shim scans them — so the generators do no
validation of their own and a malformed manifest stops the build with one
BT-coded message naming the entry.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path

from buildtile.errors import BuildtileError
from buildtile.interop.abi import mangle
from buildtile.interop.manifest import (
    MANIFEST_NAME,
    ArtifactRecord,
    KernelRecord,
    ParamRecord,
    RequirementRecord,
    SpecializationRecord,
    TileRecord,
    malformed,
    parse,
    read_artifact,
)
from buildtile.interop.record_layout import RecordLayout
from buildtile.runtime.requires import compile_requirement

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: the functions a package's library exports besides launchers: ``<package>_<name>``
PACKAGE_FUNCTIONS = ("last_error", "abi_version")


def record_type(package: str, record: str) -> str:
    """The C (and C++) name of a package's record struct: ``example_kernels_Particle``."""
    return f"{package}_{record}"


@dataclass(frozen=True)
class Image:
    target: str        # "sm_90", "sm_90a"
    kind: str          # "cubin" or "ptx"
    cc: int            # 10 * major + minor
    arch_specific: bool
    path: str          # relative to _buildtile/, identifies the image
    data: bytes
    min_driver: int = 0   # lowest cuDriverGetVersion() that loads it; 0: not recorded


def specialization_launcher(spec: SpecializationRecord) -> str:
    """The exported C function that launches one specialization of a Tile kernel."""
    return f"bt_{spec.symbol}"


@dataclass(frozen=True)
class AlignedEntry:
    """A SIMT kernel's entry for arguments whose data pointers are all ``align``-byte aligned."""

    symbol: str
    align: int
    images: tuple[Image, ...]


@dataclass(frozen=True)
class Kernel:
    name: str          # "vecadd"
    module: str        # "example_kernels.ops"
    symbol: str        # PTX entry name
    params: tuple[ParamRecord, ...]
    block: tuple[int, int, int] | None   # None: no contract, unsafe launch only
    index_dims: int
    dynamic_shared: int
    min_cc: int | None
    requires: tuple[RequirementRecord, ...]
    images: tuple[Image, ...]            # exact cubins first, then PTX, newest first
    kind: str = "simt"                   # "tile": see `tile`
    tile: TileRecord | None = None       # a Tile kernel's specializations
    #: the images of each entry a Tile kernel launches (one per specialization, and its TMA entry), by symbol
    images_of: dict[str, tuple[Image, ...]] = field(default_factory=dict)
    coarsen: int = 1                     # logical blocks per launched block (abi.launch_extras)
    cooperative: bool = False            # launched with every block resident (simt.grid_sync)
    #: launched instead of ``symbol`` when every buffer's data pointer is aligned (manifest ``aligned``)
    aligned: AlignedEntry | None = None

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"

    @property
    def buffers(self) -> tuple[ParamRecord, ...]:
        return tuple(p for p in self.params if p.is_array)

    @property
    def outs(self) -> tuple[ParamRecord, ...]:
        return tuple(p for p in self.params if p.is_tile_out)

    @property
    def launcher(self) -> str:
        """The exported C function (a Tile kernel's: the one that dispatches on the tile shape)."""
        if self.tile is not None:
            return f"bt_{mangle(self.module, self.name)}_tiled"
        return f"bt_{self.symbol}" + ("" if self.block is not None else "_unsafe")

    @property
    def scheduled_launcher(self) -> str:
        """A Tile kernel's dispatcher that also takes a tile schedule (order, persistence)."""
        return f"bt_{mangle(self.module, self.name)}_scheduled"

    @property
    def entries(self) -> tuple[tuple[str, tuple[Image, ...]], ...]:
        """(PTX entry name, images holding it) of everything this kernel launches."""
        if self.tile is not None:
            own = [(s.symbol, self.images_of[s.symbol]) for s in self.tile.specializations]
            tma = [(s.tma.symbol, self.images_of[s.tma.symbol]) for s in self.tile.specializations if s.tma]
            return tuple(own + tma)
        if self.aligned is not None:
            return ((self.symbol, self.images), (self.aligned.symbol, self.aligned.images))
        return ((self.symbol, self.images),)

    @property
    def exported(self) -> tuple[str, ...]:
        """Every C function the shim exports for this kernel."""
        if self.tile is not None:
            return (*(specialization_launcher(s) for s in self.tile.specializations), self.launcher,
                    self.scheduled_launcher)
        return (self.launcher,)


@dataclass(frozen=True)
class Package:
    name: str
    version: str | None   # the distribution's version when the manifest records it
    kernels: tuple[Kernel, ...]
    #: the record element types the kernels' arrays hold (C structs of kernels.h)
    records: tuple[RecordLayout, ...] = ()


def read_package(manifest: dict, package_out: Path) -> Package:
    """Check ``manifest`` (read from ``package_out``) and read every artifact it names from there."""
    model = parse(manifest, str(package_out / MANIFEST_NAME))
    if not _is_c_identifier(model.package):
        raise malformed(f"{model.source}: package", f"{model.package!r} is not a package name usable in C")
    for record in model.records:
        _check_record(record, model.package, f"{model.source}: records")
    read = tuple(_c_kernel(k, package_out) for k in model.kernels)
    exported: set[str] = set()
    for k in read:
        for name in k.exported:
            if name in exported:
                raise malformed(f"{model.source}: kernels", f"two launchers would both be named {name!r}")
            exported.add(name)
    return Package(model.package, model.package_version, read, model.records)


def _check_record(record: RecordLayout, package: str, where: str) -> None:
    """A record's names usable in C: its struct (``<package>_<Record>``, which no function of the
    library may share) and its fields (a C keyword gets a trailing ``_``, see c_syntax.identifier)."""
    if not _IDENTIFIER.fullmatch(record.name) or any(not _IDENTIFIER.fullmatch(f.name) for f in record.fields):
        raise malformed(f"{where}.{record.name}", "a record or field name is not an ASCII identifier usable in C")
    if record.name in PACKAGE_FUNCTIONS:
        raise malformed(f"{where}.{record.name}", f"record `{record.name}` would be named "
                        f"`{record_type(package, record.name)}`, as a function of the package's library is")


def _is_c_identifier(name: str) -> bool:
    return bool(_IDENTIFIER.fullmatch(name)) and not keyword.iskeyword(name)


def _c_kernel(record: KernelRecord, package_out: Path) -> Kernel:
    where = record.where
    if not _IDENTIFIER.fullmatch(record.symbol) or not all(
        _IDENTIFIER.fullmatch(part) for part in [record.name, *record.module.split(".")]
    ):
        raise malformed(where, "its name, module or symbol is not an ASCII identifier usable in C")
    for p in record.params:
        if not _IDENTIFIER.fullmatch(p.name):
            raise malformed(f"{where}, params[{p.index}] (`{p.name}`)", "the name is not an ASCII identifier usable in C")
    # both hosts accept the same trees: the Python host's compiler checks them
    params = record.param_dicts()
    for relation in record.contract.requires:
        compile_requirement(relation.as_dict(), params, where)
    contract, tile = record.contract, record.tile
    images_of = {}
    for spec in tile.specializations if tile else ():
        if not _IDENTIFIER.fullmatch(spec.symbol):
            raise malformed(where, f"symbol {spec.symbol!r} is not an ASCII identifier usable in C")
        images_of[spec.symbol] = _read_images(spec.artifacts, package_out, f"{where}, specialization {spec.describe()}")
        if spec.tma is not None:
            if not _IDENTIFIER.fullmatch(spec.tma.symbol):
                raise malformed(where, f"symbol {spec.tma.symbol!r} is not an ASCII identifier usable in C")
            images_of[spec.tma.symbol] = _read_images(spec.tma.artifacts, package_out,
                                                      f"{where}, TMA entry of specialization {spec.describe()}")
    aligned = None
    if record.aligned is not None:
        if not _IDENTIFIER.fullmatch(record.aligned.symbol):
            raise malformed(where, f"symbol {record.aligned.symbol!r} is not an ASCII identifier usable in C")
        aligned = AlignedEntry(record.aligned.symbol, record.aligned.align,
                               _read_images(record.aligned.artifacts, package_out, f"{where}, aligned entry"))
    min_cc = contract.min_compute_capability
    return Kernel(
        name=record.name,
        module=record.module,
        symbol=record.symbol,
        params=record.params,
        block=None if tile else contract.block,   # a Tile kernel's block and images are per specialization
        index_dims=0 if tile else contract.index_dims,
        dynamic_shared=contract.dynamic_shared,
        min_cc=10 * min_cc[0] + min_cc[1] if min_cc is not None else None,
        requires=contract.requires,
        images=images_of[tile.specializations[0].symbol] if tile else _read_images(record.artifacts, package_out, where),
        kind=record.kind,
        tile=tile,
        coarsen=contract.coarsen,
        cooperative=contract.cooperative,
        images_of=images_of,
        aligned=aligned,
    )


def _read_images(artifacts: tuple[ArtifactRecord, ...], package_out: Path, where: str) -> tuple[Image, ...]:
    if not artifacts:
        raise BuildtileError(
            f"{where} has no compiled artifacts",
            code="BT0620",
            help="rebuild the package; every kernel needs at least one target",
        )
    images = [
        Image(
            target=art.target,
            kind=art.kind,
            cc=art.compute_capability,
            arch_specific=art.arch_specific,
            path=art.path,
            min_driver=art.min_driver or 0,
            data=read_artifact(package_out / art.path, art.sha256, f"{where}, artifact {art.key!r}: "
                               f"{package_out / art.path}",
                               "the C ABI is emitted after the kernels are compiled; rebuild the package"),
        )
        for art in artifacts
    ]
    # the runtime scans in this order: cubins before PTX, sm_90 before sm_90a
    # before sm_90f, and newest first (it takes the first that fits each rule)
    images.sort(key=lambda im: (im.kind == "ptx", im.target[-1] if im.arch_specific else "", -im.cc))
    return tuple(images)
