"""Small pieces of C and C++ text: literals, identifiers, types, signatures.

Shared by the shim (kernels.c) and header (kernels.h, kernels.hpp)
generators so a launcher is declared and defined from one description.
"""

from __future__ import annotations

from buildtile.interop.abi import DTYPES, kernel_params
from buildtile.interop.c_model import Kernel
from buildtile.interop.manifest import ParamRecord

#: launchers name their arguments p_<name>, so no parameter can shadow a local
LAUNCHER_ARG_PREFIX = "p_"

#: C and C++ keywords (and a few reserved macro-like names) that a Python
#: identifier may collide with; such names get a trailing underscore.
_RESERVED = frozenset(
    """
    alignas alignof and and_eq asm atomic_cancel atomic_commit atomic_noexcept auto
    bitand bitor bool break case catch char char8_t char16_t char32_t class co_await
    co_return co_yield compl concept const const_cast consteval constexpr constinit
    continue decltype default delete do double dynamic_cast else enum explicit export
    extern false float for friend goto if inline int long mutable namespace new
    noexcept not not_eq nullptr operator or or_eq private protected public reflexpr
    register reinterpret_cast requires restrict return short signed sizeof static
    static_assert static_cast struct switch synchronized template this thread_local
    throw true try typedef typeid typename union unsigned using virtual void volatile
    wchar_t while xor xor_eq _Alignas _Alignof _Atomic _Bool _Complex _Generic
    _Imaginary _Noreturn _Static_assert _Thread_local NULL EOF errno assert
    """.split()
)

#: how a scalar parameter is declared in a C launcher
C_SCALAR = {
    "bool": "bool",
    "i8": "int8_t",
    "i16": "int16_t",
    "i32": "int32_t",
    "i64": "int64_t",
    "u8": "uint8_t",
    "u16": "uint16_t",
    "u32": "uint32_t",
    "u64": "uint64_t",
    "f16": "uint16_t",   # the value's bits
    "bf16": "uint16_t",  # the value's bits
    "f32": "float",
    "f64": "double",
}

#: a tensor element or scalar in the C++ layer (buildtile.hpp defines f16/bf16)
CPP_TYPE = {
    "bool": "bool",
    "i8": "std::int8_t",
    "i16": "std::int16_t",
    "i32": "std::int32_t",
    "i64": "std::int64_t",
    "u8": "std::uint8_t",
    "u16": "std::uint16_t",
    "u32": "std::uint32_t",
    "u64": "std::uint64_t",
    "f16": "buildtile::f16",
    "bf16": "buildtile::bf16",
    "f32": "float",
    "f64": "double",
    "complex64": "std::complex<float>",    # interleaved (real, imaginary), as the kernels read them
    "complex128": "std::complex<double>",
}


#: how a record's field of each dtype is declared in its C struct (complex numbers as their
#: (real, imaginary) parts, which ``float _Complex`` and ``std::complex<float>`` lay out alike)
C_FIELD = {**C_SCALAR, "complex64": "float", "complex128": "double"}
#: the array extent a field of each dtype takes in the struct (complex: its two parts)
C_FIELD_EXTENT = {"complex64": 2, "complex128": 2}

_ROLES = {"in": "BT_ROLE_IN", "out": "BT_ROLE_OUT", "inout": "BT_ROLE_INOUT"}


def record_var(record: str) -> str:
    """The runtime's description of a record in kernels.c (``bt_record``)."""
    return f"bt_record_{record}"


def param_spec_row(p: ParamRecord, kind: str, dtype: str, type_text: str) -> str:
    """One ``bt_param_spec`` initializer (bt_runtime.h) for buffer parameter ``p`` of dtype ``dtype``;
    an array of records points at its ``bt_record`` and takes bytes (uint8)."""
    code, bits = (DTYPES["u8"] if p.record is not None else DTYPES[dtype])[1:3]
    record = f"&{record_var(p.record.name)}" if p.record is not None else "NULL"
    return (f"    {{{string_literal(p.name)}, {kind}, {p.rank}, {_ROLES[p.role]}, {code}, {bits}, "
            f"{string_literal(type_text)}, {record}}},")


#: names the launchers and their C++ wrappers give their own arguments and locals
_LAUNCHER_NAMES = frozenset({"cfg", "block", "launch", "block_dims"})


def identifier(name: str) -> str:
    """``name`` usable as a C and C++ identifier (keywords get a trailing ``_``)."""
    return name + "_" if name in _RESERVED else name


def param_identifier(name: str) -> str:
    """A kernel parameter's name in a header: an identifier that no launcher argument shadows."""
    return name + "_" if name in _RESERVED or name in _LAUNCHER_NAMES else name


def string_literal(text: str) -> str:
    """A C string literal holding ``text`` (UTF-8 bytes; printable ASCII kept readable)."""
    out = []
    for byte in text.encode():
        char = chr(byte)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= byte < 0x7F and char != "?":  # '?' would start trigraphs
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def byte_array(name: str, data: bytes, *, nul_terminate: bool = False) -> str:
    """``static const unsigned char name[] = {...};`` holding ``data``."""
    if nul_terminate:
        data = data + b"\0"
    rows = [",".join(map(str, data[i : i + 40])) for i in range(0, len(data), 40)]
    body = ",\n".join(rows)
    return f"static const unsigned char {name}[{len(data)}] = {{\n{body}\n}};\n"


def block_comment(text: str, indent: str = "") -> str:
    """``text`` as a C ``/* */`` comment (a ``*/`` inside cannot end it early)."""
    lines = text.replace("*/", "* /").splitlines()
    body = "\n".join(f"{indent} * {line}".rstrip() for line in lines)
    return f"{indent}/*\n{body}\n{indent} */"


def c_parameter(param: ParamRecord) -> str:
    """The type and name a launcher declares for one kernel parameter."""
    if param.is_scalar:
        return f"{C_SCALAR[param.dtype]} {param_identifier(param.name)}"
    return f"const DLTensor* {param_identifier(param.name)}"


def launcher_prototype(kernel: Kernel, *, arg_prefix: str = "") -> str:
    """``int bt_<symbol>(const bt_launch_config* cfg, ...)``.

    ``arg_prefix`` renames every argument in a definition (``p_a``) so they
    cannot clash with the launcher's own locals; headers use the plain names.
    """
    args = ["const bt_launch_config* cfg"]
    if kernel.block is None:
        args.append("const uint32_t block[3]")
    for p in kernel.params:
        ctype, _, name = c_parameter(p).rpartition(" ")
        args.append(f"{ctype} {arg_prefix}{p.name if arg_prefix else name}")
    return f"int {kernel.launcher}({', '.join(args)})"


def signature_comment(kernel: Kernel) -> str:
    """``example_kernels.ops.vecadd(a: Slice[f32], ...)`` plus its contract, for comments."""
    params = ", ".join(f"{p.name}: {p.type_text}" for p in kernel.params)
    lines = [f"{kernel.qualname}({params})"]
    if kernel.block is None:
        lines.append("no launch contract: launched with the caller's block, outside the safety checks of a contract")
    else:
        grid = {1: "1-D grid", 2: "2-D grid", 3: "3-D grid"}.get(kernel.index_dims, "any grid")
        lines.append(f"block ({kernel.block[0]}, {kernel.block[1]}, {kernel.block[2]}), {grid}")
    for r in kernel.requires:
        lines.append(f"requires {r.text}")
    return "\n".join(lines)


def params_array(kernel: Kernel, arg_prefix: str, tensor_maps: int = 0, array: str = "params") -> list[str]:
    """The ``void* params[]`` of a launcher's cuLaunchKernel, in the order abi.kernel_params gives;
    checked buffers are read from ``args``, scalars from the launcher's ``<arg_prefix><name>``; a TMA
    entry's ``tensor_maps`` encoded maps (``maps[k]``) last."""
    index = {p.name: i for i, p in enumerate(kernel.buffers)}
    dtype = {p.name: p.dtype for p in kernel.params}
    lines: list[str] = []
    slots: list[str] = []
    for flat in kernel_params([{"name": p.name, "kind": p.kind, "rank": p.rank, "dtype": p.dtype}
                               for p in kernel.params]):
        name, _, part = flat.name.partition(".")
        if not part:  # a scalar, passed from the launcher's own argument
            if dtype[name] == "bool":  # one byte in the kernel, whatever the host's bool is
                lines.append(f"    uint8_t k_{name} = {arg_prefix}{name} ? 1 : 0;")
                slots.append(f"&k_{name}")
            else:
                slots.append(f"&{arg_prefix}{name}")
        elif part == "data":
            slots.append(f"&args[{index[name]}].data")
        elif part == "len":
            slots.append(f"&args[{index[name]}].shape[0]")
        elif part.startswith("shape"):
            slots.append(f"&args[{index[name]}].shape[{part[5:]}]")
        else:
            slots.append(f"&args[{index[name]}].strides[{part[6:]}]")
    if kernel.coarsen > 1:   # ABI: a coarsened kernel takes the logical grid.x last
        lines.append("    int64_t k_logical_blocks = (int64_t)cfg->grid[0];")
        slots.append("&k_logical_blocks")
    if kernel.tile is not None and kernel.tile.takes_schedule:   # ABI: then the tile schedule (bt_tile_grid's)
        slots.append("&k_tile_schedule")
    slots += [f"&maps[{k}]" for k in range(tensor_maps)]   # ABI: a TMA entry's tensor maps, by value
    if not slots:
        return [f"    void** const {array} = NULL;"]
    lines.append(f"    void* {array}[] = {{")
    lines += [f"        (void*){slot}," for slot in slots]
    lines.append("    };")
    return lines
