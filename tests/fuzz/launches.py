"""A seeded launch mutator, against the fake driver (buildtile.runtime.testing).

Each case takes a kernel of ``conftest.RUNTIME_KERNELS``, builds a valid launch for it (arrays
of the right dtype and rank, in-range scalars, ``grid_for``), then changes up to two things:
the grid (negative, zero, huge, float, bool, ``np.int64``, bytes, ``range``, too many axes),
the stream (negative, past 64 bits, float, text), or an argument (another dtype or rank, a
negative or huge extent or a misaligned pointer through a stand-in ``__cuda_array_interface__``,
a non-array, a scalar out of its type's range, one argument too few or too many, a keyword).

The outcome of every call must be one of:

- a launch whose parameters are valid: a grid of ints within CUDA's limits, a stream handle
  of 64 bits, every pointer aligned to its element, every extent non-negative -- and only for
  a change the contract allows (an integer grid, an in-range stream);
- a ``BuildtileError`` with a BT code, with nothing queued on the fake GPU.

Anything else is an issue, keyed by the change and what went wrong. Long runs:
``python scripts/fuzz.py launches --cases 10000 --seed 1``.
"""

from __future__ import annotations

import random
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from buildtile.errors import BuildtileError
from buildtile.interop.abi import DTYPES, kernel_params
from buildtile.runtime.testing import FakeCudaArray

#: kernels a launch is built for (name -> RUNTIME_KERNELS entry), the ones with a contract
LAUNCHABLE = ("vecadd", "saxpy", "matadd", "polyval_abs", "collatz_steps", "histogram", "volume",
              "fill_prefix", "scalars", "nothing")

GRIDS = [0, -1, -(2**31), 2**31, 2**32, 2**64, 1.0, 2.5, True, False, np.int64(4), np.int32(2), b"\x01", "4",
         range(3), (1, 2, 3, 4), (1, 0), (1, -1), (2**31, 1), (1, 2**16), None, [], (), (1.0,), (True,)]
STREAMS = [-1, 2**64, 2**70, 1.5, "stream", True, b"\x00"]
SCALARS = [2**40, -1, -(2**70), 1.5, float("nan"), float("inf"), None, "1", b"1", np.int64(2**40), [1], 1j]


@dataclass(frozen=True)
class Case:
    kernel: str
    grid: object
    args: list
    stream: object = None
    kwargs: dict = field(default_factory=dict)
    must_refuse: str = ""     # why the contract forbids this launch ("" : it may launch)
    change: str = "none"      # what was changed, for the report


@dataclass
class Report:
    cases: int = 0
    outcomes: Counter = field(default_factory=Counter)
    issues: dict = field(default_factory=dict)   # issue -> a reproducer (text)

    def add(self, kind: str, issue: str | None, case: Case) -> None:
        self.cases += 1
        self.outcomes[kind] += 1
        if issue is not None:
            self.issues.setdefault(issue, describe(case))


def describe(case: Case) -> str:
    args = ", ".join(_describe_arg(a) for a in case.args)
    kw = "".join(f", {k}={v!r}" for k, v in case.kwargs.items())
    return f"ops.{case.kernel}[{case.grid!r}]({args}{kw}, stream={case.stream!r})"


def _describe_arg(a) -> str:
    if isinstance(a, FakeCudaArray):
        return f"FakeCudaArray(ptr={a.ptr:#x}, shape={a.shape}, typestr={a.typestr!r})"
    return repr(a)


def _valid_scalar(dtype: str, rng: random.Random):
    if dtype == "bool":
        return rng.choice([True, False])
    if dtype in ("f16", "bf16", "f32", "f64"):
        return rng.uniform(-4, 4)
    return rng.randint(0, 100)


def valid_case(kernel: str, spec: dict, ops, driver, rng: random.Random) -> Case:
    n = rng.randint(1, 3000)
    rows, cols = rng.randint(1, 50), rng.randint(1, 50)
    args = []
    for p in spec["params"]:
        name, kind, dtype = p[:3]
        rank = p[3] if len(p) > 3 else (0 if kind == "scalar" else 1)
        if kind == "scalar":
            value = _valid_scalar(dtype, rng)
            if kernel == "fill_prefix":
                value = rng.randint(1, n)
            args.append(value)
        elif rank == 1:
            args.append(driver.array(n, dtype))
        else:
            args.append(driver.array((rows, cols, 3)[:rank] if rank == 3 else (rows, cols), dtype))
    if kernel == "polyval_abs":
        args[0] = driver.array(rng.randint(1, 8), "f64")
    fn = getattr(ops, kernel)
    if kernel == "matadd":
        grid = fn.grid_for(rows, cols)
    elif kernel == "volume":
        grid = fn.grid_for(rows, cols, 3)
    elif spec.get("index_dims", 1) == 0:
        grid = (rng.randint(1, 64),)
    else:
        grid = fn.grid_for(n)
    return Case(kernel, grid, args)


def mutate(case: Case, spec: dict, driver, rng: random.Random) -> Case:
    """``case`` with one change (or none, one time in ten)."""
    choice = rng.randrange(10)
    args = list(case.args)
    if choice == 0:
        return case
    if choice in (1, 2):
        grid = rng.choice(GRIDS)
        ok = (_is_extent(grid) and 1 <= grid < 2**31) or (
            type(grid) is tuple and 1 <= len(grid) <= 3 and all(_is_extent(g) for g in grid)
            and 1 <= grid[0] < 2**31 and all(1 <= g < 2**16 for g in grid[1:]))
        return Case(case.kernel, grid, args, must_refuse="" if ok else f"grid {grid!r}", change="grid")
    if choice == 3:
        stream = rng.choice(STREAMS)
        return Case(case.kernel, case.grid, args, stream, must_refuse=f"stream {stream!r}", change="stream")
    if choice == 4:
        return Case(case.kernel, case.grid, args, kwargs={"stream2": 0}, must_refuse="a keyword argument",
                    change="keyword")
    if choice == 5 and args:
        k = rng.randrange(len(args))
        if rng.random() < 0.5:
            del args[k]
            return Case(case.kernel, case.grid, args, must_refuse="an argument too few", change="arity")
        args.append(args[k])
        return Case(case.kernel, case.grid, args, must_refuse="an argument too many", change="arity")
    arrays = [k for k, a in enumerate(args) if isinstance(a, FakeCudaArray)]
    scalars = [k for k, a in enumerate(args) if not isinstance(a, FakeCudaArray)]
    if choice == 6 and scalars:
        k = rng.choice(scalars)
        value = rng.choice(SCALARS)
        args[k] = value
        dtype = spec["params"][k][2]
        return Case(case.kernel, case.grid, args, must_refuse=_scalar_refusal(value, dtype),
                    change="scalar")
    if not arrays:
        return case
    k = rng.choice(arrays)
    a = args[k]
    kind = rng.choice(["negative extent", "huge extent", "misaligned", "dtype", "rank", "non-array"])
    if kind == "negative extent":
        args[k] = FakeCudaArray(a.ptr, (-rng.randint(1, 5),) + a.shape[1:], a.typestr)
    elif kind == "huge extent":
        args[k] = FakeCudaArray(a.ptr, (2**62,) + a.shape[1:], a.typestr)
    elif kind == "misaligned":
        if a.itemsize == 1:
            return case
        args[k] = FakeCudaArray(a.ptr + rng.randrange(1, a.itemsize), a.shape, a.typestr)
        args[k] = FakeCudaArray(args[k].ptr, tuple(max(0, s - 1) for s in a.shape), a.typestr)
    elif kind == "dtype":
        other = rng.choice([d for d in DTYPES if DTYPES[d][3] != a.typestr and d != "bf16"])
        args[k] = FakeCudaArray(a.ptr, a.shape, DTYPES[other][3])
    elif kind == "rank":
        args[k] = FakeCudaArray(a.ptr, a.shape + (1,), a.typestr)
    else:
        args[k] = rng.choice([[1.0, 2.0], None, 3, np.zeros(4, np.float32), b"abcd"])
    return Case(case.kernel, case.grid, args, must_refuse=kind, change=f"array: {kind}")


def _scalar_refusal(value, dtype: str) -> str:
    """Why ``value`` cannot be a ``dtype`` argument ('' : it may be converted or refused)."""
    if value is None or isinstance(value, (str, bytes, list, complex)):
        return f"scalar {value!r}"
    if dtype in ("i32", "i64", "u32", "u64"):
        if isinstance(value, float):
            return f"float {value!r} for {dtype}"
        bits = int(dtype[1:])
        low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1)) if dtype[0] == "i" else (0, 2**bits)
        if not low <= int(value) < high:
            return f"{value!r} out of the range of {dtype}"
    return ""


def _launch_is_valid(record, kernel_record: dict) -> str:
    """'' if the launch's parameters are ones the contract allows, else what is wrong."""
    gx, gy, gz = record.grid
    if not all(type(g) is int for g in record.grid) or not (1 <= gx < 2**31 and 1 <= gy < 2**16 and 1 <= gz < 2**16):
        return f"grid {record.grid}"
    if not (type(record.stream) is int and 0 <= record.stream < 2**64):
        return f"stream {record.stream!r}"
    flat = kernel_params(kernel_record["params"])
    dtype_of = {p["name"]: p["dtype"] for p in kernel_record["params"]}
    for k, p in enumerate(flat):
        if p.ctype == "ptr":
            ptr = record.param(k, "Q")
            size = DTYPES[dtype_of[p.name.split(".")[0]]][0]
            if ptr % size:
                return f"pointer {p.name} = {ptr:#x} is not aligned to {size} bytes"
        elif p.ctype == "i64" and (".len" in p.name or ".shape" in p.name) and record.param(k, "q") < 0:
            return f"{p.name} = {record.param(k, 'q')} is negative"
    return ""


def run_case(case: Case, ops, driver) -> tuple[str, str | None]:
    """(outcome kind, issue or None) of one launch."""
    fn = getattr(ops, case.kernel)
    launches, queued = len(driver.launches), len(driver.queued)
    try:
        fn[case.grid](*case.args, stream=case.stream, **case.kwargs)
    except BuildtileError as err:
        if len(driver.queued) != queued:
            return "refused", f"{case.change}: refused with {err.code} after something was queued"
        if not (err.code.startswith("BT") and len(err.code) == 6):
            return "refused", f"{case.change}: an error without a BT code"
        return "refused", None
    except Exception as exc:  # anything but a BuildtileError is an issue
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "buildtile" in f.filename]
        where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
        return "internal", f"{case.change}: {type(exc).__name__}{where} instead of a BT error"
    new = driver.launches[launches:]
    if len(new) != 1:
        return "launched", f"{case.change}: {len(new)} launches for one call"
    if case.must_refuse:
        return "launched", f"{case.change}: launched, although the contract forbids it"
    wrong = _launch_is_valid(new[0], next(k for k in ops.MANIFEST["kernels"] if k["name"] == case.kernel))
    return "launched", (f"{case.change}: launched with {wrong}" if wrong else None)


def run_cases(ops, driver, kernels: dict, cases: int, seed: int) -> Report:
    """``cases`` launches from ``seed`` of ``ops``'s kernels (``kernels``: RUNTIME_KERNELS) on ``driver``."""
    rng = random.Random(seed)
    report = Report()
    while report.cases < cases:
        name = rng.choice(LAUNCHABLE)
        case = mutate(valid_case(name, kernels[name], ops, driver, rng), kernels[name], driver, rng)
        kind, issue = run_case(case, ops, driver)
        report.add(kind, issue, case)
    return report


def _is_extent(value: object) -> bool:
    """A grid extent the launch takes: an integer as ``operator.index`` reads one (NumPy's too, as
    numba and CuPy take them), never a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
