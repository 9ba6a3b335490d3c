"""buildtile.random: the reference stream against Philox-4x32-10's published answers, and a SIMT
kernel's draws (its LLVM IR run on the host) against the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from buildtile import random
from buildtile.emulate.direct import SimtKernel

UI_PASS = Path(__file__).parent / "ui" / "pass"

# Random123's kat_vectors for philox4x32_10: (counter words, key words) -> output words
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter, key, want", KNOWN_ANSWERS)
def test_reference_philox_matches_the_published_answers(counter, key, want):
    assert tuple(int(w) for w in random.philox_block(counter, key)) == want


def test_seed_offset_and_counter_split_into_low_and_high_words():
    seed, offset, counter = 0xA4093822_299F31D0, 0x85A308D3_243F6A88, 0x03707344_13198A2E
    want = random.philox_block((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0x299F31D0, 0xA4093822))
    assert [int(random.philox(seed, offset, counter, k)) for k in range(4)] == [int(w) for w in want]


def test_a_signed_seed_is_its_twos_complement():
    assert int(random.philox(-1, 3, 0, 0)) == int(random.philox(2**64 - 1, 3, 0, 0))
    assert int(random.philox(np.int32(-2), 3, 0, 1)) == int(random.philox(2**64 - 2, 3, 0, 1))


def test_host_draws_broadcast_over_arrays_as_scalars_do():
    offsets = np.arange(50, dtype=np.int64)
    u = random.uniform(7, offsets)
    assert u.dtype == np.float32 and u.shape == (50,)
    assert [float(random.uniform(7, int(k))) for k in offsets] == u.tolist()


def test_uniform_and_normal_have_their_distributions():
    offsets = np.arange(200_000, dtype=np.uint64)
    u = random.uniform(2024, offsets)
    assert u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    z = random.normal(2024, offsets)
    assert np.isfinite(z).all()
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1.0) < 0.01


def test_different_seeds_give_different_streams():
    offsets = np.arange(1000)
    assert (random.philox(1, offsets, 0, 0) != random.philox(2, offsets, 0, 0)).mean() > 0.99


@pytest.fixture(scope="module")
def draws():
    return SimtKernel(UI_PASS / "random_draws.py", "draws")


@pytest.mark.parametrize("seed", [0, 0x123456789ABCDEF0, 2**64 - 1])
def test_kernel_stream_equals_the_reference(draws, seed):
    n = 333   # ragged: the last block is partly idle
    words = np.zeros(n, np.uint32)
    uniform = np.zeros(n, np.float32)
    normal = np.zeros(n, np.float32)
    draws((n + 127) // 128, 128, words, uniform, normal, seed)
    i = np.arange(n)
    want = np.select([i % 4 == k for k in range(4)], [random.philox(seed, i, 5, k) for k in range(4)])
    np.testing.assert_array_equal(words, want)
    np.testing.assert_array_equal(uniform, random.uniform(seed, i))
    np.testing.assert_allclose(normal, random.normal(seed, i), rtol=1e-5, atol=1e-5)
