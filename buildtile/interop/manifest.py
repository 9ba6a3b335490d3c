"""The package manifest: ``<package>/_buildtile/manifest.json``.

Written once by the build, read by the Python runtime, the C shim generator
and ``buildtile inspect``. Version 1 looks like this::

    {
      "manifest_version": 1,
      "abi_version": 1,
      "package": "example_kernels",
      "buildtile_version": "0.1.0",
      "targets": ["sm_80", "sm_90"],
      "ptx_target": "sm_80",                  # null when ptx = false
      "checks": "release",
      "kernels": [
        {
          "name": "vecadd",
          "module": "example_kernels.ops",
          "symbol": "example_kernels_ops__vecadd",   # PTX entry name
          "kind": "simt",                            # backend that compiled it
          "source": {"file": "example_kernels/ops.py", "line": 7,
                     "package_file": "ops.py",      # relative to the package folder
                     "sha256": "..."},              # of the whole module file it was built from
          "params": [
            {"name": "a", "kind": "slice", "dtype": "f32", "rank": 1, "role": "in"},
            {"name": "c", "kind": "disjoint_slice", "dtype": "f32", "rank": 1, "role": "out"},
            {"name": "alpha", "kind": "scalar", "dtype": "f32", "rank": 0, "role": "in"}
          ],
          "contract": {
            "block": [256, 1, 1],        # null: no contract, unsafe_launch only
            "index_dims": 1,             # 1/2/3 when a write uses index_Nd(); 0 if none
            "min_blocks": null,
            "dynamic_shared": 0,
            "min_compute_capability": null,
            "requires": [{"text": "len(a) == len(c)", "expr": {...}}],
            "cooperative": true          # only when set: every block resident at once (grid_sync)
          },
          "artifacts": {                 # paths relative to _buildtile/
            "sm_80": {"kind": "cubin", "path": "kernels/example_kernels_ops__vecadd.sm_80.cubin", "sha256": "...",
                      "ptx_isa": "8.0", "min_driver": 12000},
            "sm_90": {"kind": "cubin", "path": "...sm_90.cubin", "sha256": "...", ...},
            "ptx":   {"kind": "ptx", "target": "sm_80", "path": "...sm_80.ptx", "sha256": "...", ...}
          }
        }
      ]
    }

Each image records the PTX ISA version it is (or was assembled from) and
the lowest CUDA driver that loads it, as ``cuDriverGetVersion`` numbers it
(:mod:`buildtile.interop.driver_compat`). A tree built in place, next to the
package's sources (``buildtile build``, an editable install), also records
``"in_place": {"project": "/path/to/project"}``: the runtime then compares
each kernel module with the ``sha256`` its kernels were built from, so an
edited kernel is never launched from its old build.

A SIMT kernel with array parameters may also have an aligned entry: the same
code, with every array argument's data pointer declared 16-byte aligned, so
that a thread's consecutive reads become vector loads. The build keeps it
only where its PTX differs from the plain entry's::

          "aligned": {
            "align": 16,                                   # bytes every array data pointer is aligned to
            "symbol": "example_kernels_ops__vecadd__a16",
            "artifacts": {...}                             # as above
          }

A host launches it when every array argument's data pointer is a multiple
of ``align``, and the kernel's ``symbol`` otherwise (a view such as ``x[1:]``).

Tile kernels (``"kind": "tile"``) have the same record, plus::

          "params": [
            {"name": "x", "kind": "tensor", "dtype": "f32", "rank": 1, "role": "in"},
            {"name": "z", "kind": "tile_out", "dtype": "f32", "rank": 1, "role": "out"}
          ],
          "contract": {"block": null, "index_dims": 0, "requires": [...], ...},
          "tile": {
            "grid_param": "z",              # the Out parameter whose partition fixes the grid
            "specializations": [            # one per distinct tile shape, compiled ahead of time
              {
                "tile_shapes": {"z": [128]},           # every Out parameter's tile shape
                "schedule": true,                      # takes the trailing tile_schedule (abi.py)
                "symbol": "example_kernels_tiles__add__t128",
                "block": [128, 1, 1],                  # threads the compiler chose for it
                "shared_bytes": 0,                     # dynamic shared memory each launch provides
                "artifacts": {...},                    # as for SIMT kernels
                "dtypes": {"T": "bf16"},               # generic kernels only: each dtype variable's dtype,
                "param_dtypes": {"x": "bf16", "z": "bf16"},  # and the arrays that follow one
                "tma": {...}                           # sm_90a builds of mma kernels only, see below
              }
            ],
            "choice": {"rule": "fewest-padded-v1", "fill_tiles": 264}   # tile.partition(z) without a shape
          }

A specialization whose K loop the Hopper lowering takes has, in a build
for ``sm_90a``, a TMA entry: the same kernel reading its matmul operands with
TMA (``cp.async.bulk.tensor``) into an mbarrier ring and multiplying with
``wgmma``. Its images exist for sm_90a alone::

                "tma": {
                  "symbol": "..._t128x256__tma",
                  "block": [256, 1, 1], "shared_bytes": 148528,
                  "maps": [                          # one CUtensorMap parameter each, after the schedule
                    {"param": "a", "box": [32, 128], "swizzle": 64},   # box innermost first
                    {"param": "b", "box": [64, 32], "swizzle": 128}
                  ],
                  "artifacts": {"sm_90a": {...}}
                }

A host launches it instead of the specialization's ``symbol`` when the device
runs one of its images and every mapped array suits TMA: a base address and
row stride that are multiples of 16 bytes, innermost stride 1, no empty
extent. Otherwise (or on a host that cannot encode tensor maps, such as the
CPU emulator) it launches ``symbol``, whose sm_90a image is built as well.

A ``tile_out`` parameter crosses the kernel ABI like a tensor (pointer,
shape, strides); its tile shape is a compile-time constant of the chosen
specialization. A ``tile_atomic`` parameter (role ``inout``) crosses like a
tensor and has no tile shape: every block adds into it. The launch grid covers
the tiles of ``grid_param`` (the ``tile_out`` of the highest rank): axis
``rank-1`` of the tile grid along grid x, axis ``rank-2`` along y, axis
``rank-3`` along z (the axes before it, for outputs of rank 4 and 5, folded into z as
well, axis ``rank-3`` fastest) while each fits CUDA's limits, else the tiles in
row-major order along x, spilled into y and z (runtime/tile/grid.py; the
kernel finds its tile from its linear block id). A tile record's top-level ``symbol`` and
``artifacts`` are those of its first specialization; a generic kernel's
``params`` give its first specialization's dtypes, and a launch picks the
specializations whose ``param_dtypes`` match its arrays. ``choice`` names
the rule that ranks specializations for a launch without a tile shape
(:mod:`buildtile.interop.tile_choice`); both hosts implement it.

A package whose kernels take arrays of records (``@simt.record``) has a
top-level ``"records"`` object, each record's layout once (fields, dtypes,
offsets, size, alignment; :mod:`buildtile.interop.record_layout`), and such a
parameter's ``dtype`` is the record's name.

``requires`` expressions are small JSON trees, evaluated identically by the
Python host and the C shim (over int64):

- ``{"op": "len", "param": "a"}``; ``{"op": "shape", "param": "a", "axis": 0}``
- ``{"op": "param", "name": "n"}`` (an integer scalar parameter)
- ``{"op": "const", "value": 4}``
- ``{"op": "bin", "fn": "+|-|*|//|%", "lhs": E, "rhs": E}``
- ``{"op": "cmp", "fn": "==|!=|<|<=|>|>=", "lhs": E, "rhs": E}``
- ``{"op": "and" | "or", "args": [E, ...]}``, ``{"op": "not", "arg": E}``

:func:`read` (or :func:`parse`, for a manifest already in memory) checks the
whole format once and returns a :class:`PackageManifest` of frozen records;
every reader (the Python host, the C shim generator) works from that. What
the format leaves to a reader stays with it: the Python host compiles the
``requires`` trees and checks CUDA's limits, the C generator checks that
names are C identifiers and reads the images' bytes. A malformed manifest is
one BT0621 naming the file and the key (``.../manifest.json: kernels[0]
(`ops.vecadd`), params[1] (`c`): unknown dtype 'f8'``).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from buildtile.errors import BuildtileError
from buildtile.interop.abi import ABI_VERSION, DTYPES, ELEMENT_ONLY_DTYPES, PARAM_KINDS, SLICE_KINDS, spell_type
from buildtile.interop.record_layout import LayoutError, RecordLayout, read_records
from buildtile.interop.tile_choice import CHOICE_RECORD, CHOICE_RULE, FILL_TILES

MANIFEST_VERSION = 1
MANIFEST_DIR = "_buildtile"
MANIFEST_NAME = "manifest.json"

#: the highest array rank a kernel takes (BT_MAX_RANK in bt_runtime.h)
MAX_RANK = 8
#: the parameter kinds a Tile kernel takes
TILE_PARAM_KINDS = ("tensor", "tile_out", "tile_atomic", "scalar")
#: a tile grid maps the axes of an output of rank up to 5 onto grid x, y, z (leading axes fold into z)
MAX_TILE_GRID_RANK = 5
ROLES = ("in", "out", "inout")
#: the parameter kinds whose elements may be records (atomics take scalars; Tile kernels take no records)
RECORD_ARRAY_KINDS = ("slice", "disjoint_slice", "tensor", "disjoint_tensor")
ARTIFACT_KINDS = ("cubin", "ptx")
_TARGET = re.compile(r"sm_(\d+)([af]?)")
_COMPUTE_CAPABILITY = re.compile(r"(?:sm_|compute_)?(\d+)(?:\.(\d+))?[af]?")


def manifest_path(package_dir: str | Path) -> Path:
    return Path(package_dir) / MANIFEST_DIR / MANIFEST_NAME


def dumps(manifest: dict) -> str:
    """Stable text (sorted keys, fixed indent) so identical builds give identical bytes."""
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def load(path: str | Path) -> dict:
    """Read a manifest's JSON and check its versions; a wrong ABI or manifest version is a clear error."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise BuildtileError(
            f"no compiled kernels found: {path} does not exist",
            code="BT0620",
            help="install the package with `pip install .` or run `buildtile build` in its project",
        ) from None
    except json.JSONDecodeError as exc:
        raise BuildtileError(f"{path} is not valid JSON: {exc}", code="BT0621") from None
    if not isinstance(data, dict):
        raise malformed(str(path), "expected a JSON object")
    check_versions(data, str(path))
    return data


def read(path: str | Path) -> PackageManifest:
    """:func:`load` the manifest at ``path`` and :func:`parse` it."""
    return parse(load(path), str(path))


def check_versions(data: dict, where: str) -> None:
    if data.get("manifest_version") != MANIFEST_VERSION or data.get("abi_version") != ABI_VERSION:
        raise BuildtileError(
            f"{where} was built for manifest version {data.get('manifest_version')} / "
            f"ABI version {data.get('abi_version')}, but this buildtile reads manifest version "
            f"{MANIFEST_VERSION} / ABI version {ABI_VERSION}",
            code="BT0622",
            help="rebuild the package with this buildtile, or install the buildtile it was built with",
        )


def malformed(where: str, problem: str) -> BuildtileError:
    """The error for a manifest entry that does not follow this format."""
    return BuildtileError(
        f"malformed manifest: {where}: {problem}",
        code="BT0621",
        help="the manifest is written by the build; rebuild the package with this buildtile",
    )


def read_artifact(path: Path, sha256: str | None, what: str, fix: str) -> bytes:
    """The bytes of the image at ``path``, checked against its recorded ``sha256``; BT0623 (``what``
    names the image, ``fix`` says how to repair it) when it cannot be read or does not match."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BuildtileError(f"{what} cannot be read: {exc}", code="BT0623", help=fix) from None
    if sha256 and hashlib.sha256(data).hexdigest() != sha256:
        raise BuildtileError(f"{what} does not match the sha256 recorded in the manifest", code="BT0623", help=fix)
    return data


def _unknown_to_abi(where: str, problem: str) -> BuildtileError:
    """The error for a record this ABI has no meaning for (built by another buildtile)."""
    return BuildtileError(
        f"{where}: {problem}",
        code="BT0622",
        help="build the package with the buildtile that compiled its kernels",
    )


# ----------------------------------------------------------------------------- the records

@dataclass(frozen=True)
class ParamRecord:
    """One declared kernel parameter."""

    index: int
    name: str
    kind: str          # a key of abi.PARAM_KINDS
    dtype: str         # a key of abi.DTYPES, or the name of a record (``record``)
    rank: int          # 0 for scalars, 1 for slices
    role: str          # "in", "out" or "inout"
    #: the layout of the record an array of records holds (the manifest's ``records``); else None
    record: RecordLayout | None = None

    @property
    def itemsize(self) -> int:
        """Bytes of one element (of an array parameter: a record's size, padding included)."""
        return self.record.size if self.record is not None else DTYPES[self.dtype][0]

    @property
    def is_array(self) -> bool:
        return self.kind != "scalar"

    @property
    def is_scalar(self) -> bool:
        return self.kind == "scalar"

    @property
    def is_slice(self) -> bool:
        return self.kind in SLICE_KINDS

    @property
    def is_tile_out(self) -> bool:
        return self.kind == "tile_out"

    @property
    def writes(self) -> bool:
        """Whether the kernel may write it (what the aliasing rule protects)."""
        return self.role in ("out", "inout")

    @property
    def type_text(self) -> str:
        """As written in kernel source: ``f32``, ``Slice[f32]``, ``Tensor[f32, 2]``, ``tile.Out[f32, 1]``."""
        return spell_type(self.kind, self.dtype, self.rank)

    def as_dict(self) -> dict:
        """The manifest's own form of the parameter (what abi.kernel_params and requires.py read)."""
        return {"name": self.name, "kind": self.kind, "dtype": self.dtype, "rank": self.rank, "role": self.role}


@dataclass(frozen=True)
class RequirementRecord:
    text: str          # as written in the decorator
    expr: dict         # the tree; its meaning is checked by the reader that compiles it (requires.py)

    def as_dict(self) -> dict:
        return {"text": self.text, "expr": self.expr}


@dataclass(frozen=True)
class ContractRecord:
    block: tuple[int, int, int] | None          # None: no contract, unsafe launch only
    index_dims: int                             # 0 to 3
    min_blocks: int | None
    dynamic_shared: int                         # bytes
    min_compute_capability: tuple[int, int] | None
    requires: tuple[RequirementRecord, ...]
    coarsen: int = 1                            # logical blocks per launched block (abi.launch_extras)
    cooperative: bool = False                   # launched with every block resident (simt.grid_sync)


@dataclass(frozen=True)
class ArtifactRecord:
    """One compiled image of an entry."""

    key: str           # its key in ``artifacts``: "sm_90", "ptx"
    kind: str          # "cubin" or "ptx"
    target: str        # "sm_90", "sm_90a"; a PTX image's lowest target
    path: str          # relative to _buildtile/
    sha256: str | None
    ptx_isa: str | None = None      # "8.0": the PTX's ``.version`` (a cubin's: the PTX it was assembled from)
    min_driver: int | None = None   # lowest cuDriverGetVersion() that loads it (12000); None: not recorded

    @property
    def compute_capability(self) -> int:
        """``10 * major + minor`` of the target."""
        return int(_TARGET.fullmatch(self.target).group(1))  # type: ignore[union-attr]

    @property
    def arch_specific(self) -> bool:
        """An ``sm_90a`` / ``sm_90f`` target (runs only on its own family)."""
        return bool(_TARGET.fullmatch(self.target).group(2))  # type: ignore[union-attr]


@dataclass(frozen=True)
class TensorMapRecord:
    """One tensor-map parameter of a TMA entry: the array it describes and how the copy engine reads it."""

    param: str                    # the array parameter (a 2-D ``tensor``)
    box: tuple[int, int]          # elements of one copy, innermost first (as cuTensorMapEncodeTiled takes it)
    swizzle: int                  # bytes of the shared-memory swizzle: 32, 64 or 128


@dataclass(frozen=True)
class TmaEntryRecord:
    """A specialization's entry for sm_90a that reads its inputs with TMA through ``maps``."""

    symbol: str
    block: tuple[int, int, int]
    shared_bytes: int
    maps: tuple[TensorMapRecord, ...]
    artifacts: tuple[ArtifactRecord, ...]


@dataclass(frozen=True)
class SpecializationRecord:
    """One compiled tile shape of a Tile kernel: its own entry, block, shared memory and images."""

    tile_shapes: tuple[tuple[str, tuple[int, ...]], ...]   # per tile.Out parameter, in parameter order
    symbol: str
    block: tuple[int, int, int]
    shared_bytes: int
    artifacts: tuple[ArtifactRecord, ...]
    schedule: bool = False      # takes the trailing tile_schedule parameter (abi.TILE_SCHEDULE)
    #: a generic kernel's: each dtype variable's dtype, and each array parameter that follows one
    dtypes: tuple[tuple[str, str], ...] = ()
    param_dtypes: tuple[tuple[str, str], ...] = ()
    #: the TMA entry launched instead where the device, driver and inputs allow it (None: none built)
    tma: TmaEntryRecord | None = None

    def tile_shape_of(self, param: str) -> tuple[int, ...]:
        return dict(self.tile_shapes)[param]

    def dtype_of(self, param: ParamRecord) -> str:
        """The dtype ``param`` has in this specialization."""
        for name, dtype in self.param_dtypes:
            if name == param.name:
                return dtype
        return param.dtype

    def describe(self) -> str:
        """``(128,)`` for one output; ``m: (8, 8), s: (8,)`` for several."""
        if len(self.tile_shapes) == 1:
            return str(self.tile_shapes[0][1])
        return ", ".join(f"{name}: {shape}" for name, shape in self.tile_shapes)

    def describe_dtypes(self) -> str:
        """``T = bf16`` (empty for a kernel that is not generic)."""
        return ", ".join(f"{var} = {dtype}" for var, dtype in self.dtypes)


@dataclass(frozen=True)
class AlignedEntryRecord:
    """A SIMT kernel's entry for arguments whose array data pointers are all ``align``-byte aligned."""

    align: int
    symbol: str
    artifacts: tuple[ArtifactRecord, ...]


@dataclass(frozen=True)
class TileRecord:
    """What a Tile kernel's record adds: the grid output and the specializations."""

    grid_param: str
    specializations: tuple[SpecializationRecord, ...]
    #: how a launch without a tile shape chooses (see tile_choice); manifests before it: the default rule
    fill_tiles: int = FILL_TILES

    @property
    def generic(self) -> bool:
        return bool(self.specializations[0].dtypes)

    @property
    def takes_schedule(self) -> bool:
        """Whether the kernel takes the trailing tile schedule (the same for every specialization)."""
        return self.specializations[0].schedule

    def compiled(self) -> str:
        """The compiled tile shapes, for messages: ``tile shapes (128,), (256,)``."""
        shapes = list(dict.fromkeys(s.tile_shapes for s in self.specializations))
        if len(shapes[0]) == 1:
            return "tile shapes " + ", ".join(str(t[0][1]) for t in shapes)
        return "; ".join("(" + ", ".join(f"{name}: {shape}" for name, shape in t) + ")" for t in shapes)

    def compiled_dtypes(self) -> str:
        """The compiled dtype bindings, for messages: ``T = f16; T = bf16``."""
        return "; ".join(dict.fromkeys(s.describe_dtypes() for s in self.specializations))


@dataclass(frozen=True)
class SourceRecord:
    """The module file a kernel was compiled from, as a build in place checks it against."""

    package_file: str  # relative to the top-level package folder: "ops.py", "sub/kernels.py"
    sha256: str        # of the whole file: the kernel, and the constants and helpers it uses


@dataclass(frozen=True)
class KernelRecord:
    name: str          # "vecadd"
    module: str        # "example_kernels.ops"
    symbol: str        # PTX entry name (a Tile kernel's: its first specialization's)
    kind: str          # "simt" or "tile": the backend that compiled it
    params: tuple[ParamRecord, ...]
    contract: ContractRecord
    artifacts: tuple[ArtifactRecord, ...]   # a Tile kernel's: its first specialization's
    tile: TileRecord | None                 # a Tile kernel's specializations
    bounds_sites: tuple                     # debug builds: what each checked read is (bounds.py)
    where: str                              # file and key, for the messages of readers
    source: SourceRecord | None = None      # None in manifests that predate it
    aligned: AlignedEntryRecord | None = None   # launched when every array data pointer is aligned

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"

    @property
    def outs(self) -> tuple[ParamRecord, ...]:
        return tuple(p for p in self.params if p.is_tile_out)

    @property
    def entries(self) -> tuple[tuple[str, tuple[ArtifactRecord, ...]], ...]:
        """(PTX entry name, its images) of everything this kernel launches."""
        if self.tile is not None:
            return tuple((s.symbol, s.artifacts) for s in self.tile.specializations)
        if self.aligned is not None:
            return ((self.symbol, self.artifacts), (self.aligned.symbol, self.aligned.artifacts))
        return ((self.symbol, self.artifacts),)

    def param_dicts(self) -> list[dict]:
        return [p.as_dict() for p in self.params]


@dataclass(frozen=True)
class PackageManifest:
    source: str                 # the file it was read from, for messages
    package: str
    package_version: str | None
    checks: str                 # "release" or "debug"
    kernels: tuple[KernelRecord, ...]
    #: the project folder of a tree built in place, next to the sources; None for an installed wheel
    in_place_project: str | None = None
    #: the record element types array parameters name as their dtype, by name (record_layout.py)
    records: tuple[RecordLayout, ...] = ()

    def record(self, name: str) -> RecordLayout | None:
        """The layout of the record named ``name`` (an array parameter's dtype), or None."""
        return next((r for r in self.records if r.name == name), None)

    @property
    def debug(self) -> bool:
        return self.checks == "debug"

    def kernel(self, module: str, name: str) -> KernelRecord | None:
        for k in self.kernels:
            if k.module == module and k.name == name:
                return k
        return None


# ----------------------------------------------------------------------------- parsing

def parse(data: dict, source: str) -> PackageManifest:
    """Check a whole manifest against this format; ``source`` names it in messages (its path)."""
    check_versions(data, source)
    package = data.get("package")
    if not isinstance(package, str) or not package:
        raise malformed(f"{source}: package", f"{package!r} is not a package name")
    kernels = data.get("kernels")
    if not isinstance(kernels, list):
        raise malformed(f"{source}: kernels", "expected a list")
    try:
        records = read_records(data.get("records"))
    except LayoutError as exc:
        raise malformed(f"{source}: records", str(exc)) from None
    read_kernels = tuple(_kernel(k, f"{source}: kernels[{i}]", records) for i, k in enumerate(kernels))
    seen: set[str] = set()
    for k in read_kernels:
        for symbol, _ in k.entries:
            if symbol in seen:
                raise malformed(k.where, f"two kernels share the PTX entry name {symbol!r}")
            seen.add(symbol)
    version = data.get("package_version")
    checks = data.get("checks") or "release"
    return PackageManifest(source, package, str(version) if version else None, str(checks), read_kernels,
                           _in_place(data.get("in_place"), f"{source}: in_place"), tuple(records.values()))


def _in_place(raw: object, where: str) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("project"), str) or not raw["project"]:
        raise malformed(where, "expected an object with the project folder under `project`")
    return raw["project"]


def mark_in_place(manifest_file: Path, project: Path) -> None:
    """Record in the manifest at ``manifest_file`` that its tree sits next to the sources of the
    project at ``project`` (a build in place, which the runtime checks for staleness)."""
    data = load(manifest_file)
    data["in_place"] = {"project": str(Path(project).resolve())}
    manifest_file.write_text(dumps(data))


def _kernel(raw: object, where: str, records: dict[str, RecordLayout]) -> KernelRecord:
    if not isinstance(raw, dict):
        raise malformed(where, "expected an object")
    for key in ("name", "module", "symbol"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise malformed(where, f"{key!r} is missing or not a string")
    name, module, symbol = raw["name"], raw["module"], raw["symbol"]
    if not symbol.isidentifier() or not all(part.isidentifier() for part in [name, *module.split(".")]):
        raise malformed(where, "its name, module or symbol is not an identifier")
    where = f"{where} (`{module}.{name}`)"
    kind = raw.get("kind", "simt")
    if kind not in ("simt", "tile"):
        raise _unknown_to_abi(where, f"kind {kind!r} is not a kernel kind this buildtile launches")
    raw_params = raw.get("params") or []
    if not isinstance(raw_params, list):
        raise malformed(where, "params is not a list")
    params = tuple(_param(p, i, where, records) for i, p in enumerate(raw_params))
    if len({p.name for p in params}) != len(params):
        raise malformed(where, "two parameters share a name")
    for p in params:
        if kind == "tile" and p.kind not in TILE_PARAM_KINDS:
            raise malformed(f"{where}, params[{p.index}] (`{p.name}`)",
                            f"parameter `{p.name}` has kind {p.kind!r}, which tile kernels do not take")
        if kind != "tile" and p.is_tile_out:
            raise _unknown_to_abi(f"{where}, params[{p.index}] (`{p.name}`)",
                                  f"parameter `{p.name}` of a {kind} kernel has kind 'tile_out', which kernel "
                                  "ABI v1 does not define outside tile kernels")
    contract = _contract(raw.get("contract"), params, f"{where}, contract")
    tile = _tile(raw.get("tile"), params, f"{where}, tile") if kind == "tile" else None
    artifacts = tile.specializations[0].artifacts if tile else _artifacts(raw.get("artifacts"), f"{where}, artifacts")
    sites = raw.get("bounds_sites") or []
    if not isinstance(sites, list):
        raise malformed(f"{where}, bounds_sites", "expected a list")
    source = _source(raw.get("source"), f"{where}, source")
    aligned = _aligned(raw.get("aligned"), f"{where}, aligned") if kind == "simt" else None
    return KernelRecord(name, module, symbol, kind, params, contract, artifacts, tile, tuple(sites), where, source,
                        aligned)


def _aligned(raw: object, where: str) -> AlignedEntryRecord | None:
    """A SIMT kernel's aligned entry; None when the record has none."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise malformed(where, "expected an object")
    align, symbol = raw.get("align"), raw.get("symbol")
    if isinstance(align, bool) or not isinstance(align, int) or align < 2 or align & (align - 1):
        raise malformed(f"{where}.align", f"aligned.align is {align!r}; expected a power of two")
    if not isinstance(symbol, str) or not symbol.isidentifier():
        raise malformed(f"{where}.symbol", "aligned.symbol is missing or not an identifier")
    return AlignedEntryRecord(align, symbol, _artifacts(raw.get("artifacts"), f"{where}.artifacts"))


def _source(raw: object, where: str) -> SourceRecord | None:
    """The module file and its hash; None when the record has neither (written before they were)."""
    if not isinstance(raw, dict) or (raw.get("package_file") is None and raw.get("sha256") is None):
        return None
    file, sha = raw.get("package_file"), raw.get("sha256")
    if (not isinstance(file, str) or not file or Path(file).is_absolute() or ".." in Path(file).parts
            or not isinstance(sha, str) or re.fullmatch(r"[0-9a-f]{64}", sha) is None):
        raise malformed(where, "source.package_file must be a path inside the package and source.sha256 "
                               "a sha256 in hex")
    return SourceRecord(file, sha)


def _param(raw: object, index: int, kernel: str, records: dict[str, RecordLayout]) -> ParamRecord:
    where = f"{kernel}, params[{index}]"
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"].isidentifier():
        raise malformed(where, "expected an object with an identifier for a name")
    name, kind, dtype = raw["name"], raw.get("kind"), raw.get("dtype")
    where = f"{where} (`{name}`)"
    if kind not in PARAM_KINDS:
        raise malformed(where, f"parameter `{name}` has kind {kind!r}, which kernel ABI v1 does not define "
                               f"(known kinds: {', '.join(PARAM_KINDS)}); this buildtile cannot pass it")
    if dtype in records and kind == "scalar":
        raise malformed(where, f"scalar parameter `{name}` has record dtype {dtype!r}; records are array elements")
    if dtype not in DTYPES and dtype not in records:
        raise malformed(where, f"parameter `{name}` has unknown dtype {dtype!r}")
    if dtype in records and kind not in RECORD_ARRAY_KINDS:
        raise malformed(where, f"parameter `{name}` of kind {kind!r} has record dtype {dtype!r}; records are "
                               f"elements of {', '.join(RECORD_ARRAY_KINDS)} parameters")
    if kind == "scalar" and dtype in ELEMENT_ONLY_DTYPES:
        raise malformed(where, f"scalar parameter `{name}` has dtype {dtype!r}, which only array elements have")
    if kind == "scalar":
        rank = 0
    elif kind in SLICE_KINDS:
        rank = 1
    else:
        rank = raw.get("rank", 1)
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank <= MAX_RANK:
            raise malformed(where, f"parameter `{name}` has rank {rank!r}; kernels take arrays of rank 0 to "
                                   f"{MAX_RANK}")
    role = raw.get("role") or PARAM_KINDS[kind]
    if role not in ROLES:
        raise malformed(where, f"parameter `{name}` has unknown role {role!r}")
    return ParamRecord(index, name, kind, dtype, rank, role, records.get(dtype))


def _contract(raw: object, params: tuple[ParamRecord, ...], where: str) -> ContractRecord:
    raw = raw if raw is not None else {}
    if not isinstance(raw, dict):
        raise malformed(where, "expected an object")
    block = _block(raw.get("block"), f"{where}.block", "contract.block")
    index_dims = raw.get("index_dims") or 0
    if index_dims not in (0, 1, 2, 3) or isinstance(index_dims, bool):
        raise malformed(f"{where}.index_dims", f"contract.index_dims is {index_dims!r}; expected 0 to 3")
    min_blocks = raw.get("min_blocks")
    if min_blocks is not None and (isinstance(min_blocks, bool) or not isinstance(min_blocks, int) or min_blocks < 1):
        raise malformed(f"{where}.min_blocks", f"contract.min_blocks is {min_blocks!r}")
    dynamic_shared = _count(raw.get("dynamic_shared") or 0, 2**32, f"{where}.dynamic_shared",
                            "contract.dynamic_shared")
    coarsen = raw.get("coarsen") or 1
    if isinstance(coarsen, bool) or not isinstance(coarsen, int) or not 1 <= coarsen <= 64:
        raise malformed(f"{where}.coarsen", f"contract.coarsen is {coarsen!r}; expected 1 to 64")
    requires = raw.get("requires") or []
    if not isinstance(requires, list):
        raise malformed(f"{where}.requires", "contract.requires is not a list")
    relations = []
    for i, entry in enumerate(requires):
        if not isinstance(entry, dict) or not isinstance(entry.get("text"), str) or "expr" not in entry:
            raise malformed(f"{where}.requires[{i}]", f"contract.requires[{i}] needs a text and an expr")
        relations.append(RequirementRecord(entry["text"], entry["expr"]))
    min_cc = _compute_capability(raw.get("min_compute_capability"), f"{where}.min_compute_capability")
    cooperative = raw.get("cooperative", False)
    if not isinstance(cooperative, bool):
        raise malformed(f"{where}.cooperative", f"contract.cooperative is {cooperative!r}; expected true or false")
    return ContractRecord(block, index_dims, min_blocks, dynamic_shared, min_cc, tuple(relations), coarsen,
                          cooperative)


def _block(block: object, where: str, what: str) -> tuple[int, int, int] | None:
    if block is None:
        return None
    items = [block] if isinstance(block, int) and not isinstance(block, bool) else block
    if (not isinstance(items, list) or not 1 <= len(items) <= 3
            or not all(isinstance(b, int) and not isinstance(b, bool) and 1 <= b < 2**31 for b in items)):
        raise malformed(where, f"{what} is {block!r}; expected 1 to 3 positive integers or null")
    x, y, z = (list(items) + [1, 1])[:3]
    return (x, y, z)


def _count(value: object, bound: int, where: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < bound:
        raise malformed(where, f"{what} is {value!r}")
    return value


def _compute_capability(value: object, where: str) -> tuple[int, int] | None:
    """``"8.6"``, ``8.6``, ``"sm_86"``, ``86`` all name 8.6; ``8`` and ``"80"`` name 8.0."""
    if value is None:
        return None
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return value[0], value[1]
    match = None if isinstance(value, bool) else _COMPUTE_CAPABILITY.fullmatch(str(value).strip())
    if match is None:
        raise malformed(where, f"contract.min_compute_capability is {value!r}")
    major, minor = match.groups()
    if minor is not None:
        return int(major), int(minor)
    number = int(major)
    return (number // 10, number % 10) if number >= 10 else (number, 0)


def _artifacts(raw: object, where: str) -> tuple[ArtifactRecord, ...]:
    """The images of one entry, by key (a kernel without any is refused by whoever needs one)."""
    raw = raw if raw is not None else {}
    if not isinstance(raw, dict):
        raise malformed(where, "expected an object")
    out = []
    for key, art in sorted(raw.items()):
        if not isinstance(art, dict) or art.get("kind", "cubin") not in ARTIFACT_KINDS:
            raise malformed(f"{where}.{key}", f"artifact {key!r} is not a cubin or ptx entry")
        kind = art.get("kind", "cubin")
        target = art.get("target") or key if kind == "ptx" else key
        if not isinstance(target, str) or _TARGET.fullmatch(target) is None:
            raise malformed(f"{where}.{key}", f"artifact {key!r} has target {target!r}; expected sm_XY")
        if not isinstance(art.get("path"), str):
            raise malformed(f"{where}.{key}", f"artifact {key!r} has no path")
        sha = art.get("sha256")
        isa, min_driver = art.get("ptx_isa"), art.get("min_driver")
        if isa is not None and (not isinstance(isa, str) or re.fullmatch(r"\d+\.\d+", isa) is None):
            raise malformed(f"{where}.{key}", f"artifact {key!r} has ptx_isa {isa!r}; expected a version such as '8.0'")
        if min_driver is not None and (isinstance(min_driver, bool) or not isinstance(min_driver, int)
                                       or min_driver < 0):
            raise malformed(f"{where}.{key}", f"artifact {key!r} has min_driver {min_driver!r}; expected a "
                                              "driver version number such as 12000")
        out.append(ArtifactRecord(key, kind, target, art["path"], sha if isinstance(sha, str) and sha else None,
                                  isa, min_driver))
    return tuple(out)


def _tile(raw: object, params: tuple[ParamRecord, ...], where: str) -> TileRecord:
    """A Tile kernel's ``tile`` object: the grid output and the specializations."""
    kernel = where.rpartition(",")[0]
    if not isinstance(raw, dict):
        raise malformed(kernel, "a tile kernel's record has no `tile` object")
    outs = [p for p in params if p.is_tile_out]
    if not outs:
        raise malformed(kernel, "a tile kernel needs at least one tile.Out parameter")
    grid = next((p for p in outs if p.name == raw.get("grid_param")), None)
    if grid is None:
        raise malformed(f"{where}.grid_param",
                        f"tile.grid_param {raw.get('grid_param')!r} is not a tile.Out parameter")
    if grid.rank > MAX_TILE_GRID_RANK:
        raise malformed(f"{where}.grid_param", f"the grid parameter `{grid.name}` has rank {grid.rank}; "
                                               f"a tile grid has at most {MAX_TILE_GRID_RANK} axes")
    specs = raw.get("specializations")
    if not isinstance(specs, list) or not specs:
        raise malformed(f"{where}.specializations", "tile.specializations is missing or empty")
    read_specs = tuple(_specialization(s, outs, f"{where}.specializations[{i}]", params)
                       for i, s in enumerate(specs))
    seen: set = set()
    for spec in read_specs:
        if (spec.tile_shapes, spec.dtypes) in seen:
            raise malformed(f"{where}.specializations",
                            f"two specializations have the same tile shapes {spec.describe()}"
                            + (f" and dtypes {spec.describe_dtypes()}" if spec.dtypes else ""))
        seen.add((spec.tile_shapes, spec.dtypes))
    if len({bool(s.dtypes) for s in read_specs}) > 1 or len({tuple(v for v, _ in s.dtypes) for s in read_specs}) > 1:
        raise malformed(f"{where}.specializations", "every specialization of a generic kernel binds the same "
                                                    "dtype variables")
    choice = raw.get("choice", CHOICE_RECORD)
    if not (isinstance(choice, dict) and choice.get("rule") == CHOICE_RULE
            and isinstance(choice.get("fill_tiles"), int) and not isinstance(choice.get("fill_tiles"), bool)
            and choice["fill_tiles"] >= 1):
        raise malformed(f"{where}.choice", f"tile.choice is {choice!r}; this runtime knows rule {CHOICE_RULE!r} "
                                           "with a positive fill_tiles")
    if len({spec.schedule for spec in read_specs}) != 1:
        raise malformed(f"{where}.specializations", "some specializations take a tile schedule and some do not")
    return TileRecord(grid.name, read_specs, choice["fill_tiles"])


def _specialization(raw: object, outs: list[ParamRecord], where: str,
                    params: tuple[ParamRecord, ...] = ()) -> SpecializationRecord:
    params_by_name = {p.name: p for p in params}
    if not isinstance(raw, dict):
        raise malformed(where, "expected an object")
    shapes = raw.get("tile_shapes")
    if not isinstance(shapes, dict) or set(shapes) != {p.name for p in outs}:
        raise malformed(f"{where}.tile_shapes", "tile_shapes must give the tile shape of exactly "
                                                f"{', '.join(f'`{p.name}`' for p in outs)}")
    tile_shapes = []
    for p in outs:
        shape = shapes[p.name]
        if (not isinstance(shape, list) or len(shape) != p.rank
                or not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n < 2**62 for n in shape)):
            raise malformed(f"{where}.tile_shapes", f"the tile shape of `{p.name}` is {shape!r}; "
                                                    f"expected {p.rank} positive integers")
        tile_shapes.append((p.name, tuple(shape)))
    symbol, block, shared = _entry_launch(raw, where, "a specialization")
    artifacts = _artifacts(raw.get("artifacts"), f"{where}.artifacts")
    if not artifacts:
        raise malformed(f"{where}.artifacts", "no artifacts")
    schedule = raw.get("schedule", False)
    if not isinstance(schedule, bool):
        raise malformed(f"{where}.schedule", f"schedule is {schedule!r}; expected true or false")
    dtypes = _dtype_map(raw.get("dtypes", {}), f"{where}.dtypes", lambda k: k.isidentifier())
    param_dtypes = _dtype_map(raw.get("param_dtypes", {}), f"{where}.param_dtypes", lambda k: k in params_by_name)
    for name, dtype in param_dtypes:
        if params_by_name[name].is_scalar:
            raise malformed(f"{where}.param_dtypes", f"`{name}` is a scalar; only arrays follow a dtype variable")
    if bool(dtypes) != bool(param_dtypes):
        raise malformed(where, "a generic specialization has both `dtypes` and `param_dtypes`")
    by_param = dict(param_dtypes)
    tma = _tma_entry(raw["tma"], f"{where}.tma", params_by_name) if raw.get("tma") is not None else None
    return SpecializationRecord(tuple(tile_shapes), symbol, block, shared, artifacts, schedule=schedule,
                                dtypes=dtypes,
                                param_dtypes=tuple((q.name, by_param[q.name]) for q in params if q.name in by_param),
                                tma=tma)


def _entry_launch(raw: dict, where: str, what: str) -> tuple[str, tuple[int, int, int], int]:
    """The PTX entry, block shape and shared bytes of a specialization or of its TMA entry."""
    symbol = raw.get("symbol")
    if not isinstance(symbol, str) or not symbol.isidentifier():
        raise malformed(f"{where}.symbol", f"symbol {symbol!r} is not a PTX entry name")
    block = _block(raw.get("block"), f"{where}.block", "block")
    if block is None:
        raise malformed(f"{where}.block", f"{what} needs its block shape")
    return symbol, block, _count(raw.get("shared_bytes", 0), 2**32, f"{where}.shared_bytes", "shared_bytes")


def _tma_entry(raw: object, where: str, params: dict[str, ParamRecord]) -> TmaEntryRecord:
    """A specialization's ``tma`` object: its entry, launch shape and tensor maps."""
    if not isinstance(raw, dict):
        raise malformed(where, "expected an object")
    symbol, block, shared = _entry_launch(raw, where, "a TMA entry")
    maps = raw.get("maps")
    if not isinstance(maps, list) or not maps:
        raise malformed(f"{where}.maps", "a TMA entry needs its tensor maps")
    read = []
    for i, m in enumerate(maps):
        at = f"{where}.maps[{i}]"
        param = params.get(m.get("param")) if isinstance(m, dict) else None
        if param is None or param.kind != "tensor" or param.rank != 2:
            raise malformed(at, "a tensor map describes a 2-D tensor parameter of the kernel")
        box, swizzle = m.get("box"), m.get("swizzle")
        if (not isinstance(box, list) or len(box) != 2
                or not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 256 for n in box)):
            raise malformed(at, f"box is {box!r}; expected two extents of 1 to 256")
        if swizzle not in (32, 64, 128):
            raise malformed(at, f"swizzle is {swizzle!r}; expected 32, 64 or 128")
        read.append(TensorMapRecord(param.name, (box[0], box[1]), swizzle))
    return TmaEntryRecord(symbol, block, shared, tuple(read), _artifacts(raw.get("artifacts"), f"{where}.artifacts"))


def _dtype_map(raw: object, where: str, key_ok) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, dict) or not all(isinstance(k, str) and key_ok(k) for k in raw):
        raise malformed(where, f"expected an object from names to dtypes, got {raw!r}")
    for k, v in raw.items():
        if v not in DTYPES:
            raise malformed(where, f"`{k}` has unknown dtype {v!r}")
    return tuple(raw.items())
