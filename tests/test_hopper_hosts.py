"""TMA entries in the manifest and the hosts, without a GPU: a small package of sm_90a matmuls built
here, launched through the fake driver (Python host), the fake libcuda (C shim) and the CPU
emulator. A launch takes the TMA entry, with tensor maps encoded from its inputs, exactly where the
device runs its image, the driver encodes maps and the inputs suit the copy engine; otherwise the
specialization's own entry, with the same parameters."""

from __future__ import annotations

import ctypes
import json
import shutil
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from test_c_abi import CC, WARNINGS, DLTensor, LaunchConfig, config, fresh_fake_driver, run, tensor

from buildtile import tile
from buildtile.interop.c_abi import emit
from buildtile.runtime import tensor_maps
from buildtile.runtime.package import forget_package
from buildtile.runtime.testing import fake_driver, read_fake_tensor_map

PACKAGE = "hopper_host_kernels"
SOURCE = """
from buildtile import tile
from buildtile.types import Tensor, f16, f32

@tile.kernel(specialize=[{"c": [64, 64]}],
             requires=["a.shape[0] == c.shape[0]", "b.shape[1] == c.shape[1]", "a.shape[1] == b.shape[0]"])
def matmul(a: Tensor[f16, 2], b: Tensor[f16, 2], c: tile.Out[f32, 2]):
    i, j = c.tile_id(0), c.tile_id(1)
    acc = tile.zeros((64, 64), f32)
    for k in tile.range(tile.cdiv(a.shape[1], 32)):
        ta = tile.load(a, (i, k), (64, 32))
        tb = tile.load(b, (k, j), (32, 64))
        acc = tile.mma(ta, tb, acc)
    c.store(acc)
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(root, manifest) of the package, built for sm_80 and sm_90a (C ABI on)."""
    from buildtile.compiler import compile_project
    from buildtile.config import load_project

    root = tmp_path_factory.mktemp("hopper_hosts")
    (root / PACKAGE).mkdir()
    (root / PACKAGE / "__init__.py").write_text("")
    (root / PACKAGE / "ops.py").write_text(textwrap.dedent(SOURCE))
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "{PACKAGE}"\nversion = "0.1.0"\n\n[tool.buildtile]\n'
        f'kernels = ["{PACKAGE}.ops"]\ntargets = ["sm_80", "sm_90a"]\nptx = false\ncache-dir = "off"\n')
    compile_project(load_project(root, env={}), root, log=lambda line: None)
    return root, json.loads((root / PACKAGE / "_buildtile" / "manifest.json").read_text())


@pytest.fixture
def ops(built):
    root, _ = built
    sys.path.insert(0, str(root))
    tensor_maps.CACHE.clear()
    try:
        import importlib

        yield importlib.import_module(f"{PACKAGE}.ops")
    finally:
        sys.path.remove(str(root))
        forget_package(PACKAGE)
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def test_the_manifest_records_the_tma_entry_and_its_maps(built):
    _, manifest = built
    (spec,) = manifest["kernels"][0]["tile"]["specializations"]
    assert sorted(spec["artifacts"]) == ["sm_80", "sm_90a"]
    tma = spec["tma"]
    assert tma["symbol"] == spec["symbol"] + "__tma" and sorted(tma["artifacts"]) == ["sm_90a"]
    assert tma["block"] == [128, 1, 1] and tma["shared_bytes"] > spec["shared_bytes"]
    assert tma["maps"] == [{"param": "a", "box": [32, 64], "swizzle": 64}, {"param": "b", "box": [64, 32], "swizzle": 128}]


# ---------------------------------------------------------------- the Python host


def _launch(ops, gpu, a, b, m, n):
    c = gpu.array((m, n), "f32")
    pending = ops.matmul(a, b, tile.partition(c, [64, 64]))
    used = pending.uses_tma
    pending.launch()
    return used, gpu.launches[-1]


def test_the_python_host_launches_the_tma_entry_with_maps_of_its_inputs(ops):
    with fake_driver() as gpu:
        a, b = gpu.array((100, 48), "f16"), gpu.array((48, 72), "f16")
        used, launch = _launch(ops, gpu, a, b, 100, 72)
        assert used and launch.symbol.endswith("__tma")
        assert launch.block == (128, 1, 1) and launch.grid == (2, 2, 1)
        spec = ops.matmul.signature.specializations[0]
        assert launch.shared_mem == spec.tma.shared_bytes
        first, second = (read_fake_tensor_map(launch.params[o:o + 128]) for o in launch.offsets[-2:])
        base = {"data_type": 6, "l2_promotion": 3}
        assert first == {**base, "address": a.__cuda_array_interface__["data"][0], "dims": (48, 100),
                         "strides": (96,), "box": (32, 64), "swizzle": 2}
        assert second == {**base, "address": b.__cuda_array_interface__["data"][0], "dims": (72, 48),
                          "strides": (144,), "box": (64, 32), "swizzle": 3}
        # the parameters before the maps are the plain entry's, in the same order
        assert launch.param(0, "Q") == a.__cuda_array_interface__["data"][0] and launch.param(1, "q") == 100
        # the same tensors again: the maps are kept, nothing is encoded twice
        _launch(ops, gpu, a, b, 100, 72)
        assert len(gpu.encoded_maps) == 2


@pytest.mark.parametrize("why", ["misaligned base", "row stride of 8 bytes", "strided columns", "empty K"])
def test_inputs_that_break_tmas_rules_launch_the_plain_entry(ops, why):
    with fake_driver() as gpu:
        k = {"row stride of 8 bytes": 36, "empty K": 0}.get(why, 48)
        a = gpu.array((100, k), "f16")
        if why == "misaligned base":
            a = gpu.array((100, 49), "f16").view(1, (100, 48), (98, 2))
        if why == "strided columns":
            a = gpu.array((100, 96), "f16").view(0, (100, 48), (192, 4))
        b = gpu.array((k, 72), "f16")
        used, launch = _launch(ops, gpu, a, b, 100, 72)
        spec = ops.matmul.signature.specializations[0]
        assert not used and launch.symbol == spec.symbol
        assert (launch.block, launch.shared_mem) == (spec.block, spec.shared_bytes)
        assert len(launch.offsets) == 16 and gpu.encoded_maps == []


@pytest.mark.parametrize("capability,tensor_maps_on", [((8, 0), True), ((9, 0), False)])
def test_a_device_or_driver_without_tma_launches_the_plain_entry(ops, capability, tensor_maps_on):
    with fake_driver(capabilities=[capability], tensor_maps=tensor_maps_on) as gpu:
        a, b = gpu.array((64, 32), "f16"), gpu.array((32, 64), "f16")
        used, launch = _launch(ops, gpu, a, b, 64, 64)
        assert not used and not launch.symbol.endswith("__tma")
        assert not any(name == "get_function" and args[0].endswith("__tma") for name, args in gpu.calls)


def _emulated_matmul(ops, k: int):
    """(whether it took the TMA entry, c, a @ b) of an emulated launch at K = ``k``."""
    from buildtile.emulate import emulated

    rng = np.random.default_rng(3)
    a = rng.standard_normal((70, k)).astype(np.float16)
    b = rng.standard_normal((k, 24)).astype(np.float16)
    c = np.full((70, 24), np.nan, np.float32)
    with emulated():
        pending = ops.matmul(a, b, tile.partition(c, [64, 64]))
        used = pending.uses_tma
        pending.launch()
    return used, c, a.astype(np.float32) @ b.astype(np.float32)


def test_the_emulator_runs_the_tma_entry_of_an_sm_90a_package_where_the_inputs_suit_tma(ops):
    used, c, expected = _emulated_matmul(ops, 40)    # rows of 80 and 48 bytes: multiples of 16
    assert used
    np.testing.assert_allclose(c, expected, rtol=1e-3, atol=1e-3)


def test_the_emulator_runs_the_plain_entry_where_an_input_breaks_tmas_rules(ops):
    used, c, expected = _emulated_matmul(ops, 36)    # rows of a are 72 bytes
    assert not used
    np.testing.assert_allclose(c, expected, rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------- the C shim


class TensorMapCall(ctypes.Structure):
    """tests/fake_libcuda.c's record of the last cuTensorMapEncodeTiled."""

    _fields_ = [("calls", ctypes.c_int), ("data_type", ctypes.c_int), ("rank", ctypes.c_uint),
                ("address", ctypes.c_ulonglong), ("dims", ctypes.c_ulonglong * 2), ("strides", ctypes.c_ulonglong * 1),
                ("box", ctypes.c_uint * 2), ("element_strides", ctypes.c_uint * 2), ("interleave", ctypes.c_int),
                ("swizzle", ctypes.c_int), ("l2_promotion", ctypes.c_int), ("oob_fill", ctypes.c_int)]


@pytest.fixture(scope="module")
def shim_library(built, tmp_path_factory):
    if CC is None:
        pytest.skip("needs a C compiler")
    root, manifest = built
    out = tmp_path_factory.mktemp("hopper_shim")
    project = emit(manifest, root / PACKAGE / "_buildtile", out / "build", None).cmake_source_dir
    fake = out / "libcuda.so.1"
    run([CC, "-std=c11", *WARNINGS, "-fPIC", "-shared", Path(__file__).parent / "fake_libcuda.c", "-o", fake])
    lib = out / "libshim.so"
    run([CC, "-std=c11", *WARNINGS, "-Wpedantic", "-O1", "-fPIC", "-shared", "-fvisibility=hidden",
         "-I", project / "include", "-I", project / "src", *sorted((project / "src").glob("*.c")), "-o", lib,
         "-ldl", "-lpthread"])
    return lib, fake, manifest


@pytest.fixture
def shim(shim_library, tmp_path, monkeypatch):
    lib, fake, manifest = shim_library
    driver, state = fresh_fake_driver(fake, monkeypatch, devices=1)
    copy = tmp_path / "libshim.so"
    shutil.copy(lib, copy)
    shim = ctypes.CDLL(str(copy))
    (spec,) = manifest["kernels"][0]["tile"]["specializations"]
    launcher = getattr(shim, "bt_" + spec["symbol"])
    launcher.argtypes = [ctypes.POINTER(LaunchConfig)] + [ctypes.POINTER(DLTensor)] * 3
    shim.hopper_host_kernels_last_error.restype = ctypes.c_char_p
    record = TensorMapCall.in_dll(driver, "fake_tensor_map")
    record.calls = 0
    return launcher, state, record, spec, shim


A, B, C = 0x7F0000000000, 0x7F0000100000, 0x7F0000200000


def test_the_c_shim_launches_the_tma_entry_with_the_same_maps(shim):
    launcher, state, record, spec, lib = shim
    cfg = config(0, 0, 0)
    status = launcher(ctypes.byref(cfg), ctypes.byref(tensor(A, (100, 48), "f16")),
                      ctypes.byref(tensor(B, (48, 72), "f16")), ctypes.byref(tensor(C, (100, 72), "f32")))
    assert status == 0, lib.hopper_host_kernels_last_error()
    assert state.function.decode() == spec["tma"]["symbol"]
    assert tuple(state.block) == (128, 1, 1) and state.shared == spec["tma"]["shared_bytes"]
    assert tuple(state.grid) == (2, 2, 1)
    assert record.calls == 2   # a, then b: the last one recorded
    assert (record.data_type, record.rank, record.address) == (6, 2, B)
    assert (tuple(record.dims), tuple(record.strides), tuple(record.box)) == ((72, 48), (144,), (64, 32))
    assert (tuple(record.element_strides), record.interleave, record.swizzle, record.l2_promotion,
            record.oob_fill) == ((1, 1), 0, 3, 3, 0)


def test_the_c_shim_launches_the_plain_entry_for_a_misaligned_input(shim):
    launcher, state, record, spec, lib = shim
    cfg = config(0, 0, 0)
    a = tensor(A, (100, 48), "f16", strides=(49, 1), byte_offset=2)
    status = launcher(ctypes.byref(cfg), ctypes.byref(a), ctypes.byref(tensor(B, (48, 72), "f16")),
                      ctypes.byref(tensor(C, (100, 72), "f32")))
    assert status == 0, lib.hopper_host_kernels_last_error()
    assert state.function.decode() == spec["symbol"] and record.calls == 0
    assert tuple(state.block) == tuple(spec["block"])


def test_the_c_shim_launches_the_plain_entry_on_a_device_without_its_image(shim):
    launcher, state, record, spec, lib = shim
    state.cc_major = 8
    cfg = config(0, 0, 0)
    status = launcher(ctypes.byref(cfg), ctypes.byref(tensor(A, (64, 32), "f16")),
                      ctypes.byref(tensor(B, (32, 64), "f16")), ctypes.byref(tensor(C, (64, 64), "f32")))
    assert status == 0, lib.hopper_host_kernels_last_error()
    assert state.function.decode() == spec["symbol"] and record.calls == 0


def test_tensor_map_requests_follow_the_copy_engines_rules():
    from buildtile.interop.manifest import TensorMapRecord

    class View:
        def __init__(self, ptr, shape, strides, dtype="bf16"):
            self.ptr, self.shape, self.strides, self.dtype, self.itemsize = ptr, shape, strides, dtype, 2

    record = TensorMapRecord("a", (64, 128), 128)
    ok = tensor_maps.request_for(record, View(0x1000, (300, 200), (200, 1)))
    assert ok == tensor_maps.TensorMapRequest(9, 0x1000, (200, 300), (400,), (64, 128), 3)
    assert tensor_maps.request_for(record, View(0x1000, (1, 200), (8, 1))) is not None   # one row may overlap
    for bad in [View(0x1002, (300, 200), (200, 1)), View(0x1000, (300, 201), (201, 1)),
                View(0x1000, (300, 200), (400, 2)), View(0x1000, (0, 200), (200, 1)),
                View(0x1000, (300, 200), (8, 1)), View(0x1000, (300, 200), (200, 1), "f32")]:
        assert tensor_maps.request_for(record, bad) is None


def test_the_emulator_lowers_a_tma_entry_by_name_and_encodes_maps_it_reads(ops):
    from buildtile.emulate import emulated
    from buildtile.emulate.tensor_maps import decode

    spec = ops.matmul.signature.specializations[0]
    with emulated() as driver:
        function = driver.get_function(None, spec.tma.symbol)
        a = np.zeros((300, 200), np.float16)
        request = tensor_maps.request_for(spec.tma.maps[0], _view_of(a))
        fields = decode(driver.encode_tensor_map(request))
    assert {"emu_wgmma_mma", "emu_tma_load_2d", "emu_mbarrier_wait_parity"} <= function.host.runtime_calls
    assert fields["address"] == a.ctypes.data and fields["dims"] == (200, 300) and fields["strides"] == (400,)
    assert fields["box"] == (32, 64) and fields["swizzle_bytes"] == 64 and fields["element_bytes"] == 2


def _view_of(a: np.ndarray):
    """The fields of an ArrayView that tensor_maps.request_for reads."""
    from types import SimpleNamespace

    return SimpleNamespace(dtype="f16", shape=a.shape, strides=tuple(s // a.itemsize for s in a.strides),
                           itemsize=a.itemsize, ptr=a.ctypes.data)
