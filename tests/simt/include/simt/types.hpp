// The host-visible types of the CUDA runtime that qrt uses, laid out as CUDA lays them out: error codes (with
// CUDA's numbers, so messages and logs read the same), dim3 and the vector types, device properties, stream,
// event and graph handles. Part of the SIMT layer (docs/simt.md); nothing here executes anything.
#pragma once

#include <cstddef>
#include <cstdint>

#define CUDART_VERSION 13000
#define __CUDART_API_VERSION 13000

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidSymbol = 13,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorMisalignedAddress = 716,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotSupported = 801,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureMerge = 902,
  cudaErrorStreamCaptureUnmatched = 903,
  cudaErrorStreamCaptureUnjoined = 904,
  cudaErrorStreamCaptureIsolation = 905,
  cudaErrorStreamCaptureImplicit = 906,
  cudaErrorCapturedEvent = 907,
  cudaErrorStreamCaptureWrongThread = 908,
  cudaErrorUnknown = 999,
};

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3,
};

struct cudaPointerAttributes {
  cudaMemoryType type;
  int device;
  void* devicePointer;
  void* hostPointer;
};

enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxBlockDimX = 2,
  cudaDevAttrMaxBlockDimY = 3,
  cudaDevAttrMaxBlockDimZ = 4,
  cudaDevAttrMaxGridDimX = 5,
  cudaDevAttrMaxGridDimY = 6,
  cudaDevAttrMaxGridDimZ = 7,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrClockRate = 13,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMemoryClockRate = 36,
  cudaDevAttrGlobalMemoryBusWidth = 37,
  cudaDevAttrL2CacheSize = 38,
  cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};

enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};

enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};

enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};

enum cudaMemPoolAttr {
  cudaMemPoolReuseFollowEventDependencies = 1,
  cudaMemPoolReuseAllowOpportunistic = 2,
  cudaMemPoolReuseAllowInternalDependencies = 3,
  cudaMemPoolAttrReleaseThreshold = 4,
  cudaMemPoolAttrReservedMemCurrent = 5,
  cudaMemPoolAttrReservedMemHigh = 6,
  cudaMemPoolAttrUsedMemCurrent = 7,
  cudaMemPoolAttrUsedMemHigh = 8,
};

constexpr unsigned cudaStreamDefault = 0x0;
constexpr unsigned cudaStreamNonBlocking = 0x1;
constexpr unsigned cudaEventDefault = 0x0;
constexpr unsigned cudaEventBlockingSync = 0x1;
constexpr unsigned cudaEventDisableTiming = 0x2;
constexpr unsigned cudaHostAllocDefault = 0x0;
constexpr unsigned cudaHostAllocPortable = 0x1;
constexpr unsigned cudaHostAllocMapped = 0x2;
constexpr unsigned cudaHostAllocWriteCombined = 0x4;
constexpr unsigned cudaHostRegisterDefault = 0x0;

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};

// The built-in index variables are uint3 (blockDim and gridDim too: only their members are read).
struct uint3 {
  unsigned int x, y, z;
};

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  size_t memPitch;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int clockRate;
  size_t totalConstMem;
  int major;
  int minor;
  size_t textureAlignment;
  int multiProcessorCount;
  int integrated;
  int canMapHostMemory;
  int concurrentKernels;
  int ECCEnabled;
  int pciBusID;
  int pciDeviceID;
  int asyncEngineCount;
  int unifiedAddressing;
  int memoryClockRate;
  int memoryBusWidth;
  int l2CacheSize;
  int persistingL2CacheMaxSize;
  int maxThreadsPerMultiProcessor;
  size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor;
  int managedMemory;
  int isMultiGpuBoard;
  size_t sharedMemPerBlockOptin;
  int maxBlocksPerMultiProcessor;
  size_t reservedSharedMemPerBlock;
};

// Opaque handles: pointers to the layer's own objects (defined in its sources).
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
typedef struct CUgraph_st* cudaGraph_t;
typedef struct CUgraphExec_st* cudaGraphExec_t;
typedef struct CUmemPoolHandle_st* cudaMemPool_t;

#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)

// ---- vector types ----------------------------------------------------------------------------------------------
// Aligned as CUDA aligns them. Copying one from (or to) an address that is not a multiple of its alignment is what a
// GPU faults on as a misaligned vector access; the layer's copy operations check it and stop the kernel with a
// message (qrt::simt::detail::misaligned_vector).
namespace qrt::simt::detail {
[[noreturn]] void misaligned_vector(const void* address, unsigned alignment, const char* type);
}  // namespace qrt::simt::detail

#define QRT_SIMT_VECTOR_CHECKS(T, A)                                                                 \
  T(const T& o) { check(&o), check(this), copy_from(o); }                                            \
  T& operator=(const T& o) {                                                                         \
    check(&o), check(this), copy_from(o);                                                            \
    return *this;                                                                                    \
  }                                                                                                  \
  static void check(const void* p) {                                                                 \
    if ((reinterpret_cast<uintptr_t>(p) & ((A) - 1)) != 0) ::qrt::simt::detail::misaligned_vector(p, A, #T); \
  }

#define QRT_SIMT_VECTOR2(T, E, A)                                                                \
  struct alignas(A) T {                                                                          \
    E x, y;                                                                                      \
    T() = default;                                                                               \
    constexpr T(E vx, E vy) : x(vx), y(vy) {}                                                    \
    QRT_SIMT_VECTOR_CHECKS(T, A)                                                                 \
   private:                                                                                      \
    void copy_from(const T& o) { x = o.x, y = o.y; }                                             \
  };                                                                                             \
  inline T make_##T(E x, E y) { return T(x, y); }

#define QRT_SIMT_VECTOR3(T, E, A)                                                                \
  struct alignas(A) T {                                                                          \
    E x, y, z;                                                                                   \
    T() = default;                                                                               \
    constexpr T(E vx, E vy, E vz) : x(vx), y(vy), z(vz) {}                                       \
    QRT_SIMT_VECTOR_CHECKS(T, A)                                                                 \
   private:                                                                                      \
    void copy_from(const T& o) { x = o.x, y = o.y, z = o.z; }                                    \
  };                                                                                             \
  inline T make_##T(E x, E y, E z) { return T(x, y, z); }

#define QRT_SIMT_VECTOR4(T, E, A)                                                                \
  struct alignas(A) T {                                                                          \
    E x, y, z, w;                                                                                \
    T() = default;                                                                               \
    constexpr T(E vx, E vy, E vz, E vw) : x(vx), y(vy), z(vz), w(vw) {}                          \
    QRT_SIMT_VECTOR_CHECKS(T, A)                                                                 \
   private:                                                                                      \
    void copy_from(const T& o) { x = o.x, y = o.y, z = o.z, w = o.w; }                           \
  };                                                                                             \
  inline T make_##T(E x, E y, E z, E w) { return T(x, y, z, w); }

QRT_SIMT_VECTOR2(char2, signed char, 2)
QRT_SIMT_VECTOR4(char4, signed char, 4)
QRT_SIMT_VECTOR2(uchar2, unsigned char, 2)
QRT_SIMT_VECTOR4(uchar4, unsigned char, 4)
QRT_SIMT_VECTOR2(short2, short, 4)
QRT_SIMT_VECTOR4(short4, short, 8)
QRT_SIMT_VECTOR2(ushort2, unsigned short, 4)
QRT_SIMT_VECTOR4(ushort4, unsigned short, 8)
QRT_SIMT_VECTOR2(int2, int, 8)
QRT_SIMT_VECTOR3(int3, int, 4)
QRT_SIMT_VECTOR4(int4, int, 16)
QRT_SIMT_VECTOR2(uint2, unsigned int, 8)
QRT_SIMT_VECTOR4(uint4, unsigned int, 16)
QRT_SIMT_VECTOR2(float2, float, 8)
QRT_SIMT_VECTOR3(float3, float, 4)
QRT_SIMT_VECTOR4(float4, float, 16)
QRT_SIMT_VECTOR2(double2, double, 16)
QRT_SIMT_VECTOR2(longlong2, long long, 16)
QRT_SIMT_VECTOR2(ulonglong2, unsigned long long, 16)

#undef QRT_SIMT_VECTOR2
#undef QRT_SIMT_VECTOR3
#undef QRT_SIMT_VECTOR4
#undef QRT_SIMT_VECTOR_CHECKS

inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }
