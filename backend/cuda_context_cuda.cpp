#include "backend/cuda_context.hpp"

#include <cstdint>

namespace qrt {

Status cublas_status(cublasStatus_t status, const char* call, std::source_location where) {
  if (status == CUBLAS_STATUS_SUCCESS) return ok_status();
  return Status(ErrorCode::kCudaError, std::string(call) + " failed: " + cublasGetStatusName(status) + " (" +
                                           cublasGetStatusString(status) + ") at " + where.file_name() + ":" +
                                           std::to_string(where.line()));
}

Result<ScopedDevice> ScopedDevice::enter(int device, std::source_location where) {
  int current = -1;
  QRT_TRY(cuda_status(cudaGetDevice(&current), "cudaGetDevice", where));
  if (current == device) return ScopedDevice(-1, device);
  QRT_TRY(cuda_status(cudaSetDevice(device), "cudaSetDevice", where));
  return ScopedDevice(current, device);
}

ScopedDevice::~ScopedDevice() {
  if (previous_ >= 0) cudaSetDevice(previous_);  // best effort: a destructor cannot report
}

const char* device_allocator_name(DeviceAllocator a) {
  return a == DeviceAllocator::kCachingPool ? "caching pool" : "stream-ordered (cudaMallocAsync)";
}

Result<std::unique_ptr<CudaContext>> CudaContext::create(int device, DeviceAllocator allocator) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // do not leave the error sticky for the caller's next CUDA call
    return cuda_status(err, "cudaGetDeviceCount").with_context("opening CUDA device " + std::to_string(device));
  }
  if (device < 0 || device >= count)
    return not_found("CUDA device " + std::to_string(device) + " does not exist (this machine has " +
                     std::to_string(count) + ")");
  std::unique_ptr<CudaContext> ctx(new CudaContext());
  Status s = ctx->init(device, allocator);
  if (!s.ok()) return s.with_context("opening CUDA device " + std::to_string(device));
  return ctx;
}

Status CudaContext::init(int device, DeviceAllocator allocator) {
  props_.device = device;
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::enter(device));
  cudaDeviceProp p{};
  QRT_CUDA_TRY(cudaGetDeviceProperties(&p, device));
  props_.name = p.name;
  props_.compute_major = p.major;
  props_.compute_minor = p.minor;
  props_.sm_count = p.multiProcessorCount;
  props_.shared_mem_per_block = p.sharedMemPerBlock;
  props_.shared_mem_per_block_optin = p.sharedMemPerBlockOptin;
  props_.l2_bytes = static_cast<uint64_t>(p.l2CacheSize);
  props_.global_mem_bytes = p.totalGlobalMem;
  props_.max_threads_per_block = p.maxThreadsPerBlock;
  props_.warp_size = p.warpSize;
  if (props_.warp_size != 32)
    return unsupported("device " + props_.name + " has warp size " + std::to_string(props_.warp_size) +
                       "; the kernels assume 32");

  // Non-blocking streams: no implicit synchronization with the legacy default stream other code may use.
  QRT_CUDA_TRY(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  QRT_CUDA_TRY(cudaStreamCreateWithFlags(&copy_[0], cudaStreamNonBlocking));
  QRT_CUDA_TRY(cudaStreamCreateWithFlags(&copy_[1], cudaStreamNonBlocking));
  QRT_CUBLAS_TRY(cublasCreate(&cublas_));
  QRT_CUBLAS_TRY(cublasSetStream(cublas_, compute_));
  // Plain fp32 math: cuBLAS must not downgrade SGEMM to TF32 (the prefill path promises fp32 accumulation).
  QRT_CUBLAS_TRY(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));

  const int dev = device;
  const std::string pool_name = "CUDA device " + std::to_string(device) + " pool";
  if (allocator == DeviceAllocator::kStreamOrdered) {
    // Keep freed memory in the device's pool instead of returning it at every synchronization.
    cudaMemPool_t mempool = nullptr;
    QRT_CUDA_TRY(cudaDeviceGetDefaultMemPool(&mempool, device));
    uint64_t keep_everything = UINT64_MAX;
    QRT_CUDA_TRY(cudaMemPoolSetAttribute(mempool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
    const cudaStream_t stream = compute_;
    pool_ = std::make_unique<CachingPool>(
        pool_name,
        [dev, stream](uint64_t bytes) -> Result<void*> {
          void* p = nullptr;
          QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::enter(dev));
          const cudaError_t err = cudaMallocAsync(&p, bytes, stream);
          if (err != cudaSuccess) {
            cudaGetLastError();
            return cuda_status(err, "cudaMallocAsync").with_context(std::to_string(bytes) + " bytes");
          }
          return p;
        },
        [dev, stream](void* p) {
          auto scope = ScopedDevice::enter(dev);
          cudaFreeAsync(p, stream);  // ordered after the work already issued that may use it
        },
        CachingPool::Reuse::kNone);
    return ok_status();
  }
  pool_ = std::make_unique<CachingPool>(
      pool_name,
      [dev](uint64_t bytes) -> Result<void*> {
        void* p = nullptr;
        QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::enter(dev));
        const cudaError_t err = cudaMalloc(&p, bytes);
        if (err != cudaSuccess) {
          cudaGetLastError();  // an out-of-memory error is not sticky, but clear it for the next launch check
          return cuda_status(err, "cudaMalloc").with_context(std::to_string(bytes) + " bytes");
        }
        return p;
      },
      [dev](void* p) {
        auto scope = ScopedDevice::enter(dev);
        cudaFree(p);  // implicitly waits for work that may still use it
      });
  return ok_status();
}

CudaContext::~CudaContext() {
  auto scope = ScopedDevice::enter(props_.device);
  if (compute_ != nullptr) cudaStreamSynchronize(compute_);
  for (cudaStream_t s : copy_)
    if (s != nullptr) cudaStreamSynchronize(s);
  pool_.reset();
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  for (cudaStream_t s : copy_)
    if (s != nullptr) cudaStreamDestroy(s);
  if (compute_ != nullptr) cudaStreamDestroy(compute_);
}

}  // namespace qrt
