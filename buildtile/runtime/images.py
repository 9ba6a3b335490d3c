"""Choosing the image of a kernel that a given device can run, and reading it safely.

Order of preference, as the CUDA toolchain's own loader does it:

1. a cubin built for exactly the device's architecture (``sm_90``, then the
   arch-specific ``sm_90a`` / family ``sm_90f`` variants, which run on
   exactly that architecture);
2. a cubin built for an older minor revision of the same major architecture
   (an ``sm_80`` cubin runs on an ``sm_86`` device), the newest such;
3. the PTX, JIT-compiled by the driver, when the device is at least the PTX's
   target;
4. otherwise :class:`~buildtile.errors.NoImageError` naming what the package
   was built for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from buildtile.errors import NoImageError
from buildtile.interop.manifest import ArtifactRecord, read_artifact

_ARCH = re.compile(r"sm_(\d+)(\d)([af]?)")


@dataclass(frozen=True)
class ImageChoice:
    target: str           # the artifact's target, e.g. "sm_90"
    kind: str             # "cubin" or "ptx"
    path: Path            # absolute
    sha256: str | None

    @property
    def jit(self) -> bool:
        return self.kind == "ptx"

    def describe(self) -> str:
        return f"PTX for {self.target} (JIT-compiled)" if self.jit else f"cubin for {self.target}"


def parse_arch(target: str) -> tuple[int, int, str] | None:
    """``"sm_90a"`` -> ``(9, 0, "a")``; None when the name is not an sm_XY target."""
    match = _ARCH.fullmatch(target)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), match.group(3)


def select_image(kernel: str, artifacts: tuple[ArtifactRecord, ...], artifact_dir: Path,
                 capability: tuple[int, int], package: str = "", device: str = "") -> ImageChoice:
    """The best of ``artifacts`` (the images of the kernel ``kernel``) for a device of ``capability``."""
    major, minor = capability
    cubins: dict[str, ArtifactRecord] = {}
    ptx: tuple[str, ArtifactRecord] | None = None
    for entry in artifacts:
        if entry.kind == "cubin":
            cubins[entry.key] = entry
        elif entry.kind == "ptx":
            ptx = (entry.target, entry)

    def choice(target: str, entry: ArtifactRecord, kind: str) -> ImageChoice:
        return ImageChoice(target, kind, artifact_dir / entry.path, entry.sha256)

    arch = f"sm_{major}{minor}"
    for key in (arch, arch + "a", arch + "f"):
        if key in cubins:
            return choice(key, cubins[key], "cubin")
    compatible = []
    for key, entry in cubins.items():
        parsed = parse_arch(key)
        if parsed and parsed[0] == major and parsed[1] <= minor and not parsed[2]:
            compatible.append((parsed[1], key, entry))
    if compatible:
        _, key, entry = max(compatible)
        return choice(key, entry, "cubin")
    if ptx is not None:
        parsed = parse_arch(ptx[0])
        if parsed and not parsed[2] and (parsed[0], parsed[1]) <= (major, minor):
            return choice(ptx[0], ptx[1], "ptx")

    built = [f"{key} (cubin)" for key in sorted(cubins)]
    if ptx is not None:
        built.append(f"PTX for {ptx[0]}")
    raise NoImageError(
        f"no image of kernel `{kernel}`{f' (package `{package}`)' if package else ''} runs on "
        f"{device or arch}: the package was built for {', '.join(built) if built else 'no target at all'}",
        help=f'rebuild the package with "{arch}" in `targets` under [tool.buildtile], or with `ptx = true` '
             f"and a lowest target no newer than {arch}",
    )


def read_image(choice: ImageChoice, kernel: str) -> bytes:
    """The image's bytes, checked against the manifest's sha256; PTX gets its NUL terminator."""
    data = read_artifact(choice.path, choice.sha256, f"the {choice.describe()} of kernel `{kernel}` at {choice.path}",
                         "the installed package is incomplete or was modified; reinstall it")
    if choice.jit and not data.endswith(b"\0"):
        data += b"\0"  # cuModuleLoadData reads PTX as a C string
    return data
