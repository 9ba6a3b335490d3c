"""The manifest, read and checked once for the C and C++ generators.

Everything the generators need is here as plain frozen data (kernels, their
parameters and contracts, and the bytes of their images), so the generators
do no validation of their own and a malformed manifest stops the build with
one BT-coded message naming the entry.
"""

from __future__ import annotations

import hashlib
import keyword
import re
from dataclasses import dataclass
from pathlib import Path

from buildtile.errors import BuildtileError
from buildtile.interop.abi import DTYPES, PARAM_KINDS, mangle, spell_type
from buildtile.interop.manifest import check_versions, malformed
from buildtile.runtime.requires import compile_requirement

#: the highest tensor rank a launcher accepts (BT_MAX_RANK in bt_runtime.h)
MAX_RANK = 8

#: the parameter kinds a Tile kernel takes
_TILE_KINDS = ("tensor", "tile_out", "scalar")
#: a tile grid maps at most three output axes onto grid x, y, z
_MAX_TILE_GRID_RANK = 3
_ROLES = ("in", "out", "inout")
_TARGET = re.compile(r"sm_(\d+)([af]?)")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Param:
    name: str
    kind: str          # a key of abi.PARAM_KINDS
    dtype: str         # a key of abi.DTYPES
    rank: int          # 0 for scalars, 1 for slices
    role: str          # "in", "out" or "inout"

    @property
    def is_scalar(self) -> bool:
        return self.kind == "scalar"

    @property
    def is_slice(self) -> bool:
        return self.kind.endswith("slice")

    @property
    def is_tile_out(self) -> bool:
        return self.kind == "tile_out"

    @property
    def type_name(self) -> str:
        """As written in kernel source: ``f32``, ``Slice[f32]``, ``Tensor[f32, 2]``."""
        return spell_type(self.kind, self.dtype, self.rank)


@dataclass(frozen=True)
class Requirement:
    text: str          # as written in the decorator
    expr: dict         # checked tree (requires.py)


@dataclass(frozen=True)
class Image:
    target: str        # "sm_90", "sm_90a"
    kind: str          # "cubin" or "ptx"
    cc: int            # 10 * major + minor
    arch_specific: bool
    path: str          # relative to _buildtile/, identifies the image
    data: bytes


@dataclass(frozen=True)
class TileSpecialization:
    """One compiled tile shape of a Tile kernel: its own entry, block, shared memory and images."""

    tile_shapes: tuple[tuple[str, tuple[int, ...]], ...]   # per tile.Out parameter, in parameter order
    symbol: str
    block: tuple[int, int, int]
    shared_bytes: int
    images: tuple[Image, ...]

    @property
    def launcher(self) -> str:
        return f"bt_{self.symbol}"

    def describe(self) -> str:
        """``(128,)`` for one output; ``m: (8, 8), s: (8,)`` for several (the Python host's words)."""
        if len(self.tile_shapes) == 1:
            return str(self.tile_shapes[0][1])
        return ", ".join(f"{name}: {shape}" for name, shape in self.tile_shapes)


@dataclass(frozen=True)
class Tile:
    """What a Tile kernel's record adds: the grid output and the specializations."""

    grid_param: str
    specializations: tuple[TileSpecialization, ...]

    def compiled(self) -> str:
        """The compiled tile shapes, as the Python host lists them in BT0600."""
        if len(self.specializations[0].tile_shapes) == 1:
            return "tile shapes " + ", ".join(s.describe() for s in self.specializations)
        return "; ".join(f"({s.describe()})" for s in self.specializations)


@dataclass(frozen=True)
class Kernel:
    name: str          # "vecadd"
    module: str        # "example_kernels.ops"
    symbol: str        # PTX entry name
    params: tuple[Param, ...]
    block: tuple[int, int, int] | None   # None: no contract, unsafe launch only
    index_dims: int
    dynamic_shared: int
    min_cc: int | None
    requires: tuple[Requirement, ...]
    images: tuple[Image, ...]            # exact cubins first, then PTX, newest first
    kind: str = "simt"                   # "tile": see `tile`
    tile: Tile | None = None             # a Tile kernel's specializations
    coarsen: int = 1                     # logical blocks per launched block (abi.launch_extras)

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"

    @property
    def buffers(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if not p.is_scalar)

    @property
    def outs(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.is_tile_out)

    @property
    def launcher(self) -> str:
        """The exported C function (a Tile kernel's: the one that dispatches on the tile shape)."""
        if self.tile is not None:
            return f"bt_{mangle(self.module, self.name)}_tiled"
        return f"bt_{self.symbol}" + ("" if self.block is not None else "_unsafe")

    @property
    def entries(self) -> tuple[tuple[str, tuple[Image, ...]], ...]:
        """(PTX entry name, images holding it) of everything this kernel launches."""
        if self.tile is not None:
            return tuple((s.symbol, s.images) for s in self.tile.specializations)
        return ((self.symbol, self.images),)

    @property
    def exported(self) -> tuple[str, ...]:
        """Every C function the shim exports for this kernel."""
        if self.tile is not None:
            return (*(s.launcher for s in self.tile.specializations), self.launcher)
        return (self.launcher,)


@dataclass(frozen=True)
class Package:
    name: str
    version: str | None   # the distribution's version when the manifest records it
    kernels: tuple[Kernel, ...]


def read_package(manifest: dict, package_out: Path) -> Package:
    """Check ``manifest`` and read every artifact it names from ``package_out``."""
    check_versions(manifest, "manifest")
    package = manifest.get("package")
    if not isinstance(package, str) or not _is_c_identifier(package):
        raise malformed("package", f"{package!r} is not a package name usable in C")
    kernels = manifest.get("kernels")
    if not isinstance(kernels, list):
        raise malformed("kernels", "expected a list")
    read = tuple(_read_kernel(k, i, package_out) for i, k in enumerate(kernels))
    seen: set[str] = set()
    exported: set[str] = set()
    for k in read:
        for symbol, _ in k.entries:
            if symbol in seen:
                raise malformed("kernels", f"two kernels share the PTX entry name {symbol!r}")
            seen.add(symbol)
        for name in k.exported:
            if name in exported:
                raise malformed("kernels", f"two launchers would both be named {name!r}")
            exported.add(name)
    version = manifest.get("package_version")
    return Package(package, str(version) if version else None, read)


def _is_c_identifier(name: str) -> bool:
    return bool(_IDENTIFIER.fullmatch(name)) and not keyword.iskeyword(name)


def _read_kernel(raw: dict, index: int, package_out: Path) -> Kernel:
    where = f"kernels[{index}]"
    if not isinstance(raw, dict):
        raise malformed(where, "expected an object")
    for key in ("name", "module", "symbol"):
        if not isinstance(raw.get(key), str):
            raise malformed(where, f"{key!r} is missing or not a string")
    where = f"kernel {raw['module']}.{raw['name']}"
    if not _IDENTIFIER.fullmatch(raw["symbol"]) or not all(
        _IDENTIFIER.fullmatch(part) for part in [raw["name"], *raw["module"].split(".")]
    ):
        raise malformed(where, "its name, module or symbol is not an ASCII identifier usable in C")
    params = tuple(_read_param(p, f"{where}, parameter {i}") for i, p in enumerate(raw.get("params", [])))
    if len({p.name for p in params}) != len(params):
        raise malformed(where, "two parameters share a name")
    kind = raw.get("kind", "simt")
    for p in params:
        if kind == "tile" and p.kind not in _TILE_KINDS:
            raise malformed(where, f"parameter {p.name!r} has kind {p.kind!r}, which tile kernels do not take")
        if kind != "tile" and p.is_tile_out:
            raise BuildtileError(
                f"parameter {p.name!r} of {kind} kernel {raw['module']}.{raw['name']} has kind 'tile_out', "
                "which kernel ABI v1 does not define outside tile kernels",
                code="BT0622",
                help="build the package with the buildtile that compiled its kernels",
            )
    contract = raw.get("contract") or {}
    block = _read_block(contract.get("block"), where)
    requires = _read_requires(contract.get("requires") or [], params, where)
    index_dims = contract.get("index_dims") or 0
    if index_dims not in (0, 1, 2, 3):
        raise malformed(where, f"contract.index_dims is {index_dims!r}; expected 0 to 3")
    dynamic_shared = contract.get("dynamic_shared") or 0
    if not isinstance(dynamic_shared, int) or not 0 <= dynamic_shared < 2**32:
        raise malformed(where, f"contract.dynamic_shared is {dynamic_shared!r}")
    coarsen = contract.get("coarsen") or 1
    if not isinstance(coarsen, int) or not 1 <= coarsen <= 64:
        raise malformed(where, f"contract.coarsen is {coarsen!r}; expected 1 to 64")
    tile = _read_tile(raw.get("tile"), params, package_out, where) if kind == "tile" else None
    if tile is not None:  # the block and images are per specialization
        block, index_dims = None, 0
    return Kernel(
        name=raw["name"],
        module=raw["module"],
        symbol=raw["symbol"],
        params=params,
        block=block,
        index_dims=index_dims,
        dynamic_shared=dynamic_shared,
        min_cc=_read_min_cc(contract.get("min_compute_capability"), where),
        requires=requires,
        images=tile.specializations[0].images if tile else _read_images(raw.get("artifacts"), package_out, where),
        kind=kind,
        tile=tile,
        coarsen=coarsen,
    )


def _read_tile(raw: object, params: tuple[Param, ...], package_out: Path, where: str) -> Tile:
    """A Tile kernel's ``tile`` object (manifest.py): grid output and specializations."""
    if not isinstance(raw, dict):
        raise malformed(where, "a tile kernel's record has no `tile` object")
    outs = [p for p in params if p.is_tile_out]
    if not outs:
        raise malformed(where, "a tile kernel needs at least one tile.Out parameter")
    grid = next((p for p in outs if p.name == raw.get("grid_param")), None)
    if grid is None:
        raise malformed(where, f"tile.grid_param {raw.get('grid_param')!r} is not a tile.Out parameter")
    if grid.rank > _MAX_TILE_GRID_RANK:
        raise malformed(where, f"the grid parameter {grid.name!r} has rank {grid.rank}; a tile grid has at most "
                               f"{_MAX_TILE_GRID_RANK} axes")
    specs = raw.get("specializations")
    if not isinstance(specs, list) or not specs:
        raise malformed(where, "tile.specializations is missing or empty")
    read = tuple(_read_specialization(s, outs, package_out, f"{where}, tile.specializations[{i}]")
                 for i, s in enumerate(specs))
    if len({s.tile_shapes for s in read}) != len(read):
        raise malformed(where, "two specializations have the same tile shapes")
    return Tile(grid.name, read)


def _read_specialization(raw: object, outs: list[Param], package_out: Path, where: str) -> TileSpecialization:
    if not isinstance(raw, dict):
        raise malformed(where, "expected an object")
    shapes = raw.get("tile_shapes")
    if not isinstance(shapes, dict) or set(shapes) != {p.name for p in outs}:
        raise malformed(where, f"tile_shapes must give the tile shape of exactly {', '.join(p.name for p in outs)}")
    tile_shapes = []
    for p in outs:
        shape = shapes[p.name]
        if (not isinstance(shape, list) or len(shape) != p.rank
                or not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n < 2**62 for n in shape)):
            raise malformed(where, f"the tile shape of {p.name!r} is {shape!r}; expected {p.rank} positive integers")
        tile_shapes.append((p.name, tuple(shape)))
    symbol = raw.get("symbol")
    if not isinstance(symbol, str) or not _IDENTIFIER.fullmatch(symbol):
        raise malformed(where, f"symbol {symbol!r} is not an ASCII identifier usable in C")
    block = _read_block(raw.get("block"), where)
    if block is None:
        raise malformed(where, "a specialization needs its block shape")
    shared = raw.get("shared_bytes", 0)
    if isinstance(shared, bool) or not isinstance(shared, int) or not 0 <= shared < 2**32:
        raise malformed(where, f"shared_bytes is {shared!r}")
    images = _read_images(raw.get("artifacts"), package_out, where)
    return TileSpecialization(tuple(tile_shapes), symbol, block, shared, images)


def _read_param(raw: dict, where: str) -> Param:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise malformed(where, "expected an object with a name")
    name, kind, dtype = raw["name"], raw.get("kind"), raw.get("dtype")
    where = f"{where} ({name!r})"
    if not _IDENTIFIER.fullmatch(name):
        raise malformed(where, "the name is not an ASCII identifier usable in C")
    if kind not in PARAM_KINDS:
        raise BuildtileError(
            f"parameter {name!r} has kind {kind!r}, which kernel ABI v1 does not define "
            f"(known kinds: {', '.join(PARAM_KINDS)})",
            code="BT0622",
            help="build the package with the buildtile that compiled its kernels",
        )
    if dtype not in DTYPES:
        raise malformed(where, f"unknown dtype {dtype!r}")
    rank = raw.get("rank", 0 if kind == "scalar" else 1)
    if kind.endswith("tensor") or kind == "tile_out":
        if not isinstance(rank, int) or not 0 <= rank <= MAX_RANK:
            raise malformed(where, f"rank {rank!r}; the C ABI takes tensors of rank 0 to {MAX_RANK}")
    else:
        rank = 0 if kind == "scalar" else 1
    role = raw.get("role") or PARAM_KINDS[kind]
    if role not in _ROLES:
        raise malformed(where, f"unknown role {role!r}")
    return Param(name, kind, dtype, rank, role)


def _read_block(block: object, where: str) -> tuple[int, int, int] | None:
    if block is None:
        return None
    if isinstance(block, int):
        block = [block]
    if (
        not isinstance(block, list)
        or not 1 <= len(block) <= 3
        or not all(isinstance(b, int) and 1 <= b < 2**31 for b in block)
    ):
        raise malformed(where, f"contract.block is {block!r}; expected 1 to 3 positive integers or null")
    x, y, z = (list(block) + [1, 1])[:3]
    return (x, y, z)


def _read_requires(raw: object, params: tuple[Param, ...], where: str) -> tuple[Requirement, ...]:
    """The relations, checked by the Python host's own compiler: both hosts accept the same trees."""
    if not isinstance(raw, list):
        raise malformed(where, "contract.requires is not a list")
    # requires.py reads a tile output as the tensor it is
    records = [{"name": p.name, "kind": "disjoint_tensor" if p.is_tile_out else p.kind, "dtype": p.dtype,
                "rank": p.rank} for p in params]
    out = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict) or not isinstance(entry.get("text"), str):
            raise malformed(where, f"contract.requires[{i}] needs a text and an expr")
        compile_requirement(entry, records, where)
        out.append(Requirement(entry["text"], entry["expr"]))
    return tuple(out)


def _read_min_cc(value: object, where: str) -> int | None:
    """``8.6``, ``"8.6"``, ``"sm_86"``, ``86`` and ``8`` (8.0) all name compute capability 8.6 / 8.0."""
    if value is None:
        return None
    text = str(value).strip()
    match = re.fullmatch(r"(?:sm_)?(\d+)(?:\.(\d))?", text)
    if match and not isinstance(value, bool):
        major, minor = match.groups()
        if minor is not None:
            return 10 * int(major) + int(minor)
        number = int(major)
        return number * 10 if number < 10 else number
    raise malformed(where, f"contract.min_compute_capability is {value!r}")


def _read_images(artifacts: object, package_out: Path, where: str) -> tuple[Image, ...]:
    if not isinstance(artifacts, dict) or not artifacts:
        raise BuildtileError(
            f"{where} has no compiled artifacts",
            code="BT0620",
            help="rebuild the package; every kernel needs at least one target",
        )
    images = []
    for key, art in sorted(artifacts.items()):
        if not isinstance(art, dict) or art.get("kind") not in ("cubin", "ptx"):
            raise malformed(where, f"artifact {key!r} is not a cubin or ptx entry")
        target = art.get("target", key) if art["kind"] == "ptx" else key
        match = _TARGET.fullmatch(str(target))
        if match is None:
            raise malformed(where, f"artifact {key!r} has target {target!r}; expected sm_XY")
        images.append(
            Image(
                target=target,
                kind=art["kind"],
                cc=int(match.group(1)),
                arch_specific=bool(match.group(2)),
                path=str(art.get("path")),
                data=_read_artifact(art, package_out, f"{where}, artifact {key!r}"),
            )
        )
    # the runtime scans in this order: cubins before PTX, sm_90 before sm_90a
    # before sm_90f, and newest first (it takes the first that fits each rule)
    images.sort(key=lambda im: (im.kind == "ptx", im.target[-1] if im.arch_specific else "", -im.cc))
    return tuple(images)


def _read_artifact(art: dict, package_out: Path, where: str) -> bytes:
    if not isinstance(art.get("path"), str):
        raise malformed(where, "no path")
    path = package_out / art["path"]
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BuildtileError(
            f"{where}: {path} cannot be read: {exc}",
            code="BT0623",
            help="the C ABI is emitted after the kernels are compiled; rebuild the package",
        ) from None
    expected = art.get("sha256")
    if expected and hashlib.sha256(data).hexdigest() != expected:
        raise BuildtileError(
            f"{where}: {path} does not match the sha256 recorded in the manifest",
            code="BT0623",
            help="an artifact changed after the manifest was written; rebuild the package",
        )
    return data
