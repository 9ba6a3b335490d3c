"""The GPU targets buildtile builds for, and the PTX ISA version each is emitted with.

One table serves the settings reader (which refuses any other target), the
JSON schema of ``[tool.buildtile]`` and the PTX emitter. Each target gets the
lowest PTX ISA version that LLVM accepts for it, so the oldest driver that
knows the target can still JIT the PTX a wheel ships: everything up to
Hopper stays on PTX 8.0 (CUDA 12.0), Blackwell gets the version that
introduced it. The list is what the nvJitLink buildtile depends on (CUDA 13)
links: it no longer assembles for Volta (sm_70, sm_72).
"""

from __future__ import annotations

import re

from buildtile.errors import ToolchainError

#: target -> PTX ISA version (major, minor), oldest architecture first
PTX_ISA: dict[str, tuple[int, int]] = {
    "sm_75": (8, 0),
    "sm_80": (8, 0),
    "sm_86": (8, 0),
    "sm_87": (8, 0),
    "sm_88": (9, 0),
    "sm_89": (8, 0),
    "sm_90": (8, 0),
    "sm_90a": (8, 0),
    "sm_100": (8, 6),
    "sm_100a": (8, 6),
    "sm_103": (8, 8),
    "sm_103a": (8, 8),
    "sm_110": (9, 0),
    "sm_110a": (9, 0),
    "sm_120": (8, 7),
    "sm_120a": (8, 7),
    "sm_121": (8, 8),
    "sm_121a": (8, 8),
}

SUPPORTED_TARGETS: tuple[str, ...] = tuple(PTX_ISA)

#: how a target is spelled: ``sm_``, the architecture number, an optional ``a``
TARGET_SPELLING = re.compile(r"sm_(\d+)(a?)")


def target_arch(target: str) -> tuple[int, bool]:
    """``"sm_90a"`` -> ``(90, True)``; any well-spelt target, supported or not."""
    match = TARGET_SPELLING.fullmatch(target)
    if match is None:
        raise ToolchainError(f"`{target}` is not a GPU target", code="BT0011",
                             help="targets are spelled sm_80, sm_90, sm_90a ...")
    return int(match.group(1)), bool(match.group(2))


def ptx_isa(target: str) -> tuple[int, int]:
    """The PTX ISA version ``target``'s PTX is emitted with."""
    target_arch(target)
    if target not in PTX_ISA:
        raise ToolchainError(f"`{target}` is not a supported GPU target", code="BT0011",
                             help=f"supported targets: {', '.join(SUPPORTED_TARGETS)}")
    return PTX_ISA[target]
