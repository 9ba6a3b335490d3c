"""Stage 1: a kernel's Python AST -> typed IR.

Types are inferred per local variable. Literals are weakly typed (they take
the type of what they meet); a variable that only ever held literals is
refined by its later uses, found by re-running inference until the types
settle. Errors are collected as diagnostics, never raised mid-walk, so one
build reports every problem of a kernel.
"""

from __future__ import annotations

import ast
import difflib
import operator
from dataclasses import dataclass

from buildtile.backend import KernelSource
from buildtile.discovery import resolve_dotted
from buildtile.diagnostics import Diagnostic, Span
from buildtile.backends.simt import ir
from buildtile.backends.simt.types import (
    BOOL, F32, F64, I32, I64, SCALARS, U32, Scalar, ShapeT, SharedT, SliceT, TensorT, Weak,
    VOID, WEAK_FLOAT, WEAK_INT, WitnessT, WitnessTupleT, value_type,
)

SIMT_MODULE = "buildtile.simt"
TYPES_MODULE = "buildtile.types"

_PARAM_KINDS = {
    "Slice": ("slice", "read"),
    "DisjointSlice": ("slice", "disjoint"),
    "AtomicSlice": ("slice", "atomic"),
    "Tensor": ("tensor", "read"),
    "DisjointTensor": ("tensor", "disjoint"),
}

_BINOPS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
    ast.Mod: "%", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
    ast.LShift: "<<", ast.RShift: ">>",
}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_FOLD = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "&": operator.and_, "|": operator.or_,
    "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
}

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

_GEOMETRY = {"thread_idx", "block_idx", "block_dim", "grid_dim"}


class _Abort(Exception):
    """Stops typing one expression after its diagnostic was recorded."""


@dataclass
class _Local:
    ty: object
    witness: bool = False   # bound to a ThreadIndex witness: immutable


def build_typed_ir(source: KernelSource) -> tuple[ir.KernelIR | None, list[Diagnostic]]:
    """Type a kernel; returns its IR (None on errors) and its diagnostics."""
    table = _DeviceFunctions(source)
    kernel, diags = _type_until_settled(lambda refined: _KernelTyper(source, refined, table))
    for name in table.defs:      # report errors in every device function, called or not
        table.signature(name)
    diags = table.diagnostics + diags
    if diags:
        return None, diags
    kernel.functions = {name: fn for name, fn in table.typed.items() if name in table.called}
    return kernel, diags


def _type_until_settled(make_typer):
    refined: dict[str, Scalar] = {}
    for _ in range(8):
        typer = make_typer(refined)
        try:
            result = typer.run()
        except _Abort:     # a signature error: reported, nothing more to type
            result = None
        if typer.diagnostics or not typer.refinements:
            break
        refined.update(typer.refinements)
    return result, typer.diagnostics


class _DeviceFunctions:
    """The module's ``@simt.device`` functions, typed on first call, once per kernel."""

    def __init__(self, source: KernelSource) -> None:
        self.source = source
        self.defs = {
            stmt.name: stmt for stmt in source.module_ast.body
            if isinstance(stmt, ast.FunctionDef)
            and any(resolve_dotted(d, source.namespace) == SIMT_MODULE + ".device" for d in stmt.decorator_list)
        }
        self.typed: dict[str, ir.FunctionIR] = {}
        self.failed: set[str] = set()
        self.in_progress: list[str] = []
        self.called: set[str] = set()     # reached from the kernel (only these are lowered)
        self.diagnostics: list[Diagnostic] = []

    def signature(self, name: str) -> ir.FunctionIR | None:
        """The typed function, or None if it has errors (already reported)."""
        if name in self.typed:
            return self.typed[name]
        if name in self.failed:
            return None
        fn, diags = _type_until_settled(lambda refined: _KernelTyper(self.source, refined, self, device_fn=self.defs[name]))
        if diags:
            self.failed.add(name)
            self.diagnostics.extend(diags)
            return None
        self.typed[name] = fn
        return fn


def module_constants(module_ast: ast.Module) -> dict[str, int | float | bool]:
    """Module-level ``NAME = <constant expression>`` bindings."""
    consts: dict[str, int | float | bool] = {}
    for stmt in module_ast.body:
        target, value = None, None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        if isinstance(target, ast.Name):
            folded = fold_constant(value, consts)
            if folded is not None:
                consts[target.id] = folded
            else:
                consts.pop(target.id, None)
    return consts


def fold_constant(node: ast.AST, consts: dict) -> int | float | bool | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
        return node.value
    if isinstance(node, ast.Name) and node.id in consts:
        return consts[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = fold_constant(node.operand, consts)
        return -v if v is not None else None
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        lhs, rhs = fold_constant(node.left, consts), fold_constant(node.right, consts)
        if lhs is None or rhs is None:
            return None
        try:
            return _FOLD[_BINOPS[type(node.op)]](lhs, rhs)
        except (ArithmeticError, ValueError):
            return None
    return None


def parse_param_type(annotation: ast.AST | None, namespace: dict[str, str]):
    """The IR type of a parameter annotation, or a message saying why not."""
    if annotation is None:
        return None, "parameter has no type annotation"
    if isinstance(annotation, ast.Subscript):
        kind = resolve_dotted(annotation.value, namespace)
        short = kind.rsplit(".", 1)[-1] if kind and kind.startswith(TYPES_MODULE + ".") else None
        if short not in _PARAM_KINDS:
            return None, f"`{ast.unparse(annotation.value)}` is not a buildtile parameter kind"
        family, access = _PARAM_KINDS[short]
        args = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        elem = _scalar_of(args[0], namespace)
        if elem is None:
            return None, f"`{ast.unparse(args[0])}` is not a scalar type"
        if family == "slice":
            if len(args) != 1:
                return None, f"`{short}` takes one argument: the element type"
            return SliceT(elem, access), None
        if len(args) != 2 or not (isinstance(args[1], ast.Constant) and args[1].value in (1, 2, 3)):
            return None, f"`{short}` takes an element type and a rank of 1, 2 or 3"
        return TensorT(elem, args[1].value, access), None
    scalar = _scalar_of(annotation, namespace)
    if scalar is None:
        return None, f"`{ast.unparse(annotation)}` is not a buildtile type"
    return scalar, None


def _scalar_of(node: ast.AST, namespace: dict[str, str]) -> Scalar | None:
    if isinstance(node, ast.Name) and node.id == "bool" and "bool" not in namespace:
        return BOOL   # the builtin name reads naturally in annotations
    name = resolve_dotted(node, namespace)
    if name and name.startswith(TYPES_MODULE + "."):
        return SCALARS.get(name.rsplit(".", 1)[-1])
    return None


class _KernelTyper:
    """Types one kernel, or with ``device_fn`` one ``@simt.device`` function."""

    def __init__(self, source: KernelSource, refined: dict[str, Scalar], functions: _DeviceFunctions,
                 device_fn: ast.FunctionDef | None = None) -> None:
        self.src = source
        self.functions = functions
        self.device_fn = device_fn
        self.ret = None
        self.ns = source.namespace
        self.consts = module_constants(source.module_ast)
        self.refined = refined
        self.refinements: dict[str, Scalar] = {}
        self.diagnostics: list[Diagnostic] = []
        self.params: dict[str, ir.Param] = {}
        self.locals: dict[str, _Local] = {}
        self.loop_depth = 0
        self.unsafe_depth = 0
        self.index_dims: set[int] = set()
        self.shared: dict[str, ir.Param] = {}
        self.poisoned: set[str] = set()
        body_node = device_fn if device_fn is not None else source.node
        #: how often each name is bound in the function (a loop variable counts twice)
        self.assign_counts: dict[str, int] = {}
        for node in ast.walk(body_node):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.assign_counts[node.id] = self.assign_counts.get(node.id, 0) + 1
            if isinstance(node, (ast.AugAssign, ast.For)) and isinstance(node.target, ast.Name):
                self.assign_counts[node.target.id] = self.assign_counts.get(node.target.id, 0) + 1

    # ------------------------------------------------------------ reporting
    def error(self, code: str, node: ast.AST, message: str, label: str = "", help: str = "") -> None:
        span = Span.of(node, self.src.display_file, self.src.lines)
        self.diagnostics.append(Diagnostic(code, message, span, label=label, help=help))

    def fail_silently_after(self, code: str, node: ast.AST, message: str) -> None:
        """Report, then stop typing this function: what follows would only repeat the error."""
        self.error(code, node, message)
        raise _Abort

    def fail(self, code: str, node: ast.AST, message: str, label: str = "", help: str = ""):
        self.error(code, node, message, label, help)
        raise _Abort

    # ------------------------------------------------------------ kernel
    def run(self) -> ir.KernelIR:
        if self.device_fn is not None:
            return self.run_device_function()
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
                           help="annotate it with a scalar (f32, i64, ...) or Slice[T], "
                                "DisjointSlice[T], AtomicSlice[T], Tensor[T, rank], DisjointTensor[T, rank]")
                self.poisoned.add(a.arg)
                continue
            p = ir.Param(a.arg, ty, a)
            self.params[a.arg] = p
            params.append(p)
        if fn.returns is not None and not (isinstance(fn.returns, ast.Constant) and fn.returns.value is None):
            self.error("BT0308", fn.returns, "kernels return nothing",
                       help="write results into a DisjointSlice or DisjointTensor parameter")
        body = self.copy_reassigned_params(fn, params) + self.block(fn.body)
        if len(self.index_dims) > 1:
            self.error("BT0499", fn, "kernel mixes thread indices of different dimensions "
                       f"({', '.join(f'index_{d}d' for d in sorted(self.index_dims))})",
                       help="use one of index_1d(), index_2d() or index_3d() per kernel: "
                            "each is unique per thread only for a launch of its own dimension")
        local_types = {name: self._final_type(loc.ty) for name, loc in self.locals.items()}
        self._finalize(body)
        return ir.KernelIR(fn.name, params, local_types, body, max(self.index_dims, default=0),
                           shared={name: p.ty for name, p in self.shared.items()})

    def run_device_function(self) -> ir.FunctionIR:
        fn = self.device_fn
        args = fn.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            self.error("BT0200", fn, "device functions take plain positional parameters only")
        params = []
        for a in args.args:
            ty = _scalar_of(a.annotation, self.ns) if a.annotation is not None else None
            if ty is None:
                self.error("BT0308", a.annotation or a, f"parameter `{a.arg}` of device function `{fn.name}` needs a scalar type",
                           help="device functions take scalars (f32, i64, ...); index arrays in the kernel and pass values")
                self.poisoned.add(a.arg)
                continue
            p = ir.Param(a.arg, ty, a)
            self.params[a.arg] = p
            params.append(p)
        if fn.returns is None or (isinstance(fn.returns, ast.Constant) and fn.returns.value is None):
            self.ret = VOID
        else:
            self.ret = _scalar_of(fn.returns, self.ns)
            if self.ret is None:
                self.fail_silently_after("BT0308", fn.returns, f"device function `{fn.name}` must return a scalar type")
        body = self.copy_reassigned_params(fn, params) + self.block(fn.body)
        if self.ret != VOID and not self.diagnostics and not (body and isinstance(body[-1], ir.Return)):
            self.error("BT0308", fn, f"device function `{fn.name}` must end with `return <{self.ret}>`",
                       help="every path of a function with a result returns a value")
        local_types = {name: self._final_type(loc.ty) for name, loc in self.locals.items()}
        self._finalize(body)
        return ir.FunctionIR(fn.name, params, local_types, body, self.ret)

    def copy_reassigned_params(self, fn: ast.FunctionDef, params: list[ir.Param]) -> list[ir.Stmt]:
        """A scalar parameter assigned in the body is a local copy, as in Python."""
        assigned = set()
        for stmt in fn.body:
            assigned |= _assigned_names(stmt, deep=True)
        copies = []
        for p in params:
            if p.name in assigned and isinstance(p.ty, Scalar):
                self.locals[p.name] = _Local(p.ty)
                copies.append(ir.Assign(name=p.name, value=ir.ParamRef(p.ty, name=p.name, src=p.src), src=p.src))
        return copies

    # ------------------------------------------------------------ statements
    def block(self, stmts: list[ast.stmt]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for stmt in stmts:
            try:
                result = self.stmt(stmt)
            except _Abort:
                # names this statement failed to bind are poisoned: their later uses stay quiet
                self.poisoned.update(_assigned_names(stmt) - set(self.locals))
                continue
            if result is None:
                continue
            out.extend(result if isinstance(result, list) else [result])
        return out

    def stmt(self, node: ast.stmt):
        method = getattr(self, "stmt_" + type(node).__name__, None)
        if method is None:
            self.fail("BT0200", node, f"`{type(node).__name__}` statements are not supported in kernels",
                      help=_UNSUPPORTED_HELP.get(type(node).__name__, "see the SIMT language reference"))
        return method(node)

    def stmt_Expr(self, node: ast.Expr):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None  # docstring
        value = self.expr(node.value)
        if not isinstance(value, (ir.Intrinsic, ir.AtomicOp, ir.Call)):
            self.fail("BT0200", node, "expression statement has no effect",
                      help="assign the value to a variable or a disjoint output")
        return ir.ExprStmt(value=value, src=node)

    def stmt_Pass(self, node):
        return None

    def stmt_Assign(self, node: ast.Assign):
        if len(node.targets) != 1:
            self.fail("BT0200", node, "chained assignment is not supported", help="assign one target at a time")
        return self.assign(node.targets[0], node.value, node)

    def stmt_AnnAssign(self, node: ast.AnnAssign):
        if node.value is None:
            self.fail("BT0200", node, "a declaration needs a value", help="write `x: f32 = 0.0`")
        ty = _scalar_of(node.annotation, self.ns)
        if ty is None:
            self.fail("BT0308", node.annotation, f"`{ast.unparse(node.annotation)}` is not a scalar type")
        if not isinstance(node.target, ast.Name):
            self.fail("BT0200", node.target, "only a plain name can be declared")
        value = self.coerce(self.expr(node.value), ty, node.value)
        return self.bind(node.target, value, node)

    def stmt_AugAssign(self, node: ast.AugAssign):
        op = _BINOPS.get(type(node.op))
        if op is None:
            self.fail("BT0200", node, "unsupported operator")
        synthetic = ast.BinOp(left=_as_load(node.target), op=node.op, right=node.value)
        ast.copy_location(synthetic, node)
        synthetic.end_lineno, synthetic.end_col_offset = node.end_lineno, node.end_col_offset
        return self.assign(node.target, synthetic, node)

    def assign(self, target: ast.AST, value_node: ast.AST, node: ast.stmt):
        if isinstance(target, ast.Tuple):
            return self.assign_tuple(target, value_node, node)
        if isinstance(target, ast.Subscript):
            return self.store(target, value_node, node)
        if isinstance(target, ast.Name):
            return self.bind(target, self.expr(value_node), node)
        self.fail("BT0200", target, "cannot assign to this expression")

    def assign_tuple(self, target: ast.Tuple, value_node: ast.AST, node: ast.stmt):
        value = self.expr(value_node)
        if not isinstance(value.ty, WitnessTupleT):
            self.fail("BT0200", target, "tuple unpacking is only supported for `simt.index_2d()`/`index_3d()`")
        if len(target.elts) != value.ty.dims or not all(isinstance(e, ast.Name) for e in target.elts):
            self.fail("BT0308", target, f"`index_{value.ty.dims}d()` gives {value.ty.dims} indices",
                      help=f"unpack it into {value.ty.dims} names")
        out = []
        for axis, name_node in enumerate(target.elts):
            component = ir.ThreadIndex(WitnessT(value.ty.dims, axis), dims=value.ty.dims, src=value_node)
            out.append(self.bind(name_node, component, node))
        return out

    def bind(self, target: ast.Name, value: ir.Expr, node: ast.stmt):
        name = target.id
        if name in self.params and name not in self.locals:
            self.fail("BT0594", target, f"cannot assign to parameter `{name}`",
                      label=f"`{name}` is a {self.params[name].ty}, a borrowed view",
                      help="bind the value to a new local name")
        if name in self.consts or name in self.ns:
            self.fail("BT0308", target, f"cannot assign to `{name}`: it names a module-level constant or import",
                      help="use a different local name")
        if isinstance(value.ty, SharedT):
            if name in self.locals or name in self.shared:
                self.fail("BT0384", target, f"cannot bind `{name}` twice", help="each shared array gets its own name")
            self.shared[name] = ir.Param(name, value.ty, target)
            return ir.SharedDecl(name=name, ty=value.ty, src=node)
        if name in self.shared:
            self.fail("BT0384", target, f"cannot assign to shared array `{name}`", help=f"write its elements: `{name}[k] = ...`")
        if isinstance(value.ty, (SliceT, TensorT, ShapeT, WitnessTupleT)):
            self.fail("BT0308", node, f"`{name}` cannot hold a value of type {value.ty}",
                      help="index the parameter directly, or unpack index_Nd() into names")
        if value.ty == VOID:
            self.fail("BT0308", node, "this call returns nothing")
        local = self.locals.get(name)
        if local is None:
            ty = self.refined.get(name, value.ty)
            if isinstance(value.ty, WitnessT):
                if isinstance(value, ir.Var) and self.assign_counts.get(name, 0) > 1:
                    # `k = i` then `k += stride`: the copy is a plain index, not a witness
                    self.locals[name] = _Local(I64)
                    return ir.Assign(name=name, value=ir.Var(I64, name=value.name, src=value.src), src=node)
                self.locals[name] = _Local(value.ty, witness=True)
                return ir.Assign(name=name, value=value, src=node)
            if isinstance(ty, Weak) or isinstance(value.ty, Weak):
                value = self.coerce(value, ty, node) if not isinstance(ty, Weak) else value
            elif value_type(value.ty) != ty:
                self.type_mismatch(value.src or node, f"`{name}`", ty, value.ty)
            self.locals[name] = _Local(ty)
            return ir.Assign(name=name, value=value, src=node)
        if local.witness:
            self.fail("BT0384", target, f"cannot assign twice to thread index `{name}`",
                      label="a ThreadIndex witness is immutable",
                      help=f"compute into a new name, e.g. `k = {name} + 1`; only `{name}` itself can index a disjoint write")
        if isinstance(local.ty, Weak) and not isinstance(value_type(value.ty), Weak):
            self.refine(name, value_type(value.ty), node)
            return ir.Assign(name=name, value=value, src=node)
        value = self.coerce(value, local.ty, value.src or node)
        return ir.Assign(name=name, value=value, src=node)

    def store(self, target: ast.Subscript, value_node: ast.AST, node: ast.stmt):
        param, indices = self.subscript_parts(target)
        elem = param.ty.elem
        value = self.coerce(self.expr(value_node), elem, value_node)
        return ir.Store(param=param.name, indices=indices, value=value, src=target)

    def stmt_If(self, node: ast.If):
        cond = self.condition(node.test)
        return ir.If(cond=cond, then=self.block(node.body), orelse=self.block(node.orelse), src=node)

    def stmt_While(self, node: ast.While):
        if node.orelse:
            self.fail("BT0200", node, "`while ... else` is not supported")
        cond = self.condition(node.test)
        self.loop_depth += 1
        body = self.block(node.body)
        self.loop_depth -= 1
        return ir.While(cond=cond, body=body, src=node)

    def stmt_For(self, node: ast.For):
        if node.orelse:
            self.fail("BT0200", node, "`for ... else` is not supported")
        it = node.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and "range" not in self.ns and not it.keywords and 1 <= len(it.args) <= 3):
            self.fail("BT0200", it, "kernels loop only over `range(...)`",
                      help="write `for k in range(start, stop, step)`")
        if not isinstance(node.target, ast.Name):
            self.fail("BT0200", node.target, "the loop variable must be a plain name")
        args = [self.expr(a) for a in it.args]
        for a, a_node in zip(args, it.args):
            if not _is_intlike(a.ty):
                self.type_mismatch(a_node, "range bound", "an integer", a.ty)
        if len(args) == 1:
            args = [ir.Const(WEAK_INT, value=0, src=it), args[0]]
        if len(args) == 2:
            args.append(ir.Const(WEAK_INT, value=1, src=it))
        start, stop, step = args
        ty = self._unify_all([start, stop, step], it)
        name = node.target.id
        known = self.locals[name].ty if name in self.locals else self.refined.get(name)
        if isinstance(ty, Weak) and isinstance(known, Scalar):
            ty = known   # the loop variable was typed by a later use: literal bounds follow it
        start, stop, step = (self.coerce(a, ty, it) for a in (start, stop, step))
        step_sign = 0
        if isinstance(step, ir.Const):
            if step.value == 0:
                self.fail("BT0600", it.args[2], "range() step must not be zero")
            step_sign = 1 if step.value > 0 else -1
        if name in self.params or (name in self.locals and self.locals[name].witness):
            what = "a parameter" if name in self.params else "a thread index"
            self.fail("BT0384", node.target, f"cannot use `{name}` as a loop variable",
                      label=f"`{name}` is {what}, which the loop would reassign",
                      help="give the loop its own variable name")
        existing = self.locals.get(name)
        if existing is None:
            self.locals[name] = _Local(self.refined.get(name, ty))
        elif isinstance(existing.ty, Weak) and not isinstance(ty, Weak):
            self.refine(name, ty, node.target)
        elif not isinstance(ty, Weak) and value_type(existing.ty) != ty:
            self.type_mismatch(node.target, f"`{name}`", existing.ty, ty)
        self.loop_depth += 1
        body = self.block(node.body)
        self.loop_depth -= 1
        return ir.ForRange(var=name, start=start, stop=stop, step=step, step_sign=step_sign, body=body, src=node)

    def stmt_Break(self, node):
        if not self.loop_depth:
            self.fail("BT0268", node, "`break` outside of a loop")
        return ir.Break(src=node)

    def stmt_Continue(self, node):
        if not self.loop_depth:
            self.fail("BT0268", node, "`continue` outside of a loop")
        return ir.Continue(src=node)

    def stmt_Return(self, node: ast.Return):
        if self.device_fn is not None:
            if self.ret == VOID:
                if node.value is not None:
                    self.fail("BT0308", node.value, f"device function `{self.device_fn.name}` returns nothing",
                              help="annotate its result type, e.g. `-> f32`")
                return ir.Return(src=node)
            if node.value is None:
                self.fail("BT0308", node, f"device function `{self.device_fn.name}` returns {self.ret}")
            return ir.Return(value=self.coerce(self.expr(node.value), self.ret, node.value), src=node)
        if node.value is not None:
            self.fail("BT0308", node.value, "kernels return nothing",
                      help="write results into a DisjointSlice or DisjointTensor parameter")
        return ir.Return(src=node)

    def stmt_With(self, node: ast.With):
        if len(node.items) == 1 and node.items[0].optional_vars is None:
            ctx = node.items[0].context_expr
            if isinstance(ctx, ast.Call) and resolve_dotted(ctx.func, self.ns) == SIMT_MODULE + ".unsafe":
                self.unsafe_depth += 1
                body = self.block(node.body)
                self.unsafe_depth -= 1
                return ir.Unsafe(body=body, src=node)
        self.fail("BT0200", node, "only `with simt.unsafe():` is supported in kernels")

    # ------------------------------------------------------------ expressions
    def expr(self, node: ast.AST) -> ir.Expr:
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            self.fail("BT0200", node, f"`{type(node).__name__}` expressions are not supported in kernels",
                      help=_UNSUPPORTED_HELP.get(type(node).__name__, "see the SIMT language reference"))
        return method(node)

    def expr_Constant(self, node: ast.Constant):
        v = node.value
        if isinstance(v, bool):
            return ir.Const(BOOL, value=v, src=node)
        if isinstance(v, int):
            return ir.Const(WEAK_INT, value=v, src=node)
        if isinstance(v, float):
            return ir.Const(WEAK_FLOAT, value=v, src=node)
        self.fail("BT0200", node, f"{type(v).__name__} literals are not supported in kernels",
                  help="kernels compute on numbers and booleans")

    def expr_Name(self, node: ast.Name):
        name = node.id
        if name in self.poisoned and name not in self.locals:
            raise _Abort  # its binding already failed with a diagnostic
        if name in self.locals:
            local = self.locals[name]
            return ir.Var(local.ty, name=name, src=node)
        if name in self.params:
            return ir.ParamRef(self.params[name].ty, name=name, src=node)
        if name in self.consts:
            value = self.consts[name]
            ty = BOOL if isinstance(value, bool) else WEAK_INT if isinstance(value, int) else WEAK_FLOAT
            return ir.Const(ty, value=value, src=node)
        if name in ("True", "False"):
            return ir.Const(BOOL, value=name == "True", src=node)
        self.fail("BT0425", node, f"cannot find value `{name}` in this scope",
                  label="not found",
                  help="kernels see their parameters, their locals and module-level constants")

    def expr_BinOp(self, node: ast.BinOp):
        op = _BINOPS.get(type(node.op))
        if isinstance(node.op, ast.Pow):
            self.fail("BT0200", node, "operator `**` is not supported in kernels",
                      help="write `math.pow(x, y)` for floats, or multiply")
        if op is None:
            self.fail("BT0200", node, f"operator `{ast.unparse(node.op) if hasattr(ast, 'unparse') else type(node.op).__name__}` is not supported")
        lhs, rhs = self.expr(node.left), self.expr(node.right)
        if isinstance(lhs, ir.Const) and isinstance(rhs, ir.Const) and isinstance(lhs.ty, Weak) and isinstance(rhs.ty, Weak):
            try:
                value = _FOLD[op](lhs.value, rhs.value)
            except ZeroDivisionError:
                self.fail("BT0080", node, "division by zero in a constant expression")
            return ir.Const(WEAK_FLOAT if isinstance(value, float) else WEAK_INT, value=value, src=node)
        ty = self.unify(lhs, rhs, node)
        lhs, rhs = self.coerce(lhs, ty, node.left), self.coerce(rhs, ty, node.right)
        vt = ty.default if isinstance(ty, Weak) else ty
        if vt == BOOL and op not in ("&", "|", "^"):
            self.type_mismatch(node, f"operator `{op}`", "numbers", ty)
        if op in ("&", "|", "^", "<<", ">>") and vt.is_float:
            self.type_mismatch(node, f"operator `{op}`", "integers", ty)
        if op == "/" and not vt.is_float:
            # Python: true division of integers gives a float (a double)
            lhs, rhs = (ir.Cast(F64, value=self.defaulted(v), src=v.src) for v in (lhs, rhs))
            return ir.BinOp(F64, op="/", lhs=lhs, rhs=rhs, src=node)
        return ir.BinOp(ty, op=op, lhs=lhs, rhs=rhs, src=node)

    def expr_UnaryOp(self, node: ast.UnaryOp):
        operand = self.expr(node.operand)
        if isinstance(node.op, ast.Not):
            return ir.UnaryOp(BOOL, op="not", operand=self.as_bool(operand, node.operand), src=node)
        if isinstance(node.op, ast.UAdd):
            return operand
        ty = value_type(operand.ty)
        if isinstance(node.op, ast.USub):
            if isinstance(operand, ir.Const) and isinstance(ty, Weak):
                return ir.Const(ty, value=-operand.value, src=node)
            if ty == BOOL:
                self.type_mismatch(node, "unary `-`", "a number", ty)
            return ir.UnaryOp(ty, op="-", operand=self.coerce(operand, ty, node), src=node)
        if isinstance(node.op, ast.Invert):
            if not _is_intlike(ty):
                self.type_mismatch(node, "operator `~`", "an integer", ty)
            return ir.UnaryOp(ty, op="~", operand=self.coerce(operand, ty, node), src=node)
        self.fail("BT0200", node, "unsupported unary operator")

    def expr_Compare(self, node: ast.Compare):
        if len(node.ops) != 1:
            # a < b < c  ==  (a < b) and (b < c), evaluating b once is not needed: b has no side effects
            parts = []
            left = node.left
            for op, right in zip(node.ops, node.comparators):
                piece = ast.Compare(left=left, ops=[op], comparators=[right])
                ast.copy_location(piece, node)
                piece.end_lineno, piece.end_col_offset = node.end_lineno, node.end_col_offset
                parts.append(self.expr_Compare(piece))
                left = right
            return ir.BoolOp(BOOL, op="and", values=parts, src=node)
        op = _CMPOPS.get(type(node.ops[0]))
        if op is None:
            self.fail("BT0200", node, "`in`/`is` comparisons are not supported in kernels")
        lhs, rhs = self.expr(node.left), self.expr(node.comparators[0])
        ty = self.unify(lhs, rhs, node)
        return ir.Compare(BOOL, op=op, lhs=self.coerce(lhs, ty, node.left), rhs=self.coerce(rhs, ty, node.comparators[0]), src=node)

    def expr_BoolOp(self, node: ast.BoolOp):
        op = "and" if isinstance(node.op, ast.And) else "or"
        values = [self.as_bool(self.expr(v), v) for v in node.values]
        return ir.BoolOp(BOOL, op=op, values=values, src=node)

    def expr_IfExp(self, node: ast.IfExp):
        cond = self.condition(node.test)
        then, orelse = self.expr(node.body), self.expr(node.orelse)
        ty = self.unify(then, orelse, node)
        return ir.Select(ty, cond=cond, then=self.coerce(then, ty, node.body), orelse=self.coerce(orelse, ty, node.orelse), src=node)

    def expr_Attribute(self, node: ast.Attribute):
        # thread geometry: simt.thread_idx.x ...
        dotted = resolve_dotted(node, self.ns)
        if dotted and dotted.startswith(SIMT_MODULE + "."):
            parts = dotted[len(SIMT_MODULE) + 1:].split(".")
            if len(parts) == 2 and parts[0] in _GEOMETRY and parts[1] in ("x", "y", "z"):
                return ir.Intrinsic(I64, name=f"{parts[0]}.{parts[1]}", src=node)
            self.fail("BT0425", node, f"`simt.{'.'.join(parts)}` is not a value",
                      help="thread geometry is simt.thread_idx/block_idx/block_dim/grid_dim with .x, .y or .z")
        if isinstance(node.value, ast.Name) and node.value.id in self.params and node.attr == "shape":
            ty = self.params[node.value.id].ty
            if not isinstance(ty, (SliceT, TensorT)):
                self.type_mismatch(node, "`.shape`", "a slice or tensor", ty)
            return ir.ParamRef(ShapeT(ty.rank), name=node.value.id, src=node)
        self.fail("BT0425", node, f"no attribute `{ast.unparse(node)}` in kernels",
                  help="parameters have `.shape`; thread geometry is under `simt.`")

    def expr_Subscript(self, node: ast.Subscript):
        base = node.value
        if isinstance(base, ast.Attribute) and base.attr == "shape":
            shape = self.expr(base)
            axis = fold_constant(node.slice, self.consts)
            if not isinstance(axis, int) or isinstance(axis, bool) or not 0 <= axis < shape.ty.rank:
                self.fail("BT0308", node.slice, f"`.shape` takes a constant axis in 0..{shape.ty.rank - 1}")
            return ir.Shape(I64, param=shape.name, axis=axis, src=node)
        param, indices = self.subscript_parts(node)
        return ir.Load(param.ty.elem, param=param.name, indices=indices, src=node)

    def subscript_parts(self, node: ast.Subscript) -> tuple[ir.Param, list[ir.Expr]]:
        if isinstance(node.value, ast.Name) and node.value.id in self.poisoned and node.value.id not in self.locals:
            raise _Abort  # its binding already failed with a diagnostic
        if isinstance(node.value, ast.Name) and node.value.id in self.shared:
            param = self.shared[node.value.id]
        elif isinstance(node.value, ast.Name) and node.value.id in self.params:
            param = self.params[node.value.id]
        else:
            self.fail("BT0308", node.value, "only slice and tensor parameters and shared arrays can be indexed",
                      help="index a parameter directly: `a[i]`, `m[row, col]`")
        if isinstance(param.ty, Scalar):
            self.type_mismatch(node.value, f"`{param.name}`", "a slice or tensor", param.ty)
        index_nodes = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(isinstance(i, ast.Slice) for i in index_nodes):
            self.fail("BT0200", node.slice, "slicing (`a[i:j]`) is not supported in SIMT kernels",
                      help="index one element at a time")
        if len(index_nodes) != param.ty.rank:
            self.fail("BT0308", node.slice, f"`{param.name}` has rank {param.ty.rank} but is indexed with "
                      f"{len(index_nodes)} {'index' if len(index_nodes) == 1 else 'indices'}")
        indices = []
        for idx_node in index_nodes:
            idx = self.expr(idx_node)
            if not _is_intlike(idx.ty):
                self.type_mismatch(idx_node, "an index", "an integer", idx.ty)
            if isinstance(idx.ty, Weak):
                idx = self.coerce(idx, I64, idx_node)
            indices.append(idx)
        return param, indices

    def expr_Call(self, node: ast.Call):
        if node.keywords:
            self.fail("BT0200", node, "keyword arguments are not supported in kernel calls")
        func = node.func
        dotted = resolve_dotted(func, self.ns)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.params:
            return self.call_method(node, self.params[func.value.id], func.attr)
        if isinstance(func, ast.Name) and func.id == "len" and "len" not in self.ns:
            return self.call_len(node)
        if isinstance(func, ast.Name) and func.id in ("min", "max", "abs") and func.id not in self.ns:
            return self.call_math(node, "fabs" if func.id == "abs" else func.id)
        if dotted and dotted.startswith(TYPES_MODULE + "."):
            target = SCALARS.get(dotted.rsplit(".", 1)[-1])
            if target is None:
                self.fail("BT0425", func, f"`{ast.unparse(func)}` is not a scalar type to cast to")
            if len(node.args) != 1:
                self.fail("BT0308", node, f"the cast `{ast.unparse(func)}(...)` takes exactly one argument, "
                          f"{len(node.args)} given")
            value = self.expr(node.args[0])
            if isinstance(value, ir.Const) and isinstance(value.ty, Weak):
                return self.coerce(value, target, node)
            if not isinstance(value_type(value.ty), (Scalar, Weak)):
                self.type_mismatch(node.args[0], "a cast", "a scalar", value.ty)
            return ir.Cast(target, value=self.defaulted(value), src=node)
        if dotted and dotted.startswith("math."):
            return self.call_math(node, dotted[5:])
        if dotted and dotted.startswith(SIMT_MODULE + "."):
            return self.call_simt(node, dotted[len(SIMT_MODULE) + 1:])
        if isinstance(func, ast.Name) and func.id in self.functions.defs and func.id not in self.locals:
            return self.call_device(node, func.id)
        defined = next((s for s in self.src.module_ast.body
                        if isinstance(func, ast.Name) and isinstance(s, ast.FunctionDef) and s.name == func.id), None)
        if defined is not None:
            is_kernel = any(resolve_dotted(d.func if isinstance(d, ast.Call) else d, self.ns) == SIMT_MODULE + ".kernel"
                            for d in defined.decorator_list)
            self.fail("BT0425", node.func, f"`{func.id}` is {'a kernel' if is_kernel else 'not a device function'}",
                      help="kernels are launched from the host; move the shared code into a `@simt.device` function"
                      if is_kernel else "decorate it with `@simt.device` to call it from kernels")
        self.fail("BT0425", func, f"cannot find function `{ast.unparse(func)}` for kernels",
                  help="kernels call casts (f32(x)), len(), math functions and simt intrinsics")

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
            raise _Abort  # its own diagnostics are reported
        if len(node.args) != len(fn.params):
            self.fail("BT0308", node, f"`{name}` takes {len(fn.params)} argument{'s' if len(fn.params) != 1 else ''}, "
                      f"{len(node.args)} given")
        args = [self.coerce(self.expr(a), p.ty, a) for a, p in zip(node.args, fn.params)]
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
        ty = self._unify_all(args, node)
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
        if not _is_intlike(index.ty):
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
            elem = _scalar_of(node.args[0], self.ns)
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
            elem = _scalar_of(node.args[0], self.ns) if len(node.args) == 1 else None
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
        known = ["index_1d", "index_2d", "index_3d", "sync_threads", "lane_id", "warp_id", "shared_array",
                 "shfl_down", "shfl_xor", "shfl_idx", "ballot", "any", "all"]
        close = difflib.get_close_matches(name, known, n=1)
        self.fail("BT0425", node.func, f"cannot find function `simt.{name}`",
                  help=f"did you mean `simt.{close[0]}`?" if close else f"simt functions: {', '.join(known)}")

    # ------------------------------------------------------------ typing helpers
    def condition(self, node: ast.AST) -> ir.Expr:
        return self.as_bool(self.expr(node), node)

    def as_bool(self, value: ir.Expr, node: ast.AST) -> ir.Expr:
        if value.ty != BOOL:
            self.type_mismatch(node, "a condition", "bool", value.ty,
                               help="compare explicitly, e.g. `x != 0`")
        return value

    def unify(self, lhs: ir.Expr, rhs: ir.Expr, node: ast.AST):
        lt, rt = value_type(lhs.ty), value_type(rhs.ty)
        for side in (lt, rt):
            if not isinstance(side, (Scalar, Weak)):
                self.type_mismatch(node, "this operation", "scalars", side)
        if lt == rt:
            return lt
        if isinstance(lt, Weak) and isinstance(rt, Weak):
            return WEAK_FLOAT
        if isinstance(lt, Weak) or isinstance(rt, Weak):
            weak, strong = (lt, rt) if isinstance(lt, Weak) else (rt, lt)
            if weak.kind == "float" and not strong.is_float:
                self.type_mismatch(node, "this operation", str(strong), weak,
                                   help="cast explicitly, e.g. `f32(...)`, or use an integer literal")
            if strong == BOOL:
                self.type_mismatch(node, "this operation", "numbers", strong)
            return strong
        self.type_mismatch(node, "this operation", str(lt), rt,
                           help=f"cast one side explicitly, e.g. `{lt}(...)` or `{rt}(...)`")

    def _unify_all(self, values: list[ir.Expr], node: ast.AST):
        ty = value_type(values[0].ty)
        for v in values[1:]:
            ty = self.unify(ir.Expr(ty), v, node)
        return ty

    def coerce(self, value: ir.Expr, ty, node: ast.AST) -> ir.Expr:
        """Give a weakly typed value the concrete type ``ty``, or check they agree."""
        vt = value_type(value.ty)
        if isinstance(ty, Weak):
            return value
        if vt == ty:
            return value
        if isinstance(vt, Weak):
            if vt.kind == "float" and not ty.is_float:
                self.type_mismatch(node, "this value", str(ty), vt)
            if ty == BOOL:
                self.type_mismatch(node, "this value", "bool", vt)
            return self._retype(value, ty)
        self.type_mismatch(node, "this value", str(ty), vt, help=f"cast explicitly: `{ty}(...)`")

    def _retype(self, value: ir.Expr, ty: Scalar) -> ir.Expr:
        if isinstance(value, ir.Const):
            if ty.is_int:
                lo, hi = (0, 2 ** ty.bits - 1) if ty.kind == "uint" else (-(2 ** (ty.bits - 1)), 2 ** (ty.bits - 1) - 1)
                if not lo <= value.value <= hi:
                    self.fail("BT0308", value.src, f"literal `{value.value}` out of range for {ty}",
                              label=f"{ty} holds {lo}..{hi}", help="use a wider type, or cast explicitly")
            return ir.Const(ty, value=float(value.value) if ty.is_float else value.value, src=value.src)
        if isinstance(value, ir.Var):
            self.refine(value.name, ty, value.src)
            return ir.Var(ty, name=value.name, src=value.src)
        if isinstance(value, ir.BinOp):
            return ir.BinOp(ty, op=value.op, lhs=self._retype(value.lhs, ty), rhs=self._retype(value.rhs, ty), src=value.src)
        if isinstance(value, ir.UnaryOp):
            return ir.UnaryOp(ty, op=value.op, operand=self._retype(value.operand, ty), src=value.src)
        if isinstance(value, ir.Select):
            return ir.Select(ty, cond=value.cond, then=self._retype(value.then, ty), orelse=self._retype(value.orelse, ty), src=value.src)
        if isinstance(value, ir.Intrinsic):
            return ir.Intrinsic(ty, name=value.name, args=[self._retype(a, ty) for a in value.args], src=value.src)
        value.ty = ty
        return value

    def defaulted(self, value: ir.Expr) -> ir.Expr:
        vt = value.ty
        return self._retype(value, vt.default) if isinstance(vt, Weak) else value

    def refine(self, name: str, ty: Scalar, node) -> None:
        if name in self.refinements and self.refinements[name] != ty:
            self.type_mismatch(node, f"`{name}`", str(self.refinements[name]), ty)
        self.refinements[name] = ty
        self.locals[name].ty = ty

    def type_mismatch(self, node, what: str, expected, found, help: str = ""):
        self.fail("BT0308", node, "mismatched types",
                  label=f"{what}: expected {expected}, found {found}", help=help)

    def _final_type(self, ty):
        return ty.default if isinstance(ty, Weak) else ty

    def _finalize(self, body: list[ir.Stmt]) -> None:
        """Literals that never met a concrete type take their defaults (i64, f32)."""
        for e in ir.walk_exprs(body):
            if isinstance(e.ty, Weak):
                e.ty = e.ty.default
                if isinstance(e, ir.Const):
                    e.value = float(e.value) if e.ty.is_float else int(e.value)
            elif isinstance(e, ir.Var):
                e.ty = self._final_type(self.locals[e.name].ty) if e.name in self.locals else e.ty


def _assigned_names(stmt: ast.stmt, deep: bool = False) -> set[str]:
    """Plain names a statement binds (``deep``: in nested blocks too)."""
    if deep:
        nodes = ast.walk(stmt)
    else:
        nodes = []
        if isinstance(stmt, ast.Assign):
            nodes = [n for t in stmt.targets for n in ast.walk(t)]
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For)):
            nodes = list(ast.walk(stmt.target))
    names = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def _is_intlike(ty) -> bool:
    ty = value_type(ty)
    return (isinstance(ty, Weak) and ty.kind == "int") or (isinstance(ty, Scalar) and ty.is_int)


def _as_load(target: ast.AST) -> ast.AST:
    clone = ast.parse(ast.unparse(target), mode="eval").body
    for new, old in zip(ast.walk(clone), ast.walk(target)):
        ast.copy_location(new, old)
        new.end_lineno = getattr(old, "end_lineno", None)
        new.end_col_offset = getattr(old, "end_col_offset", None)
    return clone


_UNSUPPORTED_HELP = {
    "FunctionDef": "define helpers at module level with @simt.device",
    "Lambda": "define helpers at module level with @simt.device",
    "ListComp": "kernels have no lists; write a loop",
    "List": "kernels have no lists; use a parameter or shared memory",
    "Dict": "kernels have no dicts",
    "Try": "kernels have no exceptions",
    "Raise": "kernels have no exceptions",
    "Import": "import at module level",
    "ImportFrom": "import at module level",
    "Global": "module-level names are read-only constants in kernels",
    "Nonlocal": "kernels have no closures",
    "JoinedStr": "kernels have no strings",
    "Yield": "kernels are not generators",
    "Await": "kernels are not coroutines",
}
