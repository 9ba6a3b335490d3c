"""``tile.mma`` on Hopper: the matmuls of tests/fixtures/hopper/matmuls.py built for sm_90a, against
torch at ragged shapes, bf16 and f16, one and two warpgroups, 128- and 64-byte swizzled operands,
a fused epilogue; each launch checked to run the entry it should (the TMA entry where every input
row is a multiple of 16 bytes, the sm_80 entry otherwise, with the same results).

The ``cpu`` cases run tests/fixtures/hopper/small.py, built for sm_90a, on the emulator, which takes
the TMA entry by the same rule; the ``cuda`` cases need an sm_90 GPU.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from buildtile import tile
from buildtile.backends.tile.hopper.select import HOPPER_TARGET

torch = pytest.importorskip("torch")
TESTS = Path(__file__).parents[1]
sys.path.insert(0, str(TESTS))
from emulated_packages import built_package

FIXTURES = TESTS / "fixtures" / "hopper"
#: relative error against the f32 product of the same inputs: one rounding of the result
TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 4e-3, torch.float32: 1e-4}
#: (M, N, K) ragged against every tile; the last two have rows that are no multiple of 16 bytes
SHAPES = [(100, 200, 56), (257, 136, 1000), (64, 64, 16), (1000, 504, 8), (129, 328, 72), (77, 130, 50),
          (40, 64, 36)]
#: kernel, tile shape, dtype of the cuda cases
KERNELS = [("matmul_bf16", [128, 256], torch.bfloat16), ("matmul_bf16", [128, 128], torch.bfloat16),
           ("matmul_bf16", [64, 64], torch.bfloat16), ("matmul_f16", [128, 256], torch.float16),
           ("matmul_f16", [64, 64], torch.float16), ("matmul_bf16_k32", [128, 128], torch.bfloat16),
           ("matmul_bf16_k32", [64, 64], torch.bfloat16)]


def _device_cases():
    cuda = [pytest.param("cuda", k, t, d, s, marks=pytest.mark.gpu) for k, t, d in KERNELS for s in SHAPES]
    cpu = [pytest.param("cpu", "matmul_f16", [64, 64], torch.float16, s) for s in [(70, 40, 24), (5, 72, 100)]]
    return cuda + cpu


@pytest.fixture(scope="module")
def hopper(tmp_path_factory):
    from kernel_packages import compiled_for_this_gpu

    if not torch.cuda.is_available() or torch.cuda.get_device_capability(0) != (9, 0):
        pytest.skip("needs an sm_90 GPU (H100, H200)")
    with compiled_for_this_gpu(FIXTURES / "matmuls.py", "bthopper", tmp_path_factory.mktemp("hopper"),
                               targets=["sm_90a"]) as ops:
        yield ops


@pytest.fixture(scope="module")
def emulated_small(tmp_path_factory):
    with built_package({"ops": FIXTURES / "small.py"}, "cpuhopper", tmp_path_factory.mktemp("small"),
                       [HOPPER_TARGET]) as mods:
        yield mods["ops"]


def _takes_tma(device: str, n: int, k: int, a) -> bool:
    return n % 8 == 0 and k % 8 == 0 and a.data_ptr() % 16 == 0 and a.stride(0) % 8 == 0


def _matmul(request, device, name, tile_shape, dtype, a, b, c, *extra):
    if device == "cpu":
        from buildtile.emulate import emulated

        ops = request.getfixturevalue("emulated_small")
        with emulated():
            pending = getattr(ops, name)(a, b, *extra, tile.partition(c, tile_shape))
            used = pending.uses_tma
            pending.launch()
        return used
    ops = request.getfixturevalue("hopper")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    pending = getattr(ops, name)(a, b, *extra, tile.partition(c, tile_shape))
    used = pending.uses_tma
    pending.sync_on(stream)
    stream.synchronize()
    return used


def _close(c, want, dtype):
    err = ((c.float() - want).abs().max() / want.abs().max().clamp(min=1e-6)).item()
    assert not math.isnan(err) and err < TOLERANCE[dtype], f"max relative error {err:.3g}"


@pytest.mark.parametrize("device,name,tile_shape,dtype,shape", _device_cases())
def test_matmul_matches_torch(request, device, name, tile_shape, dtype, shape):
    m, n, k = shape
    gen = torch.Generator().manual_seed(m + 3 * n + 7 * k)
    a = torch.randn(m, k, generator=gen).to(dtype).to(device)
    b = torch.randn(k, n, generator=gen).to(dtype).to(device)
    c = torch.full((m, n), float("nan"), dtype=dtype, device=device)
    used = _matmul(request, device, name, tile_shape, dtype, a, b, c)
    assert used == _takes_tma(device, n, k, a)
    _close(c, a.float() @ b.float(), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("view", ["offset base", "padded rows", "transposed b"])
def test_inputs_tma_cannot_read_fall_back_with_the_same_result(request, view):
    m, n, k = 200, 136, 96
    base = torch.randn(m + 1, k + 8, device="cuda").to(torch.bfloat16)
    a = {"offset base": base[1:, 1:k + 1], "padded rows": base[:m, :k]}.get(view, base[:m, :k].contiguous())
    b = torch.randn(n, k, device="cuda").to(torch.bfloat16).t() if view == "transposed b" else \
        torch.randn(k, n, device="cuda").to(torch.bfloat16)
    c = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    used = _matmul(request, "cuda", "matmul_bf16", [128, 128], torch.bfloat16, a, b, c)
    assert used == (view == "padded rows")      # (k + 8) * 2 bytes a row: still a multiple of 16
    _close(c, a.float() @ b.float(), torch.bfloat16)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(300, 200, 96), (64, 128, 64), (129, 72, 200)])
def test_a_fused_epilogue_runs_after_the_wgmma_loop(request, shape):
    m, n, k = shape
    a = torch.randn(m, k, device="cuda").to(torch.float16)
    b = torch.randn(k, n, device="cuda").to(torch.float16)
    bias = torch.randn(n, device="cuda")
    c = torch.full((m, n), float("nan"), device="cuda")
    assert _matmul(request, "cuda", "matmul_bias_relu_f32", [128, 128], torch.float32, a, b, c, bias)
    _close(c, torch.relu(a.float() @ b.float() + bias), torch.float32)


@pytest.mark.gpu
def test_a_persistent_launch_carries_the_barrier_phases_from_tile_to_tile(request):
    m, n, k = 1000, 1000, 200
    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
    c = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    ops = request.getfixturevalue("hopper")
    pending = ops.matmul_bf16(a, b, tile.partition(c, [64, 64], persistent=True))
    assert pending.uses_tma and pending.grid[0] < 16 * 16
    pending.launch()
    torch.cuda.synchronize()
    _close(c, a.float() @ b.float(), torch.bfloat16)
