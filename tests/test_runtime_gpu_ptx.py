"""The Python host on a real GPU, with hand-written PTX instead of compiled kernels.

These tests pin down the driver layer (module loading, image choice, the
packed kernel parameters of ABI v1, contexts, streams, DLPack and CUDA
array interface arguments) independently of the compiler: each kernel is
a few lines of PTX that follow ABI v1 exactly, linked to a cubin with
nvJitLink for the GPU at hand. They are skipped without a GPU.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from buildtile.errors import (
    AliasingError,
    ContractError,
    NoImageError,
    TypeMismatchError,
)

pytestmark = pytest.mark.gpu

_HEADER = """
.version 8.0
.target {target}
.address_size 64
"""

# c[i] = a[i] + b[i] for i < len(c); params: a.data a.len b.data b.len c.data c.len
_VECADD = """
.visible .entry {symbol}(
    .param .u64 a_data, .param .u64 a_len,
    .param .u64 b_data, .param .u64 b_len,
    .param .u64 c_data, .param .u64 c_len
) .reqntid 256, 1, 1
{{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<12>;
    .reg .f32 %f<4>;
    ld.param.u64 %rd1, [a_data];
    ld.param.u64 %rd2, [b_data];
    ld.param.u64 %rd3, [c_data];
    ld.param.u64 %rd4, [c_len];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd3, %rd3;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd5, %r1, %r2;
    cvt.u64.u32 %rd6, %r3;
    add.s64 %rd7, %rd5, %rd6;
    setp.ge.s64 %p1, %rd7, %rd4;
    @%p1 bra DONE;
    shl.b64 %rd8, %rd7, 2;
    add.s64 %rd9, %rd1, %rd8;
    add.s64 %rd10, %rd2, %rd8;
    add.s64 %rd11, %rd3, %rd8;
    ld.global.f32 %f1, [%rd9];
    ld.global.f32 %f2, [%rd10];
    add.rn.f32 %f3, %f1, %f2;
    st.global.f32 [%rd11], %f3;
DONE:
    ret;
}}
"""

# out[i] = alpha * x[i] + y[i] (two roundings, as NumPy); params: alpha, x.data x.len, y..., out...
_SAXPY = """
.visible .entry {symbol}(
    .param .f32 alpha,
    .param .u64 x_data, .param .u64 x_len,
    .param .u64 y_data, .param .u64 y_len,
    .param .u64 o_data, .param .u64 o_len
) .reqntid 256, 1, 1
{{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<12>;
    .reg .f32 %f<6>;
    ld.param.f32 %f1, [alpha];
    ld.param.u64 %rd1, [x_data];
    ld.param.u64 %rd2, [y_data];
    ld.param.u64 %rd3, [o_data];
    ld.param.u64 %rd4, [o_len];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd3, %rd3;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd5, %r1, %r2;
    cvt.u64.u32 %rd6, %r3;
    add.s64 %rd7, %rd5, %rd6;
    setp.ge.s64 %p1, %rd7, %rd4;
    @%p1 bra DONE;
    shl.b64 %rd8, %rd7, 2;
    add.s64 %rd9, %rd1, %rd8;
    add.s64 %rd10, %rd2, %rd8;
    add.s64 %rd11, %rd3, %rd8;
    ld.global.f32 %f2, [%rd9];
    ld.global.f32 %f3, [%rd10];
    mul.rn.f32 %f4, %f1, %f2;
    add.rn.f32 %f5, %f4, %f3;
    st.global.f32 [%rd11], %f5;
DONE:
    ret;
}}
"""

# c[row, col] = a[row, col] + b[row, col] over strided 2-D tensors, row from y and col from x;
# params per tensor: data, shape0, shape1, stride0, stride1 (strides in elements)
_MATADD = """
.visible .entry {symbol}(
    .param .u64 a_data, .param .u64 a_s0, .param .u64 a_s1, .param .u64 a_t0, .param .u64 a_t1,
    .param .u64 b_data, .param .u64 b_s0, .param .u64 b_s1, .param .u64 b_t0, .param .u64 b_t1,
    .param .u64 c_data, .param .u64 c_s0, .param .u64 c_s1, .param .u64 c_t0, .param .u64 c_t1
) .reqntid 16, 16, 1
{{
    .reg .pred %p<3>;
    .reg .b32 %r<7>;
    .reg .b64 %rd<32>;
    .reg .f32 %f<4>;
    mov.u32 %r1, %ctaid.y;
    mov.u32 %r2, %tid.y;
    mad.lo.u32 %r3, %r1, 16, %r2;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.u32 %r6, %r4, 16, %r5;
    cvt.u64.u32 %rd1, %r3;
    cvt.u64.u32 %rd2, %r6;
    ld.param.u64 %rd3, [c_s0];
    ld.param.u64 %rd4, [c_s1];
    setp.ge.s64 %p1, %rd1, %rd3;
    setp.ge.s64 %p2, %rd2, %rd4;
    or.pred %p1, %p1, %p2;
    @%p1 bra DONE;
    ld.param.u64 %rd5, [a_data];
    ld.param.u64 %rd6, [a_t0];
    ld.param.u64 %rd7, [a_t1];
    mul.lo.s64 %rd8, %rd1, %rd6;
    mad.lo.s64 %rd8, %rd2, %rd7, %rd8;
    shl.b64 %rd8, %rd8, 2;
    add.s64 %rd9, %rd5, %rd8;
    ld.param.u64 %rd10, [b_data];
    ld.param.u64 %rd11, [b_t0];
    ld.param.u64 %rd12, [b_t1];
    mul.lo.s64 %rd13, %rd1, %rd11;
    mad.lo.s64 %rd13, %rd2, %rd12, %rd13;
    shl.b64 %rd13, %rd13, 2;
    add.s64 %rd14, %rd10, %rd13;
    ld.param.u64 %rd15, [c_data];
    ld.param.u64 %rd16, [c_t0];
    ld.param.u64 %rd17, [c_t1];
    mul.lo.s64 %rd18, %rd1, %rd16;
    mad.lo.s64 %rd18, %rd2, %rd17, %rd18;
    shl.b64 %rd18, %rd18, 2;
    add.s64 %rd19, %rd15, %rd18;
    ld.global.f32 %f1, [%rd9];
    ld.global.f32 %f2, [%rd14];
    add.rn.f32 %f3, %f1, %f2;
    st.global.f32 [%rd19], %f3;
DONE:
    ret;
}}
"""

_SOURCE = '''
from buildtile import simt
from buildtile.types import DisjointSlice, DisjointTensor, Slice, Tensor, f32

@simt.kernel(block=256, requires=["len(a) == len(c)", "len(b) == len(c)"])
def vecadd(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]):
    pass

@simt.kernel(block=256, requires=["len(x) == len(out)", "len(y) == len(out)"])
def saxpy(alpha: f32, x: Slice[f32], y: Slice[f32], out: DisjointSlice[f32]):
    pass

@simt.kernel(block=(16, 16), requires=["a.shape[0] == c.shape[0]", "a.shape[1] == c.shape[1]",
                                       "b.shape[0] == c.shape[0]", "b.shape[1] == c.shape[1]"])
def matadd(a: Tensor[f32, 2], b: Tensor[f32, 2], c: DisjointTensor[f32, 2]):
    pass

@simt.kernel(block=256, min_compute_capability="sm_100")
def vecadd_blackwell(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]):
    pass
'''

_PARAMS = {
    "vecadd": [("a", "slice", "f32"), ("b", "slice", "f32"), ("c", "disjoint_slice", "f32")],
    "saxpy": [("alpha", "scalar", "f32"), ("x", "slice", "f32"), ("y", "slice", "f32"),
              ("out", "disjoint_slice", "f32")],
    "matadd": [("a", "tensor", "f32", 2), ("b", "tensor", "f32", 2), ("c", "disjoint_tensor", "f32", 2)],
    "vecadd_blackwell": [("a", "slice", "f32"), ("b", "slice", "f32"), ("c", "disjoint_slice", "f32")],
}
_BODIES = {"vecadd": _VECADD, "saxpy": _SAXPY, "matadd": _MATADD, "vecadd_blackwell": _VECADD}
_REQUIRES = {
    "vecadd": ["len(a) == len(c)", "len(b) == len(c)"],
    "saxpy": ["len(x) == len(out)", "len(y) == len(out)"],
    "matadd": ["a.shape[0] == c.shape[0]", "a.shape[1] == c.shape[1]",
               "b.shape[0] == c.shape[0]", "b.shape[1] == c.shape[1]"],
    "vecadd_blackwell": [],
}


def _device_arch() -> str:
    from buildtile.runtime.driver import get_driver

    _, (major, minor) = get_driver().device_properties(0)
    return f"sm_{major}{minor}"


def _ptx(package: str, name: str, target: str) -> bytes:
    from buildtile.interop.abi import mangle

    body = _BODIES[name].format(symbol=mangle(f"{package}.ops", name))
    return (_HEADER.format(target=target) + body).encode()


def _link_cubin(ptx: bytes, arch: str) -> bytes:
    from cuda.bindings import nvjitlink

    handle = nvjitlink.create(1, [f"-arch={arch}"])
    try:
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, ptx, len(ptx), "kernel.ptx")
        nvjitlink.complete(handle)
        size = nvjitlink.get_linked_cubin_size(handle)
        cubin = bytearray(size)
        nvjitlink.get_linked_cubin(handle, cubin)
    finally:
        nvjitlink.destroy(handle)
    return bytes(cubin)


_counter = iter(range(10**6))


def _package(make_kernel_package, mode: str):
    """``mode``: "cubin" (exact cubin), "ptx" (PTX only: JIT) or "foreign" (an unusable cubin)."""
    arch = _device_arch()
    name = f"btptx_{mode}_{next(_counter)}"
    kernels = {}
    for kernel in _PARAMS:
        ptx = _ptx(name, kernel, "sm_80")
        spec = dict(params=_PARAMS[kernel], requires=_REQUIRES[kernel],
                    block=(16, 16, 1) if kernel == "matadd" else (256, 1, 1),
                    index_dims=2 if kernel == "matadd" else 1)
        if kernel == "vecadd_blackwell":
            spec["min_compute_capability"] = "sm_100"
        if mode == "cubin":
            spec["images"] = {arch: _link_cubin(_ptx(name, kernel, arch), arch)}
            spec["ptx"] = None
        elif mode == "ptx":
            spec["images"] = {}
            spec["ptx"] = ("sm_80", ptx)
        else:
            spec["images"] = {"sm_52": b"not loadable here"}
            spec["ptx"] = None
        kernels[kernel] = spec
    return make_kernel_package(_SOURCE, kernels, name=name, targets=(arch,), ptx_target="sm_80")


@pytest.fixture
def ops(make_kernel_package):
    return _package(make_kernel_package, "cubin")


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    return torch


def _rand(n, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(n).astype(dtype)


# ----------------------------------------------------------------------------- DeviceArray

@pytest.mark.parametrize("n", [1, 255, 256, 257, 1000003])
def test_vecadd_on_device_arrays_matches_numpy(ops, n):
    from buildtile.runtime import DeviceArray

    a, b = _rand(n, 1), _rand(n, 2)
    da, db = DeviceArray.from_numpy(a), DeviceArray.from_numpy(b)
    dc = DeviceArray.empty(n, "f32")
    dc.fill_bytes(0xFF)  # NaN everywhere: an unwritten element cannot pass
    ops.vecadd[ops.vecadd.grid_for(n)](da, db, dc)
    np.testing.assert_array_equal(dc.to_numpy(), a + b)


def test_ptx_only_package_is_jit_compiled(make_kernel_package):
    from buildtile.runtime import DeviceArray

    ops = _package(make_kernel_package, "ptx")
    n = 1000
    a, b = _rand(n, 3), _rand(n, 4)
    dc = DeviceArray.empty(n)
    ops.vecadd[ops.vecadd.grid_for(n)](DeviceArray.from_numpy(a), DeviceArray.from_numpy(b), dc)
    np.testing.assert_array_equal(dc.to_numpy(), a + b)
    assert ops.vecadd._functions[0].image.jit


def test_no_usable_image_names_the_built_targets(make_kernel_package):
    from buildtile.runtime import DeviceArray

    ops = _package(make_kernel_package, "foreign")
    arrays = [DeviceArray.empty(10) for _ in range(3)]
    with pytest.raises(NoImageError) as info:
        ops.vecadd[1](*arrays)
    assert "sm_52" in str(info.value) and _device_arch() in str(info.value)


def test_min_compute_capability_is_checked_against_the_device(ops):
    from buildtile.runtime import DeviceArray
    from buildtile.runtime.driver import get_driver

    arrays = [DeviceArray.empty(10) for _ in range(3)]
    if get_driver().device_properties(0)[1] >= (10, 0):
        from gpu_gate import not_this_hardware

        not_this_hardware("this GPU satisfies sm_100")
    with pytest.raises(ContractError, match="compute capability 10.0"):
        ops.vecadd_blackwell[1](*arrays)
    with pytest.raises(ContractError, match="compute capability 10.0"):
        ops.vecadd_blackwell.prepare(grid=1, device=0)


def test_saxpy_scalar_parameter(ops):
    from buildtile.runtime import DeviceArray

    n = 4097
    x, y = _rand(n, 5), _rand(n, 6)
    out = DeviceArray.empty(n)
    ops.saxpy[ops.saxpy.grid_for(n)](np.float32(2.5), DeviceArray.from_numpy(x), DeviceArray.from_numpy(y), out)
    np.testing.assert_array_equal(out.to_numpy(), np.float32(2.5) * x + y)


# ----------------------------------------------------------------------------- PyTorch

@pytest.mark.parametrize("n", [1, 255, 257, 1000003])
def test_vecadd_on_torch_tensors_on_the_current_stream(ops, torch, n):
    from stream_hold import TorchHold, launched_on

    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")
    stream = torch.cuda.Stream()

    def on_the_current_stream():
        with torch.cuda.stream(stream):  # stream=None follows PyTorch's current stream
            ops.vecadd[ops.vecadd.grid_for(n)](a, b, c)

    written = launched_on(TorchHold(torch, stream), c, on_the_current_stream)
    np.testing.assert_array_equal(written, (a + b).cpu().numpy())


@pytest.mark.parametrize("kind", ["torch_stream", "cuda_stream_protocol", "raw_int"])
def test_stream_argument_forms(ops, torch, kind):
    from stream_hold import TorchHold, launched_on

    n = 70001
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")
    stream = torch.cuda.Stream()
    given = {
        "torch_stream": stream,
        "cuda_stream_protocol": type("S", (), {"__cuda_stream__": lambda self: (0, stream.cuda_stream)})(),
        "raw_int": stream.cuda_stream,
    }[kind]
    written = launched_on(TorchHold(torch, stream), c, lambda: ops.saxpy[ops.saxpy.grid_for(n)](3.0, a, b, c, stream=given))
    np.testing.assert_array_equal(written, (3.0 * a + b).cpu().numpy())


def test_matadd_on_strided_torch_tensors(ops, torch):
    for rows, cols in [(37, 1000), (1025, 33)]:
        a = torch.randn(cols, rows, device="cuda").t()  # a transposed (non-contiguous) input
        b = torch.randn(rows, cols, device="cuda")
        c = torch.full((rows, cols), float("nan"), device="cuda")
        grid = ops.matadd.grid_for(rows, cols)  # (ceil(cols / 16), ceil(rows / 16))
        ops.matadd[grid](a, b, c)
        torch.cuda.synchronize()
        assert torch.equal(c, a + b)


def test_torch_tensor_through_dlpack_and_through_the_array_interface(ops, torch):
    n = 1000
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")

    class DLPackOnly:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, **kwargs):
            return self.t.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    class CAIOnly:
        def __init__(self, t):
            self.__cuda_array_interface__ = t.__cuda_array_interface__

    ops.vecadd[ops.vecadd.grid_for(n)](DLPackOnly(a), CAIOnly(b), DLPackOnly(c))
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)


def test_refused_launch_leaves_the_output_untouched(ops, torch):
    n = 1000
    a = torch.randn(n, device="cuda")
    c = torch.full((n,), -7.0, device="cuda")
    with pytest.raises(TypeMismatchError, match="BT0308"):
        ops.vecadd[4](a, a.double(), c)
    with pytest.raises(ContractError, match=r"len\(a\) = 1000, len\(c\) = 999"):
        ops.vecadd[4](a, a, c[:999])
    with pytest.raises(AliasingError, match="BT0502"):
        ops.vecadd[4](a, c, c)
    torch.cuda.synchronize()
    assert bool((c == -7.0).all())


def test_host_pointer_behind_the_array_interface_is_refused(ops, torch):
    host = np.zeros(10, np.float32)

    class HostCAI:
        __cuda_array_interface__ = {"version": 3, "shape": (10,), "typestr": "<f4",
                                    "data": (host.ctypes.data, False), "strides": None, "stream": None}

    a = torch.randn(10, device="cuda")
    with pytest.raises(TypeMismatchError, match="host memory|not in CUDA device memory"):
        ops.vecadd[1](a, HostCAI(), torch.empty_like(a))


def test_launch_is_captured_in_a_cuda_graph(ops, torch):
    n = 100000
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.zeros(n, device="cuda")
    launch = ops.vecadd.prepare(grid=ops.vecadd.grid_for(n))
    launch(a, b, c)  # load the module outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    c.fill_(float("nan"))
    with torch.cuda.graph(graph):
        launch(a, b, c)
    torch.cuda.synchronize()
    a.copy_(torch.randn(n, device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)


def test_launch_from_a_thread_without_a_current_context(ops, torch):
    import threading

    n = 5000
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")
    torch.cuda.synchronize()
    errors = []

    def work():
        try:
            ops.vecadd[ops.vecadd.grid_for(n)](a, b, c, stream=0)
        except Exception as exc:  # reported by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    torch.cuda.synchronize()
    assert not errors
    assert torch.equal(c, a + b)


# ----------------------------------------------------------------------------- CuPy

def test_vecadd_on_cupy_arrays_on_cupy_stream(ops):
    from stream_hold import CupyHold, launched_on

    cupy = pytest.importorskip("cupy")
    n = 257
    a = cupy.asarray(_rand(n, 7))
    b = cupy.asarray(_rand(n, 8))
    c = cupy.full(n, cupy.nan, dtype=cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)

    def on_the_current_stream():
        with stream:   # stream=None follows CuPy's current stream
            ops.vecadd[ops.vecadd.grid_for(n)](a, b, c)

    np.testing.assert_array_equal(launched_on(CupyHold(cupy, stream), c, on_the_current_stream), cupy.asnumpy(a + b))
    c2 = cupy.full(n, cupy.nan, dtype=cupy.float32)
    other = cupy.cuda.Stream(non_blocking=True)
    written = launched_on(CupyHold(cupy, other), c2, lambda: ops.vecadd[ops.vecadd.grid_for(n)](a, b, c2, stream=other))
    np.testing.assert_array_equal(written, cupy.asnumpy(a + b))


# ----------------------------------------------------------------------------- overhead

def test_launch_overhead_is_reported(ops, torch, capsys):
    """Times the Python launch path against CuPy's RawKernel (reported, loosely bounded). Each timing
    runs until the GPU has drained its launches, and each path's output is checked afterwards: its
    last launch takes other inputs, so a path whose launches did not run, or not in order, cannot end
    with a + b2."""
    n = 1024
    a, b, b2 = (torch.randn(n, device="cuda") for _ in range(3))
    c = torch.empty(n, device="cuda")
    expected = (a + b2).cpu().numpy()
    launch = ops.vecadd.prepare(grid=ops.vecadd.grid_for(n))
    stream = torch.cuda.current_stream().cuda_stream

    def per_launch(fn, label, out=(lambda: c.fill_(float("nan")), lambda: c.cpu().numpy()), count=20000):
        poison, read = out
        for _ in range(200):
            fn(b)
        torch.cuda.synchronize()
        poison()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(count - 1):
            fn(b)
        fn(b2)
        torch.cuda.synchronize()               # drained: the time covers running the launches too
        elapsed = time.perf_counter() - start
        np.testing.assert_array_equal(read(), expected, err_msg=label)
        return elapsed / count * 1e6

    results = {
        "prepared, stream=int": per_launch(lambda y: launch(a, y, c, stream=stream), "prepared, stream=int"),
        "prepared, stream=None": per_launch(lambda y: launch(a, y, c), "prepared, stream=None"),
        "kernel[grid]": per_launch(lambda y: ops.vecadd[4](a, y, c), "kernel[grid]"),
    }
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None:
        ca, cb, cb2 = (cupy.asarray(t.cpu().numpy()) for t in (a, b, b2))
        cc = cupy.empty(n, dtype=cupy.float32)
        cupy_out = (lambda: cc.fill(float("nan")), cc.get)
        second = {id(b): cb, id(b2): cb2}
        cubin = ops.vecadd.package.artifact_dir / ops.vecadd.record["artifacts"][_device_arch()]["path"]
        raw = cupy.RawModule(path=str(cubin)).get_function(ops.vecadd.record["symbol"])
        length = np.int64(n)
        results["cupy RawKernel"] = per_launch(
            lambda y: raw((4,), (256,), (ca, length, second[id(y)], length, cc, length)), "cupy RawKernel", cupy_out)
        la = ops.vecadd.prepare(grid=4)
        results["prepared, cupy arrays"] = per_launch(lambda y: la(ca, second[id(y)], cc), "prepared, cupy arrays", cupy_out)
    with capsys.disabled():
        print("\nlaunch overhead (us per launch, drained): " + ", ".join(f"{k}: {v:.2f}" for k, v in results.items()))
    assert results["prepared, stream=int"] < 100
