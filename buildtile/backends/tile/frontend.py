"""Stage 1: a tile kernel's Python AST -> typed tile IR, for one specialization.

The specialization fixes every ``tile.Out`` parameter's tile shape, so all
tile shapes are constants here: literals, module constants, ``tile_shape``
entries and locals bound once to those (folded by :meth:`_Typer.const`).
Scalars follow the SIMT rules (weak literals take the type they meet); a
scalar meeting a tile takes the tile's dtype. Tile operands must agree on
dtype (``astype`` converts) and broadcast NumPy-style. Errors are collected
as diagnostics, never raised mid-walk.
"""

from __future__ import annotations

import ast
import math
import operator
from collections import Counter

from buildtile.backend import KernelSource
from buildtile.backends.simt.frontend import module_constants
from buildtile.backends.tile import ir
from buildtile.backends.tile.types import (
    BOOL,
    F32,
    F64,
    I32,
    I64,
    MMA_DTYPES,
    SCALARS,
    TILE_DTYPES,
    WEAK_FLOAT,
    WEAK_INT,
    ArrayT,
    Scalar,
    ShapeT,
    TileIdT,
    TileT,
    Weak,
    is_pow2,
    value_type,
)
from buildtile.diagnostics import Diagnostic, Span
from buildtile.discovery import resolve_dotted

TILE_MODULE = "buildtile.tile"
TYPES_MODULE = "buildtile.types"

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
           ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_FOLD = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
         "//": operator.floordiv, "%": operator.mod, "&": operator.and_, "|": operator.or_, "^": operator.xor}

#: elementwise math: name -> arity; the float-only ones compute f16/bf16 in f32 and round
MATH = {"exp": 1, "exp2": 1, "log": 1, "log2": 1, "sqrt": 1, "rsqrt": 1, "abs": 1, "tanh": 1, "sin": 1,
        "cos": 1, "erf": 1, "floor": 1, "ceil": 1, "sigmoid": 1, "maximum": 2, "minimum": 2, "pow": 2}
INT_MATH = {"abs", "maximum", "minimum"}
REDUCTIONS = ("sum", "max", "min")
#: the most elements one tile may have (registers: 128 f32 per thread at 256 threads, as a
#: 128 x 256 mma accumulator takes)
MAX_TILE_ELEMENTS = 1 << 15
_CONST_NAMES = {"math.inf": math.inf, "math.nan": math.nan, "math.pi": math.pi, "math.e": math.e}


class _Abort(Exception):
    """Stops typing one statement after its diagnostic was recorded."""


def build_typed_ir(source: KernelSource, tile_shapes: dict[str, tuple[int, ...]]):
    """Type a kernel for one specialization; returns (KernelIR or None, diagnostics)."""
    typer = _Typer(source, tile_shapes)
    kernel = typer.run()
    return (None if typer.diagnostics else kernel), typer.diagnostics


def parse_param_type(annotation: ast.AST | None, namespace: dict[str, str]):
    """The IR type of a tile kernel parameter annotation, or a message saying why not."""
    if annotation is None:
        return None, "parameter has no type annotation"
    if isinstance(annotation, ast.Subscript):
        kind = resolve_dotted(annotation.value, namespace)
        if kind not in (TYPES_MODULE + ".Tensor", TILE_MODULE + ".Out"):
            return None, (f"`{ast.unparse(annotation.value)}` is not a tile kernel parameter kind "
                          "(tile kernels take Tensor inputs, tile.Out outputs and scalars)")
        short = "tile.Out" if kind.endswith(".Out") else "Tensor"
        args = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        elem = scalar_type(args[0], namespace)
        if elem is None or elem.name not in TILE_DTYPES:
            return None, f"`{ast.unparse(args[0])}` is not a tile element type ({', '.join(TILE_DTYPES)})"
        if len(args) != 2 or not (isinstance(args[1], ast.Constant) and args[1].value in (1, 2, 3)):
            return None, f"`{short}` takes an element type and a rank of 1, 2 or 3"
        return ArrayT(elem, args[1].value, is_out=short == "tile.Out"), None
    scalar = scalar_type(annotation, namespace)
    if scalar is None:
        return None, f"`{ast.unparse(annotation)}` is not a buildtile type"
    return scalar, None


def scalar_type(node: ast.AST, namespace: dict[str, str]) -> Scalar | None:
    name = resolve_dotted(node, namespace)
    if name and name.startswith(TYPES_MODULE + "."):
        return SCALARS.get(name.rsplit(".", 1)[-1])
    return None


def out_params(fn: ast.FunctionDef, namespace: dict[str, str]) -> list[tuple[str, int]]:
    """``(name, rank)`` of every ``tile.Out`` parameter, in order (for specializations)."""
    outs = []
    for a in fn.args.args:
        ty, _ = parse_param_type(a.annotation, namespace)
        if isinstance(ty, ArrayT) and ty.is_out:
            outs.append((a.arg, ty.rank))
    return outs


def _assignment_counts(fn: ast.FunctionDef) -> Counter:
    counts: Counter = Counter()
    for node in ast.walk(fn):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = [node.target]
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    counts[n.id] += 1
    return counts


class _Typer:
    def __init__(self, source: KernelSource, tile_shapes: dict[str, tuple[int, ...]]) -> None:
        self.src = source
        self.ns = source.namespace
        self.consts = module_constants(source.module_ast)
        self.tile_shapes = tile_shapes
        self.diagnostics: list[Diagnostic] = []
        self.params: dict[str, ir.Param] = {}
        self.locals: dict[str, object] = {}
        self.const_locals: dict[str, object] = {}
        self.poisoned: set[str] = set()
        self.counts = _assignment_counts(source.node)

    # ------------------------------------------------------------ reporting
    def error(self, code: str, node: ast.AST, message: str, label: str = "", help: str = "") -> None:
        span = Span.of(node, self.src.display_file, self.src.lines)
        self.diagnostics.append(Diagnostic(code, message, span, label=label, help=help))

    def fail(self, code: str, node: ast.AST, message: str, label: str = "", help: str = ""):
        self.error(code, node, message, label, help)
        raise _Abort

    def mismatch(self, node, what: str, expected, found, help: str = ""):
        self.fail("BT0308", node, "mismatched types", label=f"{what}: expected {expected}, found {found}", help=help)

    # ------------------------------------------------------------ kernel
    def run(self) -> ir.KernelIR:
        fn = self.src.node
        args = fn.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            self.error("BT0200", fn, "kernels take plain positional parameters only",
                       help="remove *args, **kwargs, keyword-only parameters and defaults")
        params = []
        for a in args.args:
            ty, why = parse_param_type(a.annotation, self.ns)
            if ty is None:
                self.error("BT0308", a.annotation or a, f"bad type for parameter `{a.arg}`: {why}",
                           help="annotate it with a scalar (f32, i64, ...), Tensor[T, rank] or tile.Out[T, rank]")
                continue
            p = ir.Param(a.arg, ty, a)
            self.params[a.arg] = p
            params.append(p)
        outs = [p for p in params if isinstance(p.ty, ArrayT) and p.ty.is_out]
        if not outs and not self.diagnostics:
            self.error("BT0308", fn, f"tile kernel `{fn.name}` has no tile.Out parameter",
                       help="a tile kernel writes its results into a tile.Out[T, rank] parameter, "
                            "whose partition fixes the grid")
        if len({p.ty.rank for p in outs}) > 1:
            self.error("BT0308", fn, "the tile.Out parameters of one kernel must have the same rank",
                       help="they share one grid of tiles")
        if fn.returns is not None and not (isinstance(fn.returns, ast.Constant) and fn.returns.value is None):
            self.error("BT0308", fn.returns, "kernels return nothing", help="store results into a tile.Out parameter")
        body = self.block(fn.body)
        shapes = {p.name: tuple(self.tile_shapes.get(p.name, ())) for p in outs}
        return ir.KernelIR(fn.name, params, dict(self.locals), body, shapes)

    # ------------------------------------------------------------ statements
    def block(self, stmts: list[ast.stmt]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for stmt in stmts:
            try:
                result = self.stmt(stmt)
            except _Abort:
                self.poisoned |= {n.id for t in _targets(stmt) for n in ast.walk(t)
                                  if isinstance(n, ast.Name) and n.id not in self.locals}
                continue
            out.extend(r for r in (result if isinstance(result, list) else [result]) if r is not None)
        return out

    def stmt(self, node: ast.stmt):
        method = getattr(self, "stmt_" + type(node).__name__, None)
        if method is None:
            self.fail("BT0200", node, f"`{type(node).__name__}` statements are not supported in tile kernels",
                      help=_UNSUPPORTED_HELP.get(type(node).__name__, "see the Tile language reference (DESIGN §3)"))
        return method(node)

    def stmt_Pass(self, node):
        return None

    def stmt_Expr(self, node: ast.Expr):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None  # docstring
        call = node.value
        if isinstance(call, ast.Call):
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr == "store" and isinstance(func.value, ast.Name) \
                    and func.value.id in self.params:
                return self.store_method(call, self.params[func.value.id])
            if resolve_dotted(func, self.ns) == TILE_MODULE + ".store":
                return self.store_call(call)
        self.expr(node.value)
        self.fail("BT0200", node, "expression statement has no effect",
                  help="assign the value to a name, or store it with `z.store(t)`")

    def stmt_Assign(self, node: ast.Assign):
        if len(node.targets) != 1:
            self.fail("BT0200", node, "chained assignment is not supported", help="assign one target at a time")
        target = node.targets[0]
        if isinstance(target, ast.Tuple):
            if not (isinstance(node.value, ast.Tuple) and len(node.value.elts) == len(target.elts)):
                folded = self.const(node.value)
                if isinstance(folded, tuple) and len(folded) == len(target.elts):
                    return [self.bind_const(t, v, node) for t, v in zip(target.elts, folded)]
                self.fail("BT0200", target, "tuple assignment needs a tuple of the same length on the right")
            return [self.assign(t, v, node) for t, v in zip(target.elts, node.value.elts)]
        return self.assign(target, node.value, node)

    def stmt_AugAssign(self, node: ast.AugAssign):
        if not isinstance(node.target, ast.Name):
            self.fail("BT0200", node.target, "only a plain name can be updated in place")
        synthetic = ast.BinOp(left=ast.Name(id=node.target.id, ctx=ast.Load()), op=node.op, right=node.value)
        ast.copy_location(synthetic, node)
        ast.copy_location(synthetic.left, node.target)
        synthetic.end_lineno, synthetic.end_col_offset = node.end_lineno, node.end_col_offset
        synthetic.left.end_lineno, synthetic.left.end_col_offset = node.target.end_lineno, node.target.end_col_offset
        return self.assign(node.target, synthetic, node)

    def assign(self, target: ast.AST, value_node: ast.AST, node: ast.stmt):
        if not isinstance(target, ast.Name):
            if isinstance(target, ast.Subscript):
                self.fail("BT0200", target, "tile kernels do not assign single elements",
                          help="build the whole tile and write it with `z.store(t)`")
            self.fail("BT0200", target, "cannot assign to this expression")
        name = target.id
        self.check_assignable(target)
        if self.counts[name] == 1:
            folded = self.const(value_node)
            if folded is not None:
                return self.bind_const(target, folded, node)
        return self.bind(target, self.expr(value_node), node)

    def check_assignable(self, target: ast.Name) -> None:
        name = target.id
        if name in self.params:
            self.fail("BT0594", target, f"cannot assign to parameter `{name}`",
                      label=f"`{name}` is a {self.params[name].ty}",
                      help="bind the value to a new local name")
        if name in self.consts or name in self.ns:
            self.fail("BT0308", target, f"cannot assign to `{name}`: it names a module-level constant or import",
                      help="use a different local name")

    def bind_const(self, target: ast.AST, value, node: ast.stmt):
        if not isinstance(target, ast.Name):
            self.fail("BT0200", target, "cannot assign to this expression")
        self.check_assignable(target)
        self.const_locals[target.id] = value

    def bind(self, target: ast.Name, value: ir.Expr, node: ast.stmt) -> ir.Assign:
        name = target.id
        ty = value.ty
        if isinstance(ty, (ArrayT, ShapeT)):
            self.fail("BT0308", node, f"`{name}` cannot hold a value of type {ty}",
                      help="use the parameter directly")
        if isinstance(ty, Weak):
            value = self.coerce(value, ty.default, node)
            ty = value.ty
        if isinstance(ty, TileIdT) and self.counts[name] != 1:
            ty = I64   # a name that is reassigned no longer proves ownership
        existing = self.locals.get(name)
        if existing is None:
            self.locals[name] = ty
            return ir.Assign(name=name, value=value, src=node)
        if isinstance(existing, TileT) or isinstance(ty, TileT):
            if existing != ty:
                self.mismatch(node, f"`{name}`", existing, ty,
                              help="a name keeps one tile type (dtype and shape); use a new name or .astype()")
            return ir.Assign(name=name, value=value, src=node)
        return ir.Assign(name=name, value=self.coerce(value, value_type(existing), node), src=node)

    def stmt_If(self, node: ast.If):
        cond = self.expr(node.test)
        if cond.ty != BOOL:
            if isinstance(cond.ty, TileT):
                self.fail("BT0308", node.test, "a condition is a scalar, not a tile",
                          help="choose per element with `tile.where(cond, a, b)`")
            self.mismatch(node.test, "a condition", "bool", cond.ty, help="compare explicitly, e.g. `n > 0`")
        return ir.If(cond=cond, then=self.block(node.body), orelse=self.block(node.orelse), src=node)

    def stmt_For(self, node: ast.For):
        if node.orelse:
            self.fail("BT0200", node, "`for ... else` is not supported")
        it = node.iter
        is_range = isinstance(it, ast.Call) and (
            resolve_dotted(it.func, self.ns) == TILE_MODULE + ".range"
            or (isinstance(it.func, ast.Name) and it.func.id == "range" and "range" not in self.ns))
        if not is_range or it.keywords or not 1 <= len(it.args) <= 3:
            self.fail("BT0200", it, "tile kernels loop only over `tile.range(...)`",
                      help="write `for k in tile.range(n)` or `tile.range(start, stop, step)`")
        if not isinstance(node.target, ast.Name):
            self.fail("BT0200", node.target, "the loop variable must be a plain name")
        bounds = [self.int_scalar(a) for a in it.args[:2]]
        start, stop = (ir.Const(I64, value=0, src=it), bounds[0]) if len(bounds) == 1 else bounds
        step = 1
        if len(it.args) == 3:
            step = self.const(it.args[2])
            if not isinstance(step, int) or isinstance(step, bool) or step <= 0:
                self.fail("BT0308", it.args[2], "the step of `tile.range` is a positive constant integer")
        name = node.target.id
        self.check_assignable(node.target)
        existing = self.locals.get(name)
        if existing is not None and value_type(existing) != I64:
            self.mismatch(node.target, f"`{name}`", existing, I64)
        self.locals[name] = I64
        return ir.ForRange(var=name, start=start, stop=stop, step=step, body=self.block(node.body), src=node)

    # ------------------------------------------------------------ stores
    def store_method(self, call: ast.Call, param: ir.Param):
        if call.keywords or len(call.args) != 1:
            self.fail("BT0308", call, f"`{param.name}.store(t)` takes one tile")
        value = self.expr(call.args[0])
        return self.make_store(param, None, value, call)

    def store_call(self, call: ast.Call):
        args = self.bind_args(call, "tile.store", ["array", "index", "tile"])
        target = args["array"]
        if not (isinstance(target, ast.Name) and target.id in self.params and isinstance(self.params[target.id].ty, ArrayT)):
            self.fail("BT0308", target, "`tile.store` writes into an array parameter")
        param = self.params[target.id]
        index = self.index_list(args["index"], param.ty.rank)
        value = self.expr(args["tile"])
        return self.make_store(param, index, value, call)

    def make_store(self, param: ir.Param, index, value: ir.Expr, call: ast.Call) -> ir.Store:
        ty = param.ty
        if not isinstance(ty, ArrayT):
            self.mismatch(call, "a store target", "an array parameter", ty)
        if ty.is_out:
            shape = self.tile_shapes.get(param.name)
            if shape is None:
                raise _Abort   # the specialization itself is invalid (reported elsewhere)
            value = self.as_tile(value, ty.elem, shape, call, f"the tile stored into `{param.name}`")
        elif isinstance(value.ty, TileT):
            value = self.as_tile(value, ty.elem, value.ty.shape, call, "the stored tile")
        return ir.Store(param=param.name, index=index, value=value, src=call)

    # ------------------------------------------------------------ constants
    def const(self, node: ast.AST):
        """The compile-time value of ``node`` (int, float, bool or a tuple of them), or None."""
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.const_locals:
                return self.const_locals[node.id]
            if node.id in self.locals or node.id in self.params:
                return None
            return self.consts.get(node.id)
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self.const(e) for e in node.elts]
            return tuple(items) if all(i is not None for i in items) else None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = self.const(node.operand)
            return None if v is None or isinstance(v, tuple) else (-v if isinstance(node.op, ast.USub) else v)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            lhs, rhs = self.const(node.left), self.const(node.right)
            if lhs is None or rhs is None or isinstance(lhs, tuple) or isinstance(rhs, tuple):
                return None
            try:
                return _FOLD[_BINOPS[type(node.op)]](lhs, rhs)
            except (ArithmeticError, ValueError):
                return None
        if isinstance(node, ast.Attribute):
            dotted = resolve_dotted(node, self.ns)
            if dotted in _CONST_NAMES:
                return _CONST_NAMES[dotted]
            if node.attr == "tile_shape" and isinstance(node.value, ast.Name) and node.value.id in self.tile_shapes:
                return tuple(self.tile_shapes[node.value.id])
            if node.attr == "shape" and isinstance(node.value, ast.Name) and isinstance(self.locals.get(node.value.id), TileT):
                return self.locals[node.value.id].shape
            return None
        if isinstance(node, ast.Subscript):
            base = self.const(node.value)
            index = self.const(node.slice)
            if isinstance(base, tuple) and isinstance(index, int) and -len(base) <= index < len(base):
                return base[index]
            return None
        if isinstance(node, ast.Call) and not node.keywords:
            dotted = resolve_dotted(node.func, self.ns)
            if isinstance(node.func, ast.Name) and node.func.id == "float" and len(node.args) == 1 \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                try:
                    return float(node.args[0].value)
                except ValueError:
                    return None
            if dotted == TILE_MODULE + ".cdiv" and len(node.args) == 2:
                a, b = self.const(node.args[0]), self.const(node.args[1])
                if isinstance(a, int) and isinstance(b, int) and b:
                    return -(-a // b)
        return None

    def const_shape(self, node: ast.AST, what: str) -> tuple[int, ...]:
        value = self.const(node)
        if isinstance(value, int) and not isinstance(value, bool):
            value = (value,)
        if not (isinstance(value, tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
            self.fail("BT0308", node, f"{what} must be known at compile time",
                      help="use literals, module constants, `z.tile_shape` entries or names bound once to those")
        for v in value:
            if not is_pow2(v):
                self.fail("BT0308", node, f"{what} {value} has an extent that is not a power of two",
                          help="tile extents are powers of two; ragged edges are masked automatically")
        size = math.prod(value)
        if size > MAX_TILE_ELEMENTS:
            self.fail("BT0600", node, f"a tile of {value} has {size} elements, more than the {MAX_TILE_ELEMENTS} "
                      "one block holds in registers", help="use smaller tiles, or loop over the tile with tile.range")
        return value

    def const_int(self, node: ast.AST, what: str) -> int:
        value = self.const(node)
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail("BT0308", node, f"{what} must be a constant integer")
        return value

    # ------------------------------------------------------------ expressions
    def expr(self, node: ast.AST) -> ir.Expr:
        folded = self.const(node) if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Attribute, ast.Subscript)) else None
        if isinstance(folded, (int, float)) and not isinstance(folded, tuple):
            return self.literal(folded, node)
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            self.fail("BT0200", node, f"`{type(node).__name__}` expressions are not supported in tile kernels",
                      help=_UNSUPPORTED_HELP.get(type(node).__name__, "see the Tile language reference (DESIGN §3)"))
        return method(node)

    def literal(self, value, node: ast.AST) -> ir.Const:
        if isinstance(value, bool):
            return ir.Const(BOOL, value=value, src=node)
        if isinstance(value, int):
            return ir.Const(WEAK_INT, value=value, src=node)
        if isinstance(value, float):
            return ir.Const(WEAK_FLOAT, value=value, src=node)
        self.fail("BT0308", node, f"{type(value).__name__} values are not supported in tile kernels")

    def expr_Constant(self, node: ast.Constant):
        return self.literal(node.value, node)

    def expr_Name(self, node: ast.Name):
        name = node.id
        if name in self.poisoned and name not in self.locals:
            raise _Abort
        if name in self.const_locals:
            value = self.const_locals[name]
            if isinstance(value, tuple):
                self.fail("BT0308", node, f"`{name}` is a shape; use it where a shape is expected")
            return self.literal(value, node)
        if name in self.locals:
            return ir.Var(self.locals[name], name=name, src=node)
        if name in self.params:
            p = self.params[name]
            if isinstance(p.ty, ArrayT):
                self.fail("BT0308", node, f"`{name}` is an array ({p.ty}), not a value",
                          help=f"read a tile of it with `tile.load({name}, index, shape)` or `tile.load_like({name}, out)`")
            return ir.ScalarParam(p.ty, name=name, src=node)
        if name in self.consts:
            return self.literal(self.consts[name], node)
        if name in ("True", "False"):
            return ir.Const(BOOL, value=name == "True", src=node)
        self.fail("BT0425", node, f"cannot find value `{name}` in this scope", label="not found",
                  help="kernels see their parameters, their locals and module-level constants")

    def expr_Tuple(self, node: ast.Tuple):
        self.fail("BT0308", node, "a tuple is only a shape or an index here",
                  help="pass it to tile.load / tile.zeros / reshape ..., where a shape or an index is expected")

    def expr_BinOp(self, node: ast.BinOp):
        op = _BINOPS.get(type(node.op))
        if op is None:
            self.fail("BT0200", node, f"operator `{type(node.op).__name__}` is not supported in tile kernels")
        lhs, rhs = self.expr(node.left), self.expr(node.right)
        return self.binop(op, lhs, rhs, node, node.left, node.right)

    def binop(self, op: str, lhs: ir.Expr, rhs: ir.Expr, node, lnode, rnode) -> ir.Expr:
        if isinstance(lhs.ty, TileT) or isinstance(rhs.ty, TileT):
            dtype, shape, (lhs, rhs) = self.elementwise([lhs, rhs], [lnode, rnode], node)
            self.check_op(op, dtype, node)
            return ir.BinOp(TileT(dtype, shape), op=op, lhs=lhs, rhs=rhs, src=node)
        ty = self.unify(lhs, rhs, node)
        if isinstance(ty, Weak):   # literals that did not fold (a division by zero): their defaults
            ty = ty.default
        lhs, rhs = self.coerce(lhs, ty, lnode), self.coerce(rhs, ty, rnode)
        concrete = ty
        if op == "/" and not concrete.is_float:
            lhs, rhs = (ir.Cast(F64, value=self.defaulted(v), src=v.src) for v in (lhs, rhs))
            return ir.BinOp(F64, op="/", lhs=lhs, rhs=rhs, src=node)
        self.check_op(op, concrete, node)
        return ir.BinOp(ty, op=op, lhs=lhs, rhs=rhs, src=node)

    def check_op(self, op: str, dtype: Scalar, node) -> None:
        if dtype == BOOL and op not in ("&", "|", "^"):
            self.mismatch(node, f"operator `{op}`", "numbers", dtype, help="convert with .astype(i32) first")
        if op in ("&", "|", "^") and dtype.is_float:
            self.mismatch(node, f"operator `{op}`", "integers or bools", dtype)
        if op == "/" and not dtype.is_float:
            self.mismatch(node, "true division `/`", "floats", dtype,
                          help="use `//` for integer division, or convert with .astype(f32) first")

    def expr_UnaryOp(self, node: ast.UnaryOp):
        operand = self.expr(node.operand)
        ty = value_type(operand.ty)
        dtype = ty.dtype if isinstance(ty, TileT) else ty
        if isinstance(node.op, ast.UAdd):
            return operand
        if isinstance(node.op, ast.Not):
            if dtype != BOOL:
                self.mismatch(node.operand, "`not`", "bool", ty)
            if isinstance(ty, TileT):
                self.fail("BT0308", node, "`not` applies to scalar conditions", help="use `~mask` for a tile of bools")
            return ir.UnaryOp(BOOL, op="not", operand=operand, src=node)
        if isinstance(node.op, ast.Invert):
            if isinstance(dtype, Weak) and dtype.kind == "int":
                operand, ty, dtype = self.coerce(operand, I64, node), I64, I64
            if dtype != BOOL and not (isinstance(dtype, Scalar) and dtype.is_int):
                self.mismatch(node, "operator `~`", "an integer or bool", ty)
            return ir.UnaryOp(ty, op="~", operand=operand, src=node)
        if dtype == BOOL:
            self.mismatch(node, "unary `-`", "a number", ty)
        return ir.UnaryOp(ty, op="-", operand=operand, src=node)

    def expr_Compare(self, node: ast.Compare):
        if len(node.ops) != 1:
            self.fail("BT0200", node, "chained comparisons are not supported in tile kernels",
                      help="write `a < b and b < c` (scalars) or `(a < b) & (b < c)` (tiles)")
        op = _CMPOPS.get(type(node.ops[0]))
        if op is None:
            self.fail("BT0200", node, "`in`/`is` comparisons are not supported in kernels")
        lhs, rhs = self.expr(node.left), self.expr(node.comparators[0])
        if isinstance(lhs.ty, TileT) or isinstance(rhs.ty, TileT):
            _, shape, (lhs, rhs) = self.elementwise([lhs, rhs], [node.left, node.comparators[0]], node)
            return ir.Compare(TileT(BOOL, shape), op=op, lhs=lhs, rhs=rhs, src=node)
        ty = self.unify(lhs, rhs, node)
        if isinstance(ty, Weak):
            ty = ty.default
        return ir.Compare(BOOL, op=op, lhs=self.coerce(lhs, ty, node.left), rhs=self.coerce(rhs, ty, node.comparators[0]),
                          src=node)

    def expr_BoolOp(self, node: ast.BoolOp):
        values = [self.expr(v) for v in node.values]
        for v, n in zip(values, node.values):
            if v.ty != BOOL:
                if isinstance(v.ty, TileT):
                    self.fail("BT0308", n, "`and`/`or` combine scalar conditions", help="combine tiles of bools with `&` and `|`")
                self.mismatch(n, "a condition", "bool", v.ty)
        return ir.BoolOp(BOOL, op="and" if isinstance(node.op, ast.And) else "or", values=values, src=node)

    def expr_IfExp(self, node: ast.IfExp):
        cond = self.expr(node.test)
        if cond.ty != BOOL:
            self.fail("BT0308", node.test, "`a if cond else b` takes a scalar condition",
                      help="choose per element with `tile.where(cond, a, b)`")
        then, orelse = self.expr(node.body), self.expr(node.orelse)
        if isinstance(then.ty, TileT) or isinstance(orelse.ty, TileT):
            self.fail("BT0308", node, "`a if cond else b` chooses between scalars", help="use `tile.where(cond, a, b)`")
        ty = self.unify(then, orelse, node)
        if isinstance(ty, Weak):
            ty = ty.default
        return ir.Select(ty, cond=cond, then=self.coerce(then, ty, node.body), orelse=self.coerce(orelse, ty, node.orelse),
                         src=node)

    def expr_Attribute(self, node: ast.Attribute):
        base = node.value
        if isinstance(base, ast.Name) and base.id in self.params and isinstance(self.params[base.id].ty, ArrayT):
            if node.attr == "shape":
                return ir.Expr(ShapeT(base.id, self.params[base.id].ty.rank), src=node)
            if node.attr == "tile_shape":
                self.fail("BT0308", node, "`tile_shape` is a shape; index it (`z.tile_shape[0]`) or pass it as a shape",
                          help="only tile.Out parameters have a tile shape")
            self.fail("BT0425", node, f"no attribute `{node.attr}` on `{base.id}` ({self.params[base.id].ty})",
                      help="arrays have `.shape`; outputs also `.tile_shape`, `.tile_id(axis)`, `.num_tiles(axis)`, `.store(t)`")
        dotted = resolve_dotted(node, self.ns)
        if dotted and dotted.startswith(TILE_MODULE + "."):
            self.fail("BT0425", node, f"`{ast.unparse(node)}` is not a value", help="call it: tile functions take arguments")
        value = self.expr(base)
        if isinstance(value.ty, TileT) and node.attr == "T":
            return self.transpose(value, None, node)
        self.fail("BT0425", node, f"no attribute `{node.attr}` on a value of type {value.ty}",
                  help="tiles have .astype(), .reshape(), .permute(), .transpose(), .T, .sum/.max/.min(), .shape")

    def expr_Subscript(self, node: ast.Subscript):
        base = node.value
        if isinstance(base, ast.Attribute) and base.attr == "shape" and isinstance(base.value, ast.Name) \
                and base.value.id in self.params and isinstance(self.params[base.value.id].ty, ArrayT):
            rank = self.params[base.value.id].ty.rank
            axis = self.const(node.slice)
            if not isinstance(axis, int) or isinstance(axis, bool) or not -rank <= axis < rank:
                self.fail("BT0308", node.slice, f"`.shape` takes a constant axis in 0..{rank - 1}")
            return ir.Shape(I64, param=base.value.id, axis=axis % rank, src=node)
        if isinstance(base, ast.Name) and base.id in self.params:
            self.fail("BT0200", node, "tile kernels do not index single elements of arrays",
                      help=f"load a tile: `tile.load({base.id}, index, shape)`")
        value = self.expr(base)
        if not isinstance(value.ty, TileT):
            self.fail("BT0308", node, f"a value of type {value.ty} cannot be indexed")
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return self.index_tile(value, items, node)

    def index_tile(self, value: ir.Expr, items: list[ast.AST], node) -> ir.Expr:
        """``t[:, None]``, ``t[None, :]``, ``t[..., None]``: new axes of extent 1."""
        rank = value.ty.rank
        plain = [i for i in items if not (isinstance(i, ast.Constant) and i.value in (None, Ellipsis))]
        if any(not (isinstance(i, ast.Slice) and i.lower is None and i.upper is None and i.step is None) for i in plain):
            self.fail("BT0200", node, "tiles are indexed only to add axes (`t[:, None]`)",
                      help="select parts of an array with tile.load; combine elements with tile.where and reductions")
        ellipses = [k for k, i in enumerate(items) if isinstance(i, ast.Constant) and i.value is Ellipsis]
        if len(ellipses) > 1 or len(plain) > rank:
            self.fail("BT0308", node, f"too many indices for a tile of rank {rank}")
        if ellipses:
            k = ellipses[0]
            items = items[:k] + [ast.Slice()] * (rank - len(plain)) + items[k + 1:]
        else:
            items = items + [ast.Slice()] * (rank - len(plain))
        for axis, item in enumerate(items):
            if isinstance(item, ast.Constant) and item.value is None:
                shape = value.ty.shape[:axis] + (1,) + value.ty.shape[axis:]
                value = ir.ExpandDims(TileT(value.ty.dtype, shape), value=value, axis=axis, src=node)
        return value

    # ------------------------------------------------------------ calls
    def expr_Call(self, node: ast.Call):
        func = node.func
        dotted = resolve_dotted(func, self.ns)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.params \
                and isinstance(self.params[func.value.id].ty, ArrayT):
            return self.array_method(node, self.params[func.value.id], func.attr)
        if dotted and dotted.startswith(TILE_MODULE + "."):
            return self.tile_call(node, dotted[len(TILE_MODULE) + 1:])
        if dotted and dotted.startswith(TYPES_MODULE + "."):
            return self.cast_call(node, dotted)
        if dotted and dotted.startswith("math."):
            name = {"fabs": "abs"}.get(dotted[5:], dotted[5:])
            if name not in MATH:
                self.fail("BT0425", func, f"`{dotted}` is not available in tile kernels",
                          help=f"available: {', '.join(sorted(MATH))} (as tile.<name>)")
            return self.math_call(node, name)
        if isinstance(func, ast.Name) and func.id not in self.ns and func.id not in self.locals:
            if func.id in ("min", "max", "abs"):
                return self.math_call(node, {"min": "minimum", "max": "maximum"}.get(func.id, func.id))
            if func.id == "len":
                if len(node.args) != 1 or not (isinstance(node.args[0], ast.Name) and node.args[0].id in self.params
                                               and isinstance(self.params[node.args[0].id].ty, ArrayT)):
                    self.fail("BT0308", node, "`len()` takes one array parameter")
                return ir.Shape(I64, param=node.args[0].id, axis=0, src=node)
        if isinstance(func, ast.Attribute):
            value = self.expr(func.value)
            if isinstance(value.ty, TileT):
                return self.tile_method(node, value, func.attr)
            self.fail("BT0425", func, f"no method `{func.attr}` on a value of type {value.ty}")
        self.fail("BT0425", func, f"cannot find function `{ast.unparse(func)}` for tile kernels",
                  help="tile kernels call tile.* operations, casts (f32(x)) and math functions")

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

    def array_method(self, node: ast.Call, param: ir.Param, method: str):
        ty = param.ty
        if method == "store":
            self.fail("BT0200", node, f"`{param.name}.store(...)` is a statement", help="write it on its own line")
        if method in ("tile_id", "num_tiles"):
            if not ty.is_out:
                self.fail("BT0425", node.func, f"`{param.name}` is a Tensor input, which has no tiles",
                          help=f"`{method}` is a method of tile.Out parameters")
            args = self.bind_args(node, f"{param.name}.{method}", ["axis"])
            axis = self.const_int(args["axis"], "the axis")
            if not -ty.rank <= axis < ty.rank:
                self.fail("BT0308", args["axis"], f"`{param.name}` has rank {ty.rank}; axis {axis} is out of range")
            axis %= ty.rank
            if method == "tile_id":
                return ir.TileId(TileIdT(param.name, axis), param=param.name, axis=axis, src=node)
            return ir.NumTiles(I64, param=param.name, axis=axis, src=node)
        self.fail("BT0425", node.func, f"no method `{method}` on `{param.name}` ({ty})",
                  help="outputs have .tile_id(axis), .num_tiles(axis), .store(t); arrays have .shape")

    def cast_call(self, node: ast.Call, dotted: str):
        target = SCALARS.get(dotted.rsplit(".", 1)[-1])
        if target is None or len(node.args) != 1 or node.keywords:
            self.fail("BT0308", node, f"`{ast.unparse(node.func)}(x)` is not a cast")
        value = self.expr(node.args[0])
        if isinstance(value.ty, TileT):
            return self.astype(value, target, node)
        if isinstance(value.ty, Weak):
            return self.coerce(value, target, node) if not (value.ty.kind == "float" and not target.is_float) \
                else ir.Cast(target, value=self.defaulted(value), src=node)
        if not isinstance(value_type(value.ty), Scalar):
            self.mismatch(node.args[0], "a cast", "a scalar", value.ty)
        return ir.Cast(target, value=value, src=node)

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
                  help="tiles have .astype(), .reshape(), .permute(), .transpose(), .sum/.max/.min()")

    def dtype_arg(self, node: ast.AST) -> Scalar:
        ty = scalar_type(node, self.ns)
        if ty is None or ty.name not in TILE_DTYPES:
            self.fail("BT0308", node, f"`{ast.unparse(node)}` is not a tile element type",
                      help=f"tiles hold {', '.join(TILE_DTYPES)} (import them from buildtile.types)")
        return ty

    # tile.load(x, index, shape, padding=0)
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

    # tile.load_like(x, z, padding=0)
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
            raise _Abort
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
            self.mismatch(node, "the padding", elem, "a float")
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
            self.mismatch(node, "an index", "an integer scalar", value.ty)
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
                self.mismatch(args["value"], "the fill value", "a scalar", scalar.ty)
            return ir.Splat(TileT(dtype, shape), value=self.scalar_as(scalar, dtype, args["value"]), src=node)
        if isinstance(value, float) and not dtype.is_float:
            self.mismatch(args["value"], "the fill value", dtype, "a float")
        return self.full(shape, value, dtype, node)

    def full(self, shape, value, dtype: Scalar, node) -> ir.Full:
        value = bool(value) if dtype == BOOL else (float(value) if dtype.is_float else int(value))
        return ir.Full(TileT(dtype, shape), value=value, src=node)

    def call_arange(self, node: ast.Call):
        args = self.bind_args(node, "tile.arange", ["n", "dtype"], {"dtype": None})
        (n,) = self.const_shape(args["n"], "the length of `tile.arange`")
        dtype = I32 if args["dtype"] is None else self.dtype_arg(args["dtype"])
        if dtype == BOOL:
            self.mismatch(args["dtype"], "tile.arange", "a number type", dtype)
        return ir.Arange(TileT(dtype, (n,)), src=node)

    def call_where(self, node: ast.Call):
        args = self.bind_args(node, "tile.where", ["cond", "x", "y"])
        cond, a, b = (self.expr(args[k]) for k in ("cond", "x", "y"))
        cond_dtype = cond.ty.dtype if isinstance(cond.ty, TileT) else cond.ty
        if cond_dtype != BOOL:
            self.mismatch(args["cond"], "the condition of tile.where", "bools", cond.ty)
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
            self.mismatch(args["tile"], "tile.astype", "a tile", value.ty, help="cast scalars with f32(x)")
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
                self.mismatch(args[key], f"operand `{key}` of tile.mma", "a 2-D tile of f16 or bf16", v.ty)
        if a.ty.dtype != b.ty.dtype:
            self.mismatch(node, "the operands of tile.mma", a.ty.dtype, b.ty.dtype, help="convert one with .astype()")
        (m, k), (k2, n) = a.ty.shape, b.ty.shape
        if k != k2:
            self.fail("BT0308", node, f"tile.mma of mismatched K: a is {m} x {k} but b is {k2} x {n}",
                      label="a's columns must equal b's rows")
        if acc.ty != TileT(F32, (m, n)):
            self.mismatch(args["acc"], "the accumulator of tile.mma", TileT(F32, (m, n)), acc.ty,
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
            self.mismatch(node, what, "a tile", value.ty)
        return value

    # ------------------------------------------------------------ tile operations
    def math_call(self, node: ast.Call, name: str):
        arity = MATH[name]
        if node.keywords or len(node.args) != arity:
            self.fail("BT0308", node, f"`{name}` takes {arity} argument{'s' if arity > 1 else ''}")
        values = [self.expr(a) for a in node.args]
        if any(isinstance(v.ty, TileT) for v in values):
            dtype, shape, values = self.elementwise(values, node.args, node)
            ty = TileT(dtype, shape)
        else:
            ty = values[0].ty if len(values) == 1 else self.unify(values[0], values[1], node)
            ty = value_type(ty)
            if isinstance(ty, Weak):
                ty = F32 if name not in INT_MATH else ty.default
            values = [self.coerce(v, ty, n) for v, n in zip(values, node.args)]
            dtype = ty
        if dtype == BOOL or not (dtype.is_float or name in INT_MATH):
            self.mismatch(node, f"`{name}`", "floats", dtype, help="convert with .astype(f32) first")
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
            self.mismatch(node, f"`{op}`", "a tile", value.ty)
        if value.ty.dtype == BOOL:
            self.mismatch(node, f"`{op}`", "numbers", value.ty.dtype, help="convert with .astype(i32) first")
        rank = value.ty.rank
        keep = False if keep_node is None else self.const(keep_node)
        if not isinstance(keep, bool):
            self.fail("BT0308", keep_node, "`keepdims` is True or False")
        if axis_node is None or (isinstance(axis_node, ast.Constant) and axis_node.value is None):
            axes = list(range(rank))
        else:
            axis = self.const_int(axis_node, "the axis")
            if not -rank <= axis < rank:
                self.fail("BT0308", axis_node, f"axis {axis} is out of range for a tile of rank {rank}")
            axes = [axis % rank]
        for axis in sorted(axes, reverse=True):
            shape = value.ty.shape[:axis] + value.ty.shape[axis + 1:]
            value = ir.Reduce(TileT(value.ty.dtype, shape), op=op, value=value, axis=axis, src=node)
        if keep:
            for axis in sorted(axes):
                shape = value.ty.shape[:axis] + (1,) + value.ty.shape[axis:]
                value = ir.ExpandDims(TileT(value.ty.dtype, shape), value=value, axis=axis, src=node)
        return value

    # ------------------------------------------------------------ broadcasting and types
    def elementwise(self, values: list[ir.Expr], nodes: list[ast.AST], node) -> tuple[Scalar, tuple, list[ir.Expr]]:
        """Operands of an elementwise operation: one dtype, broadcast to one shape."""
        tiles = [v for v in values if isinstance(v.ty, TileT)]
        dtype = tiles[0].ty.dtype
        for v in tiles[1:]:
            if v.ty.dtype != dtype:
                self.mismatch(node, "the operands", f"tiles of {dtype}", f"a tile of {v.ty.dtype}",
                              help="convert one of them with .astype(...)")
        shape = self.broadcast_shapes([v.ty.shape for v in tiles], node)
        out = []
        for v, n in zip(values, nodes):
            if not isinstance(v.ty, TileT):
                v = ir.Splat(TileT(dtype, ()), value=self.scalar_as(v, dtype, n), src=n)
            out.append(self.broadcast_to(v, shape))
        return dtype, shape, out

    def broadcast_shapes(self, shapes: list[tuple], node) -> tuple[int, ...]:
        rank = max(len(s) for s in shapes)
        result = []
        for axis in range(rank):
            extents = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0} - {1}
            if len(extents) > 1:
                self.fail("BT0308", node, "tile shapes do not broadcast: "
                          + " and ".join(str(tuple(s)) for s in shapes),
                          help="extents must be equal or 1 along each axis; add axes with `t[:, None]`")
            result.append(extents.pop() if extents else 1)
        return tuple(result)

    def broadcast_to(self, value: ir.Expr, shape: tuple[int, ...]) -> ir.Expr:
        while value.ty.rank < len(shape):
            value = ir.ExpandDims(TileT(value.ty.dtype, (1,) + value.ty.shape), value=value, axis=0, src=value.src)
        if value.ty.shape != shape:
            value = ir.Broadcast(TileT(value.ty.dtype, shape), value=value, src=value.src)
        return value

    def as_tile(self, value: ir.Expr, dtype: Scalar, shape: tuple, node, what: str) -> ir.Expr:
        if not isinstance(value.ty, TileT):
            return ir.Splat(TileT(dtype, shape), value=self.scalar_as(value, dtype, node), src=node)
        if value.ty.dtype != dtype:
            self.mismatch(node, what, f"a tile of {dtype}", value.ty, help=f"convert it with .astype({dtype})")
        padded = (1,) * (len(shape) - value.ty.rank) + tuple(value.ty.shape)
        if len(padded) != len(shape) or any(v not in (1, n) for v, n in zip(padded, shape)):
            self.fail("BT0308", node, f"{what} has shape {tuple(value.ty.shape)}, but the tile is {tuple(shape)}",
                      help="a store writes exactly one tile of the output's partition")
        return self.broadcast_to(value, tuple(shape))

    def scalar_as(self, value: ir.Expr, dtype: Scalar, node) -> ir.Expr:
        """A scalar meeting a tile of ``dtype`` takes that dtype (a float never becomes an integer)."""
        vt = value_type(value.ty)
        if isinstance(vt, Weak):
            return self.coerce(value, dtype, node)
        if vt == dtype:
            return value
        if (vt.is_float and not dtype.is_float) or vt == BOOL or dtype == BOOL:
            self.mismatch(node, "this scalar", dtype, vt, help=f"cast it explicitly: `{dtype}(...)`")
        return ir.Cast(dtype, value=value, src=node)

    def unify(self, lhs: ir.Expr, rhs: ir.Expr, node):
        lt, rt = value_type(lhs.ty), value_type(rhs.ty)
        for side in (lt, rt):
            if not isinstance(side, (Scalar, Weak)):
                self.mismatch(node, "this operation", "scalars or tiles", side)
        if lt == rt:
            return lt
        if isinstance(lt, Weak) and isinstance(rt, Weak):
            return WEAK_FLOAT
        if isinstance(lt, Weak) or isinstance(rt, Weak):
            weak, strong = (lt, rt) if isinstance(lt, Weak) else (rt, lt)
            if (weak.kind == "float" and not strong.is_float) or strong == BOOL:
                self.mismatch(node, "this operation", str(strong), weak, help="cast explicitly, e.g. `f32(...)`")
            return strong
        self.mismatch(node, "this operation", str(lt), rt, help=f"cast one side explicitly, e.g. `{lt}(...)`")

    def coerce(self, value: ir.Expr, ty, node) -> ir.Expr:
        vt = value_type(value.ty)
        if isinstance(ty, Weak) or vt == ty:
            return value
        if isinstance(vt, Weak) and isinstance(value, ir.Const):
            if (vt.kind == "float" and not ty.is_float) or ty == BOOL:
                self.mismatch(node, "this value", str(ty), vt)
            return ir.Const(ty, value=float(value.value) if ty.is_float else int(value.value), src=value.src)
        self.mismatch(node, "this value", str(ty), vt, help=f"cast explicitly: `{ty}(...)`")

    def defaulted(self, value: ir.Expr) -> ir.Expr:
        return self.coerce(value, value.ty.default, value.src) if isinstance(value.ty, Weak) else value


def _targets(stmt: ast.stmt) -> list[ast.AST]:
    if isinstance(stmt, ast.Assign):
        return list(stmt.targets)
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For)):
        return [stmt.target]
    return []


_UNSUPPORTED_HELP = {
    "While": "loop with `for k in tile.range(n)`",
    "Return": "a tile kernel runs to its end; guard work with `if` instead",
    "Break": "loops run their whole range; use tile.where to mask work",
    "Continue": "loops run their whole range; use tile.where to mask work",
    "FunctionDef": "define kernels at module level",
    "Lambda": "write the expression inline",
    "ListComp": "tile kernels have no lists; use tile operations",
    "List": "tile kernels have no lists; tuples are shapes and indices",
    "Dict": "tile kernels have no dicts",
    "Try": "kernels have no exceptions",
    "Raise": "kernels have no exceptions",
    "With": "tile kernels have no shared memory or unsafe blocks: the compiler manages memory",
    "Import": "import at module level",
    "ImportFrom": "import at module level",
    "JoinedStr": "kernels have no strings",
    "AnnAssign": "write `x = value`; tile types are inferred",
}
