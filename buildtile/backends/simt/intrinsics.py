"""The calls a SIMT kernel makes: device functions, ``len``, math functions, atomics and
the ``simt.*`` intrinsics (thread geometry, shared memory, warp shuffles and votes).

:class:`SimtCalls` is part of the SIMT typer; it is a module of its own because
these are the SIMT language's vocabulary, apart from its statements.
"""

from __future__ import annotations

import ast
import difflib

from buildtile.backends.common.constants import fold_constant
from buildtile.backends.common.typer import Abort, BaseTyper, is_intlike
from buildtile.backends.simt import ir
from buildtile.backends.simt.params import scalar_of
from buildtile.backends.simt.types import (
    BOOL, F32, I32, I64, U32, VOID, Scalar, SharedT, SliceT, TensorT, Weak, WitnessT, WitnessTupleT, value_type,
)

#: math functions: name -> number of arguments (libdevice-backed where LLVM has no intrinsic)
MATH_FUNCTIONS = {
    "sqrt": 1, "rsqrt": 1, "fabs": 1, "fma": 3, "min": 2, "max": 2, "floor": 1, "ceil": 1,
    "trunc": 1, "round": 1, "exp": 1, "exp2": 1, "expm1": 1, "log": 1, "log2": 1, "log10": 1,
    "log1p": 1, "pow": 2, "sin": 1, "cos": 1, "tan": 1, "asin": 1, "acos": 1, "atan": 1,
    "atan2": 2, "sinh": 1, "cosh": 1, "tanh": 1, "erf": 1, "erfc": 1, "cbrt": 1, "hypot": 2,
    "copysign": 2,
}
#: the subset of math functions defined for integers too
INT_MATH = {"min", "max"}


class SimtCalls(BaseTyper):
    """Typing of the calls of SIMT kernels and device functions."""

    def call_device(self, node: ast.Call, name: str):
        if name in self.functions.in_progress or (self.device_fn is not None and self.device_fn.name == name):
            self.fail("BT0200", node, f"recursive call of `{name}`", help="device functions cannot recurse; write a loop")
        self.functions.in_progress.append(name)
        self.functions.called.add(name)
        try:
            fn = self.functions.signature(name)
        finally:
            self.functions.in_progress.pop()
        if fn is None:
            raise Abort  # its own diagnostics are reported
        if len(node.args) != len(fn.params):
            self.fail("BT0308", node, f"`{name}` takes {len(fn.params)} argument{'s' if len(fn.params) != 1 else ''}, "
                      f"{len(node.args)} given")
        args = [self.device_arg(a, p) for a, p in zip(node.args, fn.params)]
        return ir.Call(fn.ret, func=name, args=args, src=node)

    def call_len(self, node: ast.Call):
        if len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id in self.shared:
            shared = self.shared[node.args[0].id]
            if shared.ty.dynamic:
                return ir.Len(I64, param=shared.name, src=node)
            return ir.Const(I64, value=shared.ty.size, src=node)
        if len(node.args) != 1 or not (isinstance(node.args[0], ast.Name) and node.args[0].id in self.params):
            self.fail("BT0308", node, "`len()` takes one slice or tensor parameter")
        param = self.params[node.args[0].id]
        if isinstance(param.ty, Scalar):
            self.type_mismatch(node.args[0], "`len()`", "a slice or tensor", param.ty)
        if isinstance(param.ty, TensorT):
            return ir.Shape(I64, param=param.name, axis=0, src=node)
        return ir.Len(I64, param=param.name, src=node)

    def call_math(self, node: ast.Call, name: str):
        arity = MATH_FUNCTIONS.get(name)
        if arity is None:
            self.fail("BT0425", node.func, f"`math.{name}` is not available in kernels",
                      help=f"available: {', '.join(sorted(MATH_FUNCTIONS))}")
        if len(node.args) != arity:
            self.fail("BT0308", node, f"`{name}` takes {arity} argument{'s' if arity > 1 else ''}")
        args = [self.expr(a) for a in node.args]
        ty = self.unify_all(args, node)
        if isinstance(ty, Weak):
            ty = F32 if name not in INT_MATH and name != "fabs" else ty.default
        if not ty.is_float and not (ty.is_int and name in INT_MATH | {"fabs"}):
            self.type_mismatch(node, f"`{name}`", "floats", ty)
        args = [self.coerce(a, ty, n) for a, n in zip(args, node.args)]
        return ir.Intrinsic(ty, name=name, args=args, src=node)

    def call_method(self, node: ast.Call, param: ir.Param, method: str):
        ops = {"atomic_add": ("add", 1), "atomic_min": ("min", 1), "atomic_max": ("max", 1),
               "atomic_exchange": ("exchange", 1), "atomic_cas": ("cas", 2)}
        if not (isinstance(param.ty, SliceT) and param.ty.access == "atomic") or method not in ops:
            self.fail("BT0425", node.func, f"no method `{method}` on `{param.name}` ({param.ty})",
                      help="atomic_add/min/max/exchange/cas are methods of AtomicSlice parameters")
        op, nargs = ops[method]
        if len(node.args) != 1 + nargs:
            self.fail("BT0308", node, f"`{method}` takes an index and {nargs} value{'s' if nargs > 1 else ''}")
        elem = param.ty.elem
        if op in ("min", "max", "cas") and not elem.is_int:
            self.fail("BT0308", node, f"`{method}` is defined for integer elements, not {elem}")
        if elem.bits < 32 or elem == BOOL:
            self.fail("BT0308", node, f"atomics on {elem} elements are not supported", help="use 32- or 64-bit elements")
        index = self.expr(node.args[0])
        if not is_intlike(value_type(index.ty)):
            self.type_mismatch(node.args[0], "an index", "an integer", index.ty)
        index = self.coerce(index, I64, node.args[0]) if isinstance(index.ty, Weak) else index
        args = [self.coerce(self.expr(a), elem, a) for a in node.args[1:]]
        return ir.AtomicOp(elem, param=param.name, op=op, index=index, args=args, src=node)

    def call_simt(self, node: ast.Call, name: str):
        if name in ("index_1d", "index_2d", "index_3d"):
            if node.args:
                self.fail("BT0308", node, f"`simt.{name}()` takes no arguments")
            dims = int(name[6])
            self.index_dims.add(dims)
            ty = WitnessT(1, 0) if dims == 1 else WitnessTupleT(dims)
            return ir.ThreadIndex(ty, dims=dims, src=node)
        if name == "sync_threads":
            if node.args:
                self.fail("BT0308", node, "`simt.sync_threads()` takes no arguments")
            return ir.Intrinsic(VOID, name="sync_threads", src=node)
        if name in ("lane_id", "warp_id"):
            if node.args:
                self.fail("BT0308", node, f"`simt.{name}()` takes no arguments")
            return ir.Intrinsic(I64, name=name, src=node)
        if name == "shared_array":
            if self.device_fn is not None:
                self.fail("BT0200", node, "shared arrays are declared in kernels, not in device functions")
            if len(node.args) != 2:
                self.fail("BT0308", node, "`simt.shared_array(T, n)` takes an element type and a constant length")
            elem = scalar_of(node.args[0], self.ns)
            size = fold_constant(node.args[1], self.consts)
            if elem is None or elem == BOOL:
                self.fail("BT0308", node.args[0], "shared arrays hold numeric scalars (f32, i32, ...)")
            if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
                self.fail("BT0308", node.args[1], "the length of a shared array is a positive constant")
            if size * elem.bits // 8 > 48 * 1024:
                self.fail("BT0600", node, f"{size} x {elem} is more than the 48 KiB of static shared memory a block has")
            return ir.Intrinsic(SharedT(elem, size), name="shared_array", src=node)
        if name == "dynamic_shared_array":
            if self.device_fn is not None:
                self.fail("BT0200", node, "shared arrays are declared in kernels, not in device functions")
            elem = scalar_of(node.args[0], self.ns) if len(node.args) == 1 else None
            if elem is None or elem == BOOL:
                self.fail("BT0308", node, "`simt.dynamic_shared_array(T)` takes one numeric element type (f32, i32, ...)")
            if any(t.ty.dynamic for t in self.shared.values()):
                self.fail("BT0308", node, "a kernel has one dynamic shared array",
                          help="every dynamic shared array is the same memory: split one array by offsets")
            return ir.Intrinsic(SharedT(elem, 0, dynamic=True), name="shared_array", src=node)
        if name in ("shfl_down", "shfl_xor", "shfl_idx"):
            if len(node.args) != 2:
                self.fail("BT0308", node, f"`simt.{name}(value, {'lane' if name == 'shfl_idx' else 'offset'})` takes 2 arguments")
            value = self.defaulted(self.expr(node.args[0]))
            vt = value_type(value.ty)
            if not isinstance(vt, Scalar) or vt.bits not in (32, 64) or vt == BOOL:
                self.type_mismatch(node.args[0], f"`{name}`", "a 32- or 64-bit number", vt)
            lane = self.coerce(self.expr(node.args[1]), I32, node.args[1])
            return ir.Intrinsic(vt, name=name, args=[value, lane], src=node)
        if name in ("ballot", "any", "all"):
            if len(node.args) != 1:
                self.fail("BT0308", node, f"`simt.{name}(predicate)` takes 1 argument")
            pred = self.condition(node.args[0])
            return ir.Intrinsic(U32 if name == "ballot" else BOOL, name=f"vote_{name}", args=[pred], src=node)
        known = ["index_1d", "index_2d", "index_3d", "grid", "gridsize", "sync_threads", "lane_id", "warp_id",
                 "shared_array", "dynamic_shared_array", "shfl_down", "shfl_xor", "shfl_idx", "ballot", "any", "all"]
        close = difflib.get_close_matches(name, known, n=1)
        self.fail("BT0425", node.func, f"cannot find function `simt.{name}`",
                  help=f"did you mean `simt.{close[0]}`?" if close else f"simt functions: {', '.join(known)}")
