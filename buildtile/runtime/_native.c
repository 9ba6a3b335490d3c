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
 * read_torch() reads, for a generated argument binder, the PyTorch
 * tensors of a launch with the same getters the binder's Python would
 * call, without the interpreter (or an attribute lookup) between them.
 *
 * The module is optional: when it could not be compiled at install time,
 * driver.py keeps launching through cuda.bindings.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

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

/* The launch proper; `packed` stays alive in the caller while the GIL is released. */
static PyObject* launch_in(void* context, void* function, const unsigned* config, void* stream, void** params)
{
    CUcontext current = NULL;
    CUresult err = ctx_get_current(&current);
    if (err != 0)
        return PyLong_FromLong(CONTEXT_STEP_FAILED(err));
    int pushed = 0;
    if (current != context) {
        if (current == NULL) {  /* nothing current: adopt the primary context, as the runtime API does */
            err = ctx_set_current(context);
        } else {                /* someone else's context: borrow the thread for this launch only */
            err = ctx_push_current(context);
            pushed = 1;
        }
        if (err != 0)
            return PyLong_FromLong(CONTEXT_STEP_FAILED(err));
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
    return PyLong_FromLong((long)err);
}


PyDoc_STRVAR(launch_doc,
    "launch(context, function, config, stream, packed, offsets) -> int\n\n"
    "cuLaunchKernel(function, *config, stream, params, NULL) with `context` current for the call.\n"
    "config is (grid x, y, z, block x, y, z, dynamic shared bytes); the kernel parameters are\n"
    "packed in the bytes `packed`, parameter k at byte offsets[k]. Returns 0, the CUresult of a\n"
    "failed launch, or minus the CUresult of a failure to make the context current.");

/* More kernel parameters than CUDA takes (32764 bytes of them, at least a byte each). */
#define MAX_PARAMS 32768

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
    PyObject *shape = args[2], *packed = args[4], *offsets = args[5];
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != 7) {
        PyErr_SetString(PyExc_TypeError, "launch(): config must be a tuple of 7 ints");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < 7; ++k) {
        unsigned long value = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(shape, k));
        if (value == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
        if (value > UINT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "launch(): a config entry does not fit 32 bits");
            return NULL;
        }
        config[k] = (unsigned)value;
    }
    if (!PyBytes_Check(packed) || !PyTuple_Check(offsets)) {
        PyErr_SetString(PyExc_TypeError, "launch(): packed must be bytes and offsets a tuple");
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(offsets), size = PyBytes_GET_SIZE(packed);
    if (count > MAX_PARAMS) {
        PyErr_SetString(PyExc_ValueError, "launch(): too many kernel parameters");
        return NULL;
    }
    void* stack_params[64];
    void** params = count <= 64 ? stack_params : PyMem_Malloc((size_t)count * sizeof(void*));
    if (params == NULL)
        return PyErr_NoMemory();
    char* base = PyBytes_AS_STRING(packed);
    for (Py_ssize_t k = 0; k < count; ++k) {
        Py_ssize_t offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(offsets, k));
        if (offset < 0 || offset >= size) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "launch(): a parameter offset lies outside the packed bytes");
            if (params != stack_params)
                PyMem_Free(params);
            return NULL;
        }
        params[k] = base + offset;
    }
    PyObject* result = launch_in(context, function, config, stream, count ? params : NULL);
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
static int read_one_tensor(PyObject* const* getters, PyObject* tensor, PyObject* plan, PyObject** items,
                           long long* device)
{
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

PyDoc_STRVAR(read_torch_doc,
    "read_torch(args, tensor_type, getters, plan, last) -> tuple | None | False\n\n"
    "What a generated binder needs of the PyTorch tensors among `args`. `getters` are the\n"
    "descriptors of `tensor_type` named by arrays.TORCH_GETTERS; `plan` has one (position,\n"
    "torch dtype, rank, is_slice) per array parameter. Returns (device, then per planned\n"
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
    Py_ssize_t count = PyTuple_GET_SIZE(plan);
    for (Py_ssize_t k = 0; k < count; ++k) {
        PyObject* entry = PyTuple_GET_ITEM(plan, k);
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 4) {
            PyErr_SetString(PyExc_TypeError, "read_torch(): a plan entry is not (position, dtype, rank, is_slice)");
            return NULL;
        }
        Py_ssize_t position = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 0));
        if (position < 0 || position >= PyTuple_GET_SIZE(arguments)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_IndexError, "read_torch(): a plan position is out of range");
            return NULL;
        }
        if (Py_TYPE(PyTuple_GET_ITEM(arguments, position)) != tensor_type)
            Py_RETURN_FALSE;
    }
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
        int read = read_one_tensor(getters, tensor, entry, items + used, &device);
        if (read == 0) {
            PyErr_Clear();  /* the general path raises whatever deserves raising */
            result = Py_NewRef(Py_None);
            goto done;
        }
        used += read;
    }
    items[0] = PyLong_FromLongLong(device);
    if (items[0] == NULL) {
        result = NULL;
        goto done;
    }
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

static PyMethodDef methods[] = {
    {"install", (PyCFunction)(void (*)(void))install, METH_FASTCALL, install_doc},
    {"installed", installed, METH_NOARGS, installed_doc},
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, launch_doc},
    {"read_torch", (PyCFunction)(void (*)(void))read_torch, METH_FASTCALL, read_torch_doc},
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
    return PyModule_Create(&module);
}
