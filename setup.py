"""The one compiled piece of buildtile: the launch call of the Python host.

Everything else is declared in pyproject.toml. The extension is optional:
without a C compiler the install goes on, and launches go through
cuda.bindings instead (see buildtile/runtime/_native.c).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("buildtile.runtime._native", ["buildtile/runtime/_native.c"], optional=True)])
