// Host time per launch of example_kernels' vecadd: the buildtile C++ wrapper (argument
// checks, aliasing, contract, then cuLaunchKernel through the C shim) against a raw
// cuLaunchKernel of the same cubin with prebuilt arguments. Batches of launches stay
// under the launch queue's depth and are timed without waiting for the GPU; the two take
// turns batch by batch.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
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

template <class F>
double us_per_launch(F&& launch, int per_batch)
{
    cudaDeviceSynchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < per_batch; ++i)
        launch();
    const auto t1 = std::chrono::steady_clock::now();
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
std::pair<double, double> median_us_per_launch(F&& first, G&& second, int batches, int per_batch)
{
    std::vector<double> a, b;
    for (int batch = 0; batch < batches; ++batch) {
        if (batch % 2 == 0) {
            a.push_back(us_per_launch(first, per_batch));
            b.push_back(us_per_launch(second, per_batch));
        } else {
            b.push_back(us_per_launch(second, per_batch));
            a.push_back(us_per_launch(first, per_batch));
        }
    }
    cudaDeviceSynchronize();
    return {median(a), median(b)};
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s VECADD_CUBIN\n", argv[0]);
        return 2;
    }
    const std::int64_t n = 4096;
    float *a = nullptr, *b = nullptr, *c = nullptr;
    cudaMalloc(&a, n * sizeof(float));
    cudaMalloc(&b, n * sizeof(float));
    cudaMalloc(&c, n * sizeof(float));
    cudaStream_t stream;
    cudaStreamCreate(&stream);

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
    check(cuModuleGetFunction(&fn, module, "example_kernels_ops__vecadd"), "cuModuleGetFunction");
    // the same parameters as ABI v1 gives them (pointer + length per slice, and the
    // logical grid last, since vecadd is coarsened 4x)
    const std::int64_t blocks = (n + 255) / 256;
    CUdeviceptr pa = reinterpret_cast<CUdeviceptr>(a), pb = reinterpret_cast<CUdeviceptr>(b),
                pc = reinterpret_cast<CUdeviceptr>(c);
    std::int64_t len = n, logical = blocks;
    void* params[] = {&pa, &len, &pb, &len, &pc, &len, &logical};
    const unsigned grid = static_cast<unsigned>((blocks + 3) / 4);
    auto raw = [&] { cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, stream, params, nullptr); };

    for (int i = 0; i < 2000; ++i) {  // warm up: modules loaded, clocks up
        ours();
        raw();
    }
    const auto [t_raw, t_ours] = median_us_per_launch(raw, ours, 400, 500);
    std::printf("C++ launch overhead, vecadd (3 arrays), host time per launch\n");
    std::printf("raw cuLaunchKernel        %7.3f us\n", t_raw);
    std::printf("buildtile C++ wrapper     %7.3f us   %.3fx raw\n", t_ours, t_ours / t_raw);
    return 0;
}
