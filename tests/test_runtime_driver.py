"""The real driver layer where no GPU or driver exists: clear errors, and only after validation."""

from __future__ import annotations

import pytest
from conftest import gpu_status

from buildtile.errors import CudaError, TypeMismatchError
from buildtile.runtime import cuda_available
from buildtile.runtime.driver import CudaDriver, DeviceContext, set_driver
from buildtile.runtime.testing import FakeCudaArray

no_gpu = pytest.mark.skipif(gpu_status()[0], reason="this machine has a usable CUDA GPU")


@pytest.fixture
def real_driver():
    driver = CudaDriver()
    previous = set_driver(driver)
    yield driver
    set_driver(previous)


@no_gpu
def test_cuda_available_says_why_not(real_driver):
    usable, reason = cuda_available()
    assert usable is False and reason


@no_gpu
def test_launch_without_a_driver_is_a_cuda_error_not_a_traceback(make_kernel_package, real_driver):
    from conftest import RUNTIME_KERNELS, RUNTIME_SOURCE

    ops = make_kernel_package(RUNTIME_SOURCE, RUNTIME_KERNELS)
    arrays = [FakeCudaArray(0x7F00_0000_0000 + k * 4096, (10,)) for k in range(3)]
    with pytest.raises(CudaError) as info:
        ops.vecadd[1](*arrays)
    assert info.value.code == "BT0700"
    assert str(info.value).startswith("error[BT0700]: no CUDA")
    # argument checks that need no driver still come first
    with pytest.raises(TypeMismatchError):
        ops.vecadd[1](*arrays[:2], FakeCudaArray(0x7F00_0001_0000, (10,), "<f8"))


@no_gpu
def test_the_driver_error_is_remembered(real_driver):
    with pytest.raises(CudaError) as first:
        real_driver.device_count()
    with pytest.raises(CudaError) as second:
        real_driver.context(0)
    assert first.value is second.value


def test_driver_errors_carry_the_drivers_name_and_text():
    from cuda.bindings import driver as cu

    error = CudaDriver._error(cu, cu.CUresult.CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel")
    assert error.code == "BT0700" and "cuLaunchKernel" in str(error)


class _PointerBindings:
    """The part of ``cuda.bindings.driver`` that pointer_memory uses: one device allocation whose
    DEVICE_ORDINAL attribute says 0 although its context is device 1's (as seen on two H200s)."""

    def __init__(self, context: int, ordinal_reported: int, device_of_context: int) -> None:
        from cuda.bindings import driver as cu

        self.CUpointer_attribute, self.CUmemorytype = cu.CUpointer_attribute, cu.CUmemorytype
        self.context, self.ordinal, self.device = context, ordinal_reported, device_of_context
        self.calls: list[str] = []

    def cuPointerGetAttributes(self, count, attrs, ptr):
        return 0, [int(self.CUmemorytype.CU_MEMORYTYPE_DEVICE), self.ordinal, False, self.context]

    def cuCtxPushCurrent(self, ctx):
        self.calls.append(f"push {int(ctx):#x}")
        return (0,)

    def cuCtxGetDevice(self):
        return 0, self.device

    def cuCtxPopCurrent(self):
        self.calls.append("pop")
        return 0, None


def test_the_device_of_a_pointer_is_that_of_its_allocating_context():
    driver = CudaDriver()
    driver._cu = bindings = _PointerBindings(context=0x5000, ordinal_reported=0, device_of_context=1)
    assert driver.pointer_memory(0x7F00_0000_0000) == ("device", 1)
    assert bindings.calls == ["push 0x5000", "pop"]          # the context's device, asked of the driver
    driver._contexts[1] = DeviceContext(1, 0x5000, 0x5000, (9, 0), "stand-in")
    assert driver.pointer_memory(0x7F00_0000_0000) == ("device", 1)
    assert bindings.calls == ["push 0x5000", "pop"]          # a retained primary context: known already
    bindings.context = None                                   # no allocating context (a memory pool)
    assert driver.pointer_memory(0x7F00_0000_0000) == ("device", 0)
