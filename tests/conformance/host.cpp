// The C++ host of the cross-host conformance test (tests/gpu/test_conformance.py).
//
// It runs the jobs of a job file through example_kernels' typed C++ wrappers
// (example_kernels/kernels.hpp: DeviceSpan and DeviceTensor for SIMT kernels,
// move-only TileTensor and Partition for Tile kernels), with memory from the
// CUDA runtime, and writes every array argument back after each launch, so the
// Python test can compare them byte for byte with its own launches.
//
//   conformance_host --list
//       the kernels this host knows (module.kernel), one per line
//   conformance_host --jobs DIR/jobs.txt --out OUT [--device N] [--current M]
//                    [--launch-from main|thread]
//       allocates the arguments and the launch stream on device N (default 0;
//       a job may put an argument on another device), makes M current (default
//       N), and launches from the main thread or from a fresh thread that has no
//       CUDA context (so the launcher itself must pick the arguments' device).
//
// Job file: one job is
//
//   job ID KERNEL grid GX GY GZ          (SIMT: the grid in blocks)
//   job ID KERNEL tile T0 [T1 ...]       (Tile: the tile shape of the partitioned output)
//   array NAME DTYPE DEVICE NDIM EXTENT... FILE   (DEVICE: an ordinal, or @ for --device; FILE: raw
//                                                  little-endian bytes, row-major, next to the job file)
//   scalar NAME DTYPE VALUE              (C99 hexadecimal float, a decimal integer, or 0 or 1 for bool)
//   end
//
// with one array/scalar line per kernel parameter, in order. For each job it writes
// OUT/ID.NAME.bin for every array (after the launch, or after the refusal) and a line
// "ID<TAB>STATUS<TAB>MESSAGE" to OUT/results.txt: STATUS 0 is a launch, a BT code
// (308, 502, 600 ...) a refusal by the C ABI (buildtile::Error), -1 a problem of this
// host or of the job, -2 a CUDA error after the launch (then it stops).
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <limits>
#include <map>
#include <complex>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "example_kernels/kernels.hpp"

namespace attention = example_kernels::attention;
namespace cooperative = example_kernels::cooperative;
namespace epilogues = example_kernels::epilogues;
namespace memory = example_kernels::memory;
namespace numbers = example_kernels::numbers;
namespace ops = example_kernels::ops;
namespace particles = example_kernels::particles;
namespace patterns = example_kernels::patterns;
namespace tiles = example_kernels::tiles;
using buildtile::DeviceSpan;
using buildtile::DeviceTensor;
using buildtile::Dim3;
using buildtile::Partition;
using buildtile::TileTensor;

namespace {

constexpr int kHostError = -1;
constexpr int kCudaFault = -2;
constexpr int kLaunchDevice = -1;  // an argument's device given as `@`: the --device

/// A problem of this host or of the job file, not a refusal by the kernels' C ABI.
class HostError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

void cuda_check(cudaError_t status, const std::string& what)
{
    if (status != cudaSuccess)
        throw HostError(what + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

/// Makes `device` current for a scope, then the previous one again.
class DeviceGuard {
public:
    explicit DeviceGuard(int device)
    {
        cuda_check(cudaGetDevice(&previous_), "cudaGetDevice");
        cuda_check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
    }
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;
    ~DeviceGuard() { cudaSetDevice(previous_); }

private:
    int previous_ = 0;
};

/// cudaMalloc'd bytes on one device, freed on scope exit.
class DeviceBuffer {
public:
    DeviceBuffer(std::size_t bytes, int device) : device_(device)
    {
        DeviceGuard on(device);
        cuda_check(cudaMalloc(&ptr_, std::max<std::size_t>(bytes, 1)),
                   "cudaMalloc(" + std::to_string(bytes) + ") on device " + std::to_string(device));
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer()
    {
        int previous = 0;
        cudaGetDevice(&previous);
        cudaSetDevice(device_);
        cudaFree(ptr_);
        cudaSetDevice(previous);
    }

    void* get() const { return ptr_; }

private:
    void* ptr_ = nullptr;
    int device_;
};

std::size_t dtype_size(const std::string& dtype)
{
    if (dtype == "bool" || dtype == "i8" || dtype == "u8")
        return 1;
    if (dtype == "f16" || dtype == "bf16" || dtype == "i16" || dtype == "u16")
        return 2;
    if (dtype == "f32" || dtype == "i32" || dtype == "u32")
        return 4;
    if (dtype == "f64" || dtype == "i64" || dtype == "u64" || dtype == "complex64")
        return 8;
    throw HostError("unknown dtype `" + dtype + "`");
}

/// One kernel argument of a job: an array (uploaded from its file) or a scalar.
struct Arg {
    std::string name;
    std::string dtype;
    bool array = false;
    int device = 0;
    std::vector<std::int64_t> shape;
    std::string file;
    std::string value;
    std::unique_ptr<DeviceBuffer> memory;

    std::int64_t elements() const
    {
        std::int64_t n = 1;
        for (std::int64_t extent : shape)
            n *= extent;
        return n;
    }
    std::size_t bytes() const { return static_cast<std::size_t>(elements()) * dtype_size(dtype); }
};

struct Job {
    std::string id;
    std::string kernel;
    bool tiled = false;
    Dim3 grid;
    std::vector<std::int64_t> tile;
    std::vector<Arg> args;

    /// Argument `index`, which must be the kernel's parameter `name`.
    const Arg& arg(std::size_t index, const char* name) const
    {
        if (index >= args.size() || args[index].name != name)
            throw HostError("job " + id + ": argument " + std::to_string(index) + " must be `" + name + "`");
        return args[index];
    }
};

// ----------------------------------------------------------------------------- typed views of the arguments

template <class T>
struct Dtype;
template <>
struct Dtype<float> {
    static constexpr const char* name = "f32";
};
template <>
struct Dtype<double> {
    static constexpr const char* name = "f64";
};
template <>
struct Dtype<std::complex<float>> {
    static constexpr const char* name = "complex64";
};
template <>
struct Dtype<std::int8_t> {
    static constexpr const char* name = "i8";
};
template <>
struct Dtype<std::uint8_t> {
    static constexpr const char* name = "u8";
};
template <>
struct Dtype<std::int16_t> {
    static constexpr const char* name = "i16";
};
template <>
struct Dtype<std::uint16_t> {
    static constexpr const char* name = "u16";
};
template <>
struct Dtype<std::uint64_t> {
    static constexpr const char* name = "u64";
};
template <>
struct Dtype<std::int32_t> {
    static constexpr const char* name = "i32";
};
template <>
struct Dtype<std::int64_t> {
    static constexpr const char* name = "i64";
};
template <>
struct Dtype<std::uint32_t> {
    static constexpr const char* name = "u32";
};
template <>
struct Dtype<buildtile::f16> {
    static constexpr const char* name = "f16";
};
template <>
struct Dtype<buildtile::bf16> {
    static constexpr const char* name = "bf16";
};

template <class T>
T* data(const Arg& a, int rank)
{
    if (!a.array || a.dtype != Dtype<T>::name || static_cast<int>(a.shape.size()) != rank || !a.memory)
        throw HostError("argument `" + a.name + "` must be a rank-" + std::to_string(rank) + " " + Dtype<T>::name +
                        " array; the job gives a rank-" + std::to_string(a.shape.size()) + " " + a.dtype +
                        (a.array ? " array" : " scalar"));
    return static_cast<T*>(a.memory->get());
}

/// An array of records of type T, which a job gives as their bytes: shape (n, sizeof(T)).
template <class T>
DeviceSpan<T> records(const Arg& a)
{
    if (a.shape.size() != 2 || a.shape[1] != static_cast<std::int64_t>(sizeof(T)))
        throw HostError("argument `" + a.name + "` must be the bytes of records of " + std::to_string(sizeof(T)) +
                        " bytes, shape (n, " + std::to_string(sizeof(T)) + ")");
    return DeviceSpan<T>(reinterpret_cast<T*>(data<std::uint8_t>(a, 2)), a.shape[0], a.device);
}

template <int Rank>
std::array<std::int64_t, Rank> extents(const Arg& a)
{
    std::array<std::int64_t, Rank> e{};
    std::copy_n(a.shape.begin(), Rank, e.begin());
    return e;
}

template <class T>
DeviceSpan<const T> in(const Arg& a)
{
    return DeviceSpan<const T>(data<T>(a, 1), a.shape[0], a.device);
}

template <class T>
DeviceSpan<T> out(const Arg& a)
{
    return DeviceSpan<T>(data<T>(a, 1), a.shape[0], a.device);
}

template <class T, int Rank>
DeviceTensor<const T, Rank> tensor_in(const Arg& a)
{
    return DeviceTensor<const T, Rank>(data<T>(a, Rank), extents<Rank>(a), a.device);
}

template <class T, int Rank>
DeviceTensor<T, Rank> tensor_out(const Arg& a)
{
    return DeviceTensor<T, Rank>(data<T>(a, Rank), extents<Rank>(a), a.device);
}

template <class T, int Rank>
TileTensor<T, Rank> tile_tensor(const Arg& a)
{
    return TileTensor<T, Rank>(data<T>(a, Rank), extents<Rank>(a), a.device);
}

/// The output cut into the job's tile shape (which picks the specialization).
template <class T, int Rank>
Partition<T, Rank> partitioned(const Job& job, const Arg& a)
{
    if (job.tile.size() != static_cast<std::size_t>(Rank))
        throw HostError("job " + job.id + ": a tile shape of " + std::to_string(job.tile.size()) +
                        " extents for the rank-" + std::to_string(Rank) + " output `" + a.name + "`");
    std::array<std::int64_t, Rank> tile{};
    std::copy_n(job.tile.begin(), Rank, tile.begin());
    return buildtile::partition(tile_tensor<T, Rank>(a), tile);
}

/// sync_on must give each tensor back: live, over the same memory, device and shape.
template <class T, int Rank>
void given_back(const TileTensor<T, Rank>& t, const Arg& a)
{
    if (t.moved() || static_cast<const void*>(t.data()) != a.memory->get() || t.device() != a.device ||
        !std::equal(t.shape().begin(), t.shape().end(), a.shape.begin()))
        throw HostError("sync_on did not give `" + a.name + "` back as it was passed");
}

float f32(const Arg& a)
{
    char* end = nullptr;
    const float value = std::strtof(a.value.c_str(), &end);
    if (a.array || a.dtype != "f32" || a.value.empty() || *end != '\0')
        throw HostError("argument `" + a.name + "` must be an f32 scalar, the job gives " + a.dtype + " " + a.value);
    return value;
}

std::int32_t i32(const Arg& a)
{
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(a.value.c_str(), &end, 10);
    if (a.array || a.dtype != "i32" || a.value.empty() || *end != '\0' || errno != 0 || value < INT32_MIN ||
        value > INT32_MAX)
        throw HostError("argument `" + a.name + "` must be an i32 scalar, the job gives " + a.dtype + " " + a.value);
    return static_cast<std::int32_t>(value);
}

/// A bool scalar, written 0 or 1.
bool flag(const Arg& a)
{
    if (a.array || a.dtype != "bool" || (a.value != "0" && a.value != "1"))
        throw HostError("argument `" + a.name + "` must be a bool scalar, the job gives " + a.dtype + " " + a.value);
    return a.value == "1";
}

/// An integer scalar of type T, written in decimal; it must fit T.
template <class T>
T integer(const Arg& a)
{
    static_assert(std::is_integral_v<T>, "an integer type");
    char* end = nullptr;
    errno = 0;
    bool fits = false;
    T value{};
    if constexpr (std::is_signed_v<T>) {
        const long long v = std::strtoll(a.value.c_str(), &end, 10);
        fits = v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max();
        value = static_cast<T>(v);
    } else {
        const unsigned long long v = std::strtoull(a.value.c_str(), &end, 10);
        fits = a.value.find('-') == std::string::npos && v <= std::numeric_limits<T>::max();
        value = static_cast<T>(v);
    }
    if (a.array || a.dtype != Dtype<T>::name || a.value.empty() || *end != '\0' || errno != 0 || !fits)
        throw HostError("argument `" + a.name + "` must be an " + Dtype<T>::name + " scalar, the job gives " +
                        a.dtype + " " + a.value);
    return value;
}

std::string dim3_text(const Dim3& d)
{
    return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

/// The job's grid must be the one a C++ engine computes for the kernel (buildtile::cover for index_Nd
/// kernels), so the Python host's grid_for and the C++ layer's cover are compared too.
void expect_grid(const Job& job, const Dim3& want)
{
    if (job.grid.x != want.x || job.grid.y != want.y || job.grid.z != want.z)
        throw HostError("job " + job.id + ": grid " + dim3_text(job.grid) + " is not the C++ host's " +
                        dim3_text(want));
}

std::uint32_t blocks(std::int64_t n)
{
    return static_cast<std::uint32_t>(n);
}

// ----------------------------------------------------------------------------- one runner per kernel

using Runner = void (*)(const Job&, void*);

void ops_vecadd(const Job& j, void* stream)
{
    const Arg &a = j.arg(0, "a"), &b = j.arg(1, "b"), &c = j.arg(2, "c");
    expect_grid(j, buildtile::cover(c.shape.at(0), ops::vecadd_block));
    ops::vecadd({j.grid, stream}, in<float>(a), in<float>(b), out<float>(c));
}

void ops_saxpy(const Job& j, void* stream)
{
    const Arg &alpha = j.arg(0, "alpha"), &x = j.arg(1, "x"), &y = j.arg(2, "y"), &o = j.arg(3, "out");
    expect_grid(j, buildtile::cover(o.shape.at(0), ops::saxpy_block));
    ops::saxpy({j.grid, stream}, f32(alpha), in<float>(x), in<float>(y), out<float>(o));
}

void ops_matadd(const Job& j, void* stream)
{
    const Arg &a = j.arg(0, "a"), &b = j.arg(1, "b"), &c = j.arg(2, "c");
    expect_grid(j, buildtile::cover(c.shape.at(1), c.shape.at(0), ops::matadd_block));  // x along columns
    ops::matadd({j.grid, stream}, tensor_in<float, 2>(a), tensor_in<float, 2>(b), tensor_out<float, 2>(c));
}

void ops_polyval_abs(const Job& j, void* stream)
{
    const Arg &coeffs = j.arg(0, "coeffs"), &x = j.arg(1, "x"), &y = j.arg(2, "y");
    expect_grid(j, buildtile::cover(y.shape.at(0), ops::polyval_abs_block));
    ops::polyval_abs({j.grid, stream}, in<double>(coeffs), in<double>(x), out<double>(y));
}

void ops_collatz_steps(const Job& j, void* stream)
{
    const Arg &x = j.arg(0, "x"), &limit = j.arg(1, "limit"), &o = j.arg(2, "out");
    expect_grid(j, buildtile::cover(o.shape.at(0), ops::collatz_steps_block));
    ops::collatz_steps({j.grid, stream}, in<std::int64_t>(x), i32(limit), out<std::int32_t>(o));
}

void patterns_block_sum(const Job& j, void* stream)
{
    const Arg &x = j.arg(0, "x"), &partial = j.arg(1, "partial");
    expect_grid(j, buildtile::cover(x.shape.at(0), patterns::block_sum_block));
    patterns::block_sum({j.grid, stream}, in<float>(x), out<float>(partial));
}

void patterns_transpose_tiled(const Job& j, void* stream)
{
    const Arg &a = j.arg(0, "a"), &o = j.arg(1, "out");
    // one block per 32 x 32 tile of `a` (the kernel's TILE), x along a's columns
    expect_grid(j, buildtile::cover(a.shape.at(1), a.shape.at(0), Dim3{32, 32, 1}));
    patterns::transpose_tiled({j.grid, stream}, tensor_in<float, 2>(a), tensor_out<float, 2>(o));
}

void patterns_histogram(const Job& j, void* stream)
{
    const Arg &values = j.arg(0, "values"), &bins = j.arg(1, "bins");
    expect_grid(j, buildtile::cover(values.shape.at(0), patterns::histogram_block));
    patterns::histogram({j.grid, stream}, in<std::int32_t>(values), out<std::uint32_t>(bins));
}

void patterns_softmax_rows(const Job& j, void* stream)
{
    const Arg &x = j.arg(0, "x"), &o = j.arg(1, "out");
    expect_grid(j, Dim3{blocks(x.shape.at(0)), 1, 1});  // one block per row
    patterns::softmax_rows({j.grid, stream}, tensor_in<float, 2>(x), tensor_out<float, 2>(o));
}

void patterns_laplacian_3d(const Job& j, void* stream)
{
    const Arg &u = j.arg(0, "u"), &o = j.arg(1, "out");
    expect_grid(j, buildtile::cover(u.shape.at(2), u.shape.at(1), u.shape.at(0), patterns::laplacian_3d_block));
    patterns::laplacian_3d({j.grid, stream}, tensor_in<float, 3>(u), tensor_out<float, 3>(o));
}

void patterns_sum_partials(const Job& j, void* stream)
{
    const Arg &x = j.arg(0, "x"), &partial = j.arg(1, "partial");
    expect_grid(j, Dim3{blocks(partial.shape.at(0)), 1, 1});  // one partial sum per block
    patterns::sum_partials({j.grid, stream}, in<float>(x), out<float>(partial));
}

void patterns_sum_total(const Job& j, void* stream)
{
    const Arg &x = j.arg(0, "x"), &total = j.arg(1, "total");
    patterns::sum_total({j.grid, stream}, in<float>(x), out<float>(total));  // adds into total, any grid
}

void patterns_reverse_blocks(const Job& j, void* stream)
{
    const Arg &x = j.arg(0, "x"), &o = j.arg(1, "out");
    expect_grid(j, buildtile::cover(x.shape.at(0), patterns::reverse_blocks_block));
    patterns::reverse_blocks({j.grid, stream}, in<float>(x), out<float>(o));  // the contract's shared memory
}

void memory_transpose_shared(const Job& j, void* stream)
{
    const Arg &a = j.arg(0, "a"), &o = j.arg(1, "out");
    expect_grid(j, buildtile::cover(a.shape.at(1), a.shape.at(0), memory::transpose_shared_block));
    memory::transpose_shared({j.grid, stream}, tensor_in<float, 2>(a), tensor_out<float, 2>(o));
}

void cooperative_normalized_histogram(const Job& j, void* stream)
{
    const Arg &values = j.arg(0, "values"), &counts = j.arg(1, "counts"), &freq = j.arg(2, "freq");
    cooperative::normalized_histogram({j.grid, stream}, in<std::int32_t>(values), out<std::uint32_t>(counts),
                                      out<float>(freq));
}

void numbers_rotate_phase(const Job& j, void* stream)
{
    const Arg &z = j.arg(0, "z"), &theta = j.arg(1, "theta"), &o = j.arg(2, "out"), &m = j.arg(3, "magnitude");
    expect_grid(j, buildtile::cover(z.shape.at(0), numbers::rotate_phase_block));
    numbers::rotate_phase({j.grid, stream}, in<std::complex<float>>(z), in<float>(theta),
                          out<std::complex<float>>(o), out<float>(m));
}

void particles_advance(const Job& j, void* stream)
{
    const Arg &p = j.arg(0, "p"), &dt = j.arg(1, "dt"), &floor = j.arg(2, "floor");
    expect_grid(j, buildtile::cover(p.shape.at(0), particles::advance_block));
    particles::advance({j.grid, stream}, records<example_kernels_Particle>(p), f32(dt), f32(floor));
}

void particles_to_columns(const Job& j, void* stream)
{
    const Arg &p = j.arg(0, "p"), &x = j.arg(1, "x"), &y = j.arg(2, "y"), &energy = j.arg(3, "energy");
    expect_grid(j, buildtile::cover(p.shape.at(0), particles::to_columns_block));
    const DeviceSpan<const example_kernels_Particle> swarm = records<example_kernels_Particle>(p);
    particles::to_columns({j.grid, stream}, swarm, out<float>(x), out<float>(y), out<double>(energy));
}

void memory_block_histogram(const Job& j, void* stream)
{
    const Arg &values = j.arg(0, "values"), &bins = j.arg(1, "bins");
    expect_grid(j, buildtile::cover(values.shape.at(0), memory::block_histogram_block));
    memory::block_histogram({j.grid, stream}, in<std::int32_t>(values), out<std::uint32_t>(bins));
}

void memory_grid_histogram(const Job& j, void* stream)
{
    const Arg &xs = j.arg(0, "xs"), &ys = j.arg(1, "ys"), &bins = j.arg(2, "bins");
    expect_grid(j, buildtile::cover(xs.shape.at(0), memory::grid_histogram_block));
    memory::grid_histogram({j.grid, stream}, in<std::int32_t>(xs), in<std::int32_t>(ys), out<std::uint32_t>(bins));
}

void memory_polynomial(const Job& j, void* stream)
{
    const Arg &x = j.arg(0, "x"), &y = j.arg(1, "y");
    expect_grid(j, buildtile::cover(x.shape.at(0), memory::polynomial_block));
    memory::polynomial({j.grid, stream}, in<float>(x), out<float>(y));
}

void memory_segmented_scan(const Job& j, void* stream)
{
    const Arg &x = j.arg(0, "x"), &o = j.arg(1, "out");
    expect_grid(j, buildtile::cover(x.shape.at(0), memory::segmented_scan_block));
    memory::segmented_scan({j.grid, stream}, in<float>(x), out<float>(o));
}

void memory_brighten(const Job& j, void* stream)
{
    const Arg &pixels = j.arg(0, "pixels"), &o = j.arg(1, "out"), &gain = j.arg(2, "gain"), &bias = j.arg(3, "bias");
    expect_grid(j, buildtile::cover(pixels.shape.at(0), memory::brighten_block));
    memory::brighten({j.grid, stream}, in<std::uint8_t>(pixels), out<std::uint8_t>(o), integer<std::uint16_t>(gain),
                     integer<std::int16_t>(bias));
}

void memory_widen(const Job& j, void* stream)
{
    const Arg &a = j.arg(0, "a"), &b = j.arg(1, "b"), &wide = j.arg(2, "wide"), &low = j.arg(3, "low");
    expect_grid(j, buildtile::cover(a.shape.at(0), memory::widen_block));
    memory::widen({j.grid, stream}, in<std::int8_t>(a), in<std::uint16_t>(b), out<std::int32_t>(wide),
                  out<std::int16_t>(low));
}

void memory_random_fill(const Job& j, void* stream)
{
    const Arg &u = j.arg(0, "uniform"), &z = j.arg(1, "normal"), &w = j.arg(2, "words"), &seed = j.arg(3, "seed"),
              &offset = j.arg(4, "offset");
    expect_grid(j, buildtile::cover(u.shape.at(0), memory::random_fill_block));
    memory::random_fill({j.grid, stream}, out<float>(u), out<float>(z), out<std::uint32_t>(w),
                        integer<std::uint64_t>(seed), integer<std::uint64_t>(offset));
}

void tiles_add(const Job& j, void* stream)
{
    const Arg &x = j.arg(0, "x"), &y = j.arg(1, "y"), &z = j.arg(2, "z");
    auto back = tiles::add(tile_tensor<float, 1>(x), tile_tensor<float, 1>(y), partitioned<float, 1>(j, z))
                    .sync_on(stream);
    given_back(std::get<0>(back), x);
    given_back(std::get<1>(back), y);
    given_back(std::get<2>(back), z);
}

void tiles_axpby(const Job& j, void* stream)
{
    const Arg &x = j.arg(0, "x"), &y = j.arg(1, "y"), &alpha = j.arg(2, "alpha"), &beta = j.arg(3, "beta"),
              &z = j.arg(4, "z");
    auto back = tiles::axpby(tile_tensor<float, 1>(x), tile_tensor<float, 1>(y), f32(alpha), f32(beta),
                             partitioned<float, 1>(j, z))
                    .sync_on(stream);
    given_back(std::get<0>(back), x);
    given_back(std::get<4>(back), z);
}

void tiles_scale_bias(const Job& j, void* stream)
{
    const Arg &x = j.arg(0, "x"), &scale = j.arg(1, "scale"), &bias = j.arg(2, "bias"), &z = j.arg(3, "z");
    auto back = tiles::scale_bias(tile_tensor<float, 2>(x), tile_tensor<float, 1>(scale),
                                  tile_tensor<float, 1>(bias), partitioned<float, 2>(j, z))
                    .sync_on(stream);
    given_back(std::get<0>(back), x);
    given_back(std::get<3>(back), z);
}

void tiles_softmax(const Job& j, void* stream)
{
    const Arg &x = j.arg(0, "x"), &z = j.arg(1, "z");
    auto back = tiles::softmax(tile_tensor<float, 2>(x), partitioned<float, 2>(j, z)).sync_on(stream);
    given_back(std::get<0>(back), x);
    given_back(std::get<1>(back), z);
}

void tiles_layernorm(const Job& j, void* stream)
{
    const Arg &x = j.arg(0, "x"), &w = j.arg(1, "weight"), &b = j.arg(2, "bias"), &eps = j.arg(3, "eps"),
              &z = j.arg(4, "z");
    auto back = tiles::layernorm(tile_tensor<float, 2>(x), tile_tensor<float, 1>(w), tile_tensor<float, 1>(b),
                                 f32(eps), partitioned<float, 2>(j, z))
                    .sync_on(stream);
    given_back(std::get<0>(back), x);
    given_back(std::get<4>(back), z);
}

void tiles_row_sum(const Job& j, void* stream)
{
    const Arg &x = j.arg(0, "x"), &z = j.arg(1, "z");
    auto back = tiles::row_sum(tile_tensor<float, 2>(x), partitioned<float, 1>(j, z)).sync_on(stream);
    given_back(std::get<1>(back), z);
}

template <class T, class Launch>
void matmul(const Job& j, void* stream, Launch launch)
{
    const Arg &a = j.arg(0, "a"), &b = j.arg(1, "b"), &c = j.arg(2, "c");
    auto back = launch(tile_tensor<T, 2>(a), tile_tensor<T, 2>(b), partitioned<T, 2>(j, c)).sync_on(stream);
    given_back(std::get<0>(back), a);
    given_back(std::get<1>(back), b);
    given_back(std::get<2>(back), c);
}

void tiles_matmul_f16(const Job& j, void* stream)
{
    matmul<buildtile::f16>(j, stream, [](auto&& a, auto&& b, auto&& c) {
        return tiles::matmul_f16(std::move(a), std::move(b), std::move(c));
    });
}

void tiles_matmul_bf16(const Job& j, void* stream)
{
    matmul<buildtile::bf16>(j, stream, [](auto&& a, auto&& b, auto&& c) {
        return tiles::matmul_bf16(std::move(a), std::move(b), std::move(c));
    });
}

template <class T, class Launch>
void matmul_bias_gelu(const Job& j, void* stream, Launch launch)
{
    const Arg &a = j.arg(0, "a"), &b = j.arg(1, "b"), &bias = j.arg(2, "bias"), &c = j.arg(3, "c");
    auto back = launch(tile_tensor<T, 2>(a), tile_tensor<T, 2>(b), tile_tensor<T, 1>(bias), partitioned<T, 2>(j, c))
                    .sync_on(stream);
    given_back(std::get<0>(back), a);
    given_back(std::get<2>(back), bias);
    given_back(std::get<3>(back), c);
}

void epilogues_matmul_bias_gelu_bf16(const Job& j, void* stream)
{
    matmul_bias_gelu<buildtile::bf16>(j, stream, [](auto&& a, auto&& b, auto&& bias, auto&& c) {
        return epilogues::matmul_bias_gelu_bf16(std::move(a), std::move(b), std::move(bias), std::move(c));
    });
}

void epilogues_matmul_bias_gelu_f16(const Job& j, void* stream)
{
    matmul_bias_gelu<buildtile::f16>(j, stream, [](auto&& a, auto&& b, auto&& bias, auto&& c) {
        return epilogues::matmul_bias_gelu_f16(std::move(a), std::move(b), std::move(bias), std::move(c));
    });
}

template <class T, class Launch>
void matmul_residual(const Job& j, void* stream, Launch launch)
{
    const Arg &a = j.arg(0, "a"), &b = j.arg(1, "b"), &residual = j.arg(2, "residual"), &alpha = j.arg(3, "alpha"),
              &c = j.arg(4, "c");
    auto back = launch(tile_tensor<T, 2>(a), tile_tensor<T, 2>(b), tile_tensor<T, 2>(residual), f32(alpha),
                       partitioned<T, 2>(j, c))
                    .sync_on(stream);
    given_back(std::get<0>(back), a);
    given_back(std::get<2>(back), residual);
    given_back(std::get<4>(back), c);
}

void epilogues_matmul_residual_bf16(const Job& j, void* stream)
{
    matmul_residual<buildtile::bf16>(j, stream, [](auto&& a, auto&& b, auto&& residual, float alpha, auto&& c) {
        return epilogues::matmul_residual_bf16(std::move(a), std::move(b), std::move(residual), alpha, std::move(c));
    });
}

void epilogues_matmul_residual_f16(const Job& j, void* stream)
{
    matmul_residual<buildtile::f16>(j, stream, [](auto&& a, auto&& b, auto&& residual, float alpha, auto&& c) {
        return epilogues::matmul_residual_f16(std::move(a), std::move(b), std::move(residual), alpha, std::move(c));
    });
}

void attention_attention(const Job& j, void* stream)
{
    using buildtile::bf16;
    const Arg &q = j.arg(0, "q"), &k = j.arg(1, "k"), &v = j.arg(2, "v"), &scale = j.arg(3, "scale"),
              &causal = j.arg(4, "causal"), &o = j.arg(5, "out");
    auto back = attention::attention(tile_tensor<bf16, 4>(q), tile_tensor<bf16, 4>(k), tile_tensor<bf16, 4>(v),
                                     f32(scale), flag(causal), partitioned<bf16, 4>(j, o))
                    .sync_on(stream);
    given_back(std::get<0>(back), q);
    given_back(std::get<5>(back), o);
}

const std::map<std::string, Runner>& runners()
{
    static const std::map<std::string, Runner> table = {
        {"ops.vecadd", ops_vecadd},
        {"ops.saxpy", ops_saxpy},
        {"ops.matadd", ops_matadd},
        {"ops.polyval_abs", ops_polyval_abs},
        {"ops.collatz_steps", ops_collatz_steps},
        {"patterns.block_sum", patterns_block_sum},
        {"patterns.transpose_tiled", patterns_transpose_tiled},
        {"patterns.histogram", patterns_histogram},
        {"patterns.softmax_rows", patterns_softmax_rows},
        {"patterns.laplacian_3d", patterns_laplacian_3d},
        {"patterns.sum_partials", patterns_sum_partials},
        {"patterns.sum_total", patterns_sum_total},
        {"patterns.reverse_blocks", patterns_reverse_blocks},
        {"cooperative.normalized_histogram", cooperative_normalized_histogram},
        {"numbers.rotate_phase", numbers_rotate_phase},
        {"particles.advance", particles_advance},
        {"particles.to_columns", particles_to_columns},
        {"memory.transpose_shared", memory_transpose_shared},
        {"memory.block_histogram", memory_block_histogram},
        {"memory.grid_histogram", memory_grid_histogram},
        {"memory.polynomial", memory_polynomial},
        {"memory.segmented_scan", memory_segmented_scan},
        {"memory.brighten", memory_brighten},
        {"memory.widen", memory_widen},
        {"memory.random_fill", memory_random_fill},
        {"tiles.add", tiles_add},
        {"tiles.axpby", tiles_axpby},
        {"tiles.scale_bias", tiles_scale_bias},
        {"tiles.softmax", tiles_softmax},
        {"tiles.layernorm", tiles_layernorm},
        {"tiles.row_sum", tiles_row_sum},
        {"tiles.matmul_f16", tiles_matmul_f16},
        {"tiles.matmul_bf16", tiles_matmul_bf16},
        {"attention.attention", attention_attention},
        {"epilogues.matmul_bias_gelu_bf16", epilogues_matmul_bias_gelu_bf16},
        {"epilogues.matmul_bias_gelu_f16", epilogues_matmul_bias_gelu_f16},
        {"epilogues.matmul_residual_bf16", epilogues_matmul_residual_bf16},
        {"epilogues.matmul_residual_f16", epilogues_matmul_residual_f16},
    };
    return table;
}

// ----------------------------------------------------------------------------- the job file

std::vector<Job> read_jobs(const std::string& path)
{
    std::ifstream in(path);
    if (!in)
        throw HostError("cannot read the job file " + path);
    std::vector<Job> jobs;
    Job* job = nullptr;
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
        const auto fail = [&](const std::string& why) {
            return HostError(path + ":" + std::to_string(number) + ": " + why + ": " + line);
        };
        std::istringstream words(line);
        std::string word;
        if (!(words >> word) || word[0] == '#')
            continue;
        if (word == "job") {
            if (job != nullptr)
                throw fail("a job inside a job (no `end`)");
            job = &jobs.emplace_back();
            std::string how;
            if (!(words >> job->id >> job->kernel >> how))
                throw fail("expected `job ID KERNEL grid|tile ...`");
            if (how == "grid") {
                if (!(words >> job->grid.x >> job->grid.y >> job->grid.z))
                    throw fail("expected three grid extents");
            } else if (how == "tile") {
                job->tiled = true;
                for (std::int64_t extent; words >> extent;)
                    job->tile.push_back(extent);
                if (job->tile.empty())
                    throw fail("expected the tile extents");
            } else {
                throw fail("expected `grid` or `tile`");
            }
        } else if (word == "array" || word == "scalar") {
            if (job == nullptr)
                throw fail("an argument outside a job");
            Arg a;
            a.array = word == "array";
            int ndim = 0;
            if (a.array) {
                std::string device;
                if (!(words >> a.name >> a.dtype >> device >> ndim) || ndim < 0 || ndim > 8)
                    throw fail("expected `array NAME DTYPE DEVICE NDIM EXTENT... FILE`");
                if (device == "@") {
                    a.device = kLaunchDevice;
                } else {
                    std::size_t used = 0;
                    a.device = std::stoi(device, &used);
                    if (used != device.size() || a.device < 0)
                        throw fail("a device is an ordinal or @");
                }
                a.shape.resize(static_cast<std::size_t>(ndim));
                for (std::int64_t& extent : a.shape)
                    if (!(words >> extent) || extent < 0)
                        throw fail("expected " + std::to_string(ndim) + " extents");
                if (!(words >> a.file))
                    throw fail("expected the file name");
                dtype_size(a.dtype);
            } else if (!(words >> a.name >> a.dtype >> a.value)) {
                throw fail("expected `scalar NAME DTYPE VALUE`");
            }
            job->args.push_back(std::move(a));
        } else if (word == "end") {
            if (job == nullptr)
                throw fail("`end` outside a job");
            job = nullptr;
        } else {
            throw fail("unknown line");
        }
    }
    if (job != nullptr)
        throw HostError(path + ": the last job has no `end`");
    return jobs;
}

std::vector<char> read_file(const std::string& path, std::size_t bytes)
{
    std::ifstream in(path, std::ios::binary);
    std::vector<char> data(bytes);
    if (!in || !in.read(data.data(), static_cast<std::streamsize>(bytes)) || in.peek() != EOF)
        throw HostError(path + " does not hold exactly " + std::to_string(bytes) + " bytes");
    return data;
}

std::set<int> devices_of(const Job& job, int launch_device)
{
    std::set<int> devices{launch_device};
    for (const Arg& a : job.args)
        if (a.array)
            devices.insert(a.device);
    return devices;
}

void upload(Job& job, const std::string& dir, int launch_device)
{
    for (Arg& a : job.args) {
        if (!a.array)
            continue;
        const std::vector<char> host = read_file(dir + "/" + a.file, a.bytes());
        a.memory = std::make_unique<DeviceBuffer>(a.bytes(), a.device);
        DeviceGuard on(a.device);
        cuda_check(cudaMemcpy(a.memory->get(), host.data(), a.bytes(), cudaMemcpyHostToDevice),
                   "uploading `" + a.name + "`");
    }
    for (int device : devices_of(job, launch_device)) {
        DeviceGuard on(device);
        cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the uploads");
    }
}

void download(const Job& job, const std::string& out_dir)
{
    for (const Arg& a : job.args) {
        if (!a.array)
            continue;
        std::vector<char> host(a.bytes());
        {
            DeviceGuard on(a.device);
            cuda_check(cudaMemcpy(host.data(), a.memory->get(), a.bytes(), cudaMemcpyDeviceToHost),
                       "downloading `" + a.name + "`");
        }
        const std::string path = out_dir + "/" + job.id + "." + a.name + ".bin";
        std::ofstream file(path, std::ios::binary);
        if (!file.write(host.data(), static_cast<std::streamsize>(host.size())))
            throw HostError("cannot write " + path);
    }
}

// ----------------------------------------------------------------------------- running a job

struct Options {
    std::string jobs;
    std::string out;
    int device = 0;
    int current = -1;   // -1: the launch device
    bool from_thread = false;
    bool list = false;
};

struct Outcome {
    int status = 0;
    std::string message;
};

/// Run the kernel's runner on this thread, or on a fresh one: a thread that never called the CUDA
/// runtime has no current context, so the C ABI must use the arguments' device by itself.
void launch(const Job& job, Runner run, void* stream, bool from_thread)
{
    if (!from_thread) {
        run(job, stream);
        return;
    }
    std::exception_ptr error;
    std::thread worker([&] {
        try {
            run(job, stream);
        } catch (...) {
            error = std::current_exception();
        }
    });
    worker.join();
    if (error)
        std::rethrow_exception(error);
}

Outcome run_job(Job& job, const Options& opt, const std::string& dir, cudaStream_t stream)
{
    const auto runner = runners().find(job.kernel);
    if (runner == runners().end())
        return {kHostError, "this host has no runner for kernel `" + job.kernel + "`"};
    try {
        upload(job, dir, opt.device);
    } catch (const std::exception& e) {
        return {kHostError, e.what()};
    }
    Outcome outcome;
    try {
        cuda_check(cudaSetDevice(opt.current), "cudaSetDevice(" + std::to_string(opt.current) + ")");
        launch(job, runner->second, static_cast<void*>(stream), opt.from_thread);
    } catch (const buildtile::Error& e) {
        outcome = {e.code(), e.what()};
    } catch (const std::exception& e) {
        outcome = {kHostError, e.what()};
    }
    // wait for whatever the job queued, on every device it touched, then read every argument back
    try {
        cuda_check(cudaSetDevice(opt.device), "cudaSetDevice");
        cuda_check(cudaStreamSynchronize(stream), "the kernel (cudaStreamSynchronize)");
        for (int device : devices_of(job, opt.device)) {
            DeviceGuard on(device);
            cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize on device " + std::to_string(device));
        }
        download(job, opt.out);
    } catch (const std::exception& e) {
        return {kCudaFault, e.what()};
    }
    for (Arg& a : job.args)
        a.memory.reset();
    return outcome;
}

std::string one_line(const std::string& text)
{
    std::string line;
    for (char c : text)
        line += c == '\n' ? std::string("\\n") : c == '\t' ? std::string(" ") : std::string(1, c);
    return line;
}

Options parse(int argc, char** argv)
{
    Options opt;
    std::string from = "main";
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        const auto value = [&]() -> std::string {
            if (i + 1 >= argc)
                throw HostError(flag + " needs a value");
            return argv[++i];
        };
        if (flag == "--list")
            opt.list = true;
        else if (flag == "--jobs")
            opt.jobs = value();
        else if (flag == "--out")
            opt.out = value();
        else if (flag == "--device")
            opt.device = std::stoi(value());
        else if (flag == "--current")
            opt.current = std::stoi(value());
        else if (flag == "--launch-from")
            from = value();
        else
            throw HostError("unknown option " + flag);
    }
    if (from != "main" && from != "thread")
        throw HostError("--launch-from takes main or thread");
    opt.from_thread = from == "thread";
    if (opt.current < 0)
        opt.current = opt.device;
    if (!opt.list && (opt.jobs.empty() || opt.out.empty()))
        throw HostError("usage: conformance_host --list | --jobs FILE --out DIR [--device N] [--current M] "
                        "[--launch-from main|thread]");
    return opt;
}

}  // namespace

int main(int argc, char** argv)
{
    try {
        const Options opt = parse(argc, argv);
        if (opt.list) {
            for (const auto& entry : runners())
                std::printf("%s\n", entry.first.c_str());
            return 0;
        }
        example_kernels::check_abi();
        std::vector<Job> jobs = read_jobs(opt.jobs);
        const std::size_t slash = opt.jobs.find_last_of('/');
        const std::string dir = slash == std::string::npos ? "." : opt.jobs.substr(0, slash);

        int count = 0;
        cuda_check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
        for (int device : {opt.device, opt.current})
            if (device < 0 || device >= count)
                throw HostError("device " + std::to_string(device) + " does not exist: this machine has " +
                                std::to_string(count) + " CUDA device(s)");
        for (Job& job : jobs)
            for (Arg& a : job.args)
                if (a.array && a.device == kLaunchDevice)
                    a.device = opt.device;
        for (const Job& job : jobs)
            for (const Arg& a : job.args)
                if (a.array && (a.device < 0 || a.device >= count))
                    throw HostError("job " + job.id + " puts `" + a.name + "` on device " + std::to_string(a.device) +
                                    ", which does not exist");

        cuda_check(cudaSetDevice(opt.device), "cudaSetDevice");
        cudaStream_t stream = nullptr;
        cuda_check(cudaStreamCreate(&stream), "cudaStreamCreate");
        std::ofstream results(opt.out + "/results.txt");
        if (!results)
            throw HostError("cannot write " + opt.out + "/results.txt");
        for (Job& job : jobs) {
            const Outcome outcome = run_job(job, opt, dir, stream);
            results << job.id << '\t' << outcome.status << '\t' << one_line(outcome.message) << '\n' << std::flush;
            if (outcome.status == kCudaFault)
                return 3;  // the context may be unusable: stop here
        }
        cudaSetDevice(opt.device);
        cudaStreamDestroy(stream);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "conformance_host: %s\n", e.what());
        return 2;
    }
}
