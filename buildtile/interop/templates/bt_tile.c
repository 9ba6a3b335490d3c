/*
 * What Tile launchers add to the checks of bt_checks.c: each argument is
 * owned by the launch (no tensor twice), the grid is one block per tile of
 * the grid output (computed here, not taken from the caller), and the
 * dispatching launcher's refusal of a tile shape nobody compiled. Nothing
 * here touches the driver.
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

int bt_tile_grid(const bt_kernel* k, const bt_tile* tile, const bt_launch_config* cfg, const bt_arg* args,
                 bt_launch_config* launch, int* empty)
{
    const bt_arg* out = &args[tile->grid_buffer];
    const char* name = k->buffers[tile->grid_buffer].name;
    uint64_t counts[3] = {1, 1, 1}; /* along x, y, z: axis rank-1 runs along x */
    *empty = 0;
    for (int along = 0; along < tile->rank; ++along) {
        const int axis = tile->rank - 1 - along;
        const int64_t n = out->shape[axis];
        counts[along] = n == 0 ? 0 : (uint64_t)((n - 1) / tile->shape[axis]) + 1;
        if (counts[along] == 0)
            *empty = 1;
        if (counts[along] > bt_max_grid[along]) {
            char shape[160], tiles[160];
            bt_format_extents(shape, sizeof shape, out->shape, tile->rank);
            bt_format_extents(tiles, sizeof tiles, tile->shape, tile->rank);
            return bt_fail(BT_ERR_CONTRACT, "partition the output into larger tiles (a compiled specialization)",
                           "launch contract violated: kernel `%s` needs %llu tiles along axis %d of `%s` (shape %s, "
                           "tile shape %s), but CUDA allows at most %llu blocks along %c", k->name,
                           (unsigned long long)counts[along], axis, name, shape, tiles,
                           (unsigned long long)bt_max_grid[along], "xyz"[along]);
        }
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
