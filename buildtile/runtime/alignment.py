"""Choosing between a SIMT kernel's plain entry and its aligned one, per launch.

A kernel built with an aligned entry (manifest ``aligned``) declares every
array data pointer of that entry 16-byte aligned, so its consecutive reads
compile to vector loads. The host launches it only when each array
argument's data pointer really is a multiple of the alignment; any other
call (a view such as ``x[1:]``) launches the plain entry, so results never
depend on the choice.
"""

from __future__ import annotations

from collections.abc import Sequence

from buildtile.interop.abi import kernel_params
from buildtile.interop.manifest import ParamRecord


def data_pointer_positions(params: Sequence[ParamRecord]) -> tuple[int, ...]:
    """Where the array data pointers sit among a kernel's flat (PTX-order) parameter values."""
    flat = kernel_params([p.as_dict() for p in params])
    return tuple(k for k, p in enumerate(flat) if p.ctype == "ptr")


def pointers_aligned(values: tuple, positions: tuple[int, ...], align: int) -> bool:
    """Whether every value at ``positions`` (data pointers, as ints) is a multiple of ``align``."""
    for k in positions:
        if values[k] % align:
            return False
    return True
