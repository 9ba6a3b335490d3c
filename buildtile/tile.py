"""The Tile track's language surface: ``@tile.kernel``, ``tile.Out``, ``tile.load``...

A tile kernel describes what one tile of data does; the compiler picks the
GPU threads behind it and how the tile's elements are spread over them::

    from buildtile import tile
    from buildtile.types import f32, Tensor

    @tile.kernel(specialize=[{"z": [1024]}, {"z": [4096]}])
    def add(x: Tensor[f32, 1], y: Tensor[f32, 1], z: tile.Out[f32, 1]):
        z.store(tile.load_like(x, z) + tile.load_like(y, z))

Inside a kernel these names are read by the compiler from the source, never
executed. At import time ``@tile.kernel`` returns a launchable handle bound
to the kernel's compiled specializations; ``tile.partition`` and
``tile.tensor`` are the host-side handles a launch takes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from buildtile.types import _ParamKind

#: ``tile.Out[T, rank]``: an output partitioned into tiles on the host
Out = _ParamKind("tile.Out", takes_rank=True)
#: ``tile.Atomic[T, rank]``: an output any block may add into (``tile.atomic_add``), not partitioned
Atomic = _ParamKind("tile.Atomic", takes_rank=True)

#: tile shapes a kernel without ``specialize=`` is compiled for, by the rank of its outputs
DEFAULT_TILE_SHAPES = {1: (1024,), 2: (64, 64), 3: (4, 16, 16), 4: (1, 4, 16, 16), 5: (1, 1, 4, 16, 16)}


def kernel(fn: Callable | None = None, *,
           specialize: Sequence[Mapping[str, object]] | Product | str | None = None,
           requires: Sequence[str] = ()):
    """Declare a tile kernel.

    ``specialize`` lists the tile shapes to compile ahead of time, one dict per
    specialization giving every ``tile.Out`` parameter's tile shape
    (``[{"z": [128]}, {"z": [1024]}]``), a :func:`product` of value lists, a
    module constant holding either, or the name of a product declared in
    pyproject (``[tool.buildtile.tile.specialize.<name>]``); a launch picks the
    one matching its partitions and dtypes. Without it a kernel is compiled once, with tiles of 1024
    (1-D outputs), 64 x 64 (2-D) or 4 x 16 x 16 (3-D). Tile extents are
    powers of two. ``requires`` are relations over the parameters checked
    before each launch, as for SIMT kernels (``"x.shape[0] == z.shape[0]"``).
    """

    def wrap(pyfunc: Callable):
        from buildtile.runtime.frameworks import kernel_defined
        from buildtile.runtime.tile.kernel import TileKernel

        handle = TileKernel(pyfunc)
        kernel_defined(handle)
        return handle

    return wrap(fn) if fn is not None else wrap


def function(fn: Callable | None = None):
    """Declare a helper that tile kernels (and other helpers) call; it is inlined at each call.

    A helper takes tiles, scalars and constants, and returns a value or a tuple
    of them; it stores nothing (stores are the kernel's, where ownership is
    checked) and does not recurse. The function is returned unchanged: like a
    kernel's body, its tile operations exist only where the compiler inlines it.
    """

    def wrap(pyfunc: Callable) -> Callable:
        return pyfunc

    return wrap(fn) if fn is not None else wrap


def partition(array: object, tile_shape=None, *, order: str | None = None, group: int | None = None,
              persistent: bool = False):
    """``tile.partition(z, [128])``: the output ``z`` cut into tiles, for a ``tile.Out`` parameter
    (``order="grouped", group=8`` and ``persistent=True`` choose how a launch visits them).

    Without a tile shape (``tile.partition(z)``) the launch picks the compiled
    specialization ranked best for ``z``'s extents (see ``docs/tile.md``).
    """
    from buildtile.runtime.tile.handles import partition as make_partition

    return make_partition(array, tile_shape, order=order, group=group, persistent=persistent)


class DtypeVar:
    """``T = tile.dtype_var("T", f16, bf16, f32)``: an element type a kernel is generic over.

    ``Tensor[T, 2]`` and ``tile.Out[T, 2]`` then compile once per dtype (ahead
    of time, like tile shapes); the first dtype listed is the default, whose
    specializations keep the symbol a non-generic kernel would have.
    """

    def __init__(self, name: str, *dtypes: object) -> None:
        self.name = name
        self.dtypes = dtypes

    def __repr__(self) -> str:
        return self.name


def dtype_var(name: str, *dtypes: object) -> DtypeVar:
    """Declare a dtype variable at module level; see :class:`DtypeVar`."""
    return DtypeVar(name, *dtypes)


class Product:
    """``tile.product(shape=("rows", "cols"), rows=[1, 4], cols=[256, 1024], T=[f16, f32])``.

    Every combination of the value lists is one specialization. ``shape`` gives
    the tile shape of every ``tile.Out`` parameter in terms of the names (or a
    dict per parameter: ``{"z": ("rows", "cols"), "s": ("rows",)}``); a list of
    dtypes binds the dtype variable of that name. Combinations whose tile holds
    more than ``max_elements`` elements (or more than one block can keep) are
    dropped. Read by the compiler from the source; at run time it is inert.
    """

    def __init__(self, shape: object = None, max_elements: int | None = None, **values: Sequence[object]) -> None:
        self.shape = shape
        self.max_elements = max_elements
        self.values = values

    def __repr__(self) -> str:
        return f"tile.product(shape={self.shape!r}, {', '.join(f'{k}={v!r}' for k, v in self.values.items())})"


def product(shape: object = None, max_elements: int | None = None, **values: Sequence[object]) -> Product:
    """Specializations as the product of value lists; see :class:`Product`."""
    return Product(shape, max_elements, **values)


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for ``n <= 1``); folded when it computes a tile shape."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def tensor(array: object, *, name: str | None = None):
    """``tile.tensor(x)``: an owned handle over ``x`` that launches move and give back."""
    from buildtile.runtime.tile.handles import tensor as make_tensor

    return make_tensor(array, name=name)


def cdiv(a: int, b: int) -> int:
    """Ceiling division, ``-(-a // b)``: the number of tiles of ``b`` that cover ``a``."""
    return -(-a // b)


def _device_only(name: str):
    def stub(*args, **kwargs):
        raise RuntimeError(f"tile.{name}() can only be used inside a @tile.kernel")

    stub.__name__ = name
    return stub


#: operations that exist only inside kernels (the compiler reads them from the source)
DEVICE_FUNCTIONS = (
    "load", "load_like", "store", "zeros", "full", "arange", "where", "astype",
    "reshape", "permute", "transpose", "mma", "sum", "prod", "max", "min", "argmax", "argmin", "range",
    "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "tanh", "sin", "cos", "erf",
    "floor", "ceil", "maximum", "minimum", "pow", "sigmoid", "gelu", "rand", "randn", "gather", "atomic_add",
)

load = _device_only("load")
load_like = _device_only("load_like")
store = _device_only("store")
zeros = _device_only("zeros")
full = _device_only("full")
arange = _device_only("arange")
where = _device_only("where")
astype = _device_only("astype")
reshape = _device_only("reshape")
permute = _device_only("permute")
transpose = _device_only("transpose")
mma = _device_only("mma")
sum = _device_only("sum")
max = _device_only("max")
min = _device_only("min")
prod = _device_only("prod")
argmax = _device_only("argmax")
argmin = _device_only("argmin")
range = _device_only("range")
exp = _device_only("exp")
exp2 = _device_only("exp2")
log = _device_only("log")
log2 = _device_only("log2")
sqrt = _device_only("sqrt")
rsqrt = _device_only("rsqrt")
abs = _device_only("abs")
tanh = _device_only("tanh")
sin = _device_only("sin")
cos = _device_only("cos")
erf = _device_only("erf")
floor = _device_only("floor")
ceil = _device_only("ceil")
maximum = _device_only("maximum")
minimum = _device_only("minimum")
pow = _device_only("pow")
sigmoid = _device_only("sigmoid")
gelu = _device_only("gelu")
rand = _device_only("rand")
randn = _device_only("randn")
gather = _device_only("gather")
atomic_add = _device_only("atomic_add")
