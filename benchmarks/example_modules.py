"""An example kernel module for a benchmark: as installed, or compiled here for this GPU."""

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

    from buildtile.compiler import compile_project
    from buildtile.config import load_project

    package = f"btbench{name}"
    root = Path(tempfile.mkdtemp(prefix=f"bench_{name}_"))
    (root / package).mkdir()
    (root / package / "__init__.py").write_text("")
    shutil.copy(EXAMPLES / f"{name}.py", root / package / "ops.py")
    major, minor = torch.cuda.get_device_capability(0)
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "{package}"\nversion = "0.1.0"\n\n[tool.buildtile]\n'
        f'kernels = ["{package}.ops"]\ntargets = ["sm_{major}{minor}"]\nptx = false\n')
    compile_project(load_project(root, env={}), root, log=lambda line: None)
    sys.path.insert(0, str(root))
    return importlib.import_module(f"{package}.ops")
