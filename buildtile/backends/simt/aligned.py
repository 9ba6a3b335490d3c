"""The aligned entry of a SIMT kernel: the same code, its array data pointers declared aligned.

LLVM's NVPTX pipeline merges a thread's consecutive reads (``x[k]`` ..
``x[k + 3]`` with ``k = 4 * i``) into one 128-bit load only when it knows
the pointer is 16-byte aligned, which a kernel parameter never promises. So
a kernel with array parameters gets a second entry whose data pointers carry
LLVM's ``align 16``; the host launches it when every array argument's data
pointer is 16-byte aligned, and the plain entry otherwise (a view such as
``x[1:]``). Where the attribute changes nothing in the PTX, the second entry
is dropped and the kernel ships one image.
"""

from __future__ import annotations

import hashlib
import re

from buildtile.isolation import Returned, run_isolated
from buildtile.toolchain.ptx import llvm_to_ptx

#: the alignment the aligned entry assumes of every array argument's data pointer, in bytes
POINTER_ALIGN = 16
#: the suffix of the aligned entry's symbol (a leading ``_`` never reads as part of a name)
ALIGNED_SUFFIX = f"__a{POINTER_ALIGN}"
#: the target whose PTX decides whether the aligned entry differs from the plain one
_PROBE_TARGET = "sm_80"


def aligned_symbol(symbol: str) -> str:
    """The PTX entry name of ``symbol``'s aligned entry."""
    return symbol + ALIGNED_SUFFIX


def aligned_llvm_ir(llvm_ir: str, symbol: str, array_params: list[str]) -> str:
    """``llvm_ir`` with the entry renamed to its aligned symbol and the data pointer of every
    parameter in ``array_params`` declared ``align 16``."""
    text = llvm_ir.replace(f'@"{symbol}"', f'@"{aligned_symbol(symbol)}"')
    define = re.compile(rf'^define [^\n]*@"{re.escape(aligned_symbol(symbol))}"\([^\n]*$', re.M)
    match = define.search(text)
    if match is None:
        return text
    line = match.group(0)
    for name in array_params:
        line = line.replace(f'noalias %"{name}.data"', f'noalias align {POINTER_ALIGN} %"{name}.data"')
    return text[:match.start()] + line + text[match.end():]


#: a pointer parameter's declared alignment in PTX (``.ptr .global .align 16``), which the
#: attribute always changes and the code does not depend on
_PARAM_ALIGN = re.compile(r"(\.ptr \.global) \.align \d+")


#: this process's answers, by a digest of the question: a process that builds or checks a project
#: again (a development server, a test session) asks each one again, and each costs two compiles
_answers: dict[bytes, bool] = {}


def ptx_differs(plain_ir: str, aligned_ir: str, symbol: str, opt_level: int) -> bool:
    """Whether the aligned entry's PTX is more than the plain entry's under another name and with
    other declared parameter alignments.

    The two compile in a child process, as the build's jobs do: where LLVM aborts on the kernel
    the answer is no, and the plain entry's job reports the crash with the kernel and target."""
    question = hashlib.sha256("\0".join((plain_ir, aligned_ir, symbol, str(opt_level))).encode()).digest()
    if question not in _answers:
        _answers[question] = _compare_ptx(plain_ir, aligned_ir, symbol, opt_level)
    return _answers[question]


def _compare_ptx(plain_ir: str, aligned_ir: str, symbol: str, opt_level: int) -> bool:
    def compare() -> bool:
        plain = llvm_to_ptx(plain_ir, _PROBE_TARGET, opt_level)
        aligned = llvm_to_ptx(aligned_ir, _PROBE_TARGET, opt_level).replace(aligned_symbol(symbol), symbol)
        return _PARAM_ALIGN.sub(r"\1", plain) != _PARAM_ALIGN.sub(r"\1", aligned)

    ((_, outcome),) = run_isolated([compare], 1)
    return isinstance(outcome, Returned) and outcome.value
