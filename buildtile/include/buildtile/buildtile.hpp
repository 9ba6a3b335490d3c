// The C++ layer shared by every buildtile package's kernels.hpp (C++17,
// header-only): the error type, launch configuration, and non-owning views
// that describe device memory as DLPack tensors.
//
//     #include "example_kernels/kernels.hpp"
//
//     float *a, *b, *c;                          // cudaMalloc'd, n floats each
//     using buildtile::DeviceSpan;
//     namespace ops = example_kernels::ops;
//     ops::vecadd({buildtile::cover(n, ops::vecadd_block), stream},
//                 DeviceSpan<const float>(a, n), DeviceSpan<const float>(b, n),
//                 DeviceSpan<float>(c, n));       // throws buildtile::Error
//
// Tile kernels take move-only TileTensors and Partitions, and give them back:
//
//     namespace tiles = example_kernels::tiles;
//     buildtile::TileTensor<float, 1> x(a, {n}), y(b, {n}), z(c, {n});
//     auto zp = buildtile::partition(std::move(z), {128});
//     auto [x2, y2, z2] = tiles::add(std::move(x), std::move(y), std::move(zp)).sync_on(stream);
//     // x, y, zp are moved-from: using them throws buildtile::Error (BT0382)
#ifndef BUILDTILE_BUILDTILE_HPP
#define BUILDTILE_BUILDTILE_HPP

#include <array>
#include <complex>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "buildtile/abi.h"

#if __cplusplus < 201703L && !(defined(_MSVC_LANG) && _MSVC_LANG >= 201703L)
#error "buildtile's C++ headers need C++17 or newer"
#endif

namespace buildtile {

/// A refused or failed launch: code() is the status (600 for error[BT0600]),
/// what() the message, as the Python host reports it.
class Error : public std::runtime_error {
public:
    Error(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
    int code() const noexcept { return code_; }

private:
    int code_;
};

namespace detail {
inline std::string code_text(int status)
{
    std::string digits = std::to_string(status);
    return "error[BT" + std::string(digits.size() < 4 ? 4 - digits.size() : 0, '0') + digits + "]";
}
}  // namespace detail

/// Throws Error unless `status` is BT_OK; `last_error` is the package's
/// <package>_last_error, read only on failure.
inline void check(int status, const char* (*last_error)())
{
    if (status == BT_OK)
        return;
    const char* message = last_error != nullptr ? last_error() : nullptr;
    throw Error(status, message != nullptr && *message != '\0'
                            ? std::string(message)
                            : detail::code_text(status) + ": launch failed (no message was recorded)");
}

/// Throws Error (BT0622) when a library reports another kernel ABI version
/// than the headers it is used with.
inline void check_abi_version(int library_version, const char* package)
{
    if (library_version == BUILDTILE_ABI_VERSION)
        return;
    throw Error(BT_ERR_ABI, detail::code_text(BT_ERR_ABI) + ": the library of " + package +
                                " speaks kernel ABI " + std::to_string(library_version) +
                                ", but its headers ABI " + std::to_string(BUILDTILE_ABI_VERSION) +
                                "\n  = help: use the headers installed with the library (python -m " +
                                package + " --include-dir)");
}

/// 16-bit floats cross the ABI as their bits.
struct f16 {
    std::uint16_t bits;
};
struct bf16 {
    std::uint16_t bits;
};

/// The DLPack dtype of an element type; specialise it for your own
/// layout-compatible types (e.g. a half type of another library).
template <class T>
struct dtype_of;
template <class T>
struct dtype_of<const T> : dtype_of<T> {};

#define BUILDTILE_DTYPE(type, code, bits)                                                      \
    template <>                                                                                \
    struct dtype_of<type> {                                                                    \
        static constexpr DLDataType value{static_cast<std::uint8_t>(code), bits, 1};           \
    }
BUILDTILE_DTYPE(bool, kDLBool, 8);
BUILDTILE_DTYPE(std::int8_t, kDLInt, 8);
BUILDTILE_DTYPE(std::int16_t, kDLInt, 16);
BUILDTILE_DTYPE(std::int32_t, kDLInt, 32);
BUILDTILE_DTYPE(std::int64_t, kDLInt, 64);
BUILDTILE_DTYPE(std::uint8_t, kDLUInt, 8);
BUILDTILE_DTYPE(std::uint16_t, kDLUInt, 16);
BUILDTILE_DTYPE(std::uint32_t, kDLUInt, 32);
BUILDTILE_DTYPE(std::uint64_t, kDLUInt, 64);
BUILDTILE_DTYPE(f16, kDLFloat, 16);
BUILDTILE_DTYPE(bf16, kDLBfloat, 16);
BUILDTILE_DTYPE(float, kDLFloat, 32);
BUILDTILE_DTYPE(double, kDLFloat, 64);
BUILDTILE_DTYPE(std::complex<float>, kDLComplex, 64);
BUILDTILE_DTYPE(std::complex<double>, kDLComplex, 128);
#if defined(__CUDA_FP16_TYPES_EXIST__)
BUILDTILE_DTYPE(__half, kDLFloat, 16);
#endif
#if defined(__CUDA_BF16_TYPES_EXIST__)
BUILDTILE_DTYPE(__nv_bfloat16, kDLBfloat, 16);
#endif
#undef BUILDTILE_DTYPE

/// Whether T is a record: a C struct of a package's kernels.h (its kernels.hpp says so for
/// each), which crosses the ABI as its bytes. DeviceSpan<T> and DeviceTensor<T, R> of a
/// record describe their memory as a uint8 DLTensor with one more axis, of sizeof(T) bytes.
template <class T>
struct is_record : std::false_type {};
template <class T>
struct is_record<const T> : is_record<T> {};

/// Three extents (x, y, z): a grid in blocks, or a block in threads.
struct Dim3 {
    std::uint32_t x = 1, y = 1, z = 1;
};

namespace detail {
constexpr std::uint32_t blocks_for(std::int64_t extent, std::uint32_t block)
{
    // at least one block, so an empty launch is still a valid grid
    return extent <= 0 ? 1u : static_cast<std::uint32_t>((extent + block - 1) / block);
}
}  // namespace detail

/// The smallest grid of `block`-shaped blocks covering nx (x ny (x nz)) threads.
constexpr Dim3 cover(std::int64_t nx, const Dim3& block)
{
    return {detail::blocks_for(nx, block.x), 1, 1};
}
constexpr Dim3 cover(std::int64_t nx, std::int64_t ny, const Dim3& block)
{
    return {detail::blocks_for(nx, block.x), detail::blocks_for(ny, block.y), 1};
}
constexpr Dim3 cover(std::int64_t nx, std::int64_t ny, std::int64_t nz, const Dim3& block)
{
    return {detail::blocks_for(nx, block.x), detail::blocks_for(ny, block.y), detail::blocks_for(nz, block.z)};
}

/// How to launch: the grid, the stream (a cudaStream_t or CUstream; nullptr
/// for the legacy default stream) and dynamic shared memory (0: the
/// contract's).
struct Launch {
    Dim3 grid;
    void* stream = nullptr;
    std::uint32_t shared_mem = 0;

    Launch(const Dim3& grid_, void* stream_ = nullptr, std::uint32_t shared_mem_ = 0)
        : grid(grid_), stream(stream_), shared_mem(shared_mem_)
    {
    }

    bt_launch_config config() const { return bt_launch_config{{grid.x, grid.y, grid.z}, shared_mem, stream}; }
};

namespace detail {
/// The DLPack dtype a view of T's elements has: a record's bytes are uint8.
template <class T>
constexpr DLDataType element_dtype()
{
    if constexpr (is_record<T>::value)
        return DLDataType{static_cast<std::uint8_t>(kDLUInt), 8, 1};
    else
        return dtype_of<T>::value;
}

/// The extra, last axis a view's DLTensor has: a record's bytes (none for other types).
template <class T>
constexpr int byte_axes = is_record<T>::value ? 1 : 0;

template <class T>
DLTensor make_tensor(T* data, int device, std::int32_t ndim, const std::int64_t* shape,
                     const std::int64_t* strides)
{
    DLTensor t{};
    t.data = const_cast<void*>(static_cast<const void*>(data));
    t.device = DLDevice{kDLCUDA, device};
    t.ndim = ndim;
    t.dtype = element_dtype<T>();
    // DLPack's fields are not const; the launchers only read them
    t.shape = const_cast<std::int64_t*>(shape);
    t.strides = const_cast<std::int64_t*>(strides);
    t.byte_offset = 0;
    return t;
}
}  // namespace detail

/// A non-owning view of `size` contiguous elements of device memory (e.g.
/// from cudaMalloc) on CUDA device `device`. DeviceSpan<const T> is what a
/// kernel only reads; a DeviceSpan<T> converts to it. A span of records
/// (is_record<T>) is a pointer and a count of structs.
template <class T>
class DeviceSpan {
public:
    DeviceSpan(T* data, std::int64_t size, int device = 0)
        : data_(data), extents_{size, static_cast<std::int64_t>(sizeof(T))}, device_(device)
    {
    }

    template <class U, class = std::enable_if_t<std::is_same_v<const U, T>>>
    DeviceSpan(const DeviceSpan<U>& other) : DeviceSpan(other.data(), other.size(), other.device())
    {
    }

    T* data() const { return data_; }
    std::int64_t size() const { return extents_[0]; }
    int device() const { return device_; }

    /// The view as a DLTensor (of records: their bytes, shape (size, sizeof(T))); it points
    /// into this object, so keep the view alive while it is used.
    DLTensor dl() const { return detail::make_tensor(data_, device_, 1 + detail::byte_axes<T>, extents_, nullptr); }

private:
    T* data_;
    std::int64_t extents_[2]; // the count, then (for records) the bytes of one
    int device_;
};

/// A non-owning N-d view of device memory: shape, and strides in elements
/// (compact row-major when not given).
template <class T, int Rank>
class DeviceTensor {
    static_assert(Rank >= 0 && Rank <= 8, "buildtile tensors have rank 0 to 8");

public:
    using Extents = std::array<std::int64_t, Rank>;

    DeviceTensor(T* data, const Extents& shape, int device = 0)
        : DeviceTensor(data, shape, compact(shape), device)
    {
    }
    DeviceTensor(T* data, const Extents& shape, const Extents& strides, int device = 0)
        : data_(data), shape_(shape), strides_(strides), device_(device)
    {
        // what dl() describes: the extents and strides, then for records the axis of their bytes
        constexpr std::int64_t unit = detail::byte_axes<T> ? static_cast<std::int64_t>(sizeof(T)) : 1;
        for (int d = 0; d < Rank; ++d) {
            dl_shape_[d] = shape_[d];
            dl_strides_[d] = strides_[d] * unit;
        }
        dl_shape_[Rank] = unit;
        dl_strides_[Rank] = 1;
    }

    template <class U, class = std::enable_if_t<std::is_same_v<const U, T>>>
    DeviceTensor(const DeviceTensor<U, Rank>& other)
        : DeviceTensor(other.data(), other.shape(), other.strides(), other.device())
    {
    }

    T* data() const { return data_; }
    const Extents& shape() const { return shape_; }
    const Extents& strides() const { return strides_; }
    int device() const { return device_; }

    /// The view as a DLTensor (of records: their bytes, one more axis of sizeof(T), strides in
    /// bytes); it points into this object, so keep the view alive while it is used.
    DLTensor dl() const
    {
        return detail::make_tensor(data_, device_, Rank + detail::byte_axes<T>, dl_shape_.data(), dl_strides_.data());
    }

private:
    static Extents compact(const Extents& shape)
    {
        Extents strides{};
        std::int64_t step = 1;
        for (int d = Rank - 1; d >= 0; --d) {
            strides[d] = step;
            step *= shape[d];
        }
        return strides;
    }

    T* data_;
    Extents shape_;
    Extents strides_;
    int device_;
    std::array<std::int64_t, Rank + 1> dl_shape_{}, dl_strides_{};
};

// --------------------------------------------------------------------------
// Tile kernels: tensors owned by one handle at a time
// --------------------------------------------------------------------------

template <class T, int Rank>
class TileTensor;
template <class T, int Rank>
class Partition;

namespace detail {
/// How generated wrappers move a handle while recording where it went
/// (a string literal), so a later use can say so.
struct tile_access {
    template <class Handle>
    static Handle take(Handle&& handle, const char* into)
    {
        static_assert(!std::is_reference_v<Handle>, "take() moves from an rvalue");
        Handle taken(std::move(handle));
        mark(handle, into);
        return taken;
    }

    template <class T, int Rank>
    static void mark(TileTensor<T, Rank>& t, const char* into) noexcept
    {
        t.moved_into_ = into;
    }

    template <class T, int Rank>
    static void mark(Partition<T, Rank>& p, const char* into) noexcept
    {
        p.tensor_.moved_into_ = into;
    }

    /// Throws Error (BT0382) when `t` was moved from; `what` names the handle used.
    template <class T, int Rank>
    static void check_live(const TileTensor<T, Rank>& t, const char* what)
    {
        if (t.moved_into_ != nullptr)
            throw Error(BT_ERR_MOVED, code_text(BT_ERR_MOVED) + ": use of moved value: a " + what +
                                          " was moved into " + t.moved_into_ +
                                          "\n  = help: use what it was moved into; a launch gives its tensors "
                                          "back from .sync_on(stream)");
    }
};

template <class Handle>
Handle take(Handle&& handle, const char* into)
{
    return tile_access::take(std::forward<Handle>(handle), into);
}

inline std::string extents_text(const std::int64_t* values, int n)
{
    std::string text = "(";
    for (int d = 0; d < n; ++d)
        text += (d ? ", " : "") + std::to_string(values[d]);
    return text + (n == 1 ? ",)" : ")");
}
}  // namespace detail

/// A view of device memory (data, shape, compact row-major strides) owned
/// by exactly one handle: it cannot be copied, and moving it (into a Tile
/// launch, a partition, or another TileTensor) leaves the source unusable:
/// every accessor of a moved-from TileTensor throws Error with code 382
/// (error[BT0382]) naming where it went. It owns the view, not the memory.
template <class T, int Rank>
class TileTensor {
    static_assert(!std::is_const_v<T>, "a TileTensor owns its elements: use TileTensor<T>, not TileTensor<const T>");
    static_assert(Rank >= 0 && Rank <= 8, "buildtile tensors have rank 0 to 8");

public:
    using element_type = T;
    using Extents = std::array<std::int64_t, Rank>;
    static constexpr int rank = Rank;

    TileTensor(T* data, const Extents& shape, int device = 0)
        : data_(data), shape_(shape), strides_(compact(shape)), device_(device)
    {
    }

    TileTensor(const TileTensor&) = delete;
    TileTensor& operator=(const TileTensor&) = delete;

    TileTensor(TileTensor&& other) noexcept
        : data_(other.data_), shape_(other.shape_), strides_(other.strides_), device_(other.device_),
          moved_into_(other.moved_into_)
    {
        other.moved_into_ = "another TileTensor (std::move)";
    }

    TileTensor& operator=(TileTensor&& other) noexcept
    {
        if (this != &other) {
            data_ = other.data_;
            shape_ = other.shape_;
            strides_ = other.strides_;
            device_ = other.device_;
            moved_into_ = other.moved_into_;
            other.moved_into_ = "another TileTensor (std::move)";
        }
        return *this;
    }

    ~TileTensor() = default;

    /// Whether this handle was moved from (the one question it still answers then).
    bool moved() const noexcept { return moved_into_ != nullptr; }

    T* data() const
    {
        live();
        return data_;
    }
    const Extents& shape() const
    {
        live();
        return shape_;
    }
    int device() const
    {
        live();
        return device_;
    }

    /// The view as a DLTensor; it points into this object, so keep it alive while it is used.
    DLTensor dl() const
    {
        live();
        return detail::make_tensor(data_, device_, Rank, shape_.data(), strides_.data());
    }

private:
    friend struct detail::tile_access;

    void live() const { detail::tile_access::check_live(*this, "TileTensor"); }

    static Extents compact(const Extents& shape)
    {
        Extents strides{};
        std::int64_t step = 1;
        for (int d = Rank - 1; d >= 0; --d) {
            strides[d] = step;
            step *= shape[d];
        }
        return strides;
    }

    T* data_;
    Extents shape_;
    Extents strides_;
    int device_;
    const char* moved_into_ = nullptr;  // where it went; nullptr while it is live
};

/// A TileTensor cut into tiles of `tile_shape`: what a tile.Out parameter
/// takes. Move-only, like the tensor it owns; make one with partition().
template <class T, int Rank>
class Partition {
public:
    using Extents = typename TileTensor<T, Rank>::Extents;

    Partition(TileTensor<T, Rank>&& tensor, const Extents& tile_shape, const bt_tile_schedule& schedule = {})
        : tensor_(detail::take(std::move(check(tensor, tile_shape, schedule)), "a partition (buildtile::partition)")),
          tile_shape_(tile_shape), schedule_(schedule)
    {
    }

    /// No tile shape: the launch takes the compiled specialization ranked best for the extents
    /// (the rule in the package manifest, as the Python host applies it); tile_shape() is zeros.
    explicit Partition(TileTensor<T, Rank>&& tensor, const bt_tile_schedule& schedule = {})
        : tensor_(detail::take(std::move(check(tensor, Extents{}, schedule, true)), "a partition (buildtile::partition)")),
          tile_shape_{}, schedule_(schedule), chosen_at_launch_(true)
    {
    }

    /// The order its tiles are visited in, and whether the launch is persistent (abi.h).
    const bt_tile_schedule& schedule() const
    {
        live();
        return schedule_;
    }

    bool moved() const noexcept { return tensor_.moved(); }
    bool chosen_at_launch() const noexcept { return chosen_at_launch_; }
    const Extents& shape() const
    {
        live();
        return tensor_.shape();
    }
    const Extents& tile_shape() const
    {
        live();
        return tile_shape_;
    }

    /// Tiles along each axis (a ragged last tile counts).
    Extents num_tiles() const
    {
        Extents counts{};
        if (chosen_at_launch_)
            throw Error(BT_ERR_CONTRACT, detail::code_text(BT_ERR_CONTRACT) +
                                             ": a partition without a tile shape has its tiles chosen at launch");
        for (int d = 0; d < Rank; ++d)
            counts[d] = (shape()[d] + tile_shape_[d] - 1) / tile_shape_[d];
        return counts;
    }

    DLTensor dl() const
    {
        live();
        return tensor_.dl();
    }

    /// The tensor back, whole; this partition is moved from.
    TileTensor<T, Rank> into_tensor() &&
    {
        live();
        return detail::take(std::move(tensor_), "a TileTensor (Partition::into_tensor)");
    }

private:
    friend struct detail::tile_access;

    void live() const { detail::tile_access::check_live(tensor_, "Partition"); }

    static TileTensor<T, Rank>& check(TileTensor<T, Rank>& tensor, const Extents& tile_shape,
                                      const bt_tile_schedule& schedule, bool chosen_at_launch = false)
    {
        tensor.shape();  // partitioning a moved-from tensor throws BT0382
        for (int d = 0; d < Rank && !chosen_at_launch; ++d)
            if (tile_shape[d] < 1)
                throw Error(BT_ERR_CONTRACT, detail::code_text(BT_ERR_CONTRACT) +
                                                 ": tile extents must be at least 1, got tile shape " +
                                                 detail::extents_text(tile_shape.data(), Rank));
        const char* bad = nullptr;  // the launcher words the same refusals (bt_tile.c)
        if (schedule.order < BT_TILE_ORDER_COMPILED || schedule.order > BT_TILE_ORDER_GROUPED)
            bad = "unknown tile order: `order` is not a bt_tile_order";
        else if (schedule.order != BT_TILE_ORDER_GROUPED && schedule.group != 0)
            bad = "`group` is an option of the grouped order";
        else if (schedule.group < 0)
            bad = "`group` must be at least 1 (tile rows per band)";
        else if (schedule.order == BT_TILE_ORDER_GROUPED && Rank != 2)
            bad = "the grouped order is an order of 2-D tile grids";
        else if (schedule.persistent != 0 && schedule.persistent != 1)
            bad = "`persistent` is 1 or 0";
        if (bad != nullptr)
            throw Error(BT_ERR_CONTRACT, detail::code_text(BT_ERR_CONTRACT) + ": " + bad);
        return tensor;
    }

    TileTensor<T, Rank> tensor_;
    Extents tile_shape_;
    bt_tile_schedule schedule_;
    bool chosen_at_launch_ = false;
};

/// `buildtile::partition(std::move(z), {128})`: z cut into tiles of 128 (z is moved from).
/// The shape is not deduced from (T and Rank come from the tensor), so a braced list and a
/// `std::array<std::int64_t, N>` variable both work.
/// A schedule (`{BT_TILE_ORDER_GROUPED, 8, 0}`, `{BT_TILE_ORDER_ROW, 0, 1}`) chooses how a launch
/// visits the tiles; a bad one throws Error (BT0600) here.
template <class T, int Rank>
Partition<T, Rank> partition(TileTensor<T, Rank>&& tensor, const typename TileTensor<T, Rank>::Extents& tile_shape,
                             const bt_tile_schedule& schedule = {})
{
    return Partition<T, Rank>(std::move(tensor), tile_shape, schedule);
}

/// `buildtile::partition(std::move(z))`: z cut into the tiles of the compiled specialization the
/// launch ranks best for z's extents.
template <class T, int Rank>
Partition<T, Rank> partition(TileTensor<T, Rank>&& tensor)
{
    return Partition<T, Rank>(std::move(tensor));
}

}  // namespace buildtile

#endif  // BUILDTILE_BUILDTILE_HPP
