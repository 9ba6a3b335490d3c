"""Example kernels compiled ahead of time by buildtile."""

__version__ = "0.1.0"
