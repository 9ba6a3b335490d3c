"""The package manifest: ``<package>/_buildtile/manifest.json``.

Written once by the build, read by the Python runtime, the C shim generator
and ``buildtile inspect``. Version 1 looks like this::

    {
      "manifest_version": 1,
      "abi_version": 1,
      "package": "example_kernels",
      "buildtile_version": "0.1.0",
      "targets": ["sm_80", "sm_90"],
      "ptx_target": "sm_80",                  # null when ptx = false
      "checks": "release",
      "kernels": [
        {
          "name": "vecadd",
          "module": "example_kernels.ops",
          "symbol": "example_kernels_ops__vecadd",   # PTX entry name
          "kind": "simt",                            # backend that compiled it
          "source": {"file": "example_kernels/ops.py", "line": 7},
          "params": [
            {"name": "a", "kind": "slice", "dtype": "f32", "rank": 1, "role": "in"},
            {"name": "c", "kind": "disjoint_slice", "dtype": "f32", "rank": 1, "role": "out"},
            {"name": "alpha", "kind": "scalar", "dtype": "f32", "rank": 0, "role": "in"}
          ],
          "contract": {
            "block": [256, 1, 1],        # null: no contract, unsafe_launch only
            "index_dims": 1,             # 1/2/3 when a write uses index_Nd(); 0 if none
            "min_blocks": null,
            "dynamic_shared": 0,
            "min_compute_capability": null,
            "requires": [{"text": "len(a) == len(c)", "expr": {...}}]
          },
          "artifacts": {                 # paths relative to _buildtile/
            "sm_80": {"kind": "cubin", "path": "kernels/example_kernels_ops__vecadd.sm_80.cubin", "sha256": "..."},
            "sm_90": {"kind": "cubin", "path": "...sm_90.cubin", "sha256": "..."},
            "ptx":   {"kind": "ptx", "target": "sm_80", "path": "...sm_80.ptx", "sha256": "..."}
          }
        }
      ]
    }

Tile kernels (``"kind": "tile"``) have the same record, plus::

          "params": [
            {"name": "x", "kind": "tensor", "dtype": "f32", "rank": 1, "role": "in"},
            {"name": "z", "kind": "tile_out", "dtype": "f32", "rank": 1, "role": "out"}
          ],
          "contract": {"block": null, "index_dims": 0, "requires": [...], ...},
          "tile": {
            "grid_param": "z",              # the Out parameter whose partition fixes the grid
            "specializations": [            # one per distinct tile shape, compiled ahead of time
              {
                "tile_shapes": {"z": [128]},           # every Out parameter's tile shape
                "symbol": "example_kernels_tiles__add__t128",
                "block": [128, 1, 1],                  # threads the compiler chose for it
                "shared_bytes": 0,                     # dynamic shared memory each launch provides
                "artifacts": {...}                     # as for SIMT kernels
              }
            ]
          }

A ``tile_out`` parameter crosses the kernel ABI like a tensor (pointer,
shape, strides); its tile shape is a compile-time constant of the chosen
specialization. The grid has one block per tile of ``grid_param``: axis
``rank-1`` of the tile grid runs along grid x, axis ``rank-2`` along y,
axis ``rank-3`` along z. A tile record's top-level ``symbol`` and
``artifacts`` are those of its first specialization.

``requires`` expressions are small JSON trees, evaluated identically by the
Python host and the C shim (over int64):

- ``{"op": "len", "param": "a"}``; ``{"op": "shape", "param": "a", "axis": 0}``
- ``{"op": "param", "name": "n"}`` (an integer scalar parameter)
- ``{"op": "const", "value": 4}``
- ``{"op": "bin", "fn": "+|-|*|//|%", "lhs": E, "rhs": E}``
- ``{"op": "cmp", "fn": "==|!=|<|<=|>|>=", "lhs": E, "rhs": E}``
- ``{"op": "and" | "or", "args": [E, ...]}``, ``{"op": "not", "arg": E}``
"""

from __future__ import annotations

import json
from pathlib import Path

from buildtile.errors import BuildtileError
from buildtile.interop.abi import ABI_VERSION

MANIFEST_VERSION = 1
MANIFEST_DIR = "_buildtile"
MANIFEST_NAME = "manifest.json"


def manifest_path(package_dir: str | Path) -> Path:
    return Path(package_dir) / MANIFEST_DIR / MANIFEST_NAME


def dumps(manifest: dict) -> str:
    """Stable text (sorted keys, fixed indent) so identical builds give identical bytes."""
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def load(path: str | Path) -> dict:
    """Read and check a manifest; a wrong ABI or manifest version is a clear error."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise BuildtileError(
            f"no compiled kernels found: {path} does not exist",
            code="BT0620",
            help="install the package with `pip install .` or run `buildtile build` in its project",
        ) from None
    except json.JSONDecodeError as exc:
        raise BuildtileError(f"{path} is not valid JSON: {exc}", code="BT0621") from None
    check_versions(data, str(path))
    return data


def check_versions(data: dict, where: str) -> None:
    if data.get("manifest_version") != MANIFEST_VERSION or data.get("abi_version") != ABI_VERSION:
        raise BuildtileError(
            f"{where} was built for manifest version {data.get('manifest_version')} / "
            f"ABI version {data.get('abi_version')}, but this buildtile reads manifest version "
            f"{MANIFEST_VERSION} / ABI version {ABI_VERSION}",
            code="BT0622",
            help="rebuild the package with this buildtile, or install the buildtile it was built with",
        )


def find_kernel(manifest: dict, module: str, name: str) -> dict | None:
    for k in manifest["kernels"]:
        if k["module"] == module and k["name"] == name:
            return k
    return None


def malformed(where: str, problem: str) -> BuildtileError:
    """The error for a manifest entry that does not follow this format."""
    return BuildtileError(
        f"malformed manifest: {where}: {problem}",
        code="BT0621",
        help="the manifest is written by the build; rebuild the package with this buildtile",
    )
