// Runs example_kernels' vecadd, saxpy and matadd from C++ on ragged sizes,
// checks each against the CPU, and shows launches the C ABI refuses.
//
// Prints one line per kernel, e.g. "vecadd n=1000003 max_abs_err=0 OK", and
// exits non-zero on a mismatch. With --dump DIR it also writes every input
// and output (float32, row-major) as DIR/<kernel>.<arg>.f32 for comparison.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "example_kernels/kernels.hpp"

namespace ops = example_kernels::ops;
using buildtile::DeviceSpan;
using buildtile::DeviceTensor;

namespace {

void cuda_check(cudaError_t status, const char* what)
{
    if (status != cudaSuccess)
        throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// Device memory for n floats, freed on scope exit.
class DeviceBuffer {
public:
    explicit DeviceBuffer(std::size_t n) : n_(n)
    {
        cuda_check(cudaMalloc(reinterpret_cast<void**>(&ptr_), std::max<std::size_t>(n, 1) * sizeof(float)),
                   "cudaMalloc");
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer() { cudaFree(ptr_); }

    float* get() const { return ptr_; }
    std::int64_t size() const { return static_cast<std::int64_t>(n_); }

    void upload(const std::vector<float>& host, cudaStream_t stream)
    {
        cuda_check(cudaMemcpyAsync(ptr_, host.data(), n_ * sizeof(float), cudaMemcpyHostToDevice, stream),
                   "cudaMemcpyAsync");
    }
    std::vector<float> download(cudaStream_t stream) const
    {
        std::vector<float> host(n_);
        cuda_check(cudaMemcpyAsync(host.data(), ptr_, n_ * sizeof(float), cudaMemcpyDeviceToHost, stream),
                   "cudaMemcpyAsync");
        cuda_check(cudaStreamSynchronize(stream), "kernel");
        return host;
    }

private:
    float* ptr_ = nullptr;
    std::size_t n_;
};

std::vector<float> random_values(std::size_t n, std::mt19937& rng)
{
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v)
        x = dist(rng);
    return v;
}

double max_abs_err(const std::vector<float>& got, const std::vector<float>& want)
{
    double err = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i)
        err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]));
    return err;
}

// "OK" when err <= tolerance; prints the kernel's line.
bool report(const std::string& what, double err, double tolerance)
{
    const bool ok = err <= tolerance;
    std::printf("%s max_abs_err=%g %s\n", what.c_str(), err, ok ? "OK" : "MISMATCH");
    return ok;
}

void dump(const std::string& dir, const std::string& name, const std::vector<float>& values)
{
    if (dir.empty())
        return;
    std::ofstream out(dir + "/" + name + ".f32", std::ios::binary);
    out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
}

}  // namespace

int main(int argc, char** argv)
{
    const std::string dump_dir = argc == 3 && std::string(argv[1]) == "--dump" ? argv[2] : "";
    try {
        example_kernels::check_abi();
        cudaStream_t stream;
        cuda_check(cudaStreamCreate(&stream), "cudaStreamCreate");
        std::mt19937 rng(2024);
        bool ok = true;

        // vecadd: c = a + b, one thread per element, on a size no block divides
        const std::int64_t n = 1000003;
        const auto a = random_values(n, rng), b = random_values(n, rng);
        DeviceBuffer da(n), db(n), dc(n);
        da.upload(a, stream);
        db.upload(b, stream);
        const buildtile::Launch over_n{buildtile::cover(n, ops::vecadd_block), stream};
        ops::vecadd(over_n, DeviceSpan<const float>(da.get(), n), DeviceSpan<const float>(db.get(), n),
                    DeviceSpan<float>(dc.get(), n));
        const auto c = dc.download(stream);
        std::vector<float> want(n);
        for (std::int64_t i = 0; i < n; ++i)
            want[i] = a[i] + b[i];
        ok &= report("vecadd n=" + std::to_string(n), max_abs_err(c, want), 0.0);
        dump(dump_dir, "vecadd.a", a);
        dump(dump_dir, "vecadd.b", b);
        dump(dump_dir, "vecadd.c", c);

        // saxpy: out = alpha * x + y (the GPU may fuse the multiply-add: a rounding apart)
        const float alpha = 2.5f;
        DeviceBuffer dout(n);
        ops::saxpy(over_n, alpha, DeviceSpan<const float>(da.get(), n), DeviceSpan<const float>(db.get(), n),
                   DeviceSpan<float>(dout.get(), n));
        const auto out = dout.download(stream);
        for (std::int64_t i = 0; i < n; ++i)
            want[i] = alpha * a[i] + b[i];
        ok &= report("saxpy n=" + std::to_string(n) + " alpha=2.5", max_abs_err(out, want), 1e-6);
        dump(dump_dir, "saxpy.out", out);

        // matadd: c = a + b on a ragged 2-D shape; b is stored column-major (a
        // strided view), c row-major. index_2d's col runs along x, row along y.
        const std::int64_t rows = 1023, cols = 517;
        const auto ma = random_values(rows * cols, rng), mb = random_values(rows * cols, rng);
        std::vector<float> mb_columns(rows * cols);
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t k = 0; k < cols; ++k)
                mb_columns[k * rows + r] = mb[r * cols + k];
        DeviceBuffer dma(rows * cols), dmb(rows * cols), dmc(rows * cols);
        dma.upload(ma, stream);
        dmb.upload(mb_columns, stream);
        ops::matadd({buildtile::cover(cols, rows, ops::matadd_block), stream},
                    DeviceTensor<const float, 2>(dma.get(), {rows, cols}),
                    DeviceTensor<const float, 2>(dmb.get(), {rows, cols}, {1, rows}),
                    DeviceTensor<float, 2>(dmc.get(), {rows, cols}));
        const auto mc = dmc.download(stream);
        std::vector<float> mwant(rows * cols);
        for (std::int64_t i = 0; i < rows * cols; ++i)
            mwant[i] = ma[i] + mb[i];
        ok &= report("matadd shape=(" + std::to_string(rows) + ", " + std::to_string(cols) + ")",
                     max_abs_err(mc, mwant), 0.0);
        dump(dump_dir, "matadd.a", ma);
        dump(dump_dir, "matadd.b", mb);
        dump(dump_dir, "matadd.c", mc);

        // Launches the C ABI refuses before anything is queued.
        const auto refused = [&](const char* what, int code, auto&& launch) {
            try {
                launch();
                std::printf("%s was NOT refused\n", what);
                ok = false;
            } catch (const buildtile::Error& e) {
                std::printf("refused %s: %s\n", what, e.what());
                ok &= e.code() == code;
            }
        };
        refused("vecadd with an output shorter than its inputs", 600, [&] {
            ops::vecadd(over_n, DeviceSpan<const float>(da.get(), n), DeviceSpan<const float>(db.get(), n),
                        DeviceSpan<float>(dc.get(), n - 1));
        });
        refused("vecadd writing into its own input", 502, [&] {
            ops::vecadd(over_n, DeviceSpan<const float>(da.get(), n), DeviceSpan<const float>(db.get(), n),
                        DeviceSpan<float>(da.get(), n));
        });

        cuda_check(cudaStreamDestroy(stream), "cudaStreamDestroy");
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 2;
    }
}
