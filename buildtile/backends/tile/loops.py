"""Loops the lowering emits itself (the software pipelines): a ``tile.range``'s trip count and a
counted loop over it."""

from __future__ import annotations

from contextlib import contextmanager

import llvmlite.ir as lir

from buildtile.backends.common.llvm import I64


def trip_count(em, loop) -> tuple[lir.Value, lir.Value]:
    """``(start, trips)`` (i64) of ``loop``, a ``tile.range`` with a positive constant step."""
    b = em.b
    start, stop = em.scalar(loop.start), em.scalar(loop.stop)
    span = b.sub(stop, start)
    span = b.select(b.icmp_signed(">", span, I64(0)), span, I64(0))
    return start, b.sdiv(b.add(span, I64(loop.step - 1)), I64(loop.step))


@contextmanager
def counted(em, trips: lir.Value, name: str):
    """``for it in range(trips)`` (of ``trips``' integer type): yields ``it`` inside the body; a
    body that ends in a terminator (a return) leaves the loop there."""
    b = em.b
    counter = em.alloca_builder.alloca(trips.type, name=f"{name}.iteration")
    b.store(trips.type(0), counter)
    head, body, done = (em.fn.append_basic_block(f"{name}.{n}") for n in ("cond", "body", "end"))
    b.branch(head)
    b.position_at_end(head)
    it = b.load(counter)
    b.cbranch(b.icmp_signed("<", it, trips), body, done)
    b.position_at_end(body)
    yield it
    if not b.block.is_terminated:
        b.store(b.add(b.load(counter), trips.type(1)), counter)
        b.branch(head)
    b.position_at_end(done)
