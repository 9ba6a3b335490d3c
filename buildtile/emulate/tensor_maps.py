"""The emulated GPU's ``CUtensorMap``: what ``cuTensorMapEncodeTiled`` returns, for ``hopper.c``.

A real map is 128 opaque bytes only the copy engine reads; the emulator's
are 128 bytes that ``hopper.c`` (``struct tensor_map``) reads: a magic
number, then the global address, the two extents (innermost first), the
row stride in bytes, the box, the element size, the swizzle in bytes and
the data type. :func:`encode` refuses what the driver refuses
(``CUDA_ERROR_INVALID_VALUE``), so a request the hosts should never make
fails here as it would on a GPU.
"""

from __future__ import annotations

import struct

from buildtile.emulate.hostir import EmulationError
from buildtile.interop.abi import TENSOR_MAP_BYTES

#: hopper.c's TENSOR_MAP_MAGIC
MAGIC = 0x50414D5452544542
#: magic, address, dims[2], stride; box[2], element bytes, swizzle bytes, data type, reserved
_LAYOUT = struct.Struct("<QQQQQIIIIII")
#: ``CUtensorMapDataType`` -> element bytes, of the types the emulator copies (cuda.h: 6 f16, 9 bf16)
ELEMENT_BYTES = {6: 2, 9: 2}
#: ``CUtensorMapSwizzle`` -> bytes of the pattern (0: none)
SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128}
#: the driver's limits: box extents, the alignment of addresses and strides, the largest stride
MAX_BOX, ALIGN, MAX_STRIDE = 256, 16, 2**40


def encode(request) -> bytes:
    """The map of ``request`` (a runtime.tensor_maps.TensorMapRequest)."""
    eb = ELEMENT_BYTES.get(request.data_type)
    swizzle = SWIZZLE_BYTES.get(request.swizzle)
    (cols, rows), (stride,), (box_cols, box_rows) = request.dims, request.strides, request.box
    problems = [
        eb is None and f"data type {request.data_type} (the emulator copies f16 and bf16)",
        swizzle is None and f"swizzle {request.swizzle}",
        request.address % ALIGN and f"a base address {request.address:#x} that is not a multiple of {ALIGN}",
        (stride % ALIGN or not 0 < stride < MAX_STRIDE) and f"a row stride of {stride} bytes",
        not (1 <= cols and 1 <= rows) and f"extents {request.dims}",
        not (1 <= box_cols <= MAX_BOX and 1 <= box_rows <= MAX_BOX) and f"a box of {request.box}",
        eb and swizzle and box_cols * eb > swizzle and f"a box row of {box_cols * eb} bytes, wider than its "
                                                        f"{swizzle}-byte swizzle",
        eb and (box_cols * eb) % 16 and f"a box row of {box_cols * (eb or 0)} bytes, not a multiple of 16",
    ]
    problems = [p for p in problems if p]
    if problems:
        raise EmulationError(f"cuTensorMapEncodeTiled refuses {', '.join(problems)}", code="BT0805")
    data = _LAYOUT.pack(MAGIC, request.address, cols, rows, stride, box_cols, box_rows, eb, swizzle,
                        request.data_type, 0)
    return data.ljust(TENSOR_MAP_BYTES, b"\0")


def decode(data: bytes) -> dict:
    """The fields of a map :func:`encode` made (for tests and tools)."""
    magic, address, cols, rows, stride, box_cols, box_rows, eb, swizzle, data_type, _ = _LAYOUT.unpack_from(data)
    if magic != MAGIC:
        raise ValueError("not a tensor map of the CPU emulator")
    return {"address": address, "dims": (cols, rows), "strides": (stride,), "box": (box_cols, box_rows),
            "element_bytes": eb, "swizzle_bytes": swizzle, "data_type": data_type}


__all__ = ["MAGIC", "decode", "encode"]
