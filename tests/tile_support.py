"""Hand-made Tile kernel packages: manifests with ``"kind": "tile"`` records, and tile PTX.

- :func:`make_tile_package` builds on the ``make_kernel_package`` fixture
  (tests/conftest.py): it writes an importable package, then gives its
  manifest Tile records that follow buildtile/interop/manifest.py, one image
  set per specialization. The kernels are declared with ``TileKernel``
  directly, so these tests need no Tile compiler.
- :func:`tile_record` and :func:`add_tile_kernels` add Tile kernels to a
  package written by tests/c_abi_support.py, for the C ABI.
- ``*_ptx`` are hand-written specializations that follow kernel ABI v1, for
  nvJitLink and the GPU tests.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from buildtile.interop.abi import PARAM_KINDS, mangle


def spec_symbol(module: str, kernel: str, tiles: dict) -> str:
    """``<module>__<kernel>__t128`` / ``...__t16x32`` (several outputs: ``__t8x8_8``)."""
    return f"{mangle(module, kernel)}__t" + "_".join("x".join(map(str, shape)) for shape in tiles.values())


def generic_fields(spec: dict) -> dict:
    """A generic kernel's specialization: ``dtypes={"T": "bf16"}`` and the arrays that follow it
    (``param_dtypes``), given in the test's spec; its symbol takes a ``suffix`` ("_bf16")."""
    return {k: spec[k] for k in ("dtypes", "param_dtypes") if k in spec}


def make_tile_package(make_kernel_package, kernels: dict, *, targets=("sm_90",), ptx_target="sm_80",
                      name=None):
    """Write and import ``<package>.ops`` whose manifest lists the Tile ``kernels``.

    ``kernels`` maps a name to ``dict(params=[(name, kind, dtype, rank) ...], grid_param=...,
    specializations=[dict(tiles={"z": [128]}, block=128, shared_bytes=0) ...], requires=[text ...],
    min_compute_capability=...)``. A specialization may give real images as ``images={"sm_90": cubin}``
    and/or ``ptx=(target, text)`` (None: no PTX); otherwise small fake ones are written.
    """
    from conftest import requires_tree

    source = "from buildtile.runtime.tile.kernel import TileKernel\n\n" + "".join(
        f"@TileKernel\ndef {kernel}({', '.join(p[0] for p in spec['params'])}):\n    pass\n\n\n"
        for kernel, spec in kernels.items()
    )
    module = make_kernel_package(source, {}, targets=targets, ptx_target=ptx_target, name=name)
    out = Path(module.__file__).parent / "_buildtile"
    manifest = module.MANIFEST
    for kernel, spec in kernels.items():
        params = [{"name": p[0], "kind": p[1], "dtype": p[2], "rank": p[3] if len(p) > 3 else 0,
                   "role": PARAM_KINDS[p[1]]} for p in spec["params"]]
        specializations = []
        for s in spec["specializations"]:
            symbol = spec_symbol(module.__name__, kernel, s["tiles"]) + s.get("suffix", "")
            block = s.get("block", 128)
            block = [block] if isinstance(block, int) else list(block)
            specializations.append({
                "tile_shapes": {k: list(v) for k, v in s["tiles"].items()},
                "symbol": symbol,
                "block": block + [1] * (3 - len(block)),
                "shared_bytes": s.get("shared_bytes", 0),
                "artifacts": _artifacts(out, symbol, s, targets, ptx_target),
                **({"schedule": s["schedule"]} if "schedule" in s else {}),
                **generic_fields(s),
            })
        outs = [p["name"] for p in params if p["kind"] == "tile_out"]
        manifest["kernels"].append({
            "name": kernel,
            "module": module.__name__,
            "symbol": specializations[0]["symbol"],
            "kind": "tile",
            "source": {"file": f"{module.__name__.replace('.', '/')}.py", "line": 1},
            "params": params,
            "contract": {
                "block": None, "index_dims": 0, "min_blocks": None, "dynamic_shared": 0,
                "min_compute_capability": spec.get("min_compute_capability"),
                "requires": [requires_tree(text) for text in spec.get("requires", [])],
            },
            "artifacts": specializations[0]["artifacts"],
            "tile": {"grid_param": spec.get("grid_param", outs[0]), "specializations": specializations},
        })
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return module


def _artifacts(out: Path, symbol: str, spec: dict, targets, ptx_target) -> dict:
    images = spec["images"] if "images" in spec else {t: f"fake cubin of {symbol} for {t}".encode() for t in targets}
    artifacts = {}
    for target, data in images.items():
        artifacts[target] = _write(out, f"kernels/{symbol}.{target}.cubin", data, "cubin")
    ptx = spec.get("ptx", (ptx_target, f"// fake PTX of {symbol}\n"))
    if ptx:
        target, text = ptx
        artifacts["ptx"] = _write(out, f"kernels/{symbol}.{target}.ptx",
                                  text.encode() if isinstance(text, str) else text, "ptx")
        artifacts["ptx"]["target"] = target
    return artifacts


def _write(out: Path, rel: str, data: bytes, kind: str) -> dict:
    (out / rel).write_bytes(data)
    return {"kind": kind, "path": rel, "sha256": hashlib.sha256(data).hexdigest()}


#: Tile kernels for the Python host tests: (name, kind, dtype, rank) parameters and specializations
TILE_KERNELS = {
    "add": dict(params=[("x", "tensor", "f32", 1), ("y", "tensor", "f32", 1), ("z", "tile_out", "f32", 1)],
                specializations=[dict(tiles={"z": [128]}, block=128), dict(tiles={"z": [256]}, block=256)],
                requires=["len(x) == len(z)", "len(y) == len(z)"]),
    "add2d": dict(params=[("a", "tensor", "f32", 2), ("b", "tile_out", "f32", 2)],
                  specializations=[dict(tiles={"b": [16, 32]}, block=(32, 8))],
                  requires=["a.shape[0] == b.shape[0]", "a.shape[1] == b.shape[1]"]),
    "fill3d": dict(params=[("v", "tile_out", "f64", 3)],
                   specializations=[dict(tiles={"v": [2, 4, 8]}, block=(8, 4, 2))]),
    "scale": dict(params=[("x", "tensor", "f32", 1), ("alpha", "scalar", "f32"), ("n", "scalar", "i32"),
                          ("z", "tile_out", "f32", 1)],
                  specializations=[dict(tiles={"z": [64]}, block=64)]),
    "row_stats": dict(params=[("x", "tensor", "f32", 2), ("m", "tile_out", "f32", 2), ("s", "tile_out", "f32", 1)],
                      grid_param="m",
                      specializations=[dict(tiles={"m": [8, 8], "s": [8]}, block=64),
                                       dict(tiles={"m": [16, 16], "s": [16]}, block=256)]),
    "big_shared": dict(params=[("z", "tile_out", "f32", 1)],
                       specializations=[dict(tiles={"z": [4096]}, block=256, shared_bytes=96 * 1024)]),
    "sm100_only": dict(params=[("z", "tile_out", "f32", 1)], min_compute_capability=100,
                       specializations=[dict(tiles={"z": [128]}, block=128)]),
}


# ----------------------------------------------------------------------------- hand-written tile PTX
#
# Each follows kernel ABI v1 (a tensor or tile.Out as data, shape..., strides... in elements), and
# takes its tile shape as a constant, as the Tile compiler's specializations do: block b of the
# grid owns tile b of the output, whatever the number of threads.

PTX_HEADER = ".version 8.0\n.target {target}\n.address_size 64\n"


def add_1d_ptx(symbol: str, tile: int, block: int, target: str = "sm_80") -> str:
    """z[i] = x[i] + y[i] over tile ``blockIdx.x`` of z (ragged: i < len(z)); threads stride by ``block``."""
    return PTX_HEADER.format(target=target) + f"""
.visible .entry {symbol}(
    .param .u64 x_data, .param .u64 x_s0, .param .u64 x_t0,
    .param .u64 y_data, .param .u64 y_s0, .param .u64 y_t0,
    .param .u64 z_data, .param .u64 z_s0, .param .u64 z_t0
) .reqntid {block}, 1, 1
{{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<20>;
    .reg .f32 %f<4>;
    ld.param.u64 %rd1, [x_data];
    ld.param.u64 %rd2, [y_data];
    ld.param.u64 %rd3, [z_data];
    ld.param.u64 %rd4, [z_s0];
    ld.param.u64 %rd12, [x_t0];
    ld.param.u64 %rd13, [y_t0];
    ld.param.u64 %rd14, [z_t0];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd3, %rd3;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd5, %r1, {tile};
    add.s64 %rd15, %rd5, {tile};
    min.s64 %rd15, %rd15, %rd4;
    cvt.u64.u32 %rd6, %r2;
    add.s64 %rd7, %rd5, %rd6;
LOOP:
    setp.ge.s64 %p1, %rd7, %rd15;
    @%p1 bra DONE;
    mul.lo.s64 %rd8, %rd7, %rd12;
    shl.b64 %rd8, %rd8, 2;
    add.s64 %rd8, %rd1, %rd8;
    mul.lo.s64 %rd9, %rd7, %rd13;
    shl.b64 %rd9, %rd9, 2;
    add.s64 %rd9, %rd2, %rd9;
    mul.lo.s64 %rd10, %rd7, %rd14;
    shl.b64 %rd10, %rd10, 2;
    add.s64 %rd10, %rd3, %rd10;
    ld.global.f32 %f1, [%rd8];
    ld.global.f32 %f2, [%rd9];
    add.rn.f32 %f3, %f1, %f2;
    st.global.f32 [%rd10], %f3;
    add.s64 %rd7, %rd7, {block};
    bra LOOP;
DONE:
    ret;
}}
"""


def double_2d_ptx(symbol: str, tile: tuple[int, int], block: tuple[int, int], target: str = "sm_80") -> str:
    """z[r, c] = x[r, c] + x[r, c] over tile (blockIdx.y, blockIdx.x) of z; one column per thread
    (tile[1] == block[0]), rows strided by block[1]."""
    (tr, tc), (bx, by) = tile, block
    assert tc == bx
    return PTX_HEADER.format(target=target) + f"""
.visible .entry {symbol}(
    .param .u64 x_data, .param .u64 x_s0, .param .u64 x_s1, .param .u64 x_t0, .param .u64 x_t1,
    .param .u64 z_data, .param .u64 z_s0, .param .u64 z_s1, .param .u64 z_t0, .param .u64 z_t1
) .reqntid {bx}, {by}, 1
{{
    .reg .pred %p<3>;
    .reg .b32 %r<5>;
    .reg .b64 %rd<20>;
    .reg .f32 %f<3>;
    ld.param.u64 %rd1, [x_data];
    ld.param.u64 %rd2, [x_t0];
    ld.param.u64 %rd3, [x_t1];
    ld.param.u64 %rd4, [z_data];
    ld.param.u64 %rd5, [z_s0];
    ld.param.u64 %rd6, [z_s1];
    ld.param.u64 %rd7, [z_t0];
    ld.param.u64 %rd8, [z_t1];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd4, %rd4;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd9, %r1, {tc};
    cvt.u64.u32 %rd10, %r2;
    add.s64 %rd9, %rd9, %rd10;
    setp.ge.s64 %p1, %rd9, %rd6;
    @%p1 bra DONE;
    mov.u32 %r3, %ctaid.y;
    mov.u32 %r4, %tid.y;
    mul.wide.u32 %rd11, %r3, {tr};
    add.s64 %rd12, %rd11, {tr};
    min.s64 %rd12, %rd12, %rd5;
    cvt.u64.u32 %rd13, %r4;
    add.s64 %rd11, %rd11, %rd13;
LOOP:
    setp.ge.s64 %p2, %rd11, %rd12;
    @%p2 bra DONE;
    mul.lo.s64 %rd14, %rd11, %rd2;
    mad.lo.s64 %rd14, %rd9, %rd3, %rd14;
    shl.b64 %rd14, %rd14, 2;
    add.s64 %rd15, %rd1, %rd14;
    ld.global.f32 %f1, [%rd15];
    add.rn.f32 %f2, %f1, %f1;
    mul.lo.s64 %rd16, %rd11, %rd7;
    mad.lo.s64 %rd16, %rd9, %rd8, %rd16;
    shl.b64 %rd16, %rd16, 2;
    add.s64 %rd17, %rd4, %rd16;
    st.global.f32 [%rd17], %f2;
    add.s64 %rd11, %rd11, {by};
    bra LOOP;
DONE:
    ret;
}}
"""


def reverse_shared_ptx(symbol: str, tile: int, shared_bytes: int, target: str = "sm_80") -> str:
    """z = x reversed within each tile (one element per thread, tile == block), through a slot at the
    *end* of ``shared_bytes`` of dynamic shared memory, so it only works when the launch provides all of it:
    z[t0 + k] = x[t0 + tile-1-k], reading 0 past len(z)."""
    base = shared_bytes - 4 * tile
    return PTX_HEADER.format(target=target) + f"""
.extern .shared .align 16 .b8 smem[];

.visible .entry {symbol}(
    .param .u64 x_data, .param .u64 x_s0, .param .u64 x_t0,
    .param .u64 z_data, .param .u64 z_s0, .param .u64 z_t0
) .reqntid {tile}, 1, 1
{{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<12>;
    .reg .f32 %f<3>;
    ld.param.u64 %rd1, [x_data];
    ld.param.u64 %rd2, [z_data];
    ld.param.u64 %rd3, [z_s0];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd4, %r1, {tile};
    cvt.u64.u32 %rd5, %r2;
    add.s64 %rd6, %rd4, %rd5;
    mov.f32 %f1, 0f00000000;
    setp.ge.s64 %p1, %rd6, %rd3;
    @%p1 bra STASH;
    shl.b64 %rd7, %rd6, 2;
    add.s64 %rd8, %rd1, %rd7;
    ld.global.f32 %f1, [%rd8];
STASH:
    mov.u32 %r3, smem;
    add.u32 %r3, %r3, {base};
    shl.b32 %r4, %r2, 2;
    add.u32 %r5, %r3, %r4;
    st.shared.f32 [%r5], %f1;
    bar.sync 0;
    mov.u32 %r6, {tile - 1};
    sub.u32 %r6, %r6, %r2;
    shl.b32 %r6, %r6, 2;
    add.u32 %r7, %r3, %r6;
    ld.shared.f32 %f2, [%r7];
    @%p1 bra DONE;
    shl.b64 %rd9, %rd6, 2;
    add.s64 %rd10, %rd2, %rd9;
    st.global.f32 [%rd10], %f2;
DONE:
    ret;
}}
"""


# ----------------------------------------------------------------------------- C ABI packages

def tile_record(module: str, name: str, params: list[tuple], specs: list[dict], *, grid_param=None,
                requires=(), min_cc=None) -> dict:
    """A manifest record of kind "tile" (artifacts are added by :func:`add_tile_kernels`).

    ``specs``: ``dict(tiles={"z": [128]}, block=..., shared_bytes=..., ptx=text)``; ``requires``:
    (text, expression tree) pairs.
    """
    record_params = [{"name": p[0], "kind": p[1], "dtype": p[2], "rank": p[3] if len(p) > 3 else 0,
                      "role": PARAM_KINDS[p[1]]} for p in params]
    outs = [p["name"] for p in record_params if p["kind"] == "tile_out"]
    specializations = []
    for s in specs:
        block = s["block"] if isinstance(s["block"], (list, tuple)) else [s["block"]]
        specializations.append({
            "tile_shapes": {k: list(v) for k, v in s["tiles"].items()},
            "symbol": spec_symbol(module, name, s["tiles"]) + s.get("suffix", ""),
            "block": list(block) + [1] * (3 - len(block)),
            "shared_bytes": s.get("shared_bytes", 0),
            "_ptx": s["ptx"],
            **({"schedule": s["schedule"]} if "schedule" in s else {}),
            **generic_fields(s),
        })
    return {
        "name": name, "module": module, "symbol": specializations[0]["symbol"], "kind": "tile",
        "source": {"file": module.replace(".", "/") + ".py", "line": 1},
        "params": record_params,
        "contract": {"block": None, "index_dims": 0, "min_blocks": None, "dynamic_shared": 0,
                     "min_compute_capability": min_cc,
                     "requires": [{"text": text, "expr": expr} for text, expr in requires]},
        "tile": {"grid_param": grid_param or outs[0], "specializations": specializations},
    }


def add_tile_kernels(root: Path, manifest: dict, records: list[dict], *, link=None) -> dict:
    """Write each specialization's images (a cubin per target: ``link(ptx, target)`` or a stand-in,
    and the PTX) under ``root/<package>/_buildtile`` and add the records to ``manifest``."""
    package = manifest["package"]
    out = root / package / "_buildtile"
    lowest = manifest.get("ptx_target")
    for record in records:
        for spec in record["tile"]["specializations"]:
            ptx = spec.pop("_ptx")
            artifacts = {}
            for target in manifest["targets"]:
                data = (link(ptx, target) if link else None) or (
                    b"\x7fELF" + f"fake cubin of {spec['symbol']} for {target}\n".encode())
                artifacts[target] = _write(out, f"kernels/{spec['symbol']}.{target}.cubin", data, "cubin")
            if lowest:
                artifacts["ptx"] = _write(out, f"kernels/{spec['symbol']}.{lowest}.ptx", ptx.encode(), "ptx")
                artifacts["ptx"]["target"] = lowest
            spec["artifacts"] = artifacts
        record["artifacts"] = record["tile"]["specializations"][0]["artifacts"]
        manifest["kernels"].append(record)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest
