"""buildtile kernels called from a C++ extension module.

``example_mixed._ext`` is built by this project's own CMakeLists.txt with
nanobind; it links the kernels' C ABI (``example_mixed::kernels``) and calls
them through the generated ``example_mixed/kernels.hpp``. Arrays are any
DLPack-capable CUDA arrays (PyTorch, CuPy, JAX...) of float32; ``stream`` is a
raw CUDA stream handle (0: the legacy default stream).
"""

from example_mixed._ext import KernelError, abi_version, axpby, saxpy, scale

__version__ = "0.1.0"
__all__ = ["KernelError", "abi_version", "axpby", "saxpy", "scale"]
