"""Where the planner takes mma operands from (buildtile/backends/tile/mma_operands.py), and the
layouts it gives the values around a chained mma (plan.py)."""

from __future__ import annotations

import textwrap

from buildtile.backend import CompileOptions
from buildtile.backends.tile import ir
from buildtile.backends.tile.layout import mma_accumulator
from buildtile.backends.tile.mma_operands import find_resident, is_chained, operand_load
from buildtile.discovery import KernelModule, find_kernels
from buildtile.plugins import backends

HEADER = """
import math
from buildtile import tile
from buildtile.types import Tensor, f16, f32, i64
"""


def planned(tmp_path, body: str) -> dict:
    """Each kernel of ``body`` (a module's kernels) -> its first specialization (kernel_ir, plan)."""
    path = tmp_path / "kernels.py"
    path.write_text(HEADER + textwrap.dedent(body))
    registry = backends()
    impl = registry["tile"].impl
    out = {}
    for src in find_kernels(KernelModule("kernels", path), registry, tmp_path):
        spec = impl.specializations(impl.analyze(src, CompileOptions()))[0]
        out[src.name] = (spec.kernel_ir, spec.plan)
    return out


ATTENTION_STEP = """
@tile.kernel(specialize=[{"o": [1, 1, 64, 64]}])
def step(q: Tensor[f16, 4], k: Tensor[f16, 4], v: Tensor[f16, 4], o: tile.Out[f32, 4]):
    b, h, i = o.tile_id(0), o.tile_id(1), o.tile_id(2)
    qt = tile.load(q, (b, h, i, 0), (1, 1, 64, 64)).reshape((64, 64))
    acc = tile.zeros((64, 64), f32)
    query = tile.arange(64, i64) + i * 64
    for j in tile.range(tile.cdiv(k.shape[2], 32)):
        kt = tile.load(k, (b, h, j, 0), (1, 1, 32, 64)).reshape((32, 64))
        vt = tile.load(v, (b, h, j, 0), (1, 1, 32, 64)).reshape((32, 64))
        s = tile.mma(qt, kt.T, tile.zeros((64, 32), f32))
        key = tile.arange(32, i64) + j * 32
        visible = key[None, :] <= query[:, None]
        p = tile.exp(tile.where(visible, s, -math.inf))
        acc = tile.mma(p.astype(f16), vt, acc)
    o.store(acc.reshape((1, 1, 64, 64)))
"""


def test_a_chained_kernel_pipelines_its_keys_and_keeps_its_queries_resident(tmp_path):
    kernel, plan = planned(tmp_path, ATTENTION_STEP)["step"]
    assert is_chained(kernel) and plan.mma_rows_only
    (pipe,) = plan.pipelines.values()
    assert pipe.names == {"kt", "vt"} and [(op.rows, op.cols) for op in pipe.operands] == [(32, 64), (32, 64)]
    assert set(plan.resident) == {"qt"} and (plan.resident["qt"].rows, plan.resident["qt"].cols) == (64, 64)
    assert plan.threads == 128                           # 4 warps of 16 whole rows


def test_a_mask_named_in_the_loop_is_built_where_the_scores_are(tmp_path):
    kernel, plan = planned(tmp_path, ATTENTION_STEP)["step"]
    scores = mma_accumulator(64, 32, plan.threads, rows_only=True)
    assert plan.var_layouts["s"] == scores == plan.var_layouts["visible"] == plan.var_layouts["p"]
    # the indices too: the columns of a score block, and its rows
    assert plan.var_layouts["key"] == scores.broadcast_from((1, 32)).squeeze(0)
    assert plan.var_layouts["query"] == scores.broadcast_from((64, 1)).squeeze(1)


def test_a_plain_matmul_is_not_chained_and_keeps_its_split(tmp_path):
    kernel, plan = planned(tmp_path, """
    @tile.kernel(specialize=[{"c": [128, 128]}])
    def mm(a: Tensor[f16, 2], b: Tensor[f16, 2], c: tile.Out[f32, 2]):
        acc = tile.zeros((128, 128), f32)
        for k in tile.range(tile.cdiv(a.shape[1], 32)):
            ta = tile.load(a, (c.tile_id(0), k), (128, 32))
            tb = tile.load(b, (k, c.tile_id(1)), (32, 128))
            acc = tile.mma(ta, tb, acc)
        c.store(acc)
    """)["mm"]
    assert not is_chained(kernel) and not plan.mma_rows_only and not plan.resident
    assert plan.var_layouts["acc"] == mma_accumulator(128, 128, 256)


def test_only_loads_the_tensor_cores_can_read_as_they_are_go_to_shared_memory(tmp_path):
    kernel, _ = planned(tmp_path, """
    @tile.kernel(specialize=[{"c": [64, 64]}])
    def forms(a: Tensor[f16, 3], x: Tensor[f32, 2], c: tile.Out[f32, 2]):
        good = tile.load(a, (0, c.tile_id(0), 0), (1, 64, 32)).reshape((64, 32))
        padded = tile.load(a, (0, c.tile_id(0), 0), (1, 64, 32), padding=1.0).reshape((64, 32))
        folded = tile.load(a, (0, c.tile_id(0), 0), (1, 64, 32)).reshape((32, 64))
        wide = tile.load(x, (c.tile_id(0), 0), (64, 32)).astype(f16)
        acc = tile.mma(good, folded, tile.zeros((64, 64), f32))
        c.store(tile.mma(padded, wide.T, acc))
    """)["forms"]
    values = {s.name: s.value for s in ir.walk_stmts(kernel.body) if isinstance(s, ir.Assign)}
    assert operand_load(values["good"]) is not None
    assert operand_load(values["padded"]) is None          # nonzero padding: not the zero fill of a copy
    assert operand_load(values["folded"]) is None          # a reshape that moves elements across rows
    assert operand_load(values["wide"]) is None            # f32 data converted on the way
    assert find_resident(kernel, 1 << 20) == {}            # none of them is used in a loop
