/*
 * buildtile.runtime._native: the hot part of the Python host's launch, in C.
 *
 * Going through the cuda.bindings wrappers costs about 0.7 us per launch
 * (an object for the current context, a comparison of two such objects,
 * argument marshalling in cuLaunchKernel); this module does the same
 * calls through plain function pointers. It knows nothing of CUDA's
 * headers or of how libcuda is found: buildtile.runtime.driver asks the
 * driver (cuGetProcAddress, through cuda.bindings) for the five entry
 * points and hands their addresses to install(), so the library that
 * launches is the one cuda.bindings loaded.
 *
 * launch() follows CudaDriver._launch_through_bindings in driver.py step
 * by step: make the arguments' primary context current for the call when
 * another one is (push, launch, pop) or adopt it when none is, then
 * cuLaunchKernel with a pointer array, built on the stack, into the
 * caller's packed parameter bytes.
 *
 * read_dlpack() reads, for a generated argument binder, the tensors of a
 * launch through their type's DLPack exchange API
 * (__dlpack_c_exchange_api__, dlpack.h v1.3: PyTorch 2.10 and later), one
 * C call per tensor that allocates nothing. read_torch() does the same
 * for older PyTorch with the getters the binder's Python would call,
 * without the interpreter (or an attribute lookup) between them.
 *
 * plain_torch_call() is the test an eager call of a kernel's torch op makes
 * before it launches without PyTorch's dispatcher (frameworks/torch_eager.py):
 * no mode or transform active, and plain tensors. EagerCall is the whole call
 * of a SIMT kernel's op: that test, then the launch, or the dispatcher's way.
 *
 * FastLaunch is the base of runtime.launch.PreparedLaunch: once a launch
 * has gone the Python way and armed it, a call whose arguments bind the
 * same way (same types, same device, no stream to wait on) resolves the
 * stream, calls the binder, packs and launches from here.
 *
 * The module is optional: when it could not be compiled at install time,
 * driver.py keeps launching through cuda.bindings.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef int CUresult;
typedef void* CUcontext;
typedef void* CUfunction;
typedef void* CUstream;

typedef CUresult (*ctx_get_current_fn)(CUcontext*);
typedef CUresult (*ctx_set_current_fn)(CUcontext);
typedef CUresult (*ctx_push_current_fn)(CUcontext);
typedef CUresult (*ctx_pop_current_fn)(CUcontext*);
typedef CUresult (*launch_kernel_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                     unsigned, CUstream, void**, void**);

static ctx_get_current_fn ctx_get_current;
static ctx_set_current_fn ctx_set_current;
static ctx_push_current_fn ctx_push_current;
static ctx_pop_current_fn ctx_pop_current;
static launch_kernel_fn launch_kernel;

/* Bumped by install() and forget_armed(): an armed launch of an older epoch is disarmed, so a
   new driver (or new entry points) never sees a function handle armed under the old one. */
static unsigned long launch_epoch = 1;

/* A pointer-sized value from an int or from an object with __int__ (cuda.bindings handles). */
static int as_address(PyObject* value, void** out)
{
    if (PyLong_Check(value)) {
        *out = PyLong_AsVoidPtr(value);
    } else {
        PyObject* number = PyNumber_Long(value);
        if (number == NULL)
            return -1;
        *out = PyLong_AsVoidPtr(number);
        Py_DECREF(number);
    }
    return (*out == NULL && PyErr_Occurred()) ? -1 : 0;
}

PyDoc_STRVAR(install_doc,
    "install(cuCtxGetCurrent, cuCtxSetCurrent, cuCtxPushCurrent, cuCtxPopCurrent, cuLaunchKernel)\n\n"
    "Take the addresses of the driver entry points launch() calls.");

static PyObject* install(PyObject* self, PyObject* const* args, Py_ssize_t nargs)
{
    void* pointers[5];
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "install() takes the addresses of 5 driver entry points");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < 5; ++k) {
        if (as_address(args[k], &pointers[k]) < 0)
            return NULL;
        if (pointers[k] == NULL) {
            PyErr_SetString(PyExc_ValueError, "install(): a driver entry point is null");
            return NULL;
        }
    }
    ctx_get_current = (ctx_get_current_fn)pointers[0];
    ctx_set_current = (ctx_set_current_fn)pointers[1];
    ctx_push_current = (ctx_push_current_fn)pointers[2];
    ctx_pop_current = (ctx_pop_current_fn)pointers[3];
    launch_kernel = (launch_kernel_fn)pointers[4];
    ++launch_epoch;  /* launches armed under the old entry points arm again */
    Py_RETURN_NONE;
}

PyDoc_STRVAR(installed_doc,
    "installed() -> tuple | None\n\n"
    "The addresses install() took, in its order (None before the first install()).");

static PyObject* installed(PyObject* self, PyObject* unused)
{
    if (launch_kernel == NULL)
        Py_RETURN_NONE;
    return Py_BuildValue("(NNNNN)", PyLong_FromVoidPtr((void*)ctx_get_current),
                         PyLong_FromVoidPtr((void*)ctx_set_current), PyLong_FromVoidPtr((void*)ctx_push_current),
                         PyLong_FromVoidPtr((void*)ctx_pop_current), PyLong_FromVoidPtr((void*)launch_kernel));
}

/* Where launch() failed: its result is the CUresult, negated for the context step. */
#define CONTEXT_STEP_FAILED(err) (-(long)(err))

/* The launch proper: 0, the CUresult of a failed launch, or CONTEXT_STEP_FAILED(err). The
   caller keeps the memory `params` points into alive; the GIL is released for the launch. */
static long launch_in(void* context, void* function, const unsigned* config, void* stream, void** params)
{
    CUcontext current = NULL;
    CUresult err = ctx_get_current(&current);
    if (err != 0)
        return CONTEXT_STEP_FAILED(err);
    int pushed = 0;
    if (current != context) {
        if (current == NULL) {  /* nothing current: adopt the primary context, as the runtime API does */
            err = ctx_set_current(context);
        } else {                /* someone else's context: borrow the thread for this launch only */
            err = ctx_push_current(context);
            pushed = 1;
        }
        if (err != 0)
            return CONTEXT_STEP_FAILED(err);
    }
    /* a full launch queue makes cuLaunchKernel wait: other Python threads may run meanwhile */
    Py_BEGIN_ALLOW_THREADS
    err = launch_kernel(function, config[0], config[1], config[2], config[3], config[4], config[5], config[6],
                        stream, params, NULL);
    Py_END_ALLOW_THREADS
    if (pushed) {
        CUcontext popped;
        ctx_pop_current(&popped);
    }
    return (long)err;
}

/* Point params[k] at byte offsets[k] of `base`; params has room for `count` pointers. */
static void point_params(void** params, char* base, const Py_ssize_t* offsets, Py_ssize_t count)
{
    for (Py_ssize_t k = 0; k < count; ++k)
        params[k] = base + offsets[k];
}


PyDoc_STRVAR(launch_doc,
    "launch(context, function, config, stream, packed, offsets) -> int\n\n"
    "cuLaunchKernel(function, *config, stream, params, NULL) with `context` current for the call.\n"
    "config is (grid x, y, z, block x, y, z, dynamic shared bytes); the kernel parameters are\n"
    "packed in the bytes `packed`, parameter k at byte offsets[k]. Returns 0, the CUresult of a\n"
    "failed launch, or minus the CUresult of a failure to make the context current.");

/* More kernel parameters than CUDA takes (32764 bytes of them, at least a byte each). */
#define MAX_PARAMS 32768
/* Kernel parameters a launch points at without allocating. */
#define STACK_PARAMS 64

/* The ints of the tuple `offsets` into `out`, each inside packed bytes of `size`; -1 with an
   exception when one is not. */
static int read_offsets(PyObject* offsets, Py_ssize_t size, Py_ssize_t* out)
{
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(offsets); ++k) {
        Py_ssize_t offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(offsets, k));
        if (offset < 0 || offset >= size) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "a parameter offset lies outside the packed bytes");
            return -1;
        }
        out[k] = offset;
    }
    return 0;
}

/* Seven unsigned 32-bit ints from the tuple `shape` (grid, block, dynamic shared bytes). */
static int read_config(PyObject* shape, unsigned* config)
{
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != 7) {
        PyErr_SetString(PyExc_TypeError, "config must be a tuple of 7 ints");
        return -1;
    }
    for (Py_ssize_t k = 0; k < 7; ++k) {
        unsigned long value = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(shape, k));
        if (value == (unsigned long)-1 && PyErr_Occurred())
            return -1;
        if (value > UINT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "a config entry does not fit 32 bits");
            return -1;
        }
        config[k] = (unsigned)value;
    }
    return 0;
}

static PyObject* launch(PyObject* self, PyObject* const* args, Py_ssize_t nargs)
{
    void *context, *function, *stream;
    unsigned config[7];
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "launch() takes 6 arguments");
        return NULL;
    }
    if (launch_kernel == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "launch() before install()");
        return NULL;
    }
    if (as_address(args[0], &context) < 0 || as_address(args[1], &function) < 0 ||
        as_address(args[3], &stream) < 0)
        return NULL;
    PyObject *packed = args[4], *offsets = args[5];
    if (read_config(args[2], config) < 0)
        return NULL;
    if (!PyBytes_Check(packed) || !PyTuple_Check(offsets)) {
        PyErr_SetString(PyExc_TypeError, "launch(): packed must be bytes and offsets a tuple");
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(offsets), size = PyBytes_GET_SIZE(packed);
    if (count > MAX_PARAMS) {
        PyErr_SetString(PyExc_ValueError, "launch(): too many kernel parameters");
        return NULL;
    }
    Py_ssize_t stack_offsets[STACK_PARAMS];
    void* stack_params[STACK_PARAMS];
    Py_ssize_t* at = count <= STACK_PARAMS ? stack_offsets : PyMem_Malloc((size_t)count * sizeof(Py_ssize_t));
    void** params = count <= STACK_PARAMS ? stack_params : PyMem_Malloc((size_t)count * sizeof(void*));
    PyObject* result = NULL;
    if (at == NULL || params == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (read_offsets(offsets, size, at) < 0)
        goto done;
    point_params(params, PyBytes_AS_STRING(packed), at, count);
    result = PyLong_FromLong(launch_in(context, function, config, stream, count ? params : NULL));
done:
    if (at != stack_offsets)
        PyMem_Free(at);
    if (params != stack_params)
        PyMem_Free(params);
    return result;
}


/* ------------------------------------------------------------------ reading PyTorch tensors */

/* The getters of torch.Tensor, as descriptors looked up once on the type (TORCH_GETTERS in
   arrays.py, in this order). Calling a descriptor directly skips the attribute lookup on every
   instance (torch tensors have a __dict__, so each lookup would search it first); the getters
   are the same ones `t.dtype` and `t.data_ptr()` call. */
enum { DTYPE, IS_CUDA, SHAPE, ATTRIBUTES };                                     /* __get__ */
enum { IS_CONTIGUOUS = ATTRIBUTES, DATA_PTR, GET_DEVICE, STRIDE, GETTERS };     /* called */

static PyObject* get_attribute(PyObject* const* getters, PyObject* tensor, int which)
{
    PyObject* descriptor = getters[which];
    return Py_TYPE(descriptor)->tp_descr_get(descriptor, tensor, (PyObject*)Py_TYPE(tensor));
}

static PyObject* call_method(PyObject* const* getters, PyObject* tensor, int which)
{
    return PyObject_Vectorcall(getters[which], &tensor, 1, NULL);
}

/* An int result of a method, or -1 with an exception (or -2 when it is no int). */
static long long int_method(PyObject* const* getters, PyObject* tensor, int which)
{
    PyObject* value = call_method(getters, tensor, which);
    if (value == NULL)
        return -1;
    long long result = PyLong_Check(value) ? PyLong_AsLongLong(value) : -2;
    Py_DECREF(value);
    return result;
}

/* Whether an attribute (or a method's result) is True; -1 on an exception. */
static int is_true(PyObject* value)
{
    if (value == NULL)
        return -1;
    int result = value == Py_True;
    Py_DECREF(value);
    return result;
}

/* Read one tensor planned as (position, dtype, rank, is_slice) into `items` (new references):
   a slice gives its data pointer and length, a tensor its data pointer, shape and strides.
   Returns how many items it wrote, or 0 when the tensor is not plainly right. */
static int read_one_tensor(const void* source, PyObject* tensor, PyObject* plan, PyObject** items,
                           long long* device)
{
    PyObject* const* getters = source;
    PyObject* dtype = get_attribute(getters, tensor, DTYPE);
    if (dtype == NULL)
        return 0;
    int same_dtype = dtype == PyTuple_GET_ITEM(plan, 1);
    Py_DECREF(dtype);
    if (!same_dtype || is_true(get_attribute(getters, tensor, IS_CUDA)) != 1)
        return 0;
    const int slice = PyTuple_GET_ITEM(plan, 3) == Py_True;
    PyObject* shape = get_attribute(getters, tensor, SHAPE);   /* torch.Size: a tuple */
    if (shape == NULL)
        return 0;
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != PyLong_AsSsize_t(PyTuple_GET_ITEM(plan, 2)) ||
        (slice && is_true(call_method(getters, tensor, IS_CONTIGUOUS)) != 1)) {
        Py_DECREF(shape);
        return 0;
    }
    long long here = int_method(getters, tensor, GET_DEVICE);
    PyObject* pointer = here < 0 || (*device >= 0 && here != *device) ? NULL : call_method(getters, tensor, DATA_PTR);
    PyObject* strides = pointer == NULL || slice ? NULL : call_method(getters, tensor, STRIDE);
    if (pointer == NULL || (!slice && strides == NULL)) {
        Py_DECREF(shape);
        Py_XDECREF(pointer);
        return 0;
    }
    *device = here;
    items[0] = pointer;
    if (slice) {
        items[1] = Py_NewRef(PyTuple_GET_ITEM(shape, 0));
        Py_DECREF(shape);
        return 2;
    }
    items[1] = shape;
    items[2] = strides;
    return 3;
}

/* Whether the `count` items equal those of `last` (a tuple, or None). */
static int same_as(PyObject* last, PyObject* const* items, Py_ssize_t count)
{
    if (last == NULL || !PyTuple_Check(last) || PyTuple_GET_SIZE(last) != count)
        return 0;
    for (Py_ssize_t k = 0; k < count; ++k) {
        PyObject* before = PyTuple_GET_ITEM(last, k);
        int same = PyObject_RichCompareBool(items[k], before, Py_EQ);  /* identity first, then == */
        if (same != 1) {
            PyErr_Clear();
            return 0;
        }
    }
    return 1;
}

/* Reads one array argument planned as `plan` (an entry of the reader's plan) into `items` (new
   references: data pointer and length for a slice, or data pointer, shape and strides), using
   `source` (what the reader reads with); returns how many items it wrote, 0 when the argument
   is not plainly right for its parameter, -1 on an error of ours (no memory). */
typedef int (*array_reader)(const void* source, PyObject* array, PyObject* plan, PyObject** items,
                            long long* device);

/* What the read_*() functions return: the arrays planned in `plan`, each read by `read`. */
static PyObject* collect_reads(PyObject* arguments, PyObject* plan, PyObject* last, array_reader read,
                               const void* source);

/* The arguments planned in `plan` (each entry's first item is a position in `arguments`, and
   each entry has `entry_size` items): 1 when all are exactly of `type`, 0 when one is not, -1
   with an exception when the plan is malformed. */
static int planned_types_are(PyObject* arguments, PyObject* plan, PyTypeObject* type, Py_ssize_t entry_size,
                             const char* function)
{
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(plan); ++k) {
        PyObject* entry = PyTuple_GET_ITEM(plan, k);
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != entry_size) {
            PyErr_Format(PyExc_TypeError, "%s(): a plan entry is not a tuple of %zd", function, entry_size);
            return -1;
        }
        Py_ssize_t position = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 0));
        if (position < 0 || position >= PyTuple_GET_SIZE(arguments)) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_IndexError, "%s(): a plan position is out of range", function);
            return -1;
        }
        if (Py_TYPE(PyTuple_GET_ITEM(arguments, position)) != type)
            return 0;
    }
    return 1;
}

PyDoc_STRVAR(read_torch_doc,
    "read_torch(args, tensor_type, getters, plan, last) -> tuple | None | False\n\n"
    "What a generated binder needs of the PyTorch tensors among `args`. `getters` are the\n"
    "descriptors of `tensor_type` named by arrays.TORCH_GETTERS; `plan` has one (position,\n"
    "torch dtype, rank, is_slice, alignment mask) per array parameter. Returns (device, then per planned\n"
    "tensor: data pointer and length for a slice, or data pointer, shape and strides); `last`\n"
    "itself when that is what it read (a launch repeating its arguments: the caller may skip\n"
    "what it checked then). False: a planned argument is not exactly a `tensor_type` (the\n"
    "binder is for other types). None: a tensor is not plainly right for its parameter\n"
    "(another dtype or rank, not CUDA, a slice that is not contiguous, another device than\n"
    "the others, a getter that raised): the binder's general path then accepts it or\n"
    "explains the refusal.");

/* Items read_torch() returns without allocating: 1 + 3 per tensor for up to 21 tensors. */
#define STACK_ITEMS 64

static PyObject* read_torch(PyObject* self, PyObject* const* args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyTuple_Check(args[0]) || !PyType_Check(args[1]) || !PyTuple_Check(args[2]) ||
        PyTuple_GET_SIZE(args[2]) != GETTERS || !PyTuple_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "read_torch() takes (args, tensor type, getters, plan, last)");
        return NULL;
    }
    PyObject *arguments = args[0], *plan = args[3], *last = args[4];
    PyTypeObject* tensor_type = (PyTypeObject*)args[1];
    PyObject* const* getters = &PyTuple_GET_ITEM(args[2], 0);
    for (int k = 0; k < ATTRIBUTES; ++k) {
        if (Py_TYPE(getters[k])->tp_descr_get == NULL) {
            PyErr_SetString(PyExc_TypeError, "read_torch(): an attribute getter is not a descriptor");
            return NULL;
        }
    }
    int planned = planned_types_are(arguments, plan, tensor_type, 5, "read_torch");
    if (planned <= 0)
        return planned < 0 ? NULL : Py_NewRef(Py_False);
    return collect_reads(arguments, plan, last, read_one_tensor, getters);
}

/* ------------------------------------------------------------------ the DLPack exchange API */

/* The part of dlpack.h (v1.3) that `type.__dlpack_c_exchange_api__` gives: a capsule named
   "dlpack_exchange_api" around a table of the producer's C functions. One of them fills a
   DLTensor for a tensor without allocating anything (PyTorch 2.10 and later have it), another
   gives the producer's current stream of a device. */
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
    void* data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t* shape;
    int64_t* strides;  /* NULL: compact row-major */
    uint64_t byte_offset;
} DLTensor;
typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
typedef struct DLPackExchangeAPIHeader {
    DLPackVersion version;
    struct DLPackExchangeAPIHeader* prev_api;
} DLPackExchangeAPIHeader;
typedef struct DLPackExchangeAPI {
    DLPackExchangeAPIHeader header;
    void* managed_tensor_allocator;
    void* managed_tensor_from_py_object_no_sync;
    void* managed_tensor_to_py_object_no_sync;
    int (*dltensor_from_py_object_no_sync)(void* py_object, DLTensor* out);
    int (*current_work_stream)(int32_t device_type, int32_t device_id, void** out_stream);
} DLPackExchangeAPI;

enum { KDL_CUDA = 2 };
#define EXCHANGE_API_CAPSULE "dlpack_exchange_api"

/* The table in `capsule`, when it is one this module can use (major version 1, from minor 3,
   with both functions above); NULL without an exception otherwise. */
static const DLPackExchangeAPI* exchange_api(PyObject* capsule)
{
    if (!PyCapsule_IsValid(capsule, EXCHANGE_API_CAPSULE))
        return NULL;
    const DLPackExchangeAPI* api = PyCapsule_GetPointer(capsule, EXCHANGE_API_CAPSULE);
    if (api == NULL || api->header.version.major != 1 || api->header.version.minor < 3 ||
        api->dltensor_from_py_object_no_sync == NULL || api->current_work_stream == NULL) {
        PyErr_Clear();
        return NULL;
    }
    return api;
}

PyDoc_STRVAR(exchange_api_usable_doc,
    "exchange_api_usable(capsule) -> bool\n\n"
    "Whether `capsule` (a type's __dlpack_c_exchange_api__) is a DLPack exchange table that\n"
    "read_dlpack() and prepared launches can use.");

static PyObject* exchange_api_usable(PyObject* self, PyObject* capsule)
{
    return PyBool_FromLong(exchange_api(capsule) != NULL);
}

/* A tuple of `count` ints from `values`. */
static PyObject* int_tuple(const int64_t* values, int count)
{
    PyObject* tuple = PyTuple_New(count);
    for (int k = 0; tuple != NULL && k < count; ++k) {
        PyObject* value = PyLong_FromLongLong(values[k]);
        if (value == NULL)
            Py_CLEAR(tuple);
        else
            PyTuple_SET_ITEM(tuple, k, value);
    }
    return tuple;
}

/* Read one tensor planned as (position, dtype code, dtype bits, rank, is_slice) into `items`
   (new references), as read_one_tensor() does; 0 when it is not plainly right, -1 on an error
   that is ours (no memory). */
static int read_one_dltensor(const void* source, PyObject* tensor, PyObject* plan, PyObject** items,
                             long long* device)
{
    const DLPackExchangeAPI* api = source;
    DLTensor t;
    if (api->dltensor_from_py_object_no_sync(tensor, &t) != 0) {
        PyErr_Clear();
        return 0;
    }
    const long code = PyLong_AsLong(PyTuple_GET_ITEM(plan, 1)), bits = PyLong_AsLong(PyTuple_GET_ITEM(plan, 2));
    const long rank = PyLong_AsLong(PyTuple_GET_ITEM(plan, 3));
    const int slice = PyTuple_GET_ITEM(plan, 4) == Py_True;
    if (t.device.device_type != KDL_CUDA || t.dtype.code != code || t.dtype.bits != bits || t.dtype.lanes != 1 ||
        t.ndim != rank || t.device.device_id < 0 || (*device >= 0 && t.device.device_id != *device))
        return 0;
    for (int axis = 0; axis < t.ndim; ++axis)
        if (t.shape[axis] < 0)  /* the general path names the negative extent */
            return 0;
    /* a 1-D view is what a slice asks when its stride is 1 or it has at most one element */
    if (slice && t.strides != NULL && t.shape[0] > 1 && t.strides[0] != 1)
        return 0;
    *device = t.device.device_id;
    items[0] = PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)t.data + t.byte_offset);
    if (items[0] == NULL)
        return -1;
    if (slice) {
        items[1] = PyLong_FromLongLong(t.shape[0]);
        if (items[1] == NULL) {
            Py_DECREF(items[0]);
            return -1;
        }
        return 2;
    }
    int64_t compact[64];
    const int64_t* strides = t.strides;
    if (strides == NULL) {  /* row-major, spelled out */
        if (t.ndim > 64)
            return 0;
        int64_t step = 1;
        for (int axis = t.ndim - 1; axis >= 0; --axis) {
            compact[axis] = step;
            step *= t.shape[axis] > 1 ? t.shape[axis] : 1;
        }
        strides = compact;
    }
    items[1] = int_tuple(t.shape, t.ndim);
    items[2] = items[1] == NULL ? NULL : int_tuple(strides, t.ndim);
    if (items[2] == NULL) {
        Py_DECREF(items[0]);
        Py_XDECREF(items[1]);
        return -1;
    }
    return 3;
}

static PyObject* collect_reads(PyObject* arguments, PyObject* plan, PyObject* last, array_reader read_one,
                               const void* source)
{
    const Py_ssize_t count = PyTuple_GET_SIZE(plan);
    PyObject* stack_items[STACK_ITEMS];
    const Py_ssize_t capacity = 1 + 3 * count;
    PyObject** items = capacity <= STACK_ITEMS ? stack_items : PyMem_Malloc((size_t)capacity * sizeof(PyObject*));
    if (items == NULL)
        return PyErr_NoMemory();
    Py_ssize_t used = 1;
    long long device = -1;
    PyObject* result = NULL;
    for (Py_ssize_t k = 0; k < count; ++k) {
        PyObject* entry = PyTuple_GET_ITEM(plan, k);
        PyObject* tensor = PyTuple_GET_ITEM(arguments, PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 0)));
        int read = read_one(source, tensor, entry, items + used, &device);
        if (read < 0)
            goto done;
        /* the entry's last item: the alignment mask of its element type (a misaligned first
           element goes to the general path, which refuses it) */
        if (read > 0 && (PyLong_AsUnsignedLongLongMask(items[used]) &
                         PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(entry, PyTuple_GET_SIZE(entry) - 1)))) {
            for (int j = 0; j < read; ++j)
                Py_DECREF(items[used + j]);
            read = 0;
        }
        if (read == 0) {
            PyErr_Clear();  /* the general path raises whatever deserves raising */
            result = Py_NewRef(Py_None);
            goto done;
        }
        used += read;
    }
    items[0] = PyLong_FromLongLong(device);
    if (items[0] == NULL)
        goto done;
    if (same_as(last, items, used)) {
        result = Py_NewRef(last);
        Py_DECREF(items[0]);
        goto done;
    }
    result = PyTuple_New(used);
    if (result != NULL) {
        for (Py_ssize_t k = 0; k < used; ++k)
            PyTuple_SET_ITEM(result, k, items[k]);  /* steals the reference */
        used = 1;                                    /* nothing left to release */
        items[0] = NULL;
    } else {
        Py_DECREF(items[0]);
    }
done:
    for (Py_ssize_t k = 1; k < used; ++k)
        Py_DECREF(items[k]);
    if (items != stack_items)
        PyMem_Free(items);
    return result;
}

PyDoc_STRVAR(read_dlpack_doc,
    "read_dlpack(args, tensor_type, api, plan, last) -> tuple | None | False\n\n"
    "read_torch(), through the DLPack exchange API of `tensor_type` (the capsule `api`, its\n"
    "__dlpack_c_exchange_api__): one C call per tensor. `plan` has one (position, DLPack dtype\n"
    "code, dtype bits, rank, is_slice, alignment mask) per array parameter. The result is read_torch()'s (shapes\n"
    "and strides as tuples of ints).");

static PyObject* read_dlpack(PyObject* self, PyObject* const* args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyTuple_Check(args[0]) || !PyType_Check(args[1]) || !PyTuple_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "read_dlpack() takes (args, tensor type, api, plan, last)");
        return NULL;
    }
    const DLPackExchangeAPI* api = exchange_api(args[2]);
    if (api == NULL) {
        PyErr_SetString(PyExc_TypeError, "read_dlpack(): api is not a usable DLPack exchange API capsule");
        return NULL;
    }
    PyObject *arguments = args[0], *plan = args[3], *last = args[4];
    PyTypeObject* tensor_type = (PyTypeObject*)args[1];
    int planned = planned_types_are(arguments, plan, tensor_type, 6, "read_dlpack");
    if (planned <= 0)
        return planned < 0 ? NULL : Py_NewRef(Py_False);
    return collect_reads(arguments, plan, last, read_one_dltensor, api);
}

/* ------------------------------------------------------------------ reading CuPy arrays */

/* The attributes of cupy.ndarray read_cupy() reads (CuPy keeps them as plain fields of its
   Cython class: `data` is the MemoryPointer, whose `ptr` already counts the array's offset). */
static PyObject *name_dtype, *name_shape, *name_strides, *name_data, *name_ptr, *name_device_id, *name_c_contiguous;

static int intern_cupy_names(void)
{
    if (name_dtype != NULL)
        return 0;
    const char* texts[] = {"dtype", "shape", "strides", "data", "ptr", "device_id", "_c_contiguous"};
    PyObject** names[] = {&name_dtype, &name_shape, &name_strides, &name_data, &name_ptr, &name_device_id,
                          &name_c_contiguous};
    for (int k = 0; k < 7; ++k)
        if ((*names[k] = PyUnicode_InternFromString(texts[k])) == NULL)
            return -1;
    return 0;
}

/* The element strides of byte strides `bytes` (a tuple), or NULL (no exception) when one is not
   a whole number of `itemsize` elements. */
static PyObject* element_strides(PyObject* bytes, long itemsize)
{
    Py_ssize_t rank = PyTuple_GET_SIZE(bytes);
    PyObject* strides = PyTuple_New(rank);
    for (Py_ssize_t axis = 0; strides != NULL && axis < rank; ++axis) {
        long long stride = PyLong_AsLongLong(PyTuple_GET_ITEM(bytes, axis));
        PyObject* value = (stride == -1 && PyErr_Occurred()) || stride % itemsize != 0 ? NULL
                          : PyLong_FromLongLong(stride / itemsize);
        if (value == NULL) {
            PyErr_Clear();
            Py_CLEAR(strides);
        } else {
            PyTuple_SET_ITEM(strides, axis, value);
        }
    }
    return strides;
}

/* Read one CuPy array planned as (position, numpy dtype, rank, is_slice, itemsize) into `items`,
   as read_one_tensor() does. */
static int read_one_cupy(const void* source, PyObject* array, PyObject* plan, PyObject** items, long long* device)
{
    int written = 0;
    PyObject *dtype = NULL, *shape = NULL, *data = NULL, *pointer = NULL, *ordinal = NULL, *flag = NULL;
    PyObject* strides = NULL;
    const int slice = PyTuple_GET_ITEM(plan, 3) == Py_True;
    if ((dtype = PyObject_GetAttr(array, name_dtype)) == NULL ||
        PyObject_RichCompareBool(dtype, PyTuple_GET_ITEM(plan, 1), Py_EQ) != 1)
        goto done;
    if ((shape = PyObject_GetAttr(array, name_shape)) == NULL || !PyTuple_Check(shape) ||
        PyTuple_GET_SIZE(shape) != PyLong_AsSsize_t(PyTuple_GET_ITEM(plan, 2)))
        goto done;
    if ((data = PyObject_GetAttr(array, name_data)) == NULL ||
        (pointer = PyObject_GetAttr(data, name_ptr)) == NULL || !PyLong_Check(pointer) ||
        (ordinal = PyObject_GetAttr(data, name_device_id)) == NULL || !PyLong_Check(ordinal))
        goto done;
    long long here = PyLong_AsLongLong(ordinal);
    if (here < 0 || (*device >= 0 && here != *device))
        goto done;
    if (slice) {  /* C-contiguous, or at most one element */
        flag = PyObject_GetAttr(array, name_c_contiguous);
        if (flag != Py_True) {
            long long extent = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, 0));
            if (flag == NULL || extent > 1 || extent < 0)
                goto done;
        }
        items[0] = Py_NewRef(pointer);
        items[1] = Py_NewRef(PyTuple_GET_ITEM(shape, 0));
        written = 2;
    } else {
        PyObject* bytes = PyObject_GetAttr(array, name_strides);
        if (bytes != NULL && PyTuple_Check(bytes))
            strides = element_strides(bytes, PyLong_AsLong(PyTuple_GET_ITEM(plan, 4)));
        Py_XDECREF(bytes);
        if (strides == NULL)
            goto done;
        items[0] = Py_NewRef(pointer);
        items[1] = Py_NewRef(shape);
        items[2] = strides;
        written = 3;
    }
    *device = here;
done:
    Py_XDECREF(dtype);
    Py_XDECREF(shape);
    Py_XDECREF(data);
    Py_XDECREF(pointer);
    Py_XDECREF(ordinal);
    Py_XDECREF(flag);
    return written;  /* 0 leaves any exception to collect_reads, which clears it */
}

PyDoc_STRVAR(read_cupy_doc,
    "read_cupy(args, array_type, plan, last) -> tuple | None | False\n\n"
    "read_torch(), for CuPy arrays: `plan` has one (position, numpy dtype, rank, is_slice,\n"
    "itemsize, alignment mask) per array parameter; strides come back in elements.");

static PyObject* read_cupy(PyObject* self, PyObject* const* args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyTuple_Check(args[0]) || !PyType_Check(args[1]) || !PyTuple_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "read_cupy() takes (args, array type, plan, last)");
        return NULL;
    }
    if (intern_cupy_names() < 0)
        return NULL;
    int planned = planned_types_are(args[0], args[2], (PyTypeObject*)args[1], 6, "read_cupy");
    if (planned <= 0)
        return planned < 0 ? NULL : Py_NewRef(Py_False);
    return collect_reads(args[0], args[2], args[3], read_one_cupy, NULL);
}

/* ------------------------------------------------------------------ eager torch op calls */

/* The descriptors plain_torch_call() reads a tensor with (after the tensor type itself). */
enum { PLAIN_TENSOR_TYPE, PLAIN_REQUIRES_GRAD, PLAIN_IS_CUDA, PLAIN_IS_CPU, PLAIN_GETTERS };

/* Whether `value` is exactly of `type`, or of one of the types in `type` when it is a tuple. */
static int exactly_of(PyObject* value, PyObject* type)
{
    if (!PyTuple_Check(type))
        return (PyObject*)Py_TYPE(value) == type;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(type); ++k)
        if ((PyObject*)Py_TYPE(value) == PyTuple_GET_ITEM(type, k))
            return 1;
    return 0;
}

/* Whether the tensor `tensor` is plain for the eager call: it does not require grad and, when
   `placed` (the call's first tensor), lives on CUDA or the CPU. The launch refuses arguments on
   different devices, so the others need no test of their own. A getter that raises makes it not
   plain (the dispatcher's way explains). */
static int plain_tensor(PyObject* const* getters, PyObject* tensor, int placed)
{
    if (is_true(get_attribute(getters, tensor, PLAIN_REQUIRES_GRAD)) != 0)
        return 0;
    if (!placed)
        return 1;
    int cuda = is_true(get_attribute(getters, tensor, PLAIN_IS_CUDA));
    if (cuda != 0)
        return cuda == 1;
    return is_true(get_attribute(getters, tensor, PLAIN_IS_CPU)) == 1;
}

/* Whether a call of a torch op with the positional arguments args[0 .. nargs) may skip the
   dispatcher (see plain_torch_call_doc): 1 or 0, or -1 with an exception from a state test. */
static int plain_call(PyObject* const* args, Py_ssize_t nargs, PyObject* state, PyObject* plan,
                      PyObject* const* getters)
{
    const Py_ssize_t count = PyTuple_GET_SIZE(plan);
    if (nargs != count)
        return 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(state); ++k) {
        PyObject* active = PyObject_CallNoArgs(PyTuple_GET_ITEM(state, k));
        if (active == NULL)
            return -1;
        int truth = PyObject_IsTrue(active);
        Py_DECREF(active);
        if (truth != 0)
            return truth < 0 ? -1 : 0;
    }
    int placed = 1;   /* the first tensor's device is still to test */
    for (Py_ssize_t k = 0; k < count; ++k) {
        PyObject* type = PyTuple_GET_ITEM(plan, k);
        if (!exactly_of(args[k], type))
            return 0;
        if (type == getters[PLAIN_TENSOR_TYPE]) {
            if (!plain_tensor(getters, args[k], placed)) {
                PyErr_Clear();
                return 0;
            }
            placed = 0;
        }
    }
    return 1;
}

/* Whether `getters` is (a type, then PLAIN_GETTERS - 1 descriptors); TypeError naming `function` if not. */
static int check_getters(PyObject* getters, const char* function)
{
    if (!PyTuple_Check(getters) || PyTuple_GET_SIZE(getters) != PLAIN_GETTERS ||
        !PyType_Check(PyTuple_GET_ITEM(getters, PLAIN_TENSOR_TYPE))) {
        PyErr_Format(PyExc_TypeError, "%s(): getters are (tensor type, requires_grad, is_cuda, is_cpu)", function);
        return 0;
    }
    for (int k = PLAIN_REQUIRES_GRAD; k < PLAIN_GETTERS; ++k) {
        if (Py_TYPE(PyTuple_GET_ITEM(getters, k))->tp_descr_get == NULL) {
            PyErr_Format(PyExc_TypeError, "%s(): a getter is not a descriptor", function);
            return 0;
        }
    }
    return 1;
}

PyDoc_STRVAR(plain_torch_call_doc,
    "plain_torch_call(args, state, plan, getters) -> bool\n\n"
    "Whether a call of a torch op with the positional arguments `args` may skip PyTorch's\n"
    "dispatcher (buildtile.runtime.frameworks.torch_eager): every callable in `state` returns\n"
    "something false (no mode, transform or tracer is active), `args` has one item per\n"
    "entry of `plan`, each exactly of its entry's type (or of one of the types of an entry that is\n"
    "a tuple), and each whose type is getters[0] (torch.Tensor) does not require grad, the first of\n"
    "them living on CUDA or the CPU, as the descriptors getters[1:] (requires_grad, is_cuda, is_cpu)\n"
    "read it (the launch refuses arguments on different devices).");

static PyObject* plain_torch_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyTuple_Check(args[0]) || !PyTuple_Check(args[1]) || !PyTuple_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "plain_torch_call() takes (args, state, plan, getters)");
        return NULL;
    }
    if (!check_getters(args[3], "plain_torch_call"))
        return NULL;
    int plain = plain_call(&PyTuple_GET_ITEM(args[0], 0), PyTuple_GET_SIZE(args[0]), args[1], args[2],
                           &PyTuple_GET_ITEM(args[3], 0));
    return plain < 0 ? NULL : Py_NewRef(plain ? Py_True : Py_False);
}

/* The call of a SIMT kernel's torch op (the __call__ of its packet's class): when plain_call()
   says the dispatcher would add nothing and no keyword is given, launches as
   op.kernel[tuple(grid)](*args[1:]) from here; otherwise returns dispatch(*args, **kwargs). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject* state;       /* plain_call()'s */
    PyObject* plan;
    PyObject* getters;
    PyObject* profiler;    /* whose `_is_profiler_enabled` is true while a profiler runs */
    PyObject* op;          /* whose `kernel` is the kernel handle to launch */
    PyObject* dispatch;    /* the call through the dispatcher */
} EagerCall;

static PyObject *name_profiler_enabled, *name_kernel;

static PyObject* eager_call(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames)
{
    EagerCall* self = (EagerCall*)callable;
    const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0) {
        PyObject* profiling = PyObject_GetAttr(self->profiler, name_profiler_enabled);
        if (profiling == NULL)
            return NULL;
        int truth = PyObject_IsTrue(profiling);
        Py_DECREF(profiling);
        if (truth < 0)
            return NULL;
        int plain = truth ? 0 : plain_call(args, nargs, self->state, self->plan, &PyTuple_GET_ITEM(self->getters, 0));
        if (plain < 0)
            return NULL;
        if (plain && nargs >= 1) {
            PyObject* grid = PyTuple_CheckExact(args[0]) ? Py_NewRef(args[0]) : PySequence_Tuple(args[0]);
            if (grid == NULL)
                return NULL;
            PyObject* kernel = PyObject_GetAttr(self->op, name_kernel);
            PyObject* launch = kernel == NULL ? NULL : PyObject_GetItem(kernel, grid);
            Py_XDECREF(kernel);
            Py_DECREF(grid);
            if (launch == NULL)
                return NULL;
            PyObject* result = PyObject_Vectorcall(launch, args + 1, (size_t)(nargs - 1), NULL);
            Py_DECREF(launch);
            if (result == NULL)
                return NULL;
            Py_DECREF(result);
            Py_RETURN_NONE;
        }
    }
    return PyObject_Vectorcall(self->dispatch, args, nargsf, kwnames);
}

static PyObject* eager_call_new(PyTypeObject* type, PyObject* args, PyObject* kwargs)
{
    PyObject *state, *plan, *getters, *profiler, *op, *dispatch;
    static char* keywords[] = {"state", "plan", "getters", "profiler", "op", "dispatch", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!OOOO:EagerCall", keywords, &PyTuple_Type, &state,
                                     &PyTuple_Type, &plan, &getters, &profiler, &op, &dispatch))
        return NULL;
    if (!check_getters(getters, "EagerCall"))
        return NULL;
    if (!PyCallable_Check(dispatch)) {
        PyErr_SetString(PyExc_TypeError, "EagerCall(): dispatch is not callable");
        return NULL;
    }
    if (name_profiler_enabled == NULL &&
        (name_profiler_enabled = PyUnicode_InternFromString("_is_profiler_enabled")) == NULL)
        return NULL;
    if (name_kernel == NULL && (name_kernel = PyUnicode_InternFromString("kernel")) == NULL)
        return NULL;
    EagerCall* self = (EagerCall*)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = eager_call;
    self->state = Py_NewRef(state);
    self->plan = Py_NewRef(plan);
    self->getters = Py_NewRef(getters);
    self->profiler = Py_NewRef(profiler);
    self->op = Py_NewRef(op);
    self->dispatch = Py_NewRef(dispatch);
    return (PyObject*)self;
}

static int eager_call_traverse(PyObject* object, visitproc visit, void* arg)
{
    EagerCall* self = (EagerCall*)object;
    Py_VISIT(self->state);
    Py_VISIT(self->plan);
    Py_VISIT(self->getters);
    Py_VISIT(self->profiler);
    Py_VISIT(self->op);
    Py_VISIT(self->dispatch);
    return 0;
}

static int eager_call_clear(PyObject* object)
{
    EagerCall* self = (EagerCall*)object;
    Py_CLEAR(self->state);
    Py_CLEAR(self->plan);
    Py_CLEAR(self->getters);
    Py_CLEAR(self->profiler);
    Py_CLEAR(self->op);
    Py_CLEAR(self->dispatch);
    return 0;
}

static void eager_call_dealloc(PyObject* self)
{
    PyObject_GC_UnTrack(self);
    eager_call_clear(self);
    Py_TYPE(self)->tp_free(self);
}

PyDoc_STRVAR(eager_call_doc,
    "EagerCall(state, plan, getters, profiler, op, dispatch)\n\n"
    "The call of a SIMT kernel's torch op (buildtile.runtime.frameworks.torch_eager): called with\n"
    "the op's arguments, it launches op.kernel[tuple(grid)](*args[1:]) when no keyword is given,\n"
    "profiler._is_profiler_enabled is false and plain_torch_call(args, state, plan, getters) holds;\n"
    "otherwise it returns dispatch(*args, **kwargs).");

static PyTypeObject EagerCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "buildtile.runtime._native.EagerCall",
    .tp_doc = eager_call_doc,
    .tp_basicsize = sizeof(EagerCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = eager_call_new,
    .tp_dealloc = eager_call_dealloc,
    .tp_traverse = eager_call_traverse,
    .tp_clear = eager_call_clear,
    .tp_vectorcall_offset = offsetof(EagerCall, vectorcall),
    .tp_call = PyVectorcall_Call,
};

/* ------------------------------------------------------------------ prepared launches */

/* The base of runtime.launch.PreparedLaunch. Calling it launches the way PreparedLaunch._launch
   does, but without the interpreter, once _launch has armed it (_arm) with what that way found:
   the binder, the device and its context and function handles, the packing of the parameters.
   Anything else than the armed case (no arming yet, another device than the armed one, other
   argument types, streams to wait on, a stream that is not a plain int, a failed launch) goes
   to the Python methods, which decide, raise or re-arm. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    unsigned long epoch;       /* launch_epoch when armed; 0: not armed */
    PyObject* bind;            /* binder(args, stream) -> (values, device, env, waits) | None */
    PyObject* device;          /* the device the handles below belong to */
    PyObject* pack;            /* pack(*values, *extras) -> bytes */
    PyObject* extras;          /* tuple: values packed after the binder's */
    PyObject* resolve_stream; /* resolve_stream(stream, args) -> int, for a stream that is no plain int */
    PyObject* streams;        /* None, or the DLPack exchange API capsule whose current stream of the
                                 armed device stream=None means (the arguments are all of its type) */
    const DLPackExchangeAPI* streams_api;
    int32_t device_id;        /* the armed device, as an int */
    void* context;
    void* function;
    unsigned config[7];
    Py_ssize_t count;          /* kernel parameters */
    Py_ssize_t* offsets;       /* parameter k at byte offsets[k] of the packed bytes */
    Py_ssize_t min_size;       /* packed bytes shorter than this are not the kernel's */
    PyObject* last_values;     /* the last values packed, and their bytes */
    PyObject* last_packed;
    /* a kernel with an aligned entry (_arm_aligned): `aligned_function` is launched instead of
       `plain_function` when every value at aligned_at[0 .. aligned_count) is a multiple of `align` */
    void* plain_function;
    void* aligned_function;
    unsigned long long align;
    Py_ssize_t aligned_count;
    Py_ssize_t* aligned_at;
} FastLaunch;

static void disarm(FastLaunch* self)
{
    self->epoch = 0;
    Py_CLEAR(self->bind);
    Py_CLEAR(self->device);
    Py_CLEAR(self->pack);
    Py_CLEAR(self->extras);
    Py_CLEAR(self->resolve_stream);
    Py_CLEAR(self->streams);
    self->streams_api = NULL;
    Py_CLEAR(self->last_values);
    Py_CLEAR(self->last_packed);
    PyMem_Free(self->offsets);
    self->offsets = NULL;
    self->count = 0;
    PyMem_Free(self->aligned_at);
    self->aligned_at = NULL;
    self->aligned_count = 0;
    self->plain_function = self->aligned_function = NULL;
}

/* The function to launch with `values`: the aligned entry when every data pointer is aligned. */
static void* function_for_values(FastLaunch* self, PyObject* values, void* armed)
{
    if (self->aligned_count == 0)
        return armed;
    for (Py_ssize_t k = 0; k < self->aligned_count; ++k) {
        Py_ssize_t at = self->aligned_at[k];
        if (at >= PyTuple_GET_SIZE(values))
            return self->plain_function;
        unsigned long long pointer = PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(values, at));
        if (pointer == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return self->plain_function;
        }
        if (pointer % self->align)
            return self->plain_function;
    }
    return self->aligned_function;
}

/* The way of the Python methods: self._launch(args, stream, bound). */
static PyObject* general_launch(FastLaunch* self, PyObject* arguments, PyObject* stream, PyObject* bound)
{
    static PyObject* name = NULL;
    if (name == NULL && (name = PyUnicode_InternFromString("_launch")) == NULL)
        return NULL;
    PyObject* call[4] = {(PyObject*)self, arguments, stream, bound};
    return PyObject_VectorcallMethod(name, call, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* The packed bytes of `values` (the last ones when the binder handed back the same tuple). */
static PyObject* packed_for(FastLaunch* self, PyObject* values)
{
    if (values == self->last_values)
        return Py_NewRef(self->last_packed);
    Py_ssize_t n = PyTuple_GET_SIZE(values), extra = PyTuple_GET_SIZE(self->extras), total = n + extra;
    PyObject* stack[STACK_PARAMS];
    PyObject** items = total <= STACK_PARAMS ? stack : PyMem_Malloc((size_t)total * sizeof(PyObject*));
    if (items == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t k = 0; k < n; ++k)
        items[k] = PyTuple_GET_ITEM(values, k);
    for (Py_ssize_t k = 0; k < extra; ++k)
        items[n + k] = PyTuple_GET_ITEM(self->extras, k);
    PyObject* packed = PyObject_Vectorcall(self->pack, items, (size_t)total, NULL);
    if (items != stack)
        PyMem_Free(items);
    if (packed == NULL)
        return NULL;
    if (!PyBytes_Check(packed) || PyBytes_GET_SIZE(packed) < self->min_size) {
        Py_DECREF(packed);
        PyErr_SetString(PyExc_SystemError, "a prepared launch packed its parameters into too few bytes");
        return NULL;
    }
    Py_XSETREF(self->last_values, Py_NewRef(values));
    Py_XSETREF(self->last_packed, Py_NewRef(packed));
    return packed;
}

/* Launch the armed function with the binder's result `bound`; None, or NULL with an exception. */
static PyObject* armed_launch(FastLaunch* self, PyObject* bound, PyObject* stream_object)
{
    void* stream = PyLong_AsVoidPtr(stream_object);
    if (stream == NULL && PyErr_Occurred())
        return NULL;
    /* copies, taken where the caller compared the device: another thread may re-arm this launch
       for another device while packing runs Python code or the GIL is released for the launch
       (the packing, offsets and config are the prepared launch's own, the same in every arming) */
    void *context = self->context, *function = function_for_values(self, PyTuple_GET_ITEM(bound, 0), self->function);
    PyObject* device = Py_NewRef(self->device);
    PyObject* packed = packed_for(self, PyTuple_GET_ITEM(bound, 0));
    if (packed == NULL) {
        Py_DECREF(device);
        return NULL;
    }
    const Py_ssize_t count = self->count;
    unsigned config[7];
    memcpy(config, self->config, sizeof config);
    void* stack[STACK_PARAMS];
    void** params = count <= STACK_PARAMS ? stack : PyMem_Malloc((size_t)count * sizeof(void*));
    if (params == NULL) {
        Py_DECREF(packed);
        Py_DECREF(device);
        return PyErr_NoMemory();
    }
    point_params(params, PyBytes_AS_STRING(packed), self->offsets, count);
    long err = launch_in(context, function, config, stream, count ? params : NULL);
    if (params != stack)
        PyMem_Free(params);
    Py_DECREF(packed);
    PyObject* result = Py_NewRef(Py_None);
    if (err != 0) {  /* the Python side names the failure and raises it */
        Py_SETREF(result, PyObject_CallMethod((PyObject*)self, "_launch_failed", "OlO", device, err, stream_object));
        if (result != NULL)
            Py_SETREF(result, Py_NewRef(Py_None));
    }
    Py_DECREF(device);
    return result;
}

/* Whether `value` is a plain int that can be a CUstream (0 to 2**64 - 1); anything else goes to
   resolve_stream, which refuses what is no handle. */
static int is_stream_handle(PyObject* value)
{
    if (!PyLong_CheckExact(value))
        return 0;
    int overflow = 0;
    long long small = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow == 0)
        return small >= 0;
    if (overflow < 0)
        return 0;
    unsigned long long big = PyLong_AsUnsignedLongLong(value);
    if (big == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

static PyObject* fast_launch_call(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames)
{
    FastLaunch* self = (FastLaunch*)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject* stream = Py_None;
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        if (PyTuple_GET_SIZE(kwnames) != 1 ||
            PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "stream") != 0) {
            /* the Python side raises the refusal (BT0308), before anything is read or queued */
            PyObject* refused = PyObject_CallMethod(callable, "_refuse_keywords", "(O)", kwnames);
            if (refused != NULL) {
                Py_DECREF(refused);
                PyErr_SetString(PyExc_SystemError, "_refuse_keywords() returned");
            }
            return NULL;
        }
        stream = args[nargs];
    }
    PyObject* arguments = PyTuple_New(nargs);
    if (arguments == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < nargs; ++k)
        PyTuple_SET_ITEM(arguments, k, Py_NewRef(args[k]));
    PyObject *result = NULL, *handle = NULL, *bound = NULL;
    if (self->epoch != launch_epoch) {
        result = general_launch(self, arguments, stream, Py_None);
        goto done;
    }
    int guessed = 0;  /* stream=None read as the armed device's current stream */
    if (is_stream_handle(stream)) {
        handle = Py_NewRef(stream);
    } else if (stream == Py_None && self->streams_api != NULL) {
        void* current = NULL;
        if (self->streams_api->current_work_stream(KDL_CUDA, self->device_id, &current) == 0) {
            handle = PyLong_FromVoidPtr(current);
            if (handle == NULL)
                goto done;
            guessed = 1;
        } else {
            PyErr_Clear();
        }
    }
    if (handle == NULL) {  /* None (the arguments' current stream), a stream object, or a refusal */
        PyObject* call[2] = {stream, arguments};
        handle = PyObject_Vectorcall(self->resolve_stream, call, 2, NULL);
        if (handle == NULL)
            goto done;
        if (!is_stream_handle(handle)) {
            result = general_launch(self, arguments, handle, Py_None);
            goto done;
        }
    }
    PyObject* call[2] = {arguments, handle};
    PyObject* bind = Py_NewRef(self->bind);
    bound = PyObject_Vectorcall(bind, call, 2, NULL);
    Py_DECREF(bind);
    if (bound == NULL)
        goto done;
    if (PyTuple_CheckExact(bound) && PyTuple_GET_SIZE(bound) == 4 && PyTuple_CheckExact(PyTuple_GET_ITEM(bound, 0)) &&
        PyTuple_CheckExact(PyTuple_GET_ITEM(bound, 3)) && PyTuple_GET_SIZE(PyTuple_GET_ITEM(bound, 3)) == 0 &&
        self->epoch == launch_epoch) {
        PyObject* device = PyTuple_GET_ITEM(bound, 1);
        int same = device == self->device || (device != Py_None && PyObject_RichCompareBool(device, self->device, Py_EQ) == 1);
        PyErr_Clear();
        if (same) {  /* the armed case; `bound` (and the capsules in its env) lives until launched */
            result = armed_launch(self, bound, handle);
            goto done;
        }
    }
    /* a guess of the stream holds for the armed device only: the general way starts over */
    result = guessed ? general_launch(self, arguments, stream, Py_None) : general_launch(self, arguments, handle, bound);
done:
    Py_DECREF(arguments);
    Py_XDECREF(handle);
    Py_XDECREF(bound);
    return result;
}

PyDoc_STRVAR(arm_doc,
    "_arm(bind, device, context, function, config, offsets, pack, extras, resolve_stream, streams)\n\n"
    "Launch without the Python methods from now on, while the binder `bind` gives `device`: with\n"
    "the context and function addresses, config as for launch(), parameter k at byte offsets[k]\n"
    "of pack(*values, *extras), and resolve_stream(stream, args) for a stream that is no int;\n"
    "`streams`: None, or a DLPack exchange API capsule whose current stream of `device` is what\n"
    "stream=None means for these arguments.");

static PyObject* fast_launch_arm(PyObject* object, PyObject* const* args, Py_ssize_t nargs)
{
    FastLaunch* self = (FastLaunch*)object;
    void *context, *function;
    unsigned config[7];
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "_arm() takes 10 arguments");
        return NULL;
    }
    if (launch_kernel == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_arm() before install()");
        return NULL;
    }
    PyObject* offsets = args[5];
    if (as_address(args[2], &context) < 0 || as_address(args[3], &function) < 0 || read_config(args[4], config) < 0)
        return NULL;
    if (!PyTuple_Check(offsets) || !PyTuple_Check(args[7]) || !PyCallable_Check(args[0]) ||
        !PyCallable_Check(args[6]) || !PyCallable_Check(args[8])) {
        PyErr_SetString(PyExc_TypeError, "_arm(): offsets and extras must be tuples; bind, pack, resolve_stream callables");
        return NULL;
    }
    const DLPackExchangeAPI* streams_api = NULL;
    if (args[9] != Py_None && (streams_api = exchange_api(args[9])) == NULL) {
        PyErr_SetString(PyExc_TypeError, "_arm(): streams is neither None nor a usable DLPack exchange API capsule");
        return NULL;
    }
    long device_id = PyLong_AsLong(args[1]);
    if (device_id < 0 || device_id > INT32_MAX) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "_arm(): the device is not a device number");
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(offsets);
    if (count > MAX_PARAMS) {
        PyErr_SetString(PyExc_ValueError, "_arm(): too many kernel parameters");
        return NULL;
    }
    Py_ssize_t* at = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(Py_ssize_t));
    if (at == NULL)
        return PyErr_NoMemory();
    Py_ssize_t min_size = 0;
    if (read_offsets(offsets, PY_SSIZE_T_MAX, at) < 0) {
        PyMem_Free(at);
        return NULL;
    }
    for (Py_ssize_t k = 0; k < count; ++k)
        if (at[k] + 1 > min_size)
            min_size = at[k] + 1;
    disarm(self);
    self->bind = Py_NewRef(args[0]);
    self->device = Py_NewRef(args[1]);
    self->pack = Py_NewRef(args[6]);
    self->extras = Py_NewRef(args[7]);
    self->resolve_stream = Py_NewRef(args[8]);
    self->streams = Py_NewRef(args[9]);
    self->streams_api = streams_api;
    self->device_id = (int32_t)device_id;
    self->context = context;
    self->function = function;
    memcpy(self->config, config, sizeof config);
    self->count = count;
    self->offsets = at;
    self->min_size = min_size;
    self->epoch = launch_epoch;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(arm_aligned_doc,
    "_arm_aligned(plain, aligned, positions, align)\n\n"
    "After _arm(): launch the function address `aligned` when every bound value at `positions`\n"
    "(the array data pointers) is a multiple of `align`, else the function address `plain`.");

static PyObject* fast_launch_arm_aligned(PyObject* object, PyObject* const* args, Py_ssize_t nargs)
{
    FastLaunch* self = (FastLaunch*)object;
    void *plain, *aligned;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "_arm_aligned() takes 4 arguments");
        return NULL;
    }
    if (self->epoch == 0) {
        PyErr_SetString(PyExc_RuntimeError, "_arm_aligned() before _arm()");
        return NULL;
    }
    if (as_address(args[0], &plain) < 0 || as_address(args[1], &aligned) < 0)
        return NULL;
    unsigned long long align = PyLong_AsUnsignedLongLong(args[3]);
    if (align == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (!PyTuple_Check(args[2]) || PyTuple_GET_SIZE(args[2]) == 0 || align == 0) {
        PyErr_SetString(PyExc_ValueError, "_arm_aligned(): positions must be a non-empty tuple and align positive");
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(args[2]);
    Py_ssize_t* at = PyMem_Malloc((size_t)count * sizeof(Py_ssize_t));
    if (at == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t k = 0; k < count; ++k) {
        at[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(args[2], k));
        if (at[k] < 0) {
            PyMem_Free(at);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "_arm_aligned(): a position is negative");
            return NULL;
        }
    }
    PyMem_Free(self->aligned_at);
    self->aligned_at = at;
    self->aligned_count = count;
    self->plain_function = plain;
    self->aligned_function = aligned;
    self->align = align;
    Py_RETURN_NONE;
}

static PyObject* fast_launch_disarm(PyObject* self, PyObject* unused)
{
    disarm((FastLaunch*)self);
    Py_RETURN_NONE;
}

static PyObject* fast_launch_armed(PyObject* object, PyObject* unused)
{
    FastLaunch* self = (FastLaunch*)object;
    return PyBool_FromLong(self->epoch != 0 && self->epoch == launch_epoch);
}

static PyTypeObject FastLaunchType;

static PyObject* fast_launch_new(PyTypeObject* type, PyObject* args, PyObject* kwargs)
{
    if (type == &FastLaunchType) {  /* only a prepared launch, made by kernel.prepare(), is one */
        PyErr_SetString(PyExc_TypeError, "FastLaunch is the base of a prepared launch: use kernel.prepare()");
        return NULL;
    }
    FastLaunch* self = (FastLaunch*)type->tp_alloc(type, 0);
    if (self != NULL)
        self->vectorcall = fast_launch_call;
    return (PyObject*)self;
}

static int fast_launch_traverse(PyObject* object, visitproc visit, void* arg)
{
    FastLaunch* self = (FastLaunch*)object;
    Py_VISIT(self->bind);
    Py_VISIT(self->device);
    Py_VISIT(self->pack);
    Py_VISIT(self->extras);
    Py_VISIT(self->resolve_stream);
    Py_VISIT(self->streams);
    Py_VISIT(self->last_values);
    Py_VISIT(self->last_packed);
    return 0;
}

static int fast_launch_clear(PyObject* self)
{
    disarm((FastLaunch*)self);
    return 0;
}

static void fast_launch_dealloc(PyObject* self)
{
    PyTypeObject* type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    disarm((FastLaunch*)self);
    type->tp_free(self);  /* a heap subclass's dealloc releases the type itself */
}

static PyMethodDef fast_launch_methods[] = {
    {"_arm", (PyCFunction)(void (*)(void))fast_launch_arm, METH_FASTCALL, arm_doc},
    {"_arm_aligned", (PyCFunction)(void (*)(void))fast_launch_arm_aligned, METH_FASTCALL, arm_aligned_doc},
    {"_disarm", fast_launch_disarm, METH_NOARGS, "Launch through the Python methods again."},
    {"_armed", fast_launch_armed, METH_NOARGS, "Whether a call may launch without the Python methods."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FastLaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "buildtile.runtime._native.FastLaunch",
    .tp_doc = "The compiled call of a prepared launch (the base of runtime.launch.PreparedLaunch).",
    .tp_basicsize = sizeof(FastLaunch),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = fast_launch_new,
    .tp_dealloc = fast_launch_dealloc,
    .tp_traverse = fast_launch_traverse,
    .tp_clear = fast_launch_clear,
    .tp_vectorcall_offset = offsetof(FastLaunch, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_methods = fast_launch_methods,
};

PyDoc_STRVAR(forget_armed_doc,
    "forget_armed()\n\n"
    "Disarm every prepared launch (a new driver is in place): each launches the Python way once,\n"
    "and re-arms from what it finds then.");

static PyObject* forget_armed(PyObject* self, PyObject* unused)
{
    ++launch_epoch;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"install", (PyCFunction)(void (*)(void))install, METH_FASTCALL, install_doc},
    {"installed", installed, METH_NOARGS, installed_doc},
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, launch_doc},
    {"read_torch", (PyCFunction)(void (*)(void))read_torch, METH_FASTCALL, read_torch_doc},
    {"read_dlpack", (PyCFunction)(void (*)(void))read_dlpack, METH_FASTCALL, read_dlpack_doc},
    {"exchange_api_usable", exchange_api_usable, METH_O, exchange_api_usable_doc},
    {"read_cupy", (PyCFunction)(void (*)(void))read_cupy, METH_FASTCALL, read_cupy_doc},
    {"plain_torch_call", (PyCFunction)(void (*)(void))plain_torch_call, METH_FASTCALL, plain_torch_call_doc},
    {"forget_armed", forget_armed, METH_NOARGS, forget_armed_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "buildtile.runtime._native",
    .m_doc = "The launch call of the Python host, through plain driver function pointers.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__native(void)
{
    if (PyType_Ready(&FastLaunchType) < 0 || PyType_Ready(&EagerCallType) < 0)
        return NULL;
    PyObject* created = PyModule_Create(&module);
    if (created != NULL && (PyModule_AddObjectRef(created, "FastLaunch", (PyObject*)&FastLaunchType) < 0 ||
                            PyModule_AddObjectRef(created, "EagerCall", (PyObject*)&EagerCallType) < 0))
        Py_CLEAR(created);
    return created;
}
