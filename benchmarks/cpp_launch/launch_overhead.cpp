// Host time per launch of example_kernels' vecadd: the buildtile C++ wrapper (argument
// checks, aliasing, contract, then cuLaunchKernel through the C shim) against a raw
// cuLaunchKernel of the same cubin with prebuilt arguments. Batches of launches stay
// under the launch queue's depth and are timed without waiting for the GPU; the two take
// turns batch by batch. Every raw launch's status is checked, and every batch's work: the
// output is poisoned before the batch and compared with a + b after it (both untimed).
// The coarsening factor (logical blocks per launched block) comes from the kernel's
// manifest record, as the C shim reads it.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "example_kernels/kernels.hpp"

namespace {

void check(CUresult r, const char* what)
{
    if (r != CUDA_SUCCESS) {
        const char* msg = nullptr;
        cuGetErrorString(r, &msg);
        std::fprintf(stderr, "%s: %s\n", what, msg ? msg : "?");
        std::exit(1);
    }
}

void check_rt(cudaError_t r, const char* what)
{
    if (r != cudaSuccess) {
        std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(r));
        std::exit(1);
    }
}

// The output of a batch: poisoned before it, compared with the expected sums after it.
struct Output {
    float* device;
    std::vector<float> expected;
    cudaStream_t stream;

    void poison() const
    {
        check_rt(cudaMemsetAsync(device, 0xFF, expected.size() * sizeof(float), stream), "cudaMemsetAsync");
        check_rt(cudaStreamSynchronize(stream), "poison");
    }

    void verify(const char* who) const
    {
        std::vector<float> got(expected.size());
        check_rt(cudaStreamSynchronize(stream), who);
        check_rt(cudaMemcpy(got.data(), device, got.size() * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
        if (std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)) != 0) {
            std::fprintf(stderr, "%s: the output of a timed batch is not a + b\n", who);
            std::exit(1);
        }
    }
};

template <class F>
double us_per_launch(F&& launch, int per_batch, const Output& out, const char* who)
{
    out.poison();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < per_batch; ++i)
        launch();
    const auto t1 = std::chrono::steady_clock::now();
    out.verify(who);
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / per_batch;
}

double median(std::vector<double> samples)
{
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
}

// Median host time per launch of `first` and `second`, timed in alternating batches (the order
// swaps every batch), so that a slow spell of the machine hits both alike.
template <class F, class G>
std::pair<double, double> median_us_per_launch(F&& first, G&& second, int batches, int per_batch, const Output& out)
{
    std::vector<double> a, b;
    for (int batch = 0; batch < batches; ++batch) {
        if (batch % 2 == 0) {
            a.push_back(us_per_launch(first, per_batch, out, "raw cuLaunchKernel"));
            b.push_back(us_per_launch(second, per_batch, out, "buildtile C++ wrapper"));
        } else {
            b.push_back(us_per_launch(second, per_batch, out, "buildtile C++ wrapper"));
            a.push_back(us_per_launch(first, per_batch, out, "raw cuLaunchKernel"));
        }
    }
    cudaDeviceSynchronize();
    return {median(a), median(b)};
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s VECADD_CUBIN COARSEN SYMBOL   (all from the kernel's manifest record)\n",
                     argv[0]);
        return 2;
    }
    const long coarsen = std::strtol(argv[2], nullptr, 10);
    if (coarsen < 1 || coarsen > 64) {
        std::fprintf(stderr, "COARSEN must be 1 to 64, got %s\n", argv[2]);
        return 2;
    }
    const std::int64_t n = 4096;
    std::vector<float> ha(n), hb(n), sum(n);
    for (std::int64_t i = 0; i < n; ++i) {   // small integers: every sum is exact
        ha[i] = static_cast<float>(i % 97);
        hb[i] = static_cast<float>(3 * (i % 89));
        sum[i] = ha[i] + hb[i];
    }
    float *a = nullptr, *b = nullptr, *c = nullptr;
    check_rt(cudaMalloc(&a, n * sizeof(float)), "cudaMalloc");
    check_rt(cudaMalloc(&b, n * sizeof(float)), "cudaMalloc");
    check_rt(cudaMalloc(&c, n * sizeof(float)), "cudaMalloc");
    check_rt(cudaMemcpy(a, ha.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    check_rt(cudaMemcpy(b, hb.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    cudaStream_t stream;
    check_rt(cudaStreamCreate(&stream), "cudaStreamCreate");
    const Output out{c, sum, stream};

    namespace ops = example_kernels::ops;
    const buildtile::Launch launch{buildtile::cover(n, ops::vecadd_block), stream};
    const buildtile::DeviceSpan<const float> sa(a, n), sb(b, n);
    const buildtile::DeviceSpan<float> sc(c, n);
    auto ours = [&] { ops::vecadd(launch, sa, sb, sc); };

    std::ifstream file(argv[1], std::ios::binary);
    std::vector<char> image((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    CUmodule module;
    CUfunction fn;
    check(cuModuleLoadData(&module, image.data()), "cuModuleLoadData");
    check(cuModuleGetFunction(&fn, module, argv[3]), "cuModuleGetFunction");
    // the same parameters as ABI v1 gives them: pointer + length per slice, and, when the
    // kernel is coarsened, the logical grid last
    const std::int64_t blocks = (n + 255) / 256;
    CUdeviceptr pa = reinterpret_cast<CUdeviceptr>(a), pb = reinterpret_cast<CUdeviceptr>(b),
                pc = reinterpret_cast<CUdeviceptr>(c);
    std::int64_t len = n, logical = blocks;
    void* params[] = {&pa, &len, &pb, &len, &pc, &len, coarsen > 1 ? &logical : nullptr};
    const unsigned grid = static_cast<unsigned>((blocks + coarsen - 1) / coarsen);
    auto raw = [&] { check(cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, stream, params, nullptr), "cuLaunchKernel"); };

    for (int i = 0; i < 2000; ++i) {  // warm up: modules loaded, clocks up
        ours();
        raw();
    }
    const auto [t_raw, t_ours] = median_us_per_launch(raw, ours, 400, 500, out);
    std::printf("C++ launch overhead, vecadd (3 arrays, coarsened %ldx), host time per launch; "
                "every batch's output checked\n", coarsen);
    std::printf("raw cuLaunchKernel        %7.3f us\n", t_raw);
    std::printf("buildtile C++ wrapper     %7.3f us   %.3fx raw\n", t_ours, t_ours / t_raw);
    return 0;
}
