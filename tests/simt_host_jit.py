"""Run a SIMT kernel's LLVM IR on the host, one thread at a time, for tests without a GPU.

The kernel is compiled exactly as a build lowers it; only the target changes:
the IR is JIT-compiled for the host (llvmlite's MCJIT), the thread-geometry
special registers become calls that read the simulated thread's coordinates,
and libdevice's ``__nv_logf``/``__nv_cospif`` become the host's (float64 math
rounded to f32, so results match the device to a few ulp). Kernels that
shuffle, vote or synchronise cannot run here.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import re
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np

from buildtile.backend import CompileOptions
from buildtile.discovery import KernelModule, find_kernels
from buildtile.interop.abi import DTYPES, kernel_params, launch_extras, trailing_params
from buildtile.plugins import backends

_SREG = re.compile(r'@"llvm\.nvvm\.read\.ptx\.sreg\.(\w+)\.([xyz])"')
_CTYPES = {"i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32, "i64": ctypes.c_int64,
           "u8": ctypes.c_uint8, "u16": ctypes.c_uint16, "u32": ctypes.c_uint32, "u64": ctypes.c_uint64,
           "f32": ctypes.c_float, "f64": ctypes.c_double, "bool": ctypes.c_uint8, "ptr": ctypes.c_void_p}
_I32 = ctypes.CFUNCTYPE(ctypes.c_int32)
_F32 = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float)
_F64 = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)
_F32F32 = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_float, ctypes.c_float)
_F64F64 = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_double)


class HostKernel:
    """One kernel of a module, callable as ``kernel(grid, block, *args)`` with NumPy arrays and scalars."""

    def __init__(self, path: Path, name: str) -> None:
        registry = backends()
        options = CompileOptions()
        sources = [s for s in find_kernels(KernelModule(path.stem, path.resolve()), registry, path.parent)
                   if s.name == name]
        impl = registry[sources[0].kind].impl
        kernel = impl.analyze(sources[0], options)
        self.params = kernel.params
        self.contract = kernel.contract
        text = impl.llvm_ir(kernel, options).replace("ptx_kernel ", "")
        text = re.sub(r'target (triple|datalayout) = "[^"]*"', "", text)
        text = _SREG.sub(r'@"host.sreg.\1.\2"', text)
        self.thread = {f"{reg}.{axis}": 0 for reg in ("tid", "ctaid", "ntid", "nctaid") for axis in "xyz"}
        self._callbacks = {f"host.sreg.{reg}": _I32(lambda reg=reg: self.thread[reg]) for reg in self.thread}
        self._callbacks["__nv_logf"] = _F32(math.log)
        self._callbacks["__nv_cospif"] = _F32(lambda x: math.cos(math.pi * x))
        # what complex numbers call: the host's math, in each part width
        for name, fn in (("exp", math.exp), ("cos", math.cos), ("sin", math.sin), ("log", math.log)):
            self._callbacks[f"__nv_{name}f"] = _F32(fn)
            self._callbacks[f"__nv_{name}"] = _F64(fn)
        for name, fn in (("hypot", math.hypot), ("atan2", math.atan2)):
            self._callbacks[f"__nv_{name}f"] = _F32F32(fn)
            self._callbacks[f"__nv_{name}"] = _F64F64(fn)
        for symbol, fn in self._callbacks.items():
            llvm.add_symbol(symbol, ctypes.cast(fn, ctypes.c_void_p).value)
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        module = llvm.parse_assembly(text)
        module.triple = llvm.get_process_triple()
        module.verify()
        self._engine = llvm.create_mcjit_compiler(module, llvm.Target.from_default_triple().create_target_machine())
        self._engine.finalize_object()
        flat = kernel_params(self.params) + trailing_params(self.contract)
        self._fn = ctypes.CFUNCTYPE(None, *(_CTYPES[q.ctype] for q in flat))(
            self._engine.get_function_address(kernel.symbol))

    def __call__(self, grid: int, block: int, *args) -> None:
        """Run every thread of a 1-D launch of ``grid`` blocks, one after another (arrays are
        written in place); a coarsened kernel runs on fewer physical blocks, as a host launches it."""
        flat = []
        for p, arg in zip(self.params, args):
            if p["kind"] == "scalar":
                flat.append(arg)
                continue
            # a record array is a NumPy structured array; its layout is the test's to check
            assert (arg.dtype.names is not None if p["dtype"] not in DTYPES
                    else arg.dtype == np.dtype(DTYPES[p["dtype"]][3])) and arg.flags.c_contiguous
            flat.append(arg.ctypes.data)
            if p["kind"].endswith("slice"):
                flat.append(arg.size)
            else:
                flat += list(arg.shape) + [s // arg.itemsize for s in arg.strides]
        grid, trailing = launch_extras(self.contract, grid)
        flat += trailing
        self.thread.update({"ntid.x": block, "ntid.y": 1, "ntid.z": 1, "nctaid.x": grid, "nctaid.y": 1, "nctaid.z": 1})
        for b, t in itertools.product(range(grid), range(block)):
            self.thread["ctaid.x"], self.thread["tid.x"] = b, t
            self._fn(*flat)
