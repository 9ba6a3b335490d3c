"""A kernel with an aligned entry: the host launches it only when every data pointer is aligned."""

from __future__ import annotations

import pytest

from buildtile.errors import BuildtileError
from buildtile.interop import manifest as manifest_format

SOURCE = "from buildtile import simt\n\n@simt.kernel\ndef scale(x, y):\n    pass\n"
SCALE = dict(params=[("x", "slice", "f32"), ("y", "disjoint_slice", "f32")],
             requires=["len(x) == len(y)"], aligned=True)


def launched_symbols(fake_gpu) -> list[str]:
    return [record.symbol for record in fake_gpu.launches]


def test_aligned_arguments_launch_the_aligned_entry(make_kernel_package, fake_gpu):
    ops = make_kernel_package(SOURCE, {"scale": SCALE})
    x, y = fake_gpu.array(1000), fake_gpu.array(1000)
    assert x.ptr % 16 == 0 and y.ptr % 16 == 0
    ops.scale[4](x, y)
    assert launched_symbols(fake_gpu) == [ops.scale.record["symbol"] + "__a16"]


@pytest.mark.parametrize("offset", [1, 2, 3])
def test_a_misaligned_view_launches_the_plain_entry(make_kernel_package, fake_gpu, offset):
    ops = make_kernel_package(SOURCE, {"scale": SCALE})
    base, y = fake_gpu.array(1000), fake_gpu.array(999)
    x = base.view(offset, shape=(999,))
    ops.scale[4](x, y)
    assert launched_symbols(fake_gpu) == [ops.scale.record["symbol"]]


def test_one_misaligned_argument_of_several_launches_the_plain_entry(make_kernel_package, fake_gpu):
    ops = make_kernel_package(SOURCE, {"scale": SCALE})
    x, base = fake_gpu.array(999), fake_gpu.array(1000)
    ops.scale[4](x, base.view(1, shape=(999,)))
    assert launched_symbols(fake_gpu) == [ops.scale.record["symbol"]]


def test_repeated_launches_follow_each_calls_alignment(make_kernel_package, fake_gpu):
    """The compiled way, once armed, still picks the entry per call."""
    ops = make_kernel_package(SOURCE, {"scale": SCALE})
    base, y = fake_gpu.array(1001), fake_gpu.array(1000)
    aligned, misaligned = base.view(0, shape=(1000,)), base.view(1, shape=(1000,))
    launch = ops.scale.prepare(grid=4)
    for x in (aligned, aligned, misaligned, misaligned, aligned, misaligned):
        launch(x, y)
    plain = ops.scale.record["symbol"]
    assert launched_symbols(fake_gpu) == [plain + "__a16"] * 2 + [plain] * 2 + [plain + "__a16", plain]


def test_a_kernel_without_an_aligned_entry_launches_its_one_entry(make_kernel_package, fake_gpu):
    ops = make_kernel_package(SOURCE, {"scale": {**SCALE, "aligned": False}})
    x, y = fake_gpu.array(1000), fake_gpu.array(1000)
    ops.scale[4](x, y)
    assert launched_symbols(fake_gpu) == [ops.scale.record["symbol"]]


def test_the_manifest_refuses_an_aligned_entry_whose_alignment_is_no_power_of_two(make_kernel_package):
    ops = make_kernel_package(SOURCE, {"scale": SCALE})
    data = ops.MANIFEST
    data["kernels"][0]["aligned"]["align"] = 12
    with pytest.raises(BuildtileError, match="aligned.align is 12"):
        manifest_format.parse(data, "manifest.json")
