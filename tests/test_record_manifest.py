"""Record layouts in the manifest: written once per package by the build (from the kernels
that take record arrays), checked by the manifest model, and given to each parameter of
records, as both hosts read them."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

from buildtile.backend import CompileOptions
from buildtile.compiler import analyze, compile_entries, package_records
from buildtile.discovery import KernelModule, find_kernels
from buildtile.errors import BuildtileError, CompileError
from buildtile.interop import manifest as manifest_format
from buildtile.interop.c_model import read_package
from buildtile.plugins import backends

UI_PASS = Path(__file__).parent / "ui" / "pass"


def _builds(path: Path, module: str):
    sources = find_kernels(KernelModule(module, path.resolve()), backends(), path.parent)
    return compile_entries(analyze(sources, CompileOptions()), CompileOptions())


@pytest.fixture(scope="module")
def records_builds():
    return _builds(UI_PASS / "records.py", "records")


def test_the_package_records_each_layout_once_as_numpy_aligns_it(records_builds):
    records = package_records(records_builds)
    assert sorted(records) == ["Particle", "Sample"]
    want = {"Particle": np.dtype([("x", "<f4"), ("y", "<f4"), ("vx", "<f4"), ("mass", "<f8"), ("alive", "?")],
                                 align=True),
            "Sample": np.dtype([("tag", "i1"), ("value", "<f8"), ("count", "<i8")], align=True)}
    for name, dtype in want.items():
        layout = records[name]
        assert layout["size"] == dtype.itemsize and layout["align"] == dtype.alignment
        assert [(f["name"], f["offset"]) for f in layout["fields"]] == [(n, dtype.fields[n][1]) for n in dtype.names]
    step = next(b for b in records_builds if b.kernel.source.name == "step")
    assert [p["dtype"] for p in step.kernel.params] == ["Particle", "Particle", "f32"]


def test_two_modules_with_different_records_of_one_name_are_refused(tmp_path, records_builds):
    other = tmp_path / "other.py"
    other.write_text((UI_PASS / "records.py").read_text().replace("    mass: f64\n", "    mass: f32\n"))
    with pytest.raises(CompileError) as info:
        package_records(records_builds + _builds(other, "other"))
    assert "two different records are named `Particle`" in str(info.value)


def _manifest(tmp_path: Path, records_builds) -> tuple[dict, Path]:
    step = next(b for b in records_builds if b.kernel.source.name == "step")
    out = tmp_path / "btrec" / manifest_format.MANIFEST_DIR
    (out / "kernels").mkdir(parents=True)
    (out / "kernels" / "step.ptx").write_text("// image\n")
    data = {
        "manifest_version": manifest_format.MANIFEST_VERSION, "abi_version": 1, "package": "btrec",
        "buildtile_version": "0", "targets": ["sm_80"], "ptx_target": "sm_80", "checks": "release",
        "records": package_records(records_builds),
        "kernels": [{"name": "step", "module": "btrec.records", "symbol": "btrec_records__step", "kind": "simt",
                     "params": step.kernel.params, "contract": {**step.kernel.contract},
                     "artifacts": {"ptx": {"kind": "ptx", "path": "kernels/step.ptx", "target": "sm_80",
                                           "sha256": None}}}],
    }
    path = out / manifest_format.MANIFEST_NAME
    path.write_text(manifest_format.dumps(data))
    return data, path


def test_the_model_reads_the_layouts_and_the_parameters_that_name_them(tmp_path, records_builds):
    data, path = _manifest(tmp_path, records_builds)
    model = manifest_format.read(path)
    particle = model.record("Particle")
    assert particle.size == 32 and [f.offset for f in particle.fields] == [0, 4, 8, 16, 24]
    assert model.kernels[0].params[0].type_text == "Slice[Particle]"


@pytest.mark.parametrize("edit, words", [
    (lambda m: m["records"]["Particle"]["fields"][3].update(offset=12), "`Particle.mass` has offset 12"),
    (lambda m: m["records"]["Particle"]["fields"][0].update(dtype="f8"), "`Particle.x` has unknown dtype 'f8'"),
    (lambda m: m["records"]["Particle"].update(size=30), "`Particle` has size 30"),
    (lambda m: m["kernels"][0]["params"][0].update(dtype="Point"), "unknown dtype 'Point'"),
    (lambda m: m["kernels"][0]["params"][2].update(dtype="Sample"), "record dtype 'Sample'"),
    (lambda m: m["kernels"][0]["params"][0].update(kind="atomic_slice"), "records are elements of"),
])
def test_a_malformed_record_layout_is_a_manifest_error(tmp_path, records_builds, edit, words):
    data, path = _manifest(tmp_path, records_builds)
    broken = copy.deepcopy(data)
    edit(broken)
    with pytest.raises(BuildtileError) as info:
        manifest_format.parse(broken, str(path))
    assert info.value.code == "BT0621" and words in str(info.value)


def test_the_c_generator_reads_the_layouts_it_declares_as_structs(tmp_path, records_builds):
    data, path = _manifest(tmp_path, records_builds)
    package = read_package(data, path.parent)
    assert [r.name for r in package.records] == ["Particle", "Sample"]
    p = package.kernels[0].params[0]
    assert p.record is package.records[0] and p.itemsize == 32


def test_the_python_host_binds_record_parameters_to_their_layouts(tmp_path, records_builds):
    from buildtile.runtime.package import PackageRuntime

    _, path = _manifest(tmp_path, records_builds)
    record = PackageRuntime("btrec", path).kernel_record("btrec.records", "step")
    assert [(p.record.name if p.record else None, p.itemsize) for p in record.params] == [
        ("Particle", 32), ("Particle", 32), (None, 4)]
