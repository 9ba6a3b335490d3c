"""The compiled part of the Python host (``_native.c``), or None.

It is optional: an install without a C compiler goes on without it, and
the runtime then reads arguments and launches through Python and
cuda.bindings. Every module that can use it imports it from here, so the
decision is made once.
"""

from __future__ import annotations

try:
    from buildtile.runtime import _native as compiled
except ImportError:  # built without a C compiler
    compiled = None

__all__ = ["compiled"]
