"""A kernel's NVPTX LLVM IR rewritten into host IR that ``runtime.c`` can run.

The rewriting is textual and driven by patterns, not by one lowering's exact
output: address spaces are dropped, every ``llvm.nvvm.*`` intrinsic becomes a
call of the runtime's ``emu_*`` function of the same name (dots become
underscores), libdevice's ``__nv_*`` become ``emu_nv_*``, and inline PTX is
replaced by calls with the same operands. Before the address spaces go, each
load, store and atomic on global (1) or shared (3) memory is preceded by a
call of ``emu_check_global`` / ``emu_check_shared`` with the access's size and
a *site* number, which :class:`HostIR` maps back to the access (and its
source line where the IR says). Struct-returning operations (``ldmatrix``,
``mma``, vector loads) get small IR shims that pass out-pointers to C.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from buildtile.emulate import hopper
from buildtile.errors import BuildtileError
from buildtile.interop.abi import TENSOR_MAP

#: what a call of the runtime reaches that only kernels with collectives do (their threads run as
#: coroutines that wait for each other; kernels without them run their threads one after another)
COLLECTIVES = ("emu_barrier", "emu_shfl", "emu_vote", "emu_syncwarp", "emu_ldmatrix", "emu_mma",
               "emu_cp_async", "emu_ld_acquire", *hopper.COLLECTIVES)

_SCALAR_BYTES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "i128": 16, "half": 2, "bfloat": 2,
                 "float": 4, "double": 8, "ptr": 8}
_ACCESS = re.compile(r"^(?P<lead>\s*(?:%[-\w.\"]+\s*=\s*)?)(?P<op>load|store|atomicrmw|cmpxchg)\b")
_ADDRSPACE_PTR = re.compile(r"ptr addrspace\((?P<space>[13])\) ")
_ASM_CALL = re.compile(r'call (?P<ret>\{[^}]*\}|\S+) asm\s+(?:sideeffect\s+)?(?:alignstack\s+)?"(?P<text>[^"]*)",\s*'
                       r'"(?P<cons>[^"]*)"\s*\((?P<args>.*)\)')
_DEFINE = re.compile(r'^define\s+(?:[\w]+\s+)*void\s+@"?(?P<sym>[\w.$]+)"?\(')
_SHARED_GLOBAL = re.compile(r'^@"?(?P<name>[\w.$]+)"?\s*=\s*(?P<linkage>(?:internal|external|private|dso_local)\s+)*'
                            r'addrspace\(3\)\s+global\s+(?P<type>\[[^\]]*\]|\S+)')
_FLAGS_WRITE, _FLAGS_ATOMIC, _FLAGS_VECTOR = 1, 2, 4


class EmulationError(BuildtileError):
    """A kernel the emulator cannot run, or a check of an emulated launch that failed."""


@dataclass
class Site:
    """One checked access (or barrier) of the kernel's IR."""

    what: str            # "read", "write", "atomic", "barrier"
    space: str           # "global", "shared" or ""
    type: str            # the LLVM type accessed
    line: int | None     # the kernel source line, when the IR carries it


@dataclass
class HostIR:
    """The host IR of one kernel entry and what the launch needs to know of it."""

    text: str
    symbol: str
    param_types: list[str]
    sites: list[Site]
    shared_globals: dict[str, int]      # static shared variables: name -> bytes
    dynamic_shared: list[str]           # external shared variables (all at the runtime's buffer)
    runtime_calls: set[str] = field(default_factory=set)

    @property
    def threaded(self) -> bool:
        """Whether the kernel's threads must run as coroutines that wait for each other (it has
        collectives)."""
        return any(name.startswith(COLLECTIVES) for name in self.runtime_calls)


def type_bytes(text: str) -> int:
    """Bytes of an LLVM type spelled ``text`` (scalars, vectors, arrays)."""
    text = text.strip()
    m = re.fullmatch(r"[<\[]\s*(\d+)\s+x\s+(.+?)\s*[>\]]", text)
    if m:
        return int(m.group(1)) * type_bytes(m.group(2))
    if text in _SCALAR_BYTES:
        return _SCALAR_BYTES[text]
    if text.startswith("ptr"):
        return 8
    if text.startswith("<{") and text.endswith("}>"):   # a packed struct (a record, its padding spelled out)
        return sum(type_bytes(t) for t in _split_top(text[2:-2]))
    if text.startswith("{"):
        return sum(type_bytes(t) for t in _split_top(text[1:-1]))
    raise ValueError(f"unknown LLVM type {text!r}")


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(text):
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:k])
            start = k + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _operand_end(line: str, start: int) -> int:
    """Where the operand starting at ``start`` ends: the first top-level comma, or the line's end."""
    depth = 0
    for k in range(start, len(line)):
        ch = line[k]
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif ch == "," and depth == 0:
            return k
    return len(line)


def _accessed_type(op: str, line: str, after_op: int, ptr_at: int, ptr_end: int) -> str:
    rest = line[after_op:].lstrip()
    for word in ("atomic ", "volatile "):
        if rest.startswith(word):
            rest = rest[len(word):].lstrip()
    if op == "load":
        return _split_top(rest)[0]
    if op == "store":
        value = _split_top(rest)[0]          # "<type> <value>"
        return value.rsplit(" ", 1)[0] if not value.startswith(("<", "[", "{")) else value[:_close(value) + 1]
    # atomicrmw OP ptr P, TYPE V / cmpxchg ptr P, TYPE A, TYPE B: the type after the pointer
    after = line[ptr_end + 1:].lstrip()
    return after.split(" ", 1)[0]


def _close(text: str) -> int:
    depth = 0
    for k, ch in enumerate(text):
        if ch in "<[{(":
            depth += 1
        elif ch in ">]})":
            depth -= 1
            if depth == 0:
                return k
    return len(text) - 1


def _instrument(line: str, sites: list[Site], counter: list[int], source_line: int | None) -> list[str]:
    """The check calls to put before ``line`` (an access of global or shared memory), and ``line``."""
    m = _ACCESS.match(line)
    if not m:
        return [line]
    p = _ADDRSPACE_PTR.search(line, m.end())
    if not p:
        return [line]
    op = m.group("op")
    ptr_start = p.end()
    ptr_end = _operand_end(line, ptr_start)
    operand = line[ptr_start:ptr_end].strip()
    if op in ("load", "store"):
        # the operand may be followed by " monotonic" or the like on atomic accesses
        operand = re.sub(r"\s+(?:unordered|monotonic|acquire|release|acq_rel|seq_cst)$", "", operand)
    typ = _accessed_type(op, line, m.end(), ptr_start, ptr_end)
    space = "global" if p.group("space") == "1" else "shared"
    flags = 0
    what = "read"
    if op == "store":
        flags |= _FLAGS_WRITE
        what = "write"
    elif op in ("atomicrmw", "cmpxchg"):
        flags |= _FLAGS_ATOMIC | _FLAGS_WRITE
        what = "atomic"
    elif " atomic " in f" {line[m.end():m.end() + 9]} ":
        flags |= _FLAGS_ATOMIC
    if typ.startswith("<") and not typ.startswith("<{"):   # a vector (a packed struct needs no alignment)
        flags |= _FLAGS_VECTOR
        # checked above; on the host a misaligned access must not fault before it is reported
        line = re.sub(r"align \d+", "align 1", line)
    site = len(sites)
    sites.append(Site(what, space, typ, source_line))
    k = counter[0]
    counter[0] += 1
    indent = re.match(r"\s*", line).group(0)
    return [f"{indent}%emu.addr.{k} = ptrtoint ptr addrspace({p.group('space')}) {operand} to i64",
            f"{indent}call void @emu_check_{space}(i64 %emu.addr.{k}, i64 {type_bytes(typ)}, i32 {flags}, i32 {site})",
            line]


def _i32(literal: str) -> str:
    """A PTX integer literal (a 32-bit mask) as an LLVM ``i32`` operand."""
    value = int(literal, 0) & 0xFFFFFFFF
    return f"i32 {value - (1 << 32) if value >= 1 << 31 else value}"


def _asm_replacement(text: str, ret: str, args: list[str], site: int) -> tuple[str, list[str]]:
    """(runtime function, its arguments) standing in for one piece of inline PTX."""
    if text == "bar.sync 0;":
        return "emu_barrier", [f"i32 {site}"]
    m = re.fullmatch(r"shfl\.sync\.(up|down|bfly|idx)\.b32 \$0, \$1, \$2, (0x[0-9a-f]+|\d+), (0x[0-9a-f]+|\$3);", text)
    if m:
        mask = args[2] if m.group(3) == "$3" else _i32(m.group(3))
        return f"emu_shfl_{m.group(1)}", [args[0], args[1], f"i32 {int(m.group(2), 0)}", mask]
    m = re.fullmatch(r"bar\.warp\.sync (0x[0-9a-f]+|\$0);", text)
    if m:
        return "emu_syncwarp", args if m.group(1) == "$0" else [_i32(m.group(1))]
    m = re.search(r"vote\.sync\.(ballot|any|all|uni)\.", text)
    if m:
        return f"emu_vote_{m.group(1)}", args
    if text == "mov.u32 $0, %dynamic_smem_size;":
        return "emu_dynamic_smem_size", []
    m = re.search(r"@p ld\.global\.nc\.(b32|b16|u8|b64) ", text)
    if m:
        return f"emu_pld_{m.group(1)}", args
    m = re.search(r"@p st\.global\.(b32|b16|u8|b64) ", text)
    if m:
        return f"emu_pst_{m.group(1)}", args
    m = re.match(r"ld\.global\.nc\.v(\d)\.b32 ", text)
    if m:
        return f"emu_ldv{m.group(1)}", args
    if text == "ld.global.nc.b32 $0, [$1];":
        return "emu_ld_b32", args
    if text == "mov.b32 $0, $1;":
        return "emu_mov_b32", args
    if text == "mov.b64 $0, $1;":
        return "emu_mov_b64", args
    if text == "cvt.rn.bf16x2.f32 $0, $1, $2;":
        return "emu_cvt_rn_bf16x2_f32", args
    # a cooperative launch's grid barrier: its workspace, the arrival count, the spin on it
    if text == "mov.b64 $0, {%envreg2, %envreg1};":
        return "emu_grid_workspace", []
    if text == "atom.add.release.gpu.u32 $0, [$1], $2;":
        return "emu_atom_add_release_u32", args
    if text == "ld.acquire.gpu.u32 $0, [$1];":
        return "emu_ld_acquire_u32", args
    found = hopper.replacement(text, ret, args, site)
    if found is not None:
        return found
    raise EmulationError(f"the emulator has no stand-in for the inline PTX `{text}`", code="BT0805",
                         help="run this kernel on a GPU, or extend buildtile/emulate/runtime.c")


_ARG = re.compile(r'(\S+) (%"[^"]*"|%[-\w.]+|-?\d+|true|false)')
_SHIMS = r"""
declare void @emu_ldmatrix(ptr, ptr, i32)
declare void @emu_mma(ptr, ptr, ptr, ptr, i32)
declare void @emu_ld_vector(i64, ptr, i32)

define {i32, i32, i32, i32} @emu_ldmatrix_sync_aligned_m8n8_x4_b16(ptr %p) {
  %o = alloca [4 x i32], align 16
  call void @emu_ldmatrix(ptr %p, ptr %o, i32 0)
  %r = call {i32, i32, i32, i32} @emu_unpack4(ptr %o)
  ret {i32, i32, i32, i32} %r
}

define {i32, i32, i32, i32} @emu_ldmatrix_sync_aligned_m8n8_x4_trans_b16(ptr %p) {
  %o = alloca [4 x i32], align 16
  call void @emu_ldmatrix(ptr %p, ptr %o, i32 1)
  %r = call {i32, i32, i32, i32} @emu_unpack4(ptr %o)
  ret {i32, i32, i32, i32} %r
}

define {i32, i32, i32, i32} @emu_ldv4(i64 %addr) {
  %o = alloca [4 x i32], align 16
  call void @emu_ld_vector(i64 %addr, ptr %o, i32 4)
  %r = call {i32, i32, i32, i32} @emu_unpack4(ptr %o)
  ret {i32, i32, i32, i32} %r
}

define {i32, i32} @emu_ldv2(i64 %addr) {
  %o = alloca [2 x i32], align 16
  call void @emu_ld_vector(i64 %addr, ptr %o, i32 2)
  %p1 = getelementptr i32, ptr %o, i32 1
  %v0 = load i32, ptr %o
  %v1 = load i32, ptr %p1
  %s0 = insertvalue {i32, i32} undef, i32 %v0, 0
  %s1 = insertvalue {i32, i32} %s0, i32 %v1, 1
  ret {i32, i32} %s1
}

define {i32, i32, i32, i32} @emu_unpack4(ptr %o) {
  %p1 = getelementptr i32, ptr %o, i32 1
  %p2 = getelementptr i32, ptr %o, i32 2
  %p3 = getelementptr i32, ptr %o, i32 3
  %v0 = load i32, ptr %o
  %v1 = load i32, ptr %p1
  %v2 = load i32, ptr %p2
  %v3 = load i32, ptr %p3
  %s0 = insertvalue {i32, i32, i32, i32} undef, i32 %v0, 0
  %s1 = insertvalue {i32, i32, i32, i32} %s0, i32 %v1, 1
  %s2 = insertvalue {i32, i32, i32, i32} %s1, i32 %v2, 2
  %s3 = insertvalue {i32, i32, i32, i32} %s2, i32 %v3, 3
  ret {i32, i32, i32, i32} %s3
}

define {float, float, float, float} @emu_mma_common(i32 %a0, i32 %a1, i32 %a2, i32 %a3, i32 %b0, i32 %b1,
                                                   float %c0, float %c1, float %c2, float %c3, i32 %bf16) {
  %a = alloca [4 x i32], align 16
  %b = alloca [2 x i32], align 16
  %c = alloca [4 x float], align 16
  %d = alloca [4 x float], align 16
  store i32 %a0, ptr %a
  %pa1 = getelementptr i32, ptr %a, i32 1
  store i32 %a1, ptr %pa1
  %pa2 = getelementptr i32, ptr %a, i32 2
  store i32 %a2, ptr %pa2
  %pa3 = getelementptr i32, ptr %a, i32 3
  store i32 %a3, ptr %pa3
  store i32 %b0, ptr %b
  %pb1 = getelementptr i32, ptr %b, i32 1
  store i32 %b1, ptr %pb1
  store float %c0, ptr %c
  %pc1 = getelementptr float, ptr %c, i32 1
  store float %c1, ptr %pc1
  %pc2 = getelementptr float, ptr %c, i32 2
  store float %c2, ptr %pc2
  %pc3 = getelementptr float, ptr %c, i32 3
  store float %c3, ptr %pc3
  call void @emu_mma(ptr %a, ptr %b, ptr %c, ptr %d, i32 %bf16)
  %pd1 = getelementptr float, ptr %d, i32 1
  %pd2 = getelementptr float, ptr %d, i32 2
  %pd3 = getelementptr float, ptr %d, i32 3
  %d0 = load float, ptr %d
  %d1 = load float, ptr %pd1
  %d2 = load float, ptr %pd2
  %d3 = load float, ptr %pd3
  %s0 = insertvalue {float, float, float, float} undef, float %d0, 0
  %s1 = insertvalue {float, float, float, float} %s0, float %d1, 1
  %s2 = insertvalue {float, float, float, float} %s1, float %d2, 2
  %s3 = insertvalue {float, float, float, float} %s2, float %d3, 3
  ret {float, float, float, float} %s3
}

define {float, float, float, float} @emu_mma_m16n8k16_row_col_bf16(i32 %a0, i32 %a1, i32 %a2, i32 %a3,
                                                                  i32 %b0, i32 %b1, float %c0, float %c1,
                                                                  float %c2, float %c3) {
  %r = call {float, float, float, float} @emu_mma_common(i32 %a0, i32 %a1, i32 %a2, i32 %a3, i32 %b0, i32 %b1,
                                                         float %c0, float %c1, float %c2, float %c3, i32 1)
  ret {float, float, float, float} %r
}

define {float, float, float, float} @emu_mma_m16n8k16_row_col_f32_f32(<2 x half> %a0, <2 x half> %a1,
      <2 x half> %a2, <2 x half> %a3, <2 x half> %b0, <2 x half> %b1, float %c0, float %c1, float %c2, float %c3) {
  %ia0 = bitcast <2 x half> %a0 to i32
  %ia1 = bitcast <2 x half> %a1 to i32
  %ia2 = bitcast <2 x half> %a2 to i32
  %ia3 = bitcast <2 x half> %a3 to i32
  %ib0 = bitcast <2 x half> %b0 to i32
  %ib1 = bitcast <2 x half> %b1 to i32
  %r = call {float, float, float, float} @emu_mma_common(i32 %ia0, i32 %ia1, i32 %ia2, i32 %ia3, i32 %ib0,
                                                         i32 %ib1, float %c0, float %c1, float %c2, float %c3, i32 0)
  ret {float, float, float, float} %r
}
"""

_SHIMMED = {"emu_ldmatrix_sync_aligned_m8n8_x4_b16", "emu_ldmatrix_sync_aligned_m8n8_x4_trans_b16",
            "emu_mma_m16n8k16_row_col_bf16", "emu_mma_m16n8k16_row_col_f32_f32", "emu_ldv4", "emu_ldv2"}
_DEBUG_LINE = re.compile(r",?\s*!bt\.line !(\d+)")
#: a tensor map passed by value (common.entry.by_value_tensor_maps): on the host, a pointer to its bytes
_BY_VALUE = re.compile(r'\s*byval\(\[\d+ x i8\]\)(?:\s+align \d+)?(?:\s+"nvvm\.grid_constant")?')


def host_ir(llvm_ir: str, symbol: str) -> HostIR:
    """Rewrite the NVPTX LLVM IR of kernel entry ``symbol`` into host IR with an
    ``emu_entry(ptr kernel_params)`` wrapper (``kernel_params`` as ``cuLaunchKernel`` takes them)."""
    lines_of = {int(n): int(v) for n, v in re.findall(r"^!(\d+) = !\{\s*i32 (\d+)\s*\}", llvm_ir, re.MULTILINE)}
    sites: list[Site] = []
    counter = [0]
    shared: dict[str, int] = {}
    dynamic: list[str] = []
    param_types: list[str] | None = None
    declared: dict[str, str] = {}
    shims: dict[str, str] = {}
    out: list[str] = []
    for line in llvm_ir.splitlines():
        if line.startswith("target "):
            continue
        g = _SHARED_GLOBAL.match(line)
        if g:
            if "external" in (g.group("linkage") or ""):
                dynamic.append(g.group("name"))
            else:
                shared[g.group("name")] = type_bytes(g.group("type"))
                line = line.replace("internal ", "", 1).replace("private ", "", 1)
        d = _DEFINE.match(line)
        if d and d.group("sym") == symbol:
            params = line[d.end():d.end() + _close("(" + line[d.end():]) - 1]
            param_types = [p.rsplit("%", 1)[0].strip() if "%" in p else p.strip() for p in _split_top(params)]
            param_types = [TENSOR_MAP if _BY_VALUE.search(t) else re.sub(r"\s*addrspace\(\d+\)", "", t).split(" ")[0]
                           for t in param_types]
            line = _BY_VALUE.sub("", line)
        dbg = _DEBUG_LINE.search(line)
        source_line = lines_of.get(int(dbg.group(1))) if dbg else None
        for piece in _instrument(line, sites, counter, source_line):
            m = _ASM_CALL.search(piece)
            if m:
                ret = m.group("ret")
                args = [f"{t} {v}" for t, v in _ARG.findall(m.group("args"))]
                site = len(sites)
                name, call_args = _asm_replacement(m.group("text"), ret, args, site)
                if name == "emu_barrier":
                    sites.append(Site("barrier", "", "", source_line))
                elif name.startswith(hopper.COLLECTIVES):
                    sites.append(Site("async", "shared", "", source_line))   # a Hopper instruction's site
                definition = hopper.shim(name)
                if definition is not None:
                    shims[name] = definition
                elif name not in _SHIMMED:
                    declared[name] = f"declare {ret} @{name}({', '.join(a.split(' ', 1)[0] for a in call_args)})"
                piece = piece[:m.start()] + f"call {ret} @{name}({', '.join(call_args)})"
            out.append(piece)
    if param_types is None:
        raise EmulationError(f"the LLVM IR has no kernel entry `{symbol}`", code="BT0805")
    text = "\n".join(out)
    text = re.sub(r"\s*addrspace\(\d+\)", "", text)
    text = re.sub(r"define\s+ptx_kernel\s+", "define ", text)
    text = re.sub(r'@"?llvm\.nvvm\.([\w.]+)"?', lambda m: "@emu_" + m.group(1).replace(".", "_"), text)
    text = re.sub(r'@"?__nv_(\w+)"?', r"@emu_nv_\1", text)
    text = re.sub(r"^(declare .*@(\w+)\(.*)$", lambda m: "" if m.group(2) in _SHIMMED else m.group(1),
                  text, flags=re.MULTILINE)
    text = _DEBUG_LINE.sub("", text)
    # kernel_params[k] points at parameter k's value; a tensor map's value is its bytes, passed by address
    loads = "\n".join(f"  %p{k} = getelementptr ptr, ptr %argv, i64 {k}\n  %q{k} = load ptr, ptr %p{k}"
                      + ("" if t == TENSOR_MAP else f"\n  %a{k} = load {t}, ptr %q{k}")
                      for k, t in enumerate(param_types))
    params = ", ".join(f"ptr %q{k}" if t == TENSOR_MAP else f"{t} %a{k}" for k, t in enumerate(param_types))
    entry = f'define void @emu_entry(ptr %argv) {{\n{loads}\n  call void @"{symbol}"({params})\n  ret void\n}}\n'
    text = "\n".join([text, *sorted(declared.values()), "declare void @emu_check_global(i64, i64, i32, i32)",
                      "declare void @emu_check_shared(i64, i64, i32, i32)", _SHIMS,
                      *[d for n, d in hopper.DECLARATIONS.items() if shims and n not in declared], *shims.values(),
                      entry])
    calls = set(re.findall(r"@(emu_\w+)\(", text))
    return HostIR(text, symbol, param_types, sites, shared, dynamic, calls)
