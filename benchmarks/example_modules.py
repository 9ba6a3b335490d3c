"""Kernel modules for the benchmarks: an example module as installed, or a source compiled here."""

from __future__ import annotations

import importlib
import shutil
import sys
import tempfile
from pathlib import Path

EXAMPLES = Path(__file__).parents[1] / "example_project" / "example_kernels"


def example_module(name: str, kernel: str):
    """``example_kernels.<name>`` as installed when ``kernel`` was compiled into it; else the module's
    source compiled here, for this GPU's target alone, into a throwaway package."""
    from buildtile.errors import BuildtileError

    try:
        module = importlib.import_module(f"example_kernels.{name}")
        getattr(module, kernel).signature       # compiled into the installed package
        return module
    except (ImportError, AttributeError, BuildtileError):
        pass
    import torch

    major, minor = torch.cuda.get_device_capability(0)
    root = Path(tempfile.mkdtemp(prefix=f"bench_{name}_"))
    return compiled_here(EXAMPLES / f"{name}.py", root, f"btbench{name}", "ops", [f"sm_{major}{minor}"])


def compiled_here(source: Path, root: Path, package: str, module: str, targets: list[str]):
    """``source`` built into ``root`` as ``<package>.<module>`` for ``targets`` (no PTX), and imported."""
    from buildtile.compiler import compile_project
    from buildtile.config import load_project

    (root / package).mkdir()
    (root / package / "__init__.py").write_text("")
    shutil.copy(source, root / package / f"{module}.py")
    names = ", ".join(f'"{t}"' for t in targets)
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "{package}"\nversion = "0.1.0"\n\n[tool.buildtile]\n'
        f'kernels = ["{package}.{module}"]\ntargets = [{names}]\nptx = false\n')
    compile_project(load_project(root, env={}), root, log=lambda line: None)
    sys.path.insert(0, str(root))
    return importlib.import_module(f"{package}.{module}")
