"""What ported code names by its old spelling: numba-cuda's, NumPy's and Python's names for what
the SIMT language has, so that a refusal can say what to write instead.

A kernel module is read, never imported, so ``from numba import cuda`` costs nothing and
``cuda.syncthreads()`` reaches the typer as any unknown call would; these tables turn such a
call (or annotation, or attribute) into a help line naming the buildtile spelling, the one the
"Porting from numba-cuda" table of the language reference gives.
"""

from __future__ import annotations

import ast

from buildtile.backends.common.constants import MATH_CONSTANTS, MATH_FUNCTIONS
from buildtile.discovery import resolve_dotted

#: numba-cuda names (under ``numba.cuda``, or spelled ``cuda.``) -> what a SIMT kernel writes
NUMBA_CUDA = {
    "grid": "simt.grid(n)",
    "gridsize": "simt.gridsize(n)",
    "threadIdx": "simt.thread_idx",
    "blockIdx": "simt.block_idx",
    "blockDim": "simt.block_dim",
    "gridDim": "simt.grid_dim",
    "laneid": "simt.lane_id()",
    "warpsize": "32",
    "syncthreads": "simt.sync_threads()",
    "syncwarp": "simt.syncwarp()",
    "shared.array": "simt.shared_array(T, shape), inside `with simt.unsafe():`",
    "local.array": "locals: a kernel keeps scalars in names (or a shared array, inside `with simt.unsafe():`)",
    "const.array_like": "a module-level tuple of numbers (a constant array)",
    "atomic.add": "`a.atomic_add(i, v)` on an AtomicSlice parameter or a shared array",
    "atomic.sub": "`a.atomic_add(i, -v)` on an AtomicSlice parameter or a shared array",
    "atomic.max": "`a.atomic_max(i, v)` on an AtomicSlice parameter or a shared array",
    "atomic.min": "`a.atomic_min(i, v)` on an AtomicSlice parameter or a shared array",
    "atomic.exch": "`a.atomic_exchange(i, v)` on an AtomicSlice parameter or a shared array",
    "atomic.cas": "`a.atomic_cas(i, expected, new)` on an AtomicSlice parameter or a shared array",
    "atomic.compare_and_swap": "`a.atomic_cas(i, expected, new)` on an AtomicSlice parameter or a shared array",
    "shfl_down_sync": "simt.shfl_down(v, delta, mask=m)",
    "shfl_up_sync": "simt.shfl_up(v, delta, mask=m)",
    "shfl_xor_sync": "simt.shfl_xor(v, lanemask, mask=m)",
    "shfl_sync": "simt.shfl_idx(v, lane, mask=m)",
    "ballot_sync": "simt.ballot(p)",
    "any_sync": "simt.any(p)",
    "all_sync": "simt.all(p)",
    "cg.this_grid": "simt.grid_sync(), in a kernel whose contract says `cooperative=True`",
    "random.xoroshiro128p_uniform_float32": "random.uniform(seed, offset), from buildtile.random",
    "random.xoroshiro128p_uniform_float64": "random.uniform(seed, offset), from buildtile.random",
    "random.xoroshiro128p_normal_float32": "random.normal(seed, offset), from buildtile.random",
    "random.xoroshiro128p_normal_float64": "random.normal(seed, offset), from buildtile.random",
}

#: NumPy's and numba's scalar type names -> buildtile.types'
DTYPE_NAMES = {
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "f16", "float32": "f32", "float64": "f64", "bool_": "bool_",
    "complex64": "complex64", "complex128": "complex128", "intp": "i64", "uintp": "u64",
    "int_": "i64", "double": "f64", "single": "f32", "half": "f16",
    "float_": "f64", "boolean": "bool_",
}

#: NumPy's names for what kernels take from ``math`` or the builtins
NUMPY_MATH = {**{name: f"`math.{name}(x)`" for name in MATH_FUNCTIONS},
              **{name[len("math."):]: f"`{name}`" for name in MATH_CONSTANTS},
              "abs": "`abs(x)`", "absolute": "`abs(x)`", "minimum": "`min(a, b)`", "maximum": "`max(a, b)`",
              "fmin": "`min(a, b)`", "fmax": "`max(a, b)`", "power": "`math.pow(x, y)`",
              "arctan2": "`math.atan2(y, x)`", "arcsin": "`math.asin(x)`", "arccos": "`math.acos(x)`",
              "arctan": "`math.atan(x)`", "rint": "`math.round(x)`"}

#: Python's conversions -> the kernel's
BUILTIN_CASTS = {
    "int": "a cast names its width: `i64(x)` (or `i32(x)`, ...)",
    "float": "a cast names its width: `f64(x)` (or `f32(x)`)",
    "complex": "build complex numbers with `complex128(re, im)` (or `complex64`)",
    "round": "`math.round(x)` rounds a float (half to even, as Python)",
    "pow": "`math.pow(x, y)` (floats); `x * x` for a square",
    "print": "a kernel cannot print: write the values into an output array and print them on the host",
}

#: names buildtile.types has, for a name the module uses without importing it
_TYPES = {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64", "bool_",
          "complex64", "complex128", "Slice", "DisjointSlice", "AtomicSlice", "Tensor", "DisjointTensor",
          "SharedArray"}


def _spelled(node: ast.AST, ns: dict[str, str]) -> str:
    """The dotted name of ``node`` through the module's imports, else as written."""
    return resolve_dotted(node, ns) or ast.unparse(node)


def foreign_name(node: ast.AST, ns: dict[str, str]) -> tuple[str, str] | None:
    """(whose name it is, the buildtile spelling) for a numba-cuda or NumPy name, or None."""
    dotted = _spelled(node, ns)
    for prefix in ("numba.cuda.", "cuda."):
        if dotted.startswith(prefix) and dotted[len(prefix):] in NUMBA_CUDA:
            return "numba-cuda", NUMBA_CUDA[dotted[len(prefix):]]
    for prefix, whose in (("numpy.", "NumPy"), ("np.", "NumPy"), ("numba.", "numba")):
        if dotted.startswith(prefix) and dotted[len(prefix):] in DTYPE_NAMES:
            name = DTYPE_NAMES[dotted[len(prefix):]]
            return whose, f"`{name}` from buildtile.types"
        if dotted.startswith(prefix) and whose == "NumPy" and dotted[len(prefix):] in NUMPY_MATH:
            return whose, NUMPY_MATH[dotted[len(prefix):]]
    return None


def foreign_call_help(node: ast.Call, ns: dict[str, str]) -> tuple[str, str] | None:
    """(message, help) for a call of a numba-cuda, NumPy or Python name a kernel spells otherwise."""
    func = node.func
    found = foreign_name(func, ns)
    if found is not None:
        whose, instead = found
        if instead.startswith("`") and instead.endswith("from buildtile.types"):
            instead = instead.replace("` from", "(...)` from", 1)   # a dtype called: a cast
        return (f"`{ast.unparse(func)}` is {whose}'s, not a kernel function", f"write {instead}")
    if isinstance(func, ast.Name) and func.id in BUILTIN_CASTS and func.id not in ns:
        return f"cannot call `{func.id}()` in kernels", BUILTIN_CASTS[func.id]
    return None


def foreign_type_help(node: ast.AST, ns: dict[str, str]) -> str | None:
    """Why an annotation (or a part of one) names no buildtile type, where it is another library's
    name or a buildtile name the module does not import."""
    found = foreign_name(node, ns)
    if found is not None:
        whose, instead = found
        return f"`{ast.unparse(node)}` is {whose}'s; annotate with {instead}"
    if isinstance(node, ast.Name) and node.id not in ns:
        if node.id in _TYPES:
            return f"`{node.id}` is not imported: add `from buildtile.types import {node.id}`"
        if node.id in DTYPE_NAMES:
            return f"`{node.id}` is numba's or NumPy's; annotate with `{DTYPE_NAMES[node.id]}` from buildtile.types"
    return None
