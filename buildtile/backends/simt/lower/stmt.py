"""SIMT statements as LLVM IR: assignments, guarded stores, branches and Python's loops."""

from __future__ import annotations

from buildtile.backends.common.llvm import reg_type, to_memory
from buildtile.backends.simt import ir
from buildtile.backends.simt.types import element_align, value_type


class StatementLowering:
    """The statements of the SIMT lowering."""

    def _fresh_block_after_terminator(self) -> None:
        if self.b.block.is_terminated:
            self.b.position_at_end(self.fn.append_basic_block("dead"))

    def stmts(self, stmts: list[ir.Stmt]) -> None:
        for stmt in stmts:
            self._fresh_block_after_terminator()
            getattr(self, "stmt_" + type(stmt).__name__)(stmt)

    def stmt_Assign(self, s: ir.Assign) -> None:
        self.b.store(self.expr(s.value), self.slots[s.name])

    def stmt_ExprStmt(self, s: ir.ExprStmt) -> None:  # noqa: D102
        self.expr(s.value)

    def stmt_Store(self, s: ir.Store) -> None:
        arr = self.params[s.param]
        indices = [self.index(i) for i in s.indices]
        # an out-of-range disjoint write is a handled branch: the store is skipped
        in_range = None
        for idx, extent in zip(indices, arr.shape):
            ok = self.b.icmp_unsigned("<", idx, extent)
            in_range = ok if in_range is None else self.b.and_(in_range, ok)
        value = self.expr(s.value)
        with self.b.if_then(in_range, likely=True):
            elem = arr.elem.field(s.field)[0] if isinstance(s, ir.FieldStore) else arr.elem
            stored = to_memory(self.b, value, elem)   # before the address, as LLVM has always seen it
            ptr, _ = self.element_pointer(s, arr, indices)
            self.b.store(stored, ptr, align=element_align(elem))

    def stmt_FieldStore(self, s: ir.FieldStore) -> None:
        self.stmt_Store(s)

    def stmt_If(self, s: ir.If) -> None:
        cond = self.expr(s.cond)
        then_bb = self.fn.append_basic_block("if.then")
        else_bb = self.fn.append_basic_block("if.else") if s.orelse else None
        merge = self.fn.append_basic_block("if.end")
        self.b.cbranch(cond, then_bb, else_bb or merge)
        for bb, body in ((then_bb, s.then), (else_bb, s.orelse)):
            if bb is None:
                continue
            self.b.position_at_end(bb)
            self.stmts(body)
            if not self.b.block.is_terminated:
                self.b.branch(merge)
        self.b.position_at_end(merge)

    def stmt_While(self, s: ir.While) -> None:
        head = self.fn.append_basic_block("while.cond")
        body = self.fn.append_basic_block("while.body")
        done = self.fn.append_basic_block("while.end")
        self.b.branch(head)
        self.b.position_at_end(head)
        self.b.cbranch(self.expr(s.cond), body, done)
        self.b.position_at_end(body)
        self.loops.append((head, done))
        self.stmts(s.body)
        self.loops.pop()
        if not self.b.block.is_terminated:
            self.b.branch(head)
        self.b.position_at_end(done)

    def stmt_ForRange(self, s: ir.ForRange) -> None:
        ty = value_type(self.kernel.locals[s.var])   # a grid-stride loop's variable is a witness
        signed = ty.kind == "int"
        # range() evaluates its arguments once; a hidden counter drives the loop so that
        # assigning the loop variable in the body does not change the iteration (Python semantics)
        counter = self.alloca_builder.alloca(reg_type(ty), name=f"{s.var}.iter")
        self.b.store(self.expr(s.start), counter)
        stop, step = self.expr(s.stop), self.expr(s.step)
        head = self.fn.append_basic_block("for.cond")
        body = self.fn.append_basic_block("for.body")
        latch = self.fn.append_basic_block("for.next")
        done = self.fn.append_basic_block("for.end")
        self.b.branch(head)
        self.b.position_at_end(head)
        cur = self.b.load(counter)
        cmp = self.b.icmp_signed if signed else self.b.icmp_unsigned
        if s.step_sign > 0:
            going = cmp("<", cur, stop)
        elif s.step_sign < 0:
            going = cmp(">", cur, stop)
        else:
            positive = self.b.icmp_signed(">", step, step.type(0))
            going = self.b.select(positive, cmp("<", cur, stop), cmp(">", cur, stop))
        self.b.cbranch(going, body, done)
        self.b.position_at_end(body)
        self.b.store(cur, self.slots[s.var])
        self.loops.append((latch, done))
        self.stmts(s.body)
        self.loops.pop()
        if not self.b.block.is_terminated:
            self.b.branch(latch)
        self.b.position_at_end(latch)
        self.b.store(self.b.add(self.b.load(counter), step), counter)
        self.b.branch(head)
        self.b.position_at_end(done)

    def stmt_Break(self, s) -> None:
        self.b.branch(self.loops[-1][1])

    def stmt_Continue(self, s) -> None:
        self.b.branch(self.loops[-1][0])

    def stmt_Return(self, s: ir.Return) -> None:
        if s.value is not None:
            self.b.store(self.expr(s.value), self.ret_slot)
        if s.values:
            result = self.b.load(self.ret_slot)
            for k, v in enumerate(s.values):
                result = self.b.insert_value(result, self.expr(v), k)
            self.b.store(result, self.ret_slot)
        self.b.branch(self.exit_target or self.exit)

    def stmt_SharedDecl(self, s: ir.SharedDecl) -> None:
        pass  # the buffer is a module-level variable in shared memory, made with the kernel function

    def stmt_Unsafe(self, s: ir.Unsafe) -> None:
        self.stmts(s.body)
