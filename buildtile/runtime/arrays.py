"""One view of any array argument: pointer, shape, strides, dtype, device.

:func:`array_view` turns whatever the caller passed (a PyTorch tensor, a
CuPy array, a buildtile :class:`~buildtile.runtime.DeviceArray`, anything
with ``__cuda_array_interface__`` or ``__dlpack__``) into an
:class:`ArrayView`. It never launches anything and never talks to the CUDA
driver: a pointer whose device only the driver knows (a plain
``__cuda_array_interface__`` carries no device id) comes back with
``device=None`` and is resolved later, after every check that needs no
driver has passed.

The extractor for a type is chosen once per type and cached, so the launch
path pays one dict lookup per argument. Native fast paths exist for
PyTorch and CuPy (reading their attributes is several times cheaper than
building their interface dicts, and PyTorch refuses the CUDA array
interface for tensors that require grad); the generic protocols cover
everything else, preferring the CUDA array interface over DLPack because
it needs no capsule.

Building an :class:`ArrayView` costs more than reading the facts a launch
needs, so the types met most often (PyTorch tensors, buildtile
DeviceArrays) also have an :class:`InlineReader`: code that the generated
binder of a kernel inlines to read those facts into local variables (see
:mod:`buildtile.runtime.signature`). Views remain the general path, and the
one every refusal is explained from.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Sequence

from buildtile.interop.abi import SLICE_KINDS
from buildtile.runtime import dlpack
from buildtile.runtime.dtypes import (
    DISPLAY_NAMES,
    DLPACK_OF_NAME,
    ITEMSIZE,
    Fields,
    descr_fields,
    display_name,
    from_dlpack,
    from_torch,
    from_typestr,
    numpy_fields,
)
from buildtile.runtime.native import compiled as _native

#: where an array's memory lives, as far as the view alone can tell
DEVICE, HOST, UNKNOWN = "device", "host", "unknown"


class ArrayView:
    """A borrowed description of one array argument (strides in elements).

    Built on every launch for every array argument, so construction is
    positional and the optional facts have defaults.
    """

    __slots__ = (
        "obj", "ptr", "shape", "strides", "dtype", "itemsize", "device", "memory", "origin",
        "stream", "read_only", "problem", "keepalive", "location", "lo", "hi", "fields", "raw",
    )

    def __init__(
        self,
        obj: object,
        ptr: int,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: str,
        itemsize: int,
        device: int | None,
        memory: str,
        origin: str,
        stream: int | None = None,
        read_only: bool = False,
        problem: str | None = None,
        keepalive: object = None,
        location: str | None = None,
        fields: Fields | None = None,
        align: int | None = None,
    ) -> None:
        self.obj = obj              # the caller's object (identity for aliasing messages)
        self.ptr = ptr              # address of element [0, 0, ...]
        self.shape = shape
        self.strides = strides      # in elements; meaningless when ``problem`` is set
        self.dtype = dtype          # ABI dtype name, or a readable foreign name
        self.itemsize = itemsize
        self.device = device        # CUDA ordinal; None until the driver resolves it
        self.memory = memory        # DEVICE, HOST or UNKNOWN
        self.origin = origin        # "tensor", "array" ... for messages
        self.stream = stream        # producer stream to wait on (CAI v3), if any
        self.read_only = read_only
        # a layout we cannot pass at all: byte strides not in elements, a negative extent, a span
        # past what 64-bit addresses reach, a first element misaligned for its type
        if align is None and fields is not None:
            align = 1   # a structured element's alignment is its record's, checked when it is read as one
        self.problem = problem if problem is not None or memory == HOST else layout_problem(
            ptr, shape, strides, itemsize, align)
        self.keepalive = keepalive  # a DLPack capsule that must outlive the launch
        self.location = location    # "on cpu", "in host memory" ... for messages
        self.fields = fields        # a structured dtype's fields (name, dtype, offset); None for scalars
        self.raw: ArrayView | None = None   # a view of records: the view of the bytes it was read from
        # ``lo``/``hi``: the byte interval [lo, hi) the kernel may touch, set when the view
        # is accepted for a parameter; (0, 0) when empty, so it never overlaps anything

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_empty(self) -> bool:
        return 0 in self.shape

    def is_contiguous(self) -> bool:
        """Row-major contiguous (dimensions of extent 1 may have any stride)."""
        expected = 1
        for extent, stride in zip(reversed(self.shape), reversed(self.strides)):
            if extent != 1 and stride != expected:
                return False
            expected *= extent
        return True

    def overlaps_itself(self) -> bool:
        """Whether two different indices reach the same element (a broadcast, say)."""
        return overlaps_itself(self.shape, self.strides)

    def byte_range(self) -> tuple[int, int]:
        """The half-open byte interval ``[lo, hi)`` that the view can touch (empty: lo == hi)."""
        return byte_range(self.ptr, self.shape, self.strides, self.itemsize)

    def describe(self) -> str:
        """``float64 array of shape (10,)`` — what the caller passed, for messages."""
        if self.raw is not None:   # what the caller passed is the bytes, not the records
            return self.raw.describe()
        text = f"{display_name(self.dtype)} {self.origin} of shape {tuple(self.shape)}"
        if self.location:
            text += f" {self.location}"
        return text


#: the range of an int64 (extents, strides and offsets of the kernel ABI) and of a 64-bit address
_INT64_MAX, _ADDRESS_END = 2**63 - 1, 2**64


def layout_problem(ptr: int, shape: Sequence[int], strides: Sequence[int], itemsize: int,
                   align: int | None = None) -> str | None:
    """What makes an array of ``shape`` and element ``strides`` at ``ptr`` impossible to pass to a
    kernel, in words; None when nothing does. The kernel ABI holds extents and strides as int64
    and the kernel computes byte offsets in 64 bits, so everything must fit those; the first
    element must be aligned for its type (to ``align`` bytes, its size unless given: a record's
    alignment is its largest field's). (One pass: this runs for every view.)"""
    align = itemsize if align is None else align
    if not 0 <= ptr < _ADDRESS_END:
        return f"its data pointer {ptr:#x} is not a 64-bit address"
    reach = element_reach(shape, strides)
    if isinstance(reach, str):
        return reach
    count, low, high = reach
    if count > _INT64_MAX:
        return "more elements than int64 counts"
    if ptr % align:
        return f"its first element at {ptr:#x} is not aligned to {align} bytes"
    if count and ((high + 1) * itemsize > _INT64_MAX or low * itemsize < -_INT64_MAX
                  or not 0 <= ptr + low * itemsize < ptr + (high + 1) * itemsize < _ADDRESS_END):
        return "it spans more memory than int64 counts"
    return None


def element_reach(shape: Sequence[int], strides: Sequence[int]) -> tuple[int, int, int] | str:
    """``(elements, lowest, highest)`` element offsets an array of ``shape`` and element ``strides``
    reaches from its first element; or, in words, an extent or stride the kernel ABI cannot hold."""
    count, low, high = 1, 0, 0
    for extent, stride in zip(shape, strides):
        if extent < 0:
            return "a negative extent"
        if not -_INT64_MAX <= stride <= _INT64_MAX:
            return "a stride that int64 cannot hold"
        count *= extent
        span = (extent - 1) * stride
        if span < 0:
            low += span
        else:
            high += span
    return count, low, high


def overlaps_itself(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether two different indices of an array of ``shape`` and element ``strides`` reach
    the same element (a broadcast, say)."""
    if 0 in shape:
        return False
    dims = sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1)
    reach = 0  # furthest element offset reachable by the smaller dims
    for stride, extent in dims:
        if stride <= reach:
            return True
        reach += stride * (extent - 1)
    return False


def byte_range(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[int, int]:
    """The half-open byte interval ``[lo, hi)`` that an array can touch (empty: lo == hi)."""
    if 0 in shape:
        return ptr, ptr
    lo = hi = 0
    for extent, stride in zip(shape, strides):
        span = (extent - 1) * stride * itemsize
        if span < 0:
            lo += span
        else:
            hi += span
    return ptr + lo, ptr + hi + itemsize


Extractor = Callable[[object, int], "ArrayView | None"]

#: type -> extractor; None means "not an array" (a scalar, or an unsupported object)
_EXTRACTORS: dict[type, Extractor | None] = {}


def register_extractor(cls: type, extractor: Extractor) -> None:
    """Use ``extractor(obj, stream)`` for instances of exactly ``cls``."""
    _EXTRACTORS[cls] = extractor
    _INLINE_READERS.pop(cls, None)  # chosen again from the new extractor


def array_view(obj: object, stream: int) -> ArrayView | None:
    """The view of ``obj``, or None when ``obj`` is not an array of any kind we know.

    ``stream`` is the launch stream's handle; DLPack producers are asked to
    make their data ready on it. Raises ``ValueError`` (with the producer's
    own words) when an array-like object fails to describe itself.
    """
    extractor = extractor_for(type(obj))
    if extractor is None:
        return None
    return extractor(obj, stream)


def extractor_for(cls: type) -> Extractor | None:
    """The extractor for instances of ``cls`` (chosen on first sight of it)."""
    try:
        return _EXTRACTORS[cls]
    except KeyError:
        return choose_extractor(cls)


def choose_extractor(cls: type) -> Extractor | None:
    """Pick (and cache) the extractor for instances of ``cls``."""
    extractor = _EXTRACTORS[cls] = _classify(cls)
    return extractor


def _classify(cls: type) -> Extractor | None:
    module = cls.__module__ or ""
    root = module.partition(".")[0]
    if root == "torch" and _is_subclass_of(cls, "torch", "Tensor"):
        return _torch_view
    if root == "cupy" and _is_subclass_of(cls, "cupy", "ndarray"):
        return _cupy_view
    if root == "numpy" and _is_subclass_of(cls, "numpy", "ndarray"):
        return _numpy_view
    if issubclass(cls, (int, float, complex, str, bytes)) or (
        root == "numpy" and _is_subclass_of(cls, "numpy", "generic")
    ):
        return None
    # DLPack first where a class offers both: its ``stream=`` handshake has the producer order
    # its pending work before the launch stream, while an interface without a stream (JAX's,
    # version 2) promises nothing about work still queued
    if hasattr(cls, "__dlpack__") and hasattr(cls, "__dlpack_device__"):
        return _dlpack_view
    if hasattr(cls, "__cuda_array_interface__"):
        return _cai_view
    # instances may carry the interface as an instance attribute
    return _instance_protocol_view


def _is_subclass_of(cls: type, module_name: str, class_name: str) -> bool:
    module = sys.modules.get(module_name)
    base = getattr(module, class_name, None) if module is not None else None
    return isinstance(base, type) and issubclass(cls, base)


# ------------------------------------------------------------------ generic protocols

def _cai_view(obj: object, stream: int) -> ArrayView:
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError as exc:  # a property that refuses (e.g. torch with requires_grad)
        raise ValueError(f"its __cuda_array_interface__ is unavailable: {exc}") from None
    return view_from_cai(obj, cai)


_TYPESTR_CACHE: dict[str, tuple[str, int]] = {}


def view_from_cai(obj: object, cai: dict, origin: str = "array") -> ArrayView:
    """Build a view from a CUDA array interface dict (versions 2 and 3)."""
    try:
        ptr, read_only = cai["data"]
        ptr = 0 if ptr is None else _integer(ptr, "data pointer")
        shape = tuple(_integer(n, "extent") for n in cai["shape"])
        typestr = cai["typestr"]
        byte_strides = cai.get("strides")
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed __cuda_array_interface__ ({type(exc).__name__}: {exc})") from None
    if cai.get("mask") is not None:
        raise ValueError("masked arrays (__cuda_array_interface__ with a mask) are not supported")
    try:
        dtype, itemsize = _TYPESTR_CACHE[typestr]
    except KeyError:
        dtype, itemsize = _TYPESTR_CACHE[typestr] = from_typestr(typestr)
    strides, problem = _element_strides(shape, byte_strides, itemsize)
    stream = cai.get("stream")
    if stream is not None and not isinstance(stream, int):
        raise ValueError(f"malformed __cuda_array_interface__: stream {stream!r} is not an integer")
    # a structured element (typestr "|V<size>") names its fields in ``descr``, as NumPy's interface does
    fields = descr_fields(cai.get("descr")) if typestr[1:2] == "V" else None
    return ArrayView(obj, ptr, shape, strides, dtype, itemsize, None, UNKNOWN, origin,
                     stream, bool(read_only), problem, fields=fields)


def _integer(value: object, what: str) -> int:
    """An integer field of an array description; a float, a bool or a string is malformed."""
    if isinstance(value, bool):
        raise ValueError(f"malformed array description: {what} {value!r} is not an integer")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"malformed array description: {what} {value!r} is not an integer") from None


def _element_strides(shape, byte_strides, itemsize) -> tuple[tuple[int, ...], str | None]:
    if byte_strides is None:
        return _contiguous_strides(shape), None
    byte_strides = tuple(_integer(s, "stride") for s in byte_strides)
    if len(byte_strides) != len(shape):
        raise ValueError(f"malformed array description: {len(shape)} extents but {len(byte_strides)} strides")
    if any(s % itemsize for s in byte_strides):
        return byte_strides, f"byte strides {byte_strides} are not multiples of the element size {itemsize}"
    return tuple(s // itemsize for s in byte_strides), None


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    if len(shape) == 1:
        return (1,)
    strides = []
    step = 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))


def _dlpack_view(obj: object, stream: int) -> ArrayView:
    device_type, device_id = obj.__dlpack_device__()
    device_type, device_id = int(device_type), int(device_id)
    if device_type not in (dlpack.KDL_CUDA, dlpack.KDL_CUDA_MANAGED):
        where = dlpack.DEVICE_TYPE_NAMES.get(device_type, f"DLPack device type {device_type}")
        view = _host_view(obj, "array", f"on {where}")
        try:
            view.dtype, view.itemsize = _typestr(obj.dtype.str)  # NumPy-like producers
        except (AttributeError, TypeError, ValueError):
            pass
        return view
    # the protocol encodes the legacy default stream as 1 (0 is ambiguous)
    capsule = dlpack.export_capsule(obj, stream if stream else 1)
    try:
        t = dlpack.read_capsule(capsule)
    except dlpack.DLPackError as exc:
        raise ValueError(str(exc)) from None
    dtype, itemsize = from_dlpack(t.dtype_code, t.dtype_bits, t.dtype_lanes)
    strides = t.strides if t.strides is not None else _contiguous_strides(t.shape)
    return ArrayView(obj, t.data, t.shape, strides, dtype, itemsize, t.device_id, DEVICE, "array",
                     None, t.read_only or t.is_copied, None, capsule)


def _instance_protocol_view(obj: object, stream: int) -> ArrayView | None:
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _dlpack_view(obj, stream)
    if hasattr(obj, "__cuda_array_interface__"):
        return _cai_view(obj, stream)
    return None


def _host_view(obj: object, origin: str, location: str) -> ArrayView:
    try:
        shape = tuple(int(n) for n in getattr(obj, "shape", ()) or ())
    except (TypeError, ValueError):
        shape = ()
    return ArrayView(obj, 0, shape, (), "unknown", 1, None, HOST, origin, None, False, None, None, location)


# ------------------------------------------------------------------ native fast paths

_TORCH_DTYPES: dict[object, tuple[str, int]] = {}


def _torch_view(t, stream: int) -> ArrayView:
    device = t.get_device()  # -1 for CPU tensors
    torch_dtype = t.dtype
    try:
        dtype, itemsize = _TORCH_DTYPES[torch_dtype]
    except KeyError:
        dtype, itemsize = _TORCH_DTYPES[torch_dtype] = from_torch(torch_dtype)
    if device < 0 or not t.is_cuda:
        view = _host_view(t, "tensor", f"on {t.device}")
        view.dtype, view.itemsize = dtype, itemsize
        return view
    # torch.Size is a tuple; it is used as is
    return ArrayView(t, t.data_ptr(), t.shape, t.stride(), dtype, itemsize, device, DEVICE, "tensor")


_NUMPY_DTYPES: dict[object, tuple[str, int]] = {}


def _cupy_view(a, stream: int) -> ArrayView:
    numpy_dtype = a.dtype
    try:
        dtype, itemsize = _NUMPY_DTYPES[numpy_dtype]
    except KeyError:
        dtype, itemsize = _NUMPY_DTYPES[numpy_dtype] = from_typestr(numpy_dtype.str)
    byte_strides = a.strides
    if len(byte_strides) == 1 and byte_strides[0] == itemsize:
        strides, problem = (1,), None
    else:
        strides, problem = _element_strides(a.shape, byte_strides, itemsize)
    memory = a.data
    return ArrayView(a, memory.ptr, a.shape, strides, dtype, itemsize, memory.device_id, DEVICE, "array",
                     None, False, problem, fields=numpy_fields(numpy_dtype))


def _numpy_view(a, stream: int) -> ArrayView:
    view = _host_view(a, "NumPy array", "in host memory")
    view.dtype, view.itemsize = _typestr(a.dtype.str)
    view.fields = numpy_fields(a.dtype)
    return view


def _typestr(typestr: str) -> tuple[str, int]:
    try:
        return _TYPESTR_CACHE[typestr]
    except KeyError:
        result = _TYPESTR_CACHE[typestr] = from_typestr(typestr)
        return result


# ------------------------------------------------------------------ quick views

def quick_view(obj: object) -> ArrayView | None:
    """The view of ``obj`` when it can be read without side effects (no DLPack export) and its
    layout is plainly passable; None where :func:`array_view` must decide (and explain).

    A launch fast path uses it: whatever it accepts, :func:`array_view` would read alike."""
    try:
        extractor = _EXTRACTORS[type(obj)]
    except KeyError:
        extractor = choose_extractor(type(obj))
    if extractor is _cai_view:
        return _quick_cai_view(obj)
    if extractor is _torch_view or extractor is _cupy_view:
        try:
            view = extractor(obj, 0)  # the stream is asked only of DLPack producers
        except Exception:  # noqa: BLE001 (array_view says it in the producer's words)
            return None
        return view if view.problem is None else None
    return None


#: (typestr, shape, byte strides) of a CUDA array interface -> what its layout gives a view
#: (dtype, itemsize, element strides, lowest and highest element offset, element count), for
#: plain layouts only; bounded, as shapes vary without end
_PLAIN_CAI_LAYOUTS: dict[tuple, tuple] = {}
_PLAIN_CAI_LAYOUTS_MAX = 1024


def _quick_cai_view(obj: object) -> ArrayView | None:
    try:
        cai = obj.__cuda_array_interface__
        data, typestr, shape = cai["data"], cai["typestr"], cai["shape"]
    except Exception:  # noqa: BLE001 (view_from_cai words it)
        return None
    if type(cai) is not dict or type(data) is not tuple or len(data) != 2 or type(shape) is not tuple:
        return None
    ptr, read_only = data
    byte_strides = cai.get("strides")
    stream = cai.get("stream")
    if type(ptr) is not int or cai.get("mask") is not None or (stream is not None and type(stream) is not int):
        return None
    key = (typestr, shape, byte_strides)
    try:
        layout = _PLAIN_CAI_LAYOUTS[key]
    except KeyError:
        layout = _plain_cai_layout(typestr, shape, byte_strides)
        if layout is None:
            return None
        if len(_PLAIN_CAI_LAYOUTS) >= _PLAIN_CAI_LAYOUTS_MAX:
            _PLAIN_CAI_LAYOUTS.clear()
        _PLAIN_CAI_LAYOUTS[key] = layout
    except TypeError:  # unhashable parts: not a plain interface
        return None
    # a hit may be by equal values of other types (True == 1): only exact ints are plain
    if type(typestr) is not str:
        return None
    for n in shape:
        if type(n) is not int:
            return None
    if byte_strides is not None:
        if type(byte_strides) is not tuple:
            return None
        for n in byte_strides:
            if type(n) is not int:
                return None
    dtype, itemsize, strides, low, high, count = layout
    # layout_problem's checks that depend on the pointer (the alignment of a scalar element is its size)
    if not 0 <= ptr < _ADDRESS_END or ptr % itemsize:
        return None
    if count and not 0 <= ptr + low * itemsize < ptr + (high + 1) * itemsize < _ADDRESS_END:
        return None
    view = _VIEW_NEW(ArrayView)
    view.obj, view.ptr, view.shape, view.strides = obj, ptr, shape, strides
    view.dtype, view.itemsize, view.device, view.memory, view.origin = dtype, itemsize, None, UNKNOWN, "array"
    view.stream, view.read_only, view.problem, view.keepalive = stream, bool(read_only), None, None
    view.location = view.fields = view.raw = None
    return view


_VIEW_NEW = object.__new__


def _plain_cai_layout(typestr, shape: tuple, byte_strides) -> tuple | None:
    """The layout facts of a plain interface (scalar elements, integer extents and strides in
    elements, a span int64 holds: what layout_problem asks but the pointer); None otherwise."""
    if type(typestr) is not str or typestr[1:2] == "V" or not all(type(n) is int for n in shape):
        return None
    if byte_strides is not None and (type(byte_strides) is not tuple or not all(type(s) is int for s in byte_strides)):
        return None
    try:
        dtype, itemsize = _typestr(typestr)
        strides, problem = _element_strides(shape, byte_strides, itemsize)
    except Exception:  # noqa: BLE001 (view_from_cai words it)
        return None
    if problem is not None:
        return None
    reach = element_reach(shape, strides)
    if isinstance(reach, str):
        return None
    count, low, high = reach
    if count > _INT64_MAX or (count and ((high + 1) * itemsize > _INT64_MAX or low * itemsize < -_INT64_MAX)):
        return None
    return dtype, itemsize, strides, low, high, count


# ------------------------------------------------------------------ inline readers

class InlineReader:
    """How a generated binder reads one argument type without building an :class:`ArrayView`.

    The binder of a kernel is generated per combination of argument types
    (:meth:`buildtile.runtime.signature.KernelSignature.binder_for`). For an
    array parameter whose argument type has a reader, the binder inlines the
    reader's lines for argument ``a{k}``. They must set ``p{k}`` (the data
    pointer) and ``d{k}`` (the CUDA device ordinal), and ``n{k}`` (the
    length) for a slice, or ``s{k}`` and ``t{k}`` (shape, and strides in
    elements) for a tensor of ``rank``; and they must run ``return SLOW(args,
    stream)`` whenever the argument is not plainly right for the parameter:
    another dtype or rank, not in GPU memory, read-only, a slice that is not
    contiguous. The slow binder then accepts it or explains the refusal, so
    a reader may be as conservative as it likes. Names the lines need go
    into ``namespace``, suffixed with ``k``.

    Returning None instead of lines means "no inline code for this
    parameter"; the kernel then binds this type through views.
    """

    def slice_code(self, k: int, dtype: str, namespace: dict) -> list[str] | None:
        return None

    def tensor_code(self, k: int, dtype: str, rank: int, namespace: dict) -> list[str] | None:
        return None

    def batch_code(self, params: Sequence, cls: type, namespace: dict, shortcut: bool) -> list[str] | None:
        """Lines that read every array parameter in ``params`` (all exactly of type ``cls``) at
        once, type check included: the per-parameter names above, and ``d``, the one device
        they share; ``return None`` when an argument is of another type, ``return SLOW(args,
        stream)`` when one is not plainly right. With ``shortcut``, the local ``seen`` holds
        ``(read, result)`` of the last launch that passed, and the lines ``return seen[1]``
        when they read just what that launch read, leaving ``read`` set otherwise. None when
        the reader has no such code."""
        return None


class TorchTensorReader(InlineReader):
    """PyTorch tensors: a handful of C-level getters, no ``__cuda_array_interface__`` dict.

    ``dtype_object(name)`` gives the ``torch.dtype`` of an ABI dtype name (or
    None where that PyTorch has none); dtypes are singletons, so the binder
    compares them with ``is``.
    """

    def __init__(self, dtype_object: Callable[[str], object | None]) -> None:
        self.dtype_object = dtype_object

    def _head(self, k: int, dtype: str, namespace: dict) -> str | None:
        torch_dtype = self.dtype_object(dtype)
        if torch_dtype is None:
            return None
        namespace[f"T{k}"] = torch_dtype
        return f"a{k}.dtype is not T{k} or not a{k}.is_cuda"

    def slice_code(self, k, dtype, namespace):
        head = self._head(k, dtype, namespace)
        if head is None:
            return None
        # a 1-D tensor is contiguous when its stride is 1 or it has at most one element,
        # which is exactly what a slice asks
        return [f"if {head} or a{k}.dim() != 1 or not a{k}.is_contiguous():",
                "    return SLOW(args, stream)",
                f"p{k} = a{k}.data_ptr()",
                f"n{k} = a{k}.numel()",
                f"d{k} = a{k}.get_device()"]

    def tensor_code(self, k, dtype, rank, namespace):
        head = self._head(k, dtype, namespace)
        if head is None:
            return None
        return [f"if {head} or a{k}.dim() != {rank}:",
                "    return SLOW(args, stream)",
                f"p{k} = a{k}.data_ptr()",
                f"s{k} = a{k}.shape",
                f"t{k} = a{k}.stride()",
                f"d{k} = a{k}.get_device()"]

    def batch_code(self, params, cls, namespace, shortcut):
        """All the tensors in one call into buildtile's compiled module, when it is there: through
        the DLPack exchange API of ``cls`` where it has one (``_native.read_dlpack``: one C call
        per tensor, PyTorch 2.10 and later), else with the getters of the lines above
        (``_native.read_torch``)."""
        if _native is None:
            return None
        api = exchange_api(cls)
        plan = []
        for p in params:
            is_slice = p.kind in SLICE_KINDS
            rank = 1 if is_slice else p.rank
            if api is not None:
                plan.append((p.index, *DLPACK_OF_NAME[p.dtype], rank, is_slice, ITEMSIZE[p.dtype] - 1))
            else:
                torch_dtype = self.dtype_object(p.dtype)
                if torch_dtype is None:
                    return None
                plan.append((p.index, torch_dtype, rank, is_slice, ITEMSIZE[p.dtype] - 1))
        if api is not None:
            namespace.update(READ=_native.read_dlpack, TENSOR=cls, SOURCE=api, PLAN=tuple(plan))
        else:
            try:
                getters = tuple(getattr(cls, name) for name in TORCH_GETTERS)
            except AttributeError:
                return None
            namespace.update(READ=_native.read_torch, TENSOR=cls, SOURCE=getters, PLAN=tuple(plan))
        return _batch_lines("READ(args, TENSOR, SOURCE, PLAN, {last})", params, shortcut)


def _batch_lines(call: str, params: Sequence, shortcut: bool) -> list[str]:
    """The lines of :meth:`InlineReader.batch_code` around ``call`` to a compiled reader (whose
    ``{last}`` is the last launch's reading): it returns the reading (``d``, then per parameter
    ``p``/``n`` for a slice or ``p``/``s``/``t`` for a tensor), the last reading itself when
    nothing changed, None when an argument is not plainly right (the slow binder decides) or
    False when one is of another type (another binder)."""
    names = ["d"]
    for p in params:
        k = p.index
        names += [f"p{k}", f"n{k}"] if p.kind in SLICE_KINDS else [f"p{k}", f"s{k}", f"t{k}"]
    return [f"read = {call.format(last='seen[0]' if shortcut else 'None')}",
            "if not read:",
            "    return None if read is False else SLOW(args, stream)",
            *(["if read is seen[0]:", "    return seen[1]"] if shortcut else []),
            f"{', '.join(names)} = read"]


def exchange_api(cls: type) -> object | None:
    """The DLPack exchange API (``__dlpack_c_exchange_api__``, a capsule) of ``cls``, when
    buildtile's compiled module can use it; else None."""
    capsule = getattr(cls, "__dlpack_c_exchange_api__", None)
    if capsule is None or _native is None or not _native.exchange_api_usable(capsule):
        return None
    return capsule


#: what ``_native.read_torch`` calls on a tensor: three attributes, then four methods (its order)
TORCH_GETTERS = ("dtype", "is_cuda", "shape", "is_contiguous", "data_ptr", "get_device", "stride")

def _torch_dtype(name: str) -> object | None:
    torch = sys.modules.get("torch")  # PyTorch calls its dtypes what DISPLAY_NAMES does
    return getattr(torch, DISPLAY_NAMES.get(name, ""), None) if torch is not None else None


TORCH_READER = TorchTensorReader(_torch_dtype)


class CupyArrayReader(InlineReader):
    """CuPy arrays: their plain fields read from C (``_native.read_cupy``), no
    ``__cuda_array_interface__`` dict. Without buildtile's compiled module they are bound
    through views."""

    def batch_code(self, params, cls, namespace, shortcut):
        if _native is None:
            return None
        import numpy

        plan = []
        for p in params:
            try:
                numpy_dtype = numpy.dtype(DISPLAY_NAMES[p.dtype])
            except TypeError:  # bf16: NumPy (so CuPy) has none
                return None
            is_slice = p.kind in SLICE_KINDS
            plan.append((p.index, numpy_dtype, 1 if is_slice else p.rank, is_slice, ITEMSIZE[p.dtype],
                         ITEMSIZE[p.dtype] - 1))
        namespace.update(READ=_native.read_cupy, ARRAY=cls, PLAN=tuple(plan))
        return _batch_lines("READ(args, ARRAY, PLAN, {last})", params, shortcut)


CUPY_READER = CupyArrayReader()

#: the inline reader of the arrays an extractor makes views of
_READER_OF_EXTRACTOR: dict[Callable, InlineReader] = {_torch_view: TORCH_READER, _cupy_view: CUPY_READER}

#: type -> its inline reader; None: bound through views
_INLINE_READERS: dict[type, InlineReader | None] = {}


def register_inline_reader(cls: type, reader: InlineReader | None) -> None:
    """Let generated binders read instances of exactly ``cls`` with ``reader``."""
    _INLINE_READERS[cls] = reader


def inline_reader(cls: type) -> InlineReader | None:
    """The inline reader for instances of ``cls``, if it has one (decided once per type)."""
    try:
        return _INLINE_READERS[cls]
    except KeyError:
        pass
    extractor = _EXTRACTORS[cls] if cls in _EXTRACTORS else choose_extractor(cls)
    reader = _INLINE_READERS[cls] = _READER_OF_EXTRACTOR.get(extractor)
    return reader
