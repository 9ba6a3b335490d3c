"""The eager call of a kernel's torch op: it launches without PyTorch's dispatcher only when the
dispatcher would add nothing, and goes through the dispatcher otherwise.

Over stand-in ops: a ``torch.library`` op whose CPU implementation records that the dispatcher
called it, made an eager packet whose launch records that it launched. Each case runs with the
compiled call, with the generated Python call and the compiled test, and all in Python. The ops of real
kernels are tests/test_torch_ops.py.
"""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")

from torch.overrides import TorchFunctionMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from buildtile.runtime.frameworks import torch_eager  # noqa: E402
from buildtile.runtime.frameworks.torch_eager import EagerOpPacket, eager_source, install_eager  # noqa: E402

_names = itertools.count()


class Recorder:
    """What an eager packet launches through (a KernelOp's interface): records each launch."""

    def __init__(self) -> None:
        self.launches: list = []
        self.kernel = self

    def __getitem__(self, grid):
        return lambda *args: self.launches.append((grid, args))

    def launch_tile(self, args, given):
        self.launches.append((args, given))


class StandIn:
    """A SIMT-like op ``simt(SymInt[] grid, float alpha, Tensor x, Tensor(a!) out)`` and a
    Tile-like op ``tile(Tensor x, int n, Tensor(a!) z, *, int[]? z_tile=None)``, eager."""

    def __init__(self) -> None:
        self.namespace = f"bt_eager_test{next(_names)}"
        self.library = torch.library.Library(self.namespace, "FRAGMENT")
        self.dispatched: list = []
        self.library.define("simt(SymInt[] grid, float alpha, Tensor x, Tensor(a!) out) -> ()")
        self.library.define("tile(Tensor x, int n, Tensor(a!) z, *, int[]? z_tile=None) -> ()")
        for name in ("simt", "tile"):
            self.library.impl(name, self._dispatched(name), "CPU")
            torch.library.register_fake(f"{self.namespace}::{name}", lambda *args, **kwargs: None, lib=self.library)
        ns = getattr(torch.ops, self.namespace)
        self.simt_op, self.tile_op = Recorder(), Recorder()
        self.sources = [install_eager(ns.simt, ["grid", "float", "tensor", "tensor"], (), self.simt_op),
                        install_eager(ns.tile, ["tensor", "int", "tensor"], ("z_tile",), self.tile_op)]
        self.ns = ns

    def _dispatched(self, name):
        return lambda *args, **kwargs: self.dispatched.append((name, args, kwargs))

    def launches(self) -> int:
        return len(self.simt_op.launches) + len(self.tile_op.launches)


@pytest.fixture(params=["compiled call", "compiled test", "python"])
def ops(request, monkeypatch):
    """The stand-in ops with each way of making their calls: a SIMT op's call compiled
    (``_native.EagerCall``), the generated Python call with the compiled test, or all Python."""
    if request.param != "python" and torch_eager._plain_call is None:
        pytest.skip("buildtile's compiled module is not built")
    if request.param != "compiled call":
        monkeypatch.setattr(torch_eager, "_compiled_call", None)
    if request.param == "python":
        monkeypatch.setattr(torch_eager, "_plain_call", None)
    stand_in = StandIn()
    yield stand_in
    stand_in.library._destroy()


def cpu(*shape):
    return torch.zeros(*shape)


# ----------------------------------------------------------------------------- the eager way


def test_a_plain_call_launches_without_the_dispatcher(ops):
    x, out = cpu(8), cpu(8)
    ops.ns.simt([2], 2.0, x, out)
    ops.ns.simt((3, 1), 0.5, x, out)
    assert ops.simt_op.launches == [((2,), (2.0, x, out)), ((3, 1), (0.5, x, out))]
    assert ops.dispatched == []


def test_a_tile_op_takes_its_tile_shapes_as_keywords(ops):
    x, z = cpu(8), cpu(8)
    ops.ns.tile(x, 3, z, z_tile=[4])
    ops.ns.tile(x, 3, z)
    ops.ns.tile(x, 3, z, z_tile=None)
    assert ops.tile_op.launches == [((x, 3, z), {"z_tile": (4,)}), ((x, 3, z), {}), ((x, 3, z), {})]
    assert ops.dispatched == []


def test_the_packet_stays_torchs_packet(ops):
    assert all(call is not None for call in ops.sources)
    assert isinstance(ops.ns.simt, torch._ops.OpOverloadPacket)
    assert isinstance(ops.ns.simt, EagerOpPacket)
    assert str(ops.ns.simt.default._schema).startswith(f"{ops.namespace}::simt(SymInt[] grid")
    assert getattr(torch.ops, ops.namespace).simt is ops.ns.simt


# ----------------------------------------------------------------------------- the dispatcher's way


def dispatched_not_launched(ops, call) -> None:
    before = len(ops.dispatched)
    call()
    assert ops.launches() == 0
    assert len(ops.dispatched) == before + 1


def test_an_overload_always_goes_through_the_dispatcher(ops):
    dispatched_not_launched(ops, lambda: ops.ns.simt.default([2], 2.0, cpu(8), cpu(8)))


def test_arguments_the_dispatcher_would_convert_go_through_it(ops):
    x, out = cpu(8), cpu(8)
    dispatched_not_launched(ops, lambda: ops.ns.simt([2], 2, x, out))             # an int for a float
    dispatched_not_launched(ops, lambda: ops.ns.simt(grid=[2], alpha=2.0, x=x, out=out))   # keywords
    dispatched_not_launched(ops, lambda: ops.ns.simt(torch.Size([2]), 2.0, x, out))   # a tuple subclass
    dispatched_not_launched(ops, lambda: ops.ns.tile(x, True, out))                # a bool for an int
    assert ops.dispatched[0][1][1] == 2.0


def test_tensors_the_dispatcher_acts_on_go_through_it(ops):
    x, out = cpu(8), cpu(8)
    dispatched_not_launched(ops, lambda: ops.ns.simt([2], 2.0, cpu(8).requires_grad_(), out))
    dispatched_not_launched(ops, lambda: ops.ns.simt([2], 2.0, torch.nn.Parameter(cpu(8), requires_grad=False), out))
    # every tensor's requires_grad is tested, not only the first one's
    dispatched_not_launched(ops, lambda: ops.ns.simt([2], 2.0, x, cpu(8).requires_grad_()))
    ops.ns.simt([2], 2.0, x.to("meta"), out.to("meta"))   # the fake implementation: nothing runs
    ops.ns.tile(x.to("meta"), 3, out.to("meta"), z_tile=[4])
    assert ops.launches() == 0 and len(ops.dispatched) == 3


def test_a_tile_shape_keyword_it_does_not_know_goes_through_the_dispatcher(ops):
    x, z = cpu(8), cpu(8)
    dispatched_not_launched(ops, lambda: ops.ns.tile(x, 3, z, z_tile=torch.Size([4])))
    with pytest.raises(Exception, match="z_shape"):
        ops.ns.tile(x, 3, z, z_shape=[4])
    assert ops.launches() == 0


class Seen(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


def test_a_dispatch_mode_sees_the_op(ops):
    x, out = cpu(8), cpu(8)
    mode = Seen()
    with mode:
        dispatched_not_launched(ops, lambda: ops.ns.simt([2], 2.0, x, out))
    assert mode.ops == [ops.ns.simt.default]


class SeenFunctions(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.funcs: list = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.funcs.append(func)
        return func(*args, **(kwargs or {}))


def test_a_function_mode_sees_the_op(ops):
    x, out = cpu(8), cpu(8)
    mode = SeenFunctions()
    with mode:
        ops.ns.simt([2], 2.0, x, out)
    # the mode is handed the op, and the op's call inside the mode runs once, either way
    assert ops.ns.simt in mode.funcs or ops.ns.simt.default in mode.funcs
    assert ops.launches() + len(ops.dispatched) == 1


def test_under_a_device_context_the_op_runs_once(ops):
    x, out = cpu(8), cpu(8)
    with torch.device("cpu"):   # a function mode, which hands the call back
        ops.ns.simt([2], 2.0, x, out)
    assert ops.launches() + len(ops.dispatched) == 1


def test_fake_tensors_run_the_fake_implementation(ops):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        ops.ns.simt([2], 2.0, torch.empty(8), torch.empty(8))
    assert ops.launches() == 0 and ops.dispatched == []


def test_the_profiler_records_the_op(ops):
    with torch.autograd.profiler.profile() as prof:
        dispatched_not_launched(ops, lambda: ops.ns.simt([2], 2.0, cpu(8), cpu(8)))
    assert f"{ops.namespace}::simt" in {event.name for event in prof.function_events}


def test_torchscript_tracing_records_the_op(ops):
    def f(x, out):
        ops.ns.simt([2], 2.0, x, out)
        return out

    traced = torch.jit.trace(f, (cpu(8), cpu(8)), check_trace=False)
    assert f"{ops.namespace}::simt" in str(traced.graph)
    assert ops.launches() == 0


def test_a_functorch_transform_goes_through_the_dispatcher(ops):
    def f(x):
        out = torch.zeros_like(x)
        ops.ns.simt([2], 2.0, x, out)
        return out

    try:
        torch.vmap(f)(cpu(3, 8))
    except RuntimeError:
        pass   # whatever vmap makes of a mutating op, it is vmap's
    assert ops.launches() == 0


# ----------------------------------------------------------------------------- the generated call


@pytest.mark.parametrize("compiled_test", [True, False])
def test_the_call_of_a_simt_op_does_no_loop_and_no_string_work(compiled_test):
    source = eager_source("ns::vecadd", ["grid", "tensor", "tensor", "tensor"], compiled_test=compiled_test)
    assert "for " not in source and "f'" not in source and '"' not in source.partition("\n")[2]
    assert ("PLAIN(args, STATE, PLAN, GETTERS)" in source) == compiled_test
    assert "OP.kernel[tuple(grid)](a1, a2, a3)" in source
    assert source.rstrip().endswith("return DISPATCH(self, *args, **kwargs)")


def test_without_the_state_tests_the_packet_keeps_the_dispatchers_call(monkeypatch):
    monkeypatch.setattr(torch_eager, "DISPATCH_STATE", None)
    library = torch.library.Library(f"bt_eager_test{next(_names)}", "FRAGMENT")
    library.define("f(Tensor x) -> ()")
    packet = getattr(torch.ops, library.ns).f
    assert install_eager(packet, ["tensor"], (), Recorder()) is None
    assert type(packet) is torch._ops.OpOverloadPacket
    library._destroy()


@pytest.mark.skipif(torch_eager._compiled_call is None, reason="buildtile's compiled module is not built")
def test_the_compiled_call_and_test_refuse_what_they_cannot_read():
    from buildtile.runtime.native import compiled

    with pytest.raises(TypeError, match="getters"):
        compiled.EagerCall((), (), (torch.Tensor,), torch_eager.PROFILER, Recorder(), print)
    with pytest.raises(TypeError, match="not callable"):
        compiled.EagerCall((), (), torch_eager.TENSOR_GETTERS, torch_eager.PROFILER, Recorder(), None)
    with pytest.raises(TypeError, match="takes"):
        compiled.plain_torch_call([], (), (), torch_eager.TENSOR_GETTERS)
    assert compiled.plain_torch_call((1,), (), (int,), torch_eager.TENSOR_GETTERS) is True
    assert compiled.plain_torch_call((1.0,), (), (int,), torch_eager.TENSOR_GETTERS) is False
    assert compiled.plain_torch_call((1,), (lambda: 1,), (int,), torch_eager.TENSOR_GETTERS) is False
