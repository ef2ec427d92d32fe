#include "kernels/attention/kv_element.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/rope/rope.hpp"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 256;

// Turns pair i of one head vector v (token position `position`) and stores it in v, and in `mirror` (the same head
// in the KV cache, rounded to its type) when that is not null. The angle is computed in double as the CPU reference
// does.
template <class T = float>
__device__ __forceinline__ void rope_pair(float* v, int i, int32_t position, const float* __restrict__ inv_freq,
                                          const RopeShape& s, T* mirror) {
  const int half = s.rot_dim / 2;
  const double angle = static_cast<double>(position) * static_cast<double>(inv_freq[i]);
  double sn, cs;
  sincos(angle, &sn, &cs);
  const double c = cs * s.attn_factor;
  const double sv = sn * s.attn_factor;
  const int a = s.interleaved ? 2 * i : i;
  const int b = s.interleaved ? 2 * i + 1 : i + half;
  const double x0 = v[a];
  const double x1 = v[b];
  const float ra = static_cast<float>(x0 * c - x1 * sv);
  const float rb = static_cast<float>(x1 * c + x0 * sv);
  v[a] = ra;
  v[b] = rb;
  if (mirror != nullptr) {
    mirror[a] = kv_from_float<T>(ra);
    mirror[b] = kv_from_float<T>(rb);
  }
}

// One thread per rotated pair (token, head, i); the two elements of a pair belong to that thread alone.
__global__ void rope_kernel(float* x, const int32_t* __restrict__ positions, const float* __restrict__ inv_freq,
                            RopeShape s) {
  const int half = s.rot_dim / 2;
  const int64_t n = s.tokens * s.heads * half;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    const int i = static_cast<int>(idx % half);
    const int64_t head_row = idx / half;  // t * heads + h
    rope_pair<float>(x + head_row * s.head_dim, i, positions[head_row / s.heads], inv_freq, s, nullptr);
  }
}

// rope of q and k plus the KV write, one thread per item of five consecutive ranges: q pairs, k pairs (each also
// stored at the token's cache slot), k elements past rot_dim, v elements, and the slot positions. Every element is
// written by one thread, with the arithmetic of rope_kernel and kv_write_kernel.
template <class T>
__global__ void rope_kv_write_kernel(float* q, float* k, const float* __restrict__ v, int q_heads, int kv_heads,
                                     const int32_t* __restrict__ positions, const float* __restrict__ inv_freq,
                                     RopeShape s, const int32_t* __restrict__ slots, KvCacheRef cache) {
  allow_next_grid();
  wait_for_previous_grid();  // q, k, v, the positions and the cache's slots (programmatic_launch.cuh)
  T* const cache_k = static_cast<T*>(cache.k);
  T* const cache_v = static_cast<T*>(cache.v);
  const int half = s.rot_dim / 2, hd = s.head_dim, rest = s.head_dim - s.rot_dim;
  const int64_t kv_dim = static_cast<int64_t>(kv_heads) * hd;
  const int64_t n_q = s.tokens * q_heads * half, n_k = s.tokens * kv_heads * half;
  // A cache whose values are its keys (v aliasing k: DeepSeek's latent) gets no value writes.
  const int64_t n_rest = s.tokens * kv_heads * rest, n_v = cache.v == cache.k ? 0 : s.tokens * kv_dim;
  const int64_t total = n_q + n_k + n_rest + n_v + s.tokens;
  auto slot_of = [&](int64_t t) -> int64_t {
    const int64_t slot = slots[t];
    return slot < 0 || slot >= cache.capacity ? -1 : slot;
  };
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    int64_t j = idx;
    if (j < n_q) {
      const int64_t head_row = j / half;  // t * q_heads + h
      rope_pair<T>(q + head_row * hd, static_cast<int>(j % half), positions[head_row / q_heads], inv_freq, s, nullptr);
      continue;
    }
    j -= n_q;
    if (j < n_k) {
      const int64_t head_row = j / half;  // t * kv_heads + h
      const int64_t t = head_row / kv_heads, slot = slot_of(t);
      T* mirror = slot < 0 ? nullptr : cache_k + slot * kv_dim + (head_row % kv_heads) * hd;
      rope_pair(k + head_row * hd, static_cast<int>(j % half), positions[t], inv_freq, s, mirror);
      continue;
    }
    j -= n_k;
    if (j < n_rest) {
      const int64_t head_row = j / rest;
      const int64_t t = head_row / kv_heads, slot = slot_of(t);
      const int64_t e = (head_row % kv_heads) * hd + s.rot_dim + j % rest;
      if (slot >= 0) cache_k[slot * kv_dim + e] = kv_from_float<T>(k[t * kv_dim + e]);
      continue;
    }
    j -= n_rest;
    if (j < n_v) {
      const int64_t t = j / kv_dim, slot = slot_of(t);
      if (slot >= 0) cache_v[slot * kv_dim + j % kv_dim] = kv_from_float<T>(v[j]);
      continue;
    }
    j -= n_v;
    const int64_t slot = slot_of(j);
    if (slot >= 0) cache.positions[slot] = positions[j];
  }
}

Status check_shape(const char* op, const RopeShape& s) {
  if (s.tokens < 0 || s.heads <= 0 || s.head_dim <= 0 || s.rot_dim <= 0 || s.rot_dim % 2 != 0 ||
      s.rot_dim > s.head_dim)
    return invalid_argument(std::string(op) + ": bad shape (tokens " + std::to_string(s.tokens) + ", heads " +
                            std::to_string(s.heads) + ", head_dim " + std::to_string(s.head_dim) + ", rot_dim " +
                            std::to_string(s.rot_dim) + ")");
  return ok_status();
}

}  // namespace

Status rope(float* x, const int32_t* positions, const float* inv_freq, const RopeShape& s, cudaStream_t stream) {
  QRT_TRY(check_shape("rope", s));
  const int64_t pairs = s.tokens * s.heads * (s.rot_dim / 2);
  if (pairs == 0) return ok_status();
  rope_kernel<<<grid_for(pairs, kThreads), kThreads, 0, stream>>>(x, positions, inv_freq, s);
  return cuda_launch_status("rope_kernel");
}

Status rope_kv_write(float* q, float* k, const float* v, int q_heads, int kv_heads, const int32_t* positions,
                     const float* inv_freq, const RopeShape& shape, const int32_t* slots, KvCacheRef cache,
                     cudaStream_t stream) {
  RopeShape s = shape;
  s.heads = q_heads;
  QRT_TRY(check_shape("rope_kv_write (q)", s));
  s.heads = kv_heads;
  QRT_TRY(check_shape("rope_kv_write (k)", s));
  if (cache.capacity < 0) return invalid_argument("rope_kv_write: negative cache capacity");
  const int64_t kv_dim = static_cast<int64_t>(kv_heads) * s.head_dim;
  const int64_t per_token = static_cast<int64_t>(q_heads) * (s.rot_dim / 2) +
                            static_cast<int64_t>(kv_heads) * (s.rot_dim / 2 + s.head_dim - s.rot_dim) + kv_dim + 1;
  const int64_t total = s.tokens * per_token;
  if (total == 0) return ok_status();
  if (cache.type == KvType::kQ8_0) {
    // A Q8_0 block's scale needs all 32 rotated elements first: rope of q and of k, then the block writer. Three
    // launches where the element types take one; the cache is a quarter of f32's size either way.
    s.heads = q_heads;
    QRT_TRY(rope(q, positions, inv_freq, s, stream));
    s.heads = kv_heads;
    QRT_TRY(rope(k, positions, inv_freq, s, stream));
    return kv_write(k, v, slots, positions, s.tokens, kv_dim, cache.k, cache.v, cache.type, cache.positions,
                    cache.capacity, stream);
  }
  return with_kv_element(cache.type, [&](auto element) {
    using T = decltype(element);
    if constexpr (std::is_same_v<T, KvQ8_0>) {
      return internal_error("rope_kv_write: q8_0 is written above");
    } else {
      return launch_programmatic("rope_kv_write_kernel", rope_kv_write_kernel<T>, grid_for(total, kThreads), kThreads,
                                 0, stream, q, k, v, q_heads, kv_heads, positions, inv_freq, s, slots, cache);
    }
  });
}

}  // namespace qrt::kernels
