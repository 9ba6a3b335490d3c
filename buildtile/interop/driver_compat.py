"""Which CUDA driver can load an image: the PTX ISA version it was written in.

A driver JIT-compiles PTX only of an ISA version it knows, so a PTX image
needs at least the CUDA release that introduced its ``.version``; a cubin is
held to the ISA of the PTX it was assembled from (a device of that
architecture needs such a driver anyway). Versions are written as
``cuDriverGetVersion`` returns them: ``1000 * major + 10 * minor`` (12.0 is
``12000``). The table follows the PTX ISA release history.
"""

from __future__ import annotations

import re

#: PTX ISA version -> the first CUDA release whose driver loads it
PTX_ISA_CUDA: dict[str, tuple[int, int]] = {
    "7.0": (11, 0), "7.1": (11, 1), "7.2": (11, 2), "7.3": (11, 3), "7.4": (11, 4),
    "7.5": (11, 5), "7.6": (11, 6), "7.7": (11, 7), "7.8": (11, 8),
    "8.0": (12, 0), "8.1": (12, 1), "8.2": (12, 2), "8.3": (12, 3), "8.4": (12, 4),
    "8.5": (12, 5), "8.6": (12, 7), "8.7": (12, 8), "8.8": (12, 9),
    "9.0": (13, 0), "9.1": (13, 1), "9.2": (13, 2), "9.3": (13, 3), "9.4": (13, 4), "9.5": (13, 5),
}

#: CUDA release -> the Linux driver branch that first ships it (for messages)
LINUX_DRIVER: dict[tuple[int, int], str] = {
    (12, 0): "525.60", (12, 1): "530", (12, 2): "535", (12, 3): "545", (12, 4): "550",
    (12, 5): "555", (12, 7): "565", (12, 8): "570", (12, 9): "575", (13, 0): "580",
}

_VERSION_LINE = re.compile(r"^\s*\.version\s+(\d+\.\d+)\s*$", re.MULTILINE)


def ptx_isa_of(ptx: str) -> str | None:
    """The ISA version of PTX text (its ``.version`` directive); None when it has none."""
    match = _VERSION_LINE.search(ptx)
    return match.group(1) if match else None


def min_driver_for(isa: str | None) -> int | None:
    """The lowest driver version (``cuDriverGetVersion``'s number) that loads PTX ISA ``isa``;
    None for a version this table does not know (nothing is refused for it)."""
    release = PTX_ISA_CUDA.get(isa) if isa is not None else None
    return None if release is None else version_number(release)


def version_number(release: tuple[int, int]) -> int:
    """``(12, 0)`` -> ``12000``: a CUDA release as ``cuDriverGetVersion`` numbers it."""
    return 1000 * release[0] + 10 * release[1]


def describe_driver(version: int) -> str:
    """``12000`` -> ``CUDA 12.0 (Linux driver 525.60)``, as messages name a driver."""
    release = (version // 1000, (version % 1000) // 10)
    branch = LINUX_DRIVER.get(release)
    return f"CUDA {release[0]}.{release[1]}" + (f" (Linux driver {branch})" if branch else "")
