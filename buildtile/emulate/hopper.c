/* The Hopper (sm_90a) instructions of a TMA entry, for runtime.c (which includes this file):
 * mbarriers, bulk tensor copies through tensor maps, wgmma, setmaxnreg. Implemented from the PTX
 * ISA's definitions:
 *
 * - An mbarrier (PTX ISA "Parallel Synchronization and Communication Instructions: mbarrier") has
 *   a phase, an expected arrival count, a pending arrival count and a tx-count. Its current phase
 *   completes when the pending count and the tx-count are both zero; the phase then advances and
 *   the pending count is reset to the expected count. try_wait.parity P is true when the phase of
 *   parity P is complete: the current phase's parity is not P. A waiting thread yields, as at
 *   bar.sync; one whose phase can never complete is a deadlock (EMU_DEADLOCK).
 * - cp.async.bulk.tensor.2d copies one box of a tensor map (buildtile/emulate/tensor_maps.py
 *   encodes them) into shared memory: elements outside the tensor are zero, the destination is
 *   swizzled (PTX ISA "Swizzling Modes": the 16-byte chunk at address bits 4.. XORed with address
 *   bits 7..), and the box's bytes complete tx-count on the mbarrier. A copy lands as late as
 *   allowed: when a thread waits on its mbarrier's phase.
 * - wgmma.mma_async m64nNk16 reads A and B through shared-memory matrix descriptors (PTX ISA
 *   "Matrix Descriptor Format", "Canonical Layouts") and is computed once per warpgroup, when its
 *   128 threads have met; the shared memory it reads stays reserved until wgmma.wait_group retires
 *   its group, and a write there before that is reported.
 *
 * Misuse the PTX ISA leaves undefined is EMU_ASYNC_MISUSE, with a reason (`other`, ASYNC_*). */

#define MAX_MBARRIERS 64
#define MAX_BULK 512
#define WARPGROUP 128
#define MAX_WARPGROUPS (MAX_THREADS / WARPGROUP)
#define MAX_MAXNREG 64
#define TENSOR_MAP_MAGIC 0x50414d5452544542ull   /* the bytes "BETRTMAP" (tensor_maps.py MAGIC) */

/* the reasons of EMU_ASYNC_MISUSE (machine.py words them) */
enum { ASYNC_NO_MBARRIER = 1, ASYNC_ARRIVALS, ASYNC_UNOBSERVED_PHASE, ASYNC_TENSOR_MAP, ASYNC_PARTIAL_WARPGROUP,
       ASYNC_DIVERGENT_WGMMA, ASYNC_NO_FENCE, ASYNC_DESCRIPTOR, ASYNC_PENDING_WRITE, ASYNC_MAXNREG,
       ASYNC_MAXNREG_WARPGROUP, ASYNC_BAR_COUNT, ASYNC_TX_COUNT };

/* ---------------------------------------------------------------- shared addresses */
/* Shared addresses reach the PTX as 32 bits (a shared pointer as i32) or, in a descriptor, 18: the
 * low bits of a host address of a shared variable. The variable that holds them gives the rest. */
static unsigned char *shared_at(uint64_t low, int bits) {
    uint64_t span = 1ull << bits, mask = span - 1;
    for (int i = 0; i < g_nshared; i++) {
        uint64_t lo = g_shared_lo[i], hi = g_shared_hi[i];
        uint64_t cand = (lo & ~mask) | (low & mask);
        if (cand < lo) cand += span;
        if (cand < hi) return (unsigned char *)(uintptr_t)cand;
    }
    return NULL;
}
static unsigned char *shared32(uint32_t a) { return shared_at(a, 32); }

/* ---------------------------------------------------------------- mbarriers */
struct mbarrier {
    unsigned char *addr;
    int expected, pending;
    int64_t tx;
    int phase;            /* phases completed */
    int unobserved;       /* its last phase completed and no wait has seen it yet */
};
static struct mbarrier g_mbar[MAX_MBARRIERS];
static int g_nmbar;

static struct mbarrier *mbarrier_at(uint32_t a, int site) {
    unsigned char *p = shared32(a);
    for (int i = 0; i < g_nmbar; i++)
        if (g_mbar[i].addr == p) return &g_mbar[i];
    fault(EMU_ASYNC_MISUSE, site, (uint64_t)(uintptr_t)p, 8, ASYNC_NO_MBARRIER);
    return NULL;
}
/* the object's bytes in shared memory: its counts, so a plain read sees a value */
static void mbarrier_store(struct mbarrier *b) {
    uint64_t word = (uint64_t)(uint32_t)b->pending | (uint64_t)(uint32_t)b->phase << 32;
    memcpy(b->addr, &word, 8);
}
static void mbarrier_try_complete(struct mbarrier *b) {
    if (b->pending == 0 && b->tx == 0) {
        b->phase++;
        b->pending = b->expected;
        b->unobserved = 1;
        g_progress++;
    }
    mbarrier_store(b);
}

void emu_mbarrier_init(uint32_t a, int count, int site) {
    unsigned char *p = shared32(a);
    if (!p) { fault(EMU_OUT_OF_BOUNDS, site, a, 8, -2); return; }
    if ((uintptr_t)p % 8) { fault(EMU_MISALIGNED, site, (uint64_t)(uintptr_t)p, 8, 0); return; }
    if (count < 1 || count > (1 << 20) - 1) {
        fault(EMU_ASYNC_MISUSE, site, (uint64_t)(uintptr_t)p, 8, ASYNC_ARRIVALS);
        return;
    }
    struct mbarrier *b = NULL;
    for (int i = 0; i < g_nmbar && !b; i++) if (g_mbar[i].addr == p) b = &g_mbar[i];
    if (!b) {
        if (g_nmbar == MAX_MBARRIERS) { fault(EMU_OVERFLOW, site, 0, 0, 0); return; }
        b = &g_mbar[g_nmbar++];
    }
    *b = (struct mbarrier){p, count, count, 0, 0, 0};
    mark_shared(p, 8);
    mbarrier_store(b);
}
/* fence.mbarrier_init, fence.proxy.async: one memory and one proxy here, so nothing to order */
void emu_fence_async(void) {}

static void mbarrier_arrive(struct mbarrier *b, int count, int site) {
    if (b->unobserved) fault(EMU_ASYNC_MISUSE, site, (uint64_t)(uintptr_t)b->addr, 8, ASYNC_UNOBSERVED_PHASE);
    b->pending -= count;
    if (b->pending < 0) {
        fault(EMU_ASYNC_MISUSE, site, (uint64_t)(uintptr_t)b->addr, 8, ASYNC_ARRIVALS);
        b->pending = 0;
    }
    mbarrier_try_complete(b);
}
static void mbarrier_expect(struct mbarrier *b, int64_t bytes, int site) {
    b->tx += bytes;
    if (b->tx > (1 << 20) - 1 || bytes < 0)
        fault(EMU_ASYNC_MISUSE, site, (uint64_t)(uintptr_t)b->addr, 8, ASYNC_TX_COUNT);
}
/* mbarrier.arrive{.expect_tx}: the state operand's value is the phase arrived in */
uint64_t emu_mbarrier_arrive(uint32_t a, int count, int site) {
    struct mbarrier *b = mbarrier_at(a, site);
    if (!b) return 0;
    uint64_t state = (uint64_t)b->phase;
    mbarrier_arrive(b, count, site);
    return state;
}
uint64_t emu_mbarrier_arrive_expect_tx(uint32_t a, int bytes, int site) {
    struct mbarrier *b = mbarrier_at(a, site);
    if (!b) return 0;
    uint64_t state = (uint64_t)b->phase;
    mbarrier_expect(b, bytes, site);
    mbarrier_arrive(b, 1, site);
    return state;
}
void emu_mbarrier_expect_tx(uint32_t a, int bytes, int site) {
    struct mbarrier *b = mbarrier_at(a, site);
    if (b) mbarrier_expect(b, bytes, site);
}

/* ---------------------------------------------------------------- bulk tensor copies */
/* The emulator's CUtensorMap (128 bytes; tensor_maps.py writes it as cuTensorMapEncodeTiled would
 * its own): a 2-D tiled map, innermost dimension first, zeros out of bounds. */
struct tensor_map {
    uint64_t magic, address, dims[2], stride;
    uint32_t box[2], elem_bytes, swizzle, data_type, reserved;
};
struct bulk_copy { unsigned char *dst; const struct tensor_map *map; int c0, c1, site; struct mbarrier *bar; };
static struct bulk_copy g_bulk[MAX_BULK];
static int g_nbulk;

/* the swizzled address (PTX ISA "Swizzling Modes"; Swizzle<B,4,3>): 16-byte chunks XORed with
 * address bits 7.. of a `bytes`-wide pattern (32, 64, 128; 0: none) */
static uint64_t swizzle(uint64_t addr, int bytes) {
    if (!bytes) return addr;
    uint64_t chunks = (uint64_t)bytes / 16 - 1;
    return addr ^ (((addr >> 7) & chunks) << 4);
}

static void pending_write_check(const void *p, int64_t size, int site);

/* whether [addr, addr + size) lies in one array of the launch (else the check records the fault) */
static int global_ok(uint64_t addr, int64_t size, int site) {
    for (int i = 0; i < g_nregions; i++)
        if (addr >= g_regions[i].lo && addr + (uint64_t)size <= g_regions[i].hi) return 1;
    emu_check_global(addr, size, 0, site);
    return 0;
}

static void bulk_land(const struct bulk_copy *c) {
    const struct tensor_map *m = c->map;
    int64_t eb = m->elem_bytes, row_bytes = (int64_t)m->box[0] * eb;
    for (uint32_t r = 0; r < m->box[1]; r++) {
        int64_t gr = (int64_t)c->c1 + r;
        /* the columns of this row inside the tensor: [first, end) */
        int64_t first = c->c0 < 0 ? 0 : c->c0, end = (int64_t)c->c0 + m->box[0];
        if (end > (int64_t)m->dims[0]) end = (int64_t)m->dims[0];
        int row_in = gr >= 0 && (uint64_t)gr < m->dims[1] && first < end;
        uint64_t row_address = m->address + (uint64_t)(row_in ? gr : 0) * m->stride;
        const unsigned char *row = (const unsigned char *)(uintptr_t)row_address;
        if (row_in && !global_ok((uint64_t)(uintptr_t)(row + first * eb), (end - first) * eb, c->site)) row_in = 0;
        for (uint32_t e = 0; e < m->box[0]; e++) {
            int64_t gc = (int64_t)c->c0 + e;
            uint64_t linear = (uint64_t)(uintptr_t)(c->dst + r * row_bytes + e * eb);
            unsigned char *dst = (unsigned char *)(uintptr_t)swizzle(linear, (int)m->swizzle);
            if (row_in && gc >= first && gc < end) memcpy(dst, row + gc * eb, (size_t)eb);
            else memset(dst, 0, (size_t)eb);
        }
    }
    int64_t bytes = row_bytes * m->box[1];
    pending_write_check(c->dst, bytes, c->site);
    mark_shared(c->dst, bytes);
    c->bar->tx -= bytes;
    mbarrier_try_complete(c->bar);
}
/* the copies in flight that complete on `b` (all of them: NULL), in the order they were issued */
static void bulk_land_on(const struct mbarrier *b) {
    int keep = 0;
    for (int i = 0; i < g_nbulk; i++) {
        if (!b || g_bulk[i].bar == b) bulk_land(&g_bulk[i]);
        else g_bulk[keep++] = g_bulk[i];
    }
    g_nbulk = keep;
}

void emu_tma_load_2d(uint32_t dst32, uint64_t map_address, int c0, int c1, uint32_t bar32, int site) {
    const struct tensor_map *m = (const struct tensor_map *)(uintptr_t)map_address;
    if (!m || m->magic != TENSOR_MAP_MAGIC || !m->elem_bytes) {
        fault(EMU_ASYNC_MISUSE, site, map_address, 128, ASYNC_TENSOR_MAP);
        return;
    }
    struct mbarrier *b = mbarrier_at(bar32, site);
    unsigned char *dst = shared32(dst32);
    int64_t bytes = (int64_t)m->box[0] * m->box[1] * m->elem_bytes;
    if (!dst || shared_index((uint64_t)(uintptr_t)dst, bytes) < 0) {
        fault(EMU_OUT_OF_BOUNDS, site, dst ? (uint64_t)(uintptr_t)dst : dst32, bytes, -2);
        return;
    }
    if ((uintptr_t)dst % 128) { fault(EMU_MISALIGNED, site, (uint64_t)(uintptr_t)dst, 128, 0); return; }
    if (!b) return;
    pending_write_check(dst, bytes, site);   /* it may land at once */
    if (g_nbulk == MAX_BULK) bulk_land_on(NULL);
    g_bulk[g_nbulk++] = (struct bulk_copy){dst, m, c0, c1, site, b};
}

/* mbarrier.try_wait.parity / test_wait.parity: true once the phase of `parity` is complete. A
 * thread that would spin yields until it is (the copies it waits for land first); a wait no thread
 * can end is a deadlock. */
int emu_mbarrier_wait_parity(uint32_t a, int parity, int site) {
    struct mbarrier *b = mbarrier_at(a, site);
    if (!b) return 1;
    if ((b->phase & 1) == (parity & 1)) bulk_land_on(b);
    if ((b->phase & 1) == (parity & 1)) {
        struct gthread *me = g_cur;
        if (!g_threaded) return 0;
        me->waiting = WAIT_MBARRIER;
        me->wait_word = &b->phase;
        me->wait_value = b->phase;
        me->wait_site = site;
        while (b->phase == me->wait_value) yield();
        me->waiting = WAIT_NONE;
        me->wait_word = NULL;
    }
    b->unobserved = 0;
    return 1;
}

/* ---------------------------------------------------------------- wgmma */
/* What each thread of a warpgroup passes to its wgmma; the first to run after the meeting computes
 * the whole 64 x N block for all of them. */
struct wgmma_call { float *acc; uint64_t a, b; int n, scale_d, flags; };
struct warpgroup_state {
    struct wgmma_call calls[WARPGROUP];
    int computed;                   /* the meeting generation last computed */
    uint64_t lo[2], hi[2];          /* what that wgmma read of shared memory (A, B) */
};
static struct warpgroup_state g_wg[MAX_WARPGROUPS];
static int g_pending_reads;         /* reads reserved by unretired wgmma groups, over all threads */
static struct gthread *g_block_threads;
static int g_block_nthreads;

enum { WGMMA_BF16 = 1, WGMMA_NEG_A = 2, WGMMA_NEG_B = 4, WGMMA_TRANS_A = 8, WGMMA_TRANS_B = 16 };

/* The address of element (mn, k) of an operand read through descriptor `d` (PTX ISA, "Canonical
 * Layouts"; T = 8 16-bit elements make 16 bytes):
 *   K-major, no swizzle:  ((8,m),(T,2k)):((1T,SBO),(1,LBO))
 *   K-major, W-byte:      ((8,m),(T,2k)):((W/2,SBO),(1,T)), Swizzle<log2(W/16),4,3>
 *   MN-major, no swizzle: ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
 *   MN-major, W-byte:     ((T,W/16,m),(8,k)):((1,T,LBO),(W/2,SBO)), Swizzle<log2(W/16),4,3>
 * with the swizzle applied to the address (the pattern repeats from a multiple of 8W bytes). */
static uint64_t descriptor_address(uint64_t start, uint64_t d, int mn, int k, int mn_major) {
    uint64_t lbo = ((d >> 16) & 0x3FFF) << 4, sbo = ((d >> 32) & 0x3FFF) << 4;
    static const int widths[4] = {0, 128, 64, 32};
    int w = widths[(d >> 62) & 3];
    uint64_t off, r8 = (uint64_t)(mn % 8), g8 = (uint64_t)(mn / 8), k8 = (uint64_t)(k % 8), kg = (uint64_t)(k / 8);
    if (!mn_major) {
        if (!w) off = 16u * r8 + sbo * g8 + 2u * k8 + lbo * kg;
        else off = (uint64_t)w * (uint64_t)(mn % 8) + sbo * (uint64_t)(mn / 8) + 2u * (uint64_t)k;
    } else {
        if (!w) off = 2u * r8 + sbo * g8 + 16u * k8 + lbo * kg;
        else {
            int span = w / 2;   /* elements of one pattern row along MN */
            off = 2u * (uint64_t)(mn % span) + lbo * (uint64_t)(mn / span) + (uint64_t)w * (uint64_t)(k % 8)
                  + sbo * (uint64_t)(k / 8);
        }
    }
    return swizzle(start + off, w);
}
static float half_to_float(uint16_t h);
static float bf16_to_float(uint16_t h);

/* One operand (rows x 16 of A, 16 x cols of B) read into `out` (row-major): 0, or -1 on a fault */
static int read_operand(uint64_t d, int rows, int cols, int is_a, int mn_major, int bf16, float *out,
                        uint64_t *lo, uint64_t *hi, int site) {
    if ((d >> 49) & 7) { fault(EMU_ASYNC_MISUSE, site, d, 8, ASYNC_DESCRIPTOR); return -1; }
    unsigned char *start = shared_at((d & 0x3FFF) << 4, 18);
    if (!start) { fault(EMU_ASYNC_MISUSE, site, d, 8, ASYNC_DESCRIPTOR); return -1; }
    *lo = UINT64_MAX; *hi = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            int mn = is_a ? r : c, k = is_a ? c : r;
            uint64_t addr = descriptor_address((uint64_t)(uintptr_t)start, d, mn, k, mn_major);
            if (shared_index(addr, 2) < 0) { fault(EMU_OUT_OF_BOUNDS, site, addr, 2, -2); return -1; }
            check_shared_read((void *)(uintptr_t)addr, 2, site);
            uint16_t h;
            memcpy(&h, (void *)(uintptr_t)addr, 2);
            out[r * cols + c] = bf16 ? bf16_to_float(h) : half_to_float(h);
            if (addr < *lo) *lo = addr;
            if (addr + 2 > *hi) *hi = addr + 2;
        }
    return 0;
}

static int warpgroup_of_me(int site) {
    int wg = g_cur->linear / WARPGROUP;
    if ((wg + 1) * WARPGROUP > g_nthreads) {
        fault(EMU_ASYNC_MISUSE, site, 0, 0, ASYNC_PARTIAL_WARPGROUP);
        return -1;
    }
    return wg;
}

static void wgmma_compute(struct warpgroup_state *s, int site) {
    const struct wgmma_call *c0 = &s->calls[0];
    for (int t = 1; t < WARPGROUP; t++) {
        const struct wgmma_call *c = &s->calls[t];
        if (c->a != c0->a || c->b != c0->b || c->n != c0->n || c->scale_d != c0->scale_d || c->flags != c0->flags) {
            fault(EMU_ASYNC_MISUSE, site, 0, 0, ASYNC_DIVERGENT_WGMMA);
            return;
        }
    }
    int n = c0->n, bf16 = c0->flags & WGMMA_BF16;
    static float A[64 * 16], B[16 * 256];
    if (read_operand(c0->a, 64, 16, 1, c0->flags & WGMMA_TRANS_A, bf16, A, &s->lo[0], &s->hi[0], site)) return;
    if (read_operand(c0->b, 16, n, 0, c0->flags & WGMMA_TRANS_B, bf16, B, &s->lo[1], &s->hi[1], site)) return;
    float sa = (c0->flags & WGMMA_NEG_A) ? -1.0f : 1.0f, sb = (c0->flags & WGMMA_NEG_B) ? -1.0f : 1.0f;
    /* D fragments (PTX ISA, "Register fragments: wgmma .m64nNk16"): thread t of the warpgroup,
     * warp w = t / 32, lane l: d[i] is row 16w + l/4 (+8 for i % 4 >= 2), column 8(i/4) + 2(l%4) + i%2 */
    for (int t = 0; t < WARPGROUP; t++) {
        int w = t / 32, l = t % 32;
        float *acc = s->calls[t].acc;
        for (int i = 0; i < n / 2; i++) {
            int row = 16 * w + l / 4 + ((i & 2) ? 8 : 0), col = 8 * (i / 4) + 2 * (l % 4) + (i & 1);
            float sum = c0->scale_d ? acc[i] : 0.0f;
            for (int k = 0; k < 16; k++) sum += (sa * A[row * 16 + k]) * (sb * B[k * n + col]);
            acc[i] = sum;
        }
    }
}

void emu_wgmma_fence(int site) { (void)site; g_cur->wg_fenced = 1; }

void emu_wgmma_mma(float *acc, int n, uint64_t a, uint64_t b, int scale_d, int flags, int site) {
    struct gthread *me = g_cur;
    if (!me->wg_fenced) fault(EMU_ASYNC_MISUSE, site, 0, 0, ASYNC_NO_FENCE);
    int wg = warpgroup_of_me(site);
    if (wg < 0 || !g_threaded) return;
    struct warpgroup_state *s = &g_wg[wg];
    s->calls[me->linear % WARPGROUP] = (struct wgmma_call){acc, a, b, n, scale_d != 0, flags};
    struct barrier *meeting = &me->block->warpgroups[wg];
    int generation = meeting->generation;
    barrier_wait(meeting, site);
    if (s->computed != generation) {   /* the first thread past the meeting computes for all */
        s->computed = generation;
        s->lo[0] = s->lo[1] = s->hi[0] = s->hi[1] = 0;
        wgmma_compute(s, site);
    }
    for (int o = 0; o < 2; o++) {      /* its reads stay reserved until its group retires */
        if (s->hi[o] <= s->lo[o]) continue;
        if (me->wg_nreads == MAX_WG_READS) { fault(EMU_OVERFLOW, site, 0, 0, 0); break; }
        me->wg_reads[me->wg_nreads++] = (struct wgmma_read){s->lo[o], s->hi[o], me->wg_group};
        g_pending_reads++;
    }
    me->wg_uncommitted = 1;
}
void emu_wgmma_commit(int site) {
    (void)site;
    g_cur->wg_group++;
    g_cur->wg_uncommitted = 0;
}
/* wgmma.wait_group n: at most the n most recent committed groups are still pending */
void emu_wgmma_wait(int n, int site) {
    (void)site;
    struct gthread *me = g_cur;
    int keep = 0;
    for (int i = 0; i < me->wg_nreads; i++) {
        if (me->wg_reads[i].group < me->wg_group - n) g_pending_reads--;
        else me->wg_reads[keep++] = me->wg_reads[i];
    }
    me->wg_nreads = keep;
    me->wg_fenced = 0;   /* the accumulators it hands back are registers again: fence before the next */
}
/* a write of shared memory that an unretired wgmma of any thread reads */
static void pending_write_check(const void *p, int64_t size, int site) {
    if (!g_pending_reads || !g_block_threads) return;
    uint64_t lo = (uint64_t)(uintptr_t)p, hi = lo + (uint64_t)size;
    for (int t = 0; t < g_block_nthreads; t++) {
        const struct gthread *th = &g_block_threads[t];
        for (int i = 0; i < th->wg_nreads; i++)
            if (lo < th->wg_reads[i].hi && th->wg_reads[i].lo < hi) {
                fault(EMU_ASYNC_MISUSE, site, lo, size, ASYNC_PENDING_WRITE);
                return;
            }
    }
}

/* ---------------------------------------------------------------- setmaxnreg */
/* A hint with no effect here, but the same instruction must be executed by every warp of a
 * warpgroup: the threads that executed each one are counted per warpgroup, and checked when the
 * block ends. */
struct maxnreg_count { int site, warpgroup, threads; };
static struct maxnreg_count g_maxnreg[MAX_MAXNREG];
static int g_nmaxnreg;

void emu_setmaxnreg(int count, int site) {
    if (count < 24 || count > 256 || count % 8) fault(EMU_ASYNC_MISUSE, site, 0, count, ASYNC_MAXNREG);
    int wg = warpgroup_of_me(site);
    if (wg < 0) return;
    for (int i = 0; i < g_nmaxnreg; i++)
        if (g_maxnreg[i].site == site && g_maxnreg[i].warpgroup == wg) { g_maxnreg[i].threads++; return; }
    if (g_nmaxnreg == MAX_MAXNREG) { fault(EMU_OVERFLOW, site, 0, 0, 0); return; }
    g_maxnreg[g_nmaxnreg++] = (struct maxnreg_count){site, wg, 1};
}

/* ---------------------------------------------------------------- named barriers */
/* bar.sync / bar.arrive a{, b}: barrier a (0-15) of b threads (all the block's without b). Barrier
 * 0 of the whole block is bar.sync 0's. Threads that returned count for no named barrier: a named
 * barrier they never reach leaves its waiters stuck, which is a deadlock. */
static struct barrier *named_barrier(int id, int count, int site) {
    struct block *k = g_cur->block;
    if (id < 0 || id > 15 || (count >= 0 && (count % 32 || count == 0 || count > (g_nthreads + 31) / 32 * 32))) {
        fault(EMU_ASYNC_MISUSE, site, 0, count, ASYNC_BAR_COUNT);
        return NULL;
    }
    if (id == 0 && (count < 0 || count == g_nthreads)) return &k->bar;
    struct barrier *b = &k->named[id];
    int expected = count < 0 ? g_nthreads : count;
    if (b->arrived && b->expected != expected) {
        fault(EMU_ASYNC_MISUSE, site, 0, count, ASYNC_BAR_COUNT);
        return NULL;
    }
    b->expected = expected;
    return b;
}
void emu_bar_sync(int id, int count, int site) {
    if (!g_threaded) return;
    struct barrier *b = named_barrier(id, count, site);
    if (b) barrier_wait(b, site);
}
void emu_bar_arrive(int id, int count, int site) {
    if (!g_threaded) return;
    struct barrier *b = named_barrier(id, count, site);
    if (!b) return;
    if (site >= 0) b->site = site;
    if (++b->arrived + b->exited >= b->expected) release(b);
}

/* what a thread stuck at an mbarrier waits for: its pending arrivals (high) and tx-count (low) */
static int64_t hopper_wait_detail(const struct gthread *t) {
    const struct mbarrier *b = (const struct mbarrier *)(const void *)((const char *)t->wait_word
                                                                       - offsetof(struct mbarrier, phase));
    return (int64_t)b->pending << 32 | (uint32_t)b->tx;
}

/* ---------------------------------------------------------------- blocks */
static void hopper_block_start(struct gthread *threads, int n) {
    g_nmbar = g_nbulk = g_nmaxnreg = g_pending_reads = 0;
    g_block_threads = threads;
    g_block_nthreads = n;
    for (int w = 0; w < MAX_WARPGROUPS; w++) g_wg[w].computed = -1;
}
/* copies still in flight, setmaxnreg executed by part of a warpgroup */
static void hopper_block_end(void) {
    if (g_nbulk) {
        fault(EMU_UNRETIRED, g_bulk[0].site, 0, 0, 2);
        g_nbulk = 0;
    }
    for (int i = 0; i < g_nmaxnreg; i++)
        if (g_maxnreg[i].threads % WARPGROUP) {
            fault(EMU_ASYNC_MISUSE, g_maxnreg[i].site, 0, g_maxnreg[i].threads, ASYNC_MAXNREG_WARPGROUP);
            break;
        }
    g_block_threads = NULL;
    g_pending_reads = 0;
}
/* a thread that ends with wgmma groups it never waited for */
static void hopper_thread_end(struct gthread *t) {
    if (t->wg_nreads || t->wg_uncommitted) fault(EMU_UNRETIRED, -1, 0, 0, 1);
    g_pending_reads -= t->wg_nreads;
    t->wg_nreads = 0;
}
