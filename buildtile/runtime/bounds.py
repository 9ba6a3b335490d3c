"""Out-of-range reads of ``checks = "debug"`` builds: recorded on the device, reported here.

A debug build tests every read of an array parameter against the array's
extent. The protocol with the compiled code (see the SIMT backend's
``lower.py``) is one module global and one record:

- each module of a debug build has a u64 global, :data:`BOUNDS_GLOBAL`,
  null by default, which turns reporting off;
- when the module is loaded, :func:`watch_module` points it at a zeroed
  32-byte :data:`RECORD` of the module's own, in pinned host memory mapped
  into the device's address space;
- an out-of-range read claims the record (its flag from 0 to 1, atomically,
  so the first report wins), writes the read's site, index, extent and
  axis there, and reads 0 instead;
- the host looks at the records at its next synchronisation
  (:func:`buildtile.runtime.synchronize`, ``DeviceArray.to_numpy``) and
  before each launch of a debug build (:func:`raise_pending`; the records
  are host memory, so looking does not wait for the GPU), clears a claimed
  record and raises :class:`~buildtile.errors.BoundsError` naming the
  kernel and the source line of the read.

Records are carved from pages of mapped memory, one set of pages per
device context; like the primary contexts they live as long as the
process (or as the driver object that made them, when tests replace it:
records made through another driver are never read). Release builds never
reach this module: nothing is allocated, and their launches do not look
at any record.
"""

from __future__ import annotations

import ctypes
import linecache
import struct
import sys
import threading
from dataclasses import dataclass, field

from buildtile.diagnostics import Diagnostic, Span
from buildtile.errors import BoundsError, BuildtileError, CudaError
from buildtile.interop.manifest import KernelRecord
from buildtile.runtime import driver as _driver_module

#: the module global that holds the record's device address (the compiler's name for it)
BOUNDS_GLOBAL = "__buildtile_bounds"

#: the record the device fills: u32 flag (0 -> 1 claims it), u32 site, i64 index,
#: i64 extent, u32 axis, u32 padding
RECORD = struct.Struct("<IIqqII")
RECORD_SIZE = RECORD.size  # 32

#: bytes of mapped memory allocated at a time, per device context
PAGE_SIZE = 4096


@dataclass(frozen=True)
class BoundsReport:
    """One out-of-range read, as the device recorded it and the manifest places it."""

    kernel: str        # the kernel's name
    module: str        # the Python module that defines it
    param: str         # the array that was read
    file: str          # source file, as the manifest names it
    line: int
    col: int           # 1-based
    text: str          # the read as written, e.g. ``a[i + 1]``
    index: int         # the offending index (negative indices are reported as such)
    extent: int        # the extent of ``axis`` at the time of the launch
    axis: int
    rank: int          # the array's rank: 1 for a slice
    device: int

    def describe(self) -> str:
        """``index 1000 is past the length 1000 of `a```."""
        if self.rank <= 1:
            if self.index < 0:
                return f"index {self.index} is before the start of `{self.param}` (length {self.extent})"
            return f"index {self.index} is past the length {self.extent} of `{self.param}`"
        if self.index < 0:
            return f"index {self.index} on axis {self.axis} is before the start of `{self.param}`"
        return f"index {self.index} is past the extent {self.extent} of axis {self.axis} of `{self.param}`"


@dataclass(eq=False)
class _Watch:
    """The record of one loaded module, and what is needed to explain it."""

    kernel: str
    module: str
    sites: list
    ranks: dict             # parameter name -> rank
    address: int            # host address of the record
    flag: ctypes.c_uint32   # the record's flag, read in place
    context: object         # DeviceContext


@dataclass(eq=False)
class _Page:
    host: int
    device: int
    used: int = 0


@dataclass(eq=False)
class _Records:
    """The records handed out through one driver object."""

    driver: object
    #: only ever appended to, so readers need no lock
    watches: list = field(default_factory=list)
    pages: dict = field(default_factory=dict)   # context handle -> the page records come from


_lock = threading.Lock()
_records = _Records(None)


def watch_module(driver, ctx, module, kernel: KernelRecord) -> bool:
    """Give a freshly loaded module of a debug build a record, and point its global at it.

    ``kernel`` is the kernel's manifest record (with its ``bounds_sites``). A
    kernel that reads no arrays has no sites and no global: nothing to do
    (returns False).
    """
    sites = kernel.bounds_sites
    if not sites:
        return False
    found = driver.module_global(module, BOUNDS_GLOBAL)
    if found is None:
        return False
    address, size = found
    if size != 8:
        raise BuildtileError(
            f"the `{BOUNDS_GLOBAL}` global of kernel `{kernel.name}` is {size} bytes, not 8",
            code="BT0621",
            help="the package was built by another buildtile; rebuild it with this one",
        )
    ranks = {p.name: p.rank for p in kernel.params}
    global _records
    with _lock:
        records = _records
        if records.driver is not driver:  # a new driver: what the old one made is not ours to read
            records = _records = _Records(driver)
        host, device = _claim_record(records, ctx)
        pointer = ctypes.c_uint64(device)
        driver.memcpy_htod(ctx, address, ctypes.addressof(pointer), 8)
        records.watches.append(_Watch(kernel.name, kernel.module, list(sites), ranks, host,
                                      ctypes.c_uint32.from_address(host), ctx))
    return True


def _claim_record(records: _Records, ctx) -> tuple[int, int]:
    """``(host address, device address)`` of a zeroed record in ``ctx`` (called with the lock)."""
    page = records.pages.get(ctx.handle_int)
    if page is None or page.used + RECORD_SIZE > PAGE_SIZE:
        host, device = records.driver.host_alloc_mapped(ctx, PAGE_SIZE)
        page = records.pages[ctx.handle_int] = _Page(host, device)
    offset = page.used
    page.used += RECORD_SIZE
    return page.host + offset, page.device + offset


def raise_pending() -> None:
    """Raise :class:`~buildtile.errors.BoundsError` for the first recorded out-of-range read
    not reported yet; return quietly when there is none. Never waits for the GPU unless a
    record is claimed (then it waits for that record's context, to read it whole)."""
    records = _records
    if records.watches and records.driver is _driver_module.current:
        for watch in records.watches:
            if watch.flag.value:
                _report(records.driver, watch)


def _report(driver, watch: _Watch) -> None:
    cause: CudaError | None = None
    with _lock:
        if not watch.flag.value:  # another thread reported it first
            return
        try:
            # the flag is claimed before the rest is written: let the kernel finish writing
            driver.synchronize(watch.context)
        except CudaError as exc:
            cause = exc
        _flag, site, index, extent, axis, _pad = RECORD.unpack(ctypes.string_at(watch.address, RECORD_SIZE))
        ctypes.memset(watch.address, 0, RECORD_SIZE)
    error = bounds_error(watch, site, index, extent, axis)
    if cause is not None:
        raise error from cause
    raise error


def bounds_error(watch: _Watch, site: int, index: int, extent: int, axis: int) -> BoundsError:
    """The error for one record of ``watch``."""
    if 0 <= site < len(watch.sites):
        entry = watch.sites[site]
        param, file, line, col, text = (entry.get("param", "?"), entry.get("file", "?"), entry.get("line", 0),
                                        entry.get("col", 0), entry.get("text", ""))
    else:  # a record the manifest cannot place: still worth reporting
        param, file, line, col, text = "?", "?", 0, 0, f"read #{site}"
    report = BoundsReport(watch.kernel, watch.module, param, file, line, col, text, index, extent, axis,
                          watch.ranks.get(param, 1), watch.context.device)
    message = (f"out-of-range read in kernel `{report.kernel}` at {file}:{line}:{col}"
               f"{f' (`{text}`)' if text else ''}: {report.describe()}")
    limit = f"len({param})" if report.rank <= 1 else f"{param}.shape[{axis}]"
    help = (f"the read gave 0 and the kernel went on; test the index against `{limit}` before reading, "
            "or launch a grid that matches the data")
    source_line = _source_line(report)
    rendered = None
    if source_line:
        start = max(col - 1, 0)
        end = start + len(text) if text and source_line[start:start + len(text)] == text else None
        span = Span(file, line, start, end, source_line)
        label = f"index {index}, {'length' if report.rank <= 1 else f'axis {axis} extent'} {extent}"
        rendered = Diagnostic("BT0601", message, span, label=label, help=help).render()
    return BoundsError(message, report=report, rendered=rendered, help=help)


def _source_line(report: BoundsReport) -> str:
    """The line of the read, from the kernel's module as imported (empty when unavailable)."""
    module = sys.modules.get(report.module)
    path = getattr(module, "__file__", None) if module is not None else None
    if not path or report.line <= 0:
        return ""
    return linecache.getline(path, report.line).rstrip("\n")
