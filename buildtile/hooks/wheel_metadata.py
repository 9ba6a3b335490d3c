"""What buildtile adds to a kernel wheel once scikit-build-core has packed it.

- ``Requires-Dist: buildtile-runtime>=X,<Y``: calling the prebuilt kernels
  needs buildtile's runtime, not its compiler; the range is the runtime
  versions that read this buildtile's manifests and run its kernel modules.
- a ``cmake.prefix`` entry point ``<package> = <package>._buildtile`` for a
  wheel with the C ABI: scikit-build-core puts the folder of every such entry
  point on ``CMAKE_PREFIX_PATH``, where ``cmake/<package>Config.cmake`` is then
  found, so ``find_package(<package> CONFIG)`` needs no ``<package>_DIR``.
- the manylinux tag its shared libraries need (:mod:`buildtile.hooks.manylinux`)
  in place of ``linux_<arch>``, which a package index refuses.

The project's ``pyproject.toml`` is left as it is: the additions go into the
``.dist-info`` scikit-build-core wrote (the metadata folder of
``prepare_metadata_for_build_wheel``, and the wheel, whose ``RECORD`` is
rewritten to match). Entries keep their order and timestamps, so a wheel
stays reproducible.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from pathlib import Path

from buildtile import __version__
from buildtile.hooks.manylinux import NotSharedLibrary, platform_tag
from buildtile.interop.manifest import MANIFEST_DIR

__all__ = [
    "CMAKE_PREFIX_GROUP", "RUNTIME_DISTRIBUTION", "finish_dist_info", "finish_wheel", "names_runtime",
    "runtime_requirement",
]

RUNTIME_DISTRIBUTION = "buildtile-runtime"
#: scikit-build-core's entry point group of CMake prefixes
CMAKE_PREFIX_GROUP = "cmake.prefix"
_LINUX_PLATFORM = re.compile(r"linux_(\w+)$")


def runtime_requirement(version: str = __version__) -> str:
    """The runtime versions ABI-compatible with this buildtile: from its own version up to the
    next minor one while buildtile is 0.x (minors may break), the next major one after."""
    release = [int(part) for part in re.findall(r"\d+", version)[:3]] + [0, 0]
    major, minor = release[0], release[1]
    upper = f"0.{minor + 1}" if major == 0 else f"{major + 1}"
    return f"{RUNTIME_DISTRIBUTION}>={major}.{minor}.{release[2]},<{upper}"


def cmake_prefix_entry(package: str) -> str:
    """The ``entry_points.txt`` line of the package's CMake prefix."""
    return f"{package} = {package}.{MANIFEST_DIR}"


def finish_dist_info(dist_info: Path, package: str, *, c_abi: bool) -> None:
    """Add buildtile's requirement and entry point to a ``.dist-info`` folder on disk."""
    metadata = dist_info / "METADATA"
    metadata.write_bytes(_metadata(metadata.read_bytes()))
    if c_abi:
        entry_points = dist_info / "entry_points.txt"
        text = entry_points.read_bytes() if entry_points.is_file() else b""
        entry_points.write_bytes(_entry_points(text, package))


def finish_wheel(wheel: Path, package: str, *, c_abi: bool, retag: bool = True) -> Path:
    """Rewrite ``wheel`` with buildtile's metadata (and its manylinux tag); returns its new path."""
    with zipfile.ZipFile(wheel) as archive:
        entries = [(info, archive.read(info)) for info in archive.infolist()]
    dist_info = next(info.filename.split("/")[0] for info, _ in entries
                     if info.filename.split("/")[0].endswith(".dist-info"))
    files = {info.filename: data for info, data in entries}
    changed = {f"{dist_info}/METADATA": _metadata(files[f"{dist_info}/METADATA"])}
    if c_abi:
        name = f"{dist_info}/entry_points.txt"
        changed[name] = _entry_points(files.get(name, b""), package)
    tag = wheel.name[:-len(".whl")].split("-")[-3:]
    platform = _manylinux_platform(files, tag[2]) if retag else None
    if platform is not None:
        tag[2] = platform
        changed[f"{dist_info}/WHEEL"] = re.sub(
            rb"^Tag: .*$", f"Tag: {'-'.join(tag)}".encode(), files[f"{dist_info}/WHEEL"], flags=re.M
        )
    record = f"{dist_info}/RECORD"
    order = [info for info, _ in entries]
    names = set(files)
    for added in sorted(set(changed) - names):  # a new entry_points.txt goes beside the others
        info = zipfile.ZipInfo(added, order[0].date_time)
        info.external_attr, info.compress_type = 0o644 << 16, zipfile.ZIP_DEFLATED
        order.insert(next(i for i, old in enumerate(order) if old.filename == record), info)
    files.update(changed)
    files[record] = _record(files, [info.filename for info in order], record)
    target = wheel.with_name("-".join(wheel.name[:-len(".whl")].split("-")[:-3] + tag) + ".whl")
    partial = target.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w") as out:
        for info in order:
            out.writestr(info, files[info.filename])
    wheel.unlink()
    partial.rename(target)
    return target


def _metadata(text: bytes) -> bytes:
    """METADATA with the runtime requirement among the others, unless the project names it."""
    headers, sep, body = text.partition(b"\n\n")
    lines = headers.split(b"\n")
    requirement_lines = [i for i, line in enumerate(lines) if line.startswith(b"Requires-Dist:")]
    if any(names_runtime(lines[i].decode().split(":", 1)[1]) for i in requirement_lines):
        return text
    at = requirement_lines[-1] + 1 if requirement_lines else len(lines)
    lines.insert(at, f"Requires-Dist: {runtime_requirement()}".encode())
    return b"\n".join(lines) + (sep or b"\n") + body


def names_runtime(requirement: str) -> bool:
    """True when a requirement (``name[extras] specifier; marker``) is on buildtile-runtime."""
    name = re.match(r"\s*([A-Za-z0-9._-]+)", requirement)
    return name is not None and re.sub(r"[-_.]+", "-", name.group(1)).lower() == RUNTIME_DISTRIBUTION


def _entry_points(text: bytes, package: str) -> bytes:
    """entry_points.txt with the package's CMake prefix (a project's own entry keeps winning)."""
    section = f"[{CMAKE_PREFIX_GROUP}]".encode()
    line = cmake_prefix_entry(package).encode()
    if section in text.split(b"\n"):
        return text
    prefix = text.rstrip(b"\n") + b"\n\n" if text.strip() else b""
    return prefix + section + b"\n" + line + b"\n"


def _manylinux_platform(files: dict[str, bytes], platform: str) -> str | None:
    """The manylinux platform of a ``linux_<arch>`` wheel whose ELF files all allow one, else None.

    Only shared libraries of a manylinux architecture count: kernel cubins are ELF files too,
    for the GPU. The wheel's tag is the highest any of its libraries needs.
    """
    if not _LINUX_PLATFORM.match(platform):
        return None
    tags = []
    for name, data in files.items():
        if not data.startswith(b"\x7fELF"):
            continue
        try:
            tag = platform_tag(data)
        except NotSharedLibrary:
            continue
        if tag is None:
            return None  # it links a library no manylinux policy allows
        tags.append(tag)
    if not tags:
        return None
    best = max(tags, key=lambda t: int(t.split("_")[2]))
    return best if best.endswith(platform[len("linux"):]) else None


def _record(files: dict[str, bytes], order: list[str], record: str) -> bytes:
    rows = []
    for name in order:
        if name == record:
            rows.append(f"{record},,")
        elif not name.endswith("/"):
            digest = base64.urlsafe_b64encode(hashlib.sha256(files[name]).digest()).rstrip(b"=").decode()
            rows.append(f"{name},sha256={digest},{len(files[name])}")
    return ("\n".join(rows) + "\n").encode()
