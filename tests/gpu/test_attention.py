"""The fused attention forward of example_kernels.attention against NumPy (and, on a GPU, torch's
scaled_dot_product_attention) at ragged sequence lengths.

Every dtype, head dim, tile height and causal flag runs on the GPU; the CPU emulator
(``device`` cpu, in the default suite) runs a few small cases that still cover both dtypes,
both head dims, both flags, ragged key blocks, more keys than queries and the reverse.
On the GPU the kernel comes from the installed example project (as tests/gpu/run.sh installs
it), else it is compiled here for this GPU.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from buildtile import tile

torch = pytest.importorskip("torch")
TESTS = Path(__file__).parents[1]
sys.path.insert(0, str(TESTS))
from emulated_packages import examples_for_the_emulator  # noqa: E402

SOURCE = TESTS.parent / "example_project/example_kernels/attention.py"
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
#: the output is rounded to its dtype, and the probabilities to it before the second product
TOLERANCE = {"bf16": 2e-2, "f16": 4e-3}
#: (batch, heads, seq_q, seq_k): single rows and keys, ragged blocks, more keys than queries and
#: fewer, several tiles of queries
SHAPES = [(1, 1, 1, 1), (1, 2, 77, 77), (2, 3, 200, 200), (1, 2, 77, 200), (1, 2, 200, 77), (2, 2, 300, 1000)]
#: the emulator's cases: (batch, heads, seq_q, seq_k, dtype, head_dim, causal), 64-row tiles;
#: between them both dtypes, head dims and flags, more queries than keys and fewer
CPU_CASES = [(1, 1, 77, 77, "bf16", 64, True), (1, 1, 70, 20, "f16", 128, True), (1, 2, 1, 70, "f16", 128, False)]


def gpu_cases():
    return [pytest.param("cuda", *shape, dtype, d, causal, rows, marks=pytest.mark.gpu)
            for shape in SHAPES for dtype in DTYPES for d in (64, 128) for causal in (False, True)
            for rows in (128, 64)]


def cpu_cases():
    return [pytest.param("cpu", b, h, lq, lk, dtype, d, causal, 64) for b, h, lq, lk, dtype, d, causal in CPU_CASES]


@pytest.fixture(scope="module")
def cuda_kernels(tmp_path_factory):
    from kernel_packages import example_or_compiled

    with example_or_compiled("attention", "attention", SOURCE, "btattention",
                             tmp_path_factory.mktemp("attention")) as ops:
        yield ops


@pytest.fixture
def kernels(request, device):
    if device == "cuda":
        yield request.getfixturevalue("cuda_kernels")
        return
    from buildtile.emulate import emulated

    module = examples_for_the_emulator()["attention"]
    with emulated():
        yield module


def reference(q, k, v, scale: float, causal: bool) -> np.ndarray:
    """softmax(q k^T scale) v in float64 on the (rounded) inputs; causal: key j <= query i."""
    q, k, v = (t.float().cpu().numpy().astype(np.float64) for t in (q, k, v))
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("bhqk,bhkd->bhqd", p / p.sum(axis=-1, keepdims=True), v)


def attend(kernels, device, q, k, v, scale, causal, rows):
    out = torch.full_like(q, float("nan"))
    launch = kernels.attention(q, k, v, scale, causal, tile.partition(out, [1, 1, rows, q.shape[3]]))
    if device == "cpu":
        return launch.sync_on(0)[-1].array
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    handles = launch.sync_on(stream)
    stream.synchronize()
    return handles[-1].array


@pytest.mark.parametrize("device,batch,heads,seq_q,seq_k,dtype,head_dim,causal,rows", gpu_cases() + cpu_cases())
def test_attention_matches_numpy(kernels, device, batch, heads, seq_q, seq_k, dtype, head_dim, causal, rows):
    g = torch.Generator().manual_seed(seq_q * 1000 + seq_k + head_dim)
    q, k, v = ((torch.randn(batch, heads, n, head_dim, generator=g) * s).to(DTYPES[dtype]).to(device)
               for n, s in ((seq_q, 1.0), (seq_k, 1.0), (seq_k, 2.0)))
    scale = 1 / math.sqrt(head_dim)
    got = attend(kernels, device, q, k, v, scale, causal, rows)
    want = reference(q, k, v, scale, causal)
    tol = TOLERANCE[dtype] * 2          # v has a scale of 2
    np.testing.assert_allclose(got.float().cpu().numpy(), want, rtol=tol, atol=tol)
    if device == "cuda":
        sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
        torch.testing.assert_close(got.float(), sdpa.float(), rtol=tol, atol=tol)
