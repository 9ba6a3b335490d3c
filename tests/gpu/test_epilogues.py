"""The fused-epilogue matmuls of example_kernels.epilogues against torch at ragged shapes, bf16 and f16:
``gelu(a @ b + bias)`` and ``alpha * (a @ b) + residual``, each against the f32 result of the same
inputs (one rounding of the output apart) and, on a GPU, against torch's unfused chain in the
inputs' dtype.

On the GPU the kernels come from the installed example project (as tests/gpu/run.sh installs it;
its sm_80/sm_90 entries), else they are compiled here for this GPU; on an sm_90 GPU they are
also built for sm_90a, where the launches whose inputs the copy engine reads take the TMA entry.
The ``cpu`` cases run a few small shapes on the emulator (in the default suite).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from buildtile import tile

torch = pytest.importorskip("torch")
TESTS = Path(__file__).parents[1]
sys.path.insert(0, str(TESTS))
from emulated_packages import examples_for_the_emulator  # noqa: E402

SOURCE = TESTS.parent / "example_project/example_kernels/epilogues.py"
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
#: relative error (to the largest value) against the f32 result: one rounding of the output
TOLERANCE = {"bf16": 2e-2, "f16": 4e-3}
#: (M, N, K): single elements, K shorter than one K step (64) and no multiple of 8, ragged
#: against every tile, several K steps; the first and the last two have rows TMA cannot read (N or K % 8 != 0)
SHAPES = [(1, 1, 1), (100, 200, 56), (257, 136, 1000), (64, 64, 16), (1000, 504, 8), (300, 264, 200),
          (129, 328, 72), (77, 130, 50), (40, 66, 36)]
TILES = [[128, 256], [128, 128], [64, 64]]
EPILOGUES = ["bias_gelu", "residual"]
#: the emulator's cases: (epilogue, dtype, (M, N, K)), 64 x 64 tiles; K under one step and over it
CPU_CASES = [("bias_gelu", "bf16", (70, 40, 24)), ("bias_gelu", "f16", (5, 72, 100)),
             ("residual", "f16", (70, 40, 24)), ("residual", "bf16", (5, 72, 100))]


def _cases():
    cuda = [pytest.param("cuda", build, epilogue, dtype, tile_shape, shape, marks=pytest.mark.gpu)
            for build in ("example", "sm_90a") for epilogue in EPILOGUES for dtype in DTYPES
            for tile_shape in TILES for shape in SHAPES]
    cpu = [pytest.param("cpu", "example", epilogue, dtype, [64, 64], shape) for epilogue, dtype, shape in CPU_CASES]
    return cuda + cpu


@pytest.fixture(scope="module")
def example_kernels(tmp_path_factory):
    from kernel_packages import example_or_compiled

    with example_or_compiled("epilogues", "matmul_bias_gelu_bf16", SOURCE, "btepilogues",
                             tmp_path_factory.mktemp("epilogues")) as ops:
        yield ops


@pytest.fixture(scope="module")
def hopper_kernels(tmp_path_factory):
    from kernel_packages import compiled_for_this_gpu

    if not torch.cuda.is_available() or torch.cuda.get_device_capability(0) != (9, 0):
        pytest.skip("needs an sm_90 GPU (H100, H200)")
    with compiled_for_this_gpu(SOURCE, "btepilogues90a", tmp_path_factory.mktemp("epilogues90a"),
                               targets=["sm_90a"]) as ops:
        yield ops


def _takes_tma(device: str, build: str, n: int, k: int, a) -> bool:
    """Whether the launch runs the TMA entry: built for sm_90a, every operand row a multiple of
    16 bytes from a 16-byte aligned base."""
    return (device == "cuda" and build == "sm_90a" and n % 8 == 0 and k % 8 == 0 and a.data_ptr() % 16 == 0
            and a.stride(0) % 8 == 0)


def _launch(request, device, build, kernel_name, tile_shape, args, c) -> bool:
    """Run the kernel over ``c`` partitioned into ``tile_shape``; whether it took the TMA entry."""
    if device == "cpu":
        from buildtile.emulate import emulated

        kernels = examples_for_the_emulator()["epilogues"]
        with emulated():
            pending = getattr(kernels, kernel_name)(*args, tile.partition(c, tile_shape))
            used = pending.uses_tma
            pending.launch()
        return used
    kernels = request.getfixturevalue("hopper_kernels" if build == "sm_90a" else "example_kernels")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    pending = getattr(kernels, kernel_name)(*args, tile.partition(c, tile_shape))
    used = pending.uses_tma
    pending.sync_on(stream)
    stream.synchronize()
    return used


def _close(c, want, tolerance: float) -> None:
    err = ((c.float() - want.float()).abs().max() / want.float().abs().max().clamp(min=1e-6)).item()
    assert not math.isnan(err) and err < tolerance, f"max relative error {err:.3g}"


@pytest.mark.parametrize("device,build,epilogue,dtype,tile_shape,shape", _cases())
def test_fused_epilogue_matches_torch(request, device, build, epilogue, dtype, tile_shape, shape):
    m, n, k = shape
    held = DTYPES[dtype]
    gen = torch.Generator().manual_seed(m + 3 * n + 7 * k)
    a = torch.randn(m, k, generator=gen).to(held).to(device)
    b = torch.randn(k, n, generator=gen).to(held).to(device)
    c = torch.full((m, n), float("nan"), dtype=held, device=device)
    if epilogue == "bias_gelu":
        bias = torch.randn(n, generator=gen).to(held).to(device)
        args = (a, b, bias)
        want = torch.nn.functional.gelu(a.float() @ b.float() + bias.float())
        unfused = (lambda: torch.nn.functional.gelu(a @ b + bias))
    else:
        residual = torch.randn(m, n, generator=gen).to(held).to(device)
        alpha = -1.5
        args = (a, b, residual, alpha)
        want = alpha * (a.float() @ b.float()) + residual.float()
        unfused = (lambda: alpha * (a @ b) + residual)
    used = _launch(request, device, build, f"matmul_{epilogue}_{dtype}", tile_shape, args, c)
    assert used == _takes_tma(device, build, n, k, a)
    _close(c, want, TOLERANCE[dtype])
    if device == "cuda":
        # torch's chain rounds the product (and the sum) to the dtype before the next operation
        _close(c, unfused(), 2 * TOLERANCE[dtype])
