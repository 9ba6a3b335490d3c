"""``buildtile-runtime``: what calling prebuilt buildtile kernels needs.

The sources are the repository's ``buildtile/`` folder (``runtime/buildtile``
links to it); :mod:`runtime_files` says which of its modules this
distribution takes. The optional compiled launch call is built here: without
a C compiler the install goes on, and launches go through cuda.bindings
instead (see buildtile/runtime/_native.c).
"""

import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_py import build_py

sys.path.insert(0, str(Path(__file__).parent))
from runtime_files import in_runtime_package, is_runtime_module  # noqa: E402


class BuildRuntimePy(build_py):
    """Only the runtime's modules, though their packages hold the compiler's too."""

    def find_package_modules(self, package, package_dir):
        return [m for m in super().find_package_modules(package, package_dir) if is_runtime_module(m[0], m[1])]


packages = ["buildtile", "buildtile.interop"] + [p for p in find_packages(include=["buildtile.runtime*"])
                                                 if in_runtime_package(p)]
setup(
    packages=packages,
    cmdclass={"build_py": BuildRuntimePy},
    # type checkers read the kernel stubs' Protocols (buildtile.runtime.typing) from here
    package_data={"buildtile": ["py.typed"]},
    ext_modules=[Extension("buildtile.runtime._native", ["buildtile/runtime/_native.c"], optional=True)],
)
