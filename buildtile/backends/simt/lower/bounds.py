"""Debug builds' bounds checks of SIMT reads: an out-of-range read yields 0 and is reported.

The host stores in the module global :data:`BOUNDS_GLOBAL` the device address of
a zeroed record ``{u32 flag, u32 site, i64 index, i64 extent, u32 axis, u32 pad}``;
null (the default) turns reporting off. The first failing read claims the record.
"""

from __future__ import annotations

import llvmlite.ir as lir

from buildtile.backends.common.entry import ArrayArg
from buildtile.backends.common.llvm import GLOBAL_PTR, I32, I64, VOID, zero_of
from buildtile.backends.simt import ir

BOUNDS_GLOBAL = "__buildtile_bounds"


def bounds_reporter(module: lir.Module) -> lir.Function:
    """``void report(i32 site, i64 index, i64 extent, i32 axis)``: first report wins."""
    existing = module.globals.get("buildtile.report_oob")
    if existing is not None:
        return existing
    slot = lir.GlobalVariable(module, I64, BOUNDS_GLOBAL, addrspace=1)
    slot.initializer = I64(0)
    slot.align = 8
    fn = lir.Function(module, lir.FunctionType(VOID, [I32, I64, I64, I32]), "buildtile.report_oob")
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("cold")
    site, index, extent, axis = fn.args
    b = lir.IRBuilder(fn.append_basic_block("entry"))
    record_addr = b.load(b.inttoptr(b.ptrtoint(slot, I64), GLOBAL_PTR), typ=I64)
    done = fn.append_basic_block("done")
    claim = fn.append_basic_block("claim")
    b.cbranch(b.icmp_unsigned("==", record_addr, I64(0)), done, claim)
    b.position_at_end(claim)
    generic = lir.PointerType()

    def field(offset: int) -> lir.Value:
        return b.inttoptr(b.add(record_addr, I64(offset)), generic)

    won = b.extract_value(b.cmpxchg(field(0), I32(0), I32(1), "monotonic", "monotonic"), 1)
    write = fn.append_basic_block("write")
    b.cbranch(won, write, done)
    b.position_at_end(write)
    b.store(site, field(4))
    b.store(index, field(8))
    b.store(extent, field(16))
    b.store(axis, field(24))
    b.fence("seq_cst")
    b.branch(done)
    b.position_at_end(done)
    b.ret_void()
    return fn


class BoundsChecks:
    """The checked read of a debug build (a part of the SIMT lowering)."""

    def checked_load(self, e: ir.Load, arr: ArrayArg, indices: list[lir.Value], site: int) -> lir.Value:
        """``arr[indices]`` if every index is in range, else 0 after reporting ``site``."""
        oks = [self.b.icmp_unsigned("<", idx, extent) for idx, extent in zip(indices, arr.shape)]
        in_range = oks[0]
        for ok in oks[1:]:
            in_range = self.b.and_(in_range, ok)
        load_bb = self.fn.append_basic_block("load.ok")
        fail_bb = self.fn.append_basic_block("load.oob")
        done = self.fn.append_basic_block("load.end")
        self.b.cbranch(in_range, load_bb, fail_bb)
        self.b.position_at_end(fail_bb)
        bad_axis, bad_index, bad_extent = I32(0), indices[0], arr.shape[0]
        for axis in reversed(range(len(indices))):   # the first failing axis wins
            bad_axis = self.b.select(oks[axis], bad_axis, I32(axis))
            bad_index = self.b.select(oks[axis], bad_index, indices[axis])
            bad_extent = self.b.select(oks[axis], bad_extent, arr.shape[axis])
        self.b.call(bounds_reporter(self.module), [I32(site), bad_index, bad_extent, bad_axis])
        self.b.branch(done)
        self.b.position_at_end(load_bb)
        value = self.load(e, arr, indices)
        ok_end = self.b.block
        self.b.branch(done)
        self.b.position_at_end(done)
        phi = self.b.phi(value.type)
        phi.add_incoming(value, ok_end)
        phi.add_incoming(zero_of(value.type), fail_bb)
        return phi
