"""Stage 3: checked SIMT IR -> LLVM IR (text), with llvmlite's IR builder.

The kernel function takes its parameters as kernel ABI v1 passes them
(``buildtile.backends.common.entry``). Array pointers but an AtomicSlice's are
``noalias`` and loads from read-only parameters are ``!invariant.load`` --
sound because the host refuses a launch where an output overlaps any other
argument (BT0502) -- which lets LLVM use the non-coherent read path
(``ld.global.nc``).

One lowering class is assembled from a module per job: statements (``stmt``),
expressions (``expr``), intrinsics (``intrinsic``) and debug bounds checks
(``bounds``); ``kernel`` builds the functions and runs a coarsened kernel's copies.
"""

from buildtile.backends.simt.lower.bounds import BOUNDS_GLOBAL
from buildtile.backends.simt.lower.kernel import lower_to_llvm

__all__ = ["BOUNDS_GLOBAL", "lower_to_llvm"]
