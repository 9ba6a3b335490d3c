/*
 * A stand-in for libcuda.so.1, for testing a package's shim library on a
 * machine without a GPU (the shim opens it through BUILDTILE_LIBCUDA).
 *
 * It implements the driver entry points the shim resolves, records what
 * the shim asks for (module loads, launches with their parameter bytes),
 * and can be told which device to pretend to be. Tests read and set its
 * state through ctypes: `fake` and the fake_* functions.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;

#define FAKE_MAX_PARAMS 32
#define FAKE_DEVICES 4

struct fake_context {
    int device;
    unsigned long long id;
};

struct fake_function {
    char name[128];
};

/* Everything a test configures or inspects. */
struct fake_state {
    /* configuration */
    int cc_major, cc_minor;     /* of every device */
    int device_count;
    int init_result;            /* cuInit's answer */
    int refuse_cubin;           /* cuModuleLoadDataEx refuses ELF images (209) */
    int refuse_ptx;             /* ... and PTX text (222, with a JIT log) */
    int param_count;            /* sizes of the next launch's parameters */
    int param_sizes[FAKE_MAX_PARAMS];
    /* observations */
    int module_loads;
    const unsigned char* last_image;
    int primary_retains;
    int launches;
    char function[128];
    unsigned grid[3], block[3], shared;
    void* stream;
    int set_attribute_value;    /* cuFuncSetAttribute's last value */
    unsigned char params[FAKE_MAX_PARAMS][8];
    int pushes;                 /* contexts pushed over another device's */
    /* configuration, added last so the layout above stays as tests mirror it */
    int driver_version;         /* cuDriverGetVersion's answer (13000: CUDA 13.0) */
    int multiprocessors;        /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT of every device */
    int blocks_per_sm;          /* cuOccupancyMaxActiveBlocksPerMultiprocessor's answer */
    int cooperative_launches;   /* of `launches`, those made with cuLaunchCooperativeKernel */
    int occupancy_threads;      /* the block size the last occupancy query asked about */
};

struct fake_state fake = {9, 0, 2, 0, 0, 0, 0, {0}, 0, NULL, 0, 0, "", {0}, {0}, 0, NULL, 0, {{0}}, 0, 13000,
                          132, 8, 0, 0};

static struct fake_context contexts[FAKE_DEVICES];
static struct fake_context* current;
static struct fake_function functions[16];
static int n_functions;
static unsigned long long next_context_id = 1;

/* Make device `device` current through a context of its own ("recreated":
 * a new id, as a destroyed and created context would have). */
void fake_make_current(int device, int recreated)
{
    if (device < 0) {
        current = NULL;
        return;
    }
    contexts[device].device = device;
    if (contexts[device].id == 0 || recreated)
        contexts[device].id = next_context_id++;
    current = &contexts[device];
}

void fake_reset_observations(void)
{
    fake.module_loads = 0;
    fake.last_image = NULL;
    fake.primary_retains = 0;
    fake.launches = 0;
    fake.pushes = 0;
    fake.cooperative_launches = 0;
    fake.function[0] = '\0';
    fake.param_count = 0; /* a test that reads parameters sets their sizes first */
}

CUresult cuInit(unsigned flags)
{
    (void)flags;
    return fake.init_result;
}

CUresult cuDriverGetVersion(int* version)
{
    *version = fake.driver_version;
    return 0;
}

CUresult cuGetErrorName(CUresult r, const char** name)
{
    *name = r == 209 ? "CUDA_ERROR_NO_BINARY_FOR_GPU"
          : r == 222 ? "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"
          : r == 100 ? "CUDA_ERROR_NO_DEVICE"
          : "CUDA_ERROR_FAKE";
    return 0;
}

CUresult cuGetErrorString(CUresult r, const char** text)
{
    *text = r == 100 ? "no CUDA-capable device is detected" : "an error of the fake driver";
    return 0;
}

CUresult cuDeviceGet(int* device, int ordinal)
{
    if (ordinal < 0 || ordinal >= fake.device_count)
        return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *device = ordinal;
    return 0;
}

CUresult cuDeviceGetAttribute(int* value, int attribute, int device)
{
    (void)device;
    switch (attribute) {
    case 1: *value = 1024; return 0;                       /* threads per block */
    case 2: case 3: *value = 1024; return 0;               /* block x, y */
    case 4: *value = 64; return 0;                         /* block z */
    case 5: *value = 2147483647; return 0;                 /* grid x */
    case 6: case 7: *value = 65535; return 0;              /* grid y, z */
    case 16: *value = fake.multiprocessors; return 0;
    case 75: *value = fake.cc_major; return 0;
    case 76: *value = fake.cc_minor; return 0;
    case 97: *value = 227 * 1024; return 0;                /* shared memory, opted in */
    default: return 1;
    }
}

CUresult cuDevicePrimaryCtxRetain(struct fake_context** ctx, int device)
{
    fake.primary_retains++;
    contexts[device].device = device;
    if (contexts[device].id == 0)
        contexts[device].id = next_context_id++;
    *ctx = &contexts[device];
    return 0;
}

CUresult cuCtxGetCurrent(struct fake_context** ctx)
{
    *ctx = current;
    return 0;
}

CUresult cuCtxSetCurrent(struct fake_context* ctx)
{
    current = ctx;
    return 0;
}

/* One level of pushing is all a launch needs. */
static struct fake_context* pushed_over;

CUresult cuCtxPushCurrent_v2(struct fake_context* ctx)
{
    fake.pushes++;
    pushed_over = current;
    current = ctx;
    return 0;
}

CUresult cuCtxPopCurrent_v2(struct fake_context** ctx)
{
    if (ctx != NULL)
        *ctx = current;
    current = pushed_over;
    pushed_over = NULL;
    return 0;
}

CUresult cuCtxGetDevice(int* device)
{
    if (current == NULL)
        return 201; /* CUDA_ERROR_INVALID_CONTEXT */
    *device = current->device;
    return 0;
}

CUresult cuCtxGetId(struct fake_context* ctx, unsigned long long* id)
{
    *id = ctx->id;
    return 0;
}

CUresult cuModuleLoadDataEx(void** module, const void* image, unsigned n, int* options, void** values)
{
    const int is_cubin = memcmp(image, "\x7f" "ELF", 4) == 0;
    if (is_cubin ? fake.refuse_cubin : fake.refuse_ptx) {
        for (unsigned i = 0; i < n; ++i)
            if (options[i] == 5) /* CU_JIT_ERROR_LOG_BUFFER */
                snprintf((char*)values[i], 64, "ptxas fatal: refused by the fake driver");
        return is_cubin ? 209 : 222;
    }
    fake.module_loads++;
    fake.last_image = image;
    *module = (void*)image;
    return 0;
}

CUresult cuModuleUnload(void* module)
{
    (void)module;
    return 0;
}

CUresult cuModuleGetFunction(struct fake_function** f, void* module, const char* name)
{
    (void)module;
    struct fake_function* out = &functions[n_functions++ % 16];
    snprintf(out->name, sizeof out->name, "%s", name);
    *f = out;
    return 0;
}

CUresult cuFuncSetAttribute(struct fake_function* f, int attribute, int value)
{
    (void)f;
    (void)attribute;
    fake.set_attribute_value = value;
    return 0;
}

CUresult cuLaunchKernel(struct fake_function* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void* stream, void** params, void** extra)
{
    (void)extra;
    fake.launches++;
    snprintf(fake.function, sizeof fake.function, "%s", f->name);
    fake.grid[0] = gx, fake.grid[1] = gy, fake.grid[2] = gz;
    fake.block[0] = bx, fake.block[1] = by, fake.block[2] = bz;
    fake.shared = shared;
    fake.stream = stream;
    memset(fake.params, 0, sizeof fake.params);
    for (int i = 0; i < fake.param_count && i < FAKE_MAX_PARAMS; ++i)
        memcpy(fake.params[i], params[i], (size_t)fake.param_sizes[i]);
    return 0;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, struct fake_function* f, int threads,
                                                     size_t shared)
{
    (void)f;
    (void)shared;
    fake.occupancy_threads = threads;
    *blocks = fake.blocks_per_sm;
    return 0;
}

CUresult cuLaunchCooperativeKernel(struct fake_function* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned shared, void* stream, void** params)
{
    fake.cooperative_launches++;
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, NULL);
}

/* The last cuTensorMapEncodeTiled call and how many were made (an object of its own: the layout of
 * `fake` is mirrored by tests). The map it writes starts with the global address, then the
 * extents, so a launch's recorded parameters show which map it got. */
struct fake_tensor_map_call {
    int calls;
    int data_type;
    unsigned rank;
    unsigned long long address;
    unsigned long long dims[2];
    unsigned long long strides[1];
    unsigned box[2];
    unsigned element_strides[2];
    int interleave, swizzle, l2_promotion, oob_fill;
};

struct fake_tensor_map_call fake_tensor_map;

CUresult cuTensorMapEncodeTiled(void* map, int data_type, unsigned rank, void* address,
                                const unsigned long long* dims, const unsigned long long* strides,
                                const unsigned* box, const unsigned* element_strides, int interleave,
                                int swizzle, int l2_promotion, int oob_fill)
{
    struct fake_tensor_map_call* c = &fake_tensor_map;
    c->calls++;
    c->data_type = data_type;
    c->rank = rank;
    c->address = (unsigned long long)(uintptr_t)address;
    for (unsigned d = 0; d < 2 && d < rank; ++d) {
        c->dims[d] = dims[d];
        c->box[d] = box[d];
        c->element_strides[d] = element_strides[d];
    }
    c->strides[0] = rank > 1 ? strides[0] : 0;
    c->interleave = interleave, c->swizzle = swizzle, c->l2_promotion = l2_promotion, c->oob_fill = oob_fill;
    memset(map, 0, 128);
    memcpy(map, &c->address, sizeof c->address);
    memcpy((unsigned char*)map + 8, c->dims, sizeof c->dims);
    return 0;
}
