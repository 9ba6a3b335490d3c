"""The ``buildtile`` distribution: the compiler, its backends and the build hooks.

Everything else is declared in pyproject.toml. What calling prebuilt kernels
needs is the ``buildtile-runtime`` distribution (``runtime/``), built from the
same ``buildtile/`` folder; this one leaves out the modules
``runtime/runtime_files.py`` gives to it and depends on it instead, so no file
is installed by both.
"""

import sys
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

sys.path.insert(0, str(Path(__file__).parent / "runtime"))
from runtime_files import in_runtime_package, is_runtime_module  # noqa: E402


class BuildCompilerPy(build_py):
    """The modules of ``buildtile`` minus the runtime's."""

    def find_package_modules(self, package, package_dir):
        return [m for m in super().find_package_modules(package, package_dir) if not is_runtime_module(m[0], m[1])]


setup(
    packages=[p for p in find_packages(include=["buildtile*"]) if not in_runtime_package(p)],
    cmdclass={"build_py": BuildCompilerPy},
)
