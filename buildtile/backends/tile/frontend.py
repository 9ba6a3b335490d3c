"""Stage 1: a tile kernel's Python AST -> typed tile IR, for one specialization.

The specialization fixes every ``tile.Out`` parameter's tile shape, so all
tile shapes are constants here (``shapes``). Scalars follow the rules both
languages share (``buildtile.backends.common.typer``); a scalar meeting a tile
takes the tile's dtype. Tile operands must agree on dtype (``astype``
converts) and broadcast NumPy-style; the tile operations are in
``operations``. Errors are collected as diagnostics, never raised mid-walk.
"""

from __future__ import annotations

import ast

from buildtile.backend import KernelSource
from buildtile.backends.common.typer import Abort, as_load
from buildtile.backends.tile import chunks, ir, outputs
from buildtile.backends.tile.functions import TileFunctions, assignment_counts
from buildtile.backends.tile.gather import TileGather
from buildtile.backends.tile.philox import TileRandom
from buildtile.backends.tile.scatter import TileScatter
from buildtile.backends.tile.operations import MATH, TileOperations
from buildtile.backends.tile.params import TILE_MODULE, TYPES_MODULE, parse_param_type
from buildtile.backends.tile.types import BOOL, I64, ArrayT, Scalar, ShapeT, TileIdT, TileT, Weak, value_type
from buildtile.discovery import resolve_dotted


def build_typed_ir(source: KernelSource, tile_shapes: dict[str, tuple[int, ...]]):
    """Type a kernel for one specialization; returns (KernelIR or None, diagnostics)."""
    typer = _Typer(source, tile_shapes)
    kernel = typer.run()
    return (None if typer.diagnostics else kernel), typer.diagnostics


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
#: the largest constant exponent ``x ** k`` expands into multiplications
MAX_POWER = 8


class _Typer(TileFunctions, TileRandom, TileGather, TileScatter, TileOperations):
    kernels = "tile kernels"
    reference = "see the Tile language reference (docs/tile.md)"
    operands = "scalars or tiles"
    unsupported_help = _UNSUPPORTED_HELP

    def __init__(self, source: KernelSource, tile_shapes: dict[str, tuple[int, ...]]) -> None:
        super().__init__(source)
        self.tile_shapes = tile_shapes
        self.const_locals: dict[str, object] = {}
        self.counts = assignment_counts(source.node)
        self.loop_depth = 0         # how many loops enclose the statement being typed
        self.init_functions()

    # ------------------------------------------------------------ kernel
    def run(self) -> ir.KernelIR:
        fn = self.src.node
        params = self.kernel_params(fn, parse_param_type,
                                    "annotate it with a scalar (f32, i64, ...), Tensor[T, rank] or tile.Out[T, rank]")
        outs = [p for p in params if isinstance(p.ty, ArrayT) and p.ty.is_out]
        if not outs and not self.diagnostics:
            self.error("BT0308", fn, f"tile kernel `{fn.name}` has no tile.Out parameter",
                       help="a tile kernel writes its results into a tile.Out[T, rank] parameter, "
                            "whose partition fixes the grid")
        if outs:
            outs = self.order_outputs(outs)
        self.check_returns_nothing(fn, "store results into a tile.Out parameter")
        body = self.copy_reassigned_params(fn, params) + self.block(fn.body)
        self.finalize(body)
        shapes = {p.name: tuple(self.tile_shapes.get(p.name, ())) for p in outs}
        return ir.KernelIR(fn.name, params, dict(self.locals), body, shapes)

    def order_outputs(self, outs: list[ir.Param]) -> list[ir.Param]:
        """The primary output first (its partition fixes the grid); followers' tile shapes checked."""
        primary = outputs.primary_output(outs)
        ordered = [primary] + [p for p in outs if p is not primary]
        lead = self.tile_shapes.get(primary.name)
        for p in ordered[1:]:
            shape = self.tile_shapes.get(p.name)
            why = None if lead is None or shape is None or p.ty.rank == primary.ty.rank \
                else outputs.shape_mismatch(primary.name, tuple(lead), p.name, tuple(shape))
            if why is not None:
                self.error("BT0308", p.src or self.src.node, f"the tiles of `{p.name}` cannot follow `{primary.name}`'s",
                           label=why,
                           help=f"a lower-rank output shares the grid of `{primary.name}` along its leading axes: "
                                f"declare its tile shape as `{primary.name}`'s there")
                # type the body against the shape it must have: one error, not one per store
                self.tile_shapes = {**self.tile_shapes, p.name: tuple(lead[:p.ty.rank])}
        return ordered

    # ------------------------------------------------------------ statements
    def expression_statement(self, node: ast.Expr):
        call = node.value
        if isinstance(call, ast.Call):
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr == "store" and isinstance(func.value, ast.Name) \
                    and func.value.id in self.params:
                return self.store_method(call, self.params[func.value.id])
            if resolve_dotted(func, self.ns) == TILE_MODULE + ".store":
                return self.store_call(call)
            if resolve_dotted(func, self.ns) == TILE_MODULE + ".atomic_add":
                return self.atomic_add(call)
        self.expr(node.value)
        self.fail("BT0200", node, "expression statement has no effect",
                  help="assign the value to a name, or store it with `z.store(t)`")

    def assign(self, target: ast.AST, value_node: ast.AST, node: ast.stmt):
        if isinstance(target, ast.Tuple):
            if isinstance(value_node, ast.Call):
                values = self.helper_tuple(value_node, len(target.elts))
                if values is not None:
                    return [self.bind(self.assign_target(t), v, node) for t, v in zip(target.elts, values)]
            if not (isinstance(value_node, ast.Tuple) and len(value_node.elts) == len(target.elts)):
                folded = self.const(value_node)
                if isinstance(folded, tuple) and len(folded) == len(target.elts):
                    return [self.bind_const(t, v, node) for t, v in zip(target.elts, folded)]
                self.fail("BT0200", target, "tuple assignment needs a tuple of the same length on the right")
            return [self.assign(t, v, node) for t, v in zip(target.elts, value_node.elts)]
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

    def stmt_AugAssign(self, node: ast.AugAssign):
        target_is_tile = isinstance(node.target, ast.Name) and isinstance(self.locals.get(node.target.id), TileT)
        if not (isinstance(node.op, ast.Pow) and target_is_tile):
            return super().stmt_AugAssign(node)
        # `v **= k` is `v = v ** k`, whose typing says which exponents are supported
        self.check_update_target(node.target)
        power = ast.BinOp(left=as_load(node.target), op=node.op, right=node.value)
        ast.copy_location(power, node)
        power.end_lineno, power.end_col_offset = node.end_lineno, node.end_col_offset
        return self.assign(node.target, power, node)

    def assign_target(self, target: ast.AST) -> ast.Name:
        if not isinstance(target, ast.Name):
            self.fail("BT0200", target, "cannot assign to this expression")
        self.check_assignable(target)
        return target

    def check_update_target(self, target: ast.AST) -> None:
        if not isinstance(target, ast.Name):
            self.fail("BT0200", target, "only a plain name can be updated in place")

    def declare_local(self, name: str, ty: Scalar) -> None:
        self.locals[name] = ty
        self.counts[name] += 1      # the copy is a binding too: the name is no constant

    def param_value(self, param: ir.Param) -> ir.Expr:
        return ir.ScalarParam(param.ty, name=param.name, src=param.src)

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
                self.tile_rebinding(name, existing, ty, node)
            return ir.Assign(name=name, value=value, src=node)
        return ir.Assign(name=name, value=self.coerce(value, value_type(existing), value.src or node), src=node)

    def tile_rebinding(self, name: str, existing, ty, node: ast.stmt):
        """Refuse a new type for a name that holds a tile, saying what to write instead."""
        if isinstance(existing, TileT) and isinstance(ty, TileT) and existing.shape == ty.shape:
            self.type_mismatch(node, f"`{name}`", existing, ty,
                               help=f"a name keeps one tile type; convert back with `(...).astype({existing.dtype})`")
        if isinstance(existing, TileT) and isinstance(ty, TileT) and self.loop_depth:
            self.fail("BT0308", node, f"`{name}` takes a new tile shape inside a loop: "
                      f"{_shape_text(existing.shape)} before, {_shape_text(ty.shape)} here",
                      label="tile shapes are fixed at compile time, the same in every iteration",
                      help=f"keep `{name}` at {_shape_text(existing.shape)} (reshape back before the next "
                           "iteration), or bind the new shape to a new name")
        self.type_mismatch(node, f"`{name}`", existing, ty,
                           help="a name keeps one tile type (dtype and shape); use a new name or .astype()")

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
            if step is None:
                step = self.int_scalar(it.args[2])    # a run-time step: its sign picks the loop's test
            elif not isinstance(step, int) or isinstance(step, bool):
                self.fail("BT0308", it.args[2], "the step of `tile.range` is an integer")
            elif step == 0:
                self.fail("BT0308", it.args[2], "the step of `tile.range` is zero", label="this loop would never end",
                          help="use a positive step to count up, a negative one to count down")
        name = node.target.id
        self.check_assignable(node.target)
        existing = self.locals.get(name)
        if existing is not None and value_type(existing) != I64:
            self.type_mismatch(node.target, f"`{name}`", existing, I64)
        self.locals[name] = I64
        self.loop_depth += 1
        try:
            body = self.block(node.body)
        finally:
            self.loop_depth -= 1
        return ir.ForRange(var=name, start=start, stop=stop, step=step, body=body, src=node)

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
        self.refuse_index_tiles(args["index"], param)
        index = self.index_list(args["index"], param.ty.rank)
        value = self.expr(args["tile"])
        return self.make_store(param, index, value, call)

    def refuse_index_tiles(self, index: ast.AST, param: ir.Param) -> None:
        """A tile of indices in a store is a scatter: any block may write any element (BT0499)."""
        for item in index.elts if isinstance(index, (ast.Tuple, ast.List)) else [index]:
            if isinstance(self.expr(item).ty, TileT):
                self.fail("BT0499", item, f"store at data-dependent indices: cannot store into `{param.name}` here",
                          label="a tile of indices may name elements that another block owns",
                          help=chunks.SCATTER_HELP.format(param=param.name))

    def make_store(self, param: ir.Param, index, value: ir.Expr, call: ast.Call) -> ir.Store:
        ty = param.ty
        if not isinstance(ty, ArrayT):
            self.type_mismatch(call, "a store target", "an array parameter", ty)
        if ty.is_out:
            shape = self.tile_shapes.get(param.name)
            if shape is None:
                raise Abort   # the specialization itself is invalid (reported elsewhere)
            if index is not None:
                shape = chunks.stored_shape(value.ty, shape)
            value = self.as_tile(value, ty.elem, shape, call, f"the tile stored into `{param.name}`")
        elif isinstance(value.ty, TileT):
            value = self.as_tile(value, ty.elem, value.ty.shape, call, "the stored tile")
        return ir.Store(param=param.name, index=index, value=value, src=call)

    # ------------------------------------------------------------ values
    def value_type(self, ty):
        return value_type(ty)

    def fold(self, node: ast.AST) -> ir.Expr | None:
        foldable = isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Attribute, ast.Subscript, ast.Compare, ast.BoolOp)) or (
            isinstance(node, ast.Call) and (resolve_dotted(node.func, self.ns) or "").startswith("math."))
        folded = self.const(node) if foldable else None
        if isinstance(folded, (int, float)):
            return self.literal(folded, node)
        return None

    def name_value(self, name: str, node: ast.Name) -> ir.Expr | None:
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
        return None

    def expr_Tuple(self, node: ast.Tuple):
        self.fail("BT0308", node, "a tuple is only a shape or an index here",
                  help="pass it to tile.load / tile.zeros / reshape ..., where a shape or an index is expected")

    # ------------------------------------------------------------ operators on tiles
    def binop(self, op: str, lhs: ir.Expr, rhs: ir.Expr, node, lnode, rnode) -> ir.Expr:
        if op == "**" and (isinstance(lhs.ty, TileT) or isinstance(rhs.ty, TileT)):
            return self.power(lhs, rhs, node, lnode, rnode)     # scalars follow the rules both languages share
        if isinstance(lhs.ty, TileT) or isinstance(rhs.ty, TileT):
            dtype, shape, (lhs, rhs) = self.elementwise([lhs, rhs], [lnode, rnode], node)
            self.check_operator(op, dtype, node)
            if op in ("<<", ">>"):
                self.check_shift(_splatted(rhs), dtype, rnode)
            if op == "/" and not dtype.is_float:
                self.type_mismatch(node, "true division `/`", "floats", dtype,
                                   help="use `//` for integer division, or convert with .astype(f32) first")
            return ir.BinOp(TileT(dtype, shape), op=op, lhs=lhs, rhs=rhs, src=node)
        return self.scalar_binop(op, lhs, rhs, node, lnode, rnode)

    def power(self, base: ir.Expr, exponent: ir.Expr, node, lnode, rnode) -> ir.Expr:
        """``t ** k`` of a tile for a small constant integer ``k``: multiplications (by squaring), in the
        lowering."""
        k = exponent.value if isinstance(exponent, ir.Const) and isinstance(exponent.ty, Weak) else None
        if not (isinstance(base.ty, TileT) and isinstance(k, int) and not isinstance(k, bool) and 0 <= k <= MAX_POWER):
            self.fail("BT0200", node, "operator `**` takes a constant integer exponent in tile kernels",
                      label=f"exponents 0..{MAX_POWER} are multiplications",
                      help=f"write `{ast.unparse(lnode)} * {ast.unparse(lnode)}` for a square, "
                           "or `tile.pow(x, y)` (`tile.sqrt`, `tile.exp2`) for other powers of floats")
        dtype = base.ty.dtype
        self.check_operator("*", dtype, node)
        power = ir.Splat(TileT(dtype, ()), value=self.coerce(exponent, dtype, rnode), src=rnode)
        return ir.BinOp(base.ty, op="**", lhs=base, rhs=self.broadcast_to(power, base.ty.shape), src=node)

    def unary(self, op: ast.unaryop, operand: ir.Expr, node: ast.UnaryOp) -> ir.Expr:
        ty = operand.ty
        if not isinstance(ty, TileT):
            return super().unary(op, operand, node)
        if isinstance(op, ast.UAdd):
            return operand
        if isinstance(op, ast.Not):
            if ty.dtype != BOOL:
                self.type_mismatch(node.operand, "`not`", "bool", ty)
            self.fail("BT0308", node, "`not` applies to scalar conditions", help="use `~mask` for a tile of bools")
        if isinstance(op, ast.Invert):
            if ty.dtype != BOOL and not ty.dtype.is_int:
                self.type_mismatch(node, "operator `~`", "an integer or bool", ty)
            return ir.UnaryOp(ty, op="~", operand=operand, src=node)
        if ty.dtype == BOOL:
            self.type_mismatch(node, "unary `-`", "a number", ty)
        return ir.UnaryOp(ty, op="-", operand=operand, src=node)

    def compare(self, op: str, lhs: ir.Expr, rhs: ir.Expr, node, lnode, rnode) -> ir.Expr:
        if isinstance(lhs.ty, TileT) or isinstance(rhs.ty, TileT):
            _, shape, (lhs, rhs) = self.elementwise([lhs, rhs], [lnode, rnode], node)
            return ir.Compare(TileT(BOOL, shape), op=op, lhs=lhs, rhs=rhs, src=node)
        return super().compare(op, lhs, rhs, node, lnode, rnode)

    def select(self, cond: ir.Expr, then: ir.Expr, orelse: ir.Expr, node: ast.IfExp) -> ir.Expr:
        if isinstance(then.ty, TileT) or isinstance(orelse.ty, TileT):
            self.fail("BT0308", node, "`a if cond else b` chooses between scalars", help="use `tile.where(cond, a, b)`")
        return super().select(cond, then, orelse, node)

    def as_bool(self, value: ir.Expr, node: ast.AST, context: str) -> ir.Expr:
        if isinstance(value.ty, TileT):
            message, help = _TILE_AS_CONDITION[context]
            self.fail("BT0308", node, message, help=help)
        return super().as_bool(value, node, context)

    def cast(self, value: ir.Expr, target: Scalar, node: ast.Call) -> ir.Expr:
        if isinstance(value.ty, TileT):
            return self.astype(value, target, node)
        return super().cast(value, target, node)

    # ------------------------------------------------------------ attributes, subscripts and calls
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
                  help="tiles have .astype(), .reshape(), .permute(), .transpose(), .T, "
                       ".sum/.prod/.max/.min/.argmax/.argmin(), .shape")

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

    def expr_Call(self, node: ast.Call):
        func = node.func
        dotted = resolve_dotted(func, self.ns)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.params \
                and isinstance(self.params[func.value.id].ty, ArrayT):
            return self.array_method(node, self.params[func.value.id], func.attr)
        inlined = self.helper_call(node)
        if inlined is not None:
            return inlined
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


#: a tile where a scalar condition belongs: the message and help, by the condition's context
_TILE_AS_CONDITION = {
    "condition": ("a condition is a scalar, not a tile", "choose per element with `tile.where(cond, a, b)`"),
    "boolop": ("`and`/`or` combine scalar conditions", "combine tiles of bools with `&` and `|`"),
    "ifexp": ("`a if cond else b` takes a scalar condition", "choose per element with `tile.where(cond, a, b)`"),
    "not": ("`not` applies to scalar conditions", "use `~mask` for a tile of bools"),
}


def _shape_text(shape: tuple[int, ...]) -> str:
    return f"({', '.join(map(str, shape))}{',' if len(shape) == 1 else ''})"


def _splatted(e: ir.Expr) -> ir.Expr:
    """The scalar a broadcast operand was made of (itself for a tile)."""
    while isinstance(e, (ir.Broadcast, ir.ExpandDims)):
        e = e.value
    return e.value if isinstance(e, ir.Splat) else e
