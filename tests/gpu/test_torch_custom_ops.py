"""The example project's kernels as torch custom ops on a real GPU: eager calls (without the
dispatcher and through it), opcheck with CUDA tensors, ``torch.compile(fullgraph=True)`` with
Inductor, and CUDA graphs (captured by hand and through ``mode="reduce-overhead"``), each
compared with NumPy.

Run after the example project is installed (``pip install ./example_project``; it opts in with
``[tool.buildtile.torch] ops = true``). The eager cases also run on the CPU emulator (``device``
cpu, at the smaller sizes, in the default suite; see tests/emulated_packages.py). The same ops
over fake and meta tensors, without a GPU, are tests/test_torch_ops.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from buildtile.errors import BuildtileError

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parents[1]))
from emulated_packages import examples_for_the_emulator, on_devices  # noqa: E402

SIZES = [1, 257, 100003]
gpu = pytest.mark.gpu
OPCHECKS = ("test_schema", "test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic")


@pytest.fixture(scope="module")
def ops():
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    return pytest.importorskip("example_kernels.ops", reason="the example project is not installed")


@pytest.fixture(scope="module")
def tiles(ops):
    return pytest.importorskip("example_kernels.tiles")


@pytest.fixture(scope="module")
def ns(ops):
    return torch.ops.example_kernels


def rand(*shape, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=generator).to(dtype).cuda()


@gpu
@pytest.mark.parametrize("n", SIZES)
def test_vecadd_op_matches_numpy(ops, ns, n):
    a, b = rand(n, seed=1), rand(n, seed=2)
    c = torch.full((n,), float("nan"), device="cuda")
    ns.vecadd(list(ops.vecadd.grid_for(n)), a, b, c)
    np.testing.assert_allclose(c.cpu().numpy(), a.cpu().numpy() + b.cpu().numpy(), rtol=1e-6)


@gpu
def test_tile_op_matches_numpy_for_each_specialization(tiles, ns):
    n = 5000
    x, y = rand(n, seed=3), rand(n, seed=4)
    for shape in tiles.add.tile_shapes:
        z = torch.full((n,), float("nan"), device="cuda")
        ns.add(x, y, z, z_tile=list(shape["z"]))
        np.testing.assert_allclose(z.cpu().numpy(), x.cpu().numpy() + y.cpu().numpy(), rtol=1e-6)


@gpu
def test_the_op_refuses_what_a_direct_call_refuses(ops, ns):
    a, b, c = rand(100), rand(100), torch.zeros(99, device="cuda")
    with pytest.raises(BuildtileError, match="vecadd"):
        ns.vecadd(list(ops.vecadd.grid_for(100)), a, b, c)
    assert not c.any()


@gpu
def test_opcheck_with_cuda_tensors(ops, tiles, ns):
    n = 1000
    torch.library.opcheck(ns.vecadd, (list(ops.vecadd.grid_for(n)), rand(n), rand(n), torch.empty(n, device="cuda")),
                          test_utils=OPCHECKS)
    torch.library.opcheck(ns.saxpy, (list(ops.saxpy.grid_for(n)), 2.5, rand(n), rand(n), torch.empty(n, device="cuda")),
                          test_utils=OPCHECKS)
    torch.library.opcheck(ns.add, (rand(n), rand(n), torch.empty(n, device="cuda")), {"z_tile": [1024]},
                          test_utils=OPCHECKS)


def vecadd_then_scale(ops, ns):
    def f(a, b):
        c = torch.empty_like(a)
        ns.vecadd([(a.shape[0] + ops.BLOCK - 1) // ops.BLOCK], a, b, c)
        return c * 2

    return f


@gpu
@pytest.mark.parametrize("dynamic", [False, True])
def test_compile_fullgraph_with_inductor(ops, ns, dynamic):
    compiled = torch.compile(vecadd_then_scale(ops, ns), fullgraph=True, dynamic=dynamic)
    for n in SIZES:
        a, b = rand(n, seed=5), rand(n, seed=6)
        out = compiled(a, b)
        np.testing.assert_allclose(out.cpu().numpy(), 2 * (a.cpu().numpy() + b.cpu().numpy()), rtol=1e-6)


@gpu
def test_compile_fullgraph_mixing_simt_and_tile_ops(ops, tiles, ns):
    def f(x, y):
        c = torch.empty_like(x)
        ns.vecadd([(x.shape[0] + ops.BLOCK - 1) // ops.BLOCK], x, y, c)
        z = torch.empty_like(x)
        ns.add(c, y, z, z_tile=[1024])
        return z

    compiled = torch.compile(f, fullgraph=True)
    x, y = rand(3000, seed=7), rand(3000, seed=8)
    np.testing.assert_allclose(compiled(x, y).cpu().numpy(), x.cpu().numpy() + 2 * y.cpu().numpy(), rtol=1e-6)


@gpu
def test_captured_in_a_cuda_graph(ops, ns):
    n = 4096
    a, b = rand(n, seed=9), rand(n, seed=10)
    c = torch.empty(n, device="cuda")
    grid = list(ops.vecadd.grid_for(n))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):   # warm up off the default stream, as capture needs
        ns.vecadd(grid, a, b, c)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ns.vecadd(grid, a, b, c)
    for seed in (11, 12):
        a.copy_(rand(n, seed=seed))
        c.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        np.testing.assert_allclose(c.cpu().numpy(), a.cpu().numpy() + b.cpu().numpy(), rtol=1e-6)


@gpu
def test_compiled_with_reduce_overhead_runs_under_cuda_graphs(ops, ns):
    compiled = torch.compile(vecadd_then_scale(ops, ns), fullgraph=True, mode="reduce-overhead")
    a, b = rand(2048, seed=13), rand(2048, seed=14)
    for _ in range(3):   # the first calls record; later ones replay the graph
        out = compiled(a, b).clone()
        np.testing.assert_allclose(out.cpu().numpy(), 2 * (a.cpu().numpy() + b.cpu().numpy()), rtol=1e-6)


# ----------------------------------------------------------------------------- eager calls, also emulated


@pytest.fixture
def kernels(device):
    """(SIMT module, Tile module, op namespace) of the example kernels on ``device``."""
    if device == "cuda":
        if not torch.cuda.is_available():
            pytest.skip("PyTorch has no CUDA")
        ops = pytest.importorskip("example_kernels.ops", reason="the example project is not installed")
        yield ops, pytest.importorskip("example_kernels.tiles"), torch.ops.example_kernels
        return
    from buildtile.emulate import emulated

    modules = examples_for_the_emulator()
    with emulated():
        yield modules["ops"], modules["tiles"], getattr(torch.ops, modules["ops"].__name__.partition(".")[0])


def on(device, array: np.ndarray):
    return torch.from_numpy(np.ascontiguousarray(array)).to(device)


def host(t) -> np.ndarray:
    if t.is_cuda:
        torch.cuda.synchronize()
    return t.cpu().numpy()


@pytest.mark.parametrize("device,n", on_devices([1, 257, 1000, 100003]))
def test_eager_and_dispatched_simt_ops_match_numpy(kernels, device, n):
    ops, _, ns = kernels
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    for op in (ns.vecadd, ns.vecadd.default):   # the eager call, then the dispatcher's
        c = on(device, np.full(n, np.nan, np.float32))
        op(list(ops.vecadd.grid_for(n)), on(device, a), on(device, b), c)
        np.testing.assert_allclose(host(c), a + b, rtol=1e-6)
    out = on(device, np.full(n, np.nan, np.float32))
    ns.saxpy(list(ops.saxpy.grid_for(n)), 2.5, on(device, a), on(device, b), out)
    np.testing.assert_allclose(host(out), 2.5 * a + b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device,n", on_devices([1, 1000, 5000, 100003]))
def test_eager_tile_op_matches_numpy_with_and_without_a_tile_shape(kernels, device, n):
    _, tiles, ns = kernels
    rng = np.random.default_rng(n + 1)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    for keywords in ({}, {"z_tile": list(tiles.add.tile_shapes[-1]["z"])}):
        z = on(device, np.full(n, np.nan, np.float32))
        ns.add(on(device, x), on(device, y), z, **keywords)
        np.testing.assert_allclose(host(z), x + y, rtol=1e-6)


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=pytest.mark.gpu), "cpu"])
def test_an_eager_call_refuses_what_a_direct_call_refuses(kernels, device):
    ops, _, ns = kernels
    a, b = on(device, np.ones(100, np.float32)), on(device, np.ones(100, np.float32))
    c = on(device, np.zeros(99, np.float32))
    for op in (ns.vecadd, ns.vecadd.default):
        with pytest.raises(BuildtileError, match=r"vecadd.*requires|requires.*vecadd|len\(a\) == len\(c\)"):
            op(list(ops.vecadd.grid_for(100)), a, b, c)
    assert not host(c).any()

