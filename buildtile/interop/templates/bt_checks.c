/*
 * Steps 1-4 of buildtile/abi.h: everything a launcher checks before it needs
 * the CUDA driver (launch configuration, arguments, aliasing, `requires`
 * failures), and the calling thread's last error. Nothing here touches the
 * driver, so these checks work, and are tested, on machines without a GPU.
 */
#include "bt_runtime.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------
 * The calling thread's last error
 * ------------------------------------------------------------------------ */

static _Thread_local char bt_error[2048];

void bt_begin(void)
{
    bt_error[0] = '\0';
}

const char* bt_last_error(void)
{
    return bt_error;
}

static int bt_vfail(int status, const char* help, const char* fmt, va_list ap)
{
    size_t used = (size_t)snprintf(bt_error, sizeof bt_error, "error[BT%04d]: ", status);
    if (used < sizeof bt_error) {
        int n = vsnprintf(bt_error + used, sizeof bt_error - used, fmt, ap);
        used += n > 0 ? (size_t)n : 0;
    }
    if (help != NULL && used < sizeof bt_error)
        snprintf(bt_error + used, sizeof bt_error - used, "\n  = help: %s", help);
    return status;
}

int bt_fail(int status, const char* help, const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bt_vfail(status, help, fmt, ap);
    va_end(ap);
    return status;
}

/* ------------------------------------------------------------------------
 * How arguments are described in messages (the Python host's wording)
 * ------------------------------------------------------------------------ */

const char* bt_dtype_name(uint8_t code, uint8_t bits, uint16_t lanes, char* buf, size_t size)
{
    static const struct { uint8_t code, bits; const char* name; } known[] = {
        {kDLInt, 8, "i8"},     {kDLInt, 16, "i16"},   {kDLUInt, 8, "u8"},
        {kDLUInt, 16, "u16"},  {kDLInt, 32, "i32"},   {kDLInt, 64, "i64"},   {kDLUInt, 32, "u32"},
        {kDLUInt, 64, "u64"},  {kDLFloat, 16, "f16"}, {kDLFloat, 32, "f32"},
        {kDLFloat, 64, "f64"}, {kDLBfloat, 16, "bf16"}, {kDLBool, 8, "bool"},
    };
    if (lanes == 1)
        for (size_t i = 0; i < sizeof known / sizeof known[0]; ++i)
            if (known[i].code == code && known[i].bits == bits)
                return known[i].name;
    snprintf(buf, size, "DLPack type (code %u, %u bits, %u lanes)", code, bits, lanes);
    return buf;
}

static const char* bt_memory_name(int device_type)
{
    switch (device_type) {
    case kDLCPU: return "host memory";
    case kDLCUDAHost: return "CUDA pinned host memory";
    case kDLROCM: return "ROCm device memory";
    case kDLROCMHost: return "ROCm host memory";
    default: return "memory that is not CUDA device memory";
    }
}

/* "f64 DLTensor of shape (8,) on cuda:0", from fields not yet checked. */
static void bt_describe(const DLTensor* t, char* buf, size_t size)
{
    char dtype[64];
    size_t used = (size_t)snprintf(buf, size, "%s DLTensor of shape (",
                                   bt_dtype_name(t->dtype.code, t->dtype.bits, t->dtype.lanes, dtype, sizeof dtype));
    const int shown = t->shape == NULL || t->ndim < 0 ? 0 : t->ndim < BT_MAX_RANK ? t->ndim : BT_MAX_RANK;
    for (int d = 0; d < shown && used < size; ++d)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (used < size)
        used += (size_t)snprintf(buf + used, size - used, "%s)", t->shape == NULL && t->ndim > 0 ? "unknown"
                                 : shown < t->ndim ? ", ..." : t->ndim == 1 ? "," : "");
    if (used >= size)
        return;
    const int type = (int)t->device.device_type;
    if (type == kDLCUDA)
        snprintf(buf + used, size - used, " on cuda:%d", t->device.device_id);
    else if (type == kDLCUDAManaged)
        snprintf(buf + used, size - used, " in managed memory of cuda:%d", t->device.device_id);
    else
        snprintf(buf + used, size - used, " in %s (DLPack device type %d)", bt_memory_name(type), type);
}

/* "mismatched types: parameter `a` of kernel `K` expects Slice[f32], got ... (why)" */
static int bt_mismatch(const bt_kernel* k, const bt_param_spec* p, const DLTensor* t, const char* why,
                       const char* help)
{
    char got[256] = "NULL";
    if (t != NULL)
        bt_describe(t, got, sizeof got);
    return bt_fail(BT_ERR_MISMATCHED_TYPES, help,
                   "mismatched types: parameter `%s` of kernel `%s` expects %s, got %s%s%s%s%s", p->name,
                   k->name, p->type_name, t != NULL ? "a " : "", got, why ? " (" : "", why ? why : "",
                   why ? ")" : "");
}

/* ------------------------------------------------------------------------
 * Steps 1-3: launch configuration, arguments, aliasing
 * ------------------------------------------------------------------------ */

static int bt_check_config(const bt_kernel* k, const bt_launch_config* cfg, const uint32_t* block)
{
    if (cfg == NULL)
        return bt_fail(BT_ERR_CONTRACT, "pass a bt_launch_config holding the grid to launch",
                       "launch contract violated: kernel `%s` got no launch configuration (cfg is NULL)",
                       k->name);
    const uint32_t* g = cfg->grid;
    for (int axis = 0; axis < 3; ++axis)
        if (g[axis] == 0)
            return bt_fail(BT_ERR_CONTRACT, "an empty problem needs no launch; skip it on the host",
                           "launch contract violated: kernel `%s` got grid (%u, %u, %u), but every grid "
                           "dimension must be at least 1 (axis %c is 0)", k->name, g[0], g[1], g[2], "xyz"[axis]);
    if (block == NULL && k->block[0] == 0)
        return bt_fail(BT_ERR_CONTRACT, "pass the block shape to launch with, e.g. {256, 1, 1}",
                       "launch contract violated: kernel `%s` has no launch contract, and its unsafe "
                       "launch got no block (block is NULL)", k->name);
    if (block == NULL) {
        if (k->index_dims == 1 && (g[1] != 1 || g[2] != 1))
            return bt_fail(BT_ERR_CONTRACT, "launch a grid (n_blocks, 1, 1)",
                           "launch contract violated: kernel `%s` indexes its writes with `index_1d()`, "
                           "so its grid must be 1-D, got grid (%u, %u, %u)", k->name, g[0], g[1], g[2]);
        if (k->index_dims == 2 && g[2] != 1)
            return bt_fail(BT_ERR_CONTRACT, NULL,
                           "launch contract violated: kernel `%s` indexes its writes with `index_2d()`, "
                           "so its grid must have z == 1, got grid (%u, %u, %u)", k->name, g[0], g[1], g[2]);
    } else {
        for (int axis = 0; axis < 3; ++axis)
            if (block[axis] == 0)
                return bt_fail(BT_ERR_CONTRACT, NULL,
                               "launch contract violated: kernel `%s` got block (%u, %u, %u), but a "
                               "block's %c dimension must be at least 1", k->name, block[0], block[1],
                               block[2], "xyz"[axis]);
    }
    if (cfg->shared_mem != 0 && cfg->shared_mem < k->dynamic_shared)
        return bt_fail(BT_ERR_CONTRACT, "pass shared_mem = 0 to use the contract's amount",
                       "launch contract violated: kernel `%s` needs %u bytes of dynamic shared memory, "
                       "got %u", k->name, k->dynamic_shared, cfg->shared_mem);
    return BT_OK;
}

/* Whether two different indices of a (non-empty) view reach one element:
 * taken from the smallest stride up, each stride must step past everything
 * the smaller ones reach (the Python host's ArrayView.overlaps_itself). */
static int bt_overlaps_itself(const bt_arg* a, int ndim)
{
    int axes[BT_MAX_RANK];
    int n = 0;
    for (int d = 0; d < ndim; ++d)
        if (a->shape[d] > 1)
            axes[n++] = d;
    for (int i = 1; i < n; ++i) /* insertion sort by |stride| */
        for (int j = i; j > 0 && llabs(a->strides[axes[j]]) < llabs(a->strides[axes[j - 1]]); --j) {
            int t = axes[j];
            axes[j] = axes[j - 1];
            axes[j - 1] = t;
        }
    int64_t reach = 0; /* furthest element offset the smaller strides reach */
    for (int i = 0; i < n; ++i) {
        if (a->strides[axes[i]] == INT64_MIN)
            return 1;
        int64_t s = llabs(a->strides[axes[i]]);
        if (s <= reach)
            return 1;
        if (__builtin_mul_overflow(s, a->shape[axes[i]] - 1, &s) || __builtin_add_overflow(reach, s, &reach))
            return 1;
    }
    return 0;
}

/* Row-major contiguous; an axis of extent 1 may have any stride (the
 * Python host's ArrayView.is_contiguous). */
static int bt_is_contiguous(const bt_arg* a, int ndim)
{
    int64_t expected = 1;
    for (int d = ndim - 1; d >= 0; --d) {
        if (a->shape[d] != 1 && a->strides[d] != expected)
            return 0;
        if (__builtin_mul_overflow(expected, a->shape[d], &expected))
            return 0;
    }
    return 1;
}

/* The bytes [lo, hi) a non-empty view may touch; 0 when that overflows. */
static int bt_byte_range(bt_arg* a, int ndim, int64_t elem, uintptr_t base)
{
    int64_t low = 0, high = 0; /* element offsets of the lowest and highest element */
    for (int d = 0; d < ndim; ++d) {
        int64_t span;
        if (__builtin_mul_overflow(a->strides[d], a->shape[d] - 1, &span) || span == INT64_MIN)
            return 0;
        int64_t* end = span < 0 ? &low : &high;
        if (__builtin_add_overflow(*end, span, end))
            return 0;
    }
    int64_t low_bytes, high_bytes;
    if (__builtin_mul_overflow(low, elem, &low_bytes) || __builtin_add_overflow(high, 1, &high) ||
        __builtin_mul_overflow(high, elem, &high_bytes))
        return 0;
    /* and within the address space: lo = base + low_bytes (<= 0) and hi must not wrap */
    const uintptr_t below = (uintptr_t)0 - (uintptr_t)low_bytes;
    if (below > base || __builtin_add_overflow(base, (uintptr_t)high_bytes, &a->hi))
        return 0;
    a->lo = base - below;
    return 1;
}

/* "records of `Particle` are passed as their bytes: a uint8 or int8 array of shape (n, 32)" (the
 * Python host's words, runtime/record_arrays.py) for a parameter of `ndim` axes of records. */
static const char* bt_record_bytes(const bt_record* r, int ndim, char* buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "records of `%s` are passed as their bytes: a uint8 or int8 "
                                   "array of shape (", r->name);
    for (int d = 0; d < ndim && used < size; ++d) {
        if (ndim == 1)
            used += (size_t)snprintf(buf + used, size - used, "n, ");
        else
            used += (size_t)snprintf(buf + used, size - used, "n%d, ", d);
    }
    if (used < size)
        snprintf(buf + used, size - used, "%u)", r->size);
    return buf;
}

/* The axes of a record array's bytes (`t`, of ndim + 1 dimensions, its extents checked): the last
 * one a whole, contiguous record, the others whole records apart; a->strides (the DLTensor's, in
 * bytes) become strides in records. */
static int bt_check_record_axes(const bt_kernel* k, const bt_param_spec* p, const DLTensor* t, bt_arg* a, int ndim)
{
    char why[256];
    const bt_record* r = p->record;
    const int64_t size = (int64_t)r->size;
    if (t->shape[ndim] != size) {
        snprintf(why, sizeof why, "its last axis has %lld bytes, but a `%s` record has %lld",
                 (long long)t->shape[ndim], r->name, (long long)size);
        return bt_mismatch(k, p, t, why, NULL);
    }
    if (t->strides == NULL)
        return BT_OK; /* compact: the strides in records are already in a->strides */
    if (t->strides[ndim] != 1 && size > 1) {
        snprintf(why, sizeof why, "the bytes of a record are not contiguous: its last axis has stride %lld",
                 (long long)t->strides[ndim]);
        return bt_mismatch(k, p, t, why, NULL);
    }
    for (int d = 0; d < ndim; ++d) {
        if (a->shape[d] > 1 && a->strides[d] % size != 0) {
            char strides[160];
            bt_format_extents(strides, sizeof strides, t->strides, ndim + 1);
            snprintf(why, sizeof why, "its strides %s (in bytes) are not whole `%s` records of %lld bytes",
                     strides, r->name, (long long)size);
            return bt_mismatch(k, p, t, why, NULL);
        }
    }
    /* an axis of extent 0 or 1 is never stepped along: any stride will do */
    for (int d = 0; d < ndim; ++d)
        a->strides[d] = a->strides[d] % size == 0 ? a->strides[d] / size : 0;
    return BT_OK;
}

static int bt_check_buffer(const bt_kernel* k, const bt_param_spec* p, const DLTensor* t, bt_arg* a)
{
    char why[256];
    if (t == NULL)
        return bt_mismatch(k, p, t, NULL, NULL);
    const int device_type = (int)t->device.device_type;
    if (device_type != kDLCUDA && device_type != kDLCUDAManaged)
        return bt_mismatch(k, p, t, "the kernel reads GPU memory", "copy the data to the GPU first");
    const bt_record* r = p->record;
    const int ndim = p->kind == BT_KIND_SLICE ? 1 : p->rank;
    const int dims = ndim + (r != NULL); /* the bytes of an array of records have one axis more */
    if (r != NULL) {
        if ((t->dtype.code != kDLUInt && t->dtype.code != kDLInt) || t->dtype.bits != 8 || t->dtype.lanes != 1 ||
            t->ndim != dims)
            return bt_mismatch(k, p, t, bt_record_bytes(r, ndim, why, sizeof why), NULL);
    } else if (t->dtype.code != p->code || t->dtype.bits != p->bits || t->dtype.lanes != 1 || t->ndim != ndim) {
        return bt_mismatch(k, p, t, NULL, NULL);
    }
    if (dims > 0 && t->shape == NULL)
        return bt_mismatch(k, p, t, "its shape is NULL", NULL);

    int64_t count = 1;
    for (int d = 0; d < dims; ++d) {
        if (t->shape[d] < 0)
            return bt_mismatch(k, p, t, "a negative extent", NULL);
        if (__builtin_mul_overflow(count, t->shape[d], &count))
            return bt_mismatch(k, p, t, "more elements than int64 counts", NULL);
        if (d < ndim)
            a->shape[d] = t->shape[d];
    }
    if (t->strides != NULL) {
        for (int d = 0; d < ndim; ++d)
            a->strides[d] = t->strides[d];
    } else {
        int64_t step = 1; /* compact row-major, as DLPack means a NULL strides */
        for (int d = ndim - 1; d >= 0; --d) {
            a->strides[d] = step;
            step *= a->shape[d] > 1 ? a->shape[d] : 1;
        }
    }
    if (r != NULL) {
        const int status = bt_check_record_axes(k, p, t, a, ndim);
        if (status != BT_OK)
            return status;
    }
    if (p->kind == BT_KIND_SLICE && a->shape[0] > 1 && a->strides[0] != 1) {
        snprintf(why, sizeof why, "not contiguous: stride %lld %s", (long long)a->strides[0],
                 r != NULL ? "records" : "elements");
        return bt_mismatch(k, p, t, why, "pass a contiguous copy");
    }
    if (p->kind == BT_KIND_TILE && !bt_is_contiguous(a, ndim)) {
        char strides[96];
        bt_format_extents(strides, sizeof strides, a->strides, ndim);
        snprintf(why, sizeof why, "not contiguous: strides %s in elements; tile kernels take row-major "
                 "contiguous tensors", strides);
        return bt_mismatch(k, p, t, why, "pass a contiguous copy");
    }

    const int64_t elem = r != NULL ? (int64_t)r->size : p->bits / 8;
    const int64_t align = r != NULL ? (int64_t)r->align : elem; /* a record's: its largest field's */
    uintptr_t base;
    if (__builtin_add_overflow((uintptr_t)t->data, (uintptr_t)t->byte_offset, &base))
        return bt_mismatch(k, p, t, "its data pointer plus byte_offset is not a 64-bit address", NULL);
    if (count > 0 && t->data == NULL)
        return bt_mismatch(k, p, t, "its data pointer is null", NULL);
    if (base % (uintptr_t)align != 0) {
        snprintf(why, sizeof why, "its first element at %p is not aligned to %lld bytes", (void*)base, (long long)align);
        return bt_mismatch(k, p, t, why, NULL);
    }
    if (p->kind == BT_KIND_TENSOR && p->role != BT_ROLE_IN && count > 0 && bt_overlaps_itself(a, ndim))
        return bt_mismatch(k, p, t, "its strides make different indices write the same element", NULL);

    a->lo = a->hi = 0; /* empty: overlaps nothing */
    if (count > 0 && !bt_byte_range(a, ndim, elem, base))
        return bt_mismatch(k, p, t, "it spans more memory than int64 counts", NULL);
    a->data = (void*)base;
    a->device_type = device_type;
    a->device_id = t->device.device_id;
    return BT_OK;
}

static int bt_check_devices_and_aliasing(const bt_kernel* k, const bt_arg* args)
{
    const bt_param_spec* p = k->buffers;
    for (int i = 1; i < k->n_buffers; ++i)
        if (args[i].device_id != args[0].device_id)
            return bt_fail(BT_ERR_MISMATCHED_TYPES, "move every argument to one device before the launch",
                           "mismatched types: arguments of kernel `%s` are on different devices: `%s` is "
                           "on cuda:%d, `%s` is on cuda:%d", k->name, p[0].name, args[0].device_id,
                           p[i].name, args[i].device_id);
    for (int i = 0; i < k->n_buffers; ++i)
        for (int j = i + 1; j < k->n_buffers; ++j) {
            if (p[i].role == BT_ROLE_IN && p[j].role == BT_ROLE_IN)
                continue;
            const bt_arg* a = &args[i];
            const bt_arg* b = &args[j];
            if (!(a->lo < b->hi && b->lo < a->hi))
                continue;
            const int w = p[i].role != BT_ROLE_IN ? i : j; /* the written one */
            const int o = w == i ? j : i;
            char head[256], help[128];
            if (p[o].role != BT_ROLE_IN)
                snprintf(head, sizeof head, "cannot borrow `%s` as mutable more than once", p[w].name);
            else
                snprintf(head, sizeof head, "cannot borrow `%s` as mutable because it is also borrowed "
                         "as immutable (as `%s`)", p[w].name, p[o].name);
            snprintf(help, sizeof help, "pass a separate buffer for `%s`", p[w].name);
            return bt_fail(BT_ERR_ALIAS, help,
                           "%s: kernel `%s` writes `%s`, and `%s` (bytes %#llx..%#llx) overlaps `%s` "
                           "(bytes %#llx..%#llx)", head, k->name, p[w].name, p[w].name,
                           (unsigned long long)args[w].lo, (unsigned long long)args[w].hi, p[o].name,
                           (unsigned long long)args[o].lo, (unsigned long long)args[o].hi);
        }
    return BT_OK;
}

int bt_check_arguments(const bt_kernel* k, const DLTensor* const* tensors, bt_arg* args)
{
    int status = BT_OK;
    for (int i = 0; status == BT_OK && i < k->n_buffers; ++i)
        status = bt_check_buffer(k, &k->buffers[i], tensors[i], &args[i]);
    if (status == BT_OK)
        status = bt_check_devices_and_aliasing(k, args);
    return status;
}

int bt_prepare(const bt_kernel* k, const bt_launch_config* cfg, const uint32_t* block,
               const DLTensor* const* tensors, bt_arg* args)
{
    int status = bt_check_config(k, cfg, block);
    if (status == BT_OK)
        status = bt_check_arguments(k, tensors, args);
    return status;
}

int bt_fail_requires(const bt_kernel* k, const char* relation, int unevaluable, const char* values_fmt, ...)
{
    char values[768];
    va_list ap;
    va_start(ap, values_fmt);
    vsnprintf(values, sizeof values, values_fmt, ap);
    va_end(ap);
    return bt_fail(BT_ERR_CONTRACT, "pass arguments whose sizes satisfy the kernel's `requires`",
                   "launch contract violated: kernel `%s` requires `%s` but %s%s", k->name, relation,
                   values[0] ? values : "it is false",
                   unevaluable ? " (it overflows int64 or divides by zero)" : "");
}
