"""Launch configurations checked against a kernel's contract and CUDA's limits.

Pure functions over plain values: nothing here talks to the driver, so every
refusal can be tested without a GPU. The device-dependent part (compute
capability) takes the device's capability as an argument.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

from buildtile.errors import ContractError
from buildtile.interop.manifest import ContractRecord

#: CUDA's grid limits for every device of compute capability >= 3.0
MAX_GRID = (2**31 - 1, 65535, 65535)
#: CUDA's block limits for every device of compute capability >= 3.0
MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024

Dim3 = tuple[int, int, int]


@dataclass(frozen=True)
class LaunchContract:
    """A kernel's declared launch contract, read from its manifest record."""

    block: Dim3 | None               # None: no contract, unsafe_launch only
    index_dims: int                  # 0: no index_Nd() write; else 1, 2 or 3
    dynamic_shared: int              # bytes of dynamic shared memory each launch gets
    min_compute_capability: tuple[int, int] | None

    coarsen: int = 1                 # logical blocks per launched block (abi.launch_extras)
    cooperative: bool = False        # every block resident at once (simt.grid_sync)

    @classmethod
    def from_manifest(cls, record: ContractRecord, *, tile: bool = False) -> LaunchContract:
        """The contract of a checked manifest record (a Tile kernel's block is per specialization)."""
        if tile:
            return cls(None, 0, record.dynamic_shared, record.min_compute_capability)
        return cls(record.block, record.index_dims, record.dynamic_shared, record.min_compute_capability,
                   record.coarsen, record.cooperative)


def dim3(value, what: str) -> Dim3:
    """Normalise an integer or a tuple/list of 1-3 integers into an (x, y, z) triple (no range checks).

    An integer is anything ``operator.index`` takes except a bool (NumPy's integer scalars
    count, as in Numba and CuPy); floats, bools, bytes, ranges, strings and None are refused.
    """
    single = _extent(value)
    if single is not None:
        return (single, 1, 1)
    if not isinstance(value, (tuple, list)) or not 1 <= len(value) <= 3:
        raise _not_dim3(what, value)
    dims = tuple(_extent(v) for v in value)
    if None in dims:
        raise _not_dim3(what, value)
    return dims + (1,) * (3 - len(dims))  # type: ignore[return-value]


def _extent(value) -> int | None:
    """``value`` as a grid or block extent, or None when it is not an integer (a bool is not)."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:  # NumPy's bool is no integer to operator.index either
        return None


def _not_dim3(what: str, value) -> ContractError:
    return ContractError(f"{what} must be an int or a tuple of 1 to 3 ints, got {value!r}",
                         help="floats, bools, bytes and ranges are not launch extents; pass ints")


def is_plain_config(config) -> bool:
    """Whether ``config`` (a ``kernel[...]`` key) is made of exact ``int``s only: a key that a
    float, a bool or an integer-like object merely equals is not the same configuration."""
    if type(config) is int:
        return True
    if type(config) is not tuple:
        return False
    for item in config:
        if type(item) is tuple:
            if not all(type(v) is int for v in item):
                return False
        elif type(item) is not int:
            return False
    return True


def _fmt(dims: Dim3) -> str:
    return f"({dims[0]}, {dims[1]}, {dims[2]})"


def check_grid(grid: Dim3, kernel: str) -> None:
    for axis, (n, limit) in enumerate(zip(grid, MAX_GRID)):
        if n < 1:
            raise ContractError(
                f"launch contract violated: kernel `{kernel}` got grid {_fmt(grid)}, "
                f"but every grid dimension must be at least 1 (axis {'xyz'[axis]} is {n})",
                help="an empty problem needs no launch; skip it on the host",
            )
        if n > limit:
            raise ContractError(
                f"launch contract violated: kernel `{kernel}` got grid {_fmt(grid)}, "
                f"but CUDA allows at most {limit} blocks along {'xyz'[axis]}",
                help="cover the rest with a loop on the host or a grid-stride loop in the kernel",
            )


def check_block_limits(block: Dim3, kernel: str) -> None:
    for axis, (n, limit) in enumerate(zip(block, MAX_BLOCK)):
        if not 1 <= n <= limit:
            raise ContractError(
                f"launch contract violated: kernel `{kernel}` got block {_fmt(block)}, "
                f"but a block's {'xyz'[axis]} dimension must be between 1 and {limit}"
            )
    threads = block[0] * block[1] * block[2]
    if threads > MAX_THREADS_PER_BLOCK:
        raise ContractError(
            f"launch contract violated: kernel `{kernel}` got block {_fmt(block)} "
            f"({threads} threads), but CUDA allows at most {MAX_THREADS_PER_BLOCK} threads per block"
        )


def check_launch_config(contract: LaunchContract, kernel: str, grid, block=None) -> tuple[Dim3, Dim3]:
    """Validate ``grid``/``block`` against ``contract``; return them as (x, y, z) triples."""
    if contract.block is None:
        raise ContractError(
            f"kernel `{kernel}` has no launch contract (no block shape was declared), "
            "so it can only be launched with `unsafe_launch`",
            help=f"declare one with `@simt.kernel(block=...)`, or call "
                 f"`{kernel}.unsafe_launch(grid, block, *args)` and take responsibility for the configuration",
        )
    grid3 = dim3(grid, "grid")
    if block is not None:
        block3 = dim3(block, "block")
        if block3 != contract.block:
            raise ContractError(
                f"launch contract violated: kernel `{kernel}` is compiled for block {_fmt(contract.block)}, "
                f"got block {_fmt(block3)}",
                help="leave `block` out to use the contract's block shape",
            )
    block3 = contract.block
    check_block_limits(block3, kernel)
    check_grid(grid3, kernel)
    if contract.index_dims == 1 and (grid3[1] != 1 or grid3[2] != 1):
        raise ContractError(
            f"launch contract violated: kernel `{kernel}` indexes its writes with `index_1d()`, "
            f"so its grid must be 1-D, got grid {_fmt(grid3)}",
            help=f"launch `{kernel}[n_blocks]`; to pass a block as well, write "
                 f"`{kernel}[n_blocks, ({contract.block[0]},)]` or use `{kernel}.prepare(grid=..., block=...)`",
        )
    if contract.index_dims == 2 and grid3[2] != 1:
        raise ContractError(
            f"launch contract violated: kernel `{kernel}` indexes its writes with `index_2d()`, "
            f"so its grid must have z == 1, got grid {_fmt(grid3)}"
        )
    return grid3, block3


def check_unsafe_config(kernel: str, grid, block) -> tuple[Dim3, Dim3]:
    """Only CUDA's own limits: the configuration is the caller's responsibility."""
    grid3, block3 = dim3(grid, "grid"), dim3(block, "block")
    check_block_limits(block3, kernel)
    check_grid(grid3, kernel)
    return grid3, block3


def check_compute_capability(
    contract: LaunchContract, kernel: str, device: int, capability: tuple[int, int]
) -> None:
    """Refuse a device below the contract's ``min_compute_capability``."""
    need = contract.min_compute_capability
    if need is not None and tuple(capability) < need:
        raise ContractError(
            f"launch contract violated: kernel `{kernel}` needs compute capability "
            f"{need[0]}.{need[1]} or newer, but device {device} is {capability[0]}.{capability[1]} "
            f"(sm_{capability[0]}{capability[1]})",
            help="run it on a newer GPU",
        )
