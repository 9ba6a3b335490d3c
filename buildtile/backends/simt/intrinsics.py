"""The calls a SIMT kernel makes: device functions, ``len``, math functions, atomics, the
``simt.*`` intrinsics (thread geometry, shared memory, warp shuffles and votes) and
``buildtile.random``; and the reads of constant arrays (module-level tuples of numbers).

:class:`SimtCalls` is part of the SIMT typer; it is a module of its own because
these are the SIMT language's vocabulary, apart from its statements.
"""

from __future__ import annotations

import ast
import difflib

from buildtile.backend import KernelSource
from buildtile.backends.common.constants import constant_tuples, fold_constant
from buildtile.backends.common.typer import Abort, BaseTyper, is_intlike
from buildtile.backends.simt import ir
from buildtile.backends.simt.params import scalar_of
from buildtile.backends.simt.types import (
    BOOL, F32, I32, I64, U32, U64, VOID, WEAK_FLOAT, WEAK_INT, Scalar, SharedT, SliceT, TensorT, Weak, WitnessT,
    WitnessTupleT, value_type,
)

RANDOM_MODULE = "buildtile.random"

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
#: built-ins without effects besides the math functions: they keep a kernel coarsenable
PURE_INTRINSICS = {"mulhi", "philox", "uniform", "normal"}
#: shared arrays have at most this many axes
MAX_SHARED_RANK = 3
#: the static shared memory one block may declare (CUDA's limit without an opt-in)
STATIC_SHARED_BYTES = 48 * 1024
#: atomic methods: name -> (operation, values after the index)
_ATOMIC_METHODS = {"atomic_add": ("add", 1), "atomic_min": ("min", 1), "atomic_max": ("max", 1),
                   "atomic_exchange": ("exchange", 1), "atomic_cas": ("cas", 2)}
#: the simt functions that take keyword arguments: name -> the keywords
_SIMT_KEYWORDS = {"shfl_down": ("width", "mask"), "shfl_up": ("width", "mask"), "shfl_xor": ("width", "mask"),
                  "shfl_idx": ("width", "mask")}
SIMT_FUNCTIONS = ["index_1d", "index_2d", "index_3d", "grid", "gridsize", "sync_threads", "grid_sync", "syncwarp", "lane_id", "warp_id",
                  "shared_array", "dynamic_shared_array", "shfl_down", "shfl_up", "shfl_xor", "shfl_idx",
                  "ballot", "any", "all", "mulhi"]
RANDOM_FUNCTIONS = {"philox": 4, "uniform": 2, "normal": 2}


class SimtCalls(BaseTyper):
    """Typing of the calls of SIMT kernels and device functions."""

    def __init__(self, source: KernelSource) -> None:
        super().__init__(source)
        #: the module's tuples of constant numbers, by name
        self.constant_arrays = constant_tuples(source.module_ast, self.consts)

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
            if shared.ty.dynamic or shared.ty.view:
                return ir.Len(I64, param=shared.name, src=node)
            return ir.Const(I64, value=shared.ty.shape[0], src=node)
        if len(node.args) == 1 and self.is_constant_array(node.args[0]):
            return ir.Const(I64, value=len(self.constant_arrays[node.args[0].id]), src=node)
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
        of_complex = self.complex_math(node, name, args)
        if of_complex is not None:
            return of_complex
        ty = self.unify_all(args, node)
        if isinstance(ty, Weak):
            ty = F32 if name not in INT_MATH and name != "fabs" else ty.default
        if not ty.is_float and not (ty.is_int and name in INT_MATH | {"fabs"}):
            self.type_mismatch(node, f"`{name}`", "floats", ty)
        args = [self.coerce(a, ty, n) for a, n in zip(args, node.args)]
        return ir.Intrinsic(ty, name=name, args=args, src=node)

    def call_method(self, node: ast.Call, param: ir.Param, method: str):
        """``h.atomic_add(i, v)`` ... of an AtomicSlice, or of a shared array (index ``(r, c)`` when 2-D)."""
        shared = isinstance(param.ty, SharedT)
        if not (shared or (isinstance(param.ty, SliceT) and param.ty.access == "atomic")) or method not in _ATOMIC_METHODS:
            self.fail("BT0425", node.func, f"no method `{method}` on `{param.name}` ({param.ty})",
                      help="atomic_add/min/max/exchange/cas are methods of AtomicSlice parameters and shared arrays")
        op, nargs = _ATOMIC_METHODS[method]
        if len(node.args) != 1 + nargs:
            self.fail("BT0308", node, f"`{method}` takes an index and {nargs} value{'s' if nargs > 1 else ''}")
        elem = param.ty.elem
        if op in ("min", "max", "cas") and not elem.is_int:
            self.fail("BT0308", node, f"`{method}` is defined for integer elements, not {elem}")
        if elem.bits < 32 or elem == BOOL or elem.kind == "complex":
            self.fail("BT0308", node, f"atomics on {elem} elements are not supported",
                      help="use 32- or 64-bit integer or float elements")
        rank = param.ty.rank
        index_node = node.args[0]
        index_nodes = index_node.elts if isinstance(index_node, ast.Tuple) else [index_node]
        if len(index_nodes) != rank:
            self.fail("BT0308", index_node, f"`{param.name}` has rank {rank} but the atomic names "
                      f"{len(index_nodes)} {'index' if len(index_nodes) == 1 else 'indices'}",
                      help=f"give one index per axis: `{param.name}.{method}(({', '.join('ijk'[:rank])}), v)`"
                      if rank > 1 else "")
        indices = [self.index_value(n) for n in index_nodes]
        args = [self.coerce(self.expr(a), elem, a) for a in node.args[1:]]
        return ir.AtomicOp(elem, param=param.name, op=op, indices=indices, args=args, src=node)

    def index_value(self, node: ast.AST) -> ir.Expr:
        """An array index: any integer; a literal one is an i64."""
        index = self.expr(node)
        if not is_intlike(value_type(index.ty)):
            self.type_mismatch(node, "an index", "an integer", index.ty)
        return self.coerce(index, I64, node) if isinstance(index.ty, Weak) else index

    # ------------------------------------------------------------ constant arrays
    def is_constant_array(self, node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id in self.constant_arrays
                and node.id not in self.locals and node.id not in self.params)

    def constant_array_load(self, node: ast.Subscript) -> ir.Expr:
        """``COEFFS[k]``: a constant index folds to the literal; a run-time one reads constant memory."""
        name = node.value.id
        values = self.constant_arrays[name]
        if isinstance(node.slice, (ast.Tuple, ast.Slice)):
            self.fail("BT0308", node.slice, f"the constant array `{name}` takes one integer index")
        weak = WEAK_FLOAT if any(isinstance(v, float) for v in values) else WEAK_INT
        k = fold_constant(node.slice, self.consts)
        if isinstance(k, int) and not isinstance(k, bool):
            if not -len(values) <= k < len(values):
                self.fail("BT0600", node.slice, f"index {k} is out of range for `{name}`",
                          label=f"`{name}` has {len(values)} element{'s' if len(values) != 1 else ''}")
            value = values[k]
            return ir.Const(weak, value=float(value) if weak.kind == "float" else value, src=node)
        index = self.index_value(node.slice)
        return ir.ConstArrayLoad(weak, name=name, values=values, index=index, src=node)

    def retype_constant_array(self, value: ir.ConstArrayLoad, ty: Scalar) -> ir.Expr:
        """A constant array's element type is the type its use asks for; every element must fit."""
        if ty.is_int:
            lo, hi = (0, 2 ** ty.bits - 1) if ty.kind == "uint" else (-(2 ** (ty.bits - 1)), 2 ** (ty.bits - 1) - 1)
            bad = next((v for v in value.values if not lo <= v <= hi), None)
            if bad is not None:
                self.fail("BT0308", value.src, f"`{value.name}` holds {bad}, out of range for {ty}",
                          label=f"read as {ty} here", help="use a wider type, or cast explicitly")
        if ty == BOOL:
            self.type_mismatch(value.src, "this value", "bool", value.ty)
        return ir.ConstArrayLoad(ty, name=value.name, values=value.values, index=value.index, src=value.src)

    def call_simt(self, node: ast.Call, name: str):
        allowed = _SIMT_KEYWORDS.get(name, ())
        for kw in node.keywords:
            if kw.arg not in allowed:
                self.fail("BT0308", kw.value if kw.arg is not None else node,
                          f"`simt.{name}` takes no keyword argument `{kw.arg}`" if kw.arg is not None
                          else f"`simt.{name}` takes no `**` arguments",
                          help=f"its keywords: {', '.join(allowed)}" if allowed else "pass the arguments by position")
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
        if name == "grid_sync":
            if node.args:
                self.fail("BT0308", node, "`simt.grid_sync()` takes no arguments")
            if self.device_fn is not None:
                self.fail("BT0200", node, "`simt.grid_sync()` is called in kernels, not in device functions",
                          help="call it in the cooperative kernel's body, between the phases it separates")
            return ir.Intrinsic(VOID, name="grid_sync", src=node)
        if name == "syncwarp":
            if len(node.args) > 1:
                self.fail("BT0308", node, "`simt.syncwarp(mask=0xffffffff)` takes at most 1 argument")
            args = [self.coerce(self.expr(node.args[0]), U32, node.args[0])] if node.args else []
            return ir.Intrinsic(VOID, name="syncwarp", args=args, src=node)
        if name == "mulhi":
            if len(node.args) != 2:
                self.fail("BT0308", node, "`simt.mulhi(a, b)` takes 2 arguments")
            args = [self.expr(a) for a in node.args]
            ty = self.unify_all(args, node)
            ty = ty.default if isinstance(ty, Weak) else ty
            if not ty.is_int or ty.bits not in (32, 64):
                self.type_mismatch(node, "`simt.mulhi`", "32- or 64-bit integers", ty)
            args = [self.coerce(a, ty, n) for a, n in zip(args, node.args)]
            return ir.Intrinsic(ty, name="mulhi", args=args, src=node)
        if name in ("lane_id", "warp_id"):
            if node.args:
                self.fail("BT0308", node, f"`simt.{name}()` takes no arguments")
            return ir.Intrinsic(I64, name=name, src=node)
        if name == "shared_array":
            if self.device_fn is not None:
                self.fail("BT0200", node, "shared arrays are declared in kernels, not in device functions")
            if len(node.args) != 2:
                self.fail("BT0308", node, "`simt.shared_array(T, shape)` takes an element type and a constant "
                          "length or shape tuple")
            elem = scalar_of(node.args[0], self.ns)
            if elem is None or elem == BOOL:
                self.fail("BT0308", node.args[0], "shared arrays hold numeric scalars (f32, i32, ...)")
            shape = self.shared_shape(node.args[1])
            size = 1
            for n in shape:
                size *= n
            what = shape[0] if len(shape) == 1 else " x ".join(map(str, shape))
            larger = ("use smaller arrays, or one `simt.dynamic_shared_array(T)` sized by the contract's "
                      "`dynamic_shared=` (up to the device's limit)")
            if size * elem.bits // 8 > STATIC_SHARED_BYTES:
                self.fail("BT0600", node, f"{what} x {elem} is more than the 48 KiB of static shared memory "
                          "a block has", help=larger)
            declared = {n: p.ty.size * p.ty.elem.bits // 8 for n, p in self.shared.items()
                        if not (p.ty.dynamic or p.ty.view)}
            total = sum(declared.values()) + size * elem.bits // 8
            if total > STATIC_SHARED_BYTES:
                names = ", ".join(f"`{n}`" for n in declared)
                self.fail("BT0600", node, f"the kernel's shared arrays take {total} bytes: more than the 48 KiB "
                          "of static shared memory a block has",
                          label=f"{what} x {elem}, after {names}", help=larger)
            return ir.Intrinsic(SharedT(elem, size, rank=len(shape), shape=shape), name="shared_array", src=node)
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
        if name in ("shfl_down", "shfl_up", "shfl_xor", "shfl_idx"):
            return self.shuffle_call(node, name)
        if name in ("ballot", "any", "all"):
            if len(node.args) != 1:
                self.fail("BT0308", node, f"`simt.{name}(predicate)` takes 1 argument")
            pred = self.condition(node.args[0])
            return ir.Intrinsic(U32 if name == "ballot" else BOOL, name=f"vote_{name}", args=[pred], src=node)
        known = SIMT_FUNCTIONS
        close = difflib.get_close_matches(name, known, n=1)
        self.fail("BT0425", node.func, f"cannot find function `simt.{name}`",
                  help=f"did you mean `simt.{close[0]}`?" if close else f"simt functions: {', '.join(known)}")

    def run_time_name(self, node: ast.AST) -> str | None:
        """A label naming the local or parameter that keeps ``node`` from being a compile-time
        constant (a local bound to a constant is still a run-time value), or None."""
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id not in self.consts:
                if n.id in self.params:
                    known = "its value is" if isinstance(self.params[n.id].ty, Scalar) else "its extents are"
                    return f"`{n.id}` is a parameter: {known} known only at launch"
                if n.id in self.locals:
                    return f"`{n.id}` is a local variable, not a constant"
        return None

    def shared_shape(self, node: ast.AST) -> tuple[int, ...]:
        """The extents of a static shared array: a positive constant, or a tuple of up to 3 of them."""
        items = node.elts if isinstance(node, ast.Tuple) else [node]
        if not items or len(items) > MAX_SHARED_RANK:
            self.fail("BT0308", node, f"a shared array has 1 to {MAX_SHARED_RANK} axes, not {len(items)}")
        shape = []
        for item in items:
            n = fold_constant(item, self.consts)
            if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
                what = "the length" if len(items) == 1 else "each extent"
                run_time = self.run_time_name(item)
                self.fail("BT0308", item, f"{what} of a shared array is a positive constant",
                          label=run_time or "",
                          help=("shared memory is sized at compile time: "
                                + ("write the size with literals and module constants (a value fixed for "
                                   "every launch can be bound at module level: `N = 256`); " if run_time else "")
                                + "for a size known at launch use `simt.dynamic_shared_array(T)`"))
            shape.append(n)
        return tuple(shape)

    def shuffle_call(self, node: ast.Call, name: str) -> ir.Intrinsic:
        """``simt.shfl_<mode>(v, delta_or_lane, width=32, mask=0xffffffff)``."""
        second = "lane" if name == "shfl_idx" else "mask" if name == "shfl_xor" else "delta"
        if len(node.args) != 2:
            self.fail("BT0308", node, f"`simt.{name}(value, {second}, width=32, mask=0xffffffff)` "
                      "takes 2 positional arguments")
        value = self.defaulted(self.expr(node.args[0]))
        vt = value_type(value.ty)
        if not isinstance(vt, Scalar) or vt.bits not in (32, 64) or vt == BOOL:
            self.type_mismatch(node.args[0], f"`{name}`", "a 32- or 64-bit number", vt)
        lane = self.coerce(self.expr(node.args[1]), I32, node.args[1])
        keywords = {kw.arg: kw.value for kw in node.keywords}
        width = 32
        if "width" in keywords:
            width = fold_constant(keywords["width"], self.consts)
            if not isinstance(width, int) or isinstance(width, bool) or not 1 <= width <= 32 or width & (width - 1):
                run_time = self.run_time_name(keywords["width"])
                self.fail("BT0308", keywords["width"], "the width of a shuffle is a constant power of two up to 32",
                          label=run_time or "1, 2, 4, 8, 16 or 32",
                          help="lanes shuffle within segments of `width` lanes"
                          + ("; write it with literals and module constants" if run_time else ""))
        # the width travels as a constant argument: it becomes part of the instruction
        args = [value, lane, ir.Const(I32, value=width, src=keywords.get("width", node))]
        if "mask" in keywords:
            args.append(self.coerce(self.expr(keywords["mask"]), U32, keywords["mask"]))
        return ir.Intrinsic(vt, name=name, args=args, src=node)

    # ------------------------------------------------------------ buildtile.random
    def call_random(self, node: ast.Call, name: str) -> ir.Intrinsic:
        """``random.philox(seed, offset, counter, word)``, ``random.uniform(seed, offset)``,
        ``random.normal(seed, offset)``: seed, offset and counter are integers taken as u64."""
        arity = RANDOM_FUNCTIONS.get(name)
        if arity is None:
            close = difflib.get_close_matches(name, list(RANDOM_FUNCTIONS), n=1)
            self.fail("BT0425", node.func, f"cannot find function `random.{name}`",
                      help=f"did you mean `random.{close[0]}`?" if close
                      else f"random functions: {', '.join(RANDOM_FUNCTIONS)}")
        spelled = {"philox": "seed, offset, counter, word", "uniform": "seed, offset", "normal": "seed, offset"}[name]
        if len(node.args) != arity:
            self.fail("BT0308", node, f"`random.{name}({spelled})` takes {arity} arguments")
        words = [self.random_word(a) for a in node.args[:3]]
        if name == "philox":
            word = fold_constant(node.args[3], self.consts)
            if not isinstance(word, int) or isinstance(word, bool) or not 0 <= word <= 3:
                self.fail("BT0308", node.args[3], "the word of a Philox block is a constant 0..3",
                          label="one of the 4 u32 words of the output")
            return ir.Intrinsic(U32, name="philox", args=words + [ir.Const(I32, value=word, src=node.args[3])],
                                src=node)
        return ir.Intrinsic(F32, name=name, args=words, src=node)

    def random_word(self, node: ast.AST) -> ir.Expr:
        """A seed, offset or counter: any integer, reinterpreted as a u64 (a signed one sign-extends)."""
        value = self.expr(node)
        vt = value_type(value.ty)
        if not is_intlike(vt):
            self.type_mismatch(node, "a seed, offset or counter", "an integer", vt)
        if isinstance(vt, Weak):
            return self.coerce(value, U64, node)
        return value if vt == U64 else ir.Cast(U64, value=value, src=node)
