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

An image the device could run but whose PTX ISA is newer than the driver
knows (its ``min_driver``) is passed over; when that leaves none, the
NoImageError names the driver the device has and the one the images need,
before anything is handed to the driver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from buildtile.errors import NoImageError
from buildtile.interop.driver_compat import describe_driver
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
                 capability: tuple[int, int], package: str = "", device: str = "",
                 driver_version: int | None = None) -> ImageChoice:
    """The best of ``artifacts`` (the images of the kernel ``kernel``) for a device of ``capability``
    whose driver is ``driver_version`` (``cuDriverGetVersion``'s number; None: not checked)."""
    major, minor = capability
    arch = f"sm_{major}{minor}"
    runnable = _runnable(artifacts, major, minor)
    for entry in runnable:
        if driver_version is None or entry.min_driver is None or entry.min_driver <= driver_version:
            kind = "ptx" if entry.kind == "ptx" else "cubin"
            return ImageChoice(entry.target if kind == "ptx" else entry.key, kind, artifact_dir / entry.path,
                               entry.sha256)
    built = _built_for(artifacts)
    of = f"kernel `{kernel}`{f' (package `{package}`)' if package else ''}"
    if runnable:
        assert driver_version is not None
        needed = describe_driver(min(e.min_driver for e in runnable if e.min_driver is not None))
        could_run = ", ".join(_describe(e) for e in runnable)
        raise NoImageError(
            f"no image of {of} loads with the CUDA driver of {device or arch}: the driver is "
            f"{describe_driver(driver_version)}, and the images this device could run ({could_run}) need "
            f"{needed} or newer" + (f"; the package was built for {built}" if built != could_run else ""),
            help=f"update the NVIDIA driver to {needed} or newer",
        )
    raise NoImageError(
        f"no image of {of} runs on {device or arch}: the package was built for {built}",
        help=f'rebuild the package with "{arch}" in `targets` under [tool.buildtile], or with `ptx = true` '
             f"and a lowest target no newer than {arch}",
    )


def runs_on(artifacts: tuple[ArtifactRecord, ...], capability: tuple[int, int]) -> bool:
    """Whether a device of ``capability`` runs some image of ``artifacts`` (the driver's version aside:
    :func:`select_image` still checks it when the image is loaded)."""
    return bool(_runnable(artifacts, *capability))


def _runnable(artifacts: tuple[ArtifactRecord, ...], major: int, minor: int) -> list[ArtifactRecord]:
    """The images a device of compute capability ``major.minor`` can run, best first."""
    cubins = {entry.key: entry for entry in artifacts if entry.kind == "cubin"}
    ptx = [entry for entry in artifacts if entry.kind == "ptx"]
    arch = f"sm_{major}{minor}"
    order = [cubins[key] for key in (arch, arch + "a", arch + "f") if key in cubins]
    compatible = []
    for key, entry in cubins.items():
        parsed = parse_arch(key)
        if parsed and parsed[0] == major and parsed[1] < minor and not parsed[2]:
            compatible.append((parsed[1], key, entry))
    order += [entry for _, _, entry in sorted(compatible, reverse=True)]
    for entry in ptx[-1:]:
        parsed = parse_arch(entry.target)
        if parsed and not parsed[2] and (parsed[0], parsed[1]) <= (major, minor):
            order.append(entry)
    return order


def _describe(entry: ArtifactRecord) -> str:
    return f"PTX for {entry.target}" if entry.kind == "ptx" else f"{entry.key} (cubin)"


def _built_for(artifacts: tuple[ArtifactRecord, ...]) -> str:
    built = [f"{e.key} (cubin)" for e in sorted(artifacts, key=lambda e: e.key) if e.kind == "cubin"]
    built += [f"PTX for {e.target}" for e in artifacts if e.kind == "ptx"][-1:]
    return ", ".join(built) if built else "no target at all"


def read_image(choice: ImageChoice, kernel: str) -> bytes:
    """The image's bytes, checked against the manifest's sha256; PTX gets its NUL terminator."""
    data = read_artifact(choice.path, choice.sha256, f"the {choice.describe()} of kernel `{kernel}` at {choice.path}",
                         "the installed package is incomplete or was modified; reinstall it")
    if choice.jit and not data.endswith(b"\0"):
        data += b"\0"  # cuModuleLoadData reads PTX as a C string
    return data
