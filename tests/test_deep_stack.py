"""Long expressions: a sum of 10,000 terms checks and lowers; one too deep even for the compiler's
deep stack is a located BT diagnostic, never a RecursionError."""

from __future__ import annotations

import textwrap

from buildtile.backend import CompileOptions
from buildtile.check import check_file
from buildtile.deep_stack import RECURSION_LIMIT, deep_stack
from buildtile.discovery import KernelModule, find_kernels
from buildtile.plugins import backends


def sum_kernel(terms: int) -> str:
    return textwrap.dedent("""\
        from buildtile import simt
        from buildtile.types import DisjointSlice, Slice, f32


        @simt.kernel(block=128)
        def long_sum(x: Slice[f32], y: DisjointSlice[f32]):
            i = simt.index_1d()
            if i < len(y) and simt.lane_id() >= 0:   # geometry: one copy of the body, not coarsened
                y[i] = {}
        """).format(" + ".join(["x[i]"] * terms))


@deep_stack
def llvm_ir_of(path, root) -> str:
    registry = backends()
    (src,) = find_kernels(KernelModule(path.stem, path), registry, root)
    impl = registry[src.kind].impl
    kernel = impl.analyze(src, CompileOptions())
    (entry,) = impl.entries(kernel, CompileOptions())
    return entry.llvm_ir


def test_a_sum_of_ten_thousand_terms_checks_and_lowers(tmp_path):
    path = tmp_path / "long_sum.py"
    path.write_text(sum_kernel(10_000))
    assert check_file(path, tmp_path) == (1, [])
    ir = llvm_ir_of(path, tmp_path)
    assert ir.count(" fadd ") == 9_999


def test_a_sum_too_deep_for_the_compiler_is_a_located_diagnostic(tmp_path):
    path = tmp_path / "long_sum.py"
    path.write_text(sum_kernel(RECURSION_LIMIT // 2))
    found, diags = check_file(path, tmp_path)
    assert [d.code for d in diags] == ["BT0200"]
    assert diags[0].span.file == "long_sum.py" and "too deeply" in diags[0].message


def test_the_deep_stack_hands_back_results_and_exceptions():
    assert deep_stack(lambda a, b: a + b)(2, b=3) == 5

    @deep_stack
    def fails():
        raise KeyError("x")

    try:
        fails()
    except KeyError as err:
        assert err.args == ("x",)
    else:
        raise AssertionError("the exception was lost")
