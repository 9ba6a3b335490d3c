"""The inline PTX of Hopper (sm_90a) TMA entries as calls of the runtime (``hopper.c``).

:func:`replacement` maps one piece of inline PTX -- mbarriers, bulk tensor
copies, ``wgmma``, ``setmaxnreg``, named barriers, the async fences -- to the
runtime function standing in for it and that function's arguments (each
PTX operand ``$k`` is the call argument it names; immediates become
constants; every call gets its *site* last, for reports). The text is
parsed by the instruction's syntax (PTX ISA), not matched against one
lowering's exact strings, so other kernels' spellings of the same
instructions lower too.

``wgmma`` instructions return their accumulators as a struct (their
registers are tied operands): :func:`shim` writes the small IR function
that passes them to C through memory and back.
"""

from __future__ import annotations

import re

#: runtime functions whose kernels' threads must wait for each other (hostir.COLLECTIVES)
COLLECTIVES = ("emu_mbarrier", "emu_tma", "emu_wgmma", "emu_setmaxnreg", "emu_bar_")

_OPERAND = r"(\$\d+|-?\d+|0x[0-9a-fA-F]+)"
_STATE_SPACE = r"(?:\.shared(?:::cta)?)?"
_SEM = r"(?:\.(?:release|acquire|relaxed))?(?:\.(?:cta|cluster))?"
_INIT = re.compile(rf"mbarrier\.init{_STATE_SPACE}\.b64 \[(\$\d+)\], {_OPERAND};")
_ARRIVE_TX = re.compile(rf"mbarrier\.arrive\.expect_tx{_SEM}{_STATE_SPACE}\.b64 (_|\$\d+), \[(\$\d+)\], {_OPERAND};")
_ARRIVE = re.compile(rf"mbarrier\.arrive{_SEM}{_STATE_SPACE}\.b64 (_|\$\d+), \[(\$\d+)\](?:, {_OPERAND})?;")
_EXPECT_TX = re.compile(rf"mbarrier\.expect_tx{_SEM}{_STATE_SPACE}\.b64 \[(\$\d+)\], {_OPERAND};")
#: a parity wait whose predicate becomes the asm's 32-bit result (selp), or is the result itself
_WAIT = re.compile(rf"mbarrier\.(?:try|test)_wait\.parity{_SEM}{_STATE_SPACE}\.b64 (\w+), \[(\$\d+)\], {_OPERAND}"
                   rf"(?:, {_OPERAND})?;")
_SELP = re.compile(r"selp\.[us]32 \$0, 1, 0, (\w+);")
_TMA = re.compile(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global(?:\.tile)?\.mbarrier::complete_tx::bytes "
                  rf"\[(\$\d+)\], \[(\$\d+), \{{{_OPERAND}, {_OPERAND}\}}\], \[(\$\d+)\];")
_MMA = re.compile(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.(f16|bf16)\.\2 \{[^}]*\}, (\$\d+), (\$\d+), "
                  r"(\w+|\$\d+), (-?1), (-?1), ([01]), ([01]);")
_SETP = re.compile(r"setp\.ne\.b32 (\w+), (\$\d+), 0;")
_WAIT_GROUP = re.compile(r"wgmma\.wait_group\.sync\.aligned (\d+);")
_MAXNREG = re.compile(r"setmaxnreg\.(?:inc|dec)\.sync\.aligned\.u32 (\d+);")
_BAR = re.compile(rf"(?:bar|barrier)\.(sync|arrive)(?:\.aligned)? {_OPERAND}(?:, {_OPERAND})?;")
_FENCES = ("fence.mbarrier_init.release.cluster;", "fence.proxy.async;", "fence.proxy.async.shared::cta;",
           "fence.proxy.async.global;")

_BF16, _NEG_A, _NEG_B, _TRANS_A, _TRANS_B = 1, 2, 4, 8, 16   # hopper.c's WGMMA_* flags


def _outputs(ret: str) -> int:
    """How many ``$k`` the asm's results take: none, one, or one per struct member."""
    if ret == "void":
        return 0
    if ret.startswith("{"):
        return ret.count(",") + 1
    return 1


def replacement(text: str, ret: str, args: list[str], site: int) -> tuple[str, list[str]] | None:
    """(runtime function, its arguments) standing in for the inline PTX ``text`` with results of
    type ``ret`` and operands ``args`` (``"type value"``), or None when it is no Hopper instruction."""
    n_out = _outputs(ret)

    def operand(token: str, typ: str = "i32") -> str:
        if token.startswith("$"):
            return args[int(token[1:]) - n_out]
        return f"{typ} {int(token, 0)}"

    here = f"i32 {site}"
    body = " ".join(text.strip().strip("{}").split())
    if body in _FENCES:
        return "emu_fence_async", []
    if m := _INIT.search(body):
        return "emu_mbarrier_init", [operand(m.group(1)), operand(m.group(2)), here]
    if m := _ARRIVE_TX.search(body):
        return "emu_mbarrier_arrive_expect_tx", [operand(m.group(2)), operand(m.group(3)), here]
    if m := _ARRIVE.search(body):
        return "emu_mbarrier_arrive", [operand(m.group(2)), operand(m.group(3) or "1"), here]
    if m := _EXPECT_TX.search(body):
        return "emu_mbarrier_expect_tx", [operand(m.group(1)), operand(m.group(2)), here]
    if m := _WAIT.search(body):
        selp = _SELP.search(body)
        if selp is None or selp.group(1) != m.group(1):
            return None
        return "emu_mbarrier_wait_parity", [operand(m.group(2)), operand(m.group(3)), here]
    if m := _TMA.search(body):
        return "emu_tma_load_2d", [operand(m.group(1)), operand(m.group(2), "i64"), operand(m.group(3)),
                                   operand(m.group(4)), operand(m.group(5)), here]
    if body == "wgmma.fence.sync.aligned;":
        return (f"emu_wgmma_fence_x{n_out}", [here, *args]) if n_out else ("emu_wgmma_fence", [here])
    if body == "wgmma.commit_group.sync.aligned;":
        return "emu_wgmma_commit", [here]
    if m := _WAIT_GROUP.search(body):
        if not n_out:
            return "emu_wgmma_wait", [f"i32 {m.group(1)}", here]
        return f"emu_wgmma_wait_x{n_out}", [f"i32 {m.group(1)}", here, *args]
    if m := _MMA.search(body):
        n, kind, a, b, scale_d, scale_a, scale_b, trans_a, trans_b = m.groups()
        if not scale_d.startswith("$"):   # a predicate: set from an operand by setp.ne
            setp = next((s for s in _SETP.finditer(body) if s.group(1) == scale_d), None)
            if setp is None:
                return None
            scale_d = setp.group(2)
        flags = (_BF16 if kind == "bf16" else 0) | (_NEG_A if scale_a == "-1" else 0) \
            | (_NEG_B if scale_b == "-1" else 0) | (_TRANS_A if trans_a == "1" else 0) \
            | (_TRANS_B if trans_b == "1" else 0)
        accumulators = args[len(args) - n_out:]
        return f"emu_wgmma_mma_n{n}_f{flags}", [operand(a, "i64"), operand(b, "i64"), operand(scale_d), here,
                                                 *accumulators]
    if m := _MAXNREG.search(body):
        return "emu_setmaxnreg", [f"i32 {int(m.group(1))}", here]
    if m := _BAR.search(body):
        if m.group(1) == "arrive" and m.group(3) is None:
            return None   # bar.arrive needs its count (PTX ISA)
        return f"emu_bar_{m.group(1)}", [operand(m.group(2)), operand(m.group(3)) if m.group(3) else "i32 -1", here]
    return None


def shim(name: str) -> str | None:
    """The IR definition of ``name`` when it is a struct-returning stand-in (the wgmma forms), else None."""
    if m := re.fullmatch(r"emu_wgmma_(fence|wait)_x(\d+)", name):
        count = int(m.group(2))
        lead = ["i32 %site"] if m.group(1) == "fence" else ["i32 %pending", "i32 %site"]
        call = ("call void @emu_wgmma_fence(i32 %site)" if m.group(1) == "fence"
                else "call void @emu_wgmma_wait(i32 %pending, i32 %site)")
        return _struct_shim(name, lead, count, [call], through_memory=False)
    if m := re.fullmatch(r"emu_wgmma_mma_n(\d+)_f(\d+)", name):
        n, flags = int(m.group(1)), int(m.group(2))
        call = (f"call void @emu_wgmma_mma(ptr %acc, i32 {n}, i64 %a, i64 %b, i32 %scale_d, i32 {flags}, "
                "i32 %site)")
        return _struct_shim(name, ["i64 %a", "i64 %b", "i32 %scale_d", "i32 %site"], n // 2, [call],
                            through_memory=True)
    return None


#: what the shims call
DECLARATIONS = {"emu_wgmma_fence": "declare void @emu_wgmma_fence(i32)",
                "emu_wgmma_wait": "declare void @emu_wgmma_wait(i32, i32)",
                "emu_wgmma_mma": "declare void @emu_wgmma_mma(ptr, i32, i64, i64, i32, i32, i32)"}


def _struct_shim(name: str, lead: list[str], count: int, calls: list[str], *, through_memory: bool) -> str:
    """``name(lead..., float x count) -> {float x count}``: ``calls``, then the floats back (through
    an array ``%acc`` the calls may rewrite, with ``through_memory``)."""
    struct = "{" + ", ".join(["float"] * count) + "}"
    params = ", ".join(lead + [f"float %r{k}" for k in range(count)])
    lines = [f"define {struct} @{name}({params}) {{"]
    if through_memory:
        lines.append(f"  %acc = alloca [{count} x float], align 16")
        lines += [f"  %p{k} = getelementptr float, ptr %acc, i32 {k}\n  store float %r{k}, ptr %p{k}"
                  for k in range(count)]
    lines += [f"  {c}" for c in calls]
    previous = "undef"
    for k in range(count):
        value = f"%r{k}"
        if through_memory:
            lines.append(f"  %v{k} = load float, ptr %p{k}")
            value = f"%v{k}"
        lines.append(f"  %s{k} = insertvalue {struct} {previous}, float {value}, {k}")
        previous = f"%s{k}"
    lines += [f"  ret {struct} {previous}", "}"]
    return "\n".join(lines)


__all__ = ["COLLECTIVES", "DECLARATIONS", "replacement", "shim"]
