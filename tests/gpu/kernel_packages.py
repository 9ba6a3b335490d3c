"""A kernel source file of the tests compiled for this GPU into a throwaway package, for the
GPU tests' module fixtures; or the example project's module, where it is installed."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest


@contextlib.contextmanager
def compiled_for_this_gpu(source: Path, prefix: str, root: Path,
                          targets: list[str] | None = None) -> Iterator[ModuleType]:
    """``source`` built into ``root`` as ``<prefix><n>.ops`` for this GPU's target alone (or for
    ``targets``; no cache), imported for the test and forgotten afterwards."""
    with modules_for_this_gpu({"ops": source}, prefix, root, targets) as modules:
        yield modules["ops"]


def modules_for_this_gpu(sources: dict[str, Path], prefix: str, root: Path, targets: list[str] | None = None):
    """The kernel modules ``sources`` (module name -> source file) built into ``root`` as one
    package for this GPU's target alone (or for ``targets``; no cache); a context manager giving
    the imported modules."""
    import torch

    from emulated_packages import built_package

    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    major, minor = torch.cuda.get_device_capability(0)
    return built_package(sources, prefix, root, targets or [f"sm_{major}{minor}"], 'cache-dir = "off"\n')


@contextlib.contextmanager
def example_or_compiled(name: str, kernel: str, source: Path, prefix: str, root: Path) -> Iterator[ModuleType]:
    """``example_kernels.<name>`` where the installed example project has ``kernel`` compiled in,
    else ``source`` compiled for this GPU (:func:`compiled_for_this_gpu`)."""
    import torch

    from buildtile.errors import BuildtileError

    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    try:
        module = importlib.import_module(f"example_kernels.{name}")
        getattr(module, kernel).signature       # compiled into the installed example project
    except (ImportError, AttributeError, BuildtileError):
        module = None
    if module is not None:
        yield module
        return
    with compiled_for_this_gpu(source, prefix, root) as ops:
        yield ops
