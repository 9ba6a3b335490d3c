// example_mixed._ext: a nanobind extension that launches the package's buildtile
// kernels from C++, through the generated example_mixed/kernels.hpp.
//
// Arrays arrive as nanobind ndarrays (any DLPack-capable array: PyTorch, CuPy,
// JAX, ...) and go to the kernels' C ABI as the DLTensors they already are.
// The C ABI checks them as the Python host would (device, dtype, rank,
// layout, the kernels' `requires`, aliasing) before anything is queued, and a
// refused launch raises example_mixed.KernelError with its error[BTxxxx] text.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>

#include "example_mixed/kernels.hpp"

namespace nb = nanobind;
namespace kernels = example_mixed::kernels;

namespace {

// Any array nanobind can import; the kernels' C ABI decides whether it fits.
using Array = nb::ndarray<>;

// The DLTensor of an array, as the C launchers take it (it borrows the
// array's shape and strides, so it lives no longer than the array).
DLTensor dl(const Array& a)
{
    DLTensor t{};
    t.data = const_cast<void*>(a.data());
    t.device = DLDevice{static_cast<DLDeviceType>(a.device_type()), a.device_id()};
    t.ndim = static_cast<std::int32_t>(a.ndim());
    t.dtype = DLDataType{a.dtype().code, a.dtype().bits, a.dtype().lanes};
    t.shape = const_cast<std::int64_t*>(a.shape_ptr());
    t.strides = const_cast<std::int64_t*>(a.stride_ptr());
    t.byte_offset = 0;  // data() already includes it
    return t;
}

// One thread per element of `out`, on `stream` (a CUstream / cudaStream_t handle).
buildtile::Launch over(const Array& out, const buildtile::Dim3& block, std::uintptr_t stream)
{
    return {buildtile::cover(static_cast<std::int64_t>(out.size()), block), reinterpret_cast<void*>(stream)};
}

void saxpy(float alpha, const Array& x, const Array& y, const Array& out, std::uintptr_t stream)
{
    kernels::saxpy(over(out, kernels::saxpy_block, stream), alpha, dl(x), dl(y), dl(out));
}

void scale(float factor, const Array& x, const Array& out, std::uintptr_t stream)
{
    kernels::scale(over(out, kernels::scale_block, stream), factor, dl(x), dl(out));
}

// out = alpha * x + beta * y in two launches on one stream: work = beta * y,
// then out = alpha * x + work. (out cannot hold the intermediate: a kernel
// that reads and writes one buffer is refused, error[BT0502].)
void axpby(float alpha, const Array& x, float beta, const Array& y, const Array& out, const Array& work,
           std::uintptr_t stream)
{
    kernels::scale(over(work, kernels::scale_block, stream), beta, dl(y), dl(work));
    kernels::saxpy(over(out, kernels::saxpy_block, stream), alpha, dl(x), dl(work), dl(out));
}

}  // namespace

NB_MODULE(_ext, m)
{
    m.doc() = "C++ callers of example_mixed's buildtile kernels (float32 CUDA arrays; stream: a raw handle)";
    // headers and library must speak one kernel ABI; checked once, at import
    example_mixed::check_abi();

    nb::exception<buildtile::Error>(m, "KernelError");

    m.def("abi_version", &example_mixed_abi_version, "The kernel ABI version of the linked C ABI library.");
    m.def("saxpy", &saxpy, nb::arg("alpha"), nb::arg("x"), nb::arg("y"), nb::arg("out"), nb::kw_only(),
          nb::arg("stream") = 0, "out = alpha * x + y (the saxpy kernel).");
    m.def("scale", &scale, nb::arg("factor"), nb::arg("x"), nb::arg("out"), nb::kw_only(), nb::arg("stream") = 0,
          "out = factor * x (the scale kernel).");
    m.def("axpby", &axpby, nb::arg("alpha"), nb::arg("x"), nb::arg("beta"), nb::arg("y"), nb::arg("out"),
          nb::arg("work"), nb::kw_only(), nb::arg("stream") = 0,
          "out = alpha * x + beta * y: scale into `work`, then saxpy into `out`, both on `stream`.");
}
