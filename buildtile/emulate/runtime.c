/* The CPU stand-in for a GPU that buildtile.emulate runs kernels on.
 *
 * A kernel's LLVM IR is compiled for the host (buildtile/emulate/hostir.py);
 * what the IR asks of the GPU -- special registers, bar.sync, warp shuffles
 * and votes, ldmatrix, mma.sync.m16n8k16, cp.async, predicated and vector
 * global accesses -- lands here, implemented from the PTX ISA's definitions
 * (not from the compiler's assumptions). Blocks run one after another. In a
 * kernel with collectives (barriers, shuffles, votes, mma) every thread of a
 * block is a coroutine of the launching thread, with a stack of its own,
 * switched where it waits (a barrier, a warp collective), so a missing
 * barrier shows up as wrong results and threads that wait for each other
 * forever are found rather than hung; other kernels run their threads one
 * after another.
 *
 * The checks a GPU cannot make are here too: every global and shared access
 * of the IR first calls emu_check_global / emu_check_shared, which compare it
 * with the launch's arrays (bounds), a per-byte writer record (two threads or
 * tiles writing one element), a per-byte record of shared memory written in
 * this block (reads of uninitialised shared memory) and the access's
 * alignment. The first fault of each kind is kept for the Python side.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#define MAX_THREADS 1024
#define MAX_WARPS (MAX_THREADS / 32)
#define SMEM_BYTES (228 * 1024)
#define MAX_REGIONS 64

unsigned char emu_smem[SMEM_BYTES] __attribute__((aligned(128)));

/* ---------------------------------------------------------------- faults */
enum { EMU_OUT_OF_BOUNDS, EMU_TWO_WRITERS, EMU_PARTIAL_BARRIER, EMU_UNINIT_SHARED, EMU_MISALIGNED,
       EMU_UNRETIRED, EMU_OVERFLOW, EMU_GRID_STALL, EMU_DEADLOCK, EMU_ASYNC_MISUSE, EMU_NFAULTS };
/* the first fault of each kind: set, site, address, size, thread, block, other (writer / region) */
struct emu_fault { int64_t set, site, address, size, thread, block, other; };
struct emu_fault emu_faults[EMU_NFAULTS];

/* ---------------------------------------------------------------- GPU threads */
/* cp.async copies in flight (see "cp.async" below) */
#define MAX_PENDING 64
struct pending_copy { void *dst; unsigned char bytes[16]; int group; };
struct barrier;
struct block;
enum { WAIT_NONE, WAIT_BARRIER, WAIT_SPIN, WAIT_MBARRIER };
/* shared memory an unretired wgmma group reads (see hopper.c) */
#define MAX_WG_READS 64
struct wgmma_read { uint64_t lo, hi; int group; };

/* One GPU thread: where it is in the grid and what the runtime keeps for it. `g_cur` is the one
 * running. In a kernel with collectives each is a coroutine: its context and stack. */
struct gthread {
    int linear, tid[3], ctaid[3];
    int64_t block_linear;
    struct block *block;
    struct pending_copy pending[MAX_PENDING];
    int npending, open_group;
    uint64_t spin_addr;           /* its last acquire load (cooperative launches) */
    uint32_t spin_value;
    int spun;
    int waiting;                  /* WAIT_*: why it yielded */
    struct barrier *wait_on;      /* WAIT_BARRIER: the barrier, and the generation it waits past */
    int wait_generation;
    const int *wait_word;         /* WAIT_MBARRIER: the mbarrier's phase, waited past wait_value */
    int wait_value, wait_site;
    int wg_fenced, wg_group, wg_uncommitted, wg_nreads;   /* wgmma (hopper.c) */
    struct wgmma_read wg_reads[MAX_WG_READS];
    int done;
    ucontext_t context;
    void *stack;
};
static struct gthread *g_cur;
static int g_ntid[3], g_nctaid[3], g_nthreads, g_dynamic_smem;

static void fault(int kind, int64_t site, uint64_t address, int64_t size, int64_t other) {
    struct emu_fault *f = &emu_faults[kind];
    if (f->set) return;
    *f = (struct emu_fault){1, site, (int64_t)address, size, g_cur ? g_cur->linear : -1,
                            g_cur ? g_cur->block_linear : -1, other};
}

struct gthread;
/* hopper.c: the Hopper instructions' state, kept per block and per thread */
static void hopper_thread_end(struct gthread *t);
static void hopper_block_start(struct gthread *threads, int n);
static void hopper_block_end(void);
static int64_t hopper_wait_detail(const struct gthread *t);

/* ---------------------------------------------------------------- regions */
struct region { uint64_t lo, hi; uint32_t *writers; };
static struct region g_regions[MAX_REGIONS];
static int g_nregions;
int emu_track_writers;   /* 1: per thread (SIMT), 2: per block (Tile), 0: off */
static unsigned char g_shared_init[SMEM_BYTES];
static uint64_t g_shared_lo[MAX_REGIONS], g_shared_hi[MAX_REGIONS];
static unsigned char *g_shared_init_of[MAX_REGIONS];
static int g_nshared;

void emu_regions_clear(void) {
    for (int i = 0; i < g_nregions; i++) free(g_regions[i].writers);
    g_nregions = 0;
    for (int i = 0; i < g_nshared; i++) if (g_shared_init_of[i] != g_shared_init) free(g_shared_init_of[i]);
    g_nshared = 0;
}
/* an array argument's bytes [lo, hi); returns its index, or -1 when there are too many */
int emu_region_add(uint64_t lo, uint64_t hi) {
    if (g_nregions == MAX_REGIONS) return -1;
    uint32_t *w = emu_track_writers && hi > lo ? calloc((size_t)(hi - lo), sizeof *w) : NULL;
    g_regions[g_nregions] = (struct region){lo, hi, w};
    return g_nregions++;
}
/* a shared-memory variable's bytes [lo, hi) */
int emu_shared_add(uint64_t lo, uint64_t hi) {
    if (g_nshared == MAX_REGIONS) return -1;
    g_shared_lo[g_nshared] = lo;
    g_shared_hi[g_nshared] = hi;
    g_shared_init_of[g_nshared] = calloc((size_t)(hi - lo) + 1, 1);
    return g_nshared++;
}
static void shared_block_start(void) {
    for (int i = 0; i < g_nshared; i++) memset(g_shared_init_of[i], 0, (size_t)(g_shared_hi[i] - g_shared_lo[i]) + 1);
}

enum { ACCESS_WRITE = 1, ACCESS_ATOMIC = 2, ACCESS_VECTOR = 4 };
static void pending_write_check(const void *p, int64_t size, int site);   /* hopper.c */

static uint32_t writer_id(void) {
    return (uint32_t)(emu_track_writers == 2 ? g_cur->block_linear + 1
                                             : g_cur->block_linear * (int64_t)g_nthreads + g_cur->linear + 1);
}

void emu_check_global(uint64_t addr, int64_t size, int flags, int site) {
    if ((flags & ACCESS_VECTOR) && addr % (uint64_t)size) fault(EMU_MISALIGNED, site, addr, size, 0);
    for (int i = 0; i < g_nregions; i++) {
        struct region *r = &g_regions[i];
        if (addr >= r->lo && addr + (uint64_t)size <= r->hi) {
            if ((flags & ACCESS_WRITE) && !(flags & ACCESS_ATOMIC) && r->writers) {
                uint32_t me = writer_id();
                for (int64_t b = 0; b < size; b++) {
                    uint32_t old = __atomic_exchange_n(&r->writers[addr - r->lo + (uint64_t)b], me, __ATOMIC_RELAXED);
                    if (old && old != me) { fault(EMU_TWO_WRITERS, site, addr, size, (int64_t)old - 1); break; }
                }
            }
            return;
        }
    }
    /* the nearest array, for the message */
    int64_t nearest = -1;
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < g_nregions; i++) {
        uint64_t d = addr < g_regions[i].lo ? g_regions[i].lo - addr : addr - g_regions[i].lo;
        if (d < best) { best = d; nearest = i; }
    }
    fault(EMU_OUT_OF_BOUNDS, site, addr, size, nearest);
}

static int shared_index(uint64_t addr, int64_t size) {
    for (int i = 0; i < g_nshared; i++)
        if (addr >= g_shared_lo[i] && addr + (uint64_t)size <= g_shared_hi[i]) return i;
    return -1;
}
static void check_shared_read(const void *p, int64_t size, int site) {
    uint64_t addr = (uint64_t)(uintptr_t)p;
    int i = shared_index(addr, size);
    if (i < 0) return;
    for (int64_t b = 0; b < size; b++)
        if (!__atomic_load_n(&g_shared_init_of[i][addr - g_shared_lo[i] + (uint64_t)b], __ATOMIC_RELAXED)) {
            fault(EMU_UNINIT_SHARED, site, addr, size, i);
            return;
        }
}
static void mark_shared(const void *p, int64_t size) {
    uint64_t addr = (uint64_t)(uintptr_t)p;
    int i = shared_index(addr, size);
    if (i >= 0) memset(&g_shared_init_of[i][addr - g_shared_lo[i]], 1, (size_t)size);
}
void emu_check_shared(uint64_t addr, int64_t size, int flags, int site) {
    if ((flags & ACCESS_VECTOR) && addr % (uint64_t)size) fault(EMU_MISALIGNED, site, addr, size, 0);
    int i = shared_index(addr, size);
    if (i < 0) { fault(EMU_OUT_OF_BOUNDS, site, addr, size, -2); return; }
    if (flags & ACCESS_WRITE) {
        pending_write_check((void *)(uintptr_t)addr, size, site);
        mark_shared((void *)(uintptr_t)addr, size);
    } else if (!(flags & ACCESS_ATOMIC)) check_shared_read((void *)(uintptr_t)addr, size, site);
}

/* ---------------------------------------------------------------- coroutines */
/* The threads of a block with collectives run as coroutines of the launching thread: one runs
 * until it waits (a barrier not yet complete, a spin on global memory), then hands back to the
 * scheduler (`yield`), which resumes the next that can go on. */
static ucontext_t g_scheduler;
static uint64_t g_progress;   /* barriers released, threads ended, spins that read a change */

static void yield(void) { swapcontext(&g_cur->context, &g_scheduler); }

/* ---------------------------------------------------------------- barriers */
/* A barrier that knows which threads have ended: one that completes while some threads of its
 * group have returned was reached by part of the block (undefined on the GPU: a fault here). */
struct barrier { int expected, arrived, exited, generation, site; };

static void barrier_init(struct barrier *b, int n) {
    b->expected = n; b->arrived = 0; b->exited = 0; b->generation = 0; b->site = -1;
}
static void release(struct barrier *b) {
    if (b->exited) fault(EMU_PARTIAL_BARRIER, b->site, 0, 0, b->exited);
    b->arrived = 0;
    b->generation++;
    g_progress++;
}
static void barrier_wait(struct barrier *b, int site) {
    if (site >= 0) b->site = site;   /* where the waiting threads are, for a report */
    if (++b->arrived + b->exited >= b->expected) {
        release(b);
        return;
    }
    struct gthread *me = g_cur;
    me->waiting = WAIT_BARRIER;
    me->wait_on = b;
    me->wait_generation = b->generation;
    while (b->generation == me->wait_generation) yield();
    me->waiting = WAIT_NONE;
    me->wait_on = NULL;
}
static void barrier_leave(struct barrier *b) {
    b->exited++;
    if (b->arrived && b->arrived + b->exited >= b->expected) release(b);
}

/* ---------------------------------------------------------------- warps */
/* A warp collective (shfl.sync, bar.warp.sync, vote.sync) waits for the lanes of its member mask
 * only (PTX ISA): lanes outside it may be elsewhere, at a collective of their own mask, or done.
 * So lanes meet per mask: each open meeting is a barrier of the lanes its mask names (those of
 * the warp), and one that completes while a lane of its mask has returned was reached by part
 * of its lanes (a fault, as for bar.sync). A waiting lane is in one meeting: 32 are enough. */
struct warp {
    uint32_t lanes, exited;        /* the warp's lanes; those that have returned */
    uint32_t mask[32];             /* the lanes of each meeting */
    struct barrier meeting[32];    /* open while some lane waits there (arrived > 0) */
};

static void warp_init(struct warp *w, int lanes) {
    w->lanes = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
    w->exited = 0;
    for (int i = 0; i < 32; i++) { w->mask[i] = 0; barrier_init(&w->meeting[i], 0); }
}
/* the open meeting of `mask`, or a free one opened for it (its generation goes on counting) */
static struct barrier *warp_meeting(struct warp *w, uint32_t mask) {
    int free_slot = -1;
    for (int i = 0; i < 32; i++) {
        if (w->meeting[i].arrived && w->mask[i] == mask) return &w->meeting[i];
        if (!w->meeting[i].arrived && free_slot < 0) free_slot = i;
    }
    struct barrier *b = &w->meeting[free_slot];
    w->mask[free_slot] = mask;
    b->expected = __builtin_popcount(mask);
    b->exited = __builtin_popcount(mask & w->exited);
    return b;
}
static void warp_leave(struct warp *w, int lane_id) {
    uint32_t me = 1u << lane_id;
    w->exited |= me;
    for (int i = 0; i < 32; i++)
        if (w->meeting[i].arrived && (w->mask[i] & me)) barrier_leave(&w->meeting[i]);
}

/* ---------------------------------------------------------------- blocks */
/* What the threads of one block share. A launch runs its blocks one after another; a
 * cooperative launch (see "cooperative launches") has every block's threads alive at once. */
struct block {
    int ctaid[3];
    int64_t linear;
    struct barrier bar;                 /* bar.sync */
    struct barrier named[16];           /* bar.sync / bar.arrive a, b (hopper.c) */
    struct barrier warpgroups[MAX_WARPS / 4];   /* the meetings of wgmma */
    struct warp warps[MAX_WARPS];       /* the warp collectives */
    int state;                          /* cooperative: BLOCK_NEW, BLOCK_STARTED or BLOCK_DONE */
    unsigned char *saved;               /* cooperative: its shared memory while another block runs */
};
enum { BLOCK_NEW, BLOCK_STARTED, BLOCK_DONE };

static void block_init(struct block *k, int x, int y, int z) {
    k->ctaid[0] = x; k->ctaid[1] = y; k->ctaid[2] = z;
    k->linear = ((int64_t)z * g_nctaid[1] + y) * g_nctaid[0] + x;
    k->state = BLOCK_NEW;
    k->saved = NULL;
    barrier_init(&k->bar, g_nthreads);
    for (int i = 0; i < 16; i++) barrier_init(&k->named[i], 0);
    for (int w = 0; w < MAX_WARPS / 4; w++) barrier_init(&k->warpgroups[w], 128);
    for (int w = 0; w < (g_nthreads + 31) / 32; w++) {
        int n = g_nthreads - 32 * w;
        warp_init(&k->warps[w], n < 32 ? n : 32);
    }
}
/* per-warp exchange area for warp-collective instructions */
static uint64_t g_exchange[MAX_WARPS][32][16];
static int g_threaded;   /* 0: threads run one after another (no collectives in the kernel) */

static int lane(void) { return g_cur->linear & 31; }
static int warp(void) { return g_cur->linear >> 5; }
static int warp_size(int w) { int n = g_nthreads - 32 * w; return n < 32 ? n : 32; }
/* the lanes of `mask` meet (a lane always takes part in its own collective) */
static void warp_meet(uint32_t mask) {
    if (!g_threaded) return;
    struct warp *w = &g_cur->block->warps[warp()];
    barrier_wait(warp_meeting(w, (mask & w->lanes) | (1u << lane())), -1);
}
static void warp_sync(void) { warp_meet(0xffffffffu); }

/* ---------------------------------------------------------------- special registers */
int emu_read_ptx_sreg_tid_x(void) { return g_cur->tid[0]; }
int emu_read_ptx_sreg_tid_y(void) { return g_cur->tid[1]; }
int emu_read_ptx_sreg_tid_z(void) { return g_cur->tid[2]; }
int emu_read_ptx_sreg_ntid_x(void) { return g_ntid[0]; }
int emu_read_ptx_sreg_ntid_y(void) { return g_ntid[1]; }
int emu_read_ptx_sreg_ntid_z(void) { return g_ntid[2]; }
int emu_read_ptx_sreg_ctaid_x(void) { return g_cur->ctaid[0]; }
int emu_read_ptx_sreg_ctaid_y(void) { return g_cur->ctaid[1]; }
int emu_read_ptx_sreg_ctaid_z(void) { return g_cur->ctaid[2]; }
int emu_read_ptx_sreg_nctaid_x(void) { return g_nctaid[0]; }
int emu_read_ptx_sreg_nctaid_y(void) { return g_nctaid[1]; }
int emu_read_ptx_sreg_nctaid_z(void) { return g_nctaid[2]; }
int emu_read_ptx_sreg_laneid(void) { return lane(); }
int emu_read_ptx_sreg_warpid(void) { return warp(); }
int emu_dynamic_smem_size(void) { return g_dynamic_smem; }

/* ---------------------------------------------------------------- synchronisation */
void emu_barrier(int site) { if (g_threaded) barrier_wait(&g_cur->block->bar, site); }
void emu_barrier0(void) { emu_barrier(-1); }
void emu_syncwarp(int mask) { warp_meet((uint32_t)mask); }

/* shfl.sync.MODE.b32 d, a, b, c, membermask (PTX ISA): the value of lane j, or the lane's own
 * when j is out of its segment (mode: 0 up, 1 down, 2 bfly, 3 idx) */
static uint32_t shfl(int mode, uint32_t value, int b, int c, uint32_t mask) {
    int w = warp(), l = lane();
    int segmask = (c >> 8) & 31, clamp = c & 31;
    int max_lane = (l & segmask) | (clamp & ~segmask), min_lane = l & segmask, j, ok;
    b &= 31;
    switch (mode) {
    case 0: j = l - b; ok = j >= max_lane; break;
    case 1: j = l + b; ok = j <= max_lane; break;
    case 2: j = l ^ b; ok = j <= max_lane; break;
    default: j = min_lane | (b & ~segmask); ok = j <= max_lane; break;
    }
    if (!ok || j >= warp_size(w)) j = l;
    g_exchange[w][l][0] = value;
    warp_meet(mask);
    uint32_t out = (uint32_t)g_exchange[w][j][0];
    warp_meet(mask);
    return out;
}
uint32_t emu_shfl_up(uint32_t v, int b, int c, int mask) { return shfl(0, v, b, c, (uint32_t)mask); }
uint32_t emu_shfl_down(uint32_t v, int b, int c, int mask) { return shfl(1, v, b, c, (uint32_t)mask); }
uint32_t emu_shfl_bfly(uint32_t v, int b, int c, int mask) { return shfl(2, v, b, c, (uint32_t)mask); }
uint32_t emu_shfl_idx(uint32_t v, int b, int c, int mask) { return shfl(3, v, b, c, (uint32_t)mask); }
/* the intrinsic form the tile lowering uses (llvm.nvvm.shfl.sync.bfly.*) */
int emu_shfl_sync_bfly_i32(int mask, int v, int lane_mask, int c) {
    return (int)shfl(2, (uint32_t)v, lane_mask, c, (uint32_t)mask);
}
float emu_shfl_sync_bfly_f32(int mask, float v, int lane_mask, int c) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    bits = shfl(2, bits, lane_mask, c, (uint32_t)mask);
    memcpy(&v, &bits, 4);
    return v;
}
/* vote.sync.{ballot,any,all,uni} over the lanes of the warp */
static uint32_t ballot(int pred) {
    int w = warp(), l = lane();
    g_exchange[w][l][0] = pred != 0;
    warp_sync();
    uint32_t bits = 0;
    for (int j = 0; j < warp_size(w); j++) bits |= (uint32_t)g_exchange[w][j][0] << j;
    warp_sync();
    return bits;
}
static uint32_t all_lanes(void) { int n = warp_size(warp()); return n == 32 ? 0xffffffffu : (1u << n) - 1; }
uint32_t emu_vote_ballot(int pred) { return ballot(pred); }
int emu_vote_any(int pred) { return ballot(pred) != 0; }
int emu_vote_all(int pred) { return ballot(pred) == all_lanes(); }
int emu_vote_uni(int pred) { uint32_t b = ballot(pred); return b == 0 || b == all_lanes(); }

/* ---------------------------------------------------------------- global memory (inline PTX) */
uint32_t emu_pld_b32(uint64_t addr, int pred) { if (!pred) return 0; emu_check_global(addr, 4, 0, -1); return *(uint32_t *)addr; }
uint16_t emu_pld_b16(uint64_t addr, int pred) { if (!pred) return 0; emu_check_global(addr, 2, 0, -1); return *(uint16_t *)addr; }
uint16_t emu_pld_u8(uint64_t addr, int pred) { if (!pred) return 0; emu_check_global(addr, 1, 0, -1); return *(uint8_t *)addr; }
uint64_t emu_pld_b64(uint64_t addr, int pred) { if (!pred) return 0; emu_check_global(addr, 8, 0, -1); return *(uint64_t *)addr; }
void emu_pst_b32(uint64_t addr, uint32_t v, int pred) { if (pred) { emu_check_global(addr, 4, 1, -1); *(uint32_t *)addr = v; } }
void emu_pst_b16(uint64_t addr, uint16_t v, int pred) { if (pred) { emu_check_global(addr, 2, 1, -1); *(uint16_t *)addr = v; } }
void emu_pst_u8(uint64_t addr, uint16_t v, int pred) { if (pred) { emu_check_global(addr, 1, 1, -1); *(uint8_t *)addr = (uint8_t)v; } }
void emu_pst_b64(uint64_t addr, uint64_t v, int pred) { if (pred) { emu_check_global(addr, 8, 1, -1); *(uint64_t *)addr = v; } }
uint32_t emu_ld_b32(uint64_t addr) { emu_check_global(addr, 4, 0, -1); return *(uint32_t *)addr; }
uint32_t emu_mov_b32(uint32_t v) { return v; }   /* an opaque copy (keeps LLVM from hoisting) */
uint64_t emu_mov_b64(uint64_t v) { return v; }

/* cvt.rn.bf16x2.f32: round to nearest even, a NaN to the canonical 0x7FFF; hi in the upper half */
static uint32_t emu_bf16_bits(float x) {
    uint32_t bits;
    memcpy(&bits, &x, 4);
    if (x != x) return 0x7FFFu;
    return (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
}
uint32_t emu_cvt_rn_bf16x2_f32(float hi, float lo) { return emu_bf16_bits(hi) << 16 | emu_bf16_bits(lo); }
/* ld.global.nc.v{2,4}.b32: aligned vector loads (a misaligned address is a fault on the GPU) */
void emu_ld_vector(uint64_t addr, uint32_t *out, int words) {
    emu_check_global(addr, 4 * words, ACCESS_VECTOR, -1);
    memcpy(out, (void *)addr, 4u * (unsigned)words);
}

/* cp.async.cg.shared.global [dst], [src], 16, src_size: copies src_size bytes, zero-fills the rest.
 * A copy may land any time before the cp.async.wait_group that retires its group; here it lands
 * as late as allowed, so a read of a stage that was not waited for sees stale bytes. */
static void land(const struct pending_copy *c) { memcpy(c->dst, c->bytes, 16); mark_shared(c->dst, 16); }

void emu_cp_async_cg_shared_global_16_s(void *dst, void *src, int src_size) {
    if ((uintptr_t)dst % 16 || (src_size && (uintptr_t)src % 16))
        fault(EMU_MISALIGNED, -1, (uint64_t)(uintptr_t)((uintptr_t)dst % 16 ? dst : src), 16, 0);
    if (src_size) emu_check_global((uint64_t)(uintptr_t)src, src_size, 0, -1);
    struct gthread *me = g_cur;
    struct pending_copy c = {dst, {0}, me->open_group};
    memcpy(c.bytes, src, (size_t)src_size);   /* the source is read-only while the kernel runs */
    if (me->npending == MAX_PENDING) { fault(EMU_OVERFLOW, -1, 0, 0, 0); land(&c); return; }
    me->pending[me->npending++] = c;
}
void emu_cp_async_commit_group(void) { g_cur->open_group++; }
/* cp.async.wait_group n: at most the n most recent committed groups may still be in flight */
void emu_cp_async_wait_group(int n) {
    struct gthread *me = g_cur;
    int keep = 0;
    for (int i = 0; i < me->npending; i++) {
        if (me->pending[i].group < me->open_group - n) land(&me->pending[i]);
        else me->pending[keep++] = me->pending[i];
    }
    me->npending = keep;
}

/* ---------------------------------------------------------------- ldmatrix */
/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lanes 8i..8i+7 give the row addresses of
 * matrix i. Without .trans lane t receives row t/4, elements 2(t%4), 2(t%4)+1 of each matrix;
 * with .trans the matrix is read transposed: rows 2(t%4), 2(t%4)+1 of column t/4. */
void emu_ldmatrix(void *addr, uint32_t *out, int trans) {
    int w = warp(), l = lane();
    if ((uintptr_t)addr % 16) fault(EMU_MISALIGNED, 0, (uint64_t)(uintptr_t)addr, 16, 0);
    check_shared_read(addr, 16, 0);
    g_exchange[w][l][0] = (uint64_t)(uintptr_t)addr;
    warp_sync();
    for (int i = 0; i < 4; i++) {
        uint16_t lo, hi;
        if (!trans) {
            const uint16_t *row = (const uint16_t *)(uintptr_t)g_exchange[w][8 * i + l / 4][0];
            lo = row[2 * (l % 4)];
            hi = row[2 * (l % 4) + 1];
        } else {
            const uint16_t *r0 = (const uint16_t *)(uintptr_t)g_exchange[w][8 * i + 2 * (l % 4)][0];
            const uint16_t *r1 = (const uint16_t *)(uintptr_t)g_exchange[w][8 * i + 2 * (l % 4) + 1][0];
            lo = r0[l / 4];
            hi = r1[l / 4];
        }
        out[i] = (uint32_t)lo | ((uint32_t)hi << 16);
    }
    warp_sync();
}

/* ---------------------------------------------------------------- mma.sync.m16n8k16 */
static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else {
            exp = 127 - 15 + 1;
            while (!(man & 1024)) { man <<= 1; exp--; }
            bits = sign | (exp << 23) | ((man & 1023) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
static float bf16_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"),
 * g = lane >> 2, t = lane % 4:
 *   A (16 x 16), halves a0..a7: row g for i in {0,1,4,5}, else g + 8; col 2t + (i & 1) (+8 for i >= 4)
 *   B (16 x 8),  halves b0..b3: row 2t + (i & 1) (+8 for i >= 2); col g
 *   C, D (16 x 8), c0..c3:      row g (+8 for i >= 2); col 2t + (i & 1) */
void emu_mma(const uint32_t *a, const uint32_t *b, const float *c, float *d, int is_bf16) {
    int w = warp(), l = lane();
    for (int i = 0; i < 4; i++) g_exchange[w][l][i] = a[i];
    for (int i = 0; i < 2; i++) g_exchange[w][l][4 + i] = b[i];
    warp_sync();
    float A[16][16], B[16][8];
    for (int j = 0; j < 32; j++) {
        int g = j >> 2, t = j & 3;
        for (int i = 0; i < 8; i++) {
            uint16_t h = (uint16_t)(g_exchange[w][j][i / 2] >> (16 * (i % 2)));
            int row = (i == 0 || i == 1 || i == 4 || i == 5) ? g : g + 8;
            int col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
            A[row][col] = is_bf16 ? bf16_to_float(h) : half_to_float(h);
        }
        for (int i = 0; i < 4; i++) {
            uint16_t h = (uint16_t)(g_exchange[w][j][4 + i / 2] >> (16 * (i % 2)));
            int row = 2 * t + (i & 1) + (i >= 2 ? 8 : 0);
            B[row][g] = is_bf16 ? bf16_to_float(h) : half_to_float(h);
        }
    }
    warp_sync();
    int g = l >> 2, t = l & 3;
    for (int i = 0; i < 4; i++) {
        int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
        float acc = c[i];
        for (int k = 0; k < 16; k++) acc += A[row][k] * B[k][col];
        d[i] = acc;
    }
}

/* ---------------------------------------------------------------- libdevice */
/* __nv_NAME(x) is C's NAME for doubles and NAMEf for floats (libdevice's NAMEf) */
#define MATH1(name) double emu_nv_##name(double x) { return name(x); } \
                    float emu_nv_##name##f(float x) { return name##f(x); }
#define MATH2(name) double emu_nv_##name(double x, double y) { return name(x, y); } \
                    float emu_nv_##name##f(float x, float y) { return name##f(x, y); }
MATH1(exp) MATH1(exp2) MATH1(expm1) MATH1(log) MATH1(log2) MATH1(log10) MATH1(log1p)
MATH1(sin) MATH1(cos) MATH1(tan) MATH1(asin) MATH1(acos) MATH1(atan) MATH1(sinh) MATH1(cosh)
MATH1(tanh) MATH1(asinh) MATH1(acosh) MATH1(atanh) MATH1(erf) MATH1(erfc) MATH1(cbrt) MATH1(sqrt)
MATH1(rint) MATH1(floor) MATH1(ceil) MATH1(trunc) MATH1(round) MATH1(fabs) MATH1(lgamma) MATH1(tgamma)
MATH2(pow) MATH2(atan2) MATH2(hypot) MATH2(fmod) MATH2(fmin) MATH2(fmax) MATH2(copysign)
double emu_nv_rsqrt(double x) { return 1.0 / sqrt(x); }
float emu_nv_rsqrtf(float x) { return (float)(1.0 / sqrt((double)x)); }
double emu_nv_cospi(double x) { return cos(M_PI * x); }
float emu_nv_cospif(float x) { return (float)cos(M_PI * (double)x); }
double emu_nv_sinpi(double x) { return sin(M_PI * x); }
float emu_nv_sinpif(float x) { return (float)sin(M_PI * (double)x); }

/* ---------------------------------------------------------------- cooperative launches */
/* A cooperative launch may wait for the whole grid (simt.grid_sync: an atomic count in the
 * launch's workspace, then a spin on it with acquire loads). Every block's threads are alive at
 * once, but one block at a time holds the emulated SM, so the one copy of shared memory is the
 * running block's own. When none of its threads can go on and one of them spins (reads a value
 * unchanged since its last read), the SM passes to the next block in grid order that has not
 * ended, with its shared memory as it left it (a new block's stale and unwritten). A wait no
 * block can end -- every block that has not ended spins, round after round, on values nothing
 * changes (a block returned before the grid barrier) -- is a fault; the spins are then let go
 * (each reads a changed value), so the launch ends. */
#define MAX_COOPERATIVE_THREADS (16 * MAX_THREADS)
static int g_cooperative;
static int g_handovers;    /* hand-overs since a block last made progress */
static int g_stalled;      /* a wait no block can end was found */
static uint32_t g_workspace[4];   /* the launch's grid workspace (%envreg1/2), zero at its start */

/* shared memory as a new block finds it: stale bytes, none written by the block */
static void block_fresh(void) {
    memset(emu_smem, 0xA5, (size_t)(g_dynamic_smem ? g_dynamic_smem : 64));
    shared_block_start();
}
/* a block's shared memory (every variable, and which of its bytes the block wrote) kept aside */
static void shared_save(struct block *k) {
    size_t total = 1;
    for (int i = 0; i < g_nshared; i++) total += 2 * (size_t)(g_shared_hi[i] - g_shared_lo[i]) + 1;
    if (!k->saved) k->saved = malloc(total);
    if (!k->saved) return;
    unsigned char *p = k->saved;
    for (int i = 0; i < g_nshared; i++) {
        size_t n = (size_t)(g_shared_hi[i] - g_shared_lo[i]);
        memcpy(p, (void *)(uintptr_t)g_shared_lo[i], n);
        memcpy(p + n, g_shared_init_of[i], n + 1);
        p += 2 * n + 1;
    }
}
static void shared_restore(const struct block *k) {
    const unsigned char *p = k->saved;
    if (!p) return;
    for (int i = 0; i < g_nshared; i++) {
        size_t n = (size_t)(g_shared_hi[i] - g_shared_lo[i]);
        memcpy((void *)(uintptr_t)g_shared_lo[i], p, n);
        memcpy(g_shared_init_of[i], p + n, n + 1);
        p += 2 * n + 1;
    }
}

uint64_t emu_grid_workspace(void) { return (uint64_t)(uintptr_t)g_workspace; }
uint32_t emu_atom_add_release_u32(uint64_t addr, uint32_t v) {
    return __atomic_fetch_add((uint32_t *)(uintptr_t)addr, v, __ATOMIC_SEQ_CST);
}
/* ld.acquire.gpu.u32: in a cooperative launch, a second read of an unchanged value is a spin
 * waiting for other blocks, which run meanwhile */
uint32_t emu_ld_acquire_u32(uint64_t addr) {
    volatile uint32_t *p = (volatile uint32_t *)(uintptr_t)addr;
    uint32_t v = *p;
    if (!g_cooperative) return v;
    struct gthread *me = g_cur;
    int again = me->spun && me->spin_addr == addr;
    me->spun = 1;
    me->spin_addr = addr;
    if (again && v == me->spin_value && !g_stalled) {
        me->waiting = WAIT_SPIN;
        yield();
        me->waiting = WAIT_NONE;
        v = *p;
    }
    if (again && v == me->spin_value && g_stalled) v = ~v;
    if (again && v != me->spin_value) {   /* another block changed it, or a stall let it go */
        g_progress++;
        g_handovers = 0;
    }
    me->spin_value = v;
    return v;
}

/* ---------------------------------------------------------------- launching */
typedef void (*entry_fn)(void **);
#define STACK_BYTES (1 << 20)   /* each coroutine's, reserved rather than committed */
#define GUARD_BYTES 4096        /* below it, unmapped: an overflow faults rather than corrupts */

static entry_fn g_fn;
static void **g_args;
static int g_threaded;   /* 0: threads run one after another (no collectives in the kernel) */

static void thread_begin(struct gthread *t, struct block *k, int linear) {
    t->block = k;
    t->block_linear = k->linear;
    memcpy(t->ctaid, k->ctaid, sizeof t->ctaid);
    t->linear = linear;
    t->tid[0] = linear % g_ntid[0];
    t->tid[1] = (linear / g_ntid[0]) % g_ntid[1];
    t->tid[2] = linear / (g_ntid[0] * g_ntid[1]);
    t->npending = t->open_group = 0;
    t->spun = 0;
    t->waiting = WAIT_NONE;
    t->wait_on = NULL;
    t->wait_word = NULL;
    t->wg_fenced = t->wg_group = t->wg_uncommitted = t->wg_nreads = 0;
    t->done = 0;
}
static void thread_end(void) {
    if (g_cur->npending) fault(EMU_UNRETIRED, -1, 0, 0, 0);
    hopper_thread_end(g_cur);
    if (g_threaded) {
        barrier_leave(&g_cur->block->bar);
        warp_leave(&g_cur->block->warps[warp()], lane());
        if ((warp() / 4 + 1) * 128 <= g_nthreads) barrier_leave(&g_cur->block->warpgroups[warp() / 4]);
    }
}
static void coroutine_main(void) {
    g_fn(g_args);
    thread_end();
    g_cur->done = 1;
    g_progress++;
}   /* returns to the scheduler (uc_link) */

/* thread `linear` of block `k` as a coroutine, ready to start; 0, or -1 without memory for it */
static int coroutine_start(struct gthread *t, struct block *k, int linear) {
    thread_begin(t, k, linear);
    if (!t->stack) {
        void *stack = mmap(NULL, STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                           -1, 0);
        if (stack == MAP_FAILED) return -1;
        mprotect(stack, GUARD_BYTES, PROT_NONE);
        t->stack = stack;
    }
    getcontext(&t->context);
    t->context.uc_stack.ss_sp = t->stack;
    t->context.uc_stack.ss_size = STACK_BYTES;
    t->context.uc_link = &g_scheduler;
    makecontext(&t->context, coroutine_main, 0);
    return 0;
}
static void coroutines_free(struct gthread *threads, int n) {
    for (int i = 0; i < n; i++) if (threads[i].stack) munmap(threads[i].stack, STACK_BYTES);
    free(threads);
}

enum { QUIET_DONE, QUIET_SPINNING, QUIET_STUCK };
/* Runs the `n` coroutines round after round, each until it waits or ends, until all have ended
 * (QUIET_DONE) or a round changes nothing: then some spin (QUIET_SPINNING, they wait for another
 * block) or all wait at barriers that can never complete (QUIET_STUCK). */
static int run_until_quiet(struct gthread *threads, int n) {
    for (;;) {
        uint64_t before = g_progress;
        int live = 0, spinning = 0;
        for (int i = 0; i < n; i++) {
            struct gthread *t = &threads[i];
            if (t->done) continue;
            live++;
            if (t->waiting == WAIT_BARRIER && t->wait_on->generation == t->wait_generation) continue;
            if (t->waiting == WAIT_MBARRIER && *t->wait_word == t->wait_value) continue;
            g_cur = t;
            swapcontext(&g_scheduler, &t->context);
            spinning += !t->done && t->waiting == WAIT_SPIN;
        }
        if (!live) return QUIET_DONE;
        if (g_progress == before) return spinning ? QUIET_SPINNING : QUIET_STUCK;
    }
}
/* threads that wait for each other forever: reported at the barrier the first of them waits at */
static void report_stuck(struct gthread *threads, int n) {
    for (int i = 0; i < n; i++) {
        struct gthread *t = &threads[i];
        if (t->done || (!t->wait_on && t->waiting != WAIT_MBARRIER)) continue;
        g_cur = t;
        int others = 0;
        for (int j = 0; j < n; j++)
            others += !threads[j].done && (threads[j].wait_on != t->wait_on || threads[j].wait_word != t->wait_word);
        if (t->waiting == WAIT_MBARRIER)   /* size 8: an mbarrier phase; address: its pending counts */
            fault(EMU_DEADLOCK, t->wait_site, (uint64_t)hopper_wait_detail(t), 8, others);
        else
            fault(EMU_DEADLOCK, t->wait_on->site, 0, 0, others);
        return;
    }
}

/* every block of a cooperative launch at once (see "cooperative launches") */
static int run_cooperative(int nblocks) {
    int threads = g_nthreads;
    struct block *blocks = calloc((size_t)nblocks, sizeof *blocks);
    struct gthread *all = calloc((size_t)nblocks * (size_t)threads, sizeof *all);
    if (!blocks || !all) { free(blocks); free(all); return -1; }
    for (int b = 0; b < nblocks; b++)
        block_init(&blocks[b], b % g_nctaid[0], (b / g_nctaid[0]) % g_nctaid[1], b / (g_nctaid[0] * g_nctaid[1]));
    memset(g_workspace, 0, sizeof g_workspace);
    g_handovers = g_stalled = 0;
    g_cooperative = 1;
    int rc = 0, cur = 0, left = nblocks;
    for (;;) {
        struct block *k = &blocks[cur];
        struct gthread *mine = &all[(size_t)cur * (size_t)threads];
        if (k->state == BLOCK_NEW) {
            block_fresh();
            for (int t = 0; t < threads && rc == 0; t++) rc = coroutine_start(&mine[t], k, t);
            if (rc) break;
            k->state = BLOCK_STARTED;
            g_handovers = 0;
        }
        int quiet = run_until_quiet(mine, threads);
        if (quiet == QUIET_STUCK) { report_stuck(mine, threads); break; }
        if (quiet == QUIET_DONE) {
            k->state = BLOCK_DONE;
            g_handovers = 0;
            if (--left == 0) break;
        } else if (++g_handovers > 2 * nblocks) {   /* round after round of spins: nothing will change */
            g_stalled = 1;
            fault(EMU_GRID_STALL, -1, 0, 0, 0);
        }
        int next = cur;
        for (int i = 1; i <= nblocks; i++) {
            int b = (cur + i) % nblocks;
            if (blocks[b].state != BLOCK_DONE) { next = b; break; }
        }
        if (next != cur) {
            if (k->state != BLOCK_DONE) shared_save(k);
            if (blocks[next].state == BLOCK_STARTED) shared_restore(&blocks[next]);
            cur = next;
        }
    }
    g_cooperative = 0;
    coroutines_free(all, nblocks * threads);
    for (int b = 0; b < nblocks; b++) free(blocks[b].saved);
    free(blocks);
    return rc;
}

/* Run the kernel entry over a grid of blocks; `args` as cuLaunchKernel's kernelParams. `threaded`:
 * the threads of a block are coroutines (kernels with collectives); `cooperative`: every block at
 * once (cuLaunchCooperativeKernel). Returns 0, or -1 on a bad launch. */
int emu_launch(entry_fn fn, void **args, int gx, int gy, int gz, int bx, int by, int bz,
               int dynamic_smem, int threaded, int cooperative) {
    int threads = bx * by * bz;
    int64_t blocks = (int64_t)gx * gy * gz;
    if (threads < 1 || threads > MAX_THREADS || dynamic_smem < 0 || dynamic_smem > SMEM_BYTES) return -1;
    if (cooperative && (blocks < 1 || blocks * threads > MAX_COOPERATIVE_THREADS)) return -1;
    memset(emu_faults, 0, sizeof emu_faults);
    g_ntid[0] = bx; g_ntid[1] = by; g_ntid[2] = bz;
    g_nctaid[0] = gx; g_nctaid[1] = gy; g_nctaid[2] = gz;
    g_nthreads = threads;
    g_dynamic_smem = dynamic_smem;
    g_threaded = threaded || cooperative;
    g_fn = fn;
    g_args = args;
    int rc = 0;
    if (cooperative) {
        rc = run_cooperative((int)blocks);
        g_cur = NULL;
        return rc;
    }
    static struct block block;
    static struct gthread sequential;   /* the one thread of a kernel without collectives */
    struct gthread *coroutines = g_threaded ? calloc((size_t)threads, sizeof *coroutines) : NULL;
    if (g_threaded && !coroutines) return -1;
    int stuck = 0;   /* threads that wait for each other forever: on a GPU the launch would hang */
    for (int64_t b = 0; b < blocks && rc == 0 && !stuck; b++) {
        block_init(&block, (int)(b % gx), (int)((b / gx) % gy), (int)(b / ((int64_t)gx * gy)));
        block_fresh();
        hopper_block_start(coroutines, g_threaded ? threads : 0);
        if (!g_threaded) {
            g_cur = &sequential;
            for (int t = 0; t < threads; t++) { thread_begin(&sequential, &block, t); fn(args); thread_end(); }
            continue;
        }
        for (int t = 0; t < threads && rc == 0; t++) rc = coroutine_start(&coroutines[t], &block, t);
        if (rc == 0 && run_until_quiet(coroutines, threads) == QUIET_STUCK) {
            report_stuck(coroutines, threads);
            stuck = 1;
        }
        hopper_block_end();
    }
    if (coroutines) coroutines_free(coroutines, threads);
    g_cur = NULL;
    return rc;
}

#include "hopper.c"
