/*
 * What Tile launchers add to the checks of bt_checks.c: each argument is
 * owned by the launch (no tensor twice), the grid covers the tiles of the
 * grid output (computed here, not taken from the caller), and the
 * dispatching launcher's refusal of a tile shape nobody compiled. Nothing
 * here touches the driver but a persistent launch, which asks for the SMs.
 */
#include "bt_runtime.h"

#include <stdio.h>

/* CUDA's grid limits along x, y, z (every device of compute capability >= 3.0). */
static const uint64_t bt_max_grid[3] = {2147483647u, 65535u, 65535u};

void bt_format_extents(char* buf, size_t size, const int64_t* values, int n)
{
    size_t used = (size_t)snprintf(buf, size, "(");
    for (int d = 0; d < n && used < size; ++d)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? ", " : "", (long long)values[d]);
    if (used < size)
        snprintf(buf + used, size - used, "%s)", n == 1 ? "," : "");
}

/* The same DLTensor for two parameters: a launch owns each argument (BT0502). */
static int bt_tile_refuse_repeats(const bt_kernel* k, const DLTensor* const* tensors)
{
    const bt_param_spec* p = k->buffers;
    for (int i = 0; i < k->n_buffers; ++i)
        for (int j = i + 1; j < k->n_buffers; ++j) {
            if (tensors[i] == NULL || tensors[i] != tensors[j])
                continue;
            const int w = p[j].role != BT_ROLE_IN && p[i].role == BT_ROLE_IN ? j : i; /* the written one */
            const int o = w == i ? j : i;
            char help[128];
            snprintf(help, sizeof help, "pass a separate buffer for `%s`", p[w].name);
            if (p[w].role == BT_ROLE_IN)
                return bt_fail(BT_ERR_ALIAS, "a Tile launch takes ownership of each argument; pass separate "
                               "tensors (copy one if both must hold the same data)",
                               "cannot move the same DLTensor into `%s` twice: it is passed as `%s` and as `%s`",
                               k->name, p[i].name, p[j].name);
            if (p[o].role != BT_ROLE_IN)
                return bt_fail(BT_ERR_ALIAS, help, "cannot borrow `%s` as mutable more than once: kernel `%s` "
                               "writes `%s`, and the same DLTensor is passed as `%s` and as `%s`", p[w].name,
                               k->name, p[w].name, p[i].name, p[j].name);
            return bt_fail(BT_ERR_ALIAS, help, "cannot borrow `%s` as mutable because it is also borrowed as "
                           "immutable (as `%s`): kernel `%s` writes `%s`, and the same DLTensor is passed as `%s` "
                           "and as `%s`", p[w].name, p[o].name, k->name, p[w].name, p[i].name, p[j].name);
        }
    return BT_OK;
}

int bt_tile_prepare(const bt_kernel* k, const bt_launch_config* cfg, const DLTensor* const* tensors, bt_arg* args)
{
    if (cfg == NULL)
        return bt_fail(BT_ERR_CONTRACT, "pass a bt_launch_config; its grid may be zeros, the launcher computes it",
                       "launch contract violated: kernel `%s` got no launch configuration (cfg is NULL)", k->name);
    int status = bt_tile_refuse_repeats(k, tensors);
    if (status == BT_OK)
        status = bt_check_arguments(k, tensors, args);
    if (status == BT_OK && cfg->shared_mem != 0 && cfg->shared_mem < k->dynamic_shared)
        status = bt_fail(BT_ERR_CONTRACT, "pass shared_mem = 0 to use the specialization's amount",
                         "launch contract violated: kernel `%s` needs %u bytes of dynamic shared memory, got %u",
                         k->name, k->dynamic_shared, cfg->shared_mem);
    return status;
}

/* The launch grid over `counts` tiles (axis order), the Python host's rule (runtime/tile/grid.py):
 * the natural grid (the last axis along x, the one before along y, the rest along z, axis
 * rank-3 fastest) when it fits; else, for two or three axes, the tiles in row-major order with x = min(total,
 * 2^31 - 1) and the rest spilled into y, then z (the blocks past the last tile return at once).
 * Returns 0 when no grid fits. */
static int bt_tile_launch_grid(const uint64_t* counts, int rank, uint64_t* grid)
{
    int fits = 1, empty = 0;
    uint64_t total = 1;
    grid[0] = grid[1] = grid[2] = 1;
    for (int along = 0; along < rank; ++along) {
        /* the axes before rank-3 (rank-4/5 outputs) fold into z, axis rank-3 fastest */
        const uint64_t n = counts[rank - 1 - along];
        const int d = along < 2 ? along : 2;
        if (n != 0 && grid[d] > UINT64_MAX / n)
            return 0;
        grid[d] *= n;
        empty |= n == 0;
    }
    for (int d = 0; d < 3; ++d)
        fits &= grid[d] <= bt_max_grid[d];
    if (empty || fits)
        return 1;
    if (rank < 2)
        return 0;
    for (int d = 0; d < rank; ++d) {
        if (total > UINT64_MAX / counts[d])
            return 0; /* past x * y * z blocks in any case */
        total *= counts[d];
    }
    grid[0] = total < bt_max_grid[0] ? total : bt_max_grid[0];
    const uint64_t rest = (total - 1) / grid[0] + 1;
    grid[1] = rest < bt_max_grid[1] ? rest : bt_max_grid[1];
    grid[2] = (rest - 1) / grid[1] + 1;
    return grid[2] <= bt_max_grid[2];
}

/* Threads and blocks one SM holds, and the shared memory a block may use there (grid.py's figures). */
enum { BT_SM_THREADS = 2048, BT_SM_BLOCKS = 32, BT_SM_SHARED_BYTES = 227 * 1024 };

/* The persistent grid along x: min(tiles, SMs x blocks per SM), as grid.persistent_grid. */
static uint64_t bt_tile_persistent_x(const bt_kernel* k, uint64_t total, int sms)
{
    const uint64_t threads = (uint64_t)k->block[0] * k->block[1] * k->block[2];
    uint64_t fit = BT_SM_THREADS / (threads ? threads : 1);
    if (fit > BT_SM_BLOCKS)
        fit = BT_SM_BLOCKS;
    if (k->dynamic_shared && fit > BT_SM_SHARED_BYTES / k->dynamic_shared)
        fit = BT_SM_SHARED_BYTES / k->dynamic_shared;
    if (fit < 1)
        fit = 1;
    uint64_t wave = (uint64_t)(sms > 0 ? sms : 1) * fit;
    if (wave > bt_max_grid[0])
        wave = bt_max_grid[0];
    return total < wave ? total : wave;
}

/* The kernel's trailing tile schedule for `s` (abi.TILE_SCHEDULE): -1 the compiler's order, 1 rows,
 * G > 1 bands of G rows; a bad option is BT0600 naming it, as tile.partition words it. */
static int bt_tile_schedule_word(const bt_kernel* k, const bt_tile* tile, const bt_tile_schedule* s, int64_t* word)
{
    static const char* const orders = "pass BT_TILE_ORDER_COMPILED, BT_TILE_ORDER_ROW or BT_TILE_ORDER_GROUPED";
    *word = -1;
    if (s == NULL)
        return BT_OK;
    if (s->order < BT_TILE_ORDER_COMPILED || s->order > BT_TILE_ORDER_GROUPED)
        return bt_fail(BT_ERR_CONTRACT, orders, "unknown tile order: `order` is %d", (int)s->order);
    if (s->order != BT_TILE_ORDER_GROUPED && s->group != 0)
        return bt_fail(BT_ERR_CONTRACT, "pass order = BT_TILE_ORDER_GROUPED with a group, or group = 0",
                       "`group` is an option of the grouped order, but `order` is %d", (int)s->order);
    if (s->group < 0)
        return bt_fail(BT_ERR_CONTRACT, "pass a positive int, such as 8 (0: 8)",
                       "`group` must be at least 1 (tile rows per band), got %d", (int)s->group);
    if (s->order == BT_TILE_ORDER_GROUPED && tile->rank != 2)
        return bt_fail(BT_ERR_CONTRACT, "pass order = BT_TILE_ORDER_ROW or BT_TILE_ORDER_COMPILED for this partition",
                       "the grouped order is an order of 2-D tile grids, but the tile shape has %d ax%s",
                       tile->rank, tile->rank == 1 ? "is" : "es");
    if (s->persistent != 0 && s->persistent != 1)
        return bt_fail(BT_ERR_CONTRACT, NULL, "`persistent` is 1 or 0, got %d", (int)s->persistent);
    const int chosen = s->order != BT_TILE_ORDER_COMPILED || s->persistent;
    if (chosen && !tile->takes_schedule)
        return bt_fail(BT_ERR_CONTRACT, "rebuild the kernel's package with this buildtile, or launch it without "
                       "a schedule", "launch contract violated: kernel `%s` visits its tiles in the order it was "
                       "compiled with, but the launch asks for another schedule", k->name);
    if (s->order == BT_TILE_ORDER_ROW)
        *word = 1;
    else if (s->order == BT_TILE_ORDER_GROUPED)
        *word = s->group ? s->group : 8;
    return BT_OK;
}

int bt_tile_grid(const bt_kernel* k, const bt_tile* tile, const bt_launch_config* cfg,
                 const bt_tile_schedule* schedule, const bt_arg* args, bt_launch_config* launch, int* empty,
                 int64_t* word)
{
    int status = bt_tile_schedule_word(k, tile, schedule, word);
    if (status != BT_OK)
        return status;
    const bt_arg* out = &args[tile->grid_buffer];
    const char* name = k->buffers[tile->grid_buffer].name;
    uint64_t tiles[5] = {1, 1, 1, 1, 1}; /* per axis of the grid output */
    uint64_t counts[3];            /* the launch grid, along x, y, z */
    *empty = 0;
    for (int axis = 0; axis < tile->rank; ++axis) {
        const int64_t n = out->shape[axis];
        tiles[axis] = n == 0 ? 0 : (uint64_t)((n - 1) / tile->shape[axis]) + 1;
        if (tiles[axis] == 0)
            *empty = 1;
    }
    if (!bt_tile_launch_grid(tiles, tile->rank, counts)) {
        char shape[160], extents[160], need[96];
        bt_format_extents(shape, sizeof shape, out->shape, tile->rank);
        bt_format_extents(extents, sizeof extents, tile->shape, tile->rank);
        if (tile->rank == 1)
            return bt_fail(BT_ERR_CONTRACT, "partition the output into larger tiles (a compiled specialization)",
                           "launch contract violated: kernel `%s` needs %llu tiles along axis 0 of `%s` (shape %s, "
                           "tile shape %s), but CUDA runs at most %llu blocks along x", k->name,
                           (unsigned long long)tiles[0], name, shape, extents, (unsigned long long)bt_max_grid[0]);
        size_t used = 0;
        for (int axis = 0; axis < tile->rank && used < sizeof need; ++axis)
            used += (size_t)snprintf(need + used, sizeof need - used, "%s%llu", axis ? " x " : "",
                                     (unsigned long long)tiles[axis]);
        return bt_fail(BT_ERR_CONTRACT, "partition the output into larger tiles (a compiled specialization)",
                       "launch contract violated: kernel `%s` needs %s tiles of `%s` (shape %s, tile shape %s), "
                       "but CUDA runs at most %llu x %llu x %llu blocks", k->name, need, name, shape, extents,
                       (unsigned long long)bt_max_grid[0], (unsigned long long)bt_max_grid[1],
                       (unsigned long long)bt_max_grid[2]);
    }
    if (schedule != NULL && schedule->persistent && !*empty) {
        int sms = 0;
        status = bt_multiprocessors(k, args, &sms);
        if (status != BT_OK)
            return status;
        counts[0] = bt_tile_persistent_x(k, tiles[0] * tiles[1] * tiles[2] * tiles[3] * tiles[4], sms);
        counts[1] = counts[2] = 1;
    }
    const uint32_t* g = cfg->grid;
    const int given = g[0] != 0 || g[1] != 0 || g[2] != 0;
    if (given && (g[0] != counts[0] || g[1] != counts[1] || g[2] != counts[2]))
        return bt_fail(BT_ERR_CONTRACT, "leave cfg->grid zero: a Tile launcher computes its grid",
                       "launch contract violated: kernel `%s` launches one block per tile of `%s`, grid "
                       "(%llu, %llu, %llu), but cfg->grid is (%u, %u, %u)", k->name, name,
                       (unsigned long long)counts[0], (unsigned long long)counts[1],
                       (unsigned long long)counts[2], g[0], g[1], g[2]);
    *launch = *cfg;
    for (int along = 0; along < 3; ++along)
        launch->grid[along] = (uint32_t)counts[along];
    return BT_OK;
}

int bt_tile_shape_is(const int64_t* given, const int64_t* compiled, int n)
{
    for (int d = 0; d < n; ++d)
        if (given[d] != compiled[d])
            return 0;
    return 1;
}

int bt_tile_unknown_shape(const char* kernel, const char* const* outs, const int* ranks, int n_outs,
                          const int64_t* tile_shape, const char* compiled)
{
    static const char* const help = "partition the output into tiles of a compiled shape, or add this shape to "
                                    "the kernel's specializations (`@tile.kernel(specialize=...)` or pyproject) "
                                    "and rebuild";
    char what[512];
    size_t used = 0;
    int offset = 0;
    for (int i = 0; i < n_outs && used < sizeof what; ++i) {
        char extents[160];
        bt_format_extents(extents, sizeof extents, tile_shape + offset, ranks[i]);
        offset += ranks[i];
        if (n_outs == 1)
            used += (size_t)snprintf(what, sizeof what, "tile shape %s of `%s`", extents, outs[i]);
        else
            used += (size_t)snprintf(what + used, sizeof what - used, "%s%s: %s", i ? ", " : "tile shapes ",
                                     outs[i], extents);
    }
    return bt_fail(BT_ERR_CONTRACT, help,
                   "launch contract violated: kernel `%s` has no specialization for %s; it was compiled for %s",
                   kernel, what, compiled);
}

/* Rule fewest-padded-v1, as buildtile/interop/tile_choice.py ranks: launchable, then the
 * fewest padded elements, then enough tiles to fill the GPU, then larger tiles, then order. */
int bt_tile_choose(const int64_t* extents, int rank, const int64_t* tiles, int n, const int* usable,
                   uint64_t fill_tiles)
{
    int best = -1;
    uint64_t best_key[4] = {0, 0, 0, 0};
    if (extents == NULL) { /* no usable grid output: the first candidate's launcher says why */
        for (int s = 0; s < n; ++s)
            if (usable[s])
                return s;
        return -1;
    }
    for (int s = 0; s < n; ++s) {
        if (!usable[s])
            continue;
        const int64_t* t = tiles + (size_t)s * (size_t)rank;
        uint64_t launchable = 0, covered = 1, real = 1, count = 1, size = 1;
        for (int axis = 0; axis < rank; ++axis) {
            const uint64_t e = (uint64_t)extents[axis], w = (uint64_t)t[axis];
            const uint64_t c = e == 0 ? 0 : (e - 1) / w + 1;
            if (c > bt_max_grid[rank - 1 - axis])
                launchable = 1;
            covered *= c * w;
            real *= e;
            count *= c;
            size *= w;
        }
        /* smaller is better; "larger tiles" as the complement of the size */
        const uint64_t key[4] = {launchable, covered - real, count >= fill_tiles ? 0 : 1, UINT64_MAX - size};
        int better = best < 0;
        for (int k = 0; k < 4 && !better; ++k) {
            if (key[k] != best_key[k]) {
                better = key[k] < best_key[k];
                break;
            }
        }
        if (better) {
            best = s;
            for (int k = 0; k < 4; ++k)
                best_key[k] = key[k];
        }
    }
    return best;
}

int bt_tile_dtypes_are(const DLTensor* const* tensors, const bt_param_spec* buffers, int n)
{
    for (int i = 0; i < n; ++i) {
        const DLTensor* t = tensors[i];
        if (t != NULL && (t->dtype.code != buffers[i].code || t->dtype.bits != buffers[i].bits))
            return 0;
    }
    return 1;
}

int bt_tile_unknown_dtypes(const char* kernel, const DLTensor* const* tensors, const bt_param_spec* buffers,
                           const int* generic, int n, const char* compiled)
{
    char given[512];
    size_t used = 0;
    given[0] = 0;
    for (int i = 0; i < n && used < sizeof given; ++i) {
        if (!generic[i] || tensors[i] == NULL)
            continue;
        char buf[64];
        const char* dtype = bt_dtype_name(tensors[i]->dtype.code, tensors[i]->dtype.bits, tensors[i]->dtype.lanes,
                                          buf, sizeof buf);
        used += (size_t)snprintf(given + used, sizeof given - used, "%s`%s` is %s", used ? ", " : "",
                                 buffers[i].name, dtype);
    }
    return bt_fail(BT_ERR_MISMATCHED_TYPES, "convert the arrays to a compiled dtype, or add this one to the "
                   "kernel's specializations (its dtype variable or `tile.product`) and rebuild",
                   "mismatched types: kernel `%s` has no specialization for these dtypes (%s); it was compiled "
                   "for %s", kernel, given, compiled);
}
