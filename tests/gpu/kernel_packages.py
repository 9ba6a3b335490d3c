"""A kernel source file of the tests compiled for this GPU into a throwaway package, for the
GPU tests' module fixtures."""

from __future__ import annotations

import contextlib
import importlib
import itertools
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

_ids = itertools.count()


@contextlib.contextmanager
def compiled_for_this_gpu(source: Path, prefix: str, root: Path,
                          targets: list[str] | None = None) -> Iterator[ModuleType]:
    """``source`` built into ``root`` as ``<prefix><n>.ops`` for this GPU's target alone (or for
    ``targets``; no cache), imported for the test and forgotten afterwards."""
    import torch

    from buildtile.compiler import compile_project
    from buildtile.config import load_project
    from buildtile.runtime.package import forget_package

    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    major, minor = torch.cuda.get_device_capability(0)
    package = f"{prefix}{next(_ids)}"
    (root / package).mkdir()
    (root / package / "__init__.py").write_text("")
    shutil.copy(source, root / package / "ops.py")
    listed = ", ".join(f'"{t}"' for t in targets or [f"sm_{major}{minor}"])
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "{package}"\nversion = "0.1.0"\n\n[tool.buildtile]\n'
        f'kernels = ["{package}.ops"]\ntargets = [{listed}]\nptx = false\ncache-dir = "off"\n')
    compile_project(load_project(root, env={}), root, log=lambda line: None)
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module(f"{package}.ops")
    finally:
        sys.path.remove(str(root))
        forget_package(package)
        for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            del sys.modules[name]
