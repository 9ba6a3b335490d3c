"""Run a tile kernel's LLVM IR on the CPU, with ``runtime.c`` standing in for the GPU.

The lowering's LLVM IR is compiled for the host by llvmlite's MCJIT after a
few textual rewrites: address spaces dropped, NVVM intrinsics and libdevice
calls renamed to ``emu_*`` functions of the runtime, inline PTX replaced by
calls with the same operands. Struct-returning operations (``ldmatrix``,
``mma``, vector loads) get small IR shims that pass out-pointers to C.

This executes exactly the instructions the GPU would get, apart from the
PTX the inline assembly stands for, so layouts, index arithmetic, masking,
swizzles, fragment mappings and barriers are all exercised. It is slow (one
OS thread per GPU thread): use small grids.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import os
import re
import shutil
import struct
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent

_SHIMS = r"""
declare void @emu_ldmatrix(ptr, ptr, i32)
declare void @emu_mma(ptr, ptr, ptr, ptr, i32)
declare void @emu_ld_vector(i64, ptr, i32)

define {i32, i32, i32, i32} @emu_ldmatrix_sync_aligned_m8n8_x4_b16(ptr %p) {
  %o = alloca [4 x i32], align 16
  call void @emu_ldmatrix(ptr %p, ptr %o, i32 0)
  %r = call {i32, i32, i32, i32} @emu_unpack4(ptr %o)
  ret {i32, i32, i32, i32} %r
}

define {i32, i32, i32, i32} @emu_ldmatrix_sync_aligned_m8n8_x4_trans_b16(ptr %p) {
  %o = alloca [4 x i32], align 16
  call void @emu_ldmatrix(ptr %p, ptr %o, i32 1)
  %r = call {i32, i32, i32, i32} @emu_unpack4(ptr %o)
  ret {i32, i32, i32, i32} %r
}

define {i32, i32, i32, i32} @emu_ldv4(i64 %addr) {
  %o = alloca [4 x i32], align 16
  call void @emu_ld_vector(i64 %addr, ptr %o, i32 4)
  %r = call {i32, i32, i32, i32} @emu_unpack4(ptr %o)
  ret {i32, i32, i32, i32} %r
}

define {i32, i32} @emu_ldv2(i64 %addr) {
  %o = alloca [2 x i32], align 16
  call void @emu_ld_vector(i64 %addr, ptr %o, i32 2)
  %p1 = getelementptr i32, ptr %o, i32 1
  %v0 = load i32, ptr %o
  %v1 = load i32, ptr %p1
  %s0 = insertvalue {i32, i32} undef, i32 %v0, 0
  %s1 = insertvalue {i32, i32} %s0, i32 %v1, 1
  ret {i32, i32} %s1
}

define {i32, i32, i32, i32} @emu_unpack4(ptr %o) {
  %p1 = getelementptr i32, ptr %o, i32 1
  %p2 = getelementptr i32, ptr %o, i32 2
  %p3 = getelementptr i32, ptr %o, i32 3
  %v0 = load i32, ptr %o
  %v1 = load i32, ptr %p1
  %v2 = load i32, ptr %p2
  %v3 = load i32, ptr %p3
  %s0 = insertvalue {i32, i32, i32, i32} undef, i32 %v0, 0
  %s1 = insertvalue {i32, i32, i32, i32} %s0, i32 %v1, 1
  %s2 = insertvalue {i32, i32, i32, i32} %s1, i32 %v2, 2
  %s3 = insertvalue {i32, i32, i32, i32} %s2, i32 %v3, 3
  ret {i32, i32, i32, i32} %s3
}

define {float, float, float, float} @emu_mma_common(i32 %a0, i32 %a1, i32 %a2, i32 %a3, i32 %b0, i32 %b1,
                                                   float %c0, float %c1, float %c2, float %c3, i32 %bf16) {
  %a = alloca [4 x i32], align 16
  %b = alloca [2 x i32], align 16
  %c = alloca [4 x float], align 16
  %d = alloca [4 x float], align 16
  store i32 %a0, ptr %a
  %pa1 = getelementptr i32, ptr %a, i32 1
  store i32 %a1, ptr %pa1
  %pa2 = getelementptr i32, ptr %a, i32 2
  store i32 %a2, ptr %pa2
  %pa3 = getelementptr i32, ptr %a, i32 3
  store i32 %a3, ptr %pa3
  store i32 %b0, ptr %b
  %pb1 = getelementptr i32, ptr %b, i32 1
  store i32 %b1, ptr %pb1
  store float %c0, ptr %c
  %pc1 = getelementptr float, ptr %c, i32 1
  store float %c1, ptr %pc1
  %pc2 = getelementptr float, ptr %c, i32 2
  store float %c2, ptr %pc2
  %pc3 = getelementptr float, ptr %c, i32 3
  store float %c3, ptr %pc3
  call void @emu_mma(ptr %a, ptr %b, ptr %c, ptr %d, i32 %bf16)
  %pd1 = getelementptr float, ptr %d, i32 1
  %pd2 = getelementptr float, ptr %d, i32 2
  %pd3 = getelementptr float, ptr %d, i32 3
  %d0 = load float, ptr %d
  %d1 = load float, ptr %pd1
  %d2 = load float, ptr %pd2
  %d3 = load float, ptr %pd3
  %s0 = insertvalue {float, float, float, float} undef, float %d0, 0
  %s1 = insertvalue {float, float, float, float} %s0, float %d1, 1
  %s2 = insertvalue {float, float, float, float} %s1, float %d2, 2
  %s3 = insertvalue {float, float, float, float} %s2, float %d3, 3
  ret {float, float, float, float} %s3
}

define {float, float, float, float} @emu_mma_m16n8k16_row_col_bf16(i32 %a0, i32 %a1, i32 %a2, i32 %a3,
                                                                  i32 %b0, i32 %b1, float %c0, float %c1,
                                                                  float %c2, float %c3) {
  %r = call {float, float, float, float} @emu_mma_common(i32 %a0, i32 %a1, i32 %a2, i32 %a3, i32 %b0, i32 %b1,
                                                         float %c0, float %c1, float %c2, float %c3, i32 1)
  ret {float, float, float, float} %r
}

define {float, float, float, float} @emu_mma_m16n8k16_row_col_f32_f32(<2 x half> %a0, <2 x half> %a1,
      <2 x half> %a2, <2 x half> %a3, <2 x half> %b0, <2 x half> %b1, float %c0, float %c1, float %c2, float %c3) {
  %ia0 = bitcast <2 x half> %a0 to i32
  %ia1 = bitcast <2 x half> %a1 to i32
  %ia2 = bitcast <2 x half> %a2 to i32
  %ia3 = bitcast <2 x half> %a3 to i32
  %ib0 = bitcast <2 x half> %b0 to i32
  %ib1 = bitcast <2 x half> %b1 to i32
  %r = call {float, float, float, float} @emu_mma_common(i32 %ia0, i32 %ia1, i32 %ia2, i32 %ia3, i32 %ib0,
                                                         i32 %ib1, float %c0, float %c1, float %c2, float %c3, i32 0)
  ret {float, float, float, float} %r
}
"""

_SHIMMED = {"emu_ldmatrix_sync_aligned_m8n8_x4_b16", "emu_ldmatrix_sync_aligned_m8n8_x4_trans_b16",
            "emu_mma_m16n8k16_row_col_bf16", "emu_mma_m16n8k16_row_col_f32_f32"}

_ASM_CALL = re.compile(r'call (?P<ret>\{[^}]*\}|\S+) asm\s+(?:sideeffect\s+)?"(?P<text>[^"]*)",\s*"(?P<cons>[^"]*)"'
                       r'\((?P<args>.*)\)\s*$')
_ARG = re.compile(r'(\S+) (%"[^"]*"|%[-\w.]+|-?\d+|true|false)')


def _asm_target(text: str) -> str:
    """The runtime function standing in for one piece of inline PTX."""
    if text == "bar.sync 0;":
        return "emu_barrier"
    m = re.search(r"@p ld\.global\.nc\.(b32|b16|u8|b64) ", text)
    if m:
        return f"emu_pld_{m.group(1)}"
    m = re.search(r"@p st\.global\.(b32|b16|u8|b64) ", text)
    if m:
        return f"emu_pst_{m.group(1)}"
    m = re.match(r"ld\.global\.nc\.v(\d)\.b32 ", text)
    if m:
        return f"emu_ldv{m.group(1)}"
    if text == "ld.global.nc.b32 $0, [$1];":
        return "emu_ld_b32"
    if text == "mov.b32 $0, $1;":
        return "emu_mov_b32"
    raise NotImplementedError(f"the emulator has no stand-in for inline PTX `{text}`")


def host_ir(llvm_ir: str, symbol: str, arg_types: list[str]) -> str:
    """Rewrite a tile kernel's NVPTX LLVM IR into host IR with an ``emu_entry(ptr args)`` wrapper."""
    import llvmlite.binding as llvm

    text = re.sub(r"target triple = .*", f'target triple = "{llvm.get_process_triple()}"', llvm_ir)
    text = re.sub(r"target datalayout = .*", "", text)
    text = re.sub(r"\s*addrspace\(\d+\)", "", text)
    text = text.replace("define ptx_kernel ", "define ")
    text = re.sub(r'@"?llvm\.nvvm\.([\w.]+)"?', lambda m: "@emu_" + m.group(1).replace(".", "_"), text)
    text = re.sub(r'@"?__nv_(\w+)"?', r"@emu_nv_\1", text)
    declared: dict[str, str] = {}
    lines = []
    for line in text.splitlines():
        m = _ASM_CALL.search(line)
        if m:
            name = _asm_target(m.group("text"))
            ret = m.group("ret")
            types = [t for t, _ in _ARG.findall(m.group("args"))]
            if name not in ("emu_ldv4", "emu_ldv2"):
                declared[name] = f"declare {ret} @{name}({', '.join(types)})"
            line = line[:m.start()] + f"call {ret} @{name}({m.group('args')})"
        if line.startswith("declare") and any(f"@{s}(" in line for s in _SHIMMED):
            continue
        lines.append(line)
    params = ", ".join(f"{t} %a{k}" for k, t in enumerate(arg_types))
    loads = "\n".join(f"  %p{k} = getelementptr i8, ptr %args, i64 {8 * k}\n  %a{k} = load {t}, ptr %p{k}"
                      for k, t in enumerate(arg_types))
    entry = f'define void @emu_entry(ptr %args) {{\n{loads}\n  call void @"{symbol}"({params})\n  ret void\n}}\n'
    return "\n".join(lines + sorted(declared.values()) + [_SHIMS, entry])


@lru_cache(maxsize=1)
def runtime_library() -> Path:
    """``runtime.c`` built once per test session (keyed by its text)."""
    source = (HERE / "runtime.c").read_bytes()
    out = Path(tempfile.gettempdir()) / f"buildtile_tile_emu_{hashlib.sha256(source).hexdigest()[:16]}.so"
    if not out.exists():
        compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if compiler is None:
            raise RuntimeError("the tile emulator needs a C compiler (cc, gcc or clang)")
        tmp = out.with_suffix(f".{os.getpid()}.tmp.so")   # several test processes may build it at once
        subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-pthread", "-o", str(tmp), str(HERE / "runtime.c"), "-lm"],
                       check=True, capture_output=True)
        tmp.replace(out)
    return out


class Emulated:
    """A compiled tile specialization, callable on NumPy arrays (see :func:`run`)."""

    def __init__(self, specialization, params: list[dict]) -> None:
        import llvmlite.binding as llvm

        from buildtile.backends.common.llvm import GLOBAL_PTR, mem_type
        from buildtile.backends.tile.types import SCALARS

        self.spec = specialization
        self.params = params
        arg_types = []
        for p in params:
            if p["kind"] == "scalar":
                arg_types.append(str(mem_type(SCALARS[p["dtype"]])))
            else:
                arg_types += [str(GLOBAL_PTR).replace(" addrspace(1)", "")] + ["i64"] * (2 * p["rank"])
        arg_types.append("i64")   # the trailing tile schedule (interop.abi.TILE_SCHEDULE)
        self.arg_types = arg_types
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        library = runtime_library()
        llvm.load_library_permanently(str(library))
        self.runtime = ctypes.CDLL(str(library))
        self.runtime.emu_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 4
        text = host_ir(specialization.lowered.llvm_ir, specialization.symbol, arg_types)
        self.jit = llvm.create_lljit_compiler()
        builder = llvm.JITLibraryBuilder().add_ir(text).add_current_process().export_symbol("emu_entry")
        for name in sorted(set(re.findall(r"^declare [^@]*@(emu_\w+)\(", text, re.MULTILINE))):
            builder.import_symbol(name, ctypes.cast(getattr(self.runtime, name), ctypes.c_void_p).value)
        builder.import_symbol("__buildtile_tile_smem", ctypes.addressof(
            ctypes.c_char.in_dll(self.runtime, "__buildtile_tile_smem")))
        self.library = builder.link(self.jit, f"tile_{specialization.symbol}")
        self.entry = self.library["emu_entry"]

    def __call__(self, *args, grid: tuple[int, int, int] | None = None, schedule: int = -1) -> None:
        """Launch over the tiles of the grid parameter; arrays are written in place. ``grid``
        (default: one block per tile, the last axis along x) is any launch grid the host may use;
        ``schedule`` the tile schedule (-1: the compiler's order; 1: rows; G > 1: bands of G rows)."""
        slots = []
        grid_shape = None
        for p, value in zip(self.params, args):
            if p["kind"] == "scalar":
                slots.append(_scalar_bits(p["dtype"], value))
                continue
            arr = value
            assert arr.ndim == p["rank"], (p["name"], arr.shape)
            slots.append(arr.ctypes.data)
            slots += [int(n) for n in arr.shape]
            slots += [s // arr.itemsize for s in arr.strides]
            if p["kind"] == "tile_out" and (grid_shape is None or arr.ndim > len(grid_shape)):   # the primary
                tile_shape = self.spec.tile_shapes[p["name"]]
                grid_shape = [-(-n // t) for n, t in zip(arr.shape, tile_shape)]
        slots.append(schedule)
        buf = (ctypes.c_uint64 * max(1, len(slots)))(*[s & (2**64 - 1) for s in slots])
        along = list(reversed(grid_shape)) + [1] * (3 - len(grid_shape))
        # rank-4/5 outputs fold their leading axes into z, as the hosts launch them
        dims = list(grid) if grid is not None else along[:2] + [math.prod(along[2:])]
        flags = {name: ctypes.c_int.in_dll(self.runtime, name) for name in _FLAGS}
        for flag in flags.values():
            flag.value = 0
        rc = self.runtime.emu_launch(self.entry, ctypes.addressof(buf), dims[0], dims[1], dims[2], self.spec.block[0])
        assert rc == 0, "bad launch configuration"
        raised = [why for name, why in _FLAGS.items() if flags[name].value]
        assert not raised, "; ".join(raised)


#: runtime flags a launch must leave clear, and what each means on a GPU
_FLAGS = {
    "emu_misaligned": "a vector, ldmatrix or cp.async access was misaligned (a fault on the GPU)",
    "emu_unretired": "a thread ended with cp.async copies that no wait_group retired",
    "emu_overflow": "more cp.async copies in flight per thread than the emulator tracks",
}


def _scalar_bits(dtype: str, value) -> int:
    if dtype == "f32":
        return struct.unpack("<I", struct.pack("<f", value))[0]
    if dtype == "f64":
        return struct.unpack("<Q", struct.pack("<d", value))[0]
    if dtype == "f16":
        return int(np.array(value, np.float16).view(np.uint16))
    if dtype == "bf16":
        return int(np.array(value, np.float32).view(np.uint32)) >> 16
    if dtype == "bool":
        return int(bool(value))
    return int(value)


def bf16_bits(a: np.ndarray) -> np.ndarray:
    """bf16 values (as uint16 bit patterns) nearest to ``a`` (round to nearest even)."""
    bits = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)
