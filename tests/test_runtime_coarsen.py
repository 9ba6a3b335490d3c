"""Coarsened kernels: the host launches ceil(grid / K) blocks and passes the logical grid last."""

from __future__ import annotations

import pytest

SOURCE = "from buildtile import simt\n\n@simt.kernel\ndef vecadd(a, b, c):\n    pass\n"
VECADD = dict(params=[("a", "slice", "f32"), ("b", "slice", "f32"), ("c", "disjoint_slice", "f32")],
              requires=["len(a) == len(c)", "len(b) == len(c)"], coarsen=4)


@pytest.mark.parametrize("grid, launched", [(10, 3), (8, 2), (1, 1)])
def test_coarsened_launch_divides_the_grid_and_passes_it_last(make_kernel_package, fake_gpu, grid, launched):
    ops = make_kernel_package(SOURCE, {"vecadd": VECADD})
    a, b, c = (fake_gpu.array(1000) for _ in range(3))
    prepared = ops.vecadd.prepare(grid=grid)
    prepared(a, b, c)
    (record,) = fake_gpu.launches
    assert record.grid == (launched, 1, 1) and record.block == (256, 1, 1)
    assert len(record.offsets) == 7                 # six ABI parameters, then the logical grid
    assert record.param(6, "q") == grid
    assert record.param(5, "q") == 1000             # len(c), just before it


def test_uncoarsened_kernel_launches_the_grid_as_given(make_kernel_package, fake_gpu):
    ops = make_kernel_package(SOURCE, {"vecadd": {**VECADD, "coarsen": 1}})
    a, b, c = (fake_gpu.array(1000) for _ in range(3))
    ops.vecadd[10](a, b, c)
    assert fake_gpu.launches[0].grid == (10, 1, 1)
