/*
 * Step 5 of buildtile/abi.h: the CUDA driver, contexts, per-context module
 * cache, image choice, device limits and the launch itself.
 *
 * The driver is reached only through dlopen/dlsym, so the library has no
 * link-time dependency on libcuda and loads on machines without a GPU.
 * Only the few driver entry points below are used; their types are
 * declared here rather than taken from cuda.h, which a build machine need
 * not have.
 */
#define _GNU_SOURCE /* dladdr: where this library is, to read its kernel images */
#include "bt_runtime.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * The CUDA driver, opened once
 * ------------------------------------------------------------------------ */

typedef int bt_CUresult;
typedef int bt_CUdevice;
typedef struct bt_CUctx_st* bt_CUcontext;
typedef struct bt_CUmod_st* bt_CUmodule;
typedef struct bt_CUfunc_st* bt_CUfunction;
typedef struct bt_CUstream_st* bt_CUstream;

/* Values of the driver's enums that are used here (cuda.h). */
enum {
    BT_CU_ATTR_MAX_THREADS_PER_BLOCK = 1,
    BT_CU_ATTR_MAX_BLOCK_DIM_X = 2,
    BT_CU_ATTR_MAX_GRID_DIM_X = 5,
    BT_CU_ATTR_MULTIPROCESSOR_COUNT = 16,
    BT_CU_ATTR_CC_MAJOR = 75,
    BT_CU_ATTR_CC_MINOR = 76,
    BT_CU_ATTR_MAX_SHARED_PER_BLOCK_OPTIN = 97,
    BT_CU_FUNC_MAX_DYNAMIC_SHARED = 8,
    BT_CU_JIT_ERROR_LOG_BUFFER = 5,
    BT_CU_JIT_ERROR_LOG_BUFFER_SIZE = 6,
    BT_CU_ERROR_INVALID_IMAGE = 200,
    BT_CU_ERROR_NO_BINARY_FOR_GPU = 209,
    BT_CU_ERROR_INVALID_PTX = 218,
    BT_CU_ERROR_JIT_COMPILER_NOT_FOUND = 221,
    BT_CU_ERROR_UNSUPPORTED_PTX_VERSION = 222,
};

/* Dynamic shared memory a kernel may use without opting in. */
#define BT_DEFAULT_SHARED_LIMIT (48u * 1024u)

static struct {
    bt_CUresult (*cuInit)(unsigned);
    bt_CUresult (*cuDriverGetVersion)(int*);
    bt_CUresult (*cuGetErrorName)(bt_CUresult, const char**);
    bt_CUresult (*cuGetErrorString)(bt_CUresult, const char**);
    bt_CUresult (*cuDeviceGet)(bt_CUdevice*, int);
    bt_CUresult (*cuDeviceGetAttribute)(int*, int, bt_CUdevice);
    bt_CUresult (*cuDevicePrimaryCtxRetain)(bt_CUcontext*, bt_CUdevice);
    bt_CUresult (*cuCtxGetCurrent)(bt_CUcontext*);
    bt_CUresult (*cuCtxSetCurrent)(bt_CUcontext);
    bt_CUresult (*cuCtxGetDevice)(bt_CUdevice*);
    bt_CUresult (*cuCtxPushCurrent_v2)(bt_CUcontext);
    bt_CUresult (*cuCtxPopCurrent_v2)(bt_CUcontext*);
    bt_CUresult (*cuCtxGetId)(bt_CUcontext, unsigned long long*); /* CUDA 12+; optional */
    bt_CUresult (*cuModuleLoadDataEx)(bt_CUmodule*, const void*, unsigned, int*, void**);
    bt_CUresult (*cuModuleUnload)(bt_CUmodule);
    bt_CUresult (*cuModuleGetFunction)(bt_CUfunction*, bt_CUmodule, const char*);
    bt_CUresult (*cuFuncSetAttribute)(bt_CUfunction, int, int);
    bt_CUresult (*cuLaunchKernel)(bt_CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  unsigned, unsigned, bt_CUstream, void**, void**);
    /* cooperative kernels only; optional, so a driver without them still runs the others */
    bt_CUresult (*cuLaunchCooperativeKernel)(bt_CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                             unsigned, unsigned, bt_CUstream, void**);
    bt_CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int*, bt_CUfunction, int, size_t);
    /* TMA entries only (CUDA 12+); optional: without it their specializations' own entries launch */
    bt_CUresult (*cuTensorMapEncodeTiled)(bt_tensor_map*, int, uint32_t, void*, const uint64_t*, const uint64_t*,
                                          const uint32_t*, const uint32_t*, int, int, int, int);
} bt_cu;

static pthread_once_t bt_driver_once = PTHREAD_ONCE_INIT;
static int bt_driver_status = BT_ERR_NO_DRIVER;
static char bt_driver_error[1024]; /* written once, under bt_driver_once */

static const char* const bt_no_driver_help =
    "buildtile kernels run on an NVIDIA GPU with its driver installed; check the driver with "
    "nvidia-smi, or point BUILDTILE_LIBCUDA at libcuda.so.1";

static void bt_cu_describe(bt_CUresult r, char* buf, size_t size)
{
    const char* name = NULL;
    const char* text = NULL;
    if (bt_cu.cuGetErrorName == NULL || bt_cu.cuGetErrorName(r, &name) != 0 || name == NULL)
        name = "CUDA error";
    if (bt_cu.cuGetErrorString == NULL || bt_cu.cuGetErrorString(r, &text) != 0 || text == NULL)
        text = "no description";
    snprintf(buf, size, "%s %d (%s)", name, r, text);
}

static void bt_driver_open(void)
{
    const char* path = getenv("BUILDTILE_LIBCUDA");
    if (path == NULL || path[0] == '\0')
        path = "libcuda.so.1";
    void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char* why = dlerror();
        snprintf(bt_driver_error, sizeof bt_driver_error,
                 "the CUDA driver could not be loaded: %s", why ? why : path);
        return;
    }
    /* memcpy, not a cast: ISO C has no conversion from void* to a function
     * pointer; POSIX guarantees the representations match. */
#define BT_RESOLVE(name, required)                                                        \
    do {                                                                                  \
        void* symbol = dlsym(lib, #name);                                                 \
        memcpy(&bt_cu.name, &symbol, sizeof symbol);                                      \
        if (symbol == NULL && (required)) {                                               \
            snprintf(bt_driver_error, sizeof bt_driver_error,                             \
                     "the CUDA driver %s has no " #name "; it is too old for buildtile", path); \
            return;                                                                       \
        }                                                                                 \
    } while (0)
    BT_RESOLVE(cuGetErrorName, 1);
    BT_RESOLVE(cuGetErrorString, 1);
    BT_RESOLVE(cuInit, 1);
    BT_RESOLVE(cuDriverGetVersion, 1);
    BT_RESOLVE(cuDeviceGet, 1);
    BT_RESOLVE(cuDeviceGetAttribute, 1);
    BT_RESOLVE(cuDevicePrimaryCtxRetain, 1);
    BT_RESOLVE(cuCtxGetCurrent, 1);
    BT_RESOLVE(cuCtxSetCurrent, 1);
    BT_RESOLVE(cuCtxGetDevice, 1);
    BT_RESOLVE(cuCtxPushCurrent_v2, 1);
    BT_RESOLVE(cuCtxPopCurrent_v2, 1);
    BT_RESOLVE(cuCtxGetId, 0);
    BT_RESOLVE(cuModuleLoadDataEx, 1);
    BT_RESOLVE(cuModuleUnload, 1);
    BT_RESOLVE(cuModuleGetFunction, 1);
    BT_RESOLVE(cuFuncSetAttribute, 1);
    BT_RESOLVE(cuLaunchKernel, 1);
    BT_RESOLVE(cuLaunchCooperativeKernel, 0);
    BT_RESOLVE(cuOccupancyMaxActiveBlocksPerMultiprocessor, 0);
    BT_RESOLVE(cuTensorMapEncodeTiled, 0);
#undef BT_RESOLVE
    bt_CUresult r = bt_cu.cuInit(0);
    if (r != 0) {
        char what[256];
        bt_cu_describe(r, what, sizeof what);
        snprintf(bt_driver_error, sizeof bt_driver_error,
                 "the CUDA driver could not be initialised: cuInit failed with %s", what);
        return;
    }
    bt_driver_status = BT_OK;
}

static int bt_driver(void)
{
    pthread_once(&bt_driver_once, bt_driver_open);
    if (bt_driver_status != BT_OK)
        return bt_fail(bt_driver_status, bt_no_driver_help, "%s", bt_driver_error);
    return BT_OK;
}

static int bt_cuda_fail(bt_CUresult r, const char* kernel, const char* call)
{
    char what[256];
    bt_cu_describe(r, what, sizeof what);
    return bt_fail(BT_ERR_CUDA, NULL, "CUDA driver error: %s for kernel `%s` failed with %s", call, kernel, what);
}

/* ------------------------------------------------------------------------
 * Contexts and modules
 * ------------------------------------------------------------------------ */

/* A module loaded into one context, with the device facts a launch checks.
 * Entries are published with a release store and never freed, so readers
 * walk the list without the lock. */
struct bt_loaded {
    unsigned long long context;    /* cuCtxGetId, or the handle on older drivers */
    bt_CUdevice device;            /* the context's device: no cuCtxGetDevice per launch */
    bt_CUmodule module;
    int cc;
    int max_threads;
    int max_block[3];
    int max_grid[3];
    int max_shared;                /* dynamic shared memory after opting in */
    int multiprocessors;           /* SMs: a persistent Tile launch's wave */
    bt_loaded* next;
    bt_CUfunction functions[];     /* one per module symbol */
};

static pthread_mutex_t bt_lock = PTHREAD_MUTEX_INITIALIZER;

#define BT_MAX_DEVICES 64
static bt_CUcontext bt_primary[BT_MAX_DEVICES]; /* retained once each, under bt_lock */

static int bt_check_min_cc(const bt_kernel* k, bt_CUdevice dev, int cc)
{
    if (k->min_cc != 0 && cc < k->min_cc)
        return bt_fail(BT_ERR_CONTRACT, "run it on a newer GPU",
                       "launch contract violated: kernel `%s` needs compute capability %d.%d or newer, "
                       "but device %d is %d.%d (sm_%d)", k->name, k->min_cc / 10, k->min_cc % 10, dev,
                       cc / 10, cc % 10, cc);
    return BT_OK;
}

/* The order images are tried in, as the Python host picks them: */
enum {
    BT_PICK_EXACT_CUBIN,   /* built for exactly this device (sm_90, then sm_90a, sm_90f) */
    BT_PICK_OLDER_MINOR,   /* same major, older minor: sm_80 runs on sm_86 (newest first) */
    BT_PICK_PTX,           /* JIT-compiled, for a device at least the PTX's target */
    BT_PICKS
};

static int bt_image_usable(const bt_image* img, int cc, int pick)
{
    switch (pick) {
    case BT_PICK_EXACT_CUBIN:
        return img->kind == BT_IMAGE_CUBIN && img->cc == cc;
    case BT_PICK_OLDER_MINOR:
        return img->kind == BT_IMAGE_CUBIN && !img->arch_specific && img->cc / 10 == cc / 10 && img->cc < cc;
    default:
        return img->kind == BT_IMAGE_PTX && !img->arch_specific && img->cc <= cc;
    }
}

static int bt_is_image_refusal(bt_CUresult r)
{
    return r == BT_CU_ERROR_INVALID_IMAGE || r == BT_CU_ERROR_NO_BINARY_FOR_GPU ||
           r == BT_CU_ERROR_INVALID_PTX || r == BT_CU_ERROR_JIT_COMPILER_NOT_FOUND ||
           r == BT_CU_ERROR_UNSUPPORTED_PTX_VERSION;
}

static int bt_device_facts(const bt_kernel* k, bt_CUdevice dev, bt_loaded* e)
{
    int major = 0, minor = 0;
    struct { int attribute; int* value; } facts[] = {
        {BT_CU_ATTR_CC_MAJOR, &major},
        {BT_CU_ATTR_CC_MINOR, &minor},
        {BT_CU_ATTR_MAX_THREADS_PER_BLOCK, &e->max_threads},
        {BT_CU_ATTR_MAX_BLOCK_DIM_X, &e->max_block[0]},
        {BT_CU_ATTR_MAX_BLOCK_DIM_X + 1, &e->max_block[1]},
        {BT_CU_ATTR_MAX_BLOCK_DIM_X + 2, &e->max_block[2]},
        {BT_CU_ATTR_MAX_GRID_DIM_X, &e->max_grid[0]},
        {BT_CU_ATTR_MAX_GRID_DIM_X + 1, &e->max_grid[1]},
        {BT_CU_ATTR_MAX_GRID_DIM_X + 2, &e->max_grid[2]},
        {BT_CU_ATTR_MAX_SHARED_PER_BLOCK_OPTIN, &e->max_shared},
        {BT_CU_ATTR_MULTIPROCESSOR_COUNT, &e->multiprocessors},
    };
    for (size_t i = 0; i < sizeof facts / sizeof facts[0]; ++i) {
        bt_CUresult r = bt_cu.cuDeviceGetAttribute(facts[i].value, facts[i].attribute, dev);
        if (r != 0)
            return bt_cuda_fail(r, k->name, "cuDeviceGetAttribute");
    }
    e->cc = 10 * major + minor;
    return BT_OK;
}

/* The bytes of `img`: its embedded copy, or its file read into *owned (the
 * caller frees it), found from this library's own path: <_buildtile>/lib/. */
static int bt_image_bytes(const bt_image* img, const char* kernel, unsigned char** owned)
{
    *owned = NULL;
    if (img->data != NULL)
        return BT_OK;
    Dl_info self;
    char path[4096];
    if (dladdr((const void*)img, &self) == 0 || self.dli_fname == NULL) /* img is this library's data */
        return bt_fail(BT_ERR_NO_IMAGE, NULL, "cannot locate the library of kernel `%s` to read %s", kernel, img->file);
    const char* slash = strrchr(self.dli_fname, '/');
    const int dir = slash == NULL ? 1 : (int)(slash - self.dli_fname);
    snprintf(path, sizeof path, "%.*s/../%s", dir, slash == NULL ? "." : self.dli_fname, img->file);
    FILE* f = fopen(path, "rb");
    unsigned char* data = f == NULL ? NULL : malloc(img->size + 1);
    const size_t got = data == NULL ? 0 : fread(data, 1, img->size + 1, f);
    if (f != NULL)
        fclose(f);
    if (got != img->size) {
        free(data);
        return bt_fail(BT_ERR_NO_IMAGE, "reinstall the package: its kernel images are incomplete",
                       "the image of kernel `%s` for %s is missing or damaged: %s (expected %zu bytes)",
                       kernel, img->target, path, img->size);
    }
    data[img->size] = '\0'; /* PTX is text */
    *owned = data;
    return BT_OK;
}

/* Load the best image of k's module for device `dev` into the current
 * context: the exact cubin, else PTX (both in the generator's order).
 * Images whose PTX ISA the driver is too old for are passed over; when
 * that leaves none, the refusal names the driver it has and the one they
 * need, and nothing is handed to the driver. */
static int bt_load(const bt_kernel* k, bt_CUdevice dev, bt_loaded** out)
{
    const bt_module* m = k->module;
    bt_loaded* e = calloc(1, sizeof *e + (size_t)m->n_symbols * sizeof(bt_CUfunction));
    if (e == NULL)
        return bt_fail(BT_ERR_CUDA, NULL, "out of host memory loading kernel `%s`", k->name);
    int status = bt_device_facts(k, dev, e);
    if (status == BT_OK) /* before the images: too old a device is the contract's refusal */
        status = bt_check_min_cc(k, dev, e->cc);
    if (status != BT_OK) {
        free(e);
        return status;
    }

    int driver_version = 0;
    bt_CUresult version_status = bt_cu.cuDriverGetVersion(&driver_version);
    if (version_status != 0) {
        free(e);
        return bt_cuda_fail(version_status, k->name, "cuDriverGetVersion");
    }
    char log[1024];
    bt_CUresult refusal = 0;
    const bt_image* refused = NULL;
    int needed_driver = 0; /* the lowest driver of the images passed over for this one */
    for (int pick = 0; pick < BT_PICKS && e->module == NULL; ++pick)
        for (int i = 0; i < m->n_images && e->module == NULL; ++i) {
            const bt_image* img = &m->images[i];
            if (!bt_image_usable(img, e->cc, pick))
                continue;
            if (img->min_driver > driver_version) {
                if (needed_driver == 0 || img->min_driver < needed_driver)
                    needed_driver = img->min_driver;
                continue;
            }
            int options[] = {BT_CU_JIT_ERROR_LOG_BUFFER, BT_CU_JIT_ERROR_LOG_BUFFER_SIZE};
            void* values[] = {log, (void*)(uintptr_t)sizeof log};
            log[0] = '\0';
            unsigned char* owned;
            const int read = bt_image_bytes(img, k->name, &owned);
            if (read != BT_OK) {
                free(e);
                return read;
            }
            bt_CUresult r = bt_cu.cuModuleLoadDataEx(&e->module, owned != NULL ? owned : img->data, 2, options,
                                                     values);
            free(owned); /* the driver keeps its own copy */
            if (r == 0)
                break;
            e->module = NULL;
            log[sizeof log - 1] = '\0';
            if (!bt_is_image_refusal(r)) {
                free(e);
                return bt_cuda_fail(r, k->name, "cuModuleLoadDataEx");
            }
            refusal = r;
            refused = img;
        }

    if (e->module == NULL) {
        const int cc = e->cc;
        free(e);
        char help[256];
        snprintf(help, sizeof help, "rebuild the package with \"sm_%d\" in `targets` under [tool.buildtile], "
                 "or with `ptx = true` and a lowest target no newer than sm_%d", cc, cc);
        if (refused == NULL && needed_driver != 0) {
            snprintf(help, sizeof help, "update the NVIDIA driver to CUDA %d.%d or newer",
                     needed_driver / 1000, needed_driver % 1000 / 10);
            return bt_fail(BT_ERR_NO_IMAGE, help,
                           "no image of kernel `%s` loads with the CUDA driver of device %d (sm_%d): the driver "
                           "is CUDA %d.%d, and the images this device could run need CUDA %d.%d or newer; "
                           "the package was built for %s", k->name, dev, cc, driver_version / 1000,
                           driver_version % 1000 / 10, needed_driver / 1000, needed_driver % 1000 / 10,
                           m->built_for);
        }
        if (refused == NULL)
            return bt_fail(BT_ERR_NO_IMAGE, help,
                           "no image of kernel `%s` runs on device %d (sm_%d): the package was built for %s",
                           k->name, dev, cc, m->built_for);
        char what[256];
        bt_cu_describe(refusal, what, sizeof what);
        return bt_fail(BT_ERR_NO_IMAGE, "update the NVIDIA driver, or rebuild the package with this device's target",
                       "no image of kernel `%s` loads on device %d (sm_%d): the package was built for %s, "
                       "and the driver refused the %s for %s with %s%s%s", k->name, dev, cc, m->built_for,
                       refused->kind == BT_IMAGE_PTX ? "PTX" : "cubin", refused->target, what,
                       log[0] ? ": " : "", log);
    }

    for (int i = 0; i < m->n_symbols; ++i) {
        bt_CUresult r = bt_cu.cuModuleGetFunction(&e->functions[i], e->module, m->symbols[i]);
        if (r != 0) {
            bt_cu.cuModuleUnload(e->module);
            free(e);
            char what[256];
            bt_cu_describe(r, what, sizeof what);
            return bt_fail(BT_ERR_CUDA, "the package's artifacts do not match its manifest; rebuild it",
                           "the image loaded for kernel `%s` has no entry %s: %s", k->name, m->symbols[i], what);
        }
    }
    *out = e;
    return BT_OK;
}

static const bt_loaded* bt_find(bt_module* m, unsigned long long context)
{
    for (const bt_loaded* e = __atomic_load_n(&m->loaded, __ATOMIC_ACQUIRE); e != NULL; e = e->next)
        if (e->context == context)
            return e;
    return NULL;
}

/* What identifies a context for the module cache: its unique id where the driver has one (a
 * context destroyed and created again may get the same address), else its address. */
static int bt_context_id(const bt_kernel* k, bt_CUcontext ctx, unsigned long long* id)
{
    *id = (unsigned long long)(uintptr_t)ctx;
    if (bt_cu.cuCtxGetId != NULL) {
        bt_CUresult r = bt_cu.cuCtxGetId(ctx, id);
        if (r != 0)
            return bt_cuda_fail(r, k->name, "cuCtxGetId");
    }
    return BT_OK;
}

static int bt_module_in(const bt_kernel* k, bt_CUcontext ctx, const bt_loaded** out)
{
    unsigned long long context;
    int id_status = bt_context_id(k, ctx, &context);
    if (id_status != BT_OK)
        return id_status;
    bt_module* m = k->module;
    *out = bt_find(m, context);
    if (*out != NULL)
        return BT_OK;

    int status = BT_OK;
    bt_CUdevice dev;
    bt_CUresult r = bt_cu.cuCtxGetDevice(&dev);   /* only on the first launch in a context */
    if (r != 0)
        return bt_cuda_fail(r, k->name, "cuCtxGetDevice");
    pthread_mutex_lock(&bt_lock);
    *out = bt_find(m, context);
    if (*out == NULL) {
        bt_loaded* e = NULL;
        status = bt_load(k, dev, &e);
        if (status == BT_OK) {
            e->context = context;
            e->device = dev;
            e->next = m->loaded;
            __atomic_store_n(&m->loaded, e, __ATOMIC_RELEASE);
            *out = e;
        }
    }
    pthread_mutex_unlock(&bt_lock);
    return status;
}

/* ------------------------------------------------------------------------
 * Step 5: launch
 * ------------------------------------------------------------------------ */

static int bt_check_device_limits(const bt_kernel* k, const bt_launch_config* cfg, const uint32_t* b,
                                  uint32_t shared, bt_CUdevice dev, const bt_loaded* e)
{
    int status = bt_check_min_cc(k, dev, e->cc);
    if (status != BT_OK)
        return status;
    for (int axis = 0; axis < 3; ++axis)
        if (b[axis] > (uint32_t)e->max_block[axis])
            return bt_fail(BT_ERR_CONTRACT, NULL,
                           "launch contract violated: kernel `%s` got block (%u, %u, %u), but device %d "
                           "allows at most %d threads along %c", k->name, b[0], b[1], b[2], dev,
                           e->max_block[axis], "xyz"[axis]);
    const uint64_t threads = (uint64_t)b[0] * b[1] * b[2];
    if (threads > (uint64_t)e->max_threads)
        return bt_fail(BT_ERR_CONTRACT, NULL,
                       "launch contract violated: kernel `%s` got block (%u, %u, %u) (%llu threads), but "
                       "device %d allows at most %d threads per block", k->name, b[0], b[1], b[2],
                       (unsigned long long)threads, dev, e->max_threads);
    for (int axis = 0; axis < 3; ++axis)
        if (cfg->grid[axis] > (uint32_t)e->max_grid[axis])
            return bt_fail(BT_ERR_CONTRACT, "cover the rest with a loop on the host or a grid-stride loop in the kernel",
                           "launch contract violated: kernel `%s` got grid (%u, %u, %u), but device %d "
                           "allows at most %d blocks along %c", k->name, cfg->grid[0], cfg->grid[1],
                           cfg->grid[2], dev, e->max_grid[axis], "xyz"[axis]);
    if (shared > (uint32_t)e->max_shared)
        return bt_fail(BT_ERR_CONTRACT, NULL,
                       "launch contract violated: kernel `%s` asks for %u bytes of dynamic shared memory, "
                       "but device %d allows at most %d", k->name, shared, dev, e->max_shared);
    return BT_OK;
}

/* A cooperative kernel waits for its whole grid (simt.grid_sync), which only ends when every
 * block is resident at once: refuse a grid larger than the device's occupancy for this
 * function (blocks per multiprocessor x multiprocessors), as the Python host's prepare() does. */
static int bt_check_co_resident(const bt_kernel* k, bt_CUfunction f, const uint32_t* grid, const uint32_t* b,
                                uint32_t shared, bt_CUdevice dev)
{
    if (bt_cu.cuLaunchCooperativeKernel == NULL || bt_cu.cuOccupancyMaxActiveBlocksPerMultiprocessor == NULL)
        return bt_fail(BT_ERR_CUDA, "update the NVIDIA driver",
                       "kernel `%s` is cooperative, but the CUDA driver has no cooperative launch", k->name);
    int per_sm = 0, sms = 0;
    bt_CUresult r = bt_cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, (int)(b[0] * b[1] * b[2]),
                                                                      (size_t)shared);
    if (r != 0)
        return bt_cuda_fail(r, k->name, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    r = bt_cu.cuDeviceGetAttribute(&sms, BT_CU_ATTR_MULTIPROCESSOR_COUNT, dev);
    if (r != 0)
        return bt_cuda_fail(r, k->name, "cuDeviceGetAttribute");
    const uint64_t fits = (uint64_t)per_sm * (uint64_t)sms;
    const uint64_t blocks = (uint64_t)grid[0] * grid[1] * grid[2];
    if (blocks > fits)
        return bt_fail(BT_ERR_CONTRACT,
                       "launch at most that many blocks and cover the rest with a grid-stride loop "
                       "(`for i in range(simt.grid(1), n, simt.gridsize(1))`)",
                       "launch contract violated: kernel `%s` is cooperative (it waits for the whole grid), "
                       "but device %d holds at most %llu of its blocks at once, and the grid (%u, %u, %u) has %llu",
                       k->name, dev, (unsigned long long)fits, grid[0], grid[1], grid[2],
                       (unsigned long long)blocks);
    return BT_OK;
}

/* The context to launch in: the arguments' device's, as in the Python host. That is the
 * thread's current context when it is on that device; else the device's primary context,
 * made current as the runtime API does when no context is, or pushed for this launch only
 * (*pushed; bt_launch pops it) when another device's context is current. */
static int bt_context(const bt_kernel* k, const bt_arg* args, bt_CUcontext* ctx, int* pushed,
                      const bt_loaded** loaded)
{
    *pushed = 0;
    *loaded = NULL;
    bt_CUcontext current;
    bt_CUresult r = bt_cu.cuCtxGetCurrent(&current);
    if (r != 0)
        return bt_cuda_fail(r, k->name, "cuCtxGetCurrent");
    const int wanted = k->n_buffers > 0 ? args[0].device_id : -1;
    if (current != NULL) {
        /* the device of a context the module is loaded in is known: no driver call for it */
        unsigned long long id;
        int status = bt_context_id(k, current, &id);
        if (status != BT_OK)
            return status;
        const bt_loaded* known = bt_find(k->module, id);
        bt_CUdevice device = known != NULL ? known->device : wanted;
        if (known == NULL && wanted >= 0 && (r = bt_cu.cuCtxGetDevice(&device)) != 0)
            return bt_cuda_fail(r, k->name, "cuCtxGetDevice");
        if (device == wanted || wanted < 0) {   /* no arguments tell a device: the current one it is */
            *ctx = current;
            *loaded = known;
            return BT_OK;
        }
    }
    const int ordinal = wanted >= 0 ? wanted : 0;
    bt_CUdevice device;
    r = bt_cu.cuDeviceGet(&device, ordinal);
    if (r != 0)
        return bt_cuda_fail(r, k->name, "cuDeviceGet for the arguments' device");
    pthread_mutex_lock(&bt_lock);
    if (ordinal < BT_MAX_DEVICES && bt_primary[ordinal] != NULL) {
        *ctx = bt_primary[ordinal];
    } else {
        r = bt_cu.cuDevicePrimaryCtxRetain(ctx, device);
        if (r == 0 && ordinal < BT_MAX_DEVICES)
            bt_primary[ordinal] = *ctx;
    }
    pthread_mutex_unlock(&bt_lock);
    if (r != 0)
        return bt_cuda_fail(r, k->name, "cuDevicePrimaryCtxRetain");
    if (current == NULL) {
        r = bt_cu.cuCtxSetCurrent(*ctx);
        if (r != 0)
            return bt_cuda_fail(r, k->name, "cuCtxSetCurrent");
    } else {
        r = bt_cu.cuCtxPushCurrent_v2(*ctx);
        if (r != 0)
            return bt_cuda_fail(r, k->name, "cuCtxPushCurrent");
        *pushed = 1;
    }
    return BT_OK;
}

/* bt_launch in the context chosen for it (`e`: its module there, when already known). */
static int bt_launch_in(const bt_kernel* k, const bt_launch_config* cfg, const uint32_t* block,
                        bt_CUcontext ctx, const bt_loaded* e, void** params)
{
    int status = e != NULL ? BT_OK : bt_module_in(k, ctx, &e);
    if (status != BT_OK)
        return status;
    const bt_CUdevice dev = e->device;
    const uint32_t* b = block != NULL ? block : k->block;
    const uint32_t shared = cfg->shared_mem != 0 ? cfg->shared_mem : k->dynamic_shared;
    status = bt_check_device_limits(k, cfg, b, shared, dev, e);
    if (status != BT_OK)
        return status;

    bt_CUfunction f = e->functions[k->index];
    bt_CUresult r;
    if (shared > BT_DEFAULT_SHARED_LIMIT) {
        r = bt_cu.cuFuncSetAttribute(f, BT_CU_FUNC_MAX_DYNAMIC_SHARED, (int)shared);
        if (r != 0)
            return bt_cuda_fail(r, k->name, "cuFuncSetAttribute");
    }
    /* a coarsened kernel runs k->coarsen logical blocks per launched block (it gets the
     * logical grid.x as its last parameter) */
    const uint32_t coarsen = k->coarsen > 1 ? k->coarsen : 1;
    const uint32_t grid_x = cfg->grid[0] / coarsen + (cfg->grid[0] % coarsen != 0);
    if (k->cooperative) {
        const uint32_t grid[3] = {grid_x, cfg->grid[1], cfg->grid[2]};
        status = bt_check_co_resident(k, f, grid, b, shared, dev);
        if (status != BT_OK)
            return status;
        r = bt_cu.cuLaunchCooperativeKernel(f, grid_x, cfg->grid[1], cfg->grid[2], b[0], b[1], b[2], shared,
                                            (bt_CUstream)cfg->stream, params);
        if (r != 0)
            return bt_cuda_fail(r, k->name, "cuLaunchCooperativeKernel");
        return BT_OK;
    }
    r = bt_cu.cuLaunchKernel(f, grid_x, cfg->grid[1], cfg->grid[2], b[0], b[1], b[2], shared,
                             (bt_CUstream)cfg->stream, params, NULL);
    if (r != 0)
        return bt_cuda_fail(r, k->name, "cuLaunchKernel");
    return BT_OK;
}

int bt_multiprocessors(const bt_kernel* k, const bt_arg* args, int* count)
{
    int status = bt_driver();
    if (status != BT_OK)
        return status;
    bt_CUcontext ctx;
    int pushed;
    const bt_loaded* e;
    status = bt_context(k, args, &ctx, &pushed, &e);
    if (status != BT_OK)
        return status;
    if (e == NULL)   /* the module's first use in this context: load it (its facts come with it) */
        status = bt_module_in(k, ctx, &e);
    if (status == BT_OK)
        *count = e->multiprocessors;
    if (pushed) {
        bt_CUcontext popped;
        bt_cu.cuCtxPopCurrent_v2(&popped);
    }
    return status;
}

int bt_launch(const bt_kernel* k, const bt_launch_config* cfg, const uint32_t* block,
              const bt_arg* args, void** params)
{
    int status = bt_driver();
    if (status != BT_OK)
        return status;
    bt_CUcontext ctx;
    int pushed;
    const bt_loaded* e;
    status = bt_context(k, args, &ctx, &pushed, &e);
    if (status != BT_OK)
        return status;
    status = bt_launch_in(k, cfg, block, ctx, e, params);
    if (pushed) {
        bt_CUcontext popped;
        bt_cu.cuCtxPopCurrent_v2(&popped);
    }
    return status;
}

/* ------------------------------------------------------------------------
 * TMA entries: their tensor maps, or the specialization's own entry
 * ------------------------------------------------------------------------ */

/* The copy engine's rules for one mapped tensor, as runtime/tensor_maps.py checks them. */
static int bt_tma_suits(const bt_tma_map* map, const bt_arg* a)
{
    const int64_t rows = a->shape[0], cols = a->shape[1];
    const int64_t pitch = a->strides[0] * map->elem_bytes;
    if (a->strides[1] != 1 || (uintptr_t)a->data % 16 != 0 || pitch % 16 != 0)
        return 0;
    if (rows < 1 || cols < 1 || rows > ((int64_t)1 << 32) || cols > ((int64_t)1 << 32) || pitch <= 0 ||
        pitch >= ((int64_t)1 << 40))
        return 0;
    return rows == 1 || a->strides[0] >= cols;   /* rows that overlap are no tensor TMA reads */
}

/* The compute capability of the arguments' device, asked once per device. */
static int bt_tma_device_cc(const bt_kernel* k, const bt_arg* args, int* cc)
{
    static int known[BT_MAX_DEVICES];
    const int ordinal = k->n_buffers > 0 && args[0].device_id >= 0 ? args[0].device_id : 0;
    if (ordinal < BT_MAX_DEVICES && __atomic_load_n(&known[ordinal], __ATOMIC_RELAXED) != 0) {
        *cc = __atomic_load_n(&known[ordinal], __ATOMIC_RELAXED);
        return BT_OK;
    }
    bt_CUdevice dev;
    int major = 0, minor = 0;
    bt_CUresult r = bt_cu.cuDeviceGet(&dev, ordinal);
    if (r == 0)
        r = bt_cu.cuDeviceGetAttribute(&major, BT_CU_ATTR_CC_MAJOR, dev);
    if (r == 0)
        r = bt_cu.cuDeviceGetAttribute(&minor, BT_CU_ATTR_CC_MINOR, dev);
    if (r != 0)
        return bt_cuda_fail(r, k->name, "cuDeviceGetAttribute");
    *cc = 10 * major + minor;
    if (ordinal < BT_MAX_DEVICES)
        __atomic_store_n(&known[ordinal], *cc, __ATOMIC_RELAXED);
    return BT_OK;
}

int bt_tma_prepare(const bt_tma* t, const bt_arg* args, bt_tensor_map* maps, int* usable)
{
    *usable = 0;
    for (int i = 0; i < t->n_maps; ++i)
        if (!bt_tma_suits(&t->maps[i], &args[t->maps[i].buffer]))
            return BT_OK;
    int status = bt_driver();
    if (status != BT_OK || bt_cu.cuTensorMapEncodeTiled == NULL)
        return status;
    int cc = 0;
    status = bt_tma_device_cc(t->kernel, args, &cc);
    if (status != BT_OK)
        return status;
    const bt_module* m = t->kernel->module;
    int runs = 0;
    for (int pick = 0; pick < BT_PICKS && !runs; ++pick)
        for (int i = 0; i < m->n_images && !runs; ++i)
            runs = bt_image_usable(&m->images[i], cc, pick);
    if (!runs)
        return BT_OK;
    for (int i = 0; i < t->n_maps; ++i) {
        const bt_tma_map* map = &t->maps[i];
        const bt_arg* a = &args[map->buffer];
        const uint64_t dims[2] = {(uint64_t)a->shape[1], (uint64_t)a->shape[0]};
        const uint64_t strides[1] = {(uint64_t)(a->strides[0] * map->elem_bytes)};
        const uint32_t element_strides[2] = {1, 1};
        /* no interleave, the map's swizzle, 256-byte L2 promotion, zeros out of bounds */
        bt_CUresult r = bt_cu.cuTensorMapEncodeTiled(&maps[i], map->data_type, 2, a->data, dims, strides, map->box,
                                                     element_strides, 0, map->swizzle, 3, 0);
        if (r != 0)
            return bt_cuda_fail(r, t->kernel->name, "cuTensorMapEncodeTiled");
    }
    *usable = 1;
    return BT_OK;
}
