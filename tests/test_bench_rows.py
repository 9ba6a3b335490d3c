"""benchmarks/bench_rows.py without a GPU: its sweep is the one asked for and launchable."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_rows  # noqa: E402


def compiled_tile_shapes() -> dict[str, set[tuple[int, ...]]]:
    """Each kernel of rows.py and the (tile shape, dtype) pairs its decorator compiles, read from the source."""
    tree = ast.parse((ROOT / "example_project/example_kernels/rows.py").read_text())
    lists = {n.targets[0].id: n.value for n in tree.body if isinstance(n, ast.Assign)
             and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.List)}
    out = {}
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.decorator_list):
        (decorator,) = fn.decorator_list
        if not isinstance(decorator, ast.Call):
            continue      # a helper
        specialize = next(k.value for k in decorator.keywords if k.arg == "specialize")
        specs = lists[specialize.id] if isinstance(specialize, ast.Name) else specialize
        out[fn.name] = {(tuple(d.values[0].elts[k].value for k in range(len(d.values[0].elts))), d.values[1].id)
                        for d in specs.elts}
    return out


def test_the_sweep_covers_every_op_dtype_and_row_length():
    points = bench_rows.sweep(1.0)
    assert {(p.op, p.dtype, p.cols) for p in points} == {
        (op, dtype, cols) for op in ("softmax", "layernorm", "rmsnorm", "cross_entropy")
        for dtype in ("f32", "bf16") for cols in (256, 1024, 4096, 16384, 65536)}
    assert len(points) == 40


def test_every_input_is_about_a_gib():
    # no cap on the rows: a partition of more than 65,535 rows of tiles launches too
    for p in bench_rows.sweep(1.0):
        assert 0.99 * (1 << 30) <= p.input_bytes <= 1 << 30, p
        assert p.moved_bytes >= p.input_bytes * (1 if p.op == "cross_entropy" else 2)


def test_every_tile_shape_is_compiled():
    shapes = compiled_tile_shapes()
    for p in bench_rows.sweep(1.0):
        assert (p.tile, p.dtype) in shapes[p.op], p
