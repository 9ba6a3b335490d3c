"""Hand-made packages for the C ABI tests: manifests, PTX written by hand, cubins.

The PTX kernels follow kernel ABI v1 exactly as the SIMT backend's output
must (slice = pointer + length, tensor = pointer + shape + strides), so the
shim can be tested, on a GPU too, without the compiler.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from buildtile.interop.driver_compat import min_driver_for, ptx_isa_of

PACKAGE = "example_kernels"

_HEADER = """.version 8.0
.target sm_80
.address_size 64
"""

# c[i] = a[i] + b[i] for i < len(c); 1-D blocks of 256
VECADD_PTX = _HEADER + """
.visible .entry example_kernels_ops__vecadd(
    .param .u64 a_data, .param .u64 a_len,
    .param .u64 b_data, .param .u64 b_len,
    .param .u64 c_data, .param .u64 c_len
)
.reqntid 256, 1, 1
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [a_data];
    ld.param.u64 %rd2, [b_data];
    ld.param.u64 %rd3, [c_data];
    ld.param.u64 %rd4, [c_len];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd5, %r1, %r2;
    cvt.u64.u32 %rd6, %r3;
    add.s64 %rd5, %rd5, %rd6;
    setp.ge.s64 %p1, %rd5, %rd4;
    @%p1 bra $L_done;
    shl.b64 %rd7, %rd5, 2;
    cvta.to.global.u64 %rd8, %rd1;
    add.s64 %rd8, %rd8, %rd7;
    ld.global.f32 %f1, [%rd8];
    cvta.to.global.u64 %rd9, %rd2;
    add.s64 %rd9, %rd9, %rd7;
    ld.global.f32 %f2, [%rd9];
    add.rn.f32 %f3, %f1, %f2;
    cvta.to.global.u64 %rd10, %rd3;
    add.s64 %rd10, %rd10, %rd7;
    st.global.f32 [%rd10], %f3;
$L_done:
    ret;
}
"""

# out[i] = alpha * x[i] + y[i] (one fused multiply-add); 1-D blocks of 256
SAXPY_PTX = _HEADER + """
.visible .entry example_kernels_ops__saxpy(
    .param .f32 alpha,
    .param .u64 x_data, .param .u64 x_len,
    .param .u64 y_data, .param .u64 y_len,
    .param .u64 out_data, .param .u64 out_len
)
.reqntid 256, 1, 1
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<12>;
    ld.param.f32 %f4, [alpha];
    ld.param.u64 %rd1, [x_data];
    ld.param.u64 %rd2, [y_data];
    ld.param.u64 %rd3, [out_data];
    ld.param.u64 %rd4, [out_len];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd5, %r1, %r2;
    cvt.u64.u32 %rd6, %r3;
    add.s64 %rd5, %rd5, %rd6;
    setp.ge.s64 %p1, %rd5, %rd4;
    @%p1 bra $L_done;
    shl.b64 %rd7, %rd5, 2;
    cvta.to.global.u64 %rd8, %rd1;
    add.s64 %rd8, %rd8, %rd7;
    ld.global.f32 %f1, [%rd8];
    cvta.to.global.u64 %rd9, %rd2;
    add.s64 %rd9, %rd9, %rd7;
    ld.global.f32 %f2, [%rd9];
    fma.rn.f32 %f3, %f4, %f1, %f2;
    cvta.to.global.u64 %rd10, %rd3;
    add.s64 %rd10, %rd10, %rd7;
    st.global.f32 [%rd10], %f3;
$L_done:
    ret;
}
"""

# c[row, col] = a[row, col] + b[row, col], strides in elements; row from y,
# col from x; blocks of 16 x 16
MATADD_PTX = _HEADER + """
.visible .entry example_kernels_ops__matadd(
    .param .u64 a_data, .param .u64 a_s0, .param .u64 a_s1, .param .u64 a_t0, .param .u64 a_t1,
    .param .u64 b_data, .param .u64 b_s0, .param .u64 b_s1, .param .u64 b_t0, .param .u64 b_t1,
    .param .u64 c_data, .param .u64 c_s0, .param .u64 c_s1, .param .u64 c_t0, .param .u64 c_t1
)
.reqntid 16, 16, 1
{
    .reg .pred %p<4>;
    .reg .b32 %r<7>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<24>;
    ld.param.u64 %rd1, [a_data];
    ld.param.u64 %rd2, [a_t0];
    ld.param.u64 %rd3, [a_t1];
    ld.param.u64 %rd4, [b_data];
    ld.param.u64 %rd5, [b_t0];
    ld.param.u64 %rd6, [b_t1];
    ld.param.u64 %rd7, [c_data];
    ld.param.u64 %rd8, [c_s0];
    ld.param.u64 %rd9, [c_s1];
    ld.param.u64 %rd10, [c_t0];
    ld.param.u64 %rd11, [c_t1];
    mov.u32 %r1, %ctaid.y;
    mov.u32 %r2, %ntid.y;
    mov.u32 %r3, %tid.y;
    mul.wide.u32 %rd12, %r1, %r2;
    cvt.u64.u32 %rd13, %r3;
    add.s64 %rd12, %rd12, %rd13;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mov.u32 %r6, %tid.x;
    mul.wide.u32 %rd14, %r4, %r5;
    cvt.u64.u32 %rd15, %r6;
    add.s64 %rd14, %rd14, %rd15;
    setp.ge.s64 %p1, %rd12, %rd8;
    setp.ge.s64 %p2, %rd14, %rd9;
    or.pred %p3, %p1, %p2;
    @%p3 bra $L_done;
    mul.lo.s64 %rd16, %rd12, %rd2;
    mad.lo.s64 %rd16, %rd14, %rd3, %rd16;
    shl.b64 %rd16, %rd16, 2;
    cvta.to.global.u64 %rd17, %rd1;
    add.s64 %rd17, %rd17, %rd16;
    ld.global.f32 %f1, [%rd17];
    mul.lo.s64 %rd18, %rd12, %rd5;
    mad.lo.s64 %rd18, %rd14, %rd6, %rd18;
    shl.b64 %rd18, %rd18, 2;
    cvta.to.global.u64 %rd19, %rd4;
    add.s64 %rd19, %rd19, %rd18;
    ld.global.f32 %f2, [%rd19];
    add.rn.f32 %f3, %f1, %f2;
    mul.lo.s64 %rd20, %rd12, %rd10;
    mad.lo.s64 %rd20, %rd14, %rd11, %rd20;
    shl.b64 %rd20, %rd20, 2;
    cvta.to.global.u64 %rd21, %rd7;
    add.s64 %rd21, %rd21, %rd20;
    st.global.f32 [%rd21], %f3;
$L_done:
    ret;
}
"""


def _length(param: str) -> dict:
    return {"op": "len", "param": param}


def _shape(param: str, axis: int) -> dict:
    return {"op": "shape", "param": param, "axis": axis}


def _eq(lhs: dict, rhs: dict) -> dict:
    return {"op": "cmp", "fn": "==", "lhs": lhs, "rhs": rhs}


def _slice(name: str, kind: str = "slice", dtype: str = "f32") -> dict:
    role = {"slice": "in", "disjoint_slice": "out", "atomic_slice": "inout"}[kind]
    return {"name": name, "kind": kind, "dtype": dtype, "rank": 1, "role": role}


def _tensor(name: str, rank: int, kind: str = "tensor", dtype: str = "f32") -> dict:
    return {"name": name, "kind": kind, "dtype": dtype, "rank": rank,
            "role": "in" if kind == "tensor" else "out"}


def _scalar(name: str, dtype: str) -> dict:
    return {"name": name, "kind": "scalar", "dtype": dtype, "rank": 0, "role": "in"}


def _contract(block, index_dims, requires):
    return {
        "block": block,
        "index_dims": index_dims,
        "min_blocks": None,
        "dynamic_shared": 0,
        "min_compute_capability": None,
        "requires": [{"text": text, "expr": expr} for text, expr in requires],
    }


def _kernel(name: str, params: list[dict], contract: dict, module: str = "example_kernels.ops") -> dict:
    return {
        "name": name,
        "module": module,
        "symbol": module.replace(".", "_") + "__" + name,
        "kind": "simt",
        "source": {"file": module.replace(".", "/") + ".py", "line": 1},
        "params": params,
        "contract": contract,
    }


def example_kernels() -> list[tuple[dict, str]]:
    """vecadd, saxpy and matadd of example_project, each with its PTX."""
    vecadd = _kernel(
        "vecadd",
        [_slice("a"), _slice("b"), _slice("c", "disjoint_slice")],
        _contract([256, 1, 1], 1, [
            ("len(a) == len(c)", _eq(_length("a"), _length("c"))),
            ("len(b) == len(c)", _eq(_length("b"), _length("c"))),
        ]),
    )
    saxpy = _kernel(
        "saxpy",
        [_scalar("alpha", "f32"), _slice("x"), _slice("y"), _slice("out", "disjoint_slice")],
        _contract([256, 1, 1], 1, [
            ("len(x) == len(out)", _eq(_length("x"), _length("out"))),
            ("len(y) == len(out)", _eq(_length("y"), _length("out"))),
        ]),
    )
    matadd = _kernel(
        "matadd",
        [_tensor("a", 2), _tensor("b", 2), _tensor("c", 2, "disjoint_tensor")],
        _contract([16, 16, 1], 2, [
            (f"{x}.shape[{axis}] == c.shape[{axis}]", _eq(_shape(x, axis), _shape("c", axis)))
            for x in ("a", "b") for axis in (0, 1)
        ]),
    )
    return [(vecadd, VECADD_PTX), (saxpy, SAXPY_PTX), (matadd, MATADD_PTX)]


def extra_kernels() -> list[tuple[dict, str]]:
    """Kernels for the CPU tests only (their images are never run)."""
    fill = _kernel(
        "fill_unsafe_demo",
        [_slice("x", "disjoint_slice"), _scalar("n", "i64"), _scalar("flag", "bool"), _scalar("h", "f16")],
        _contract(None, 1, [("n >= 0", {"op": "cmp", "fn": ">=", "lhs": {"op": "param", "name": "n"},
                                         "rhs": {"op": "const", "value": 0}})]),
        module="example_kernels.misc",
    )
    histogram = _kernel(
        "histogram",
        [_slice("values", dtype="i32"), _slice("bins", "atomic_slice", dtype="u32"), _scalar("nbins", "i32")],
        _contract([128, 1, 1], 1, [
            ("len(bins) == nbins", _eq(_length("bins"), {"op": "param", "name": "nbins"})),
            ("len(values) // 2 >= 1",
             {"op": "cmp", "fn": ">=", "rhs": {"op": "const", "value": 1},
              "lhs": {"op": "bin", "fn": "//", "lhs": _length("values"), "rhs": {"op": "const", "value": 2}}}),
        ]),
        module="example_kernels.misc",
    )
    scale3d = _kernel(
        "scale3d",
        [_tensor("x", 3), _tensor("y", 3, "disjoint_tensor"), _scalar("s", "f64")],
        {**_contract([8, 8, 4], 3, []), "min_compute_capability": "8.0", "dynamic_shared": 1024},
        module="example_kernels.misc",
    )
    return [(fill, VECADD_PTX), (histogram, VECADD_PTX), (scale3d, VECADD_PTX)]


def link_cubin(ptx: str, target: str) -> bytes | None:
    """The cubin nvJitLink makes of ``ptx`` for ``target``; None without nvJitLink."""
    try:
        from cuda.bindings import nvjitlink
    except ImportError:
        return None
    data = ptx.encode()
    handle = nvjitlink.create(1, [f"-arch={target}"])
    try:
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
        nvjitlink.complete(handle)
        out = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, out)
    finally:
        nvjitlink.destroy(handle)
    return bytes(out)


def fake_cubin(ptx: str, target: str) -> bytes:
    """Bytes that stand in for a cubin where nobody runs it (ELF magic, then a tag)."""
    return b"\x7fELF" + f"fake cubin for {target}\n".encode() + hashlib.sha256(ptx.encode()).digest()


def write_package(
    root: Path,
    kernels: list[tuple[dict, str]],
    *,
    targets: tuple[str, ...] = ("sm_80", "sm_90"),
    ptx: bool = True,
    real_cubins: bool = False,
    package_version: str | None = "0.1.0",
) -> dict:
    """Lay out ``root/<package>/_buildtile`` (manifest and artifacts) as a build would."""
    out = root / PACKAGE / "_buildtile"
    (out / "kernels").mkdir(parents=True, exist_ok=True)
    (root / PACKAGE / "__init__.py").write_text("")
    manifest = {
        "manifest_version": 1,
        "abi_version": 1,
        "package": PACKAGE,
        "buildtile_version": "0.1.0",
        "targets": list(targets),
        "ptx_target": _lowest(targets) if ptx else None,
        "checks": "release",
        "kernels": [],
    }
    if package_version:
        manifest["package_version"] = package_version
    for record, text in kernels:
        record = json.loads(json.dumps(record))
        artifacts = {}
        for target in targets:
            data = (link_cubin(text, target) if real_cubins else None) or fake_cubin(text, target)
            artifacts[target] = _artifact(out, f"kernels/{record['symbol']}.{target}.cubin", data, "cubin",
                                          ptx_isa_of(text))
        if ptx:
            lowest = _lowest(targets)
            artifacts["ptx"] = _artifact(out, f"kernels/{record['symbol']}.{lowest}.ptx", text.encode(), "ptx",
                                         ptx_isa_of(text))
            artifacts["ptx"]["target"] = lowest
        record["artifacts"] = artifacts
        manifest["kernels"].append(record)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def _lowest(targets: tuple[str, ...]) -> str:
    return min(targets, key=lambda t: int(t[3:].rstrip("af")))


def _artifact(out: Path, rel: str, data: bytes, kind: str, isa: str | None) -> dict:
    """An image as a build records it; each is held to the PTX ISA of the kernels' text (``isa``)."""
    (out / rel).write_bytes(data)
    return {"kind": kind, "path": rel, "sha256": hashlib.sha256(data).hexdigest(),
            "ptx_isa": isa, "min_driver": min_driver_for(isa)}
