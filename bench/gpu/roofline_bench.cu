// The two ceilings, measured first: device copy bandwidth and cuBLAS bf16 GEMM throughput.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <random>

#include "gpu_bench_util.hpp"

namespace qrt::bench {

double measured_copy_bandwidth() {
  static const double bw = [] {
    const size_t bytes = size_t{1} << 30;
    DeviceBuffer a(bytes), b(bytes);
    QRT_BENCH_CUDA(cudaMemset(a.ptr, 1, bytes));
    cudaEvent_t s, e;
    cudaEventCreate(&s);
    cudaEventCreate(&e);
    std::vector<float> ms(15);
    for (int i = 0; i < 3; ++i) QRT_BENCH_CUDA(cudaMemcpy(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice));
    for (float& t : ms) {
      cudaEventRecord(s);
      cudaMemcpyAsync(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice);
      cudaEventRecord(e);
      cudaEventSynchronize(e);
      cudaEventElapsedTime(&t, s, e);
    }
    std::sort(ms.begin(), ms.end());
    cudaEventDestroy(s);
    cudaEventDestroy(e);
    return 2.0 * bytes / (ms[ms.size() / 2] / 1e3);  // bytes read + bytes written
  }();
  return bw;
}

namespace {

void BM_CopyBandwidth(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  DeviceBuffer a(bytes), b(bytes);
  QRT_BENCH_CUDA(cudaMemset(a.ptr, 3, bytes));
  time_with_events(state, nullptr, [&] { cudaMemcpyAsync(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice); });
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * bytes));
}
BENCHMARK(BM_CopyBandwidth)->Name("roofline/copy_d2d_MiB")->Arg(256)->Arg(1024)->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

__global__ void fill_bf16(__nv_bfloat16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    p[i] = __float2bfloat16((static_cast<float>(h & 0xFFFF) / 65536.0f - 0.5f));
  }
}

void BM_CublasBf16Gemm(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const size_t elems = static_cast<size_t>(n) * n;
  DeviceBuffer a(elems * 2), b(elems * 2), c(elems * 2);
  fill_bf16<<<1024, 256>>>(a.as<__nv_bfloat16>(), elems, 1);  // random data: zeros run faster than real data
  fill_bf16<<<1024, 256>>>(b.as<__nv_bfloat16>(), elems, 2);
  cublasHandle_t h;
  cublasCreate(&h);
  const float alpha = 1.0f, beta = 0.0f;
  time_with_events(state, nullptr, [&] {
    cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &alpha, a.ptr, CUDA_R_16BF, n, b.ptr, CUDA_R_16BF, n, &beta,
                 c.ptr, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  });
  cublasDestroy(h);
  state.counters["TFLOP/s"] = benchmark::Counter(2.0 * n * n * static_cast<double>(n) * state.iterations() / 1e12,
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CublasBf16Gemm)->Name("roofline/cublas_bf16_gemm")->Arg(4096)->Arg(8192)->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace qrt::bench
