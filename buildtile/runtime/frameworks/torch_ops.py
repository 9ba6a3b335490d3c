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
made, on the current PyTorch stream of the arguments. An eager call of the op
goes straight to that launch when PyTorch's dispatcher would add nothing (no
mode, transform or tracer active, plain tensors), and through the dispatcher
otherwise (:mod:`~buildtile.runtime.frameworks.torch_eager`). Its fake (meta)
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
from buildtile.runtime.frameworks.torch_eager import install_eager
from buildtile.runtime.package import package_runtime
from buildtile.runtime.tile.handles import partition

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


class KernelOp:
    """One registered op: its description and the kernel handle its calls launch (repointed when
    the kernel's module is imported again). Both ways into the op, the dispatcher's
    implementation and the eager call (:mod:`~buildtile.runtime.frameworks.torch_eager`), launch
    through it."""

    def __init__(self, spec: OpSpec, kernel) -> None:
        self.spec = spec
        self.kernel = kernel
        #: Tile: where each ``tile.Out`` parameter sits, and its keyword
        self.outputs = tuple((p.index, p.name, keyword) for p, keyword in spec.tile_args)
        #: the call of the op's packet (None: every call goes through the dispatcher)
        self.eager_call: Callable | None = None
        self._compiled: list[dict[str, tuple[int, ...]]] | None = None

    def repoint(self, kernel) -> None:
        self.kernel = kernel
        self._compiled = None

    def launch_tile(self, args: tuple, given: dict[str, tuple[int, ...]]) -> None:
        """Launch the Tile kernel over ``args`` with each output partitioned into the tile shape
        ``given`` by its keyword (each one left out: see :func:`default_tile_shapes`)."""
        kernel = self.kernel
        compiled = self._compiled
        if compiled is None:   # the kernel's specializations, read once (a property that copies)
            compiled = self._compiled = kernel.tile_shapes
        outputs = self.outputs
        if len(given) == len(outputs):
            shapes = {name: given[keyword] for _, name, keyword in outputs}
        else:
            shapes = default_tile_shapes(compiled, {name: given[keyword] for _, name, keyword in outputs
                                                    if keyword in given})
        values = list(args)
        for index, name, _ in outputs:
            values[index] = partition(values[index], shapes[name])
        kernel(*values).launch()


def _simt_impl(op: KernelOp) -> Callable:
    """What the dispatcher calls for a SIMT op: the grid, then the kernel's arguments."""

    def launch(grid, *args):
        op.kernel[tuple(grid)](*args)

    return launch


def _tile_impl(op: KernelOp) -> Callable:
    """What the dispatcher calls for a Tile op: the kernel's arguments, then the tile shapes."""
    keywords = tuple(keyword for _, _, keyword in op.outputs)
    count = len(op.spec.record.params)

    def launch(*args, **tile_shapes):
        if len(args) > count:   # the dispatcher may pass the keyword-only tile shapes by position
            tile_shapes.update(zip(keywords, args[count:]))
            args = args[:count]
        op.launch_tile(args, {keyword: tuple(shape) for keyword, shape in tile_shapes.items() if shape is not None})

    return launch


def eager_kinds(spec: OpSpec) -> list[str]:
    """The kind of each positional argument of ``spec``'s op, as the eager call tests them (see
    :data:`~buildtile.runtime.frameworks.torch_eager.ARGUMENT_TYPES`)."""
    kinds = ["grid"] if spec.grid_arg is not None else []
    return kinds + ["tensor" if p.is_array else _scalar_type(p.dtype) for p in spec.record.params]


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
    key = (spec.namespace, spec.name)
    with _lock:
        op = _ops.get(key)
        if op is None:
            op = _ops[key] = KernelOp(spec, handle)
            _define(op)
        else:
            op.repoint(handle)
            spec = op.spec
        _registered[key] = handle
    return spec


#: (namespace, op name) -> the op registered under it
_ops: dict[tuple[str, str], KernelOp] = {}


def _define(op: KernelOp) -> None:
    spec = op.spec
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
    impl = _simt_impl(op) if spec.grid_arg is not None else _tile_impl(op)
    for dispatch_key in DEVICE_KEYS:
        library.impl(spec.name, impl, dispatch_key)
    torch.library.register_fake(spec.qualname, _fake_impl(spec), lib=library)
    op.eager_call = install_eager(getattr(getattr(torch.ops, spec.namespace), spec.name), eager_kinds(spec),
                                    tuple(keyword for _, keyword in spec.tile_args), op)


def registered_ops() -> dict[tuple[str, str], object]:
    """Every (namespace, op name) registered in this process, with its kernel handle."""
    return dict(_registered)
