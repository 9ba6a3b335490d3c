"""Tile specializations declared once: products of value lists, dtype variables, pyproject tables.

Each test writes a small kernel module (and sometimes a pyproject.toml
beside it), analyses it with the Tile backend and checks the compiled
specializations: their tile shapes, dtypes and symbols, in order.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from buildtile.backend import CompileOptions
from buildtile.config import compile_options, read_settings
from buildtile.discovery import KernelModule, find_kernels
from buildtile.errors import CompileError
from buildtile.interop.abi import mangle
from buildtile.plugins import backends

HEADER = """\
from buildtile import tile
from buildtile.types import Tensor, bf16, f16, f32
"""


def analyze(tmp_path, body: str, options: CompileOptions | None = None, pyproject: str | None = None) -> dict:
    folder = tmp_path / "proj"
    folder.mkdir(exist_ok=True)
    if pyproject is not None:
        (folder / "pyproject.toml").write_text(pyproject)
    path = folder / "kern.py"
    path.write_text(HEADER + textwrap.dedent(body))
    registry = backends()
    impl = registry["tile"].impl
    return {src.name: impl.analyze(src, options or CompileOptions())
            for src in find_kernels(KernelModule("kern", path), registry, tmp_path)}


def specs(kernel) -> list[tuple]:
    """(tile shapes, dtypes, symbol tail) of each compiled specialization, in order."""
    impl = backends()["tile"].impl
    out = []
    for s in impl.specializations(kernel):
        shapes = tuple(tuple(v) for v in s.tile_shapes.values())
        out.append((shapes if len(shapes) > 1 else shapes[0], dict(s.spec.dtypes),
                    s.symbol[len(mangle("kern", kernel.source.name)):]))
    return out


def refusal(tmp_path, body: str, **kwargs) -> str:
    with pytest.raises(CompileError) as info:
        analyze(tmp_path, body, **kwargs)
    return str(info.value)


def test_a_product_is_every_combination_in_the_order_written(tmp_path):
    (k,) = analyze(tmp_path, """
        @tile.kernel(specialize=tile.product(shape=("rows", "cols"), rows=[1, 4], cols=[256, 1024]))
        def copy(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
            z.store(tile.load_like(x, z))
        """).values()
    assert specs(k) == [((1, 256), {}, "__t1x256"), ((1, 1024), {}, "__t1x1024"),
                        ((4, 256), {}, "__t4x256"), ((4, 1024), {}, "__t4x1024")]


def test_a_module_constant_product_serves_several_kernels_and_drops_large_tiles(tmp_path):
    kernels = analyze(tmp_path, """
        COLS = tile.next_power_of_2(1000)
        ROWS = tile.product(shape=("rows", "cols"), rows=[1, 8], cols=[COLS, 4 * COLS], max_elements=8192)

        @tile.kernel(specialize=ROWS)
        def copy(x: Tensor[f32, 2], z: tile.Out[f32, 2]):
            z.store(tile.load_like(x, z))

        @tile.kernel(specialize=ROWS)
        def negate(x: Tensor[f32, 2], out: tile.Out[f32, 2]):
            out.store(-tile.load_like(x, out))
        """)
    want = [(1, 1024), (1, 4096), (8, 1024)]   # 8 x 4096 has more than 8192 elements: dropped
    assert [s[0] for s in specs(kernels["copy"])] == want
    assert [s[0] for s in specs(kernels["negate"])] == want


def test_a_dtype_variable_compiles_once_per_dtype_and_the_default_keeps_its_symbol(tmp_path):
    (k,) = analyze(tmp_path, """
        T = tile.dtype_var("T", f32, bf16)

        @tile.kernel(specialize=[{"z": [128]}, {"z": [256], "T": bf16}])
        def add(x: Tensor[T, 1], z: tile.Out[T, 1]):
            z.store(tile.load_like(x, z) + tile.zeros(z.tile_shape, x.dtype))
        """).values()
    assert specs(k) == [((128,), {"T": "f32"}, "__t128"), ((128,), {"T": "bf16"}, "__t128_bf16"),
                        ((256,), {"T": "bf16"}, "__t256_bf16")]
    assert [p["dtype"] for p in k.params] == ["f32", "f32"]   # the first specialization's


def test_a_product_binds_a_dtype_variable_to_a_subset_of_its_dtypes(tmp_path):
    (k,) = analyze(tmp_path, """
        T = tile.dtype_var("T", f32, f16, bf16)

        @tile.kernel(specialize=tile.product(shape=("n",), n=[128], T=[f16, bf16]))
        def half(x: Tensor[T, 1], z: tile.Out[T, 1]):
            z.store((tile.load_like(x, z).astype(f32) * 0.5).astype(T))
        """).values()
    assert specs(k) == [((128,), {"T": "f16"}, "__t128_f16"), ((128,), {"T": "bf16"}, "__t128_bf16")]


def test_each_dtype_specialization_is_typed_with_its_own_dtype(tmp_path):
    (k,) = analyze(tmp_path, """
        T = tile.dtype_var("T", f32, f16)

        @tile.kernel(specialize=tile.product(shape=("n",), n=[128]))
        def widen(x: Tensor[T, 1], z: tile.Out[f32, 1]):
            z.store(tile.load_like(x, z).astype(f32))
        """).values()
    impl = backends()["tile"].impl
    loads = [s.kernel_ir.params[0].ty.elem.name for s in impl.specializations(k)]
    assert loads == ["f32", "f16"]
    assert [s.record()["param_dtypes"] for s in impl.specializations(k)] == [{"x": "f32"}, {"x": "f16"}]


def test_a_pyproject_product_is_named_by_a_string(tmp_path):
    pyproject = textwrap.dedent("""\
        [tool.buildtile.tile.specialize.rows]
        shape = [1, "cols"]
        cols = [256, 1024]
        T = ["f32", "bf16"]
        """)
    (k,) = analyze(tmp_path, """
        T = tile.dtype_var("T", f32, bf16)

        @tile.kernel(specialize="rows")
        def copy(x: Tensor[T, 2], z: tile.Out[T, 2]):
            z.store(tile.load_like(x, z))
        """, pyproject=pyproject).values()
    assert [(s[0], s[1]["T"]) for s in specs(k)] == [((1, 256), "f32"), ((1, 256), "bf16"),
                                                      ((1, 1024), "f32"), ((1, 1024), "bf16")]


def test_the_project_settings_win_over_the_file(tmp_path):
    settings = read_settings({"kernels": ["kern"], "tile": {"specialize": {"rows": {"shape": ["n"], "n": [64]}}}},
                             "pyproject.toml", env={})
    (k,) = analyze(tmp_path, """
        @tile.kernel(specialize="rows")
        def copy(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
            z.store(tile.load_like(x, z))
        """, options=compile_options(settings),
        pyproject='[tool.buildtile.tile.specialize.rows]\nshape = ["n"]\nn = [128]\n').values()
    assert [s[0] for s in specs(k)] == [(64,)]
    assert json.loads(compile_options(settings).tile_specialize) == {"rows": {"shape": ["n"], "n": [64]}}


@pytest.mark.parametrize("decorator, words", [
    ('specialize="cols"', "declares no `tool.buildtile.tile.specialize.cols`"),
    ('specialize=tile.product(shape=("n",), n=[100])', "`n` lists 100, which is not a power of two"),
    ('specialize=tile.product(shape=("n",), m=[128])', "the tile shape names `n`, which the product does not list"),
    ('specialize=tile.product(shape=("n",), n=[128], m=[1])', "`m` is listed but no tile shape uses it"),
    ('specialize=tile.product(shape=("n",), n=[65536])', "every combination of the product is a tile of more"),
    ('specialize=tile.product(shape=("a", "b"), a=[1], b=[2])', "a tile shape of a rank-1 output has 1 extent"),
    ('specialize=tile.product(shape={"y": ("n",)}, n=[128])', "`y` is not a tile.Out parameter of `copy`"),
    ('specialize=tile.product(shape=("n",), n=[128, f32])', "`n` mixes dtypes and integers"),
    ('specialize=tile.product(shape=("n",), n=[128], max_elements=0)', "`max_elements` is a positive constant"),
    ("specialize=NOWHERE", "`NOWHERE` is not a module-level specialization list or `tile.product`"),
])
def test_bad_declarations_are_refused_with_bt0600(tmp_path, decorator, words):
    message = refusal(tmp_path, f"""
        @tile.kernel({decorator})
        def copy(x: Tensor[f32, 1], z: tile.Out[f32, 1]):
            z.store(tile.load_like(x, z))
        """, pyproject="[project]\nname = 'p'\n")
    assert "BT0600" in message and words in message, message


def test_a_dtype_outside_the_variables_declaration_is_refused(tmp_path):
    message = refusal(tmp_path, """
        T = tile.dtype_var("T", f32, f16)

        @tile.kernel(specialize=tile.product(shape=("n",), n=[128], T=[bf16]))
        def copy(x: Tensor[T, 1], z: tile.Out[T, 1]):
            z.store(tile.load_like(x, z))
        """)
    assert "`T` takes f32, f16; bf16 is not one of them" in message


def test_a_scalar_of_a_dtype_variable_is_refused_with_bt0308(tmp_path):
    message = refusal(tmp_path, """
        T = tile.dtype_var("T", f32, f16)

        @tile.kernel(specialize=tile.product(shape=("n",), n=[128]))
        def scale(x: Tensor[T, 1], alpha: T, z: tile.Out[T, 1]):
            z.store(tile.load_like(x, z))
        """)
    assert "BT0308" in message and "scalar parameter `alpha` cannot have the dtype variable `T`" in message


def test_the_runtime_surface_is_inert_outside_kernels():
    from buildtile import tile
    from buildtile.types import f16, f32

    assert [tile.next_power_of_2(n) for n in (0, 1, 2, 3, 1000, 1024, 1025)] == [1, 1, 2, 4, 1024, 1024, 2048]
    var = tile.dtype_var("T", f16, f32)
    assert (var.name, var.dtypes) == ("T", (f16, f32))
    product = tile.product(shape=("n",), n=[128], max_elements=64)
    assert (product.shape, product.values, product.max_elements) == (("n",), {"n": [128]}, 64)
