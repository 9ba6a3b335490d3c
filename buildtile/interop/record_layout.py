"""Record element types as the manifest records them, once per package.

A record is a declared class of scalar fields (``@simt.record``), laid out as the C
struct of those fields. The manifest's top-level ``records`` maps each record's name to
its layout, and an array parameter of records names it as its ``dtype``::

    "records": {
      "Particle": {"module": "example_kernels.records", "size": 32, "align": 8,
                   "fields": [{"name": "x", "dtype": "f32", "offset": 0}, ...]}
    }

Across the kernel ABI a record array is an array like any other: a pointer, its extents
and its strides, counted in records. Both hosts take it as an array of the records' bytes
(``BYTE_DTYPES``, its last axis one record); see ``abi.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from buildtile.interop.abi import DTYPES, ELEMENT_ONLY_DTYPES

#: the element types of an array of records' bytes, its last axis one record (DLPack has no structs)
BYTE_DTYPES = ("u8", "i8")


@dataclass(frozen=True)
class FieldLayout:
    name: str
    dtype: str     # a key of abi.DTYPES
    offset: int    # bytes from the start of the record


@dataclass(frozen=True)
class RecordLayout:
    name: str
    module: str
    size: int      # bytes, padding included: the stride of one record in an array
    align: int
    fields: tuple[FieldLayout, ...]

    def field(self, name: str) -> FieldLayout | None:
        return next((f for f in self.fields if f.name == name), None)

    def as_dict(self) -> dict:
        return {"module": self.module, "size": self.size, "align": self.align,
                "fields": [{"name": f.name, "dtype": f.dtype, "offset": f.offset} for f in self.fields]}


class LayoutError(ValueError):
    """A record layout the manifest cannot hold; the message names the key."""


def read_records(raw: object) -> dict[str, RecordLayout]:
    """The manifest's ``records``, checked: every field a known dtype, inside the record, at an
    offset that is a multiple of its alignment, no two fields overlapping."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise LayoutError("expected an object from record names to layouts")
    return {name: _record(name, body) for name, body in raw.items()}


def _record(name: object, raw: object) -> RecordLayout:
    if not isinstance(name, str) or not name.isidentifier() or name in DTYPES:
        raise LayoutError(f"{name!r} is not a record name")
    if not isinstance(raw, dict) or not isinstance(raw.get("fields"), list) or not raw["fields"]:
        raise LayoutError(f"`{name}` has no fields")
    size, align, module = raw.get("size"), raw.get("align"), raw.get("module", "")
    if not _count(size) or not _count(align) or size % align:
        raise LayoutError(f"`{name}` has size {size!r} and alignment {align!r}")
    fields, end = [], 0
    for k, f in enumerate(raw["fields"]):
        if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not f["name"].isidentifier():
            raise LayoutError(f"`{name}`.fields[{k}] is not a field with an identifier for a name")
        dtype, offset = f.get("dtype"), f.get("offset")
        if dtype not in DTYPES:
            raise LayoutError(f"`{name}.{f['name']}` has unknown dtype {dtype!r}")
        width = DTYPES[dtype][0]
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < end or offset + width > size \
                or offset % (width // 2 if dtype in ELEMENT_ONLY_DTYPES else width):
            raise LayoutError(f"`{name}.{f['name']}` has offset {offset!r}, which C's layout of the record "
                              "cannot give it")
        fields.append(FieldLayout(f["name"], dtype, offset))
        end = offset + width
    return RecordLayout(name, str(module), size, align, tuple(fields))


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
