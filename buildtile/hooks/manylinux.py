"""The manylinux platform tag a shared library needs, from the glibc symbol versions it links.

This is what ``auditwheel show`` computes for a library that links only
system libraries: the highest ``GLIBC_2.N`` version it needs, rounded up to
the lowest manylinux policy that provides it. The ELF version-needs table is
read here directly rather than through auditwheel's library: a C ABI shim
links libc alone (the CUDA driver is opened with dlopen), so the table is all
there is to look at, and a few dozen lines spare every kernel build a
dependency on auditwheel and pyelftools, whose Python API auditwheel does not
promise to keep. The test suite checks that ``auditwheel show`` agrees.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

__all__ = ["NotSharedLibrary", "platform_tag", "read_dynamic_needs"]

#: the glibc minor versions auditwheel has a manylinux policy for; a library needing a version
#: between two of them gets the next one, as auditwheel gives it (newer ones: the version itself)
POLICY_GLIBC_MINORS = (5, 12, 17, 24, 26, 27, 28, 31, 34, 35, 36, 37, 38, 39, 40, 41)
#: the libraries every manylinux policy lets a wheel link from the system
SYSTEM_LIBRARIES = frozenset({
    "libc.so.6", "libdl.so.2", "libm.so.6", "libpthread.so.0", "librt.so.1", "libgcc_s.so.1",
    "libresolv.so.2", "libanl.so.1", "libnsl.so.1", "libutil.so.1", "libcrypt.so.1",
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
})
#: e_machine of the architectures manylinux names, as wheel tags spell them
ARCHITECTURES = {0x3E: "x86_64", 0xB7: "aarch64", 0x03: "i686", 0x15: "ppc64le", 0x16: "s390x"}

_SHT_DYNSYM_STRTAB = 3
_SHT_DYNAMIC = 6
_SHT_GNU_VERNEED = 0x6FFFFFFE
_DT_NEEDED = 1
_GLIBC = re.compile(r"GLIBC_2\.(\d+)(?:\.\d+)?$")


class NotSharedLibrary(ValueError):
    """The file is not a 64-bit little-endian ELF file of an architecture manylinux names."""


def platform_tag(library: Path | bytes) -> str | None:
    """``manylinux_2_N_<arch>`` for ``library`` (a path, or the file's bytes), or None when no
    manylinux policy covers it (it links a library outside the system set)."""
    data = library if isinstance(library, bytes) else Path(library).read_bytes()
    machine, needed, versions = read_dynamic_needs(data)
    if any(name not in SYSTEM_LIBRARIES for name in needed):
        return None
    minors = [int(m.group(1)) for v in versions if (m := _GLIBC.match(v))]
    need = max(minors, default=0)
    minor = next((p for p in POLICY_GLIBC_MINORS if p >= need), need)
    return f"manylinux_2_{minor}_{ARCHITECTURES[machine]}"


def read_dynamic_needs(data: bytes) -> tuple[int, list[str], set[str]]:
    """``(e_machine, DT_NEEDED names, version names needed)`` of an ELF shared library."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise NotSharedLibrary("not a 64-bit little-endian ELF file")
    machine, = struct.unpack_from("<H", data, 18)
    if machine not in ARCHITECTURES:
        raise NotSharedLibrary(f"ELF machine {machine:#x} has no manylinux tag")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]

    def string(table: int, offset: int) -> str:
        start = sections[table][4] + offset
        return data[start:data.index(b"\0", start)].decode("ascii", "replace")

    needed: list[str] = []
    versions: set[str] = set()
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind == _SHT_DYNAMIC and sections[link][1] == _SHT_DYNSYM_STRTAB:
            for at in range(offset, offset + size, entsize or 16):
                tag, value = struct.unpack_from("<qQ", data, at)
                if tag == _DT_NEEDED:
                    needed.append(string(link, value))
        elif kind == _SHT_GNU_VERNEED:
            entry = offset
            while True:  # Elf64_Verneed, each with a chain of Elf64_Vernaux
                _, count, _, aux, following = struct.unpack_from("<HHIII", data, entry)
                at = entry + aux
                for _ in range(count):
                    _, _, _, name, next_aux = struct.unpack_from("<IHHII", data, at)
                    versions.add(string(link, name))
                    at += next_aux
                if not following:
                    break
                entry += following
    return machine, needed, versions
