"""i8/u8/i16/u16 through every dtype table: the ABI, the runtime's foreign spellings and scalar
packing, the C and C++ type names, and the kernel language's types."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from buildtile import types
from buildtile.backends.common.types import ELEMENT_TYPES, SCALARS
from buildtile.interop.abi import DTYPES, ELEMENT_ONLY_DTYPES
from buildtile.interop.c_syntax import C_SCALAR, CPP_TYPE
from buildtile.runtime.dtypes import (
    DISPLAY_NAMES, INT_RANGES, STRUCT_CODES, ScalarRefused, from_dlpack, from_torch, from_typestr, scalar_converter,
)

SMALL = {"i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16}


class _TorchDtype:
    """Stands for a ``torch.dtype``: its str and itemsize are all the runtime reads."""

    def __init__(self, name: str, itemsize: int) -> None:
        self.name, self.itemsize = name, itemsize

    def __str__(self) -> str:
        return f"torch.{self.name}"


def test_every_abi_dtype_is_in_every_table():
    for name in DTYPES:
        assert name in CPP_TYPE and name in DISPLAY_NAMES and name in ELEMENT_TYPES
        if name in ELEMENT_ONLY_DTYPES:   # complex: array elements only, never a scalar parameter
            assert name not in C_SCALAR and name not in STRUCT_CODES and name not in SCALARS
            continue
        assert name in C_SCALAR and name in STRUCT_CODES
        assert name in SCALARS and name in {t.name for t in types.SCALAR_TYPES.values()}


@pytest.mark.parametrize("name, numpy_type", SMALL.items())
def test_numpy_dlpack_and_torch_spellings_map_to_the_abi_name(name, numpy_type):
    dtype = np.dtype(numpy_type)
    assert from_typestr(dtype.str) == (name, dtype.itemsize)
    assert DTYPES[name][3] == dtype.str and DTYPES[name][0] == dtype.itemsize
    code = 0 if dtype.kind == "i" else 1
    assert from_dlpack(code, dtype.itemsize * 8, 1) == (name, dtype.itemsize)
    assert DTYPES[name][1:3] == (code, dtype.itemsize * 8)
    assert from_torch(_TorchDtype(dtype.name, dtype.itemsize)) == (name, dtype.itemsize)
    assert DISPLAY_NAMES[name] == dtype.name


@pytest.mark.parametrize("name, numpy_type", SMALL.items())
def test_scalars_must_fit_and_pack_in_their_width(name, numpy_type):
    info = np.iinfo(numpy_type)
    assert INT_RANGES[name] == (info.min, info.max)
    convert = scalar_converter(name)
    for value in (info.min, info.max, numpy_type(info.max)):
        packed = struct.pack("<" + STRUCT_CODES[name], convert(value))
        assert np.frombuffer(packed, numpy_type)[0] == value
    for bad in (info.min - 1, info.max + 1):
        with pytest.raises(ScalarRefused, match="does not fit"):
            convert(bad)
    with pytest.raises(ScalarRefused):
        convert(1.5)


def test_the_language_names_the_small_integers():
    for name in SMALL:
        scalar = SCALARS[name]
        assert scalar.is_int and scalar.bits == int(name[1:]) and scalar.kind == ("int" if name[0] == "i" else "uint")
        assert types.SCALAR_TYPES[name](7.9) == 7
