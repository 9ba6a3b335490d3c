"""Kernels as torch.library custom ops: registration, schemas, fake implementations, opcheck and
``torch.compile(fullgraph=True)``.

No GPU here: the ops are traced over fake and meta tensors (what ``torch.compile`` and the fake
implementation see); a real call reaches the kernel's launch path and its checks. The GPU half
(real launches, Inductor, CUDA graphs) is tests/gpu/test_torch_custom_ops.py.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from conftest import RUNTIME_KERNELS, RUNTIME_SOURCE  # noqa: E402
from tile_support import TILE_KERNELS, make_tile_package  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from buildtile.errors import BuildtileError, TypeMismatchError  # noqa: E402
from buildtile.runtime.frameworks import FRAMEWORKS_FILE, frameworks_record  # noqa: E402
from buildtile.runtime.frameworks.torch_eager import EagerOpPacket  # noqa: E402
from buildtile.runtime.frameworks.torch_ops import default_tile_shapes, op_names, registered_ops  # noqa: E402
from buildtile.runtime.package import package_runtime  # noqa: E402


def opted_in(ops_module, torch_ops: bool = True):
    """Write the package's frameworks record and import its kernel module again, as a process
    importing the built package does."""
    package = ops_module.__name__.partition(".")[0]
    artifact_dir = package_runtime(ops_module.__name__).artifact_dir
    (artifact_dir / FRAMEWORKS_FILE).write_text(json.dumps(frameworks_record(torch_ops, False)))
    del sys.modules[ops_module.__name__]
    return package, importlib.import_module(ops_module.__name__)


@pytest.fixture
def simt_ops(make_kernel_package, fake_gpu):
    package, module = opted_in(make_kernel_package(RUNTIME_SOURCE, RUNTIME_KERNELS))
    return module, getattr(torch.ops, package)


@pytest.fixture
def tile_ops(make_kernel_package, fake_gpu):
    module = make_tile_package(make_kernel_package, TILE_KERNELS)
    source = Path(module.__file__)   # declared through `@tile.kernel`, as a package's own module is
    source.write_text(source.read_text().replace("from buildtile.runtime.tile.kernel import TileKernel",
                                                 "from buildtile import tile").replace("@TileKernel", "@tile.kernel"))
    package, module = opted_in(module)
    return module, getattr(torch.ops, package)


def meta(*shape, dtype=torch.float32):
    return torch.empty(*shape, dtype=dtype, device="meta")


# ----------------------------------------------------------------------------- registration


def test_every_kernel_of_an_opted_in_package_becomes_an_op(simt_ops):
    module, ns = simt_ops
    package = module.__name__.partition(".")[0]
    assert {name for (namespace, name) in registered_ops() if namespace == package} == set(RUNTIME_KERNELS)
    assert registered_ops()[(package, "vecadd")] is module.vecadd


def test_each_op_is_called_eagerly_past_the_dispatcher_when_it_may(simt_ops, tile_ops):
    _, ns = simt_ops
    _, tiles = tile_ops
    assert isinstance(ns.vecadd, EagerOpPacket) and isinstance(tiles.row_stats, EagerOpPacket)
    assert type(ns.vecadd) is not type(ns.saxpy)   # each op's call is its own


def test_a_package_that_did_not_opt_in_registers_nothing(make_kernel_package, fake_gpu):
    package, _ = opted_in(make_kernel_package(RUNTIME_SOURCE, RUNTIME_KERNELS), torch_ops=False)
    assert not [key for key in registered_ops() if key[0] == package]
    assert not hasattr(getattr(torch.ops, package), "vecadd")


def test_simt_schemas_mark_what_the_kernel_writes_as_mutated(simt_ops):
    _, ns = simt_ops
    schemas = {name: str(getattr(ns, name).default._schema).partition("::")[2]
               for name in ("vecadd", "saxpy", "matadd", "collatz_steps", "histogram", "scalars", "nothing")}
    assert schemas == {
        "vecadd": "vecadd(SymInt[] grid, Tensor a, Tensor b, Tensor(a!) c) -> ()",
        "saxpy": "saxpy(SymInt[] grid, float alpha, Tensor x, Tensor y, Tensor(a!) out) -> ()",
        "matadd": "matadd(SymInt[] grid, Tensor a, Tensor b, Tensor(a!) c) -> ()",
        "collatz_steps": "collatz_steps(SymInt[] grid, Tensor x, int limit, Tensor(a!) out) -> ()",
        "histogram": "histogram(SymInt[] grid, Tensor data, Tensor(a!) bins) -> ()",
        "scalars": "scalars(SymInt[] grid, bool flag, float h, float b, float d, int u, Tensor(a!) out) -> ()",
        "nothing": "nothing(SymInt[] grid) -> ()",
    }


def test_tile_schemas_take_each_output_tile_shape_as_a_keyword(tile_ops):
    _, ns = tile_ops
    assert str(ns.add.default._schema).partition("::")[2] == (
        "add(Tensor x, Tensor y, Tensor(a!) z, *, int[]? z_tile=None) -> ()")
    assert str(ns.row_stats.default._schema).partition("::")[2] == (
        "row_stats(Tensor x, Tensor(a!) m, Tensor(b!) s, *, int[]? m_tile=None, int[]? s_tile=None) -> ()")


def test_a_name_two_modules_share_is_qualified_by_the_module():
    from types import SimpleNamespace as Record

    records = (Record(module="pkg.ops", name="add"), Record(module="pkg.more.ops", name="add"),
               Record(module="pkg.ops", name="scale"))
    assert op_names(records, "pkg") == {("pkg.ops", "add"): "ops_add", ("pkg.more.ops", "add"): "more_ops_add",
                                        ("pkg.ops", "scale"): "scale"}


def test_unnamed_tile_shapes_come_from_the_first_specialization_that_agrees():
    compiled = [{"m": (8, 8), "s": (8,)}, {"m": (16, 16), "s": (16,)}]
    assert default_tile_shapes(compiled, {}) == {"m": (8, 8), "s": (8,)}
    assert default_tile_shapes(compiled, {"s": (16,)}) == {"m": (16, 16), "s": (16,)}
    assert default_tile_shapes(compiled, {"s": (32,)}) == {"m": (8, 8), "s": (32,)}


# ----------------------------------------------------------------------------- fake implementations


@pytest.mark.parametrize("name, args", [
    ("vecadd", lambda: ((4,), meta(1000), meta(1000), meta(1000))),
    ("saxpy", lambda: ((4,), 2.0, meta(1000), meta(1000), meta(1000))),
    ("matadd", lambda: ((2, 3), meta(40, 30), meta(40, 30), meta(40, 30))),
    ("collatz_steps", lambda: ((1,), meta(100, dtype=torch.int64), 50, meta(100, dtype=torch.int32))),
])
def test_opcheck_passes_over_meta_tensors(simt_ops, name, args):
    _, ns = simt_ops
    torch.library.opcheck(getattr(ns, name), args(),
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))


def test_opcheck_passes_for_a_tile_op(tile_ops):
    _, ns = tile_ops
    torch.library.opcheck(ns.add, (meta(1000), meta(1000), meta(1000)), {"z_tile": [256]},
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))


def test_the_fake_implementation_refuses_what_the_contract_refuses(simt_ops):
    _, ns = simt_ops
    with FakeTensorMode():
        with pytest.raises(TypeMismatchError, match=r"`vecadd` parameter `b` expects Slice\[f32\]"):
            ns.vecadd((4,), torch.empty(1000), torch.empty(1000, dtype=torch.float64), torch.empty(1000))
        with pytest.raises(TypeMismatchError, match=r"`matadd` parameter `a`.*got a 1-d"):
            ns.matadd((1, 1), torch.empty(4), torch.empty(2, 2), torch.empty(2, 2))


# ----------------------------------------------------------------------------- torch.compile


def add_twice(ns):
    def f(a, b):
        c = torch.empty_like(a)
        ns.vecadd([(a.shape[0] + 255) // 256], a, b, c)
        return c * 2

    return f


def test_compile_fullgraph_keeps_the_op_in_the_graph(simt_ops):
    _, ns = simt_ops
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    compiled = torch.compile(add_twice(ns), fullgraph=True, backend=backend, dynamic=True)
    with FakeTensorMode():
        out = compiled(torch.empty(1000), torch.empty(1000))
    assert tuple(out.shape) == (1000,)
    (graph,) = seen
    targets = [node.target for node in graph.graph.nodes if node.op == "call_function"]
    assert ns.vecadd.default in targets or ns.vecadd in targets


def test_compile_fullgraph_through_aot_autograd_over_fake_tensors(simt_ops, tile_ops):
    _, ns = simt_ops
    _, tiles = tile_ops

    def f(a, b):
        c = torch.empty_like(a)
        ns.vecadd([(a.shape[0] + 255) // 256], a, b, c)
        z = torch.empty_like(a)
        tiles.add(c, b, z, z_tile=[128])
        return z + 1

    explanation = torch._dynamo.explain(f)(meta(1000), meta(1000))
    assert explanation.graph_break_count == 0
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    with FakeTensorMode():
        assert tuple(compiled(torch.empty(1000), torch.empty(1000)).shape) == (1000,)


# ----------------------------------------------------------------------------- the launch path


def test_a_real_call_goes_through_the_launch_checks(simt_ops):
    _, ns = simt_ops
    a, b, c = torch.zeros(1000), torch.zeros(1000), torch.zeros(999)
    with pytest.raises(BuildtileError, match="vecadd"):
        ns.vecadd((4,), a, b, c)


def test_tensors_on_different_devices_are_refused_by_the_launch(simt_ops):
    # the eager call tests the first tensor's device only: the launch refuses the others
    _, ns = simt_ops
    with pytest.raises(BuildtileError, match="vecadd"):
        ns.vecadd((4,), torch.zeros(1000), meta(1000), torch.zeros(1000))
