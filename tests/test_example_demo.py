"""The example package's demo (``python -m example_kernels``) checks every kernel it carries: each
SIMT kernel and each Tile specialisation of its manifest, against NumPy at ragged sizes -- here on
the CPU emulator, a few blocks or tiles each -- and a kernel without a check fails the demo."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from emulated_packages import example_manifest_for_the_emulator, examples_for_the_emulator

from buildtile.emulate import emulated

CHECKS_FILE = Path(__file__).parents[1] / "example_project" / "example_kernels" / "checks.py"


def _load_checks():
    """The demo's checks, read from the example's sources (the package itself is not installed here)."""
    spec = importlib.util.spec_from_file_location("example_kernels_demo_checks", CHECKS_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


checks = _load_checks()


@pytest.fixture(scope="module")
def built() -> tuple[dict, str]:
    """(manifest, package) of the example project's build for the emulator."""
    examples_for_the_emulator()
    manifest, _ = example_manifest_for_the_emulator()
    return manifest, manifest["package"]


def test_the_demo_checks_exactly_the_kernels_of_the_manifest(built):
    manifest, _ = built
    in_manifest = {f"{k['module'].partition('.')[2]}.{k['name']}" for k in manifest["kernels"]}
    assert in_manifest == set(checks.CHECKS)
    assert {name for name, _ in checks.manifest_entries(manifest)} == in_manifest


def test_the_demo_runs_every_specialisation_of_each_tile_kernel(built):
    manifest, _ = built
    entries = checks.manifest_entries(manifest)
    for kernel in manifest["kernels"]:
        name = f"{kernel['module'].partition('.')[2]}.{kernel['name']}"
        specs = kernel.get("tile", {}).get("specializations", [None])
        assert [spec for entry, spec in entries if entry == name] == specs
    labels = [checks.entry_label(name, spec) for name, spec in entries]
    assert len(set(labels)) == len(labels)
    assert "tiles.add[z=1024,T=bf16]" in labels and "ops.vecadd" in labels


@pytest.mark.parametrize("kernel", sorted(checks.CHECKS))
def test_each_check_matches_numpy_on_the_emulator(built, kernel):
    manifest, package = built
    lines: list[str] = []
    with emulated():
        failures = checks.run_checks(manifest, package, small=True, only={kernel}, out=lines.append)
    specs = sum(1 for name, _ in checks.manifest_entries(manifest) if name == kernel)
    assert failures == 0 and len(lines) == specs, "\n".join(lines)
    assert all(line.startswith(kernel) and line.endswith(" OK") for line in lines), "\n".join(lines)


def test_a_kernel_without_a_check_fails_the_demo(built):
    manifest, package = built
    lines: list[str] = []
    without_saxpy = {name: fn for name, fn in checks.CHECKS.items() if name != "ops.saxpy"}
    with emulated():
        failures = checks.run_checks(manifest, package, small=True, only={"ops.vecadd", "ops.saxpy"},
                                     checks=without_saxpy, out=lines.append)
    assert failures == 1
    (saxpy,) = [line for line in lines if line.startswith("ops.saxpy")]
    assert "FAILED: the demo has no check for this kernel" in saxpy
    assert any(line.startswith("ops.vecadd") and line.endswith(" OK") for line in lines)


@pytest.mark.parametrize("got", [np.array([1.0, 2.0, 3.5]), np.array([1.0, np.nan, 3.0]), np.array([1.0, 2.0])])
def test_a_wrong_result_is_a_mismatch(got):
    manifest = {"kernels": [{"module": "pkg.ops", "name": "vecadd"}]}
    fake = {"ops.vecadd": lambda run: checks.Comparison("n=3", got, np.array([1.0, 2.0, 3.0]), 0.25)}
    lines: list[str] = []
    assert checks.run_checks(manifest, "pkg", checks=fake, out=lines.append) == 1
    (line,) = lines
    assert line.startswith("ops.vecadd") and "MISMATCH" in line
