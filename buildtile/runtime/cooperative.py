"""Cooperative launches: every block of the grid resident at once.

A kernel whose contract says ``cooperative=True`` may wait for the whole grid
(``simt.grid_sync()``). That only ends if no block waits for a place on the
device, so such a grid is refused unless the device can hold all of its
blocks at once: the driver's occupancy (blocks of this function per
multiprocessor, for its block size and dynamic shared memory) times the
multiprocessors. The answer is asked once per function and configuration.
"""

from __future__ import annotations

import threading
import weakref

from buildtile.errors import ContractError

_lock = threading.Lock()
#: loaded function -> {(threads per block, dynamic shared bytes): blocks its device holds at once}
_resident: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def resident_blocks(driver, function, threads: int, shared: int) -> int:
    """How many blocks of ``function`` (``threads`` each, ``shared`` bytes of dynamic shared
    memory) its device runs at the same time."""
    answers = _resident.get(function)
    known = answers.get((threads, shared)) if answers is not None else None
    if known is None:
        per_sm = driver.occupancy(function.context, function.handle, threads, shared)
        known = per_sm * driver.multiprocessor_count(function.context.device)
        with _lock:
            _resident.setdefault(function, {})[(threads, shared)] = known
    return known


def check_co_resident(driver, function, kernel: str, grid: tuple[int, int, int],
                      block: tuple[int, int, int], shared: int) -> None:
    """Refuse a cooperative launch of ``grid`` that the function's device cannot hold resident."""
    blocks = grid[0] * grid[1] * grid[2]
    threads = block[0] * block[1] * block[2]
    fits = resident_blocks(driver, function, threads, shared)
    if blocks > fits:
        ctx = function.context
        raise ContractError(
            f"launch contract violated: kernel `{kernel}` is cooperative (it waits for the whole grid), "
            f"but device {ctx.device} holds at most {fits} of its blocks at once, and the grid "
            f"({grid[0]}, {grid[1]}, {grid[2]}) has {blocks}",
            help=f"launch at most {fits} blocks and cover the rest with a grid-stride loop "
                 f"(`for i in range(simt.grid(1), n, simt.gridsize(1))`)")
