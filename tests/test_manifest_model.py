"""The package manifest is checked once, into typed records, and every reader reads those.

The Python host (PackageRuntime, the SIMT and Tile signatures) and the C
generator (c_model) must agree on what a manifest means and word a malformed
one the same way: one BT0621 naming the file and the key.
"""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from buildtile.errors import BuildtileError
from buildtile.interop import manifest as manifest_format
from buildtile.interop.c_model import read_package
from buildtile.interop.manifest import ArtifactRecord, ParamRecord, parse
from buildtile.runtime.package import PackageRuntime
from buildtile.runtime.signature import KernelSignature
from buildtile.runtime.tile.signature import TileSignature

PKG = "btmodel"


def _artifact(out: Path, name: str, kind: str, target: str | None = None) -> dict:
    data = f"image {name}\n".encode()
    (out / "kernels").mkdir(parents=True, exist_ok=True)
    (out / "kernels" / name).write_bytes(data)
    entry = {"kind": kind, "path": f"kernels/{name}", "sha256": hashlib.sha256(data).hexdigest()}
    if target:
        entry["target"] = target
    return entry


def _manifest(out: Path) -> dict:
    saxpy = f"{PKG}_ops__saxpy"
    add = f"{PKG}_tiles__add__t128"
    add256 = f"{PKG}_tiles__add__t256"
    return {
        "manifest_version": manifest_format.MANIFEST_VERSION, "abi_version": 1, "package": PKG,
        "buildtile_version": "0", "targets": ["sm_80", "sm_90"], "ptx_target": "sm_80", "checks": "release",
        "kernels": [
            {
                "name": "saxpy", "module": f"{PKG}.ops", "symbol": saxpy, "kind": "simt",
                "params": [
                    {"name": "x", "kind": "slice", "dtype": "f32", "rank": 1, "role": "in"},
                    {"name": "y", "kind": "disjoint_slice", "dtype": "f32", "rank": 1, "role": "out"},
                    {"name": "m", "kind": "tensor", "dtype": "f16", "rank": 2},
                    {"name": "a", "kind": "scalar", "dtype": "f32", "rank": 0, "role": "in"},
                ],
                "contract": {"block": [128], "index_dims": 1, "min_blocks": None, "dynamic_shared": 16,
                             "min_compute_capability": "8.6",
                             "requires": [{"text": "len(x) == len(y)",
                                           "expr": {"op": "cmp", "fn": "==", "lhs": {"op": "len", "param": "x"},
                                                    "rhs": {"op": "len", "param": "y"}}}]},
                "artifacts": {"sm_80": _artifact(out, f"{saxpy}.sm_80.cubin", "cubin"),
                              "sm_90": _artifact(out, f"{saxpy}.sm_90.cubin", "cubin"),
                              "ptx": _artifact(out, f"{saxpy}.sm_80.ptx", "ptx", "sm_80")},
            },
            {
                "name": "add", "module": f"{PKG}.tiles", "symbol": add, "kind": "tile",
                "params": [
                    {"name": "x", "kind": "tensor", "dtype": "f32", "rank": 1, "role": "in"},
                    {"name": "z", "kind": "tile_out", "dtype": "f32", "rank": 1, "role": "out"},
                ],
                "contract": {"block": None, "index_dims": 0, "requires": []},
                "tile": {"grid_param": "z", "specializations": [
                    {"tile_shapes": {"z": [128]}, "symbol": add, "block": [128, 1, 1], "shared_bytes": 0,
                     "artifacts": {"sm_90": _artifact(out, f"{add}.sm_90.cubin", "cubin")}},
                    {"tile_shapes": {"z": [256]}, "symbol": add256, "block": [256, 1, 1], "shared_bytes": 64,
                     "artifacts": {"sm_90": _artifact(out, f"{add256}.sm_90.cubin", "cubin")}},
                ]},
            },
        ],
    }


@pytest.fixture
def package(tmp_path):
    out = tmp_path / PKG / manifest_format.MANIFEST_DIR
    data = _manifest(out)
    path = out / manifest_format.MANIFEST_NAME
    path.write_text(manifest_format.dumps(data))
    return path, data


def test_parse_gives_typed_records_of_the_json(package):
    path, data = package
    model = manifest_format.read(path)
    assert model.package == PKG and model.source == str(path) and not model.debug
    saxpy, add = model.kernels
    raw = data["kernels"][0]
    assert [p.as_dict() for p in saxpy.params[:2] + saxpy.params[3:]] == raw["params"][:2] + raw["params"][3:]
    assert saxpy.params[2] == ParamRecord(2, "m", "tensor", "f16", 2, "in")  # role from its kind
    assert saxpy.contract.block == (128, 1, 1) and saxpy.contract.min_compute_capability == (8, 6)
    assert saxpy.contract.dynamic_shared == 16 and saxpy.contract.requires[0].text == "len(x) == len(y)"
    assert {a.key: (a.kind, a.target, a.path) for a in saxpy.artifacts} == {
        key: (a["kind"], a.get("target", key), a["path"]) for key, a in raw["artifacts"].items()
    }
    assert add.tile is not None and add.tile.grid_param == "z"
    assert [s.tile_shapes for s in add.tile.specializations] == [(("z", (128,)),), (("z", (256,)),)]
    assert add.tile.specializations[1].shared_bytes == 64
    assert add.artifacts == add.tile.specializations[0].artifacts  # a tile record's own: its first
    assert model.kernel(f"{PKG}.tiles", "add") is add and model.kernel(f"{PKG}.tiles", "nope") is None


def test_every_reader_reads_the_same_records(package):
    path, data = package
    model = manifest_format.read(path)
    runtime = PackageRuntime(PKG, path)
    assert runtime.manifest == model
    assert runtime.manifest_entry(model.kernels[0]) == data["kernels"][0]
    c_package = read_package(data, path.parent)
    for c_kernel, record in zip(c_package.kernels, model.kernels):
        assert c_kernel.params == record.params
        assert c_kernel.requires == record.contract.requires
    assert c_package.kernels[0].min_cc == 86 and c_package.kernels[0].block == (128, 1, 1)
    assert c_package.kernels[1].tile == model.kernels[1].tile
    simt = KernelSignature(model.kernels[0])
    assert simt.params == model.kernels[0].params and simt.contract.min_compute_capability == (8, 6)
    tile = TileSignature(model.kernels[1])
    assert tile.specializations == model.kernels[1].tile.specializations
    assert tile.grid_param is model.kernels[1].params[1]


def test_artifacts_keep_their_target_and_compute_capability():
    art = ArtifactRecord("ptx", "ptx", "sm_90a", "k.ptx", None)
    assert art.compute_capability == 90 and art.arch_specific


def _simt(m):
    return m["kernels"][0]


def _tile(m):
    return m["kernels"][1]


@pytest.mark.parametrize("edit, key, words", [
    (lambda m: _simt(m)["params"][1].update(dtype="f8"), "kernels[0] (`btmodel.ops.saxpy`), params[1] (`y`)",
     "unknown dtype 'f8'"),
    (lambda m: _simt(m)["params"][2].update(rank=9), "params[2] (`m`)", "rank 9"),
    (lambda m: _simt(m)["params"][0].update(kind="ring_buffer"), "params[0] (`x`)", "'ring_buffer'"),
    (lambda m: _simt(m)["params"][0].update(role="sideways"), "params[0] (`x`)", "unknown role 'sideways'"),
    (lambda m: _simt(m)["params"].append(dict(_simt(m)["params"][0])), "kernels[0]", "two parameters share a name"),
    (lambda m: _simt(m)["contract"].update(block=[0]), "contract.block", "expected 1 to 3 positive integers"),
    (lambda m: _simt(m)["contract"].update(index_dims=4), "contract.index_dims", "expected 0 to 3"),
    (lambda m: _simt(m)["contract"].update(min_compute_capability="new"), "contract.min_compute_capability",
     "'new'"),
    (lambda m: _simt(m)["contract"].update(requires=[{"text": "t"}]), "contract.requires[0]",
     "needs a text and an expr"),
    (lambda m: _simt(m)["artifacts"]["sm_90"].update(kind="fatbin"), "artifacts.sm_90", "not a cubin or ptx"),
    (lambda m: _simt(m)["artifacts"]["ptx"].update(target="gfx90a"), "artifacts.ptx", "expected sm_XY"),
    (lambda m: _tile(m).pop("tile"), "kernels[1] (`btmodel.tiles.add`)", "has no `tile` object"),
    (lambda m: _tile(m)["tile"].update(grid_param="x"), "tile.grid_param", "'x' is not a tile.Out parameter"),
    (lambda m: _tile(m)["tile"]["specializations"][1]["tile_shapes"].update(z=[128]), "tile.specializations",
     "two specializations have the same tile shapes (128,)"),
    (lambda m: _tile(m)["tile"]["specializations"][0].update(shared_bytes=-1),
     "tile.specializations[0].shared_bytes", "-1"),
    (lambda m: _tile(m)["params"][0].update(kind="slice"), "params[0] (`x`)", "which tile kernels do not take"),
    (lambda m: m["kernels"].append(copy.deepcopy(_simt(m))), "kernels[2]", "share the PTX entry name"),
])
def test_a_malformed_manifest_is_one_error_naming_the_file_and_the_key(package, edit, key, words):
    path, data = package
    broken = copy.deepcopy(data)
    edit(broken)
    path.write_text(json.dumps(broken))
    errors = []
    for read in (lambda: manifest_format.read(path),               # the model itself
                 lambda: PackageRuntime(PKG, path),                 # the Python host
                 lambda: read_package(broken, path.parent)):        # the C generator
        with pytest.raises(BuildtileError) as info:
            read()
        errors.append(info.value)
    assert {e.code for e in errors} == {"BT0621"}
    assert len({str(e) for e in errors}) == 1, "every reader words it alike"
    text = str(errors[0])
    assert str(path) in text and key in text and words in text


def test_a_tile_out_outside_tile_kernels_is_another_abi(package):
    path, data = package
    broken = copy.deepcopy(data)
    broken["kernels"][0]["params"][0]["kind"] = "tile_out"
    with pytest.raises(BuildtileError) as info:
        parse(broken, str(path))
    assert info.value.code == "BT0622" and "kernel ABI v1 does not define outside tile kernels" in str(info.value)


def test_the_manifest_model_imports_no_compiler():
    script = ("import sys, buildtile.interop.manifest, buildtile.runtime.kernel, buildtile.runtime.tile.kernel\n"
              "print(sorted(m for m in sys.modules if m.startswith(('llvmlite', 'buildtile.backends', "
              "'buildtile.compiler'))))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
