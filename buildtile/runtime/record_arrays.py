"""Arrays of records as a launch takes them, and the words of refusing one.

A record array parameter (``Slice[Particle]``, ``Tensor[Particle, 2]``) reaches the kernel as
any array does: a pointer, and extents and strides counted in records (kernel ABI v1). The
Python host reads those from either of two descriptions of the same bytes:

- an array of bytes, ``uint8`` or ``int8``, whose last axis is one record:
  ``torch.empty(n, 32, dtype=torch.uint8)``, a view ``t.view(torch.uint8).reshape(n, 32)``, any
  DLPack producer (DLPack has no struct type). Its leading axes count records. This is what
  the C host takes too, and bt_checks.c refuses what :func:`as_records` refuses, in the same words;
- an array of a structured dtype whose fields are the record's (names, dtypes, offsets) and
  whose itemsize is the record's size: a NumPy structured array on the CPU emulator, a CuPy
  array, a :class:`~buildtile.runtime.DeviceArray`, or any ``__cuda_array_interface__`` with
  typestr ``|V<size>`` and a ``descr`` of the fields (Numba's and CuPy's spelling).

Either way the bytes of one record are contiguous, every other stride is a whole number of
records, and the data pointer is aligned to the record's alignment.
"""

from __future__ import annotations

from buildtile.errors import BuildtileError
from buildtile.interop.manifest import ParamRecord
from buildtile.interop.record_layout import BYTE_DTYPES, RecordLayout
from buildtile.runtime.arrays import HOST, ArrayView
from buildtile.runtime.dtypes import TYPESTR_OF_NAME, Fields, display_name


def record_help(record: RecordLayout) -> str:
    """What to pass instead (the Python host also takes structured arrays, which C has not)."""
    return (f"pass the records' bytes, e.g. `t.view(torch.uint8).reshape(n, {record.size})`, or a structured "
            f"array whose fields are `{record.name}`'s (of dtype `buildtile.runtime.record_dtype({record.name})`)")


def bytes_wanted(record: RecordLayout, rank: int) -> str:
    """How records cross when they are not what a parameter got: ``records of `Particle` are passed
    as their bytes: a uint8 or int8 array of shape (n, 32)``."""
    extents = ["n"] if rank == 1 else [f"n{axis}" for axis in range(rank)]
    return (f"records of `{record.name}` are passed as their bytes: a uint8 or int8 array of shape "
            f"({', '.join(extents)}, {record.size})")


def as_records(view: ArrayView, param: ParamRecord) -> tuple[ArrayView | None, str | None]:
    """``view`` (of an array in device memory) read as ``param``'s records: the view of the
    records, or None and why not."""
    record = param.record
    if view.fields is None and (view.dtype not in BYTE_DTYPES or len(view.shape) != param.rank + 1):
        return None, bytes_wanted(record, param.rank)
    if view.problem:
        return None, view.problem
    if view.fields is not None:
        why = _fields_differ(view.fields, view.itemsize, record)
        if why:
            return None, why
        if len(view.shape) != param.rank:
            return None, f"it has {len(view.shape)} axes of records, not {param.rank}"
        shape, strides = view.shape, view.strides
    else:
        shape, strides, why = _record_axes(view, record)
        if why:
            return None, why
    records = ArrayView(view.obj, view.ptr, shape, strides, record.name, record.size, view.device, view.memory,
                        view.origin, view.stream, view.read_only, None, view.keepalive, view.location,
                        align=record.align)
    records.raw = view
    return records, None


def _record_axes(view: ArrayView, record: RecordLayout):
    """(shape, strides in records, None) of an array of bytes (of one axis more than the records)
    whose last axis is one record; (None, None, why) when it is not one."""
    size = record.size
    *shape, width = view.shape
    *strides, step = view.strides
    if width != size:
        return None, None, f"its last axis has {width} bytes, but a `{record.name}` record has {size}"
    if step != 1 and size > 1:
        return None, None, f"the bytes of a record are not contiguous: its last axis has stride {step}"
    if any(extent > 1 and stride % size for extent, stride in zip(shape, strides)):
        return None, None, (f"its strides {tuple(view.strides)} (in bytes) are not whole `{record.name}` "
                            f"records of {size} bytes")
    # an axis of extent 0 or 1 is never stepped along: any stride will do
    return tuple(shape), tuple(stride // size if stride % size == 0 else 0 for stride in strides), None


def _fields_differ(fields: Fields, itemsize: int, record: RecordLayout) -> str | None:
    """Why a structured element of ``fields`` and ``itemsize`` bytes is not ``record``; None if it is."""
    given = {name: (dtype, offset) for name, dtype, offset in fields}
    for f in record.fields:
        ours = f"`{record.name}.{f.name}` is {f.dtype} at offset {f.offset}"
        if f.name not in given:
            return f"its elements have no field `{f.name}`; {ours}"
        dtype, offset = given[f.name]
        if dtype != f.dtype or offset != f.offset:
            return f"its field `{f.name}` is {display_name(dtype)} at offset {offset}, but {ours}"
    extra = [name for name, _, _ in fields if record.field(name) is None]
    if extra:
        return f"its field `{extra[0]}` is not a field of `{record.name}`"
    if itemsize != record.size:
        return f"its elements have {itemsize} bytes, but a `{record.name}` record has {record.size}"
    return None


def record_reader(param: ParamRecord):
    """What a generated binder reads ``param``'s argument with: ``read(view) -> records or None``
    (None: refused, and :func:`as_records` says why)."""
    def read(view: ArrayView | None) -> ArrayView | None:
        if view is None or view.memory == HOST:
            return None
        return as_records(view, param)[0]

    return read


def record_dtype(record: type):
    """The NumPy dtype of the ``@simt.record`` class ``record`` as its package was built: its
    fields at their offsets, padded to its size, so ``np.zeros(n, record_dtype(Particle))`` holds
    ``n`` records a kernel takes (and ``DeviceArray(n, Particle)`` the same on the GPU)."""
    import numpy as np

    from buildtile.runtime.package import package_runtime

    if not (isinstance(record, type) and getattr(record, "__buildtile_record__", False)):
        raise BuildtileError(f"record_dtype() takes a `@simt.record` class, got {record!r}", code="BT0308",
                             help="pass the record class itself, e.g. `record_dtype(Particle)`")
    module, name = record.__module__, record.__name__
    layout = package_runtime(module).manifest.record(name)
    if layout is None or layout.module != module:
        raise BuildtileError(
            f"record `{name}` of module `{module}` is not in the compiled kernels of its package",
            code="BT0620",
            help="a package records the layouts of the records its kernels take: use the record in a kernel's "
                 "parameters and rebuild the package")
    return np.dtype({"names": [f.name for f in layout.fields],
                     "formats": [TYPESTR_OF_NAME[f.dtype] for f in layout.fields],
                     "offsets": [f.offset for f in layout.fields], "itemsize": layout.size})
