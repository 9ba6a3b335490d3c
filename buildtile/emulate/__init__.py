"""Kernels without a GPU: the CPU emulator.

A kernel's own LLVM IR, compiled for the host with a C runtime standing in for
the GPU (``runtime.c``), runs on NumPy arrays and CPU torch tensors. Two ways
in:

- ``BUILDTILE_DEVICE=cpu`` for a whole program: the runtime's driver facade is
  :class:`~buildtile.emulate.driver.EmulatedDriver`, and every launch of an
  installed package -- SIMT or Tile, through the runtime's own argument checks
  -- runs here. :func:`emulated` does the same for a block of code.
- :mod:`buildtile.emulate.direct` runs a kernel of a source file without a
  package (tests, tools).

What the GPU cannot check is checked here (bounds, writers, barriers,
uninitialised shared memory, alignment: ``BT0800`` to ``BT0806``); see the
documentation page "Running without a GPU".
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["emulated"]


@contextmanager
def emulated() -> Iterator[object]:
    """Within the block, launches run on the CPU emulator (as with ``BUILDTILE_DEVICE=cpu``);
    the previous driver, and how NumPy arrays and torch tensors are read, come back afterwards.

    Kernels first launched inside the block keep the emulated functions they loaded: use
    another package's kernels for the GPU afterwards."""
    import sys

    import numpy as np

    from buildtile.emulate.driver import EmulatedDriver
    from buildtile.runtime.arrays import extractor_for, register_extractor
    from buildtile.runtime.driver import set_driver

    classes = [np.ndarray] + ([sys.modules["torch"].Tensor] if "torch" in sys.modules else [])
    readers = {cls: extractor_for(cls) for cls in classes}
    driver = EmulatedDriver()
    previous = set_driver(driver)
    try:
        yield driver
    finally:
        set_driver(previous)
        for cls, reader in readers.items():
            register_extractor(cls, reader)
