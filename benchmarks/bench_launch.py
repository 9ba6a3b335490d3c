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

def per_launch_us(rows: dict, launches: int, rounds: int, burst: int, synchronize) -> dict[str, float]:
    """``{label: host time of one call in microseconds}`` for the callables ``rows``: the mean
    over ``launches`` calls, the best of ``rounds``. The rows take turns within each round (the
    order rotates), so a slow spell of the machine hits them alike. Calls are timed in bursts
    of ``burst`` with the GPU drained between bursts (untimed), so a queue full of tiny kernels
    never makes the host wait."""
    for fn in rows.values():
        for _ in range(min(launches, 2000)):
            fn()
    synchronize()
    best = dict.fromkeys(rows, float("inf"))
    labels = list(rows)
    for round_ in range(rounds):
        for label in labels[round_ % len(labels):] + labels[:round_ % len(labels)]:
            fn, elapsed, done = rows[label], 0.0, 0
            while done < launches:
                count = min(burst, launches - done)
                start = time.perf_counter()
                for _ in range(count):
                    fn()
                elapsed += time.perf_counter() - start
                done += count
                synchronize()
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

def measure(arrays: int, ops, images: dict, package_dir: Path, arch: str, libraries: dict) -> dict:
    """``{label: a call that launches}`` for the kernel with ``arrays`` array arguments."""
    import torch

    cupy, triton_kernels = libraries["cupy"], libraries["triton"]
    name = KERNELS[arrays]
    kernel = getattr(ops, name)
    symbol, cubin = images[arrays]
    inputs = [torch.randn(N, device="cuda") for _ in range(arrays - 1)]
    out = torch.empty(N, device="cuda")
    args = (*inputs, out)
    prepared = kernel.prepare(grid=GRID)
    prepared(*args)
    torch.cuda.synchronize()
    expected = sum(inputs) if inputs else torch.ones(N, device="cuda")
    assert torch.allclose(out, expected), f"{name}: wrong result from buildtile"
    stream = torch.cuda.current_stream().cuda_stream

    rows: dict = {}
    # arguments that change on every call: SETS sets of arrays, taken in turn
    turns = [(*(torch.randn(N, device="cuda") for _ in range(arrays - 1)), torch.empty(N, device="cuda"))
             for _ in range(SETS)]
    if cupy is not None:
        raw = cupy.RawModule(path=str(package_dir / "_buildtile" / kernel.record["artifacts"][arch]["path"]))
        raw_kernel = raw.get_function(symbol)
        cupy_args = tuple(x for _ in range(arrays) for x in (cupy.ones(N, cupy.float32), cupy.int64(N)))
        rows[CUPY_ROW] = lambda: raw_kernel((GRID,), (BLOCK,), cupy_args)
        cupy_turns = itertools.cycle([tuple(x for _ in range(arrays) for x in (cupy.ones(N, cupy.float32), cupy.int64(N)))
                                      for _ in range(SETS)])
        rows[f"CuPy RawKernel, {SETS} argument sets in turn"] = lambda: raw_kernel((GRID,), (BLOCK,), next(cupy_turns))
    rows["buildtile prepared, stream=int"] = lambda: prepared(*args, stream=stream)
    torch_turns = itertools.cycle(turns)
    rows[f"buildtile prepared, {SETS} argument sets in turn"] = lambda: prepared(*next(torch_turns), stream=stream)
    rows["buildtile prepared, stream=None"] = lambda: prepared(*args)
    rows["buildtile kernel[grid]"] = lambda: kernel[GRID](*args)
    if cupy is not None:
        cupy_arrays = [cupy.ones(N, cupy.float32) for _ in range(arrays)]
        rows["buildtile prepared (cupy arrays)"] = lambda: prepared(*cupy_arrays)
    if arrays == 3 and libraries["example"] is not None:
        vecadd = libraries["example"].vecadd
        rows["example_kernels vecadd[grid]"] = lambda: vecadd[GRID](*args)
    try:
        core_run = _cuda_core_launcher(symbol, cubin, list(args))
    except Exception as exc:  # an incompatible cuda.core: say so and go on
        print(f"  (cuda.core left out: {type(exc).__name__}: {exc})")
        core_run = None
    if core_run is not None:
        rows["cuda.core launch (data_ptr ints)"] = core_run
    if triton_kernels is not None:
        jitted = triton_kernels[arrays][(GRID,)]
        jitted(*args, N, BLOCK_SIZE=BLOCK)
        rows["Triton @jit launch"] = lambda: jitted(*args, N, BLOCK_SIZE=BLOCK)
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
        def launch(self, ctx, function, config, stream, packed, offsets) -> None:
            pass

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
        rows = _host_rows(kernel, device_arrays, interface_arrays)
        for label, us in per_launch_us(rows, options.launches, options.rounds, options.launches, lambda: None).items():
            print(f"  {label:<48}{us:8.2f} us")
    tmp.cleanup()


def _host_rows(kernel, device_arrays: list, interface_arrays: list) -> dict:
    prepared = kernel.prepare(grid=GRID)
    return {
        "prepared, DeviceArray, stream=int": lambda: prepared(*device_arrays, stream=0),
        "kernel[grid], DeviceArray": lambda: kernel[GRID](*device_arrays),
        "prepared, __cuda_array_interface__, stream=int": lambda: prepared(*interface_arrays, stream=0),
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
