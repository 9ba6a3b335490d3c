"""Element types as the runtime sees them: names, foreign spellings, scalar packing.

Every producer spells element types its own way (a NumPy typestr in the CUDA
array interface, a ``(code, bits, lanes)`` triple in DLPack, ``torch.float32``
in PyTorch). This module maps all of them onto the ABI's dtype names
(``f32``, ``i64`` ...; see :data:`buildtile.interop.abi.DTYPES`) and, for
types the ABI does not know, onto a readable name for error messages, so
that "got int8 array" reads the same whatever the producer was.
"""

from __future__ import annotations

import math
import struct
import sys

from buildtile.interop.abi import DL_BFLOAT, DL_BOOL, DL_COMPLEX, DL_FLOAT, DL_INT, DL_UINT, DTYPES

#: ABI dtype name -> element size in bytes
ITEMSIZE = {name: spec[0] for name, spec in DTYPES.items()}

#: ABI dtype name -> the name users know from NumPy/PyTorch (for messages)
DISPLAY_NAMES = {
    "bool": "bool",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "f16": "float16",
    "bf16": "bfloat16",
    "f32": "float32",
    "f64": "float64",
    "complex64": "complex64",
    "complex128": "complex128",
}

_NATIVE_ORDER = "<" if sys.byteorder == "little" else ">"

_KIND_NAMES = {"f": "float", "i": "int", "u": "uint", "b": "bool", "c": "complex", "V": "void"}

# typestr without byte order -> ABI name. "V2" is how CAI producers (and NumPy
# with ml_dtypes) spell bfloat16; NumPy itself has no bfloat16.
_TYPESTR_TO_NAME = {
    "b1": "bool",
    "i1": "i8",
    "i2": "i16",
    "i4": "i32",
    "i8": "i64",
    "u1": "u8",
    "u2": "u16",
    "u4": "u32",
    "u8": "u64",
    "f2": "f16",
    "f4": "f32",
    "f8": "f64",
    "V2": "bf16",
    "c8": "complex64",
    "c16": "complex128",
}

#: ABI dtype name -> its NumPy typestr in this machine's byte order (bf16: two opaque bytes, "V2")
TYPESTR_OF_NAME = {name: ("|" if ts[1:] == "1" or ts[0] in "bV" else _NATIVE_ORDER) + ts
                   for ts, name in _TYPESTR_TO_NAME.items()}

_DLPACK_TO_NAME = {
    (DL_BOOL, 8): "bool",
    (DL_INT, 8): "i8",
    (DL_INT, 16): "i16",
    (DL_INT, 32): "i32",
    (DL_INT, 64): "i64",
    (DL_UINT, 8): "u8",
    (DL_UINT, 16): "u16",
    (DL_UINT, 32): "u32",
    (DL_UINT, 64): "u64",
    (DL_FLOAT, 16): "f16",
    (DL_FLOAT, 32): "f32",
    (DL_FLOAT, 64): "f64",
    (DL_BFLOAT, 16): "bf16",
    (DL_COMPLEX, 64): "complex64",
    (DL_COMPLEX, 128): "complex128",
}
#: ABI dtype name -> DLPack ``(type code, bits)``
DLPACK_OF_NAME = {name: code_bits for code_bits, name in _DLPACK_TO_NAME.items()}
_DLPACK_CODE_NAMES = {DL_INT: "int", DL_UINT: "uint", DL_FLOAT: "float", DL_BFLOAT: "bfloat", DL_BOOL: "bool",
                      DL_COMPLEX: "complex"}


def display_name(dtype: str) -> str:
    """What a dtype is called in messages: ``f32`` -> ``float32``; foreign names pass through."""
    return DISPLAY_NAMES.get(dtype, dtype)


def from_typestr(typestr: str) -> tuple[str, int]:
    """Map a NumPy typestr (``"<f4"``) to ``(dtype name, itemsize)``.

    Types outside the ABI come back with a readable name (``"int8"``,
    ``"big-endian float32"``) that never matches a parameter's dtype.
    """
    if len(typestr) < 3 or typestr[0] not in "<>|=":
        raise ValueError(f"not a typestr: {typestr!r}")
    order, kind, size_text = typestr[0], typestr[1], typestr[2:]
    try:
        size = int(size_text)
    except ValueError:
        raise ValueError(f"not a typestr: {typestr!r}") from None
    if order == "=":
        order = _NATIVE_ORDER
    readable = f"{_KIND_NAMES.get(kind, kind)}{size * 8}" if kind != "b" else "bool"
    if order == ">" and size > 1:
        return f"big-endian {readable}", size
    name = _TYPESTR_TO_NAME.get(kind + size_text)
    return (name if name is not None else readable), size


def from_dlpack(code: int, bits: int, lanes: int) -> tuple[str, int]:
    """Map a DLPack ``DLDataType`` to ``(dtype name, itemsize)``."""
    itemsize = max(1, (bits * lanes + 7) // 8)
    if lanes != 1:
        return f"{_DLPACK_CODE_NAMES.get(code, f'code{code}')}{bits}x{lanes}", itemsize
    name = _DLPACK_TO_NAME.get((code, bits))
    if name is None:
        name = f"{_DLPACK_CODE_NAMES.get(code, f'dlpack type code {code} ')}{bits}"
    return name, itemsize


def from_torch(dtype) -> tuple[str, int]:
    """Map a ``torch.dtype`` to ``(dtype name, itemsize)`` without importing torch."""
    text = str(dtype)
    text = text.removeprefix("torch.")
    name = _TORCH_TO_NAME.get(text, text)
    return name, dtype.itemsize


_TORCH_TO_NAME = {
    "bool": "bool",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "complex64": "complex64",
    "complex128": "complex128",
}


# --------------------------------------------------------------------------- scalars

#: integer dtype -> inclusive range
INT_RANGES = {
    "i8": (-(2**7), 2**7 - 1),
    "i16": (-(2**15), 2**15 - 1),
    "i32": (-(2**31), 2**31 - 1),
    "i64": (-(2**63), 2**63 - 1),
    "u8": (0, 2**8 - 1),
    "u16": (0, 2**16 - 1),
    "u32": (0, 2**32 - 1),
    "u64": (0, 2**64 - 1),
}

#: ABI dtype name -> struct format of the value as the kernel receives it
STRUCT_CODES = {
    "bool": "B",
    "i8": "b",
    "i16": "h",
    "i32": "i",
    "i64": "q",
    "u8": "B",
    "u16": "H",
    "u32": "I",
    "u64": "Q",
    "f16": "H",   # packed as its bit pattern, see scalar_converter
    "bf16": "H",
    "f32": "f",
    "f64": "d",
    "ptr": "Q",
    "tensor_map": "128s",   # a CUtensorMap by value (interop.abi.TENSOR_MAP), as the driver encoded it
}

_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")
_F16 = struct.Struct("<e")
_U16 = struct.Struct("<H")


def _bf16_bits(value: float) -> int:
    """Round a float to bfloat16 (nearest, ties to even) and return its 16 bits."""
    bits = _U32.unpack(_F32.pack(value))[0]
    if math.isnan(value):
        return (bits >> 16) | 0x0040  # keep it a quiet NaN
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def bf16_bits(values):
    """bf16 bit patterns (``uint16``) nearest to ``values`` (rounded to nearest, ties to even;
    a NaN stays a quiet NaN of its sign): NumPy's spelling of a bf16 array."""
    import numpy as np

    single = np.ascontiguousarray(values, np.float32)
    bits = single.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    quiet = ((bits >> 16) | 0x0040).astype(np.uint16)
    return np.where(np.isnan(single), quiet, rounded)


def bf16_values(bits):
    """The ``float32`` values of bf16 bit patterns (exact)."""
    import numpy as np

    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


class ScalarRefused(ValueError):
    """A Python value cannot be passed as a scalar parameter; the text says why."""


def describe_value(value: object) -> str:
    """A short description of a Python value for "got ..." in messages."""
    if isinstance(value, bool):
        return f"bool {value}"
    module = type(value).__module__
    if isinstance(value, (int, float)) and module == "builtins":
        return f"{type(value).__name__} {value!r}"
    if module == "numpy" and hasattr(value, "dtype") and getattr(value, "shape", None) == ():
        return f"numpy {value.dtype} scalar {value.item()!r}"
    return f"{module}.{type(value).__qualname__}" if module != "builtins" else type(value).__name__


def _is_numpy_scalar(value: object, kind: str) -> bool:
    dtype = getattr(value, "dtype", None)
    return (
        dtype is not None
        and type(value).__module__ == "numpy"
        and getattr(value, "shape", None) == ()
        and dtype.kind in kind
    )


def scalar_converter(dtype: str):
    """A function that turns a Python value into what the kernel's ``dtype`` parameter holds.

    The function returns an int or a float ready for :data:`STRUCT_CODES`
    packing, or raises :class:`ScalarRefused` with the reason. Integers must
    fit the type exactly; floats are accepted for float parameters (and
    integers, converted exactly or refused); bools only for ``bool``.
    """
    if dtype in INT_RANGES:
        lo, hi = INT_RANGES[dtype]

        def to_int(value):
            if isinstance(value, bool) or not (
                type(value) is int or isinstance(value, int) or _is_numpy_scalar(value, "iu")
            ):
                raise ScalarRefused("expected an integer")
            value = int(value)
            if not lo <= value <= hi:
                raise ScalarRefused(f"{value} does not fit in {dtype} [{lo}, {hi}]")
            return value

        return to_int

    if dtype == "bool":

        def to_bool(value):
            if isinstance(value, bool) or _is_numpy_scalar(value, "b"):
                return 1 if value else 0
            raise ScalarRefused("expected a bool")

        return to_bool

    if dtype in ("f16", "bf16", "f32", "f64"):

        def to_float(value):
            if isinstance(value, bool):
                raise ScalarRefused("expected a float")
            if isinstance(value, float) or _is_numpy_scalar(value, "f"):
                value = float(value)
            elif isinstance(value, int) or _is_numpy_scalar(value, "iu"):
                as_int = int(value)
                try:
                    value = float(as_int)
                except OverflowError:
                    raise ScalarRefused(f"{as_int} is out of range for {dtype}") from None
            else:
                raise ScalarRefused("expected a float")
            return _narrow(value, dtype)

        return to_float

    raise ValueError(f"unknown scalar dtype {dtype!r}")


def _narrow(value: float, dtype: str):
    """Check that a finite value stays finite in ``dtype``; f16/bf16 become their bits."""
    if dtype == "f64":
        return value
    finite = math.isfinite(value)
    try:
        if dtype == "f32":
            narrowed = _F32.unpack(_F32.pack(value))[0]
            result = value
        elif dtype == "f16":
            bits = _U16.unpack(_F16.pack(value))[0]
            narrowed = _F16.unpack(_F16.pack(value))[0]
            result = bits
        else:  # bf16
            bits = _bf16_bits(value)
            narrowed = _F32.unpack(_U32.pack(bits << 16))[0]
            result = bits
    except (OverflowError, struct.error):
        raise ScalarRefused(f"{value!r} is out of range for {dtype}") from None
    if finite and not math.isfinite(narrowed):
        raise ScalarRefused(f"{value!r} is out of range for {dtype}")
    return result


# --------------------------------------------------------------------------- structured dtypes

#: a structured element's fields as a producer describes them: (name, dtype name, byte offset)
Fields = tuple[tuple[str, str, int], ...]


def numpy_fields(dtype) -> Fields | None:
    """The fields of a NumPy (or CuPy) structured dtype, in offset order; None for a dtype without."""
    names = getattr(dtype, "names", None)
    if not names:
        return None
    out = []
    for name in names:
        field_dtype, offset = dtype.fields[name][:2]
        if field_dtype.subdtype is not None:   # an array field: never one of a record's scalars
            base, shape = field_dtype.subdtype
            what = _array_of(from_typestr(base.str)[0], shape)
        else:
            what = "structure" if field_dtype.names else from_typestr(field_dtype.str)[0]
        out.append((name, what, offset))
    return tuple(sorted(out, key=lambda f: f[2]))


def _array_of(dtype: str, shape) -> str:
    return f"{display_name(dtype)} array of shape {tuple(shape)}"


def descr_fields(descr: object) -> Fields | None:
    """The fields of a ``__cuda_array_interface__``/``__array_interface__`` ``descr`` (a list of
    ``(name, typestr[, shape])``, in memory order, unnamed entries padding); None when it
    describes no field. Raises ValueError when it is malformed."""
    if descr is None:
        return None
    try:
        fields, _ = _descr_walk(descr)
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"malformed __cuda_array_interface__ descr ({exc})") from None
    return fields or None


def _descr_walk(descr) -> tuple[Fields, int]:
    """(the named fields of ``descr``, its size in bytes)."""
    out, offset = [], 0
    for entry in descr:
        name, typestr = entry[0], entry[1]
        shape = tuple(int(n) for n in entry[2]) if len(entry) > 2 else ()
        if isinstance(name, tuple):   # (title, name)
            name = name[1]
        if isinstance(typestr, (list, tuple)):   # a nested structure: never one of a record's scalars
            what, itemsize = "structure", _descr_walk(typestr)[1]
        else:
            dtype, itemsize = from_typestr(typestr)
            what = _array_of(dtype, shape) if shape else dtype
        count = 1
        for n in shape:
            count *= n
        if name:
            out.append((str(name), what, offset))
        offset += itemsize * count
    return tuple(out), offset
