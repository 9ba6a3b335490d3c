"""Host IR compiled for the CPU (llvmlite's LLJIT) and launched through ``runtime.c``.

:class:`HostKernel` is one kernel entry ready to run: :meth:`HostKernel.launch`
takes a launch configuration and the kernel's flat parameter values (in PTX
parameter order, as a GPU launch packs them), tells the runtime where the
launch's arrays are (from the manifest parameters: pointer, then extents and
strides), runs every block, and raises the first check that failed as a BT
diagnostic naming the kernel, the array and, where known, the source line.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

from buildtile.emulate.hostir import EmulationError, HostIR
from buildtile.interop.abi import DTYPES, SLICE_KINDS, TENSOR_MAP, TENSOR_MAP_BYTES

HERE = Path(__file__).parent

#: the runtime's fault kinds (``enum`` of runtime.c), in order
FAULTS = ("out_of_bounds", "two_writers", "partial_barrier", "uninit_shared", "misaligned", "unretired",
          "overflow", "grid_stall", "deadlock", "async_misuse")
#: BT code of each fault kind
FAULT_CODES = {"out_of_bounds": "BT0800", "two_writers": "BT0801", "partial_barrier": "BT0802",
               "uninit_shared": "BT0803", "misaligned": "BT0804", "unretired": "BT0806", "overflow": "BT0806",
               "grid_stall": "BT0802", "deadlock": "BT0802", "async_misuse": "BT0807"}
#: what each reason of an ``async_misuse`` fault (hopper.c, ``ASYNC_*``) says
ASYNC_MISUSE = {
    1: "an mbarrier operation on shared memory that no mbarrier.init made an mbarrier",
    2: "an mbarrier that got more arrivals than its expected count (or an arrival count outside 1 to 2^20-1)",
    3: "an arrival on an mbarrier whose previous phase no try_wait/test_wait had yet seen complete",
    4: "a bulk tensor copy through something that is not a tensor map the host encoded",
    5: "a warpgroup instruction (wgmma, setmaxnreg) by threads that make no whole warpgroup of 128",
    6: "threads of one warpgroup that issued different wgmma.mma_async operands",
    7: "a wgmma.mma_async with no wgmma.fence since the thread's last wgmma.wait_group",
    8: "a wgmma matrix descriptor whose start address is no shared memory, or with a base offset",
    9: "a write of shared memory that a wgmma not yet retired by wgmma.wait_group reads",
    10: "a setmaxnreg count outside 24 to 256 or not a multiple of 8",
    11: "a setmaxnreg executed by only part of a warpgroup",
    12: "a named barrier with a count that is not a multiple of 32 or differs from its other arrivals'",
    13: "an mbarrier transaction count outside what the PTX ISA allows (2^20 - 1)",
}
#: what an ``unretired`` fault left in flight, by its ``other``
_UNRETIRED = {0: "cp.async copies that no cp.async.wait_group retired",
              1: "wgmma groups that no wgmma.wait_group retired (or wgmmas never committed)",
              2: "bulk tensor copies whose mbarrier no thread waited on"}

#: llvm type -> struct format of a flat kernel parameter
_FORMATS = {"ptr": "Q", "i64": "Q", "i32": "I", "i16": "H", "i8": "B", "i1": "B", "float": "f", "double": "d",
            "half": "H", "bfloat": "H", TENSOR_MAP: f"{TENSOR_MAP_BYTES}s"}

_MASKS = {"Q": 2**64 - 1, "I": 2**32 - 1, "H": 2**16 - 1, "B": 2**8 - 1}

_launch_lock = threading.Lock()   # the runtime has one machine: one launch at a time


class _Fault(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in ("set", "site", "address", "size", "thread", "block", "other")]


@lru_cache(maxsize=1)
def runtime_library() -> ctypes.CDLL:
    """``runtime.c`` compiled once per machine (cached by its text) and loaded."""
    source = (HERE / "runtime.c").read_bytes() + (HERE / "hopper.c").read_bytes()   # runtime.c includes hopper.c
    cache = Path(os.environ.get("BUILDTILE_EMULATOR_CACHE", tempfile.gettempdir()))
    out = cache / f"buildtile_emulator_{hashlib.sha256(source).hexdigest()[:16]}.so"
    if not out.exists():
        compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if compiler is None:
            raise EmulationError("the CPU emulator needs a C compiler (cc, gcc or clang) to build its runtime",
                                 code="BT0805", help="install a C compiler, e.g. `apt-get install gcc`")
        cache.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".{os.getpid()}.tmp.so")   # several processes may build it at once
        built = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(tmp), str(HERE / "runtime.c"), "-lm"],
                               check=False, capture_output=True, text=True)
        if built.returncode:
            said = "\n".join(built.stderr.strip().splitlines()[-8:])
            raise EmulationError(f"the CPU emulator's runtime did not compile with {compiler}:\n{said}",
                                 code="BT0805", help="it needs a C compiler and C library with <ucontext.h> "
                                                     "(glibc and macOS have it; musl does not)")
        tmp.replace(out)
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.load_library_permanently(str(out))
    lib = ctypes.CDLL(str(out))
    lib.emu_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 9
    lib.emu_region_add.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    lib.emu_shared_add.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    return lib


class HostKernel:
    """One kernel entry compiled for the host.

    ``name`` is the kernel's name for messages, ``params`` its manifest parameters
    (``kind``, ``dtype``, ``rank``, ``name``), ``per_tile`` whether the owner of an
    output element is a block (Tile kernels) rather than a thread (SIMT).
    """

    def __init__(self, host: HostIR, name: str, params: list[dict], *, per_tile: bool,
                 source_file: str | None = None) -> None:
        import llvmlite.binding as llvm

        self.host = host
        self.name = name
        self.params = params
        self.per_tile = per_tile
        self.source_file = source_file
        self.runtime = lib = runtime_library()
        defined = _defined(host.text)
        missing = sorted(n for n in host.runtime_calls if not hasattr(lib, n) and f"@{n}(" not in defined)
        if missing:
            raise EmulationError(
                f"kernel `{name}` uses what the CPU emulator does not model: {', '.join(missing)}",
                code="BT0805", help="run this kernel on a GPU, or extend buildtile/emulate/runtime.c")
        self.jit = llvm.create_lljit_compiler()
        builder = llvm.JITLibraryBuilder().add_ir(host.text).add_current_process().export_symbol("emu_entry")
        for shared in host.shared_globals:
            builder.export_symbol(shared)
        smem = ctypes.addressof(ctypes.c_char.in_dll(lib, "emu_smem"))
        for external in host.dynamic_shared:
            builder.import_symbol(external, smem)
        for called in sorted(host.runtime_calls):
            if hasattr(lib, called) and f"@{called}(" not in defined:
                builder.import_symbol(called, ctypes.cast(getattr(lib, called), ctypes.c_void_p).value)
        self.library = builder.link(self.jit, f"emu_{host.symbol}")
        self.entry = self.library["emu_entry"]
        self.shared = {name: (self.library[name], size) for name, size in host.shared_globals.items()}
        self.formats = [_FORMATS[t] for t in host.param_types]

    def launch(self, grid: tuple[int, int, int], block: tuple[int, int, int], dynamic_shared: int,
               values: list, cooperative: bool = False) -> None:
        """Run every block of the launch over the flat parameter ``values`` (arrays in place);
        ``cooperative``: every block at once, as ``cuLaunchCooperativeKernel`` (``simt.grid_sync``)."""
        if len(values) != len(self.formats):
            raise EmulationError(f"kernel `{self.name}` takes {len(self.formats)} flat parameters, "
                                 f"got {len(values)}", code="BT0805")
        cells = [ctypes.create_string_buffer(_packed(f, v), max(8, struct.calcsize(f)))
                 for f, v in zip(self.formats, values)]
        argv = (ctypes.c_void_p * max(1, len(cells)))(*[ctypes.addressof(c) for c in cells])
        lib = self.runtime
        with _launch_lock:
            ctypes.c_int.in_dll(lib, "emu_track_writers").value = 2 if self.per_tile else 1
            lib.emu_regions_clear()
            regions = self._regions(values)
            for lo, hi, _ in regions:
                lib.emu_region_add(lo, hi)
            shared = [("dynamic shared memory", ctypes.addressof(ctypes.c_char.in_dll(lib, "emu_smem")),
                       dynamic_shared)] if self.host.dynamic_shared and dynamic_shared else []
            shared += [(name.rpartition("__shared_")[2], address, size) for name, (address, size) in self.shared.items()]
            for _, address, size in shared:
                lib.emu_shared_add(address, address + size)
            rc = lib.emu_launch(self.entry, ctypes.addressof(argv), *grid, *block, dynamic_shared,
                                int(self.host.threaded), int(cooperative))
            faults = (_Fault * len(FAULTS)).in_dll(lib, "emu_faults")
            raised = [(kind, faults[k].site, faults[k].address, faults[k].size, faults[k].thread, faults[k].block,
                       faults[k].other) for k, kind in enumerate(FAULTS) if faults[k].set]
            lib.emu_regions_clear()
        if rc != 0:
            what = f"a cooperative grid {grid} of " if cooperative else ""
            raise EmulationError(f"the CPU emulator cannot launch kernel `{self.name}` with {what}block {block} "
                                 f"and {dynamic_shared} bytes of dynamic shared memory", code="BT0805")
        if raised:
            raise self._fault_error(raised[0], regions, shared, block)

    def _regions(self, values: list) -> list[tuple[int, int, str]]:
        """(lo, hi, parameter name) of every array argument, from the flat values."""
        regions, k = [], 0
        for p in self.params:
            kind = p["kind"]
            if kind == "scalar":
                k += 1
                continue
            # a record's element size travels with its parameter (see direct.SimtKernel)
            itemsize = DTYPES[p["dtype"]][0] if p["dtype"] in DTYPES else p["record_size"]
            ptr = values[k]
            if kind in SLICE_KINDS:
                extent = values[k + 1]
                lo, hi = ptr, ptr + extent * itemsize
                k += 2
            else:
                rank = p["rank"]
                shape, strides = values[k + 1:k + 1 + rank], values[k + 1 + rank:k + 1 + 2 * rank]
                k += 1 + 2 * rank
                if 0 in shape:
                    lo = hi = ptr
                else:
                    low = sum(s * (n - 1) for n, s in zip(shape, strides) if s < 0)
                    high = sum(s * (n - 1) for n, s in zip(shape, strides) if s > 0)
                    lo, hi = ptr + low * itemsize, ptr + (high + 1) * itemsize
            regions.append((lo, hi, p["name"]))
        return regions

    def _fault_error(self, fault, regions, shared, block) -> EmulationError:
        kind, site, address, size, thread, blk, other = fault
        where = self._where(site)
        who = (f"block {blk}" if self.per_tile else f"thread {thread} of block {blk}")
        code = FAULT_CODES[kind]
        info = self.host.sites[site] if 0 <= site < len(self.host.sites) else None
        access = f"{info.what} of {size} bytes" if info else f"access of {size} bytes"
        if kind == "out_of_bounds":
            if other == -2:
                text = f"out-of-bounds shared memory {access} at {address:#x}: outside every shared variable"
            elif other >= 0:
                lo, hi, name = regions[other]
                offset = address - lo
                text = (f"out-of-bounds {access} of `{name}` at byte {offset} "
                        f"({'before its start' if offset < 0 else f'past its end, {hi - lo} bytes'})")
            else:
                text = f"out-of-bounds {access} at {address:#x}: the launch has no arrays there"
            return EmulationError(f"{text}, by {who} of kernel `{self.name}`{where}", code=code,
                                  help="guard the access with the array's length (`if i < len(a):`)")
        if kind == "two_writers":
            name = next((n for lo, hi, n in regions if lo <= address < hi), "?")
            lo = next((lo for lo, hi, n in regions if lo <= address < hi), address)
            first = f"block {other}" if self.per_tile else (
                f"thread {other % _threads(block)} of block {other // _threads(block)}")
            return EmulationError(
                f"two writers of one element: {who} wrote byte {address - lo} of `{name}`, which {first} "
                f"had written, in kernel `{self.name}`{where}", code=code,
                help="each element of an output has one owner: index it with the writer's own index")
        if kind == "partial_barrier":
            return EmulationError(
                f"a barrier reached by part of the block: {other} thread(s) of block {blk} had returned when "
                f"the others met at a barrier or warp collective in kernel `{self.name}`{where}", code=code,
                help="every thread of the block must reach each `syncthreads()`: do not return before it")
        if kind == "uninit_shared":
            name = shared[other][0] if 0 <= other < len(shared) else "shared memory"
            return EmulationError(
                f"read of uninitialised shared memory: {who} read {size} bytes of `{name}` that no thread "
                f"of the block had written, in kernel `{self.name}`{where}", code=code,
                help="write shared memory before reading it, with a `syncthreads()` between")
        if kind == "misaligned":
            return EmulationError(
                f"misaligned {access} at {address:#x} (a multiple of {size} is needed) by {who} of kernel "
                f"`{self.name}`{where}", code=code, help="a vector access needs its own size's alignment")
        if kind == "deadlock" and size == 8:   # an mbarrier phase (hopper.c): address holds its counts
            pending, tx = address >> 32, address & 0xFFFFFFFF
            tx = tx - (1 << 32) if tx >= 1 << 31 else tx
            return EmulationError(
                f"threads that wait for each other forever: {who} waits on an mbarrier phase that never completes "
                f"({pending} arrival(s) and {tx} transaction byte(s) still pending; {other} thread(s) of its block "
                f"wait elsewhere) in kernel `{self.name}`{where}", code=code,
                help="a try_wait.parity must name the parity of the phase it waits for, and every phase needs its "
                     "expected arrivals and exactly the bytes expect_tx announced; on a GPU this launch hangs")
        if kind == "async_misuse":
            return EmulationError(
                f"{ASYNC_MISUSE.get(other, 'a misused asynchronous instruction')}, by {who} of kernel "
                f"`{self.name}`{where}", code=code,
                help="the PTX ISA leaves this undefined: on a GPU it hangs, faults or computes garbage")
        if kind == "deadlock":
            return EmulationError(
                f"threads that wait for each other forever: {who} waits at a barrier or warp collective that "
                f"{other} thread(s) of its block, waiting elsewhere, never reach, in kernel `{self.name}`{where}",
                code=code, help="every thread of a block (every lane a warp collective's `mask` names, for "
                                "one) must reach the same barriers in the same order; on a GPU this launch hangs")
        if kind == "grid_stall":
            return EmulationError(
                f"a grid-wide wait no block can end: every block of kernel `{self.name}` that had not returned "
                f"waited for the others (block {blk} first found it), so on a GPU the launch would hang",
                code=code, help="every thread of every block must reach each `simt.grid_sync()`: "
                                "do not return before it")
        if kind == "unretired":
            return EmulationError(f"kernel `{self.name}` left {_UNRETIRED.get(other, 'asynchronous work')} "
                                  f"in flight{where}", code=code)
        return EmulationError(f"kernel `{self.name}` kept more asynchronous operations (cp.async copies, wgmma "
                              f"reads, mbarriers, bulk copies) in flight than the emulator tracks{where}", code=code)

    def _where(self, site: int) -> str:
        if not 0 <= site < len(self.host.sites):
            return ""
        line = self.host.sites[site].line
        if line is None:
            return ""
        return f" at {self.source_file}:{line}" if self.source_file else f" at line {line}"


def _packed(fmt: str, value) -> bytes:
    """One flat parameter's bytes (a tensor map is its bytes already)."""
    if fmt.endswith("s"):
        return struct.pack("<" + fmt, bytes(value))
    return struct.pack("<" + fmt, value if fmt in "fd" else int(value) & _MASKS[fmt])


def _threads(block) -> int:
    return block[0] * block[1] * block[2]


def _defined(text: str) -> str:
    """The ``define`` lines of ``text`` (functions the IR itself provides)."""
    return "\n".join(line for line in text.splitlines() if line.startswith("define"))
