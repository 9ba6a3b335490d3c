"""ptxas' "Potential Performance Loss" reports, turned into build errors.

ptxas still links a kernel that it had to slow down, and says so only in
its log: a serialised wgmma pipeline runs a Hopper matmul at a fraction of
its speed, an ignored ``setmaxnreg`` leaves a warp-specialised kernel
without its register split. Both logs (nvJitLink's and standalone
ptxas') are scanned here, by the report's code number: its wording
changes between CUDA releases, its number does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from buildtile.errors import ToolchainError
from buildtile.toolchain.ptxas import INSTALL

_REPORT = re.compile(r"\((C\d{4})\)\s*(Potential Performance Loss[^\n]*)")
_FUNCTION = re.compile(r"in the function '(\w+)'")

SERIALISED, SETMAXNREG, OTHER = "BT0025", "BT0026", "BT0027"

_OUR_BUG = "this is a bug in buildtile's wgmma lowering: please report it with the kernel's source and the target"
#: what to do when the report comes from nvJitLink's relocatable mode, which standalone ptxas avoids
_USE_PTXAS = f"nvJitLink's relocatable linking causes this and standalone ptxas does not: {INSTALL}"


@dataclass(frozen=True)
class Report:
    """What one ptxas code means, as buildtile reports it."""

    bt_code: str
    meaning: str
    fix: str
    fix_under_nvjitlink: str = ""   # when nvJitLink's mode is the cause


#: ptxas' codes; C7509 ... C7516 are its wgmma serialisation reasons, in ptxas' own order
REPORTS: dict[str, Report] = {
    "C7509": Report(SERIALISED, "its wgmma instructions are serialised because the kernel makes a call",
                    "keep calls (non-inlined functions, libdevice routines) out of the kernel", _USE_PTXAS),
    "C7510": Report(SERIALISED, "its wgmma instructions are serialised because a wgmma pipeline crosses a call",
                    "keep calls out of the wgmma pipeline", _USE_PTXAS),
    "C7511": Report(SERIALISED, "its wgmma instructions are serialised: the pipeline needs more registers "
                    "than the kernel may use", "use a smaller tile, or let the kernel have more registers"),
    "C7512": Report(SERIALISED, "its wgmma instructions are serialised: the kernel has too few registers "
                    "for the wgmma pipeline", "use a smaller tile, or let the kernel have more registers"),
    "C7513": Report(SERIALISED, "its wgmma instructions are serialised: other instructions write a wgmma's "
                    "inputs inside the pipeline", _OUR_BUG),
    "C7514": Report(SERIALISED, "its wgmma instructions are serialised: other instructions read a wgmma's "
                    "accumulators inside the pipeline", _OUR_BUG),
    "C7515": Report(SERIALISED, "its wgmma instructions are serialised: other instructions write a wgmma's "
                    "accumulators inside the pipeline", _OUR_BUG),
    "C7516": Report(SERIALISED, "its wgmma instructions are serialised: a pipeline stage is ill-formed "
                    "(a fence, commit or wait out of place)", _OUR_BUG),
    "C7504": Report(SETMAXNREG, "its `setmaxnreg` instructions are ignored (kept only in whole-program mode)",
                    "assemble it with standalone ptxas", _USE_PTXAS),
    "C7508": Report(SETMAXNREG, "its `setmaxnreg` instructions are ignored: ptxas cannot tell how many "
                    "registers the kernel starts with",
                    "the kernel must declare its registers (`.maxnreg`) or blocks per SM (`.minnctapersm`): "
                    "this is a bug in buildtile's lowering, please report it"),
}
_UNKNOWN = Report(OTHER, "ptxas reports a performance loss",
                  "please report it with the kernel's source, the target and the text above")


def report_of(code: str) -> Report:
    return REPORTS.get(code, _UNKNOWN)


def performance_losses(log: str) -> list[tuple[str, str, str | None]]:
    """Every performance-loss report in an assembler's log, once each: (ptxas code, text, function)."""
    out = []
    for m in _REPORT.finditer(log):
        function = _FUNCTION.search(m.group(2))
        item = (m.group(1), m.group(2).strip(), function.group(1) if function else None)
        if item not in out:
            out.append(item)
    return out


def check_log(log: str, *, kernel: str, target: str, assembler: str) -> None:
    """Raise a :class:`ToolchainError` for the first kind of performance loss in ``log`` (``assembler``:
    ``"nvJitLink"`` or ``"ptxas"``), quoting every report of that kind."""
    losses = performance_losses(log)
    if not losses:
        return
    first = report_of(losses[0][0])
    same = [loss for loss in losses if report_of(loss[0]).bt_code == first.bt_code]
    functions = sorted({function for _, _, function in same if function})
    where = f" (in {', '.join(f'`{f}`' for f in functions)})" if functions else ""
    quoted = "\n".join(f"    ({code}) {text}" for code, text, _ in same)
    fix = first.fix_under_nvjitlink if assembler == "nvJitLink" and first.fix_under_nvjitlink else first.fix
    raise ToolchainError(f"kernel `{kernel}` for {target}: {first.meaning}{where}; {assembler} reported:\n{quoted}",
                         code=first.bt_code,
                         help=f"{fix} (a kernel the assembler slowed down is not shipped)")
