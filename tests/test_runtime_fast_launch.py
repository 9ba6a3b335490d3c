"""Prepared launches made from C (``FastLaunch`` in ``runtime/_native.c``), on a fake GPU.

After a launch has gone the Python way (``PreparedLaunch._launch``), a
prepared launch is armed: the next calls whose arguments bind the same way
run without the interpreter. These tests hold the compiled way to the
Python one: same parameters launched, same refusals with nothing queued,
and a fall back to the Python way for everything it does not handle
(other argument types, another device, streams to wait on, a failed
launch, a new driver).
"""

from __future__ import annotations

import pytest

from buildtile.errors import AliasingError, ContractError, CudaError, TypeMismatchError
from buildtile.runtime import DeviceArray
from buildtile.runtime.driver import set_driver
from buildtile.runtime.launch import PreparedLaunch
from buildtile.runtime.native import compiled
from buildtile.runtime.testing import FakeDriver

pytestmark = pytest.mark.skipif(compiled is None, reason="buildtile's compiled launch call is not built")


@pytest.fixture
def gpu():
    """A two-device fake GPU launching through the compiled launch call."""
    from native_support import CompiledLaunchFakeDriver

    driver = CompiledLaunchFakeDriver(capabilities=[(9, 0), (9, 0)])
    driver.install()
    previous = set_driver(driver)
    yield driver
    set_driver(previous)


@pytest.fixture
def kernels(make_kernel_package, gpu):
    from conftest import RUNTIME_KERNELS, RUNTIME_SOURCE

    return make_kernel_package(RUNTIME_SOURCE, RUNTIME_KERNELS)


@pytest.fixture
def python_launches(monkeypatch):
    """The calls that went the Python way (``PreparedLaunch._launch``), counted."""
    seen: list = []
    original = PreparedLaunch._launch

    def counted(self, args, stream, bound=None):
        seen.append(args)
        return original(self, args, stream, bound)

    monkeypatch.setattr(PreparedLaunch, "_launch", counted)
    return seen


def slices(gpu, n=100, count=3, device=0, dtype="f32"):
    return [DeviceArray.zeros(n, dtype, device=device) for _ in range(count)]


def values(gpu) -> tuple:
    record = gpu.launches[-1]
    return tuple(record.param(k, "q") for k in range(len(record.offsets)))


def test_a_launch_arms_and_the_next_ones_go_from_c(kernels, gpu, python_launches):
    launch = kernels.vecadd.prepare(grid=1)
    assert not launch._armed()
    a, b, c = slices(gpu)
    launch(a, b, c)
    assert launch._armed() and len(python_launches) == 1
    for _ in range(3):
        launch(a, b, c, stream=7)
    assert len(python_launches) == 1
    assert len(gpu.launches) == 4
    assert values(gpu) == (a.ptr, 100, b.ptr, 100, c.ptr, 100)
    assert gpu.launches[-1].stream == 7 and gpu.launches[-1].grid == (1, 1, 1)


def test_new_arguments_are_packed_anew_from_c(kernels, gpu, python_launches):
    launch = kernels.vecadd[2]
    launch(*slices(gpu))
    for n in (100, 257, 1):
        a, b, c = slices(gpu, n)
        launch(a, b, c)
        assert values(gpu) == (a.ptr, n, b.ptr, n, c.ptr, n)
    assert len(python_launches) == 1


def test_tensors_and_scalars_pack_as_the_python_way_does(kernels, gpu, python_launches):
    a, b, c = (DeviceArray.zeros((3, 5), "f32") for _ in range(3))
    kernels.matadd[1, 1](a, b, c)
    python_way = gpu.launches[-1].params
    kernels.matadd[1, 1](a, b, c)
    assert gpu.launches[-1].params == python_way and len(python_launches) == 1
    x, out = DeviceArray.zeros(7, "i64"), DeviceArray.zeros(7, "i32")
    kernels.collatz_steps[1](x, 5, out)
    kernels.collatz_steps[1](x, 9, out)
    record = gpu.launches[-1]
    assert (record.param(0, "q"), record.param(1, "q"), record.param(2, "i"), record.param(3, "q")) == (x.ptr, 7, 9, out.ptr)
    assert len(python_launches) == 2


@pytest.mark.parametrize("bad_call, error, words", [
    (lambda k, a, b, c, s: k.vecadd[1](a, b, s), ContractError, "len(a) == len(c)"),
    (lambda k, a, b, c, s: k.vecadd[1](a, b, a), AliasingError, "BT0502"),
    (lambda k, a, b, c, s: k.vecadd[1](a, b), TypeMismatchError, "takes 3 arguments"),
    (lambda k, a, b, c, s: k.vecadd[1](a, b, DeviceArray.zeros(100, "f64")), TypeMismatchError, "BT0308"),
    (lambda k, a, b, c, s: k.vecadd[1](a, b, c, stream=-1), TypeMismatchError, "cannot be negative"),
    (lambda k, a, b, c, s: k.vecadd[1](a, b, c, stream="default"), TypeMismatchError, "does not accept"),
    (lambda k, a, b, c, s: k.vecadd[1](a, b, c, streams=0), TypeMismatchError, "`streams`"),
    (lambda k, a, b, c, s: k.vecadd[1](a, b, c=c), TypeMismatchError, "by position"),
    (lambda k, a, b, c, s: k.vecadd[1](a, b, c, stream=2**70), TypeMismatchError, "does not fit 64 bits"),
    (lambda k, a, b, c, s: k.vecadd[1](a, b, c, stream=2**64), TypeMismatchError, "does not fit 64 bits"),
    (lambda k, a, b, c, s: k.vecadd[1](a, b, c, stream=1.0), TypeMismatchError, "does not accept"),
    (lambda k, a, b, c, s: k.vecadd[1](a, b, c, stream=True), TypeMismatchError, "does not accept"),
    (lambda k, a, b, c, s: k.vecadd[1](a, b, DeviceArray.zeros(100, device=1)), TypeMismatchError, "device"),
])
def test_bad_calls_to_an_armed_launch_are_refused_with_nothing_queued(kernels, gpu, bad_call, error, words):
    a, b, c = slices(gpu)
    kernels.vecadd[1](a, b, c)
    kernels.vecadd[1](a, b, c)
    assert kernels.vecadd[1]._armed()
    launched = len(gpu.launches)
    with pytest.raises(error) as info:
        bad_call(kernels, a, b, c, DeviceArray.zeros(99))
    assert words in str(info.value)
    assert len(gpu.launches) == launched
    kernels.vecadd[1](a, b, c)  # and the launch still works
    assert len(gpu.launches) == launched + 1


def test_arguments_on_another_device_launch_there_and_rearm(kernels, gpu, python_launches):
    launch = kernels.vecadd[1]
    on_0, on_1 = slices(gpu, device=0), slices(gpu, device=1)
    for arrays, device in [(on_0, 0), (on_0, 0), (on_1, 1), (on_1, 1), (on_0, 0)]:
        launch(*arrays)
        assert gpu.launches[-1].device == device
        assert values(gpu)[0] == arrays[0].ptr
    assert len(python_launches) == 3  # the first launch on each device, and the switch back


def test_other_argument_types_go_the_python_way(kernels, gpu, python_launches):
    launch = kernels.vecadd[1]
    launch(*slices(gpu))
    interface = [gpu.array(100) for _ in range(3)]  # device settled by asking the driver: not armed
    launch(*interface)
    assert not launch._armed()  # so the next ones come straight to the Python way
    launch(*interface)
    assert len(python_launches) == 3
    assert values(gpu)[0] == interface[0].ptr


def test_stream_forms_are_resolved_from_c(kernels, gpu, python_launches):
    class ProtocolStream:
        def __cuda_stream__(self):
            return (0, 0xABC)

    arrays = slices(gpu)
    kernels.vecadd[1](*arrays)
    for given, expected in [(None, 0), (5, 5), (ProtocolStream(), 0xABC), (2**63, 2**63)]:
        kernels.vecadd[1](*arrays, stream=given)
        assert gpu.launches[-1].stream == expected
    assert len(python_launches) == 1


def test_a_failed_launch_from_c_raises_the_drivers_error(kernels, gpu):
    arrays = slices(gpu)
    kernels.vecadd[1](*arrays)
    gpu.fail_launch = CudaError("cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")
    with pytest.raises(CudaError, match="OUT_OF_RESOURCES"):
        kernels.vecadd[1](*arrays)
    gpu.fail_launch = None
    kernels.vecadd[1](*arrays)
    assert len(gpu.launches) == 2


def test_a_new_driver_disarms_every_prepared_launch(kernels, gpu, python_launches):
    launch = kernels.vecadd[1]
    launch(*slices(gpu))
    assert launch._armed()
    previous = set_driver(FakeDriver())
    try:
        assert not launch._armed()
    finally:
        set_driver(previous)


def test_launches_through_the_python_facade_never_arm(make_kernel_package):
    from conftest import RUNTIME_KERNELS, RUNTIME_SOURCE

    driver = FakeDriver()  # its launch() is Python: nothing for a prepared launch to call from C
    previous = set_driver(driver)
    try:
        kernels = make_kernel_package(RUNTIME_SOURCE, RUNTIME_KERNELS)
        arrays = slices(driver)
        kernels.vecadd[1](*arrays)
        kernels.vecadd[1](*arrays)
        assert not kernels.vecadd[1]._armed() and len(driver.launches) == 2
    finally:
        set_driver(previous)


def test_stream_none_of_pytorch_tensors_is_their_current_stream_asked_from_c(kernels, gpu, python_launches,
                                                                             monkeypatch):
    # PyTorch look-alikes with a DLPack exchange API: a prepared launch asks it for the current
    # stream of the armed device, and gets what the Python way (PyTorch's current stream) gets
    from native_support import ExchangeAPI
    from test_runtime_binders import DTYPES, FakeTensor, describe_for_dlpack

    from buildtile.runtime import arrays, streams

    asked: list = []
    api = ExchangeAPI(describe_for_dlpack, lambda device: asked.append(device) or 0x5000 + device)
    monkeypatch.setattr(FakeTensor, "__dlpack_c_exchange_api__", api.capsule, raising=False)
    monkeypatch.setitem(arrays._EXTRACTORS, FakeTensor, arrays._torch_view)
    monkeypatch.setitem(arrays._INLINE_READERS, FakeTensor, arrays.TorchTensorReader(DTYPES.get))
    monkeypatch.setitem(streams._FRAMEWORK_OF_TYPE, FakeTensor, "torch")
    monkeypatch.setattr(streams, "_framework", lambda cls: "torch" if cls is FakeTensor else None)
    monkeypatch.setattr(streams, "_torch_current_stream", lambda device: 0x5000 + device)

    def tensor(n, device):
        return FakeTensor(gpu.allocate(4 * n, device), (n,), device=device)

    on_0 = [tensor(10, 0) for _ in range(3)]
    on_1 = [tensor(10, 1) for _ in range(3)]
    launch = kernels.vecadd[1]
    for arrays_, device in [(on_0, 0), (on_0, 0), (on_0, 0), (on_1, 1), (on_1, 1)]:
        launch(*arrays_)
        assert (gpu.launches[-1].device, gpu.launches[-1].stream) == (device, 0x5000 + device)
        assert values(gpu)[0] == arrays_[0].ptr
    assert len(python_launches) == 2  # the first launch, and the first on device 1 (after a guess for 0)
    assert asked == [0, 0, 0, 1]
    assert streams.current_stream_source(on_0) is api.capsule
    assert streams.current_stream_source([*on_0, 2.5, 3]) is api.capsule
    assert streams.current_stream_source([*on_0, gpu.array(10)]) is None


def test_threads_sharing_an_armed_launch_each_launch_on_their_arguments_device(kernels, gpu):
    # the compiled way releases the GIL around cuLaunchKernel (here a Python callback, so the
    # threads do take turns inside launches); each launch must still go to its arguments' device
    import threading

    launch = kernels.vecadd[1]
    per_device = {device: slices(gpu, device=device) for device in (0, 1)}
    device_of = {arrays[0].ptr: device for device, arrays in per_device.items()}
    launch(*per_device[0])
    errors: list = []

    def work(first: int) -> None:
        try:
            for k in range(50):
                launch(*per_device[(first + k) % 2])
        except Exception as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(first,)) for first in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(gpu.launches) == 101
    assert all(record.device == device_of[record.param(0, "q")] for record in gpu.launches)
