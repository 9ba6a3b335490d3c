"""Host time per launch: buildtile against CuPy RawKernel, cuda.core and Triton, in one run.

Run on a GPU machine (PyTorch with CUDA needed; CuPy, cuda.core and Triton
are each measured when importable):

    python benchmarks/bench_launch.py [--launches 20000] [--rounds 7] [--burst 500]

Three kernels, all ``out[i] = sum of the inputs[i]`` over f32 slices of 1024
elements, with 1, 3 and 8 array arguments (0, 2 and 7 inputs). They are
written here in PTX, so every library launches the very same cubin:
buildtile loads it through a small temporary package whose manifest is
written by hand (with ``requires`` relating every input's length to the
output's, as a compiled kernel would declare), CuPy through
``RawModule``, cuda.core through ``ObjectCode.from_cubin``. Triton gets an
equivalent ``@triton.jit`` kernel. When the example project is installed,
its compiled ``vecadd`` is measured too.

``--host-only`` needs no GPU: it times buildtile's own Python work per
launch with a driver whose launch does nothing (the test suite's fake
driver), for DeviceArrays and for objects with ``__cuda_array_interface__``,
so that the cost of the launch path can be followed on any machine.

Each number is the host time of one launch call: the wall time of
``--launches`` calls divided by their number, after warm-up, the best of
``--rounds`` rounds, in which the libraries take turns. The calls are
timed in bursts of ``--burst``, and the GPU is drained (untimed) between bursts, so that a queue full of tiny
kernels never makes a fast host wait for the GPU. buildtile and Triton
take PyTorch tensors, CuPy takes CuPy arrays, cuda.core takes
``tensor.data_ptr()`` ints. Ratios are against CuPy's RawKernel with the
same number of array arguments. Most rows repeat one set of arguments; the
rows "argument sets in turn" cycle through several, so every call binds,
checks and packs new ones.

Every row checks the work it timed: its outputs are poisoned (NaN) before
its timed launches and compared with the expected sums after them, so a row
whose path launched nothing cannot look fast; ``--host-only`` rows count the
launches their driver received instead.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import itertools
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

N = 1024
BLOCK = 256
GRID = N // BLOCK
#: array arguments per kernel -> kernel name; all but the last are inputs
KERNELS = {1: "fill", 3: "add2", 8: "add7"}
PACKAGE = "_buildtile_launch_bench"


# ----------------------------------------------------------------------------- the kernels

def input_names(arrays: int) -> list[str]:
    return [f"x{k}" for k in range(arrays - 1)]


def kernel_ptx(symbol: str, arrays: int, target: str) -> str:
    """PTX (kernel ABI v1: each slice is data pointer + i64 length) of ``out[i] = sum(x_k[i])``;
    with no inputs, ``out[i] = 1``."""
    inputs = input_names(arrays)
    params = [f".param .u64 {name}_data, .param .u64 {name}_len" for name in [*inputs, "out"]]
    lines = [
        ".version 8.0", f".target {target}", ".address_size 64", "",
        f".visible .entry {symbol}(", "    " + ",\n    ".join(params), f") .reqntid {BLOCK}, 1, 1", "{",
        "    .reg .pred %p<2>;", "    .reg .b32 %r<4>;", "    .reg .b64 %rd<6>;", "    .reg .f32 %f<3>;",
        "    mov.u32 %r1, %ctaid.x;", "    mov.u32 %r2, %ntid.x;", "    mov.u32 %r3, %tid.x;",
        "    mul.wide.u32 %rd1, %r1, %r2;", "    cvt.u64.u32 %rd2, %r3;", "    add.s64 %rd1, %rd1, %rd2;",
        "    ld.param.u64 %rd5, [out_len];", "    setp.ge.s64 %p1, %rd1, %rd5;", "    @%p1 bra DONE;",
        "    shl.b64 %rd2, %rd1, 2;",
        f"    mov.f32 %f1, {'0f00000000' if inputs else '0f3F800000'};",
    ]
    for name in inputs:
        lines += [f"    ld.param.u64 %rd4, [{name}_data];", "    cvta.to.global.u64 %rd4, %rd4;",
                  "    add.s64 %rd3, %rd4, %rd2;", "    ld.global.f32 %f2, [%rd3];", "    add.rn.f32 %f1, %f1, %f2;"]
    lines += ["    ld.param.u64 %rd4, [out_data];", "    cvta.to.global.u64 %rd4, %rd4;",
              "    add.s64 %rd3, %rd4, %rd2;", "    st.global.f32 [%rd3], %f1;", "DONE:", "    ret;", "}", ""]
    return "\n".join(lines)


def _len_equals(a: str, b: str) -> dict:
    return {"text": f"len({a}) == len({b})",
            "expr": {"op": "cmp", "fn": "==", "lhs": {"op": "len", "param": a}, "rhs": {"op": "len", "param": b}}}


def write_package(root: Path, arch: str) -> dict[int, tuple[str, bytes]]:
    """Write the importable package ``PACKAGE`` under ``root``; returns arrays -> (symbol, cubin)."""
    from buildtile.interop.abi import ABI_VERSION, mangle
    from buildtile.toolchain.nvjitlink import ptx_to_cubin

    package = root / PACKAGE
    (package / "_buildtile" / "kernels").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    module = f"{PACKAGE}.ops"
    source = ["from buildtile import simt", ""]
    records, images = [], {}
    for arrays, name in KERNELS.items():
        inputs = input_names(arrays)
        source += ["@simt.kernel", f"def {name}({', '.join([*inputs, 'out'])}):", "    pass", ""]
        symbol = mangle(module, name)
        cubin = ptx_to_cubin(kernel_ptx(symbol, arrays, arch), arch)
        images[arrays] = (symbol, cubin)
        path = f"kernels/{symbol}.{arch}.cubin"
        (package / "_buildtile" / path).write_bytes(cubin)
        records.append({
            "name": name, "module": module, "symbol": symbol, "kind": "simt",
            "source": {"file": f"{PACKAGE}/ops.py", "line": 1},
            "params": [{"name": p, "kind": "slice", "dtype": "f32", "rank": 1, "role": "in"} for p in inputs]
                      + [{"name": "out", "kind": "disjoint_slice", "dtype": "f32", "rank": 1, "role": "out"}],
            "contract": {"block": [BLOCK, 1, 1], "index_dims": 1, "min_blocks": None, "dynamic_shared": 0,
                         "min_compute_capability": None, "requires": [_len_equals(p, "out") for p in inputs]},
            "artifacts": {arch: {"kind": "cubin", "path": path, "sha256": hashlib.sha256(cubin).hexdigest()}},
        })
    (package / "ops.py").write_text("\n".join(source))
    manifest = {"manifest_version": 1, "abi_version": ABI_VERSION, "package": PACKAGE,
                "buildtile_version": "bench", "targets": [arch], "ptx_target": None, "checks": "release",
                "kernels": records}
    (package / "_buildtile" / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return images


# ----------------------------------------------------------------------------- timing

@dataclass
class Row:
    """One measured way to launch: ``call`` launches once; ``poison`` spoils its outputs before a
    timed round and ``check`` asserts, after the round, that its launches wrote them."""

    call: Callable[[], object]
    poison: Callable[[], object]
    check: Callable[[str], None]


def per_launch_us(rows: dict[str, Row], launches: int, rounds: int, burst: int, synchronize) -> dict[str, float]:
    """``{label: host time of one call in microseconds}`` for ``rows``: the mean over ``launches``
    calls, the best of ``rounds``. The rows take turns within each round (the order rotates), so a
    slow spell of the machine hits them alike. Calls are timed in bursts of ``burst`` with the GPU
    drained between bursts (untimed), so a queue full of tiny kernels never makes the host wait.
    Each row's outputs are poisoned before each of its rounds and checked after it (untimed)."""
    for row in rows.values():
        for _ in range(min(launches, 2000)):
            row.call()
    synchronize()
    best = dict.fromkeys(rows, float("inf"))
    labels = list(rows)
    for round_ in range(rounds):
        for label in labels[round_ % len(labels):] + labels[:round_ % len(labels)]:
            row, elapsed, done = rows[label], 0.0, 0
            row.poison()
            synchronize()
            while done < launches:
                count = min(burst, launches - done)
                start = time.perf_counter()
                for _ in range(count):
                    row.call()
                elapsed += time.perf_counter() - start
                done += count
                synchronize()
            row.check(label)
            best[label] = min(best[label], elapsed / launches * 1e6)
    return best


def _cuda_core_launcher(kernel_symbol: str, cubin: bytes, torch_args: list):
    """A zero-argument launch through cuda.core, or None when cuda.core is not importable."""
    try:
        core = importlib.import_module("cuda.core")
        ObjectCode, LaunchConfig, launch, Device = core.ObjectCode, core.LaunchConfig, core.launch, core.Device
    except (ImportError, AttributeError):
        try:
            core = importlib.import_module("cuda.core.experimental")
        except ImportError:
            return None
        ObjectCode, LaunchConfig, launch, Device = core.ObjectCode, core.LaunchConfig, core.launch, core.Device
    device = Device(0)
    device.set_current()
    stream = device.default_stream
    kernel = ObjectCode.from_cubin(cubin).get_kernel(kernel_symbol)
    config = LaunchConfig(grid=GRID, block=BLOCK)
    length = N

    def args():
        flat = []
        for t in torch_args:
            flat += [t.data_ptr(), length]
        return flat

    def new_api():  # cuda.core >= 0.2: launch(stream, config, kernel, *args)
        launch(stream, config, kernel, *args())

    try:
        new_api()
        return new_api
    except Exception as first:  # an older cuda.core: the stream is part of the config
        old_config = LaunchConfig(grid=GRID, block=BLOCK, stream=stream)

        def old_api():
            launch(kernel, old_config, *args())

        try:
            old_api()
        except Exception:
            raise first from None
        return old_api


def _triton_kernels():
    """``{arrays: jitted kernel}``, or None when Triton is not importable."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def fill(out, n, BLOCK_SIZE: tl.constexpr):
        offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        tl.store(out + offs, tl.full((BLOCK_SIZE,), 1.0, tl.float32), mask=offs < n)

    @triton.jit
    def add2(x0, x1, out, n, BLOCK_SIZE: tl.constexpr):
        offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n
        tl.store(out + offs, tl.load(x0 + offs, mask=mask) + tl.load(x1 + offs, mask=mask), mask=mask)

    @triton.jit
    def add7(x0, x1, x2, x3, x4, x5, x6, out, n, BLOCK_SIZE: tl.constexpr):
        offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n
        acc = tl.load(x0 + offs, mask=mask) + tl.load(x1 + offs, mask=mask) + tl.load(x2 + offs, mask=mask)
        acc += tl.load(x3 + offs, mask=mask) + tl.load(x4 + offs, mask=mask) + tl.load(x5 + offs, mask=mask)
        acc += tl.load(x6 + offs, mask=mask)
        tl.store(out + offs, acc, mask=mask)

    return {1: fill, 3: add2, 8: add7}


# ----------------------------------------------------------------------------- main

def measure(arrays: int, ops, images: dict, package_dir: Path, arch: str, libraries: dict) -> dict[str, Row]:
    """``{label: Row}`` for the kernel with ``arrays`` array arguments."""
    import torch

    cupy, triton_kernels = libraries["cupy"], libraries["triton"]
    name = KERNELS[arrays]
    kernel = getattr(ops, name)
    symbol, cubin = images[arrays]

    def torch_set():
        inputs = [torch.randn(N, device="cuda") for _ in range(arrays - 1)]
        expected = sum(inputs) if inputs else torch.ones(N, device="cuda")
        return (*inputs, torch.empty(N, device="cuda")), expected

    def torch_row(call, sets) -> Row:
        def check(label):
            for args, expected in sets:
                if not torch.allclose(args[-1], expected, rtol=1e-5, atol=1e-5):   # NaN (unwritten) fails
                    raise AssertionError(f"{name}, {label}: the output differs from the expected sum after timing")
        return Row(call, lambda: [args[-1].fill_(float("nan")) for args, _ in sets], check)

    one = torch_set()
    args = one[0]
    prepared = kernel.prepare(grid=GRID)
    stream = torch.cuda.current_stream().cuda_stream
    rows: dict[str, Row] = {}
    # arguments that change on every call: SETS sets of arrays, taken in turn
    turns = [torch_set() for _ in range(SETS)]
    if cupy is not None:
        raw = cupy.RawModule(path=str(package_dir / "_buildtile" / kernel.record["artifacts"][arch]["path"]))
        raw_kernel = raw.get_function(symbol)

        def cupy_set():   # inputs of ones: the output is arrays - 1 (or 1 for fill)
            return [cupy.ones(N, cupy.float32) for _ in range(arrays)]

        def cupy_row(call, sets) -> Row:
            want = float(arrays - 1 if arrays > 1 else 1)

            def check(label):
                for outputs in sets:
                    if not bool((outputs[-1] == want).all()):
                        raise AssertionError(f"{name}, {label}: the output differs from the expected sum after timing")
            return Row(call, lambda: [outputs[-1].fill(float("nan")) for outputs in sets], check)

        def raw_args(outputs):
            return tuple(x for a in outputs for x in (a, cupy.int64(N)))

        single = cupy_set()
        packed = raw_args(single)
        rows[CUPY_ROW] = cupy_row(lambda: raw_kernel((GRID,), (BLOCK,), packed), [single])
        cupy_sets = [cupy_set() for _ in range(SETS)]
        cupy_turns = itertools.cycle([raw_args(outputs) for outputs in cupy_sets])
        rows[f"CuPy RawKernel, {SETS} argument sets in turn"] = cupy_row(
            lambda: raw_kernel((GRID,), (BLOCK,), next(cupy_turns)), cupy_sets)
    rows["buildtile prepared, stream=int"] = torch_row(lambda: prepared(*args, stream=stream), [one])
    torch_turns = itertools.cycle([args for args, _ in turns])
    rows[f"buildtile prepared, {SETS} argument sets in turn"] = torch_row(
        lambda: prepared(*next(torch_turns), stream=stream), turns)
    rows["buildtile prepared, stream=None"] = torch_row(lambda: prepared(*args), [one])
    rows["buildtile kernel[grid]"] = torch_row(lambda: kernel[GRID](*args), [one])
    if cupy is not None:
        cupy_arrays = cupy_set()
        rows["buildtile prepared (cupy arrays)"] = cupy_row(lambda: prepared(*cupy_arrays), [cupy_arrays])
    if arrays == 3 and libraries["example"] is not None:
        vecadd = libraries["example"].vecadd
        rows["example_kernels vecadd[grid]"] = torch_row(lambda: vecadd[GRID](*args), [one])
    try:
        core_run = _cuda_core_launcher(symbol, cubin, list(args))
    except Exception as exc:  # an incompatible cuda.core: say so and go on
        print(f"  (cuda.core left out: {type(exc).__name__}: {exc})")
        core_run = None
    if core_run is not None:
        rows["cuda.core launch (data_ptr ints)"] = torch_row(core_run, [one])
    if triton_kernels is not None:
        jitted = triton_kernels[arrays][(GRID,)]
        jitted(*args, N, BLOCK_SIZE=BLOCK)
        rows["Triton @jit launch"] = torch_row(lambda: jitted(*args, N, BLOCK_SIZE=BLOCK), [one])
    return rows


CUPY_ROW = "CuPy RawKernel (cupy arrays)"
#: how many argument sets the rows with changing arguments take in turn
SETS = 4


def host_only(options) -> None:
    """buildtile's Python work per launch, with a driver that launches nothing."""
    from buildtile.runtime import DeviceArray
    from buildtile.runtime.driver import DEVICE_MEMORY, set_driver
    from buildtile.runtime.testing import FakeDriver

    class NoLaunchDriver(FakeDriver):
        launched = 0     # the launches it received: what each row checks

        def launch(self, ctx, function, config, stream, packed, offsets) -> None:
            self.launched += 1

        def pointer_memory(self, ptr: int):  # what a real driver says, without the fake's search
            return DEVICE_MEMORY, 0

    driver = NoLaunchDriver()
    set_driver(driver)
    tmp = tempfile.TemporaryDirectory(prefix="bt_bench_launch_")
    write_package(Path(tmp.name), "sm_90")
    sys.path.insert(0, tmp.name)
    ops = importlib.import_module(f"{PACKAGE}.ops")
    print(f"buildtile host work per launch (us), no GPU (a driver that launches nothing): mean of "
          f"{options.launches} launches, best of {options.rounds}")
    for arrays, name in KERNELS.items():
        kernel = getattr(ops, name)
        device_arrays = [DeviceArray.zeros(N) for _ in range(arrays)]
        interface_arrays = [driver.array(N) for _ in range(arrays)]
        print(f"\n{arrays} array argument{'s' if arrays > 1 else ''} (kernel `{name}`)")
        rows = _host_rows(kernel, device_arrays, interface_arrays, driver, options.launches)
        for label, us in per_launch_us(rows, options.launches, options.rounds, options.launches, lambda: None).items():
            print(f"  {label:<48}{us:8.2f} us")
    tmp.cleanup()


def _host_rows(kernel, device_arrays: list, interface_arrays: list, driver, launches: int) -> dict[str, Row]:
    prepared = kernel.prepare(grid=GRID)

    def reset():
        driver.launched = 0

    def check(label):
        if driver.launched != launches:
            raise AssertionError(f"{label}: {driver.launched} launches reached the driver, not {launches}")

    return {
        "prepared, DeviceArray, stream=int": Row(lambda: prepared(*device_arrays, stream=0), reset, check),
        "kernel[grid], DeviceArray": Row(lambda: kernel[GRID](*device_arrays), reset, check),
        "prepared, __cuda_array_interface__, stream=int": Row(lambda: prepared(*interface_arrays, stream=0), reset,
                                                             check),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=20000, help="launches per timed round")
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds; the best is reported")
    parser.add_argument("--burst", type=int, default=500, help="launches between two (untimed) drains of the GPU")
    parser.add_argument("--host-only", action="store_true", help="no GPU: time buildtile's own work per launch")
    options = parser.parse_args()
    if options.host_only:
        host_only(options)
        return

    import torch

    if not torch.cuda.is_available():
        sys.exit("bench_launch.py needs PyTorch with a CUDA GPU")
    major, minor = torch.cuda.get_device_capability(0)
    arch = f"sm_{major}{minor}"
    tmp = tempfile.TemporaryDirectory(prefix="bt_bench_launch_")
    images = write_package(Path(tmp.name), arch)
    sys.path.insert(0, tmp.name)
    ops = importlib.import_module(f"{PACKAGE}.ops")
    libraries = {"cupy": _optional("cupy"), "triton": _triton_kernels(),
                 "example": _optional("example_kernels.ops")}
    cupy = libraries["cupy"]

    def synchronize():
        torch.cuda.synchronize()
        if cupy is not None:
            cupy.cuda.Device().synchronize()

    versions = [f"torch {torch.__version__}"] + [
        f"{name} {importlib.import_module(name).__version__}" for name in ("cupy", "triton")
        if _optional(name) is not None]
    print(f"host time per launch (us): mean of {options.launches} launches in bursts of {options.burst}, "
          f"best of {options.rounds}; {torch.cuda.get_device_name()}, {', '.join(versions)}")
    for arrays, name in KERNELS.items():
        calls = measure(arrays, ops, images, Path(tmp.name) / PACKAGE, arch, libraries)
        rows = per_launch_us(calls, options.launches, options.rounds, options.burst, synchronize)
        reference = rows.get(CUPY_ROW)
        print(f"\n{arrays} array argument{'s' if arrays > 1 else ''} (kernel `{name}`)")
        for label, us in rows.items():
            ratio = f"{us / reference:6.2f}x CuPy" if reference else ""
            print(f"  {label:<44}{us:8.2f} us  {ratio}")
    tmp.cleanup()


def _optional(module: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


if __name__ == "__main__":
    main()
