"""Shared test configuration.

- ``@pytest.mark.gpu`` tests are skipped, with the reason, when no CUDA GPU
  and driver can be used. Set ``BUILDTILE_REQUIRE_GPU=1`` (on a GPU runner)
  to make a missing GPU an error and any GPU test that does not run a
  failure, so a broken driver or a missing dependency cannot pass as
  "all skipped" (tests/gpu_gate.py).
- ``fake_gpu`` installs :class:`buildtile.runtime.testing.FakeDriver`, and
  ``make_kernel_package`` writes an importable package with a hand-written
  manifest, so the runtime can be tested on machines without a GPU.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import itertools
import json
import os
import sys
import textwrap

import pytest

# the GPU gate's hooks (skips without a GPU; BUILDTILE_REQUIRE_GPU turns every GPU skip into a failure)
from gpu_gate import (  # noqa: F401 (hooks and the GPU check, found here by pytest and by tests)
    gpu_status,
    pytest_collection_modifyitems,
    pytest_make_collect_report,
    pytest_runtest_makereport,
    pytest_terminal_summary,
)

# --------------------------------------------------------------------------- runtime fixtures

@pytest.fixture(params=["python", "compiled"])
def fake_gpu(request):
    """A FakeDriver installed as the runtime's driver for one test; each test runs twice: with
    launches made by the driver facade in Python, and with launches made by buildtile's compiled
    launch call, which prepared launches then also call themselves (skipped without it)."""
    from buildtile.runtime.driver import set_driver
    from buildtile.runtime.native import compiled
    from buildtile.runtime.testing import FakeDriver

    if request.param == "python":
        driver = FakeDriver()
    elif compiled is None:
        pytest.skip("buildtile's compiled launch call is not built")
    else:
        from native_support import CompiledLaunchFakeDriver

        driver = CompiledLaunchFakeDriver()
        driver.install()
    previous = set_driver(driver)
    yield driver
    set_driver(previous)


def requires_tree(text: str) -> dict:
    """The manifest expression tree of a ``requires`` relation (what the compiler emits)."""
    bins = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
    cmps = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}

    def build(node):
        if isinstance(node, ast.Constant):
            return {"op": "const", "value": node.value}
        if isinstance(node, ast.Name):
            return {"op": "param", "name": node.id}
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "len":
            return {"op": "len", "param": node.args[0].id}
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute):
            return {"op": "shape", "param": node.value.value.id, "axis": node.slice.value}
        if isinstance(node, ast.BinOp):
            return {"op": "bin", "fn": bins[type(node.op)], "lhs": build(node.left), "rhs": build(node.right)}
        if isinstance(node, ast.Compare):
            return {"op": "cmp", "fn": cmps[type(node.ops[0])], "lhs": build(node.left),
                    "rhs": build(node.comparators[0])}
        if isinstance(node, ast.BoolOp):
            return {"op": "and" if isinstance(node.op, ast.And) else "or",
                    "args": [build(v) for v in node.values]}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            return {"op": "const", "value": -node.operand.value}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return {"op": "not", "arg": build(node.operand)}
        raise ValueError(f"cannot express {ast.dump(node)}")

    return {"text": text, "expr": build(ast.parse(text, mode="eval").body)}


_package_ids = itertools.count()


@pytest.fixture
def make_kernel_package(tmp_path, monkeypatch):
    """Write and import a package ``<name>.ops`` whose manifest lists the given kernels.

    ``make(source, kernels, targets=("sm_90",), ptx_target="sm_80")`` where
    ``source`` is the text of ``ops.py`` and ``kernels`` maps kernel name to
    ``dict(params=[(name, kind, dtype[, rank]) ...], block=..., index_dims=...,
    requires=[text ...], min_compute_capability=..., dynamic_shared=...)``.
    Returns the imported ``ops`` module. Artifacts are small fake images with
    correct sha256 sums, unless a kernel's spec gives real ones as
    ``images={"sm_90": cubin_bytes, ...}`` and/or ``ptx=(target, ptx_bytes)``. ``records`` maps
    the name of a record of ``ops.py`` to its layout (``size``, ``align``, ``fields``), which array
    parameters name as their dtype.
    """
    from buildtile.interop.abi import ABI_VERSION, PARAM_KINDS, mangle
    from buildtile.runtime.package import forget_package

    made: list[str] = []

    def make(source: str, kernels: dict, targets=("sm_90",), ptx_target="sm_80", name=None, records=None):
        package = name or f"btfake{next(_package_ids)}"
        site = tmp_path / f"site_{package}"
        root = site / package
        (root / "_buildtile" / "kernels").mkdir(parents=True)
        (root / "__init__.py").write_text("")
        (root / "ops.py").write_text(textwrap.dedent(source))
        module = f"{package}.ops"
        layouts = {name: {"module": module, **layout} for name, layout in (records or {}).items()}
        records = []
        for kernel_name, spec in kernels.items():
            symbol = mangle(module, kernel_name)
            params = []
            for p in spec.get("params", []):
                pname, kind, dtype = p[:3]
                rank = p[3] if len(p) > 3 else (0 if kind == "scalar" else 1)
                params.append({"name": pname, "kind": kind, "dtype": dtype, "rank": rank,
                               "role": PARAM_KINDS[kind]})
            artifacts = {}
            if "images" in spec:
                images = spec["images"]
            else:
                images = {target: f"fake cubin of {symbol} for {target}".encode()
                          for target in spec.get("targets", targets)}
            for target, data in images.items():
                path = f"kernels/{symbol}.{target}.cubin"
                (root / "_buildtile" / path).write_bytes(data)
                artifacts[target] = {"kind": "cubin", "path": path, "sha256": hashlib.sha256(data).hexdigest()}
            if "ptx" in spec:
                ptx, ptx_data = spec["ptx"] if spec["ptx"] else (None, None)
            else:
                ptx = spec.get("ptx_target", ptx_target)
                ptx_data = f"// fake PTX of {symbol} for {ptx}\n".encode()
            if ptx:
                data = ptx_data
                path = f"kernels/{symbol}.{ptx}.ptx"
                (root / "_buildtile" / path).write_bytes(data)
                artifacts["ptx"] = {"kind": "ptx", "target": ptx, "path": path,
                                    "sha256": hashlib.sha256(data).hexdigest()}
            aligned = None
            if spec.get("aligned"):   # an aligned entry, as the build records one (manifest ``aligned``)
                aligned_symbol = symbol + "__a16"
                data = f"fake cubin of {aligned_symbol}".encode()
                path = f"kernels/{aligned_symbol}.{targets[0]}.cubin"
                (root / "_buildtile" / path).write_bytes(data)
                aligned = {"align": 16, "symbol": aligned_symbol, "artifacts": {targets[0]: {
                    "kind": "cubin", "path": path, "sha256": hashlib.sha256(data).hexdigest()}}}
            block = spec.get("block", (256, 1, 1))
            if isinstance(block, int):
                block = (block, 1, 1)
            records.append({
                "name": kernel_name,
                "module": module,
                "symbol": symbol,
                "kind": spec.get("kind", "simt"),
                "source": {"file": f"{package}/ops.py", "line": 1},
                "params": params,
                "contract": {
                    "block": list(block) + [1] * (3 - len(block)) if block is not None else None,
                    "index_dims": spec.get("index_dims", 1),
                    "min_blocks": None,
                    "dynamic_shared": spec.get("dynamic_shared", 0),
                    "coarsen": spec.get("coarsen", 1),
                    "min_compute_capability": spec.get("min_compute_capability"),
                    "requires": [requires_tree(text) for text in spec.get("requires", [])],
                    **({"cooperative": True} if spec.get("cooperative") else {}),
                },
                "artifacts": artifacts,
                **({"aligned": aligned} if aligned else {}),
            })
        manifest = {
            "manifest_version": 1,
            "abi_version": ABI_VERSION,
            "package": package,
            "buildtile_version": "0.1.0",
            "targets": list(targets),
            "ptx_target": ptx_target,
            "checks": "release",
            "kernels": records,
            **({"records": layouts} if layouts else {}),
        }
        (root / "_buildtile" / "manifest.json").write_text(json.dumps(manifest, indent=2))
        monkeypatch.syspath_prepend(str(site))
        made.append(package)
        mod = importlib.import_module(module)
        mod.MANIFEST = manifest
        return mod

    yield make
    for package in made:
        forget_package(package)
        for key in [k for k in sys.modules if k == package or k.startswith(package + ".")]:
            del sys.modules[key]


#: kernels with the signatures of the example project, plus the shapes the runtime must handle
RUNTIME_KERNELS = {
    "vecadd": dict(params=[("a", "slice", "f32"), ("b", "slice", "f32"), ("c", "disjoint_slice", "f32")],
                   requires=["len(a) == len(c)", "len(b) == len(c)"]),
    "saxpy": dict(params=[("alpha", "scalar", "f32"), ("x", "slice", "f32"), ("y", "slice", "f32"),
                          ("out", "disjoint_slice", "f32")],
                  requires=["len(x) == len(out)", "len(y) == len(out)"]),
    "matadd": dict(params=[("a", "tensor", "f32", 2), ("b", "tensor", "f32", 2), ("c", "disjoint_tensor", "f32", 2)],
                   block=(16, 16, 1), index_dims=2,
                   requires=["a.shape[0] == c.shape[0]", "a.shape[1] == c.shape[1]",
                             "b.shape[0] == c.shape[0]", "b.shape[1] == c.shape[1]"]),
    "polyval_abs": dict(params=[("coeffs", "slice", "f64"), ("x", "slice", "f64"), ("y", "disjoint_slice", "f64")],
                        block=(128, 1, 1), requires=["len(x) == len(y)", "len(coeffs) >= 1"]),
    "collatz_steps": dict(params=[("x", "slice", "i64"), ("limit", "scalar", "i32"), ("out", "disjoint_slice", "i32")],
                          requires=["len(x) == len(out)"]),
    "histogram": dict(params=[("data", "slice", "u32"), ("bins", "atomic_slice", "u32")], index_dims=0),
    "raw_copy": dict(params=[("src", "slice", "f32"), ("dst", "disjoint_slice", "f32")], block=None, index_dims=1),
    "volume": dict(params=[("v", "disjoint_tensor", "f64", 3)], block=(8, 8, 4), index_dims=3),
    "fill_prefix": dict(params=[("n", "scalar", "u64"), ("out", "disjoint_slice", "i64")],
                        requires=["n <= len(out)", "n == 0 or len(out) // n >= 1"]),
    "scalars": dict(params=[("flag", "scalar", "bool"), ("h", "scalar", "f16"), ("b", "scalar", "bf16"),
                            ("d", "scalar", "f64"), ("u", "scalar", "u32"), ("out", "disjoint_slice", "f32")],
                    index_dims=1),
    "sm100_only": dict(params=[("out", "disjoint_slice", "f32")], min_compute_capability=100),
    "big_shared": dict(params=[("out", "disjoint_slice", "f32")], dynamic_shared=64 * 1024),
    "nothing": dict(params=[], index_dims=0),
}

RUNTIME_SOURCE = "from buildtile import simt\n\n" + "".join(
    f"@simt.kernel\ndef {name}({', '.join(p[0] for p in spec['params'])}):\n    pass\n\n\n"
    for name, spec in RUNTIME_KERNELS.items()
)


@pytest.fixture
def ops(make_kernel_package, fake_gpu):
    """A package with :data:`RUNTIME_KERNELS` (fake sm_90 cubins, PTX for sm_80) on a fake GPU."""
    return make_kernel_package(RUNTIME_SOURCE, RUNTIME_KERNELS)


# --------------------------------------------------------------------------- packaging fixtures

@pytest.fixture(scope="session")
def example_wheel(tmp_path_factory):
    """The example project's wheel, built by this tree's backend without build isolation, once per
    run (whichever worker asks first builds it): the packaging tests only read it
    (tests/wheel_support.py)."""
    from run_dirs import made_once, run_root
    from wheel_support import build_example_wheel

    return made_once(run_root(tmp_path_factory) / "example-wheel", build_example_wheel)


@pytest.fixture(scope="session")
def example_site(example_wheel, tmp_path_factory):
    """:func:`example_wheel` installed as pip installs it (with its .dist-info, so its entry points
    show), without its dependencies (this tree provides them); the tests only read it."""
    from wheel_support import install

    return install(example_wheel, tmp_path_factory.mktemp("example-site") / "site")


@pytest.fixture(autouse=True, scope="session")
def _shared_run_folder(tmp_path_factory):
    """The run's folder (tests/run_dirs.py), for the helpers that build what the workers share."""
    from run_dirs import share_the_run_folder

    share_the_run_folder(tmp_path_factory)


@pytest.fixture(autouse=True, scope="session")
def _private_home_and_kernel_cache(tmp_path_factory):
    """Tests never touch the user's home folder or kernel cache: HOME, XDG_CACHE_HOME and the
    kernel cache point into the run's temporary folder (and start empty). The kernel cache is the
    whole run's, shared by its xdist workers (its entries are renamed into place whole), so a
    kernel one worker compiled is not compiled again by another. uv keeps its own package cache,
    which the isolated builds of the frontend tests install from."""
    from run_dirs import run_root

    uv_cache = os.environ.get("UV_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "uv")
    home = tmp_path_factory.mktemp("home")
    kernel_cache = run_root(tmp_path_factory) / "kernel-cache"
    kernel_cache.mkdir(exist_ok=True)
    private = {
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "BUILDTILE_CACHE_DIR": str(kernel_cache),
        "UV_CACHE_DIR": uv_cache,
    }
    previous = {name: os.environ.get(name) for name in private}
    os.environ.update(private)
    yield
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
