// The CUDA runtime entry points of the SIMT layer: devices as a simulated H100 SXM each, memory calls with the
// range checks a GPU's MMU would make, copies with CUDA's host-synchronization rules (pageable vs pinned), and
// kernel launches checked against an H100's limits before they are queued.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "internal.hpp"
#include "simt/runtime_api.hpp"

namespace qrt::simt {
namespace {

constexpr int kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDim[3] = {1024, 1024, 64};
constexpr uint64_t kMaxGridDim[3] = {2147483647ull, 65535, 65535};
constexpr size_t kDefaultDynamicSmem = 48 * 1024;
constexpr size_t kMaxDynamicSmemOptIn = 232448;  // 227 KiB
constexpr size_t kMaxParamBytes = 32764;         // CUDA 12.1+ on Volta and newer

int env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || n < lo || n > hi) {
    std::fprintf(stderr, "qrt-simt: ignoring %s=%s (expected an integer in [%d, %d])\n", name, v, lo, hi);
    return fallback;
  }
  return static_cast<int>(n);
}

std::mutex& func_attr_mutex() {
  static std::mutex m;
  return m;
}
std::map<const void*, size_t>& func_max_dynamic_smem() {
  static auto* m = new std::map<const void*, size_t>();
  return *m;
}

void report(const std::string& what) { std::fprintf(stderr, "qrt-simt: %s\n", what.c_str()); }

std::string site_string(const LaunchSite& s) {
  const char* slash = std::strrchr(s.file, '/');
  return std::string(s.kernel) + " at " + (slash ? slash + 1 : s.file) + ":" + std::to_string(s.line);
}

cudaError_t refuse_launch(const LaunchSite& site, cudaError_t e, const std::string& why) {
  report("launch of " + site_string(site) + " refused: " + why);
  set_last_error(e);
  return e;
}

bool is_device(const std::optional<Allocation>& a) { return a && a->kind == MemoryKind::kDevice; }
bool is_pinned(const std::optional<Allocation>& a) { return a && a->kind == MemoryKind::kPinnedHost; }

// Where a copy's side lives. A pointer inside a device allocation must lie wholly inside it: a GPU faults on the
// rest, and CUDA's copy calls reject it.
enum class Side { kDevice, kPinned, kPageable, kBad };
Side classify(const void* p, size_t bytes) {
  auto whole = find_allocation(p, bytes);
  if (is_device(whole)) return Side::kDevice;
  if (is_pinned(whole)) return Side::kPinned;
  if (find_allocation(p, 1)) return Side::kBad;  // starts in an allocation, runs past its end
  return Side::kPageable;
}

const char* side_name(Side s) {
  switch (s) {
    case Side::kDevice: return "device memory";
    case Side::kPinned: return "pinned host memory";
    case Side::kPageable: return "pageable host memory";
    case Side::kBad: return "a range that runs past the end of its allocation";
  }
  return "?";
}

cudaError_t copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream, bool blocking) {
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  Stream* s = resolve_stream(stream);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  const Side from = classify(src, bytes), to = classify(dst, bytes);
  if (from == Side::kBad || to == Side::kBad) {
    report("cudaMemcpy of " + std::to_string(bytes) + " bytes: " + (from == Side::kBad ? "source" : "destination") +
           " is " + side_name(Side::kBad));
    return cudaErrorInvalidValue;
  }
  const bool src_dev = from == Side::kDevice, dst_dev = to == Side::kDevice;
  const cudaMemcpyKind actual = src_dev ? (dst_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                                        : (dst_dev ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  if (kind != cudaMemcpyDefault && kind != actual) {
    report("cudaMemcpy kind " + std::to_string(kind) + " names the wrong memory: source is " + side_name(from) +
           ", destination is " + side_name(to));
    return cudaErrorInvalidValue;
  }
  const bool pageable = from == Side::kPageable || to == Side::kPageable;
  if (pageable && is_capturing(s)) return check_capture_allows_sync(s);
  if (blocking) {
    if (cudaError_t e = check_capture_allows_sync(s); e != cudaSuccess) return e;
  }
  OpSpec op;
  op.kind = OpKind::kCopy;
  op.copy_kind = actual == cudaMemcpyHostToHost ? cudaMemcpyDeviceToDevice : actual;
  op.bytes = bytes;
  if (from == Side::kPageable) {
    // CUDA stages pageable sources before the call returns: the caller may reuse its buffer at once.
    auto staged = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(src),
                                                         static_cast<const uint8_t*>(src) + bytes);
    op.run = [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); };
  } else {
    op.run = [dst, src, bytes] { std::memcpy(dst, src, bytes); };
  }
  if (cudaError_t e = enqueue(s, std::move(op)); e != cudaSuccess) return e;
  // A copy into pageable memory returns only once it has landed; so does every blocking cudaMemcpy.
  if (blocking || to == Side::kPageable) return wait_stream(s);
  return cudaSuccess;
}

cudaError_t memset(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (!is_device(find_allocation(ptr, bytes))) {
    report("cudaMemset of " + std::to_string(bytes) + " bytes outside a device allocation");
    return cudaErrorInvalidValue;
  }
  Stream* s = resolve_stream(stream);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  OpSpec op;
  op.kind = OpKind::kMemset;
  op.bytes = bytes;
  op.run = [ptr, value, bytes] { std::memset(ptr, value, bytes); };
  return enqueue(s, std::move(op));
}

cudaDeviceProp h100_properties() {
  cudaDeviceProp p{};
  std::snprintf(p.name, sizeof p.name, "NVIDIA H100 80GB HBM3 (qrt SIMT layer on the CPU)");
  p.totalGlobalMem = settings().device_bytes;
  p.sharedMemPerBlock = kDefaultDynamicSmem;
  p.regsPerBlock = 65536;
  p.warpSize = 32;
  p.memPitch = 2147483647;
  p.maxThreadsPerBlock = kMaxThreadsPerBlock;
  p.maxThreadsDim[0] = 1024, p.maxThreadsDim[1] = 1024, p.maxThreadsDim[2] = 64;
  p.maxGridSize[0] = 2147483647, p.maxGridSize[1] = 65535, p.maxGridSize[2] = 65535;
  p.clockRate = 1980000;
  p.totalConstMem = 65536;
  p.major = 9;
  p.minor = 0;
  p.textureAlignment = 512;
  p.multiProcessorCount = 132;
  p.canMapHostMemory = 1;
  p.concurrentKernels = 1;
  p.asyncEngineCount = 3;
  p.unifiedAddressing = 1;
  p.memoryClockRate = 2619000;
  p.memoryBusWidth = 5120;
  p.l2CacheSize = 50 * 1024 * 1024;
  p.persistingL2CacheMaxSize = 32 * 1024 * 1024;
  p.maxThreadsPerMultiProcessor = 2048;
  p.sharedMemPerMultiprocessor = 233472;
  p.regsPerMultiprocessor = 65536;
  p.managedMemory = 1;
  p.sharedMemPerBlockOptin = kMaxDynamicSmemOptIn;
  p.maxBlocksPerMultiProcessor = 32;
  p.reservedSharedMemPerBlock = 1024;
  return p;
}

bool valid_device(int d) { return d >= 0 && d < settings().devices; }

}  // namespace

const Settings& settings() {
  static const Settings s = [] {
    Settings v;
    const int cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    v.worker_threads = env_int("QRT_SIMT_THREADS", cores > 0 ? cores : 1, 1, 256);
    v.devices = env_int("QRT_SIMT_DEVICES", 4, 1, 64);
    v.device_bytes = static_cast<uint64_t>(env_int("QRT_SIMT_DEVICE_GIB", 80, 1, 4096)) << 30;
    v.delay_ms = env_int("QRT_SIMT_DELAY_MS", 20, 0, 60000);
    v.collective_timeout_s = env_int("QRT_SIMT_COLLECTIVE_TIMEOUT_S", 120, 1, 86400);
    return v;
  }();
  return s;
}

void fatal(const std::string& message) {
  const std::string where = kernel_context();
  const std::string line = "qrt-simt: " + (where.empty() ? "" : where + ": ") + message + "\n";
  (void)!write(2, line.data(), line.size());
  std::abort();
}

namespace detail {

void enqueue_launch(const LaunchSite& site, dim3 grid, dim3 block, size_t dynamic_smem, cudaStream_t stream,
                    const void* kernel_id, size_t param_bytes, std::shared_ptr<KernelBody> body, bool programmatic) {
  const unsigned b[3] = {block.x, block.y, block.z};
  const uint64_t g[3] = {grid.x, grid.y, grid.z};
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  for (int i = 0; i < 3; ++i) {
    if (b[i] == 0 || b[i] > kMaxBlockDim[i] || g[i] == 0 || g[i] > kMaxGridDim[i]) {
      refuse_launch(site, cudaErrorInvalidConfiguration,
                    "grid (" + std::to_string(grid.x) + "," + std::to_string(grid.y) + "," + std::to_string(grid.z) +
                        ") block (" + std::to_string(block.x) + "," + std::to_string(block.y) + "," +
                        std::to_string(block.z) + ") is outside an H100's limits");
      return;
    }
  }
  if (threads > kMaxThreadsPerBlock) {
    refuse_launch(site, cudaErrorInvalidConfiguration,
                  std::to_string(threads) + " threads per block (at most " + std::to_string(kMaxThreadsPerBlock) + ")");
    return;
  }
  size_t smem_limit = kDefaultDynamicSmem;
  {
    std::lock_guard<std::mutex> lock(func_attr_mutex());
    auto it = func_max_dynamic_smem().find(kernel_id);
    if (it != func_max_dynamic_smem().end()) smem_limit = it->second;
  }
  if (dynamic_smem > smem_limit) {
    refuse_launch(site, cudaErrorInvalidValue,
                  std::to_string(dynamic_smem) + " bytes of dynamic shared memory (the limit is " +
                      std::to_string(smem_limit) +
                      (smem_limit == kDefaultDynamicSmem ? " without cudaFuncSetAttribute" : "") + ")");
    return;
  }
  if (param_bytes > kMaxParamBytes) {
    refuse_launch(site, cudaErrorInvalidValue, std::to_string(param_bytes) + " bytes of kernel parameters");
    return;
  }
  Stream* s = resolve_stream(stream);
  if (s == nullptr) {
    refuse_launch(site, cudaErrorInvalidResourceHandle, "the stream handle is not a live stream");
    return;
  }
  auto launch = std::make_shared<KernelLaunch>();
  launch->site = site;
  launch->grid = grid;
  launch->block = block;
  launch->dynamic_smem = dynamic_smem;
  launch->body = std::move(body);
  launch->programmatic = programmatic;
  OpSpec op;
  op.kind = OpKind::kKernel;
  op.programmatic = programmatic;
  op.run = [launch] { run_grid(*launch); };
  if (cudaError_t e = enqueue(s, std::move(op)); e != cudaSuccess) set_last_error(e);
}

}  // namespace detail
}  // namespace qrt::simt

using namespace qrt::simt;

// ---- errors ----------------------------------------------------------------------------------------------------
cudaError_t cudaGetLastError() { return take_last_error(); }
cudaError_t cudaPeekAtLastError() { return peek_last_error(); }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
#define QRT_SIMT_NAME(x) \
  case x: return #x;
    QRT_SIMT_NAME(cudaSuccess)
    QRT_SIMT_NAME(cudaErrorInvalidValue)
    QRT_SIMT_NAME(cudaErrorMemoryAllocation)
    QRT_SIMT_NAME(cudaErrorInitializationError)
    QRT_SIMT_NAME(cudaErrorInvalidConfiguration)
    QRT_SIMT_NAME(cudaErrorInvalidSymbol)
    QRT_SIMT_NAME(cudaErrorInvalidDevicePointer)
    QRT_SIMT_NAME(cudaErrorInvalidMemcpyDirection)
    QRT_SIMT_NAME(cudaErrorInvalidDeviceFunction)
    QRT_SIMT_NAME(cudaErrorNoDevice)
    QRT_SIMT_NAME(cudaErrorInvalidDevice)
    QRT_SIMT_NAME(cudaErrorInvalidResourceHandle)
    QRT_SIMT_NAME(cudaErrorIllegalState)
    QRT_SIMT_NAME(cudaErrorNotReady)
    QRT_SIMT_NAME(cudaErrorIllegalAddress)
    QRT_SIMT_NAME(cudaErrorLaunchOutOfResources)
    QRT_SIMT_NAME(cudaErrorMisalignedAddress)
    QRT_SIMT_NAME(cudaErrorLaunchFailure)
    QRT_SIMT_NAME(cudaErrorNotSupported)
    QRT_SIMT_NAME(cudaErrorStreamCaptureUnsupported)
    QRT_SIMT_NAME(cudaErrorStreamCaptureInvalidated)
    QRT_SIMT_NAME(cudaErrorStreamCaptureMerge)
    QRT_SIMT_NAME(cudaErrorStreamCaptureUnmatched)
    QRT_SIMT_NAME(cudaErrorStreamCaptureUnjoined)
    QRT_SIMT_NAME(cudaErrorStreamCaptureIsolation)
    QRT_SIMT_NAME(cudaErrorStreamCaptureImplicit)
    QRT_SIMT_NAME(cudaErrorCapturedEvent)
    QRT_SIMT_NAME(cudaErrorStreamCaptureWrongThread)
    QRT_SIMT_NAME(cudaErrorUnknown)
#undef QRT_SIMT_NAME
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit:
      return "operation would make the legacy stream depend on a capturing blocking stream";
    default: return cudaGetErrorName(e);
  }
}

// ---- devices ---------------------------------------------------------------------------------------------------
cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return cudaErrorInvalidValue;
  *count = settings().devices;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return cudaErrorInvalidValue;
  *device = current_device();
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return set_current_device(device); }

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return cudaErrorInvalidValue;
  if (!valid_device(device)) return cudaErrorInvalidDevice;
  *prop = h100_properties();
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (value == nullptr) return cudaErrorInvalidValue;
  if (!valid_device(device)) return cudaErrorInvalidDevice;
  const cudaDeviceProp p = h100_properties();
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(p.sharedMemPerBlock); break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrClockRate: *value = p.clockRate; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMemoryClockRate: *value = p.memoryClockRate; break;
    case cudaDevAttrGlobalMemoryBusWidth: *value = p.memoryBusWidth; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = static_cast<int>(p.sharedMemPerMultiprocessor); break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(p.sharedMemPerBlockOptin); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return wait_device(current_device()); }
cudaError_t cudaDeviceReset() { return wait_device(current_device()); }

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return cudaErrorInvalidValue;
  *total = settings().device_bytes;
  *free = *total - device_bytes_in_use(current_device());
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) { return v ? (*v = CUDART_VERSION, cudaSuccess) : cudaErrorInvalidValue; }
cudaError_t cudaRuntimeGetVersion(int* v) { return v ? (*v = CUDART_VERSION, cudaSuccess) : cudaErrorInvalidValue; }

// ---- memory ----------------------------------------------------------------------------------------------------
cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (cudaError_t e = check_capture_allows_sync(nullptr); e != cudaSuccess) return e;
  return allocate_device(current_device(), bytes, ptr);
}

cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  if (cudaError_t e = check_capture_allows_sync(nullptr); e != cudaSuccess) return e;
  auto a = find_allocation(ptr);
  if (!is_device(a) || a->base != reinterpret_cast<uintptr_t>(ptr)) {
    report("cudaFree of a pointer that is not the start of a live device allocation");
    return cudaErrorInvalidValue;
  }
  wait_device(a->device);  // cudaFree synchronizes: work still queued may read the memory
  return free_device(ptr);
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) { return allocate_pinned(bytes, ptr); }
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int) { return allocate_pinned(bytes, ptr); }
cudaError_t cudaFreeHost(void* ptr) {
  if (cudaError_t e = check_capture_allows_sync(nullptr); e != cudaSuccess) return e;
  return free_pinned(ptr);
}

cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream) {
  if (resolve_stream(stream) == nullptr) return cudaErrorInvalidResourceHandle;
  return allocate_device(stream_device(resolve_stream(stream)), bytes, ptr);
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  if (ptr == nullptr) return cudaSuccess;
  Stream* s = resolve_stream(stream);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  capture_status(stream, &status);
  if (status != cudaStreamCaptureStatusNone) return cudaErrorStreamCaptureUnsupported;  // free nodes: not modelled
  auto a = find_allocation(ptr);
  if (!is_device(a) || a->base != reinterpret_cast<uintptr_t>(ptr)) return cudaErrorInvalidValue;
  OpSpec op;
  op.kind = OpKind::kHostWork;
  op.run = [ptr] { free_device(ptr); };  // later ops in stream order that touch it fault
  return enqueue(s, std::move(op));
}

namespace {
struct MemPool {
  uint64_t release_threshold = 0;
  int device = 0;
};
MemPool* pool_of(int device) {
  static std::vector<MemPool>* pools = [] {
    auto* v = new std::vector<MemPool>(static_cast<size_t>(settings().devices));
    for (size_t i = 0; i < v->size(); ++i) (*v)[i].device = static_cast<int>(i);
    return v;
  }();
  return &(*pools)[static_cast<size_t>(device)];
}
}  // namespace

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  if (pool == nullptr) return cudaErrorInvalidValue;
  if (!valid_device(device)) return cudaErrorInvalidDevice;
  *pool = reinterpret_cast<cudaMemPool_t>(pool_of(device));
  return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  if (pool == nullptr || value == nullptr) return cudaErrorInvalidValue;
  if (attr == cudaMemPoolAttrReleaseThreshold) reinterpret_cast<MemPool*>(pool)->release_threshold = *static_cast<uint64_t*>(value);
  return cudaSuccess;
}
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  if (pool == nullptr || value == nullptr) return cudaErrorInvalidValue;
  auto* p = reinterpret_cast<MemPool*>(pool);
  uint64_t v = 0;
  switch (attr) {
    case cudaMemPoolAttrReleaseThreshold: v = p->release_threshold; break;
    case cudaMemPoolAttrReservedMemCurrent:
    case cudaMemPoolAttrUsedMemCurrent: v = device_bytes_in_use(p->device); break;
    default: break;
  }
  *static_cast<uint64_t*>(value) = v;
  return cudaSuccess;
}
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t) { return pool ? cudaSuccess : cudaErrorInvalidValue; }

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  if (attributes == nullptr) return cudaErrorInvalidValue;
  *attributes = cudaPointerAttributes{};
  auto a = find_allocation(ptr);
  if (is_device(a)) {
    attributes->type = cudaMemoryTypeDevice;
    attributes->device = a->device;
    attributes->devicePointer = const_cast<void*>(ptr);
  } else if (is_pinned(a)) {
    attributes->type = cudaMemoryTypeHost;
    attributes->device = current_device();
    attributes->hostPointer = const_cast<void*>(ptr);
    attributes->devicePointer = const_cast<void*>(ptr);
  } else {
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->device = -2;
    attributes->hostPointer = const_cast<void*>(ptr);
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return copy(dst, src, bytes, kind, nullptr, true);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  return copy(dst, src, bytes, kind, stream, false);
}
cudaError_t cudaMemset(void* ptr, int value, size_t bytes) { return qrt::simt::memset(ptr, value, bytes, nullptr); }
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  return qrt::simt::memset(ptr, value, bytes, stream);
}

// ---- streams and events ----------------------------------------------------------------------------------------
cudaError_t cudaStreamCreate(cudaStream_t* stream) { return create_stream(cudaStreamDefault, stream); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) { return create_stream(flags, stream); }
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags, int) {
  return create_stream(flags, stream);
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) { return destroy_stream(stream); }
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  Stream* s = resolve_stream(stream);
  return s ? wait_stream(s) : cudaErrorInvalidResourceHandle;
}
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  Stream* s = resolve_stream(stream);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  if (cudaError_t e = check_capture_allows_sync(s); e != cudaSuccess) return e;
  return stream_idle(s) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  return wait_event_on_stream(stream, event);
}
cudaError_t cudaEventCreate(cudaEvent_t* event) { return create_event(cudaEventDefault, event); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) { return create_event(flags, event); }
cudaError_t cudaEventDestroy(cudaEvent_t event) { return destroy_event(event); }
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) { return record_event(event, stream); }
cudaError_t cudaEventSynchronize(cudaEvent_t event) { return synchronize_event(event); }
cudaError_t cudaEventQuery(cudaEvent_t event) { return query_event(event); }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  return event_elapsed_ms(ms, start, end);
}

// ---- graphs ----------------------------------------------------------------------------------------------------
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  return begin_capture(stream, mode);
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) { return end_capture(stream, graph); }
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  return capture_status(stream, status);
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  return instantiate_graph(exec, graph);
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) { return launch_graph(exec, stream); }
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) { return destroy_graph_exec(exec); }
cudaError_t cudaGraphDestroy(cudaGraph_t graph) { return destroy_graph(graph); }
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, void** nodes, size_t* count) {
  if (graph == nullptr || count == nullptr) return cudaErrorInvalidValue;
  if (nodes != nullptr) return cudaErrorNotSupported;  // only the count is modelled
  *count = graph_node_count(graph);
  return cudaSuccess;
}

// ---- kernels ---------------------------------------------------------------------------------------------------
cudaError_t simt_func_set_attribute(const void* kernel, cudaFuncAttribute attr, int value) {
  if (kernel == nullptr) return cudaErrorInvalidDeviceFunction;
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || static_cast<size_t>(value) > kMaxDynamicSmemOptIn) return cudaErrorInvalidValue;
    std::lock_guard<std::mutex> lock(func_attr_mutex());
    func_max_dynamic_smem()[kernel] = static_cast<size_t>(value);
  }
  return cudaSuccess;
}
