"""The planner's choices, shape by shape: a table of what each specialisation gets.

For every Tile kernel of the examples and the test cases, and each of its specialisations:
the block size, the narrowest global access of its largest tiles (16 bytes: 128-bit loads
and stores) and how each reduction combines (``thread``: registers only; ``warp``: then
shuffles; ``block``: then one exchange through shared memory). A change to the cost model
(docs/tile-planner.md) shows here as a changed row, without a GPU; update the table only
for a change that is meant.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from buildtile.backend import CompileOptions
from buildtile.backends.tile.layout import canonical
from buildtile.backends.tile.plan import reduction_strategy, summarize
from buildtile.discovery import KernelModule, find_kernels
from buildtile.plugins import backends

ROOT = Path(__file__).parent.parent
MODULES = {"tiles": (ROOT / "example_project/example_kernels/tiles.py", "example_kernels.tiles"),
           "rows": (ROOT / "example_project/example_kernels/rows.py", "example_kernels.rows"),
           "attention": (ROOT / "example_project/example_kernels/attention.py", "example_kernels.attention"),
           "cases": (Path(__file__).parent / "tile_cases.py", "tile_cases")}

#: (module, kernel (``name:dtype`` for each binding of a generic kernel), tile shape of its output,
#: threads, bytes per access, reduction strategies)
PLANS = [
    ("tiles", "add:f32", (1024,), 64, 16, ""),
    ("tiles", "add:f16", (1024,), 32, 16, ""),
    ("tiles", "add:bf16", (1024,), 32, 16, ""),
    ("tiles", "add:f32", (4096,), 256, 16, ""),
    ("tiles", "add:f16", (4096,), 128, 16, ""),
    ("tiles", "add:bf16", (4096,), 128, 16, ""),
    ("tiles", "axpby:f32", (1024,), 64, 16, ""),
    ("tiles", "axpby:f16", (1024,), 32, 16, ""),
    ("tiles", "axpby:bf16", (1024,), 32, 16, ""),
    ("tiles", "scale_bias", (64, 64), 256, 16, ""),
    ("tiles", "scale_bias", (16, 256), 256, 16, ""),
    ("tiles", "softmax", (1, 1024), 32, 16, "warp warp warp warp"),
    ("tiles", "softmax", (1, 4096), 256, 16, "block block block block"),
    ("tiles", "softmax", (1, 256), 32, 16, "warp warp warp warp"),
    ("tiles", "softmax", (4, 1024), 128, 16, "warp warp warp warp"),
    ("tiles", "softmax", (4, 256), 128, 16, "warp warp warp warp"),
    ("tiles", "layernorm", (1, 1024), 128, 16, "block block block block"),
    ("tiles", "layernorm", (4, 256), 128, 16, "warp warp warp warp"),
    ("tiles", "row_sum", (64,), 256, 16, "warp"),
    ("tiles", "row_sum", (16,), 256, 16, "warp"),
    ("tiles", "matmul_f16", (128, 128), 256, 4, ""),
    ("tiles", "matmul_f16", (64, 64), 128, 4, ""),
    ("tiles", "matmul_f16", (128, 256), 256, 4, ""),
    ("tiles", "matmul_bf16", (128, 128), 256, 4, ""),
    ("tiles", "matmul_bf16", (64, 64), 128, 4, ""),
    ("tiles", "matmul_bf16", (128, 256), 256, 4, ""),
    ("rows", "softmax:f32", (32, 256), 256, 16, "warp warp warp warp warp"),
    ("rows", "softmax:f32", (4, 1024), 128, 16, "warp warp warp warp warp"),
    ("rows", "softmax:f32", (2, 4096), 256, 16, "block block block block block"),
    ("rows", "softmax:f32", (1, 16384), 256, 16, "block block block block block"),
    ("rows", "softmax:f32", (1, 32768), 512, 16, "block block block block block"),
    ("rows", "softmax:f32", (1, 65536), 512, 16, "block block"),
    ("rows", "softmax:bf16", (32, 256), 256, 16, "warp warp warp warp warp"),
    ("rows", "softmax:bf16", (4, 1024), 128, 16, "warp warp warp warp warp"),
    ("rows", "softmax:bf16", (1, 4096), 128, 16, "block block block block block"),
    ("rows", "softmax:bf16", (1, 16384), 256, 16, "block block block block block"),
    ("rows", "softmax:bf16", (1, 32768), 512, 16, "block block block block block"),
    ("rows", "softmax:bf16", (1, 65536), 512, 16, "block block"),
    ("rows", "softmax:f16", (32, 256), 256, 16, "warp warp warp warp warp"),
    ("rows", "softmax:f16", (4, 1024), 128, 16, "warp warp warp warp warp"),
    ("rows", "softmax:f16", (1, 4096), 128, 16, "block block block block block"),
    ("rows", "softmax:f16", (1, 16384), 256, 16, "block block block block block"),
    ("rows", "softmax:f16", (1, 32768), 512, 16, "block block block block block"),
    ("rows", "softmax:f16", (1, 65536), 512, 16, "block block"),
    ("rows", "layernorm:f32", (32, 256), 256, 16, "warp warp warp warp"),
    ("rows", "layernorm:f32", (4, 1024), 128, 16, "warp warp warp warp"),
    ("rows", "layernorm:f32", (2, 4096), 256, 16, "block block block block"),
    ("rows", "layernorm:f32", (1, 16384), 512, 16, "block block block block"),
    ("rows", "layernorm:f32", (1, 32768), 1024, 16, "block block block block"),
    ("rows", "layernorm:f32", (1, 65536), 256, 16, "block block"),
    ("rows", "layernorm:bf16", (32, 256), 256, 16, "warp warp warp warp"),
    ("rows", "layernorm:bf16", (4, 1024), 128, 16, "warp warp warp warp"),
    ("rows", "layernorm:bf16", (1, 4096), 128, 16, "block block block block"),
    ("rows", "layernorm:bf16", (1, 16384), 512, 16, "block block block block"),
    ("rows", "layernorm:bf16", (1, 32768), 1024, 16, "block block block block"),
    ("rows", "layernorm:bf16", (1, 65536), 512, 16, "block block"),
    ("rows", "layernorm:f16", (32, 256), 256, 16, "warp warp warp warp"),
    ("rows", "layernorm:f16", (4, 1024), 128, 16, "warp warp warp warp"),
    ("rows", "layernorm:f16", (1, 4096), 128, 16, "block block block block"),
    ("rows", "layernorm:f16", (1, 16384), 512, 16, "block block block block"),
    ("rows", "layernorm:f16", (1, 32768), 1024, 16, "block block block block"),
    ("rows", "layernorm:f16", (1, 65536), 512, 16, "block block"),
    ("rows", "rmsnorm:f32", (32, 256), 256, 16, "warp warp"),
    ("rows", "rmsnorm:f32", (4, 1024), 128, 16, "warp warp"),
    ("rows", "rmsnorm:f32", (2, 4096), 256, 16, "block block"),
    ("rows", "rmsnorm:f32", (1, 16384), 512, 16, "block block"),
    ("rows", "rmsnorm:f32", (1, 32768), 512, 16, "block block"),
    ("rows", "rmsnorm:f32", (1, 65536), 256, 16, "block"),
    ("rows", "rmsnorm:bf16", (32, 256), 256, 16, "warp warp"),
    ("rows", "rmsnorm:bf16", (4, 1024), 128, 16, "warp warp"),
    ("rows", "rmsnorm:bf16", (1, 4096), 128, 16, "block block"),
    ("rows", "rmsnorm:bf16", (1, 16384), 512, 16, "block block"),
    ("rows", "rmsnorm:bf16", (1, 32768), 512, 16, "block block"),
    ("rows", "rmsnorm:bf16", (1, 65536), 256, 16, "block"),
    ("rows", "rmsnorm:f16", (32, 256), 256, 16, "warp warp"),
    ("rows", "rmsnorm:f16", (4, 1024), 128, 16, "warp warp"),
    ("rows", "rmsnorm:f16", (1, 4096), 128, 16, "block block"),
    ("rows", "rmsnorm:f16", (1, 16384), 512, 16, "block block"),
    ("rows", "rmsnorm:f16", (1, 32768), 512, 16, "block block"),
    ("rows", "rmsnorm:f16", (1, 65536), 256, 16, "block"),
    ("rows", "cross_entropy:f32", (32,), 256, 16, "warp warp warp warp"),
    ("rows", "cross_entropy:f32", (8,), 256, 16, "warp warp warp warp"),
    ("rows", "cross_entropy:f32", (2,), 256, 16, "block block block block"),
    ("rows", "cross_entropy:f32", (1,), 256, 16, "block block block block"),
    ("rows", "cross_entropy:bf16", (32,), 256, 16, "warp warp warp warp"),
    ("rows", "cross_entropy:bf16", (8,), 256, 16, "warp warp warp warp"),
    ("rows", "cross_entropy:bf16", (2,), 256, 16, "block block block block"),
    ("rows", "cross_entropy:bf16", (1,), 256, 16, "block block block block"),
    ("rows", "cross_entropy:f16", (32,), 256, 16, "warp warp warp warp"),
    ("rows", "cross_entropy:f16", (8,), 256, 16, "warp warp warp warp"),
    ("rows", "cross_entropy:f16", (2,), 256, 16, "block block block block"),
    ("rows", "cross_entropy:f16", (1,), 256, 16, "block block block block"),
    ("cases", "relu_scaled", (256,), 32, 16, ""),
    ("cases", "half_affine", (512,), 32, 16, ""),
    ("cases", "index_pattern", (128,), 32, 16, ""),
    ("cases", "transpose", (32, 64), 128, 4, ""),
    ("cases", "flatten", (1024,), 64, 16, ""),
    ("cases", "add3d", (2, 8, 32), 32, 16, ""),
    ("cases", "col_sum", (64,), 32, 16, "warp"),
    ("cases", "row_max_to_cols", (32, 32), 64, 16, "warp warp warp"),
    ("cases", "smooth", (256,), 32, 16, ""),
    ("cases", "matmul_registers", (64, 32), 64, 8, ""),
    ("cases", "matmul_transposed_operands", (64, 32), 64, 8, ""),
    ("cases", "chained_mma", (64, 32), 64, 8, ""),
    # two chained mma a step: a warp takes 16 whole rows of both, so the row statistics combine in
    # a warp; the output is stored from the accumulators' registers, two elements an access
    ("attention", "attention:bf16", (1, 1, 128, 64), 256, 4, "warp warp"),
    ("attention", "attention:f16", (1, 1, 128, 64), 256, 4, "warp warp"),
    ("attention", "attention:bf16", (1, 1, 128, 128), 256, 4, "warp warp"),
    ("attention", "attention:f16", (1, 1, 128, 128), 256, 4, "warp warp"),
    ("attention", "attention:bf16", (1, 1, 64, 64), 128, 4, "warp warp"),
    ("attention", "attention:f16", (1, 1, 64, 64), 128, 4, "warp warp"),
    ("attention", "attention:bf16", (1, 1, 64, 128), 128, 4, "warp warp"),
    ("attention", "attention:f16", (1, 1, 64, 128), 128, 4, "warp warp"),
]


@cache
def summaries(module: str) -> dict[tuple[str, tuple[int, ...]], tuple]:
    path, dotted = MODULES[module]
    registry = backends()
    impl = registry["tile"].impl
    out = {}
    for src in find_kernels(KernelModule(dotted, path), registry, ROOT):
        kernel = impl.analyze(src, CompileOptions())
        for spec in impl.specializations(kernel):
            (shape,) = spec.kernel_ir.tile_shapes.values()
            dtypes = "/".join(dtype for _, dtype in spec.spec.dtypes)    # a generic kernel's binding
            out[(f"{src.name}:{dtypes}" if dtypes else src.name, tuple(shape))] = summarize(spec.kernel_ir, spec.plan)
    return out


@pytest.mark.parametrize("module,kernel,shape,threads,vector_bytes,reductions", PLANS,
                         ids=[f"{m}.{k}-{'x'.join(map(str, s))}" for m, k, s, *_ in PLANS])
def test_plan_matches_the_table(module, kernel, shape, threads, vector_bytes, reductions):
    got = summaries(module)[(kernel, shape)]
    assert (got.threads, got.vector_bytes, " ".join(got.reductions)) == (threads, vector_bytes, reductions)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_the_table_covers_every_specialization(module):
    listed = {(k, s) for m, k, s, *_ in PLANS if m == module}
    assert listed == set(summaries(module))


def test_warps_go_to_the_rows_so_row_reductions_stay_in_a_warp():
    # 16 rows of 256 f32 over 8 warps: lanes along the row, warps down the rows
    assert reduction_strategy(canonical((16, 256), 256, 4, frozenset({1})), 1) == "warp"
    # without the hint the warps continue along the row, and the reduction crosses them
    assert reduction_strategy(canonical((16, 256), 256, 4), 1) == "block"
    # one row has nowhere else for the warps to go
    assert reduction_strategy(canonical((1, 4096), 256, 4, frozenset({1})), 1) == "block"
    assert reduction_strategy(canonical((8, 4), 32, 4, frozenset({1})), 1) == "thread"


def test_short_rows_get_a_warp_each_and_long_rows_a_larger_block():
    plans = summaries("rows")
    assert plans[("softmax:f32", (4, 1024))].threads == 128                      # a warp a row
    assert set(plans[("softmax:f32", (4, 1024))].reductions) == {"warp"}
    assert plans[("softmax:f32", (1, 32768))].threads > plans[("softmax:f32", (1, 16384))].threads
    # 16-bit rows read 16 bytes an access although they are computed in f32
    assert plans[("softmax:bf16", (4, 1024))].vector_bytes == 16
