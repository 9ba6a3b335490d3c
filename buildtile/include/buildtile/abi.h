/*
 * buildtile kernel ABI, version 1: what a C or C++ host needs to call the
 * kernels a buildtile package carries.
 *
 * This header ships in every wheel built with [tool.buildtile.c-abi]
 * (under <package>/_buildtile/include/buildtile/abi.h). It is pure C99 and
 * usable from C++. buildtile/interop/abi.py holds the same rules for the
 * Python host; the two must change together, and BUILDTILE_ABI_VERSION with
 * them.
 *
 * ------------------------------------------------------------------------
 * Launchers
 * ------------------------------------------------------------------------
 * Each package library (lib<package>_kernels.so) exports, per kernel,
 *
 *     int bt_<symbol>(const bt_launch_config* cfg, <params>...);
 *
 * where <symbol> is the kernel's PTX entry name from the manifest
 * (<module with dots as _>__<name>, e.g. bt_example_kernels_ops__vecadd),
 * and <package>/kernels.h declares them. A kernel without a launch contract
 * (no block=) gets only
 *
 *     int bt_<symbol>_unsafe(const bt_launch_config* cfg,
 *                            const uint32_t block[3], <params>...);
 *
 * Parameters, in declaration order:
 *
 *   kind                        C parameter          reaches the kernel as
 *   --------------------------  -------------------  ------------------------------
 *   scalar bool                 bool                 one byte, 0 or 1
 *   scalar i8 ... u64           int8_t ... uint64_t  the value
 *   scalar f32/f64              float / double       the value
 *   scalar f16/bf16             uint16_t             the 16 bits of the value
 *   Slice, DisjointSlice,       const DLTensor*      T* data, int64 len
 *   AtomicSlice                 (1-D, contiguous)
 *   Tensor[T, r],               const DLTensor*      T* data, int64 shape[r],
 *   DisjointTensor[T, r]        (r-D, any strides)   int64 strides[r] (elements)
 *   tile.Out[T, r] (Tile)       const DLTensor*      as a Tensor
 *   tile.Atomic[T, r] (Tile)    const DLTensor*      as a Tensor (read and written)
 *
 * "data" is DLTensor.data + DLTensor.byte_offset. A NULL DLTensor.strides
 * means compact row-major, as in DLPack.
 *
 * Arrays of records (T a @simt.record class; <package>/kernels.h declares its
 * C struct, <package>_<Record>): DLPack has no struct type, so the DLTensor
 * holds the records' bytes: dtype uint8 or int8, one dimension more than
 * the parameter (2 for a slice, r + 1 for Tensor[T, r]), the last extent
 * the struct's size and its stride 1, every other stride (in bytes) a
 * multiple of that size. The kernel gets the data, extents and strides
 * counted in records, as for any T.
 *
 * A kernel whose manifest contract has "coarsen": K > 1 (the compiler
 * coarsens kernels whose body sees nothing of its block but index_1d()) runs
 * K logical blocks per launched block: cfg->grid[0] counts logical blocks,
 * the launcher starts ceil(grid[0] / K) blocks along x and passes one more,
 * trailing, kernel parameter: int64 grid[0].
 *
 * Launchers return a bt_status. They never print, exit or abort. On failure
 * <package>_last_error() returns a message for the calling thread that
 * starts with the code, as the Python host prints it:
 *
 *     error[BT0600]: launch contract violated: ...
 *
 * ------------------------------------------------------------------------
 * What a launcher checks, in this order, before anything is queued
 * ------------------------------------------------------------------------
 *  1. the launch configuration (BT_ERR_CONTRACT): cfg is not NULL; every
 *     grid dimension is >= 1; a kernel that indexes with index_1d() takes a
 *     1-D grid (grid[1] == grid[2] == 1), one with index_2d() a 2-D grid
 *     (grid[2] == 1). The block is the contract's; callers do not pass it.
 *     cfg->shared_mem == 0 means the contract's dynamic shared memory;
 *     a non-zero value must be at least that.
 *  2. every tensor argument (BT_ERR_MISMATCHED_TYPES): not NULL; on a CUDA
 *     device (kDLCUDA or kDLCUDAManaged); dtype code, bits and lanes (1)
 *     equal to the parameter's; ndim 1 for slices, r for Tensor[T, r];
 *     no negative extent, and an element count int64 holds; an array of
 *     records as its bytes (above); a slice contiguous (stride 1, or
 *     length <= 1); data + byte_offset a 64-bit address, aligned to the
 *     element size (a record's: its largest field's) and not NULL unless empty; a
 *     DisjointTensor's strides map no two elements to one address; the
 *     bytes the tensor spans counted in int64 and within the 64-bit address
 *     space; all tensor arguments on the same device. (The element's
 *     alignment is all a kernel needs: Tile kernels choose their 16-byte
 *     vector accesses at run time, where the pointers allow them.)
 *  3. ownership (BT_ERR_ALIAS): the bytes a written argument (DisjointSlice,
 *     DisjointTensor, AtomicSlice) may touch overlap no other argument's
 *     bytes. Empty arguments overlap nothing.
 *  4. the contract's `requires` relations (BT_ERR_CONTRACT), evaluated over
 *     int64 with Python's meaning of // and % (floor); an overflow or a
 *     division by zero makes the relation fail. len(x) is a slice's length
 *     or a tensor's shape[0]; an integer scalar takes part as its value
 *     (u64 reinterpreted as int64).
 *  5. then, with the driver: the CUDA driver loads (BT_ERR_NO_DRIVER); the
 *     launch runs on the arguments' device (as in the Python host): in the
 *     thread's current context when that is on this device, else in the
 *     device's primary context, made current when the thread has none, or
 *     pushed for the launch and popped after it when another device's
 *     context is current (the caller's stream must then belong to the
 *     arguments' device, as any stream given must); the device has an image
 *     (BT_ERR_NO_IMAGE); the device meets the contract's minimum compute
 *     capability and its grid, block and shared memory limits
 *     (BT_ERR_CONTRACT); the launch itself (BT_ERR_CUDA).
 *
 * The _unsafe launcher skips the contract parts of 1 (the grid shape and
 * the block, which the caller gives; each dimension must still be >= 1)
 * and keeps the rest.
 *
 * ------------------------------------------------------------------------
 * Tile kernels
 * ------------------------------------------------------------------------
 * A Tile kernel is compiled once per tile shape (a specialization). The
 * library exports one launcher per specialization and one that picks the
 * specialization by tile shape:
 *
 *     int bt_<specialization symbol>(const bt_launch_config* cfg, <params>...);
 *     int bt_<module with dots as _>__<name>_tiled(const bt_launch_config* cfg,
 *                                                  const int64_t* tile_shape, <params>...);
 *     int bt_<module with dots as _>__<name>_scheduled(const bt_launch_config* cfg,
 *                                                      const int64_t* tile_shape,
 *                                                      const bt_tile_schedule* schedule, <params>...);
 *
 * `_scheduled` is `_tiled` with a tile order and persistence (NULL: the
 * defaults, as `_tiled` uses); a bad option is BT_ERR_CONTRACT naming it.
 *
 * tile_shape holds the tile extents of every tile.Out parameter, in
 * declaration order (BT_<MODULE>__<NAME>_TILE_EXTENTS values; kernels.h
 * lists the compiled shapes); a shape no specialization was compiled for
 * is BT_ERR_CONTRACT naming the compiled ones. Tensor and tile.Out
 * arguments must be row-major contiguous (extents of 1 take any stride).
 *
 * The grid covers the tiles of the kernel's grid output (the manifest's
 * tile.grid_param): ceil(shape[d] / tile[d]) tiles along each axis d, axis
 * r-1 along grid x, r-2 along y, r-3 along z while each fits CUDA's limits,
 * else the tiles in row-major order along x, spilled into y and z; a
 * persistent launch takes min(tiles, SMs x blocks per SM) blocks along x
 * (the Python host's rule, runtime/tile/grid.py). The launcher computes it:
 * cfg->grid must be {0, 0, 0} or equal to it. The block is the
 * specialization's, and so is the dynamic shared memory (cfg->shared_mem:
 * 0, or at least that much; above 48 KiB the launcher opts in). An output
 * with an empty axis has no tile: after its checks the launcher returns
 * BT_OK and launches nothing, without loading the driver.
 *
 * A specialization built for sm_90a may carry a TMA entry (the manifest's
 * `tma`: wgmma fed by TMA, its own block and shared memory). Its launcher
 * runs that entry instead when the device runs its image, the driver has
 * cuTensorMapEncodeTiled and every mapped input has a 16-byte aligned data
 * pointer and row stride, unit stride along rows and no empty extent; the
 * entry takes the same parameters, then one CUtensorMap (128 bytes, by
 * value) per map, which the launcher encodes. Any other launch runs the
 * specialization's own entry, with the same results.
 *
 * A Tile launcher checks, in order: cfg is not NULL; no DLTensor is passed
 * for two parameters (BT_ERR_ALIAS: a launch owns each argument); step 2,
 * with contiguity; step 3; step 4; the grid against CUDA's limits
 * (BT_ERR_CONTRACT); step 5. buildtile.hpp adds move-only TileTensor and
 * Partition types, whose moved-from use throws buildtile::Error with
 * BT_ERR_MOVED.
 *
 * ------------------------------------------------------------------------
 * Images and the driver
 * ------------------------------------------------------------------------
 * The library embeds one cubin per built target and, when built with
 * ptx = true, the PTX of the lowest target. On each device it loads, as
 * the Python host does: the cubin built for exactly its architecture
 * (sm_90, then sm_90a), else the newest cubin of the same major and an
 * older minor (sm_80 on an sm_86 device), else the PTX, JIT-compiled, when
 * the device is at least the PTX's target; else it fails with
 * BT_ERR_NO_IMAGE naming the built targets. Modules are loaded once per
 * CUDA context.
 *
 * The CUDA driver is opened with dlopen("libcuda.so.1") on the first
 * launch that passes the checks above, so the library loads, and its
 * checks work, on a machine without a GPU. The environment variable
 * BUILDTILE_LIBCUDA, when set, names the driver library to open instead.
 *
 * Launches are asynchronous on cfg->stream (NULL: the legacy default
 * stream); a kernel's own faults appear at the next synchronisation, as
 * CUDA reports them.
 */
#ifndef BUILDTILE_ABI_H
#define BUILDTILE_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BUILDTILE_ABI_VERSION 1

/* Marks the functions a package library exports (it is built with hidden
 * visibility otherwise). */
#if defined(__GNUC__) || defined(__clang__)
#define BUILDTILE_API __attribute__((visibility("default")))
#else
#define BUILDTILE_API
#endif

/* A check at compile time, in C11, C++11 and (a negative array size names it) C99: the
 * generated headers check with it that a record's struct is laid out as the kernels read it. */
#ifndef BUILDTILE_STATIC_ASSERT
#if defined(__cplusplus)
#define BUILDTILE_STATIC_ASSERT(cond, tag, message) static_assert(cond, message)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define BUILDTILE_STATIC_ASSERT(cond, tag, message) _Static_assert(cond, message)
#else
#define BUILDTILE_STATIC_ASSERT(cond, tag, message) typedef char tag[(cond) ? 1 : -1]
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: each equals the number of the buildtile error code
 * (BT_ERR_ALIAS == 502 is error[BT0502]), so C, C++ and Python hosts report
 * the same failure the same way. */
typedef enum bt_status {
    BT_OK = 0,
    BT_ERR_MISMATCHED_TYPES = 308, /* dtype, rank, device or layout of an argument */
    BT_ERR_MOVED = 382,            /* a moved-from C++ TileTensor used (C++ layer only) */
    BT_ERR_ALIAS = 502,            /* an output overlaps another argument */
    BT_ERR_CONTRACT = 600,         /* launch configuration or `requires` violated */
    BT_ERR_NO_IMAGE = 610,         /* no cubin or PTX usable on this device */
    BT_ERR_ABI = 622,              /* library and headers of different kernel ABI versions */
    BT_ERR_CUDA = 700,             /* the CUDA driver returned an error */
    BT_ERR_NO_DRIVER = 701         /* the CUDA driver could not be loaded or initialised */
} bt_status;

/* How to launch: the grid (in blocks), dynamic shared memory and stream.
 * The block shape is part of the kernel's contract and not given here. */
typedef struct bt_launch_config {
    uint32_t grid[3];   /* blocks along x, y, z; each >= 1 */
    uint32_t shared_mem; /* dynamic shared memory in bytes; 0: the contract's */
    void* stream;       /* a CUstream / cudaStream_t; NULL: the legacy default stream */
} bt_launch_config;

/* How a Tile launch visits its tiles (the `_scheduled` dispatcher; docs/tile.md). */
typedef enum bt_tile_order {
    BT_TILE_ORDER_COMPILED = 0, /* the compiler's choice: rows; bands of 8 rows for 2-D tile.mma kernels */
    BT_TILE_ORDER_ROW = 1,      /* row-major, the last axis fastest */
    BT_TILE_ORDER_GROUPED = 2   /* bands of `group` tile rows, each walked column by column (2-D) */
} bt_tile_order;

typedef struct bt_tile_schedule {
    int32_t order;      /* a bt_tile_order */
    int32_t group;      /* tile rows per band of the grouped order (0: 8); 0 otherwise */
    int32_t persistent; /* 1: about one wave of blocks, each looping over tiles; else 0 */
} bt_tile_schedule;

#ifdef __cplusplus
} /* extern "C" */
#endif

/*
 * DLPack declarations, layout-compatible with dlpack.h 0.8 and 1.x. A host
 * that uses dlpack.h includes it before this header and gets its own
 * declarations; these are only for hosts that do not.
 */
#if !defined(DLPACK_DLPACK_H_) && !defined(DLPACK_VERSION) && !defined(DLPACK_MAJOR_VERSION)
#define BUILDTILE_OWN_DLPACK 1

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3,
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,
    kDLROCMHost = 11,
    kDLExtDev = 12,
    kDLCUDAManaged = 13,
    kDLOneAPI = 14,
    kDLWebGPU = 15,
    kDLHexagon = 16
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;

typedef enum {
    kDLInt = 0,
    kDLUInt = 1,
    kDLFloat = 2,
    kDLOpaqueHandle = 3,
    kDLBfloat = 4,
    kDLComplex = 5,
    kDLBool = 6
} DLDataTypeCode;

typedef struct {
    uint8_t code;   /* a DLDataTypeCode */
    uint8_t bits;
    uint16_t lanes; /* 1 for every type buildtile kernels take */
} DLDataType;

typedef struct {
    void* data;          /* base of the allocation (device pointer) */
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t* shape;      /* ndim extents */
    int64_t* strides;    /* ndim strides in elements, or NULL: compact row-major */
    uint64_t byte_offset; /* added to data to reach the first element */
} DLTensor;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLPack declarations */

#endif /* BUILDTILE_ABI_H */
