"""Stage 1: a SIMT kernel's Python AST -> typed IR.

Types are inferred per local variable. Literals are weakly typed (they take
the type of what they meet); a variable that only ever held literals is
refined by its later uses, found by re-running inference until the types
settle. The scalar rules are the shared ones of
``buildtile.backends.common.typer``; this module adds SIMT's statements,
parameters, element indexing and device functions (its calls are in
``intrinsics``).

It also makes the ThreadIndex witnesses the ownership checker relies on:
``index_Nd()``, ``grid(N)``, the spelled-out ``thread_idx.x + block_idx.x *
block_dim.x``, and a 1-D witness stepped only by the grid's total threads
(see ``ownership`` for why each is this thread's own).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from buildtile.backend import KernelSource
from buildtile.backends.common.constants import MATH_CONSTANTS, fold_constant
from buildtile.backends.common.typer import Abort, is_intlike
from buildtile.backends.simt import ir
from buildtile.backends.simt.intrinsics import RANDOM_MODULE, SimtCalls
from buildtile.backends.simt.unpacking import TupleAssignment
from buildtile.backends.simt.spellings import foreign_call_help, foreign_name, foreign_type_help
from buildtile.backends.simt.witnesses import GEOMETRY, WitnessForms, WitnessHints, grid_total_spelling
from buildtile.backends.simt.complex import ComplexNumbers, is_complex
from buildtile.backends.simt.records import RecordAccess, is_record, module_records, reports_declarations
from buildtile.backends.simt.params import SIMT_MODULE, TYPES_MODULE, parse_param_type, scalar_of
from buildtile.backends.simt.types import (
    COMPLEX, I64, Scalar, ShapeT, SharedT, SliceT, TensorT, TupleT, ValuesT, VOID, WEAK_INT, Weak, WitnessT, WitnessTupleT,
    value_type,
)
from buildtile.diagnostics import Diagnostic
from buildtile.discovery import resolve_dotted

@dataclass
class _Local:
    ty: object
    witness: bool = False   # bound to a ThreadIndex witness: immutable


def build_typed_ir(source: KernelSource) -> tuple[ir.KernelIR | None, list[Diagnostic]]:
    """Type a kernel; returns its IR (None on errors) and its diagnostics."""
    table = _DeviceFunctions(source)
    kernel, diags = _type_until_settled(lambda refined, hints: _KernelTyper(source, refined, table, hints=hints))
    for name in table.defs:      # report errors in every device function, called or not
        table.signature(name)
    diags = table.diagnostics + diags
    if diags:
        return None, diags
    kernel.functions = {name: fn for name, fn in table.typed.items() if name in table.called}
    return kernel, diags


def _type_until_settled(make_typer):
    """Type again while a pass learns something the earlier ones used: a local's type from a later
    use, or which values are thread indices (``WitnessHints``)."""
    refined: dict[str, Scalar] = {}
    hints = WitnessHints()
    for _ in range(8):
        typer = make_typer(refined, hints)
        try:
            result = typer.run()
        except Abort:     # a signature error: reported, nothing more to type
            result = None
        learnt = typer.witness_hints()
        if learnt != hints:
            hints = learnt
            continue
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
        fn, diags = _type_until_settled(lambda refined, _: _KernelTyper(self.source, refined, self,
                                                                          device_fn=self.defs[name]))
        if diags:
            self.failed.add(name)
            self.diagnostics.extend(diags)
            return None
        self.typed[name] = fn
        return fn


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


def _index_calls(fn: ast.AST, ns: dict[str, str]) -> set[int]:
    """The dimensions of the ``index_Nd()`` and ``grid(n)`` calls of ``fn`` (0 for a ``grid(n)``
    whose ``n`` is not a literal)."""
    dims = set()
    for n in ast.walk(fn):
        if not isinstance(n, ast.Call):
            continue
        name = resolve_dotted(n.func, ns)
        if name in (SIMT_MODULE + ".index_1d", SIMT_MODULE + ".index_2d", SIMT_MODULE + ".index_3d"):
            dims.add(int(name[-2]))
        elif name == SIMT_MODULE + ".grid":
            literal = n.args[0].value if n.args and isinstance(n.args[0], ast.Constant) else 0
            dims.add(literal if literal in (1, 2, 3) else 0)
    return dims


def _float_index_help(node: ast.AST, stable: dict[str, ir.Expr]) -> str:
    """Why an index is a float, where it is a true division (Python's `/`, also through a name)."""
    value = stable.get(node.id) if isinstance(node, ast.Name) else None
    division = isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) or (
        isinstance(value, ir.BinOp) and value.op == "/")
    if division:
        return "`/` is true division, which gives a float; divide indices with `//`"
    return "cast it to an integer: `i64(...)`"


def _always_returns(body: list[ir.Stmt]) -> bool:
    """Every path through ``body`` ends in a ``return`` (an ``if`` whose branches both do counts,
    and so does a ``with simt.unsafe():`` block that does)."""
    return any(isinstance(s, ir.Return) or (isinstance(s, ir.If) and _always_returns(s.then)
                                            and _always_returns(s.orelse))
               or (isinstance(s, ir.Unsafe) and _always_returns(s.body)) for s in body)


class _KernelTyper(RecordAccess, ComplexNumbers, TupleAssignment, WitnessForms, SimtCalls):
    """Types one kernel, or with ``device_fn`` one ``@simt.device`` function."""

    reference = "see the SIMT language reference"
    unsupported_help = _UNSUPPORTED_HELP

    def __init__(self, source: KernelSource, refined: dict[str, Scalar], functions: _DeviceFunctions,
                 device_fn: ast.FunctionDef | None = None, hints: WitnessHints | None = None) -> None:
        super().__init__(source)
        self.functions = functions
        self.device_fn = device_fn
        self.records, self.record_diagnostics = module_records(source.module_ast, self.ns, source.display_file,
                                                               source.lines)
        self.ret = None
        self.refined = refined
        self.refinements: dict[str, Scalar] = {}
        self.locals: dict[str, _Local] = {}
        self.loop_depth = 0
        self.unsafe_depth = 0
        self.index_dims: set[int] = set()
        self.shared: dict[str, ir.Param] = {}
        #: locals bound once, at the top of the body: their value is the same wherever they are read
        self.stable: dict[str, ir.Expr] = {}
        self.depth = 0
        body_node = device_fn if device_fn is not None else source.node
        calls = _index_calls(body_node, self.ns)
        #: a kernel indexing with index_2d()/index_3d() keeps the spelled-out 1-D index a plain integer
        self.multi_dim = bool(calls - {1})
        #: a kernel that calls index_Nd() or grid(n) keeps its spelled-out index 1-D
        self.calls_index = bool(calls)
        #: what earlier passes learnt of the thread indices, and what this one sees (WitnessForms)
        self.hints = hints or WitnessHints()
        self.spelled_axes: set[str] = set()
        self.witness_copies: dict[str, WitnessT] = {}
        self.stride_steps: dict[str, int] = {}
        #: how often each name is bound in the function (a loop variable counts twice)
        self.assign_counts: dict[str, int] = {}
        #: how many places bind each name (an assignment, an augmented one, a loop)
        self.binding_sites: dict[str, int] = {}
        for node in ast.walk(body_node):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.assign_counts[node.id] = self.assign_counts.get(node.id, 0) + 1
                self.binding_sites[node.id] = self.binding_sites.get(node.id, 0) + 1
            if isinstance(node, (ast.AugAssign, ast.For)) and isinstance(node.target, ast.Name):
                self.assign_counts[node.target.id] = self.assign_counts.get(node.target.id, 0) + 1

    # ------------------------------------------------------------ kernel
    def run(self) -> ir.KernelIR:
        if self.device_fn is not None:
            return self.run_device_function()
        fn = self.src.node
        if reports_declarations(self.src.module_ast, self.ns, fn):
            self.diagnostics.extend(self.record_diagnostics)
        params = self.kernel_params(fn, lambda ann, ns: parse_param_type(ann, ns, self.records),
                                    "annotate it with a scalar (f32, i64, ...) or Slice[T], DisjointSlice[T], "
                                    "AtomicSlice[T], Tensor[T, rank], DisjointTensor[T, rank]")
        for p in params:
            if is_complex(p.ty):
                self.error("BT0308", p.src.annotation, f"kernel parameter `{p.name}` cannot be a complex scalar",
                           help="pass its parts as two float parameters, or the value in a one-element array")
            if isinstance(p.ty, SharedT):
                self.error("BT0308", p.src.annotation, f"kernel parameter `{p.name}` cannot be a shared array",
                           help="a kernel declares its shared arrays with `simt.shared_array(T, shape)`; "
                                "`SharedArray[T]` is for the parameters of device functions")
        self.check_returns_nothing(fn, "write results into a DisjointSlice or DisjointTensor parameter")
        body = self.copy_reassigned_params(fn, params) + self.block(fn.body)
        if len(self.index_dims) > 1:
            self.error("BT0499", fn, "kernel mixes thread indices of different dimensions "
                       f"({', '.join(f'index_{d}d' for d in sorted(self.index_dims))})",
                       help="use one of index_1d(), index_2d() or index_3d() per kernel: "
                            "each is unique per thread only for a launch of its own dimension")
        local_types = {name: self._final_type(loc.ty) for name, loc in self.locals.items()}
        self.finalize(body)
        return ir.KernelIR(fn.name, params, local_types, body, max(self.index_dims, default=0),
                           shared={name: p.ty for name, p in self.shared.items()})

    def run_device_function(self) -> ir.FunctionIR:
        fn = self.device_fn
        args = fn.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            self.error("BT0200", fn, "device functions take plain positional parameters only")
        params = []
        for a in args.args:
            ty, _ = parse_param_type(a.annotation, self.ns, self.records)
            if ty is None:
                self.error("BT0308", a.annotation or a, f"parameter `{a.arg}` of device function `{fn.name}` needs a type",
                           help="device functions take scalars (f32, i64, ...) and arrays "
                                "(Slice[T], DisjointSlice[T], AtomicSlice[T], Tensor[T, rank], DisjointTensor[T, rank])")
                self.poisoned.add(a.arg)
                continue
            p = ir.Param(a.arg, ty, a)
            if isinstance(ty, SharedT):   # indexed, and its atomics made, as the kernel's shared arrays are
                self.shared[a.arg] = p
            else:
                self.params[a.arg] = p
            params.append(p)
        if fn.returns is None or (isinstance(fn.returns, ast.Constant) and fn.returns.value is None):
            self.ret = VOID
        else:
            self.ret = self.result_type(fn.returns)
            if self.ret is None:
                self.fail("BT0308", fn.returns, f"device function `{fn.name}` must return a scalar type "
                          "or a tuple of them", help="annotate e.g. `-> f32` or `-> tuple[f32, i64]`")
        body = self.copy_reassigned_params(fn, params) + self.block(fn.body)
        if self.ret != VOID and not self.diagnostics and not _always_returns(body):
            self.error("BT0308", fn, f"device function `{fn.name}` must end with `return <{self.ret}>`",
                       help="every path of a function with a result returns a value")
        local_types = {name: self._final_type(loc.ty) for name, loc in self.locals.items()}
        self.finalize(body)
        return ir.FunctionIR(fn.name, params, local_types, body, self.ret)

    def result_type(self, node: ast.AST):
        """A device function's result annotation: a scalar, or ``tuple[T, ...]`` of scalars."""
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "tuple"
                and "tuple" not in self.ns):
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            elems = tuple(scalar_of(t, self.ns) for t in items)
            return TupleT(elems) if len(elems) > 1 and None not in elems and VOID not in elems else None
        return scalar_of(node, self.ns)

    def device_arg(self, node: ast.AST, param: ir.Param) -> ir.Expr:
        """An argument of a device function call: a scalar converts as a store does; an array
        parameter is passed as it is, of the very type the function declares; a shared array
        (of the kernel, or a view the caller got) is passed by name, of the declared element
        type and rank."""
        if isinstance(param.ty, SharedT):
            return self.shared_arg(node, param)
        if not isinstance(param.ty, (SliceT, TensorT)):
            return self.coerce(self.expr(node), param.ty, node)
        if not (isinstance(node, ast.Name) and node.id in self.params and node.id not in self.locals):
            self.fail("BT0308", node, f"parameter `{param.name}` takes an array ({param.ty})",
                      help="pass an array parameter of the kernel by name")
        arg = self.params[node.id]
        if arg.ty != param.ty:
            self.type_mismatch(node, f"parameter `{param.name}`", param.ty, arg.ty,
                               help="declare the function's parameter with the argument's kind, element type and rank")
        return ir.ParamRef(arg.ty, name=arg.name, src=node)

    def shared_arg(self, node: ast.AST, param: ir.Param) -> ir.Expr:
        if not (isinstance(node, ast.Name) and node.id in self.shared):
            self.fail("BT0308", node, f"parameter `{param.name}` takes a shared array ({param.ty})",
                      help="pass a shared array of the kernel by name")
        arg = self.shared[node.id]
        if arg.ty.elem != param.ty.elem or arg.ty.rank != param.ty.rank:
            self.type_mismatch(node, f"parameter `{param.name}`", param.ty, arg.ty,
                               help="declare the function's parameter with the array's element type and rank")
        return ir.ParamRef(arg.ty, name=arg.name, src=node)

    def declare_local(self, name: str, ty: Scalar) -> None:
        self.locals[name] = _Local(ty)

    def block(self, stmts: list[ast.stmt]) -> list[ir.Stmt]:
        self.depth += 1
        try:
            return super().block(stmts)
        finally:
            self.depth -= 1

    def param_value(self, param: ir.Param) -> ir.Expr:
        return ir.ParamRef(param.ty, name=param.name, src=param.src)

    # ------------------------------------------------------------ statements
    def expression_statement(self, node: ast.Expr):
        value = self.expr(node.value)
        if not isinstance(value, (ir.Intrinsic, ir.AtomicOp, ir.Call)):
            self.fail("BT0200", node, "expression statement has no effect",
                      help="assign the value to a variable or a disjoint output")
        return ir.ExprStmt(value=value, src=node)

    def stmt_AnnAssign(self, node: ast.AnnAssign):
        if node.value is None:
            self.fail("BT0200", node, "a declaration needs a value", help="write `x: f32 = 0.0`")
        ty = scalar_of(node.annotation, self.ns)
        if ty is None:
            self.fail("BT0308", node.annotation, f"`{ast.unparse(node.annotation)}` is not a scalar type")
        if not isinstance(node.target, ast.Name):
            self.fail("BT0200", node.target, "only a plain name can be declared")
        value = self.coerce(self.expr(node.value), ty, node.value)
        return self.bind(node.target, value, node)

    def assign(self, target: ast.AST, value_node: ast.AST, node: ast.stmt):
        if isinstance(target, ast.Tuple):
            return self.assign_tuple(target, value_node, node)
        if isinstance(target, ast.Subscript):
            return self.store(target, value_node, node)
        if isinstance(target, ast.Attribute):
            return self.record_field_store(target, value_node, node)
        if isinstance(target, ast.Name):
            return self.bind(target, self.expr(value_node), node)
        self.fail("BT0200", target, "cannot assign to this expression")

    def bind(self, target: ast.Name, value: ir.Expr, node: ast.stmt):
        name = target.id
        self.check_assignable(target)
        if isinstance(value.ty, SharedT):
            if name in self.locals or name in self.shared:
                self.fail("BT0384", target, f"cannot bind `{name}` twice", help="each shared array gets its own name")
            self.shared[name] = ir.Param(name, value.ty, target)
            return ir.SharedDecl(name=name, ty=value.ty, src=node)
        if name in self.shared:
            self.fail("BT0384", target, f"cannot assign to shared array `{name}`", help=f"write its elements: `{name}[k] = ...`")
        if isinstance(value.ty, (TupleT, ValuesT)):
            self.fail("BT0308", node, f"`{name}` cannot hold a tuple",
                      help=f"unpack it into names: `a, b = {ast.unparse(value.src) if value.src else '...'}`")
        if isinstance(value.ty, (SliceT, TensorT, ShapeT, WitnessTupleT)):
            self.fail("BT0308", node, f"`{name}` cannot hold a value of type {value.ty}",
                      help="index the parameter directly, or unpack index_Nd() into names")
        if value.ty == VOID:
            self.fail("BT0308", node, "this call returns nothing")
        if is_record(value.ty):
            self.fail("BT0308", node, f"`{name}` cannot hold a record",
                      help=f"read its fields where they are used, e.g. `{ast.unparse(value.src)}.{value.ty.fields[0][0]}`, "
                           "or copy the whole element into a disjoint output: `out[i] = ...`")
        local = self.locals.get(name)
        if local is None and self.depth == 1 and self.assign_counts.get(name, 0) == 1:
            self.stable[name] = value
        if local is None:
            ty = self.refined.get(name, value.ty)
            if isinstance(value.ty, WitnessT):
                if (isinstance(value, ir.Var) and self.assign_counts.get(name, 0) > 1
                        and name not in self.hints.stepped_copies):
                    # `k = i` then `k = ...`: the copy is a plain index, not a witness (unless every
                    # later binding steps it by the grid's total threads, which a pass learns)
                    self.witness_copies[name] = value.ty
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
        if local.witness and self.grid_stride_step(name, local, value):
            return ir.Assign(name=name, value=value, src=node)
        if name in self.witness_copies and self.grid_stride_step(name, _Local(self.witness_copies[name]), value):
            self.stride_steps[name] = self.stride_steps.get(name, 0) + 1
        if local.witness:
            stride = isinstance(local.ty, WitnessT)
            self.fail("BT0384", target, f"cannot assign twice to thread index `{name}`",
                      label="a ThreadIndex witness is immutable" + (
                          ", but for a step of the grid's total threads" if stride else ""),
                      help=f"compute into a new name, e.g. `k = {name} + 1`; only `{name}` itself can index a disjoint write"
                      + (f"; a grid-stride loop steps `{name} += {grid_total_spelling(local.ty)}`" if stride else ""))
        if isinstance(local.ty, Weak) and not isinstance(value_type(value.ty), Weak):
            self.refine(name, value_type(value.ty), node)
            return ir.Assign(name=name, value=value, src=node)
        value = self.coerce(value, local.ty, value.src or node)
        return ir.Assign(name=name, value=value, src=node)

    def store(self, target: ast.Subscript, value_node: ast.AST, node: ast.stmt):
        param, indices = self.subscript_parts(target)
        elem = param.ty.elem
        value = self.expr(value_node)
        if is_record(elem) or is_record(value.ty):
            if value.ty != elem or not isinstance(value, ir.Load) or isinstance(value, ir.FieldLoad):
                self.type_mismatch(value_node, f"an element of `{param.name}`", elem, value.ty,
                                   help="a record element takes a whole element of the same record, "
                                        "or its fields one at a time: `out[i].x = v`")
        value = self.coerce(value, elem, value_node)
        return ir.Store(param=param.name, indices=indices, value=value, src=target)

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
            if not is_intlike(value_type(a.ty)):
                self.type_mismatch(a_node, "range bound", "an integer", a.ty)
        if len(args) == 1:
            args = [ir.Const(WEAK_INT, value=0, src=it), args[0]]
        if len(args) == 2:
            args.append(ir.Const(WEAK_INT, value=1, src=it))
        start, stop, step = args
        ty = self.unify_all([start, stop, step], it)
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
        if existing is None and self.grid_stride_range(name, start, step):
            # range(<witness>, n, <grid's total threads along its axis>): every value is in this
            # thread's residue class along that axis
            self.locals[name] = _Local(start.ty, witness=True)
        elif existing is None:
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
            if isinstance(self.ret, TupleT):
                items = node.value.elts if isinstance(node.value, ast.Tuple) else None
                if items is None or len(items) != len(self.ret.elems):
                    self.fail("BT0308", node.value, f"device function `{self.device_fn.name}` returns {self.ret}",
                              help=f"return {len(self.ret.elems)} values: `return a, b`")
                return ir.Return(values=[self.coerce(self.expr(v), t, v) for v, t in zip(items, self.ret.elems)],
                                 src=node)
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

    # ------------------------------------------------------------ values
    def name_value(self, name: str, node: ast.Name) -> ir.Expr | None:
        if name in self.locals:
            return ir.Var(self.locals[name].ty, name=name, src=node)
        if name in self.params:
            return ir.ParamRef(self.params[name].ty, name=name, src=node)
        return None

    def expr_Attribute(self, node: ast.Attribute):
        field = self.record_field_load(node)
        if field is not None:
            return field
        part = self.complex_attribute(node)
        if part is not None:
            return part
        # thread geometry: simt.thread_idx.x ...
        dotted = resolve_dotted(node, self.ns)
        if dotted in MATH_CONSTANTS:
            return self.literal(MATH_CONSTANTS[dotted], node)
        if dotted and dotted.startswith(SIMT_MODULE + "."):
            parts = dotted[len(SIMT_MODULE) + 1:].split(".")
            if len(parts) == 2 and parts[0] in GEOMETRY and parts[1] in ("x", "y", "z"):
                return ir.Intrinsic(I64, name=f"{parts[0]}.{parts[1]}", src=node)
            self.fail("BT0425", node, f"`simt.{'.'.join(parts)}` is not a value",
                      help="thread geometry is simt.thread_idx/block_idx/block_dim/grid_dim with .x, .y or .z")
        if isinstance(node.value, ast.Name) and node.attr == "size" and (
                node.value.id in self.params or node.value.id in self.shared):
            return self.array_size(node)
        if isinstance(node.value, ast.Name) and node.value.id in self.params and node.attr == "shape":
            ty = self.params[node.value.id].ty
            if not isinstance(ty, (SliceT, TensorT)):
                self.type_mismatch(node, "`.shape`", "a slice or tensor", ty)
            return ir.ParamRef(ShapeT(ty.rank), name=node.value.id, src=node)
        ported = foreign_name(node.value, self.ns) or foreign_name(node, self.ns)
        if ported is not None:
            self.fail("BT0425", node, f"`{ast.unparse(node)}` is {ported[0]}'s, not a kernel value",
                      help=f"write {ported[1]}" + (f".{node.attr}" if foreign_name(node.value, self.ns) else ""))
        self.fail("BT0425", node, f"no attribute `{ast.unparse(node)}` in kernels",
                  help="parameters have `.shape` and `.size`; thread geometry is under `simt.`")

    def array_size(self, node: ast.Attribute) -> ir.Expr:
        """``a.size``: the element count, as NumPy's (``len`` of a slice, the product of a tensor's shape)."""
        name = node.value.id
        if name in self.shared:
            return self.call_len(ast.copy_location(ast.Call(func=ast.Name("len"), args=[node.value], keywords=[]), node))
        ty = self.params[name].ty
        if not isinstance(ty, (SliceT, TensorT)):
            self.type_mismatch(node, "`.size`", "a slice or tensor", ty)
        if isinstance(ty, SliceT):
            return ir.Len(I64, param=name, src=node)
        size = ir.Shape(I64, param=name, axis=0, src=node)
        for axis in range(1, ty.rank):
            size = ir.BinOp(I64, op="*", lhs=size, rhs=ir.Shape(I64, param=name, axis=axis, src=node), src=node)
        return size

    def expr_Subscript(self, node: ast.Subscript):
        base = node.value
        if isinstance(base, ast.Attribute) and base.attr == "shape":
            shape = self.expr(base)
            axis = fold_constant(node.slice, self.consts)
            if not isinstance(axis, int) or isinstance(axis, bool) or not 0 <= axis < shape.ty.rank:
                self.fail("BT0308", node.slice, f"`.shape` takes a constant axis in 0..{shape.ty.rank - 1}")
            return ir.Shape(I64, param=shape.name, axis=axis, src=node)
        if self.is_constant_array(base):
            return self.constant_array_load(node)
        param, indices = self.subscript_parts(node)
        return ir.Load(param.ty.elem, param=param.name, indices=indices, src=node)

    def subscript_parts(self, node: ast.Subscript) -> tuple[ir.Param, list[ir.Expr]]:
        if isinstance(node.value, ast.Name) and node.value.id in self.poisoned and node.value.id not in self.locals:
            raise Abort  # its binding already failed with a diagnostic
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
            if not is_intlike(value_type(idx.ty)):
                self.type_mismatch(idx_node, "an index", "an integer", idx.ty,
                                   help=_float_index_help(idx_node, self.stable))
            if isinstance(idx.ty, Weak):
                idx = self.coerce(idx, I64, idx_node)
            self.check_constant_index(param, len(indices), idx_node)
            indices.append(idx)
        return param, indices

    def check_constant_index(self, param: ir.Param, axis: int, node: ast.AST) -> None:
        """A constant index must name an element: not negative (kernels do not count from the end),
        and within a static shared array's extent."""
        k = fold_constant(node, self.consts)
        if not isinstance(k, int) or isinstance(k, bool):
            return
        shape = param.ty.shape if isinstance(param.ty, SharedT) and not (param.ty.dynamic or param.ty.view) else ()
        if k < 0:
            self.fail("BT0600", node, f"index {k} is before the start of `{param.name}`",
                      label="a negative index does not count from the end in kernels",
                      help=f"index from the start: `{param.name}[len({param.name}) - {-k}]`" if param.ty.rank == 1
                      else "index from the start of each axis")
        if shape and k >= shape[axis]:
            along = "" if len(shape) == 1 else f" along axis {axis}"
            self.fail("BT0600", node, f"index {k} is past the end of shared array `{param.name}`",
                      label=f"`{param.name}` has {shape[axis]} elements{along}")

    def expr_Call(self, node: ast.Call):
        func = node.func
        dotted = resolve_dotted(func, self.ns)
        ported = None if isinstance(func, ast.Name) and (func.id in self.functions.defs or func.id in self.locals) \
            else foreign_call_help(node, self.ns)
        if ported is not None:   # numba's, NumPy's or Python's name for what kernels spell otherwise
            self.fail("BT0425", func, ported[0], help=ported[1])
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.poisoned
                and func.value.id not in self.locals):
            raise Abort  # a method of a parameter whose annotation was already reported
        if node.keywords and not (dotted and dotted.startswith(SIMT_MODULE + ".")):
            self.fail("BT0200", node, "keyword arguments are not supported in kernel calls")
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.params:
            return self.call_method(node, self.params[func.value.id], func.attr)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.shared:
            return self.call_method(node, self.shared[func.value.id], func.attr)
        conjugate = self.complex_method(node)
        if conjugate is not None:
            return conjugate
        if dotted and dotted.startswith(RANDOM_MODULE + "."):
            return self.call_random(node, dotted[len(RANDOM_MODULE) + 1:])
        if isinstance(func, ast.Name) and func.id == "len" and "len" not in self.ns:
            return self.call_len(node)
        if isinstance(func, ast.Name) and func.id in ("min", "max", "abs") and func.id not in self.ns:
            return self.call_math(node, "fabs" if func.id == "abs" else func.id)
        if dotted and dotted.startswith(TYPES_MODULE + "."):
            if dotted.rsplit(".", 1)[-1] in COMPLEX:
                return self.complex_call(node, dotted.rsplit(".", 1)[-1])
            return self.cast_call(node, dotted)
        if dotted and dotted.startswith("math."):
            return self.call_math(node, dotted[5:])
        if dotted in (SIMT_MODULE + ".grid", SIMT_MODULE + ".gridsize"):
            return self.call_grid(node, dotted[len(SIMT_MODULE) + 1:])
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
                  help=foreign_type_help(func, self.ns)
                  or "kernels call casts (f32(x)), len(), math functions and simt intrinsics")

    def call_grid(self, node: ast.Call, name: str) -> ir.Expr:
        """numba's spellings: ``grid(n)`` is this thread's index along x (, y (, z)), ``gridsize(n)``
        the grid's total threads along each axis; x comes first, as in ``cuda.grid``."""
        dims = fold_constant(node.args[0], self.consts) if len(node.args) == 1 else None
        if dims not in (1, 2, 3) or isinstance(dims, bool):
            self.fail("BT0308", node, f"`simt.{name}(n)` takes one constant number of axes: 1, 2 or 3")
        if name == "grid":
            self.index_dims.add(dims)
            ty = WitnessT(1, 0) if dims == 1 else WitnessTupleT(dims, x_first=True)
            return ir.ThreadIndex(ty, dims=dims, src=node)
        totals = [ir.BinOp(I64, op="*", lhs=ir.Intrinsic(I64, name=f"grid_dim.{axis}", src=node),
                           rhs=ir.Intrinsic(I64, name=f"block_dim.{axis}", src=node), src=node) for axis in "xyz"[:dims]]
        return totals[0] if dims == 1 else ir.Values(ValuesT(dims), values=totals, src=node)

    # ------------------------------------------------------------ typing
    def value_type(self, ty):
        return value_type(ty)

    def retype_other(self, value: ir.Expr, ty: Scalar) -> ir.Expr:
        if isinstance(value, ir.Intrinsic):
            return ir.Intrinsic(ty, name=value.name, args=[self.retype(a, ty) for a in value.args], src=value.src)
        if isinstance(value, ir.ConstArrayLoad):
            return self.retype_constant_array(value, ty)
        return super().retype_other(value, ty)

    def refine(self, name: str, ty: Scalar, node) -> None:
        if name in self.refinements and self.refinements[name] != ty:
            self.type_mismatch(node, f"`{name}`", str(self.refinements[name]), ty)
        self.refinements[name] = ty
        self.locals[name].ty = ty

    def _final_type(self, ty):
        return ty.default if isinstance(ty, Weak) else ty

    def finalize(self, body: list[ir.Stmt]) -> None:
        """A variable takes its local's final type (refined by later uses); literals their defaults."""
        for e in ir.walk_exprs(body):
            if isinstance(e, ir.Var) and not isinstance(e.ty, Weak) and e.name in self.locals:
                e.ty = self._final_type(self.locals[e.name].ty)
        super().finalize(body)
