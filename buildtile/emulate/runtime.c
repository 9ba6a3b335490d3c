/* The CPU stand-in for a GPU that buildtile.emulate runs kernels on.
 *
 * A kernel's LLVM IR is compiled for the host (buildtile/emulate/hostir.py);
 * what the IR asks of the GPU -- special registers, bar.sync, warp shuffles
 * and votes, ldmatrix, mma.sync.m16n8k16, cp.async, predicated and vector
 * global accesses -- lands here, implemented from the PTX ISA's definitions
 * (not from the compiler's assumptions). Blocks run one after another. In a
 * kernel with collectives (barriers, shuffles, votes, mma) every thread of a
 * block is an OS thread, so a missing barrier shows up as wrong results;
 * other kernels run their threads one after another on the calling thread.
 *
 * The checks a GPU cannot make are here too: every global and shared access
 * of the IR first calls emu_check_global / emu_check_shared, which compare it
 * with the launch's arrays (bounds), a per-byte writer record (two threads or
 * tiles writing one element), a per-byte record of shared memory written in
 * this block (reads of uninitialised shared memory) and the access's
 * alignment. The first fault of each kind is kept for the Python side.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 1024
#define MAX_WARPS (MAX_THREADS / 32)
#define SMEM_BYTES (228 * 1024)
#define MAX_REGIONS 64

unsigned char emu_smem[SMEM_BYTES] __attribute__((aligned(128)));

/* ---------------------------------------------------------------- faults */
enum { EMU_OUT_OF_BOUNDS, EMU_TWO_WRITERS, EMU_PARTIAL_BARRIER, EMU_UNINIT_SHARED, EMU_MISALIGNED,
       EMU_UNRETIRED, EMU_OVERFLOW, EMU_NFAULTS };
/* the first fault of each kind: set, site, address, size, thread, block, other (writer / region) */
struct emu_fault { int64_t set, site, address, size, thread, block, other; };
struct emu_fault emu_faults[EMU_NFAULTS];
static pthread_mutex_t g_fault_lock = PTHREAD_MUTEX_INITIALIZER;

static __thread int t_tid[3], t_linear;
static int g_ctaid[3];
static int g_ntid[3], g_nctaid[3], g_nthreads, g_dynamic_smem;
static int64_t g_block_linear;

static void fault(int kind, int64_t site, uint64_t address, int64_t size, int64_t other) {
    struct emu_fault *f = &emu_faults[kind];
    if (__atomic_load_n(&f->set, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&g_fault_lock);
    if (!f->set) {
        *f = (struct emu_fault){1, site, (int64_t)address, size, t_linear, g_block_linear, other};
    }
    pthread_mutex_unlock(&g_fault_lock);
}

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

static uint32_t writer_id(void) {
    return (uint32_t)(emu_track_writers == 2 ? g_block_linear + 1
                                             : g_block_linear * (int64_t)g_nthreads + t_linear + 1);
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
    if (flags & ACCESS_WRITE) mark_shared((void *)(uintptr_t)addr, size);
    else if (!(flags & ACCESS_ATOMIC)) check_shared_read((void *)(uintptr_t)addr, size, site);
}

/* ---------------------------------------------------------------- barriers */
/* A barrier that knows which threads have ended: one that completes while some threads of its
 * group have returned was reached by part of the block (undefined on the GPU: a fault here). */
struct barrier { pthread_mutex_t m; pthread_cond_t c; int expected, arrived, exited, generation, site; };

static void barrier_init(struct barrier *b, int n) {
    pthread_mutex_init(&b->m, NULL);
    pthread_cond_init(&b->c, NULL);
    b->expected = n; b->arrived = 0; b->exited = 0; b->generation = 0; b->site = -1;
}
static void barrier_destroy(struct barrier *b) { pthread_mutex_destroy(&b->m); pthread_cond_destroy(&b->c); }
static void release(struct barrier *b) {
    if (b->exited) fault(EMU_PARTIAL_BARRIER, b->site, 0, 0, b->exited);
    b->arrived = 0;
    b->generation++;
    pthread_cond_broadcast(&b->c);
}
static void barrier_wait(struct barrier *b, int site) {
    pthread_mutex_lock(&b->m);
    if (site >= 0) b->site = site;   /* where the waiting threads are, for a report */
    if (++b->arrived + b->exited >= b->expected) {
        release(b);
    } else {
        int generation = b->generation;
        while (generation == b->generation) pthread_cond_wait(&b->c, &b->m);
    }
    pthread_mutex_unlock(&b->m);
}
static void barrier_leave(struct barrier *b) {
    pthread_mutex_lock(&b->m);
    b->exited++;
    if (b->arrived && b->arrived + b->exited >= b->expected) release(b);
    pthread_mutex_unlock(&b->m);
}

static struct barrier g_block_barrier;
static struct barrier g_warp_barrier[MAX_WARPS];
/* per-warp exchange area for warp-collective instructions */
static uint64_t g_exchange[MAX_WARPS][32][16];
static int g_threaded;   /* 0: threads run one after another (no collectives in the kernel) */

static int lane(void) { return t_linear & 31; }
static int warp(void) { return t_linear >> 5; }
static int warp_size(int w) { int n = g_nthreads - 32 * w; return n < 32 ? n : 32; }
static void warp_sync(void) { if (g_threaded) barrier_wait(&g_warp_barrier[warp()], -1); }

/* ---------------------------------------------------------------- special registers */
int emu_read_ptx_sreg_tid_x(void) { return t_tid[0]; }
int emu_read_ptx_sreg_tid_y(void) { return t_tid[1]; }
int emu_read_ptx_sreg_tid_z(void) { return t_tid[2]; }
int emu_read_ptx_sreg_ntid_x(void) { return g_ntid[0]; }
int emu_read_ptx_sreg_ntid_y(void) { return g_ntid[1]; }
int emu_read_ptx_sreg_ntid_z(void) { return g_ntid[2]; }
int emu_read_ptx_sreg_ctaid_x(void) { return g_ctaid[0]; }
int emu_read_ptx_sreg_ctaid_y(void) { return g_ctaid[1]; }
int emu_read_ptx_sreg_ctaid_z(void) { return g_ctaid[2]; }
int emu_read_ptx_sreg_nctaid_x(void) { return g_nctaid[0]; }
int emu_read_ptx_sreg_nctaid_y(void) { return g_nctaid[1]; }
int emu_read_ptx_sreg_nctaid_z(void) { return g_nctaid[2]; }
int emu_read_ptx_sreg_laneid(void) { return lane(); }
int emu_read_ptx_sreg_warpid(void) { return warp(); }
int emu_dynamic_smem_size(void) { return g_dynamic_smem; }

/* ---------------------------------------------------------------- synchronisation */
void emu_barrier(int site) { if (g_threaded) barrier_wait(&g_block_barrier, site); }
void emu_barrier0(void) { emu_barrier(-1); }
void emu_syncwarp(int mask) { (void)mask; warp_sync(); }

/* shfl.sync.MODE.b32 d, a, b, c, membermask (PTX ISA): the value of lane j, or the lane's own
 * when j is out of its segment (mode: 0 up, 1 down, 2 bfly, 3 idx) */
static uint32_t shfl(int mode, uint32_t value, int b, int c) {
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
    warp_sync();
    uint32_t out = (uint32_t)g_exchange[w][j][0];
    warp_sync();
    return out;
}
uint32_t emu_shfl_up(uint32_t v, int b, int c, int mask) { (void)mask; return shfl(0, v, b, c); }
uint32_t emu_shfl_down(uint32_t v, int b, int c, int mask) { (void)mask; return shfl(1, v, b, c); }
uint32_t emu_shfl_bfly(uint32_t v, int b, int c, int mask) { (void)mask; return shfl(2, v, b, c); }
uint32_t emu_shfl_idx(uint32_t v, int b, int c, int mask) { (void)mask; return shfl(3, v, b, c); }
/* the intrinsic form the tile lowering uses (llvm.nvvm.shfl.sync.bfly.*) */
int emu_shfl_sync_bfly_i32(int mask, int v, int lane_mask, int c) {
    (void)mask;
    return (int)shfl(2, (uint32_t)v, lane_mask, c);
}
float emu_shfl_sync_bfly_f32(int mask, float v, int lane_mask, int c) {
    (void)mask;
    uint32_t bits;
    memcpy(&bits, &v, 4);
    bits = shfl(2, bits, lane_mask, c);
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
#define MAX_PENDING 64
struct pending_copy { void *dst; unsigned char bytes[16]; int group; };
static __thread struct pending_copy t_pending[MAX_PENDING];
static __thread int t_npending, t_open_group;

static void land(const struct pending_copy *c) { memcpy(c->dst, c->bytes, 16); mark_shared(c->dst, 16); }

void emu_cp_async_cg_shared_global_16_s(void *dst, void *src, int src_size) {
    if ((uintptr_t)dst % 16 || (src_size && (uintptr_t)src % 16))
        fault(EMU_MISALIGNED, -1, (uint64_t)(uintptr_t)((uintptr_t)dst % 16 ? dst : src), 16, 0);
    if (src_size) emu_check_global((uint64_t)(uintptr_t)src, src_size, 0, -1);
    struct pending_copy c = {dst, {0}, t_open_group};
    memcpy(c.bytes, src, (size_t)src_size);   /* the source is read-only while the kernel runs */
    if (t_npending == MAX_PENDING) { fault(EMU_OVERFLOW, -1, 0, 0, 0); land(&c); return; }
    t_pending[t_npending++] = c;
}
void emu_cp_async_commit_group(void) { t_open_group++; }
/* cp.async.wait_group n: at most the n most recent committed groups may still be in flight */
void emu_cp_async_wait_group(int n) {
    int keep = 0;
    for (int i = 0; i < t_npending; i++) {
        if (t_pending[i].group < t_open_group - n) land(&t_pending[i]);
        else t_pending[keep++] = t_pending[i];
    }
    t_npending = keep;
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

/* ---------------------------------------------------------------- launching */
typedef void (*entry_fn)(void **);
struct thread_start { entry_fn fn; void **args; int linear; };

static void thread_begin(int linear) {
    t_linear = linear;
    t_tid[0] = linear % g_ntid[0];
    t_tid[1] = (linear / g_ntid[0]) % g_ntid[1];
    t_tid[2] = linear / (g_ntid[0] * g_ntid[1]);
    t_npending = t_open_group = 0;
}
static void thread_end(void) {
    if (t_npending) fault(EMU_UNRETIRED, -1, 0, 0, 0);
    if (g_threaded) {
        barrier_leave(&g_block_barrier);
        barrier_leave(&g_warp_barrier[warp()]);
    }
}
static void *thread_main(void *p) {
    struct thread_start *s = p;
    thread_begin(s->linear);
    s->fn(s->args);
    thread_end();
    return NULL;
}

/* Run the kernel entry over a grid of blocks; `args` as cuLaunchKernel's kernelParams. `threaded`:
 * one OS thread per GPU thread (kernels with collectives). Returns 0, or -1 on a bad launch. */
int emu_launch(entry_fn fn, void **args, int gx, int gy, int gz, int bx, int by, int bz,
               int dynamic_smem, int threaded) {
    int threads = bx * by * bz;
    if (threads < 1 || threads > MAX_THREADS || dynamic_smem < 0 || dynamic_smem > SMEM_BYTES) return -1;
    memset(emu_faults, 0, sizeof emu_faults);
    g_ntid[0] = bx; g_ntid[1] = by; g_ntid[2] = bz;
    g_nctaid[0] = gx; g_nctaid[1] = gy; g_nctaid[2] = gz;
    g_nthreads = threads;
    g_dynamic_smem = dynamic_smem;
    g_threaded = threaded;
    pthread_t *ids = calloc((size_t)threads, sizeof *ids);
    struct thread_start *starts = calloc((size_t)threads, sizeof *starts);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 20);
    for (int z = 0; z < gz; z++)
        for (int y = 0; y < gy; y++)
            for (int x = 0; x < gx; x++) {
                g_ctaid[0] = x; g_ctaid[1] = y; g_ctaid[2] = z;
                g_block_linear = ((int64_t)z * gy + y) * gx + x;
                memset(emu_smem, 0xA5, (size_t)(dynamic_smem ? dynamic_smem : 64));  /* stale data is visible */
                shared_block_start();
                if (!threaded) {
                    for (int t = 0; t < threads; t++) { thread_begin(t); fn(args); thread_end(); }
                    continue;
                }
                barrier_init(&g_block_barrier, threads);
                for (int w = 0; w < (threads + 31) / 32; w++) barrier_init(&g_warp_barrier[w], warp_size(w));
                for (int t = 0; t < threads; t++) {
                    starts[t] = (struct thread_start){fn, args, t};
                    pthread_create(&ids[t], &attr, thread_main, &starts[t]);
                }
                for (int t = 0; t < threads; t++) pthread_join(ids[t], NULL);
                barrier_destroy(&g_block_barrier);
                for (int w = 0; w < (threads + 31) / 32; w++) barrier_destroy(&g_warp_barrier[w]);
            }
    pthread_attr_destroy(&attr);
    free(ids);
    free(starts);
    return 0;
}
