/*
 * The runtime behind a package's generated launchers: argument checks and
 * the thread's last error (bt_checks.c), the lazily opened CUDA driver,
 * per-context module cache and launch (bt_launch.c). Compiled into each
 * package library next to the generated kernels.c; not installed, not part
 * of the public ABI.
 *
 * Every function here is hidden, so two buildtile packages (possibly built
 * by different buildtile versions) in one process never bind to each
 * other's runtime.
 */
#ifndef BT_RUNTIME_H
#define BT_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "buildtile/abi.h"

#if defined(__GNUC__) || defined(__clang__)
#define BT_INTERNAL __attribute__((visibility("hidden")))
#define BT_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define BT_INTERNAL
#define BT_PRINTF(fmt, args)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Highest tensor rank a launcher accepts (the generator enforces it). */
#define BT_MAX_RANK 8

/* BT_KIND_TILE: a Tile kernel's tile.Out, which must be row-major contiguous (its
 * inputs are BT_KIND_TENSOR: any strides). */
enum { BT_KIND_SLICE = 0, BT_KIND_TENSOR = 1, BT_KIND_TILE = 2 };
enum { BT_ROLE_IN = 0, BT_ROLE_OUT = 1, BT_ROLE_INOUT = 2 };
enum { BT_IMAGE_CUBIN = 0, BT_IMAGE_PTX = 1 };

/* One image: a cubin for one target, or PTX. Embedded in the library, or (a
 * library built into a wheel, BT_IMAGES_FROM_FILES) read at first load from
 * `file` in the package's _buildtile folder, where the Python host reads it
 * too, so the wheel holds each image once. */
typedef struct bt_image {
    const char* target;        /* "sm_90", "sm_90a" */
    int kind;                  /* BT_IMAGE_CUBIN or BT_IMAGE_PTX */
    int cc;                    /* 10 * major + minor */
    int arch_specific;         /* an "a"/"f" target: usable on exactly this cc only */
    int min_driver;            /* lowest cuDriverGetVersion() that loads it (12000); 0: any */
    const unsigned char* data; /* PTX is NUL-terminated; NULL: read `file` */
    size_t size;               /* of the file, when read from one */
    const char* file;          /* relative to _buildtile/: "kernels/<symbol>.<target>.cubin" */
} bt_image;

typedef struct bt_loaded bt_loaded; /* a module loaded in one context */

/* One set of images holding one or more kernels' entries. */
typedef struct bt_module {
    const bt_image* images;    /* exact cubins first, PTX last */
    int n_images;
    const char* const* symbols; /* PTX entry names of the kernels in it */
    int n_symbols;
    const char* built_for;     /* "sm_80, sm_90 and PTX for sm_80", for messages */
    bt_loaded* loaded;         /* one entry per context; grows, never shrinks */
} bt_module;

/* A record element type (a C struct of kernels.h): an array of records is passed as its
 * bytes, a uint8 or int8 DLTensor of rank + 1 dimensions whose last extent is `size`. */
typedef struct bt_record {
    const char* name;          /* "Particle", as the kernels' module declares it */
    uint32_t size;             /* bytes of one record, padding included */
    uint32_t align;            /* the alignment of its largest field */
} bt_record;

/* One buffer (slice or tensor) parameter, as declared. */
typedef struct bt_param_spec {
    const char* name;
    int kind;                  /* BT_KIND_SLICE, BT_KIND_TENSOR or BT_KIND_TILE */
    int rank;
    int role;                  /* BT_ROLE_* */
    uint8_t code, bits;        /* DLPack dtype (of a record array: uint8, its bytes) */
    const char* type_name;     /* "DisjointSlice[f32]", for messages */
    const bt_record* record;   /* the element type of an array of records; NULL for scalars */
} bt_param_spec;

/* One kernel and its launch contract. */
typedef struct bt_kernel {
    bt_module* module;
    int index;                 /* into module->symbols */
    const char* name;          /* "example_kernels.ops.vecadd" */
    uint32_t block[3];         /* the contract's block; zeros without a contract */
    int index_dims;            /* 1, 2 or 3 when writes use index_Nd(); else 0 */
    uint32_t dynamic_shared;   /* bytes the kernel needs */
    uint32_t coarsen;          /* logical blocks per launched block along x (1: none) */
    int min_cc;                /* 10 * major + minor, or 0 */
    const bt_param_spec* buffers; /* buffer parameters in declaration order */
    int n_buffers;
    int cooperative;           /* 1: every block resident at once (cuLaunchCooperativeKernel) */
} bt_kernel;

/* A checked buffer argument (of an array of records: counted in records, its bytes' axis dropped). */
typedef struct bt_arg {
    void* data;                /* DLTensor.data + byte_offset */
    int64_t shape[BT_MAX_RANK];
    int64_t strides[BT_MAX_RANK]; /* in elements, filled in when the DLTensor has none */
    uintptr_t lo, hi;          /* bytes the kernel may touch: [lo, hi), empty when lo == hi */
    int device_type, device_id;
} bt_arg;

/* Whether every one of the `n` checked arguments' data pointers is a multiple of `align`: a
 * kernel's aligned entry is launched only then. */
static inline int bt_pointers_aligned(const bt_arg* args, int n, uintptr_t align)
{
    for (int k = 0; k < n; ++k)
        if ((uintptr_t)args[k].data % align)
            return 0;
    return 1;
}

/* Start a call: clears the thread's last error. */
BT_INTERNAL void bt_begin(void);

/* Record a failure for this thread and return `status`. `help`, when not
 * NULL, is added as a "= help:" line, as the Python host prints it. */
BT_INTERNAL int bt_fail(int status, const char* help, const char* fmt, ...) BT_PRINTF(3, 4);

BT_INTERNAL const char* bt_last_error(void);

/* Steps 1 to 3 of abi.h: launch configuration (block is NULL for a
 * contract launch, the caller's block for an unsafe one), then every
 * tensor in `tensors` (one per kernel->buffers entry) into `args`, then
 * devices and aliasing. */
BT_INTERNAL int bt_prepare(const bt_kernel* kernel, const bt_launch_config* cfg,
                           const uint32_t* block, const DLTensor* const* tensors, bt_arg* args);

/* Steps 2 and 3 alone: every tensor into `args`, then devices and aliasing. */
BT_INTERNAL int bt_check_arguments(const bt_kernel* kernel, const DLTensor* const* tensors, bt_arg* args);

/* One specialization of a Tile kernel: which buffer is the output whose
 * partition fixes the grid, and that output's tile shape. */
typedef struct bt_tile {
    int grid_buffer;           /* index into kernel->buffers */
    const int64_t* shape;      /* the grid output's tile extents, one per axis */
    int rank;                  /* 0 to 5 */
    int takes_schedule;        /* the kernel takes the trailing int64 tile schedule (abi.TILE_SCHEDULE) */
} bt_tile;

/* A CUtensorMap (cuda.h): 128 opaque bytes, 64-byte aligned, passed by value to a TMA entry. */
typedef struct bt_tensor_map {
    _Alignas(64) uint64_t opaque[16];
} bt_tensor_map;

/* One tensor-map parameter of a TMA entry (manifest `tma.maps`): the 2-D tensor it describes and
 * how the copy engine reads it. */
typedef struct bt_tma_map {
    int buffer;                /* index into kernel->buffers */
    uint32_t box[2];           /* elements of one copy, innermost first */
    int swizzle;               /* CUtensorMapSwizzle: 1, 2, 3 for 32, 64, 128 bytes */
    int data_type;             /* CUtensorMapDataType: 6 f16, 9 bf16 */
    int elem_bytes;
} bt_tma_map;

/* A Tile specialization's TMA entry (sm_90a): launched instead of the specialization's own when
 * the device runs one of its images, the driver encodes tensor maps and every mapped tensor
 * suits TMA (16-byte aligned base and row stride, unit innermost stride, no empty extent). */
typedef struct bt_tma {
    const bt_kernel* kernel;   /* its entry, block and shared memory */
    const bt_tma_map* maps;
    int n_maps;                /* at most BT_MAX_TENSOR_MAPS */
} bt_tma;

#define BT_MAX_TENSOR_MAPS 4

/* Whether a launch over `args` takes `tma` (*usable), with its maps encoded into `maps` then;
 * a failure only where the driver fails (bt_launch.c). */
BT_INTERNAL int bt_tma_prepare(const bt_tma* tma, const bt_arg* args, bt_tensor_map* maps, int* usable);

/* A Tile launcher's checks before `requires` (bt_tile.c): cfg, no tensor
 * passed twice, steps 2 and 3, shared memory. */
BT_INTERNAL int bt_tile_prepare(const bt_kernel* kernel, const bt_launch_config* cfg,
                                const DLTensor* const* tensors, bt_arg* args);

/* The grid of a Tile launch over the tiles of its grid output, into `launch`
 * (cfg with that grid), and the kernel's trailing tile schedule for
 * `schedule` (NULL: the defaults) into *word; *empty is set when the output
 * has no tile (nothing to launch). */
BT_INTERNAL int bt_tile_grid(const bt_kernel* kernel, const bt_tile* tile, const bt_launch_config* cfg,
                             const bt_tile_schedule* schedule, const bt_arg* args, bt_launch_config* launch,
                             int* empty, int64_t* word);

/* The SMs of the device the arguments live on (a persistent launch's wave). */
BT_INTERNAL int bt_multiprocessors(const bt_kernel* kernel, const bt_arg* args, int* count);

/* Whether the `n` extents at `given` equal those at `compiled`. */
BT_INTERNAL int bt_tile_shape_is(const int64_t* given, const int64_t* compiled, int n);

/* BT0600 for a tile shape no specialization was compiled for: `outs` and
 * `ranks` name the kernel's tile.Out parameters, `compiled` lists the
 * compiled shapes as the Python host does. */
BT_INTERNAL int bt_tile_unknown_shape(const char* kernel, const char* const* outs, const int* ranks,
                                      int n_outs, const int64_t* tile_shape, const char* compiled);

/* A launch without a tile shape: the index (into `tiles`, `n` candidates of `rank`
 * extents each) of the specialization ranked best for the grid output's `extents`
 * by rule fewest-padded-v1 (buildtile/interop/tile_choice.py); candidates whose
 * `usable` entry is 0 (compiled for other dtypes) are skipped; -1 if none is usable. */
BT_INTERNAL int bt_tile_choose(const int64_t* extents, int rank, const int64_t* tiles, int n,
                               const int* usable, uint64_t fill_tiles);

/* Whether the tensors' dtypes are those of `buffers` (a NULL tensor matches: its
 * launcher refuses it). */
BT_INTERNAL int bt_tile_dtypes_are(const DLTensor* const* tensors, const bt_param_spec* buffers, int n);

/* BT0308 for arrays of dtypes no specialization of a generic kernel was compiled
 * for; `compiled` lists the compiled bindings as the Python host does. */
BT_INTERNAL int bt_tile_unknown_dtypes(const char* kernel, const DLTensor* const* tensors,
                                       const bt_param_spec* buffers, const int* generic, int n,
                                       const char* compiled);

/* "f32", "bf16" ... as the Python host names a DLPack dtype (bt_checks.c). */
BT_INTERNAL const char* bt_dtype_name(uint8_t code, uint8_t bits, uint16_t lanes, char* buf, size_t size);

/* "(8, 2)" / "(8,)" / "()": extents as Python writes a tuple. */
BT_INTERNAL void bt_format_extents(char* buf, size_t size, const int64_t* values, int n);

/* A `requires` relation that does not hold; `values` names the terms and
 * their values ("len(a) = 3, len(c) = 2"). */
BT_INTERNAL int bt_fail_requires(const bt_kernel* kernel, const char* relation, int unevaluable,
                                 const char* values_fmt, ...) BT_PRINTF(4, 5);

/* Step 5 of abi.h: driver, context, image, device limits, launch. */
BT_INTERNAL int bt_launch(const bt_kernel* kernel, const bt_launch_config* cfg,
                          const uint32_t* block, const bt_arg* args, void** params);

/* `requires` arithmetic over int64 with Python's floor semantics; sets
 * *bad on overflow or division by zero (the relation then fails). */
static inline int64_t bt_rq_add(int64_t a, int64_t b, int* bad)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) { *bad = 1; return 0; }
    return r;
}

static inline int64_t bt_rq_sub(int64_t a, int64_t b, int* bad)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r)) { *bad = 1; return 0; }
    return r;
}

static inline int64_t bt_rq_mul(int64_t a, int64_t b, int* bad)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) { *bad = 1; return 0; }
    return r;
}

static inline int64_t bt_rq_floordiv(int64_t a, int64_t b, int* bad)
{
    if (b == 0 || (a == INT64_MIN && b == -1)) { *bad = 1; return 0; }
    int64_t q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) q -= 1;
    return q;
}

static inline int64_t bt_rq_mod(int64_t a, int64_t b, int* bad)
{
    if (b == 0) { *bad = 1; return 0; }
    if (b == -1) return 0; /* also INT64_MIN % -1, which C leaves undefined */
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

/* Comparisons and `not` are functions too: written inline, a relation such
 * as `(a == b) < 2` would draw -Wbool-compare or -Wtype-limits warnings. */
static inline int64_t bt_rq_eq(int64_t a, int64_t b) { return a == b; }
static inline int64_t bt_rq_ne(int64_t a, int64_t b) { return a != b; }
static inline int64_t bt_rq_lt(int64_t a, int64_t b) { return a < b; }
static inline int64_t bt_rq_le(int64_t a, int64_t b) { return a <= b; }
static inline int64_t bt_rq_gt(int64_t a, int64_t b) { return a > b; }
static inline int64_t bt_rq_ge(int64_t a, int64_t b) { return a >= b; }
static inline int64_t bt_rq_not(int64_t a) { return a == 0; }

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BT_RUNTIME_H */
