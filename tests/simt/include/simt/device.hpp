// Device code for the SIMT layer: CUDA's keywords, the built-in index variables, warp and block synchronization,
// shuffles and votes, atomics, cp.async, and the math and bit intrinsics qrt's kernels use. Every GPU thread runs
// as a fiber; the synchronizing intrinsics below switch fibers (tests/simt/src/block_runner.cpp) and check what a
// GPU would leave undefined (masks, exited lanes, barriers only part of a block reaches). docs/simt.md says how to
// add an intrinsic.
#pragma once

#include <math.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

#include "simt/half.hpp"
#include "simt/types.hpp"

// ---- keywords ----------------------------------------------------------------------------------------------------
// A block's threads all run on one OS thread, so a function-local `static thread_local` is exactly one copy per
// running block: __shared__ storage. (extern __shared__ arrays are rewritten by tools/rewrite_cu.py into a pointer
// to the block's dynamic shared memory, which the layer poisons before every block.)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static thread_local
#define __constant__
#define __managed__
#define __grid_constant__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

namespace qrt::simt::detail {

using Where = std::source_location;

// The running GPU thread's coordinates (set by the block runner before it resumes a fiber).
extern __thread uint3 t_thread_idx __attribute__((tls_model("initial-exec")));
extern __thread uint3 t_block_idx __attribute__((tls_model("initial-exec")));
extern __thread uint3 t_block_dim __attribute__((tls_model("initial-exec")));
extern __thread uint3 t_grid_dim __attribute__((tls_model("initial-exec")));

void sync_block(Where where);
int sync_block_count(int predicate, Where where);  // how many threads passed a non-zero predicate
void sync_warp(unsigned mask, Where where);

enum class ShuffleKind { kIndex, kUp, kDown, kXor };
// The 8-byte payload of lane `source` as chosen by kind/arg/width (CUDA's rules), for every lane of `mask`.
uint64_t shuffle(unsigned mask, uint64_t value, ShuffleKind kind, int arg, int width, Where where);
enum class VoteKind { kBallot, kAny, kAll };
unsigned vote(unsigned mask, int predicate, VoteKind kind, Where where);
unsigned active_mask();
// Not a CUDA call: the layer's model of instructions whose operands cross lanes (mma.sync, ldmatrix). A warp-
// synchronous operation like a shuffle (same mask rules): when every lane of `mask` has arrived, each finds lane l's
// `bytes` (at most 256) at all + l * bytes; slots of lanes outside the mask are left as they were. One operation
// where the shuffles modelling such an instruction would take dozens, each a round of every lane.
void warp_gather(unsigned mask, const void* mine, void* all, unsigned bytes,
                 Where where = std::source_location::current());

// cp.async (sm_80+): the copy lands in shared memory only when the issuing thread waits for its group, so a kernel
// that reads the destination too early reads stale bytes, as it might on a GPU.
void async_copy(void* shared_dst, const void* global_src, unsigned bytes, Where where);
void async_commit();
void async_wait(int pending_groups, Where where);
// griddepcontrol.wait: grids run one after the other here, so it only records that the thread waited.
void grid_dependency_wait(Where where);

// The running block's dynamic shared memory (size and alignment checked against the launch).
void* dynamic_shared_memory(size_t alignment);

[[noreturn]] void kernel_trap(const char* what, Where where);
void check_alignment(const void* p, unsigned alignment, const char* what, Where where);

template <class T>
uint64_t to_payload(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <class T>
T from_payload(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

}  // namespace qrt::simt::detail

inline constexpr int warpSize = 32;

#define threadIdx (::qrt::simt::detail::t_thread_idx)
#define blockIdx (::qrt::simt::detail::t_block_idx)
#define blockDim (::qrt::simt::detail::t_block_dim)
#define gridDim (::qrt::simt::detail::t_grid_dim)

// ---- synchronization -------------------------------------------------------------------------------------------
inline void __syncthreads(std::source_location w = std::source_location::current()) {
  qrt::simt::detail::sync_block(w);
}
inline int __syncthreads_count(int p, std::source_location w = std::source_location::current()) {
  return qrt::simt::detail::sync_block_count(p, w);
}
inline int __syncthreads_and(int p, std::source_location w = std::source_location::current()) {
  return qrt::simt::detail::sync_block_count(p != 0, w) == static_cast<int>(blockDim.x * blockDim.y * blockDim.z);
}
inline int __syncthreads_or(int p, std::source_location w = std::source_location::current()) {
  return qrt::simt::detail::sync_block_count(p != 0, w) > 0;
}
inline void __syncwarp(unsigned mask = 0xffffffffu, std::source_location w = std::source_location::current()) {
  qrt::simt::detail::sync_warp(mask, w);
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// ---- shuffles and votes ----------------------------------------------------------------------------------------
template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
              std::source_location w = std::source_location::current()) {
  using namespace qrt::simt::detail;
  return from_payload<T>(shuffle(mask, to_payload(var), ShuffleKind::kIndex, src_lane, width, w));
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                 std::source_location w = std::source_location::current()) {
  using namespace qrt::simt::detail;
  return from_payload<T>(shuffle(mask, to_payload(var), ShuffleKind::kUp, static_cast<int>(delta), width, w));
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                   std::source_location w = std::source_location::current()) {
  using namespace qrt::simt::detail;
  return from_payload<T>(shuffle(mask, to_payload(var), ShuffleKind::kDown, static_cast<int>(delta), width, w));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  std::source_location w = std::source_location::current()) {
  using namespace qrt::simt::detail;
  return from_payload<T>(shuffle(mask, to_payload(var), ShuffleKind::kXor, lane_mask, width, w));
}
inline unsigned __ballot_sync(unsigned mask, int predicate, std::source_location w = std::source_location::current()) {
  return qrt::simt::detail::vote(mask, predicate, qrt::simt::detail::VoteKind::kBallot, w);
}
inline int __any_sync(unsigned mask, int predicate, std::source_location w = std::source_location::current()) {
  return static_cast<int>(qrt::simt::detail::vote(mask, predicate, qrt::simt::detail::VoteKind::kAny, w));
}
inline int __all_sync(unsigned mask, int predicate, std::source_location w = std::source_location::current()) {
  return static_cast<int>(qrt::simt::detail::vote(mask, predicate, qrt::simt::detail::VoteKind::kAll, w));
}
inline unsigned __activemask() { return qrt::simt::detail::active_mask(); }

// ---- loads -----------------------------------------------------------------------------------------------------
// __ldg and the cache-hint loads read like a plain load; the alignment a GPU would fault on is checked.
template <class T>
T __ldg(const T* p, std::source_location w = std::source_location::current()) {
  qrt::simt::detail::check_alignment(p, alignof(T), "__ldg", w);
  return *p;
}
template <class T>
T __ldcg(const T* p, std::source_location w = std::source_location::current()) {
  return __ldg(p, w);
}
template <class T>
T __ldcs(const T* p, std::source_location w = std::source_location::current()) {
  return __ldg(p, w);
}
template <class T>
void __stcg(T* p, T v, std::source_location w = std::source_location::current()) {
  qrt::simt::detail::check_alignment(p, alignof(T), "__stcg", w);
  *p = v;
}
template <class T>
void __stcs(T* p, T v, std::source_location w = std::source_location::current()) {
  __stcg(p, v, w);
}

// Address-space conversions: the layer has one flat address space, so these are the addresses themselves.
inline size_t __cvta_generic_to_shared(const void* p) { return reinterpret_cast<size_t>(p); }
inline size_t __cvta_generic_to_global(const void* p) { return reinterpret_cast<size_t>(p); }

// ---- atomics ---------------------------------------------------------------------------------------------------
// Blocks run on several OS threads, so global-memory atomics are real atomics.
template <class T>
T __simt_atomic_cas_update(T* address, auto update) {
  std::atomic_ref<T> a(*address);
  T old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, update(old), std::memory_order_seq_cst)) {
  }
  return old;
}
template <class T>
T atomicAdd(T* address, T v) {
  if constexpr (std::is_integral_v<T>) {
    return std::atomic_ref<T>(*address).fetch_add(v);
  } else {
    return __simt_atomic_cas_update(address, [v](T old) { return old + v; });
  }
}
template <class T>
T atomicSub(T* address, T v) {
  return std::atomic_ref<T>(*address).fetch_sub(v);
}
template <class T>
T atomicExch(T* address, T v) {
  return std::atomic_ref<T>(*address).exchange(v);
}
template <class T>
T atomicMax(T* address, T v) {
  return __simt_atomic_cas_update(address, [v](T old) { return old < v ? v : old; });
}
template <class T>
T atomicMin(T* address, T v) {
  return __simt_atomic_cas_update(address, [v](T old) { return v < old ? v : old; });
}
template <class T>
T atomicAnd(T* address, T v) {
  return std::atomic_ref<T>(*address).fetch_and(v);
}
template <class T>
T atomicOr(T* address, T v) {
  return std::atomic_ref<T>(*address).fetch_or(v);
}
template <class T>
T atomicXor(T* address, T v) {
  return std::atomic_ref<T>(*address).fetch_xor(v);
}
template <class T>
T atomicCAS(T* address, T compare, T v) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, v);
  return compare;
}
inline unsigned atomicInc(unsigned* address, unsigned limit) {
  return __simt_atomic_cas_update(address, [limit](unsigned old) { return old >= limit ? 0u : old + 1u; });
}

// ---- bits and conversions --------------------------------------------------------------------------------------
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz(static_cast<unsigned>(v)); }
inline int __clzll(long long v) { return v == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(v)); }
inline int __ffs(int v) { return __builtin_ffs(v); }
inline int __ffsll(long long v) { return __builtin_ffsll(v); }
inline unsigned __brev(unsigned v) {
  v = ((v >> 1) & 0x55555555u) | ((v & 0x55555555u) << 1);
  v = ((v >> 2) & 0x33333333u) | ((v & 0x33333333u) << 2);
  v = ((v >> 4) & 0x0F0F0F0Fu) | ((v & 0x0F0F0F0Fu) << 4);
  v = ((v >> 8) & 0x00FF00FFu) | ((v & 0x00FF00FFu) << 8);
  return (v >> 16) | (v << 16);
}
// CUDA's __byte_perm: byte n of the result is byte (s >> 4n) & 7 of {y, x}. Bit 3 of each selector nibble is ignored,
// not PTX prmt's sign replication: nvcc masks the selector with 0x7777 before its prmt, and the table lookups of the
// integer-dot kernels pass 4-bit codes as selectors on that promise.
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t src = (static_cast<uint64_t>(y) << 32) | x;
  unsigned d = 0;
  for (int n = 0; n < 4; ++n) {
    const unsigned sel = (s >> (4 * n)) & 7u;
    d |= (static_cast<unsigned>(src >> (8 * sel)) & 0xFFu) << (8 * n);
  }
  return d;
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
  const uint64_t v = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<unsigned>((v << (shift & 31u)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  const uint64_t v = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<unsigned>(v >> (shift & 31u));
}
inline unsigned __umulhi(unsigned a, unsigned b) { return static_cast<unsigned>((uint64_t{a} * b) >> 32); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}
inline int __mul24(int a, int b) { return ((a << 8) >> 8) * ((b << 8) >> 8); }
// Four-way byte dot product with a 32-bit accumulator: the signed form treats each byte as int8, the unsigned one as
// uint8; the sum wraps like the instruction's.
inline int __dp4a(int a, int b, int c) {
  uint32_t sum = static_cast<uint32_t>(c);
  for (int n = 0; n < 4; ++n)
    sum += static_cast<uint32_t>(static_cast<int8_t>(a >> (8 * n)) * static_cast<int8_t>(b >> (8 * n)));
  return static_cast<int>(sum);
}
inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
  for (int n = 0; n < 4; ++n) c += ((a >> (8 * n)) & 0xFFu) * ((b >> (8 * n)) & 0xFFu);
  return c;
}
// Per-byte addition modulo 256 (no carry between bytes).
inline unsigned __vadd4(unsigned a, unsigned b) {
  unsigned d = 0;
  for (int n = 0; n < 4; ++n) d |= (((a >> (8 * n)) + (b >> (8 * n))) & 0xFFu) << (8 * n);
  return d;
}
// Per-byte subtraction modulo 256 (no borrow between bytes).
inline unsigned __vsub4(unsigned a, unsigned b) {
  unsigned d = 0;
  for (int n = 0; n < 4; ++n) d |= (((a >> (8 * n)) - (b >> (8 * n))) & 0xFFu) << (8 * n);
  return d;
}

template <class To, class From>
To __simt_bit_cast(From v) {
  static_assert(sizeof(To) == sizeof(From));
  To t;
  std::memcpy(&t, &v, sizeof(To));
  return t;
}
inline float __int_as_float(int v) { return __simt_bit_cast<float>(v); }
inline float __uint_as_float(unsigned v) { return __simt_bit_cast<float>(v); }
inline int __float_as_int(float v) { return __simt_bit_cast<int>(v); }
inline unsigned __float_as_uint(float v) { return __simt_bit_cast<unsigned>(v); }
inline double __longlong_as_double(long long v) { return __simt_bit_cast<double>(v); }
inline long long __double_as_longlong(double v) { return __simt_bit_cast<long long>(v); }
inline int __float2int_rn(float v) { return static_cast<int>(std::nearbyint(v)); }
inline int __float2int_rz(float v) { return static_cast<int>(v); }
inline unsigned __float2uint_rn(float v) { return static_cast<unsigned>(std::nearbyint(v)); }
inline float __int2float_rn(int v) { return static_cast<float>(v); }
inline float __uint2float_rn(unsigned v) { return static_cast<float>(v); }

// ---- math ------------------------------------------------------------------------------------------------------
// The correctly rounded single operations: the host compiler is built without contraction into FMA (docs/simt.md),
// so a plain operator is one rounding, as these intrinsics promise.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
// The fast approximations: the layer computes them exactly (a GPU's are within a few ulp; tests allow for it).
inline float __expf(float a) { return std::exp(a); }
inline float __exp10f(float a) { return std::pow(10.0f, a); }
inline float __logf(float a) { return std::log(a); }
inline float __log2f(float a) { return std::log2(a); }
inline float __sinf(float a) { return std::sin(a); }
inline float __cosf(float a) { return std::cos(a); }
inline float __tanf(float a) { return std::tan(a); }
inline float __powf(float a, float b) { return std::pow(a, b); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float a) { return a < 0.0f ? 0.0f : (a > 1.0f ? 1.0f : a); }
inline float rsqrtf(float a) { return 1.0f / std::sqrt(a); }
inline double rsqrt(double a) { return 1.0 / std::sqrt(a); }
inline void __sincosf(float a, float* s, float* c) { *s = std::sin(a), *c = std::cos(a); }
inline float exp10f(float a) { return std::pow(10.0f, a); }

// CUDA's min and max accept mixed integer and floating types in device code.
template <class A, class B>
  requires std::is_arithmetic_v<A> && std::is_arithmetic_v<B>
constexpr std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(b) < static_cast<C>(a) ? static_cast<C>(b) : static_cast<C>(a);
}
template <class A, class B>
  requires std::is_arithmetic_v<A> && std::is_arithmetic_v<B>
constexpr std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(b) : static_cast<C>(a);
}

// Clocks tick in host nanoseconds: enough for code that measures intervals, meaningless as GPU cycles.
long long clock64();
inline void __nanosleep(unsigned) {}
inline void __trap(std::source_location w = std::source_location::current()) {
  qrt::simt::detail::kernel_trap("__trap()", w);
}
