"""Tuple assignment in SIMT kernels: ``a, b = b, a``, ``row, col = simt.index_2d()``,
``x, y = f(...)`` of a device function that returns a tuple.

A mixin of the SIMT kernel typer (whose ``expr``, ``bind``, ``declare_local``,
``locals`` and ``fail`` it uses); only plain names are targets.
"""

from __future__ import annotations

import ast

from buildtile.backends.simt import ir
from buildtile.backends.simt.types import TupleT, ValuesT, WitnessT, WitnessTupleT


class TupleAssignment:
    """Binds each name of a tuple target; Python's order: every value is read first."""

    def assign_tuple(self, target: ast.Tuple, value_node: ast.AST, node: ast.stmt):
        if not all(isinstance(e, ast.Name) for e in target.elts):
            self.fail("BT0200", target, "a tuple assignment binds plain names",
                      help="assign elements one at a time: `c[i] = a`")
        if isinstance(value_node, ast.Tuple):
            return self.assign_values(target, value_node, node)
        value = self.expr(value_node)
        if isinstance(value.ty, ValuesT):
            if len(target.elts) != len(value.values):
                self.fail("BT0308", target, f"`{ast.unparse(value_node)}` gives {len(value.values)} values, "
                          f"{len(target.elts)} names unpack it", help=f"unpack it into {len(value.values)} names")
            return [self.bind(t, v, node) for t, v in zip(target.elts, value.values)]
        if isinstance(value.ty, TupleT):
            return self.unpack_call(target, value, node)
        if not isinstance(value.ty, WitnessTupleT):
            self.fail("BT0308", value_node, f"cannot unpack a value of type {value.ty}",
                      help="unpack a tuple `a, b = b, a`, `simt.index_2d()`, `simt.grid(2)` or a device function's tuple")
        call = f"grid({value.ty.dims})" if value.ty.x_first else f"index_{value.ty.dims}d()"
        if len(target.elts) != value.ty.dims:
            self.fail("BT0308", target, f"`simt.{call}` gives {value.ty.dims} indices",
                      help=f"unpack it into {value.ty.dims} names")
        out = []
        for k, name_node in enumerate(target.elts):
            axis = value.ty.dims - 1 - k if value.ty.x_first else k
            component = ir.ThreadIndex(WitnessT(value.ty.dims, axis), dims=value.ty.dims, src=value_node)
            out.append(self.bind(name_node, component, node))
        return out

    def assign_values(self, target: ast.Tuple, value_node: ast.Tuple, node: ast.stmt):
        """``a, b = b, a``: every value is read before any name is bound, as in Python."""
        if len(target.elts) != len(value_node.elts):
            self.fail("BT0308", node, f"{len(value_node.elts)} values are assigned to {len(target.elts)} names")
        if any(isinstance(e, ast.Starred) for e in value_node.elts):
            self.fail("BT0200", value_node, "starred values are not supported in kernels")
        names = {t.id for t in target.elts}
        read = {n.id for v in value_node.elts for n in ast.walk(v) if isinstance(n, ast.Name)}
        values = [self.expr(v) for v in value_node.elts]
        if not names & read:
            return [self.bind(t, v, node) for t, v in zip(target.elts, values)]
        # the values go through temporaries (names no Python code can spell) before the targets change
        out, temps = [], []
        for k, v in enumerate(values):
            temp = ast.Name(id=f"{target.elts[k].id}.{node.lineno}.{node.col_offset}", ctx=ast.Store())
            ast.copy_location(temp, target.elts[k])
            out.append(self.bind(temp, v, node))
            temps.append(ir.Var(self.locals[temp.id].ty, name=temp.id, src=value_node.elts[k]))
        return out + [self.bind(t, v, node) for t, v in zip(target.elts, temps)]

    def unpack_call(self, target: ast.Tuple, value: ir.Expr, node: ast.stmt):
        """``x, y = f(...)`` of a device function returning a tuple: the call runs once."""
        if len(target.elts) != len(value.ty.elems):
            self.fail("BT0308", target, f"`{value.func}` returns {len(value.ty.elems)} values, "
                      f"{len(target.elts)} names unpack it", help=f"unpack it into {len(value.ty.elems)} names")
        temp = f"{value.func}.{node.lineno}.{node.col_offset}"
        self.declare_local(temp, value.ty)
        out = [ir.Assign(name=temp, value=value, src=node)]
        for k, t in enumerate(target.elts):
            out.append(self.bind(t, ir.TupleItem(value.ty.elems[k], tuple=temp, index=k, src=value.src), node))
        return out
