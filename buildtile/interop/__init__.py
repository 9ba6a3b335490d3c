"""Interop: the kernel ABI, the package manifest, the C shim and the C++ layer."""
