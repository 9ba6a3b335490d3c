/* A CPU stand-in for the GPU, for testing tile kernels on machines without one.
 *
 * The kernel's LLVM IR is compiled for the host (tests/tile_emulator/__init__.py);
 * every thread of a block is an OS thread, and what the IR asks of the GPU --
 * special registers, bar.sync, warp shuffles, ldmatrix, mma.sync.m16n8k16,
 * cp.async, predicated and vector global accesses -- lands here, implemented
 * from the PTX ISA's definitions (not from the compiler's assumptions). Blocks
 * run one after another; a block's threads really run concurrently, so a
 * missing barrier shows up as wrong results.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 1024
#define MAX_WARPS (MAX_THREADS / 32)
#define SMEM_BYTES (228 * 1024)

unsigned char __buildtile_tile_smem[SMEM_BYTES] __attribute__((aligned(128)));

static int g_ntid;
static int g_nctaid[3];
static __thread int t_tid;
static __thread int t_ctaid[3];
static pthread_barrier_t g_block_barrier;
static pthread_barrier_t g_warp_barrier[MAX_WARPS];
/* per-warp exchange area for warp-collective instructions */
static uint64_t g_exchange[MAX_WARPS][32][16];

static int lane(void) { return t_tid & 31; }
static int warp(void) { return t_tid >> 5; }
static void warp_sync(void) { pthread_barrier_wait(&g_warp_barrier[warp()]); }

/* ---------------------------------------------------------------- special registers */
int emu_read_ptx_sreg_tid_x(void) { return t_tid; }
int emu_read_ptx_sreg_tid_y(void) { return 0; }
int emu_read_ptx_sreg_tid_z(void) { return 0; }
int emu_read_ptx_sreg_ntid_x(void) { return g_ntid; }
int emu_read_ptx_sreg_ctaid_x(void) { return t_ctaid[0]; }
int emu_read_ptx_sreg_ctaid_y(void) { return t_ctaid[1]; }
int emu_read_ptx_sreg_ctaid_z(void) { return t_ctaid[2]; }
int emu_read_ptx_sreg_nctaid_x(void) { return g_nctaid[0]; }
int emu_read_ptx_sreg_nctaid_y(void) { return g_nctaid[1]; }
int emu_read_ptx_sreg_nctaid_z(void) { return g_nctaid[2]; }
int emu_read_ptx_sreg_laneid(void) { return lane(); }

/* ---------------------------------------------------------------- synchronisation */
void emu_barrier(void) { pthread_barrier_wait(&g_block_barrier); }

/* shfl.sync.bfly.b32 d, a, laneMask, 0x1f, 0xffffffff: the value of lane (lane ^ laneMask) */
uint32_t emu_shfl_bits(uint32_t bits, int lane_mask) {
    g_exchange[warp()][lane()][0] = bits;
    warp_sync();
    uint32_t out = (uint32_t)g_exchange[warp()][lane() ^ (lane_mask & 31)][0];
    warp_sync();
    return out;
}
int emu_shfl_sync_bfly_i32(int mask, int v, int lane_mask, int clamp) {
    (void)mask; (void)clamp;
    return (int)emu_shfl_bits((uint32_t)v, lane_mask);
}
float emu_shfl_sync_bfly_f32(int mask, float v, int lane_mask, int clamp) {
    (void)mask; (void)clamp;
    uint32_t bits;
    memcpy(&bits, &v, 4);
    bits = emu_shfl_bits(bits, lane_mask);
    memcpy(&v, &bits, 4);
    return v;
}

/* ---------------------------------------------------------------- global memory */
uint32_t emu_pld_b32(uint64_t addr, int pred) { return pred ? *(uint32_t *)addr : 0; }
uint16_t emu_pld_b16(uint64_t addr, int pred) { return pred ? *(uint16_t *)addr : 0; }
uint16_t emu_pld_u8(uint64_t addr, int pred) { return pred ? *(uint8_t *)addr : 0; }
uint64_t emu_pld_b64(uint64_t addr, int pred) { return pred ? *(uint64_t *)addr : 0; }
void emu_pst_b32(uint64_t addr, uint32_t v, int pred) { if (pred) *(uint32_t *)addr = v; }
void emu_pst_b16(uint64_t addr, uint16_t v, int pred) { if (pred) *(uint16_t *)addr = v; }
void emu_pst_u8(uint64_t addr, uint16_t v, int pred) { if (pred) *(uint8_t *)addr = (uint8_t)v; }
void emu_pst_b64(uint64_t addr, uint64_t v, int pred) { if (pred) *(uint64_t *)addr = v; }
uint32_t emu_ld_b32(uint64_t addr) { return *(uint32_t *)addr; }
uint32_t emu_mov_b32(uint32_t v) { return v; }   /* an opaque copy (keeps LLVM from hoisting) */
/* ld.global.nc.v{2,4}.b32: aligned vector loads (a misaligned address is a fault on the GPU) */
int emu_misaligned;
void emu_ld_vector(uint64_t addr, uint32_t *out, int words) {
    if (addr % (4u * (unsigned)words)) emu_misaligned = 1;
    memcpy(out, (void *)addr, 4u * (unsigned)words);
}

/* cp.async.cg.shared.global [dst], [src], 16, src_size: copies src_size bytes, zero-fills the rest.
 * A copy may land any time before the cp.async.wait_group that retires its group; here it lands
 * as late as allowed, so a read of a stage that was not waited for sees stale bytes. */
#define MAX_PENDING 64
struct pending_copy { void *dst; unsigned char bytes[16]; int group; };
static __thread struct pending_copy t_pending[MAX_PENDING];
static __thread int t_npending, t_open_group;
int emu_overflow;

static void land(const struct pending_copy *c) { memcpy(c->dst, c->bytes, 16); }

void emu_cp_async_cg_shared_global_16_s(void *dst, void *src, int src_size) {
    if ((uintptr_t)dst % 16 || (src_size && (uintptr_t)src % 16)) emu_misaligned = 1;
    struct pending_copy c = {dst, {0}, t_open_group};
    memcpy(c.bytes, src, (size_t)src_size);   /* the source is read-only while the kernel runs */
    if (t_npending == MAX_PENDING) { emu_overflow = 1; land(&c); return; }
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
    if ((uintptr_t)addr % 16) emu_misaligned = 1;
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
float emu_nv_expf(float x) { return expf(x); }
float emu_nv_exp2f(float x) { return exp2f(x); }
float emu_nv_logf(float x) { return logf(x); }
float emu_nv_log2f(float x) { return log2f(x); }
float emu_nv_rsqrtf(float x) { return 1.0f / sqrtf(x); }
float emu_nv_tanhf(float x) { return tanhf(x); }
float emu_nv_sinf(float x) { return sinf(x); }
float emu_nv_cosf(float x) { return cosf(x); }
float emu_nv_cospif(float x) { return (float)cos(3.14159265358979323846 * (double)x); }
float emu_nv_erff(float x) { return erff(x); }
float emu_nv_powf(float x, float y) { return powf(x, y); }
double emu_nv_exp(double x) { return exp(x); }
double emu_nv_log(double x) { return log(x); }
double emu_nv_sqrt(double x) { return sqrt(x); }

/* ---------------------------------------------------------------- launching */
typedef void (*entry_fn)(void *);
struct thread_start { entry_fn fn; void *args; int tid; int ctaid[3]; };

int emu_unretired;   /* a block ended with copies no wait_group retired */

static void *thread_main(void *p) {
    struct thread_start *s = p;
    t_tid = s->tid;
    memcpy(t_ctaid, s->ctaid, sizeof t_ctaid);
    t_npending = t_open_group = 0;
    s->fn(s->args);
    if (t_npending) emu_unretired = 1;
    return NULL;
}

/* Run the kernel entry over a grid of blocks of `threads` threads; returns 0, or -1 on a bad launch. */
int emu_launch(entry_fn fn, void *args, int gx, int gy, int gz, int threads) {
    if (threads < 32 || threads > MAX_THREADS || threads % 32) return -1;
    g_ntid = threads;
    g_nctaid[0] = gx; g_nctaid[1] = gy; g_nctaid[2] = gz;
    pthread_barrier_init(&g_block_barrier, NULL, (unsigned)threads);
    for (int w = 0; w < threads / 32; w++) pthread_barrier_init(&g_warp_barrier[w], NULL, 32);
    pthread_t *ids = calloc((size_t)threads, sizeof *ids);
    struct thread_start *starts = calloc((size_t)threads, sizeof *starts);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 20);
    for (int z = 0; z < gz; z++)
        for (int y = 0; y < gy; y++)
            for (int x = 0; x < gx; x++) {
                memset(__buildtile_tile_smem, 0xA5, sizeof __buildtile_tile_smem);  /* stale data is visible */
                for (int t = 0; t < threads; t++) {
                    starts[t] = (struct thread_start){fn, args, t, {x, y, z}};
                    pthread_create(&ids[t], &attr, thread_main, &starts[t]);
                }
                for (int t = 0; t < threads; t++) pthread_join(ids[t], NULL);
            }
    pthread_attr_destroy(&attr);
    free(ids);
    free(starts);
    pthread_barrier_destroy(&g_block_barrier);
    for (int w = 0; w < threads / 32; w++) pthread_barrier_destroy(&g_warp_barrier[w]);
    return 0;
}
