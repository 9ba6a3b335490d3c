"""The tensor maps of a TMA entry (manifest ``tma``), encoded at launch and cached.

A TMA entry reads each of its mapped inputs through a ``CUtensorMap`` passed
by value (interop.abi): base address, extents and row stride of the array as
this launch passes it, plus the box and swizzle the kernel was compiled for.
:func:`tma_arguments` checks each array against the copy engine's rules --
a base address and a row stride that are multiples of 16 bytes, unit
innermost stride, extents from 1 to 2^32 -- and returns None for any launch
that breaks one, so the host launches the specialization's plain entry
instead: the same results, without TMA.

Encoding asks the driver (``cuTensorMapEncodeTiled``) and costs a few
microseconds, so maps are kept by everything that decides their bytes
(address, extents, stride, dtype, box, swizzle); a launch over the same
tensors as an earlier one re-encodes nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from buildtile.interop.manifest import TensorMapRecord, TmaEntryRecord

#: the copy engine's alignment of base addresses and strides, in bytes
TMA_ALIGN = 16
#: the largest extent and the largest stride (bytes, exclusive) a tensor map takes
MAX_EXTENT = 2**32
MAX_STRIDE = 2**40
#: ``CUtensorMapDataType`` of each element type a TMA entry maps (cuda.h)
DATA_TYPES = {"f16": 6, "bf16": 9}
#: ``CUtensorMapSwizzle``, by swizzle width in bytes
SWIZZLES = {32: 1, 64: 2, 128: 3}
#: ``CU_TENSOR_MAP_L2_PROMOTION_L2_256B``: each copy pulls whole 256-byte lines into L2
L2_PROMOTION = 3
#: maps kept per process before the oldest are dropped
CACHE_SIZE = 512


@dataclass(frozen=True)
class TensorMapRequest:
    """What ``cuTensorMapEncodeTiled`` is asked for one array (the constant arguments aside:
    rank 2, element strides 1, no interleave, zero fill out of bounds)."""

    data_type: int                     # CUtensorMapDataType
    address: int
    dims: tuple[int, int]              # extents, innermost first
    strides: tuple[int]                # bytes between rows (the outer dimension's stride)
    box: tuple[int, int]               # innermost first
    swizzle: int                       # CUtensorMapSwizzle
    l2_promotion: int = L2_PROMOTION


def request_for(record: TensorMapRecord, view) -> TensorMapRequest | None:
    """The map of ``view`` (an ArrayView of the array ``record`` describes), or None where the
    array breaks a rule of the copy engine."""
    if view.dtype not in DATA_TYPES or len(view.shape) != 2:
        return None
    rows, cols = view.shape
    row_stride, col_stride = view.strides
    pitch = row_stride * view.itemsize
    if col_stride != 1 or view.ptr % TMA_ALIGN or pitch % TMA_ALIGN:
        return None
    if not (1 <= rows <= MAX_EXTENT and 1 <= cols <= MAX_EXTENT and 0 < pitch < MAX_STRIDE):
        return None
    if rows > 1 and row_stride < cols:     # rows that overlap are no tensor the copy engine reads
        return None
    return TensorMapRequest(DATA_TYPES[view.dtype], view.ptr, (cols, rows), (pitch,), record.box,
                            SWIZZLES[record.swizzle])


class TensorMapCache:
    """Encoded maps by request, the most recently used kept (bounded, thread-safe)."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._maps: OrderedDict[TensorMapRequest, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, driver, request: TensorMapRequest) -> bytes:
        with self._lock:
            found = self._maps.get(request)
            if found is not None:
                self._maps.move_to_end(request)
                return found
        encoded = driver.encode_tensor_map(request)
        with self._lock:
            self._maps[request] = encoded
            while len(self._maps) > self.size:
                self._maps.popitem(last=False)
        return encoded

    def clear(self) -> None:
        with self._lock:
            self._maps.clear()


#: the process's maps
CACHE = TensorMapCache()


def tma_arguments(tma: TmaEntryRecord, views: dict[str, object], driver) -> tuple[bytes, ...] | None:
    """The encoded maps of a launch of ``tma`` over ``views`` (array parameter name -> ArrayView),
    in parameter order; None when the driver encodes no maps or an array breaks a rule."""
    if not driver.tensor_maps:
        return None
    requests = []
    for record in tma.maps:
        request = request_for(record, views[record.param])
        if request is None:
            return None
        requests.append(request)
    return tuple(CACHE.get(driver, r) for r in requests)


__all__ = ["CACHE", "TensorMapCache", "TensorMapRequest", "request_for", "tma_arguments"]
