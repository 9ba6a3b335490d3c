"""buildtile: GPU kernels written in Python, compiled ahead of time into wheels."""

from __future__ import annotations

import pluggy

__version__ = "0.1.0"

#: marker for plugin hook implementations (``@hookimpl def buildtile_...``)
hookimpl = pluggy.HookimplMarker("buildtile")

__all__ = ["__version__", "hookimpl"]
