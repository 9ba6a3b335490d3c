"""The C and C++ surface of Tile kernels: launchers in kernels.c, declarations, C++ wrappers.

Per Tile kernel the shim exports

- one launcher per specialization, ``int bt_<specialization symbol>(cfg, <params>...)``:
  the same checks as the Python host, then a grid over the tiles of the
  grid output, computed from its shape and the specialization's tile shape
  by the Python host's rule (runtime/tile/grid.py; ``cfg->grid`` must be
  zeros or equal to that grid);
- one dispatching launcher, ``int bt_<module>__<kernel>_tiled(cfg, const
  int64_t* tile_shape, <params>...)``, which calls the specialization
  compiled for ``tile_shape`` (the tile extents of every ``tile.Out``
  parameter, in parameter order) or fails with BT0600 listing the compiled
  ones; a null ``tile_shape`` takes the specialization ranked best for the
  grid output's extents (``bt_tile_choose``, the manifest's rule, as the
  Python host ranks). A generic kernel's dispatcher first keeps the
  specializations compiled for the arguments' dtypes (BT0308 listing the
  compiled ones when there is none); each of its launchers checks its own.

kernels.hpp wraps the dispatcher in ``<ns>::<kernel>(TileTensor&&...,
Partition&&...)``, which returns a move-only pending launch whose
``sync_on(stream)`` enqueues and gives the tensors back as a ``std::tuple``.
"""

from __future__ import annotations

from buildtile.interop.abi import mangle, spell_type
from buildtile.interop.c_model import Kernel, specialization_launcher
from buildtile.interop.manifest import ParamRecord, SpecializationRecord
from buildtile.interop.tile_choice import CHOICE_RULE
from buildtile.interop.c_requires import relation_check
from buildtile.interop.c_syntax import (
    CPP_TYPE,
    LAUNCHER_ARG_PREFIX,
    block_comment,
    c_parameter,
    identifier,
    param_identifier,
    param_spec_row,
    params_array,
    string_literal,
)


# ----------------------------------------------------------------------------- shared text

def tile_extents(kernel: Kernel) -> int:
    """How many values a dispatcher's ``tile_shape`` holds: the ranks of the tile.Out parameters."""
    return sum(p.rank for p in kernel.outs)


def tile_comment(kernel: Kernel) -> str:
    """The kernel's signature, grid and compiled tile shapes, for comments."""
    params = ", ".join(f"{p.name}: {p.type_text}" for p in kernel.params)
    tile = kernel.tile
    lines = [
        f"{kernel.qualname}({params})",
        (f"tile kernel: one block per tile of `{tile.grid_param}` (the launcher computes the grid; "
         "cfg->grid must be zeros or that grid)"),
        f"compiled for {tile.compiled()}",
    ]
    lines += [f"requires {r.text}" for r in kernel.requires]
    return "\n".join(lines)


def spec_prototype(kernel: Kernel, spec: SpecializationRecord, *, arg_prefix: str = "") -> str:
    return f"int {specialization_launcher(spec)}({', '.join(_c_args(kernel, arg_prefix))})"


def dispatcher_prototype(kernel: Kernel, *, arg_prefix: str = "") -> str:
    args = _c_args(kernel, arg_prefix)
    args.insert(1, "const int64_t* tile_shape")
    return f"int {kernel.launcher}({', '.join(args)})"


def scheduled_prototype(kernel: Kernel, *, arg_prefix: str = "") -> str:
    args = _c_args(kernel, arg_prefix)
    args[1:1] = ["const int64_t* tile_shape", "const bt_tile_schedule* schedule"]
    return f"int {kernel.scheduled_launcher}({', '.join(args)})"


def _run_prototype(i: int, s: int, kernel: Kernel) -> str:
    args = _c_args(kernel, LAUNCHER_ARG_PREFIX)
    args.insert(1, "const bt_tile_schedule* schedule")
    return f"int bt_run_{i}_{s}({', '.join(args)})"


def _c_args(kernel: Kernel, arg_prefix: str) -> list[str]:
    args = ["const bt_launch_config* cfg"]
    for p in kernel.params:
        ctype, _, name = c_parameter(p).rpartition(" ")
        args.append(f"{ctype} {arg_prefix}{p.name if arg_prefix else name}")
    return args


def extents_macro(kernel: Kernel) -> str:
    return f"BT_{mangle(kernel.module, kernel.name).upper()}_TILE_EXTENTS"


# ----------------------------------------------------------------------------- kernels.c

def tile_kernel(i: int, kernel: Kernel, module_of: dict[str, tuple[int, int]]) -> str:
    """The descriptions and launchers of Tile kernel number ``i`` (``module_of``: entry -> (module, index))."""
    out = [block_comment(tile_comment(kernel))]
    buffers = kernel.buffers
    generic = kernel.tile.generic
    tables = [(f"bt_buffers_{i}_{s}", spec) for s, spec in enumerate(kernel.tile.specializations)] if generic \
        else [(f"bt_buffers_{i}", None)]
    for table, spec in tables:
        out.append(f"static const bt_param_spec {table}[] = {{")
        for p in buffers:
            dtype = spec.dtype_of(p) if spec is not None else p.dtype
            # inputs may be any strided view (the kernel reads through its strides); a tile.Out is
            # written a tile at a time and must be row-major contiguous
            kind = "BT_KIND_TILE" if p.is_tile_out else "BT_KIND_TENSOR"
            out.append(param_spec_row(p, kind, dtype, spell_type(p.kind, dtype, p.rank)))
        out.append("};")
    grid_buffer = [p.name for p in buffers].index(kernel.tile.grid_param)
    offset = 0  # where the grid output's extents start in a specialization's tile_shape
    for p in kernel.outs:
        if p.name == kernel.tile.grid_param:
            grid_rank = p.rank
            break
        offset += p.rank
    for s, spec in enumerate(kernel.tile.specializations):
        m, index = module_of[spec.symbol]
        var = f"bt_kernel_{i}_{s}"
        extents = [n for _, shape in spec.tile_shapes for n in shape]
        bx, by, bz = spec.block
        table = tables[s][0] if generic else tables[0][0]
        out += [
            f"/* tile shape {spec.describe()}: block ({bx}, {by}, {bz}), {spec.shared_bytes} bytes of shared memory */",
            f"static const int64_t bt_tiles_{i}_{s}[] = {{{', '.join(map(str, extents)) or '0'}}};",
            f"static const bt_kernel {var} = {{",
            f"    &bt_module_{m}, {index}, {string_literal(kernel.qualname)},",
            f"    {{{bx}, {by}, {bz}}}, 0, {spec.shared_bytes}u, 1u, {kernel.min_cc or 0},",
            f"    {table}, {len(buffers)}, 0,",
            "};",
            *_tma_tables(i, s, kernel, spec, module_of, table),
            (f"static const bt_tile bt_tile_{i}_{s} = {{{grid_buffer}, bt_tiles_{i}_{s} + {offset}, {grid_rank}, "
             f"{int(kernel.tile.takes_schedule)}}};"),
            "",
            f"static {_run_prototype(i, s, kernel)}",
            "{",
            (f"    const DLTensor* const tensors[{len(buffers)}] = "
             f"{{{', '.join(LAUNCHER_ARG_PREFIX + p.name for p in buffers)}}};"),
            f"    bt_arg args[{len(buffers)}];",
            "    bt_launch_config launch;",
            "    int empty = 0;",
            "    int64_t k_tile_schedule = -1;",
            "    bt_begin();",
            f"    int status = bt_tile_prepare(&{var}, cfg, tensors, args);",
            "    if (status != BT_OK)",
            "        return status;",
        ]
        out += [relation_check(req, kernel, var, LAUNCHER_ARG_PREFIX) for req in kernel.requires]
        chosen = f"&{var}"
        if spec.tma is not None:   # its TMA entry where the device, driver and inputs allow it
            n_maps = len(spec.tma.maps)
            out += [
                f"    bt_tensor_map maps[{n_maps}];",
                "    int tma = 0;",
                f"    status = bt_tma_prepare(&bt_tma_{i}_{s}, args, maps, &tma);",
                "    if (status != BT_OK)",
                "        return status;",
                f"    const bt_kernel* chosen = tma ? bt_tma_{i}_{s}.kernel : &{var};",
            ]
            chosen = "chosen"
        out += [
            (f"    status = bt_tile_grid({chosen}, &bt_tile_{i}_{s}, cfg, schedule, args, &launch, &empty, "
             "&k_tile_schedule);"),
            "    if (status != BT_OK || empty) /* an empty output has no tile: nothing to launch */",
            "        return status;",
        ]
        if spec.tma is not None:
            out += [
                "    if (tma) {",
                "        if (launch.shared_mem < chosen->dynamic_shared) /* the TMA entry's own amount */",
                "            launch.shared_mem = 0;",
                *["    " + line for line in params_array(kernel, LAUNCHER_ARG_PREFIX, n_maps, "tma_params")],
                "        return bt_launch(chosen, &launch, NULL, args, tma_params);",
                "    }",
            ]
        out += [
            *params_array(kernel, LAUNCHER_ARG_PREFIX),
            f"    return bt_launch(&{var}, &launch, NULL, args, params);",
            "}",
            "",
            f"BUILDTILE_API {spec_prototype(kernel, spec, arg_prefix=LAUNCHER_ARG_PREFIX)}",
            "{",
            f"    return bt_run_{i}_{s}({', '.join(['cfg', 'NULL'] + [LAUNCHER_ARG_PREFIX + p.name for p in kernel.params])});",
            "}",
            "",
        ]
    out += _dispatcher(i, kernel)
    return "\n".join(out)


#: CUtensorMapDataType (cuda.h) and bytes of the element types a TMA entry maps
_TMA_DATA_TYPES = {"f16": (6, 2), "bf16": (9, 2)}
#: CUtensorMapSwizzle by swizzle bytes
_TMA_SWIZZLES = {32: 1, 64: 2, 128: 3}


def _tma_tables(i: int, s: int, kernel: Kernel, spec: SpecializationRecord, module_of: dict[str, tuple[int, int]],
                buffers_table: str) -> list[str]:
    """A specialization's TMA entry (``bt_tma_<i>_<s>``): its kernel and its tensor maps."""
    tma = spec.tma
    if tma is None:
        return []
    m, index = module_of[tma.symbol]
    bx, by, bz = tma.block
    buffer_of = {p.name: k for k, p in enumerate(kernel.buffers)}
    dtype_of = {p.name: spec.dtype_of(p) for p in kernel.buffers}
    maps = []
    for record in tma.maps:
        code, size = _TMA_DATA_TYPES[dtype_of[record.param]]
        maps.append(f"    {{{buffer_of[record.param]}, {{{record.box[0]}u, {record.box[1]}u}}, "
                    f"{_TMA_SWIZZLES[record.swizzle]}, {code}, {size}}}, /* `{record.param}` */")
    return [
        f"/* its TMA entry (sm_90a): block ({bx}, {by}, {bz}), {tma.shared_bytes} bytes of shared memory */",
        f"static const bt_kernel bt_kernel_{i}_{s}_tma = {{",
        f"    &bt_module_{m}, {index}, {string_literal(kernel.qualname)},",
        f"    {{{bx}, {by}, {bz}}}, 0, {tma.shared_bytes}u, 1u, {kernel.min_cc or 0},",
        f"    {buffers_table}, {len(kernel.buffers)}, 0,",
        "};",
        f"static const bt_tma_map bt_tma_maps_{i}_{s}[] = {{",
        *maps,
        "};",
        f"static const bt_tma bt_tma_{i}_{s} = {{&bt_kernel_{i}_{s}_tma, bt_tma_maps_{i}_{s}, {len(tma.maps)}}};",
    ]


def _dispatcher(i: int, kernel: Kernel) -> list[str]:
    outs = kernel.outs
    specs = kernel.tile.specializations
    buffers = kernel.buffers
    grid = next(p for p in outs if p.name == kernel.tile.grid_param)
    choice_tiles = [t for spec in specs for t in spec.tile_shape_of(grid.name)]
    out = [
        f"static const char* const bt_outs_{i}[] = {{{', '.join(string_literal(p.name) for p in outs)}}};",
        f"static const int bt_out_ranks_{i}[] = {{{', '.join(str(p.rank) for p in outs)}}};",
        f"/* the tile shape of `{grid.name}` in each specialization, for a launch without a tile shape */",
        f"static const int64_t bt_choice_tiles_{i}[] = {{{', '.join(map(str, choice_tiles))}}};",
    ]
    if kernel.tile.generic:
        generic = {name for spec in specs for name, _ in spec.param_dtypes}
        out.append(f"static const int bt_generic_{i}[] = {{{', '.join('1' if p.name in generic else '0' for p in buffers)}}};")
    out += [
        "",
    ]
    for scheduled in (False, True):
        out += _dispatch(i, kernel, scheduled)
    return out


def _dispatch(i: int, kernel: Kernel, scheduled: bool) -> list[str]:
    """The ``_tiled`` dispatcher (the default schedule) or the ``_scheduled`` one."""
    n = tile_extents(kernel)
    forwarded = ", ".join(["cfg", "schedule" if scheduled else "NULL"] + [LAUNCHER_ARG_PREFIX + p.name for p in kernel.params])
    specs = kernel.tile.specializations
    buffers = kernel.buffers
    grid = next(p for p in kernel.outs if p.name == kernel.tile.grid_param)
    prototype = scheduled_prototype if scheduled else dispatcher_prototype
    out = [
        f"BUILDTILE_API {prototype(kernel, arg_prefix=LAUNCHER_ARG_PREFIX)}",
        "{",
        "    bt_begin();",
        (f"    const DLTensor* const tensors[{len(buffers)}] = "
         f"{{{', '.join(LAUNCHER_ARG_PREFIX + p.name for p in buffers)}}};"),
        f"    int usable[{len(specs)}] = {{{', '.join('1' for _ in specs)}}};",
    ]
    if kernel.tile.generic:
        out += [f"    usable[{s}] = bt_tile_dtypes_are(tensors, bt_buffers_{i}_{s}, {len(buffers)});"
                for s in range(len(specs))]
        out += [
            f"    if (!({' || '.join(f'usable[{s}]' for s in range(len(specs)))}))",
            (f"        return bt_tile_unknown_dtypes({string_literal(kernel.qualname)}, tensors, bt_buffers_{i}_0, "
             f"bt_generic_{i}, {len(buffers)}, {string_literal(kernel.tile.compiled_dtypes())});"),
        ]
    out += [
        "    (void)tensors;",
        "    if (tile_shape == NULL) { /* the specialization ranked best for the grid output's extents */",
        f"        const DLTensor* grid = {LAUNCHER_ARG_PREFIX}{grid.name};",
        f"        int chosen = bt_tile_choose(grid != NULL && grid->ndim == {grid.rank} ? grid->shape : NULL, "
        f"{grid.rank}, bt_choice_tiles_{i}, {len(specs)}, usable, {kernel.tile.fill_tiles}u);",
        "        switch (chosen) {",
    ]
    for s, spec in enumerate(specs):
        out.append(f"        case {s}: return bt_run_{i}_{s}({forwarded});")
    out += ["        default: break;", "        }", "    }"]
    for s, spec in enumerate(specs):
        out += [f"    if (usable[{s}] && bt_tile_shape_is(tile_shape, bt_tiles_{i}_{s}, {n}))",
                f"        return bt_run_{i}_{s}({forwarded});"]
    out += [
        (f"    return bt_tile_unknown_shape({string_literal(kernel.qualname)}, bt_outs_{i}, bt_out_ranks_{i}, "
         f"{len(kernel.outs)}, tile_shape, {string_literal(kernel.tile.compiled())});"),
        "}",
        "",
    ]
    return out


# ----------------------------------------------------------------------------- kernels.h

def tile_declarations(kernel: Kernel) -> list[str]:
    out = [block_comment(tile_comment(kernel))]
    for spec in kernel.tile.specializations:
        bx, by, bz = spec.block
        out.append(f"/* tile shape {spec.describe()}: block ({bx}, {by}, {bz}) */")
        out.append(f"BUILDTILE_API {spec_prototype(kernel, spec)};")
    n = tile_extents(kernel)
    names = ", ".join(f"`{p.name}`" for p in kernel.outs)
    out += [
        (f"/* Any compiled tile shape: tile_shape holds the {n} tile extent{'' if n == 1 else 's'} of {names}, "
         "in that order; NULL takes the specialization ranked best for the extents (rule "
         f"{CHOICE_RULE}). */"),
        f"#define {extents_macro(kernel)} {n}",
        f"BUILDTILE_API {dispatcher_prototype(kernel)};",
        "/* The same, with a tile order and persistence (NULL: the defaults). */",
        f"BUILDTILE_API {scheduled_prototype(kernel)};",
        "",
    ]
    return out


# ----------------------------------------------------------------------------- kernels.hpp

def _cpp_member(p: ParamRecord) -> str:
    element = CPP_TYPE[p.dtype]
    if p.is_scalar:
        return element
    if p.is_tile_out:
        return f"buildtile::Partition<{element}, {p.rank}>"
    return f"buildtile::TileTensor<{element}, {p.rank}>"


def _cpp_result(p: ParamRecord) -> str:
    return CPP_TYPE[p.dtype] if p.is_scalar else f"buildtile::TileTensor<{CPP_TYPE[p.dtype]}, {p.rank}>"


def tile_wrapper(kernel: Kernel, package: str) -> list[str]:
    """``class <kernel>_launch`` and ``<kernel>(...)`` in the kernel's namespace."""
    fn = identifier(kernel.name)
    cls = identifier(kernel.name + "_launch")
    params = kernel.params
    # `result` is the class's own type name; every other local is prefixed (m_, d_)
    names = {p.name: param_identifier(p.name) + ("_" if p.name == "result" else "") for p in params}
    result = f"std::tuple<{', '.join(_cpp_result(p) for p in params)}>"
    taken = [f"{_cpp_member(p)}{'' if p.is_scalar else '&&'} {names[p.name]}" for p in params]
    inits = []
    for p in params:
        where = string_literal(f"`{kernel.qualname}` (parameter `{p.name}`)")
        value = names[p.name] if p.is_scalar else f"buildtile::detail::take(std::move({names[p.name]}), {where})"
        inits.append(f"m_{p.name}({value})")
    extents = [f"m_{p.name}.tile_shape()[{d}]" for p in kernel.outs for d in range(p.rank)] or ["0"]
    chosen = " || ".join(f"m_{p.name}.chosen_at_launch()" for p in kernel.outs) or "false"
    dl = [f"        const DLTensor d_{p.name} = m_{p.name}.dl();" for p in params if not p.is_scalar]
    call = ["&cfg", "given", "&schedule"] + [
        (f"m_{p.name}.bits" if p.dtype in ("f16", "bf16") else f"m_{p.name}") if p.is_scalar else f"&d_{p.name}"
        for p in params]
    given_back = string_literal("the tensors returned by `sync_on` or `cancel`")
    returned = [
        f"m_{p.name}" if p.is_scalar
        else f"buildtile::detail::take(std::move(m_{p.name}), {given_back}).into_tensor()" if p.is_tile_out
        else f"buildtile::detail::take(std::move(m_{p.name}), {given_back})"
        for p in params
    ]
    example = ", ".join(names[p.name] if p.is_scalar else f"std::move({names[p.name]}{'p' if p.is_tile_out else ''})"
                        for p in params)
    out = [f"/// {line}" for line in tile_comment(kernel).splitlines()]
    out += [
        f"/// A checked-on-enqueue launch of {kernel.name} that owns its tensors until sync_on gives them back.",
        f"class {cls} {{",
        "public:",
        f"    using result = {result};",
        "",
        f"    {cls}({', '.join(taken)})",
        f"        : {', '.join(inits)}",
        "    {",
        "    }",
        "",
        "    /// Check and enqueue on `stream` (a cudaStream_t / CUstream; nullptr: the legacy default",
        "    /// stream), then give the tensors back in parameter order. Does not wait for the kernel.",
        "    /// Throws buildtile::Error (the launch stays pending: cancel() still gives the tensors back).",
        "    result sync_on(void* stream, std::uint32_t shared_mem = 0) &&",
        "    {",
        f"        const std::int64_t tile_shape[] = {{{', '.join(extents)}}};",
        "        // a partition without a tile shape: the launcher picks the specialization for the extents",
        f"        const std::int64_t* given = ({chosen}) ? nullptr : tile_shape;",
        *dl,
        "        const bt_launch_config cfg{{0, 0, 0}, shared_mem, stream};",
        f"        const bt_tile_schedule schedule = m_{kernel.tile.grid_param}.schedule();",
        f"        buildtile::check({kernel.scheduled_launcher}({', '.join(call)}), {package}_last_error);",
        "        return std::move(*this).cancel();",
        "    }",
        "",
        "    /// Give the tensors back without launching.",
        "    result cancel() &&",
        "    {",
        f"        return result({', '.join(returned)});",
        "    }",
        "",
        "private:",
        *[f"    {_cpp_member(p)} m_{p.name};" for p in params],
        "};",
        "",
        f"/// {kernel.name}: move the tensors in (tile.Out parameters as buildtile::Partition), then give them",
        f"/// back: `auto [{', '.join(names.values())}] = {fn}({example}).sync_on(stream);`",
        f"inline {cls} {fn}({', '.join(taken)})",
        "{",
        f"    return {cls}({', '.join(names[p.name] if p.is_scalar else f'std::move({names[p.name]})' for p in params)});",
        "}",
        "",
    ]
    return out
