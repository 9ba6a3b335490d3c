"""The operations of the Tile language: ``tile.*`` calls, tile methods and math functions.

:class:`TileOperations` is part of the tile typer; each operation checks its
arguments (constant shapes, dtypes, broadcasting) and builds its IR node.
"""

from __future__ import annotations

import ast
import math

from buildtile.backends.common.typer import Abort
from buildtile.backends.tile import ir
from buildtile.backends.tile.shapes import MAX_TILE_ELEMENTS, TileShapes
from buildtile.backends.tile.types import (
    BOOL, F32, I32, I64, MMA_DTYPES, TILE_DTYPES, ArrayT, Scalar, TileIdT, TileT, Weak, is_pow2, value_type,
)
from buildtile.backends.tile.params import scalar_type

#: elementwise math: name -> arity; the float-only ones compute f16/bf16 in f32 and round
MATH = {"exp": 1, "exp2": 1, "log": 1, "log2": 1, "sqrt": 1, "rsqrt": 1, "abs": 1, "tanh": 1, "sin": 1,
        "cos": 1, "erf": 1, "floor": 1, "ceil": 1, "sigmoid": 1, "maximum": 2, "minimum": 2, "pow": 2}
INT_MATH = {"abs", "maximum", "minimum"}
#: ``tile.gelu(x, approximate=...)``: torch's two forms, each lowered as a composition of other math
GELU_FORMS = {"none": "gelu", "tanh": "gelu_tanh"}
REDUCTIONS = ("sum", "prod", "max", "min") + ir.INDEX_REDUCTIONS


class TileOperations(TileShapes):
    """Typing of tile operations, for the tile typer."""

    def bind_args(self, node: ast.Call, name: str, names: list[str], defaults: dict | None = None) -> dict:
        defaults = defaults or {}
        if len(node.args) > len(names):
            self.fail("BT0308", node, f"`{name}` takes at most {len(names)} arguments ({', '.join(names)})")
        args = dict(zip(names, node.args))
        for kw in node.keywords:
            if kw.arg not in names or kw.arg in args:
                self.fail("BT0308", kw.value if kw.arg in args else node,
                          f"`{name}` got {'a repeated' if kw.arg in args else 'an unknown'} argument `{kw.arg}`",
                          help=f"`{name}` takes ({', '.join(names)})")
            args[kw.arg] = kw.value
        for n in names:
            if n not in args and n not in defaults:
                self.fail("BT0308", node, f"`{name}` is missing its argument `{n}`", help=f"`{name}` takes ({', '.join(names)})")
        return {**defaults, **args}

    def tile_call(self, node: ast.Call, name: str):
        handler = getattr(self, "call_" + name, None)
        if handler is not None:
            return handler(node)
        if name in MATH:
            return self.math_call(node, name)
        if name in REDUCTIONS:
            args = self.bind_args(node, f"tile.{name}", ["tile", "axis", "keepdims"], {"axis": None, "keepdims": None})
            return self.reduce(name, self.expr(args["tile"]), args["axis"], args["keepdims"], node)
        if name in ("range",):
            self.fail("BT0200", node, "`tile.range` is only the iterable of a for loop")
        if name == "store":
            self.fail("BT0200", node, "`tile.store(...)` is a statement", help="write it on its own line")
        if name in ("partition", "tensor", "kernel"):
            self.fail("BT0200", node, f"`tile.{name}` is used on the host, not inside kernels")
        self.fail("BT0425", node.func, f"`tile.{name}` is not a tile operation")

    def tile_method(self, node: ast.Call, value: ir.Expr, method: str):
        if method == "astype":
            args = self.bind_args(node, "astype", ["dtype"])
            return self.astype(value, self.dtype_arg(args["dtype"]), node)
        if method in ("reshape", "permute"):
            if node.keywords or not node.args:
                self.fail("BT0308", node, f"`{method}` takes {'a shape' if method == 'reshape' else 'an axis order'}")
            arg = node.args[0] if len(node.args) == 1 else ast.copy_location(ast.Tuple(elts=node.args), node)
            if method == "permute":
                return self.permute(value, arg, node)
            return self.reshape(value, self.const_shape(arg, "the new shape"), node)
        if method == "transpose":
            return self.transpose(value, node.args or None, node)
        if method in REDUCTIONS:
            args = self.bind_args(node, method, ["axis", "keepdims"], {"axis": None, "keepdims": None})
            return self.reduce(method, value, args["axis"], args["keepdims"], node)
        self.fail("BT0425", node.func, f"no method `{method}` on a tile",
                  help="tiles have .astype(), .reshape(), .permute(), .transpose(), "
                       ".sum/.prod/.max/.min/.argmax/.argmin()")

    def dtype_arg(self, node: ast.AST) -> Scalar:
        if isinstance(node, ast.Attribute) and node.attr == "dtype":   # `x.dtype` of an array, a tile or a scalar
            return self.dtype_of_value(node)
        ty = scalar_type(node, self.ns)
        if ty is None or ty.name not in TILE_DTYPES:
            self.fail("BT0308", node, f"`{ast.unparse(node)}` is not a tile element type",
                      help=f"tiles hold {', '.join(TILE_DTYPES)} (import them from buildtile.types)")
        return ty

    def dtype_of_value(self, node: ast.Attribute) -> Scalar:
        base = node.value
        param = self.params.get(base.id) if isinstance(base, ast.Name) else None
        if param is not None and not isinstance(param.ty, Scalar):
            return param.ty.elem
        ty = self.expr(base).ty
        ty = ty.dtype if isinstance(ty, TileT) else ty
        if not isinstance(ty, Scalar) or ty.name not in TILE_DTYPES:
            self.fail("BT0308", node, f"`{ast.unparse(node)}` is not a tile element type",
                      help="`.dtype` is that of an array parameter, a tile or a typed scalar")
        return ty

    def call_load(self, node: ast.Call):
        args = self.bind_args(node, "tile.load", ["array", "index", "shape", "padding"], {"padding": None})
        param = self.input_array(args["array"], "tile.load")
        shape = self.const_shape(args["shape"], "the tile shape")
        if len(shape) != param.ty.rank:
            self.fail("BT0308", args["shape"], f"a tile of `{param.name}` has {param.ty.rank} "
                      f"{'axis' if param.ty.rank == 1 else 'axes'}; this shape has {len(shape)}")
        index = self.index_list(args["index"], param.ty.rank)
        return ir.Load(TileT(param.ty.elem, shape), param=param.name, index=index,
                       padding=self.padding(args["padding"], param.ty.elem), src=node)

    def call_load_like(self, node: ast.Call):
        args = self.bind_args(node, "tile.load_like", ["array", "out", "padding"], {"padding": None})
        param = self.input_array(args["array"], "tile.load_like")
        out = args["out"]
        if not (isinstance(out, ast.Name) and out.id in self.params and isinstance(self.params[out.id].ty, ArrayT)
                and self.params[out.id].ty.is_out):
            self.fail("BT0308", out, "the second argument of `tile.load_like` is a tile.Out parameter",
                      help="`tile.load_like(x, z)` reads the tile of x that matches z's own tile")
        z = self.params[out.id]
        if z.ty.rank != param.ty.rank:
            self.fail("BT0308", node, f"`{param.name}` has rank {param.ty.rank} but `{z.name}` has rank {z.ty.rank}",
                      help="load_like needs arrays of the same rank; use tile.load(x, index, shape)")
        if z.name not in self.tile_shapes:
            raise Abort
        shape = tuple(self.tile_shapes[z.name])
        if math.prod(shape) > MAX_TILE_ELEMENTS:
            self.fail("BT0600", node, f"`{z.name}`'s tile of {list(shape)} has more than {MAX_TILE_ELEMENTS} "
                      "elements, more than one block holds in registers",
                      help=f"load and store it in chunks: `tile.load(x, index, chunk)` and "
                           f"`tile.store({z.name}, index, t)` over a `tile.range` loop")
        index = [ir.TileId(TileIdT(z.name, a), param=z.name, axis=a, src=node) for a in range(z.ty.rank)]
        return ir.Load(TileT(param.ty.elem, tuple(self.tile_shapes[z.name])), param=param.name, index=index,
                       padding=self.padding(args["padding"], param.ty.elem), src=node)

    def input_array(self, node: ast.AST, what: str) -> ir.Param:
        if not (isinstance(node, ast.Name) and node.id in self.params and isinstance(self.params[node.id].ty, ArrayT)):
            if isinstance(node, ast.Name) and node.id not in self.params:
                self.expr(node)     # an unknown name is reported as such
            self.fail("BT0308", node, f"`{what}` reads from an array parameter",
                      help="pass a Tensor parameter of the kernel")
        param = self.params[node.id]
        if param.ty.atomic:
            self.fail("BT0200", node, f"`{param.name}` is a tile.Atomic output: tile kernels do not read it",
                      label="other blocks add into it while this one runs",
                      help="accumulate in registers and add the result once with `tile.atomic_add`")
        if param.ty.is_out:
            self.fail("BT0200", node, f"`{param.name}` is a tile.Out output: tile kernels do not read their outputs",
                      help="compute the tile in registers and store it once")
        return param

    def padding(self, node: ast.AST | None, elem: Scalar):
        if node is None:
            return False if elem == BOOL else (0.0 if elem.is_float else 0)
        value = self.const(node)
        if not isinstance(value, (int, float)) or isinstance(value, tuple):
            self.fail("BT0308", node, "`padding` is a constant value", help="e.g. `padding=0.0` or `padding=-math.inf`")
        if isinstance(value, float) and not elem.is_float:
            self.type_mismatch(node, "the padding", elem, "a float")
        return float(value) if elem.is_float else value

    def index_list(self, node: ast.AST, rank: int) -> list[ir.Expr]:
        items = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
        if len(items) != rank:
            self.fail("BT0308", node, f"the index has {len(items)} {'entry' if len(items) == 1 else 'entries'}, "
                      f"the array has rank {rank}")
        return [self.int_scalar(i) for i in items]

    def int_scalar(self, node: ast.AST) -> ir.Expr:
        value = self.expr(node)
        vt = value_type(value.ty)
        if isinstance(vt, Weak) and vt.kind == "int":
            return self.coerce(value, I64, node)
        if not (isinstance(vt, Scalar) and vt.is_int):
            self.type_mismatch(node, "an index", "an integer scalar", value.ty)
        if vt != I64:
            value = ir.Cast(I64, value=value, src=node)
        return value

    def call_zeros(self, node: ast.Call):
        args = self.bind_args(node, "tile.zeros", ["shape", "dtype"], {"dtype": None})
        dtype = F32 if args["dtype"] is None else self.dtype_arg(args["dtype"])
        return self.full(self.const_shape(args["shape"], "the shape"), 0, dtype, node)

    def call_full(self, node: ast.Call):
        args = self.bind_args(node, "tile.full", ["shape", "value", "dtype"], {"dtype": None})
        dtype = F32 if args["dtype"] is None else self.dtype_arg(args["dtype"])
        shape = self.const_shape(args["shape"], "the shape")
        value = self.const(args["value"])
        if value is None or isinstance(value, tuple):
            # a run-time scalar: splat it
            scalar = self.expr(args["value"])
            if isinstance(scalar.ty, TileT):
                self.type_mismatch(args["value"], "the fill value", "a scalar", scalar.ty)
            return ir.Splat(TileT(dtype, shape), value=self.scalar_as(scalar, dtype, args["value"]), src=node)
        if isinstance(value, float) and not dtype.is_float:
            self.type_mismatch(args["value"], "the fill value", dtype, "a float")
        return self.full(shape, value, dtype, node)

    def full(self, shape, value, dtype: Scalar, node) -> ir.Full:
        value = bool(value) if dtype == BOOL else (float(value) if dtype.is_float else int(value))
        return ir.Full(TileT(dtype, shape), value=value, src=node)

    def call_arange(self, node: ast.Call):
        """``tile.arange(n)`` or ``tile.arange(start, stop)`` (as in Triton), optionally with a dtype."""
        positional = list(node.args)
        if len(positional) >= 2 and scalar_type(positional[1], self.ns) is not None:
            names = ["n", "dtype"]          # tile.arange(n, i32)
        else:
            names = ["start", "stop", "dtype"] if len(positional) >= 2 else ["n", "dtype"]
        args = self.bind_args(node, "tile.arange", names, {"dtype": None})
        start = 0
        if "start" in args:
            start = self.const_int(args["start"], "the start of `tile.arange`")
            stop = self.const_int(args["stop"], "the stop of `tile.arange`")
            if not is_pow2(stop - start):
                self.fail("BT0308", node, f"`tile.arange({start}, {stop})` has {stop - start} elements, "
                          "not a power of two", label="stop - start is the tile's extent",
                          help="tile extents are powers of two; mask the elements you do not need with tile.where")
            n = stop - start
            if n > MAX_TILE_ELEMENTS:
                self.const_shape(ast.copy_location(ast.Constant(n), node), "the length of `tile.arange`")
        else:
            (n,) = self.const_shape(args["n"], "the length of `tile.arange`")
        dtype = I32 if args["dtype"] is None else self.dtype_arg(args["dtype"])
        if dtype == BOOL:
            self.type_mismatch(args["dtype"], "tile.arange", "a number type", dtype)
        values = ir.Arange(TileT(dtype, (n,)), src=node)
        if start:
            values = ir.BinOp(values.ty, op="+", lhs=values, rhs=self.full((n,), start, dtype, node), src=node)
        return values

    def call_where(self, node: ast.Call):
        args = self.bind_args(node, "tile.where", ["cond", "x", "y"])
        cond, a, b = (self.expr(args[k]) for k in ("cond", "x", "y"))
        cond_dtype = cond.ty.dtype if isinstance(cond.ty, TileT) else value_type(cond.ty)
        if isinstance(cond.ty, TileT) and cond_dtype != BOOL and cond_dtype.is_int:
            # an integer tile as a condition: nonzero is true, as in Triton and C
            zero = ir.Splat(TileT(cond_dtype, ()), value=ir.Const(cond_dtype, value=0, src=args["cond"]),
                            src=args["cond"])
            cond = ir.Compare(TileT(BOOL, cond.ty.shape), op="!=", lhs=cond,
                              rhs=self.broadcast_to(zero, cond.ty.shape), src=args["cond"])
        elif cond_dtype != BOOL:
            self.type_mismatch(args["cond"], "the condition of tile.where", "a tile of bools or integers, or a bool",
                               cond.ty,
                               help="compare explicitly, e.g. `t != 0.0`")
        if not any(isinstance(v.ty, TileT) for v in (cond, a, b)):
            self.fail("BT0308", node, "`tile.where` chooses between tiles", help="for scalars write `a if cond else b`")
        if isinstance(a.ty, TileT) or isinstance(b.ty, TileT):
            dtype, shape, (a, b) = self.elementwise([a, b], [args["x"], args["y"]], node)
        else:
            ty = self.unify(a, b, node)
            dtype = ty.default if isinstance(ty, Weak) else ty
            a, b = self.coerce(a, dtype, args["x"]), self.coerce(b, dtype, args["y"])
            shape = cond.ty.shape
        shape = self.broadcast_shapes([shape, cond.ty.shape if isinstance(cond.ty, TileT) else ()], node)
        cond = self.broadcast_to(cond if isinstance(cond.ty, TileT) else ir.Splat(TileT(BOOL, ()), value=cond, src=cond.src),
                                 shape)
        a = self.broadcast_to(a if isinstance(a.ty, TileT) else ir.Splat(TileT(dtype, ()), value=a, src=a.src), shape)
        b = self.broadcast_to(b if isinstance(b.ty, TileT) else ir.Splat(TileT(dtype, ()), value=b, src=b.src), shape)
        return ir.Where(TileT(dtype, shape), cond=cond, then=a, orelse=b, src=node)

    def call_astype(self, node: ast.Call):
        args = self.bind_args(node, "tile.astype", ["tile", "dtype"])
        value = self.expr(args["tile"])
        if not isinstance(value.ty, TileT):
            self.type_mismatch(args["tile"], "tile.astype", "a tile", value.ty, help="cast scalars with f32(x)")
        return self.astype(value, self.dtype_arg(args["dtype"]), node)

    def call_reshape(self, node: ast.Call):
        args = self.bind_args(node, "tile.reshape", ["tile", "shape"])
        value = self.tile_arg(args["tile"], "tile.reshape")
        return self.reshape(value, self.const_shape(args["shape"], "the new shape"), node)

    def call_permute(self, node: ast.Call):
        args = self.bind_args(node, "tile.permute", ["tile", "dims"])
        return self.permute(self.tile_arg(args["tile"], "tile.permute"), args["dims"], node)

    def call_transpose(self, node: ast.Call):
        args = self.bind_args(node, "tile.transpose", ["tile", "axis0", "axis1"], {"axis0": None, "axis1": None})
        value = self.tile_arg(args["tile"], "tile.transpose")
        axes = [args[k] for k in ("axis0", "axis1") if args[k] is not None]
        return self.transpose(value, axes or None, node)

    def call_mma(self, node: ast.Call):
        args = self.bind_args(node, "tile.mma", ["a", "b", "acc"])
        a, b, acc = (self.tile_arg(args[k], "tile.mma") for k in ("a", "b", "acc"))
        for v, key in ((a, "a"), (b, "b")):
            if v.ty.rank != 2 or v.ty.dtype not in MMA_DTYPES:
                shape = v.ty.shape
                help = ""
                if v.ty.rank > 2 and all(n == 1 for n in shape[:-2]):
                    help = f"reshape it to its last two axes: `{ast.unparse(args[key])}.reshape({shape[-2:]})`"
                self.type_mismatch(args[key], f"operand `{key}` of tile.mma", "a 2-D tile of f16 or bf16", v.ty,
                                   help=help)
        if a.ty.dtype != b.ty.dtype:
            self.type_mismatch(node, "the operands of tile.mma", a.ty.dtype, b.ty.dtype, help="convert one with .astype()")
        (m, k), (k2, n) = a.ty.shape, b.ty.shape
        if k != k2:
            # b given as N x K (keys by head dim, as attention loads them): its transpose fits
            help = f"to multiply by the transpose of b, write `{ast.unparse(args['b'])}.T`" if n == k else ""
            self.fail("BT0308", node, f"tile.mma of mismatched K: a is {m} x {k} but b is {k2} x {n}",
                      label="a's columns must equal b's rows", help=help)
        if acc.ty != TileT(F32, (m, n)):
            self.type_mismatch(args["acc"], "the accumulator of tile.mma", TileT(F32, (m, n)), acc.ty,
                               help="accumulate in f32: start from tile.zeros((M, N), f32)")
        if min(m, n, k) < 16:
            self.fail("BT0308", node, f"tile.mma of {m} x {k} by {k} x {n}: every extent must be at least 16",
                      help="tensor cores work on 16 x 8 x 16 fragments")
        return ir.Mma(TileT(F32, (m, n)), a=a, b=b, acc=acc, src=node)

    def call_cdiv(self, node: ast.Call):
        args = self.bind_args(node, "tile.cdiv", ["a", "b"])
        a, b = self.int_scalar(args["a"]), self.int_scalar(args["b"])
        return ir.BinOp(I64, op="cdiv", lhs=a, rhs=b, src=node)

    def tile_arg(self, node: ast.AST, what: str) -> ir.Expr:
        value = self.expr(node)
        if not isinstance(value.ty, TileT):
            self.type_mismatch(node, what, "a tile", value.ty)
        return value

    def call_gelu(self, node: ast.Call):
        args = self.bind_args(node, "tile.gelu", ["x", "approximate"], {"approximate": None})
        form = args["approximate"]
        name = GELU_FORMS["none"] if form is None else self.gelu_form(form)
        return self.elementwise_math(name, [args["x"]], node)

    def gelu_form(self, form: ast.AST) -> str:
        """The math function of ``approximate=<form>``: a string literal naming one of torch's forms."""
        value = form.value if isinstance(form, ast.Constant) else None
        if value not in GELU_FORMS:
            accepted = " or ".join(f'"{k}"' for k in GELU_FORMS)
            given = f'"{value}"' if isinstance(value, str) else ast.unparse(form)
            self.fail("BT0308", form, f"`tile.gelu` takes approximate={accepted}, not {given}",
                      label="not one of the forms tile.gelu computes",
                      help='approximate="none" is the exact form (with erf), approximate="tanh" '
                           "its tanh approximation, as in torch.nn.functional.gelu")
        return GELU_FORMS[value]

    def math_call(self, node: ast.Call, name: str):
        arity = MATH[name]
        if node.keywords or len(node.args) != arity:
            self.fail("BT0308", node, f"`{name}` takes {arity} argument{'s' if arity > 1 else ''}")
        return self.elementwise_math(name, node.args, node)

    def elementwise_math(self, name: str, arg_nodes: list[ast.AST], node: ast.Call):
        """``name`` over tiles or scalars (broadcast together), float-only unless in INT_MATH."""
        values = [self.expr(a) for a in arg_nodes]
        if any(isinstance(v.ty, TileT) for v in values):
            dtype, shape, values = self.elementwise(values, arg_nodes, node)
            ty = TileT(dtype, shape)
        else:
            ty = values[0].ty if len(values) == 1 else self.unify(values[0], values[1], node)
            ty = value_type(ty)
            if isinstance(ty, Weak):
                ty = F32 if name not in INT_MATH else ty.default
            values = [self.coerce(v, ty, n) for v, n in zip(values, arg_nodes)]
            dtype = ty
        if dtype == BOOL or not (dtype.is_float or name in INT_MATH):
            self.type_mismatch(node, f"`{name.partition('_')[0]}`", "floats", dtype,
                               help="convert with .astype(f32) first")
        return ir.Math(ty, name=name, args=values, src=node)

    def astype(self, value: ir.Expr, dtype: Scalar, node) -> ir.Expr:
        if value.ty.dtype == dtype:
            return value
        return ir.Cast(TileT(dtype, value.ty.shape), value=value, src=node)

    def reshape(self, value: ir.Expr, shape: tuple[int, ...], node) -> ir.Expr:
        if math.prod(shape) != value.ty.size:
            self.fail("BT0308", node, f"cannot reshape a tile of {value.ty.shape} ({value.ty.size} elements) "
                      f"into {shape} ({math.prod(shape)} elements)")
        return ir.Reshape(TileT(value.ty.dtype, shape), value=value, src=node)

    def permute(self, value: ir.Expr, dims_node: ast.AST, node) -> ir.Expr:
        dims = self.const(dims_node)
        rank = value.ty.rank
        if not (isinstance(dims, tuple) and sorted(d % rank if isinstance(d, int) else d for d in dims) == list(range(rank))):
            self.fail("BT0308", dims_node, f"`permute` takes a constant ordering of the axes 0..{rank - 1}")
        perm = tuple(d % rank for d in dims)
        return ir.Permute(TileT(value.ty.dtype, tuple(value.ty.shape[p] for p in perm)), value=value, perm=perm, src=node)

    def transpose(self, value: ir.Expr, axes, node) -> ir.Expr:
        rank = value.ty.rank
        if axes is None:
            if rank != 2:
                self.fail("BT0308", node, f"`transpose()` without axes swaps the two axes of a 2-D tile; this one has rank {rank}",
                          help="name the axes: transpose(t, 0, 2), or use permute")
            a0, a1 = 0, 1
        else:
            if len(axes) != 2:
                self.fail("BT0308", node, "`transpose` takes two axes")
            a0, a1 = (self.const_int(a, "an axis") for a in axes)
            if not (-rank <= a0 < rank and -rank <= a1 < rank):
                self.fail("BT0308", node, f"axes out of range for a tile of rank {rank}")
            a0, a1 = a0 % rank, a1 % rank
        perm = list(range(rank))
        perm[a0], perm[a1] = perm[a1], perm[a0]
        return ir.Permute(TileT(value.ty.dtype, tuple(value.ty.shape[p] for p in perm)), value=value, perm=tuple(perm),
                          src=node)

    def reduce(self, op: str, value: ir.Expr, axis_node, keep_node, node) -> ir.Expr:
        if not isinstance(value.ty, TileT):
            self.type_mismatch(node, f"`{op}`", "a tile", value.ty)
        if value.ty.dtype == BOOL:
            self.type_mismatch(node, f"`{op}`", "numbers", value.ty.dtype, help="convert with .astype(i32) first")
        rank = value.ty.rank
        keep = False if keep_node is None else self.const(keep_node)
        if not isinstance(keep, bool):
            self.fail("BT0308", keep_node, "`keepdims` is True or False")
        if axis_node is None or (isinstance(axis_node, ast.Constant) and axis_node.value is None):
            axes = list(range(rank))
        else:
            axis = self.const_int(axis_node, "the axis")
            if not -rank <= axis < rank:
                self.fail("BT0308", axis_node, f"axis {axis} is out of range for a tile of rank {rank}",
                          label=f"`{op}` of a tile of shape {value.ty.shape}",
                          help=f"its axes are 0 to {rank - 1} (or -{rank} to -1 from the end)" if rank
                          else "a tile of rank 0 has no axis to reduce; leave `axis` out")
            axes = [axis % rank]
        value = self.reduce_axes(op, value, axes, node)
        if keep:
            for axis in sorted(axes):
                shape = value.ty.shape[:axis] + (1,) + value.ty.shape[axis:]
                value = ir.ExpandDims(TileT(value.ty.dtype, shape), value=value, axis=axis, src=node)
        return value

    def reduce_axes(self, op: str, value: ir.Expr, axes: list[int], node) -> ir.Reduce:
        """One reduction along one axis; over every axis, one reduction of the tile flattened in
        row-major order (an index reduction gives the position in it, as NumPy's; a 16-bit
        value is rounded once, not after each axis)."""
        if len(axes) != 1:
            value = ir.Reshape(TileT(value.ty.dtype, (value.ty.size,)), value=value, src=node)
            axes = [0]
        (axis,) = axes
        dtype = ir.INDEX_DTYPE if op in ir.INDEX_REDUCTIONS else value.ty.dtype
        shape = value.ty.shape[:axis] + value.ty.shape[axis + 1:]
        return ir.Reduce(TileT(dtype, shape), op=op, value=value, axis=axis, src=node)
