"""``@tile.function`` helpers, inlined where they are called.

A helper is a module-level function decorated with ``@tile.function``. At a
call site in a kernel (or in another helper) its body is typed in a scope of
its own -- its parameters bound to the call's arguments (tiles, scalars, or
constants, which stay constants so they may be shapes), the kernel's
parameters out of sight -- and its statements are placed before the
statement that calls it; the call's value is its ``return`` expression (a
tuple returns several, for ``a, b = helper(...)``). Diagnostics point into
the helper's source. Locals of an inlined body are renamed apart
(``name__helper1``), so two calls never share a variable. A helper sees no
array, so it stores nothing (stores are the kernel's, where ownership is
checked); it returns once, at its end, and does not call itself (BT0200).
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass

from buildtile.backends.common.typer import Abort
from buildtile.backends.tile import ir
from buildtile.backends.tile.types import ArrayT, Weak
from buildtile.discovery import resolve_dotted

#: the decorator that marks a helper
FUNCTION = "buildtile.tile.function"


@dataclass
class _Scope:
    """The typer state a helper body gets a fresh copy of."""

    locals: dict
    const_locals: dict
    counts: Counter
    params: dict
    poisoned: set
    tile_shapes: dict


def find_helpers(module: ast.Module, ns: dict[str, str]) -> dict[str, ast.FunctionDef]:
    """The module's ``@tile.function`` helpers by name."""
    found = {}
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and any(_is_function_decorator(d, ns) for d in node.decorator_list):
            found[node.name] = node
    return found


def _is_function_decorator(node: ast.expr, ns: dict[str, str]) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return resolve_dotted(target, ns) == FUNCTION


class TileFunctions:
    """Inlining of ``@tile.function`` helpers, for the tile typer."""

    def init_functions(self) -> None:
        self.helpers = find_helpers(self.src.module_ast, self.ns)
        self.module_functions = {n.name for n in self.src.module_ast.body if isinstance(n, ast.FunctionDef)}
        self.inlining: list[str] = []
        self.pending: list[ir.Stmt] = []
        self.inlined_count = 0

    # ------------------------------------------------------------ statements carry their helpers' bodies
    def stmt(self, node: ast.stmt):
        outer, self.pending = self.pending, []
        try:
            result = super().stmt(node)
            before = self.pending
        finally:
            self.pending = outer
        if not before:
            return result
        after = [] if result is None else result if isinstance(result, list) else [result]
        return before + after

    def error(self, code: str, node: ast.AST, message: str, label: str = "", help: str = "") -> None:
        before = len(self.diagnostics)
        super().error(code, node, message, label, help)
        new = self.diagnostics[-1]
        if any(d == new for d in self.diagnostics[:before]):
            self.diagnostics.pop()   # a helper called twice reports its error once

    # ------------------------------------------------------------ calls
    def helper_call(self, node: ast.Call) -> ir.Expr | None:
        """The value of ``node`` where it calls a helper; None where it calls something else."""
        values = self.inline(node, None)
        if values is None:
            return None
        if isinstance(values, list):
            self.fail("BT0308", node, f"`{node.func.id}` returns {len(values)} values",
                      help=f"unpack them: `{', '.join('v%d' % i for i in range(len(values)))} = {ast.unparse(node)}`")
        return values

    def helper_tuple(self, node: ast.Call, count: int) -> list[ir.Expr] | None:
        """The values of ``a, b = helper(...)``; None where ``node`` is no helper call."""
        values = self.inline(node, count)
        if values is None:
            return None
        got = len(values) if isinstance(values, list) else 1
        if got != count:
            self.fail("BT0308", node, f"`{node.func.id}` returns {got} value{'s' if got != 1 else ''}, "
                      f"but {count} names are assigned")
        return values

    def inline(self, node: ast.Call, count: int | None):
        func = node.func
        if not isinstance(func, ast.Name) or func.id in self.locals or func.id in self.params:
            return None
        name = func.id
        helper = self.helpers.get(name)
        if helper is None:
            if name in self.module_functions:
                self.fail("BT0425", func, f"`{name}` is a plain Python function",
                          help="decorate it with `@tile.function` to call it from tile kernels (it is inlined)")
            return None
        if name in self.inlining:
            chain = " -> ".join(self.inlining[self.inlining.index(name):] + [name])
            self.fail("BT0200", node, f"recursive call of `{name}`",
                      label=f"`{name}` is being inlined already: {chain}",
                      help="helpers are inlined, so they cannot recurse; write a loop with `tile.range`")
        bound = self.bind_helper_args(node, helper)
        return self.inline_body(helper, bound, node)

    def bind_helper_args(self, node: ast.Call, helper: ast.FunctionDef) -> list[tuple[ast.arg, ast.AST]]:
        args = helper.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
            self.fail("BT0200", helper, f"helper `{helper.name}` takes plain positional parameters only",
                      help="remove *args, **kwargs and keyword-only parameters")
        names = [a.arg for a in args.args]
        defaults = dict(zip(names[len(names) - len(args.defaults):], args.defaults))
        if len(node.args) > len(names):
            self.fail("BT0308", node, f"`{helper.name}` takes {len(names)} argument{'s' if len(names) != 1 else ''}, "
                      f"got {len(node.args)}")
        given = dict(zip(names, node.args))
        for kw in node.keywords:
            if kw.arg not in names or kw.arg in given:
                which = "a repeated" if kw.arg in given else "an unknown"
                self.fail("BT0308", kw.value if kw.arg in given else node,
                          f"`{helper.name}` got {which} argument `{kw.arg}`",
                          help=f"`{helper.name}` takes ({', '.join(names)})")
            given[kw.arg] = kw.value
        bound = []
        for a in args.args:
            if a.arg in given:
                bound.append((a, given[a.arg]))
            elif a.arg in defaults:
                bound.append((a, defaults[a.arg]))
            else:
                self.fail("BT0308", node, f"`{helper.name}` is missing its argument `{a.arg}`",
                          help=f"`{helper.name}` takes ({', '.join(names)})")
        for _, value in bound:
            if isinstance(value, ast.Name) and value.id in self.params and isinstance(self.params[value.id].ty, ArrayT):
                self.fail("BT0308", value, f"`{value.id}` is an array: helpers take tiles and scalars",
                          label=f"a {self.params[value.id].ty} parameter of the kernel",
                          help=f"load a tile of it in the kernel (`tile.load({value.id}, ...)`) and pass the tile")
        return bound

    def inline_body(self, helper: ast.FunctionDef, bound: list[tuple[ast.arg, ast.AST]], call: ast.Call):
        # the arguments, in the caller's scope: constants stay constants, values are bound to the parameters
        counts = assignment_counts(helper)
        consts, values = {}, []
        for a, value_node in bound:
            folded = self.const(value_node) if counts[a.arg] == 0 else None
            if folded is not None:
                consts[a.arg] = folded
            else:
                values.append((a, self.expr(value_node)))
        self.inlined_count += 1
        suffix = f"__{helper.name}{self.inlined_count}"
        outer = _Scope(self.locals, self.const_locals, self.counts, self.params, self.poisoned, self.tile_shapes)
        self.locals, self.const_locals, self.params, self.poisoned, self.tile_shapes = {}, consts, {}, set(), {}
        self.counts = counts
        self.inlining.append(helper.name)
        failed = len(self.diagnostics)
        try:
            body = []
            for a, value in values:
                counts[a.arg] += 1
                body.append(self.bind(ast.copy_location(ast.Name(id=a.arg, ctx=ast.Store()), a), value, a))
            *stmts, last = helper.body or [ast.Pass()]
            self.refuse_early_returns(helper, stmts)
            body += self.block(stmts)
            result = self.helper_result(helper, last, body)
            inner_locals = self.locals
        finally:
            self.locals, self.const_locals, self.counts = outer.locals, outer.const_locals, outer.counts
            self.params, self.poisoned, self.tile_shapes = outer.params, outer.poisoned, outer.tile_shapes
            self.inlining.pop()
        if len(self.diagnostics) > failed:
            raise Abort     # the helper's errors are reported where they are, in the helper
        renames = {name: name + suffix for name in inner_locals}
        # the first statements bind the parameters to the caller's values: those name the caller's locals
        typed_here = body[len(values):]
        for e in ir.walk_exprs(typed_here + (result if isinstance(result, list) else [result] if result else [])):
            if isinstance(e, ir.Var) and e.name in renames:
                e.name = renames[e.name]
        for s in ir.walk_stmts(body):
            if isinstance(s, ir.Assign) and s.name in renames:
                s.name = renames[s.name]
            if isinstance(s, ir.ForRange) and s.var in renames:
                s.var = renames[s.var]
        self.locals.update({renames[n]: ty for n, ty in inner_locals.items()})
        self.pending.extend(body)
        if result is None:
            self.fail("BT0308", call, f"`{helper.name}` returns nothing", help="a helper ends with `return value`")
        return result

    def refuse_early_returns(self, helper: ast.FunctionDef, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Return):
                    self.fail("BT0200", node, f"helper `{helper.name}` returns before its end",
                              help="a helper returns once, as its last statement; choose values with tile.where")

    def helper_result(self, helper: ast.FunctionDef, last: ast.stmt, body: list[ir.Stmt]):
        if not isinstance(last, ast.Return):
            body += self.block([last])
            return None
        if last.value is None:
            return None
        outer, self.pending = self.pending, []      # helpers called in the return value run before it
        try:
            if isinstance(last.value, ast.Tuple):
                return [self.defaulted_value(self.expr(v), v) for v in last.value.elts]
            return self.defaulted_value(self.expr(last.value), last.value)
        finally:
            body += self.pending
            self.pending = outer

    def defaulted_value(self, value: ir.Expr, node: ast.AST) -> ir.Expr:
        if isinstance(value.ty, Weak):
            return self.coerce(value, value.ty.default, node)
        return value


def assignment_counts(fn: ast.FunctionDef) -> Counter:
    """How often each name of ``fn`` is bound (a name bound once may be a constant)."""
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
