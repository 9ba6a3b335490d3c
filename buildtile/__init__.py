"""buildtile: GPU kernels written in Python, compiled ahead of time into wheels."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "hookimpl"]


def __getattr__(name: str):
    # imported on first use: build tools load buildtile's setuptools integration from any
    # environment that lists it, and importing the package must not need pluggy there
    if name == "hookimpl":
        import pluggy

        marker = pluggy.HookimplMarker("buildtile")
        globals()["hookimpl"] = marker
        return marker
    raise AttributeError(f"module 'buildtile' has no attribute {name!r}")
