"""Each kernel of a package as a ``torch.library`` custom op: ``torch.ops.<package>.<kernel>``.

Imported only for a package built with ``[tool.buildtile.torch] ops = true``
on a machine with torch (:func:`buildtile.runtime.frameworks.kernel_defined`).

The ops **mutate their outputs in place**, as the kernels do: the schema marks
every parameter the kernel writes (``DisjointSlice``, ``DisjointTensor``,
``AtomicSlice``, ``tile.Out``) as mutated (``Tensor(a!)``) and the op returns
nothing. ``torch.compile`` functionalizes such an op and Inductor writes it
back in place, so a compiled graph keeps the kernel's own buffers and needs no
shape rule for new outputs; under CUDA graphs the op is captured like any
other kernel. A SIMT kernel's op takes its grid first::

    torch.ops.example_kernels.vecadd(ops.vecadd.grid_for(n), a, b, c)   # = ops.vecadd[grid](a, b, c)

A Tile kernel's op takes the arrays and, per ``tile.Out`` parameter ``z``, an
optional keyword ``z_tile`` (the tile shape; default: its first compiled
specialization)::

    torch.ops.example_kernels.add(x, y, z, z_tile=[1024])   # = tiles.add(x, y, tile.partition(z, [1024]))

The op launches through the kernel's own launch path, so every check of a
direct call (dtypes, ranks, aliasing, ``requires``, the launch contract) is
made, on the current PyTorch stream of the arguments. Its fake (meta)
implementation, what ``torch.compile`` and ``FakeTensorMode`` trace with,
checks the dtypes and ranks the contract names and returns nothing.
The op is named after the kernel; two kernels of one name in different
modules are named ``<module path>_<kernel>`` with the dots as ``_``
(``ops_vecadd``, ``more_ops_vecadd``, without the package's own name).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import torch

from buildtile.errors import BuildtileError
from buildtile.interop.manifest import KernelRecord, ParamRecord
from buildtile.runtime.frameworks import array_mismatch
from buildtile.runtime.package import package_runtime

#: the backends whose tensors reach the launch path (CPU ones run where buildtile emulates a device)
DEVICE_KEYS = ("CUDA", "CPU")

#: one torch.library fragment per package namespace; kept so the registrations stay alive
_libraries: dict[str, torch.library.Library] = {}
#: (namespace, op name) -> the kernel handle registered under it
_registered: dict[tuple[str, str], object] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class OpSpec:
    """How one kernel appears as an op: its name, schema and what its implementation does."""

    namespace: str
    name: str
    schema: str                     # without the name: "(SymInt[] grid, Tensor a, Tensor(a!) c) -> ()"
    record: KernelRecord
    grid_arg: str | None            # SIMT: the name of the leading grid argument
    tile_args: tuple[tuple[ParamRecord, str], ...] = ()   # Tile: (tile.Out parameter, its keyword)

    @property
    def qualname(self) -> str:
        return f"{self.namespace}::{self.name}"


# ----------------------------------------------------------------------------- schemas


def _scalar_type(dtype: str) -> str:
    if dtype == "bool":
        return "bool"
    return "float" if dtype.startswith(("f", "bf")) else "int"


def op_schema(record: KernelRecord) -> tuple[str, str | None, tuple[tuple[ParamRecord, str], ...]]:
    """The schema of ``record``'s op (from ``(`` on), the grid argument's name and the Tile keywords."""
    names = {p.name for p in record.params}
    args: list[str] = []
    grid_arg = None
    if record.kind == "simt":
        grid_arg = "grid" if "grid" not in names else "launch_grid"
        args.append(f"SymInt[] {grid_arg}")
    alias = iter("abcdefghijklmnopqrstuvwxyz")
    for p in record.params:
        if p.is_scalar:
            args.append(f"{_scalar_type(p.dtype)} {p.name}")
        elif p.writes:
            args.append(f"Tensor({next(alias)}!) {p.name}")
        else:
            args.append(f"Tensor {p.name}")
    tile_args = tuple((p, f"{p.name}_tile") for p in record.params if p.is_tile_out)
    if tile_args:
        args.append("*")
        args.extend(f"int[]? {keyword}=None" for _, keyword in tile_args)
    return f"({', '.join(args)}) -> ()", grid_arg, tile_args


def op_names(records: tuple[KernelRecord, ...], package: str) -> dict[tuple[str, str], str]:
    """The op name of each kernel (by (module, name)): the kernel's name, qualified by its module
    where two modules of the package share it."""
    counts: dict[str, int] = {}
    for r in records:
        counts[r.name] = counts.get(r.name, 0) + 1
    names = {}
    for r in records:
        if counts[r.name] == 1:
            names[(r.module, r.name)] = r.name
        else:
            inner = r.module.split(".")[1:] if r.module.startswith(package + ".") else r.module.split(".")
            names[(r.module, r.name)] = "_".join([*inner, r.name])
    return names


def op_spec(record: KernelRecord, namespace: str, name: str) -> OpSpec:
    schema, grid_arg, tile_args = op_schema(record)
    return OpSpec(namespace, name, schema, record, grid_arg, tile_args)


# ----------------------------------------------------------------------------- implementations


def _simt_impl(handle) -> Callable:
    def launch(grid, *args):
        handle[tuple(grid)](*args)

    return launch


def _tile_impl(handle, spec: OpSpec) -> Callable:
    from buildtile.runtime.tile.handles import partition

    outputs = tuple((p.index, p.name, keyword) for p, keyword in spec.tile_args)

    count = len(spec.record.params)

    def launch(*args, **tile_shapes):
        if len(args) > count:   # the dispatcher may pass the keyword-only tile shapes by position
            tile_shapes.update(zip((keyword for _, _, keyword in outputs), args[count:]))
            args = args[:count]
        given = {name: tuple(tile_shapes[keyword]) for _, name, keyword in outputs
                 if tile_shapes.get(keyword) is not None}
        shapes = default_tile_shapes(handle.tile_shapes, given)
        values = list(args)
        for index, name, _ in outputs:
            values[index] = partition(values[index], list(shapes[name]))
        handle(*values).launch()

    return launch


def default_tile_shapes(compiled: list[dict[str, tuple[int, ...]]],
                        given: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """The tile shape of each ``tile.Out`` parameter: the first compiled specialization that agrees
    with those ``given``; ``given`` itself when none does (the launch then names the compiled ones)."""
    for shapes in compiled:
        if all(tuple(shapes[name]) == shape for name, shape in given.items()):
            return {**shapes, **given}
    return {**compiled[0], **given}


def _fake_impl(spec: OpSpec) -> Callable:
    """What tracing runs instead of the kernel: the contract's dtypes and ranks, nothing returned."""
    arrays = tuple(p for p in spec.record.params if p.is_array)
    skip = 1 if spec.grid_arg is not None else 0
    kernel = spec.record.name

    def fake(*args, **tile_shapes):
        for p in arrays:
            check_tensor(kernel, p, args[skip + p.index])

    return fake


def check_tensor(kernel: str, p: ParamRecord, value) -> None:
    """Refuse a tensor whose dtype or shape does not fit parameter ``p`` (the fake implementation's check)."""
    error = array_mismatch(kernel, p, str(value.dtype).removeprefix("torch."), tuple(value.shape), "tensor")
    if error is not None:
        raise error


# ----------------------------------------------------------------------------- registration


def register_kernel(handle) -> OpSpec | None:
    """Register the kernel ``handle`` (a ``Kernel`` or ``TileKernel``) as ``torch.ops.<package>.<name>``.

    Returns the op's description, or None when its package's manifest does not list the kernel
    (it was added after the build: its first launch explains that). Registering a kernel again
    (its module re-imported) points the op at the new handle.
    """
    module, name = handle.pyfunc.__module__, handle.pyfunc.__name__
    package = package_runtime(module, name)
    record = package.manifest.kernel(module, name)
    if record is None:
        return None
    op_name = op_names(package.manifest.kernels, package.name)[(module, name)]
    spec = op_spec(record, package.name, op_name)
    launch = _simt_impl(handle) if spec.grid_arg is not None else _tile_impl(handle, spec)
    key = (spec.namespace, spec.name)
    with _lock:
        cell = _launches.get(key)
        if cell is None:
            cell = _launches[key] = [launch]
            _define(spec, cell)
        cell[0] = launch
        _registered[key] = handle
    return spec


#: (namespace, op name) -> a one-item list holding the launch function the op calls
_launches: dict[tuple[str, str], list] = {}


def _define(spec: OpSpec, cell: list) -> None:
    library = _libraries.get(spec.namespace)
    if library is None:
        library = _libraries[spec.namespace] = torch.library.Library(spec.namespace, "FRAGMENT")
    try:
        library.define(spec.name + spec.schema)
    except RuntimeError as exc:
        raise BuildtileError(
            f"kernel `{spec.record.name}` cannot be registered as the torch op `{spec.qualname}`: {exc}",
            code="BT0620",
            help="another library defines an op of that name in the package's namespace",
        ) from None

    def current(*args, **kwargs):
        return cell[0](*args, **kwargs)

    for dispatch_key in DEVICE_KEYS:
        library.impl(spec.name, current, dispatch_key)
    torch.library.register_fake(spec.qualname, _fake_impl(spec), lib=library)


def registered_ops() -> dict[tuple[str, str], object]:
    """Every (namespace, op name) registered in this process, with its kernel handle."""
    return dict(_registered)
