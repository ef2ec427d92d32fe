// Prompt attention with the scores, probabilities and output in registers (FlashAttention-2's layout), for head
// dims 64, 96, 128 and 256 over f16, bf16, fp8 and q8_0 caches (attention_prefill_tc.hpp). Against the shared-memory
// kernel beside it (attention_prefill_tc.cu), which stores S, P and O in shared memory around every wmma product and
// runs the softmax as two lanes per row over 32 columns each, here:
//   - each warp computes S = Q·Kᵀ for its 16 query rows and a tile of 64 keys into 32 accumulator registers per
//     lane, scales, masks and exponentiates them in place (a row's max and sum need two shuffles among the 4 lanes
//     that hold it), and feeds P to P·V straight from those registers: the accumulator layout of m16n8k16 is its A
//     layout, two tiles of 8 keys per 16-key step;
//   - O (16 rows × d) lives in accumulators (d / 2 floats per lane), rescaled in registers when a row's max moves;
//   - every fragment is loaded from shared memory by ldmatrix (Q's A fragments, K's B fragments, V's transposed),
//     a warp instruction per two products where 16-bit loads took 4-8 instructions per product; rows are padded by
//     8 elements, so the 8 rows of each ldmatrix fall in distinct banks;
//   - logits are kept in base 2, so a probability is one exp2, and tiles every query of a warp sees whole (below the
//     diagonal of a causal prompt) skip the per-score mask;
//   - K/V tiles are double-buffered with cp.async (below): shared memory is Q plus two K/V tiles, 85 KB at d = 128
//     (opt-in; two blocks per SM on Hopper, as the registers allow; one on an A100), 45 KB at d = 64, 99 KB at
//     d = 256 (tiles of 32 keys there); an fp8 or q8_0 cache's bytes are double-buffered instead and each tile
//     converted into one fp16 tile (83-85 KB at d = 128).
// Tiles no query of the block can see are skipped as there, and a warp skips the products of a tile none of its own
// rows can see (the diagonal tile of a causal prompt: the first warps of the block).
#include <climits>
#include <string>
#include <type_traits>

#include "kernels/attention/attention_prefill_common.cuh"
#include "kernels/attention/attention_prefill_tc.hpp"
#include "kernels/attention/kv_element.cuh"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/mma_f16.cuh"

namespace qrt::kernels {
namespace {

constexpr int kRows = 64;  // query rows per block: 16 per warp
// Keys per tile: 64, and 32 at head dim 256 (Gemma's), where a 64-key K/V stage alone would be 66 KB.
constexpr int keys_per_tile(int d) { return d >= 256 ? 32 : 64; }
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kPad = 8;  // elements after each K/V row in shared memory
constexpr int kStages = 2;   // K/V tiles in shared memory: the one being multiplied and the next, landing
constexpr int kKeySets = 3;  // tiles' key sets (KeyTile): being used, being filled, and the one before (see below)
constexpr float kLog2e = 1.4426950408889634f;

// The keys of one tile as the block sees them: positions, whether some query of the block may see each one (else
// its K and V rows are zeros in shared memory: unwritten slots may hold NaN, and 0 · NaN would poison P·V), and
// their cache rows.
template <int Keys>
struct KeyTile {
  int64_t row[Keys];  // in the cache (a paged pool's rows may outnumber any one sequence's slots)
  int32_t pos[Keys];
  unsigned char live[Keys];
};

// What the kernel makes of a cache of element C: a 16-bit cache is copied straight into the tiles the products read
// (double-buffered); an fp8 or q8_0 cache (raw: its bytes, 1 or 34/32 per element) is copied into two raw stages
// and each tile converted into one fp16 tile before its products (E4M3 to half exactly; q8_0's d · q rounded to half
// once, as Q and P are), so every cache type takes the tensor cores.
template <class C>
constexpr bool kRawCache = std::is_same_v<C, KvFp8> || std::is_same_v<C, KvQ8_0>;
template <class C>
using MmaType = std::conditional_t<kRawCache<C>, __half, C>;

// Dynamic shared memory, in this order: the raw stages (raw caches), the 16-bit K/V tiles (rows padded by kPad
// elements, so that the 8 rows of an ldmatrix fall in distinct banks), Q's tile.
template <class C, int D>
struct TileLayout {
  static constexpr int kKeys = keys_per_tile(D);
  static constexpr int kRawRow = std::is_same_v<C, KvQ8_0> ? D / 32 * 34 : D;  // one head's bytes, raw caches
  static constexpr int kPiece = std::is_same_v<C, KvQ8_0> ? 4 : 16;  // bytes per copy (q8_0 rows: 4-byte aligned)
  static constexpr uint64_t kRawStage = kRawCache<C> ? uint64_t{2} * kKeys * kRawRow : 0;  // K then V
  static constexpr uint64_t kTile = uint64_t{2} * kKeys * (D + kPad) * 2;                  // K then V
  static constexpr int kTiles = kRawCache<C> ? 1 : kStages;
  static constexpr uint64_t kTilesAt = kStages * kRawStage;
  static constexpr uint64_t kQAt = kTilesAt + kTiles * kTile;
  static constexpr uint64_t kBytes = kQAt + uint64_t{kRows} * (D + kPad) * 2;
  static_assert(kRawStage % 16 == 0 && kTile % 16 == 0, "every region starts 16-byte aligned");
};

// Whether the kernel has an instance for this cache element and head dim: head dims 64, 96 (Phi-3), 128 and 256
// (Gemma); a q8_0 head must be whole 4-byte pieces (64, 128 and 256 elements: 68, 136 and 272 bytes; 96: 102, left
// to the per-head kernel).
template <class C, int D>
constexpr bool kInstance = !std::is_same_v<C, KvQ8_0> || D / 32 * 34 % 4 == 0;

template <int D>
uint64_t shared_bytes_for(KvType type) {
  switch (type) {
    case KvType::kF16: return TileLayout<__half, D>::kBytes;
    case KvType::kBF16: return TileLayout<__nv_bfloat16, D>::kBytes;
    case KvType::kFp8: return TileLayout<KvFp8, D>::kBytes;
    case KvType::kQ8_0: return kInstance<KvQ8_0, D> ? TileLayout<KvQ8_0, D>::kBytes : 0;
    case KvType::kF32: break;
  }
  return 0;
}
uint64_t prefill_mma_shared_bytes(KvType type, int d) {  // 0: no instance
  switch (d) {
    case 64: return shared_bytes_for<64>(type);
    case 96: return shared_bytes_for<96>(type);
    case 128: return shared_bytes_for<128>(type);
    case 256: return shared_bytes_for<256>(type);
    default: return 0;
  }
}
// The static shared memory beside it (key sets, query positions and their range), at most.
constexpr uint64_t kStaticSharedBytes = sizeof(KeyTile<64>) * kKeySets + (kRows + 2) * sizeof(int32_t);

// Blocks an SM should hold, as register bounds for ptxas: three at head dim 64 (up to 170 registers; 45 KB of shared
// memory each), two above (the O accumulators alone are d / 2 registers, 128 at d = 256; left to itself ptxas chose
// 168 registers for fp8 at d = 96, three blocks, and spilled).
constexpr int blocks_per_sm(int d) { return d <= 64 ? 3 : 2; }

// grid (query tiles, heads). Lane (g, t) = (lane / 4, lane % 4) of warp w holds rows a = 16w + g and b = a + 8 of
// the block's 64: their scores at keys 8n + 2t, 8n + 2t + 1 of each 8-key slice n, and their outputs at columns
// 8m + 2t, 8m + 2t + 1. A row's running max is the same in its 4 lanes; its running sum is kept per lane (each lane's
// share of the row's probabilities) and added up once at the end.
//
// The tiles are pipelined: while the warps multiply tile i, tile i + 1's K and V rows are in flight (cp.async into
// the other stage) and tile i + 2's positions and cache rows are being loaded into registers of the first threads,
// so a tile costs its products and two barriers, not the two dependent memory round trips (positions, then rows)
// it cost when each tile was loaded after the previous one was used. Key sets rotate over three buffers: a thread
// writes tile i + 1's before the barrier that ends tile i - 1's products, which may still be reading theirs.
template <class C, int D>
__global__ void __launch_bounds__(kThreads, blocks_per_sm(D)) attention_prefill_mma_kernel(
    const float* __restrict__ q, const int32_t* __restrict__ q_pos, const void* k_cache, const void* v_cache,
    const int32_t* __restrict__ key_pos, const int32_t* __restrict__ key_count, AttentionShape s,
    float* __restrict__ out) {
  using T = MmaType<C>;
  using L = TileLayout<C, D>;
  constexpr int kKeys = L::kKeys;
  extern __shared__ __align__(16) uint4 smem_vectors[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem_vectors);
  __shared__ KeyTile<kKeys> key_sets[kKeySets];
  __shared__ int32_t q_pos_s[kRows];
  __shared__ int32_t block_q_min, block_q_max;

  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int h = static_cast<int>(blockIdx.y), group = s.heads / s.kv_heads;
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int rows = static_cast<int>(s.tokens - t0 < kRows ? s.tokens - t0 : kRows);
  const int64_t q_stride = static_cast<int64_t>(s.heads) * D, kv_stride = static_cast<int64_t>(s.kv_heads) * D;
  const int64_t kv_off = static_cast<int64_t>(h / group) * D;
  const int64_t count = *key_count;
  const int64_t keys = count < 0 ? 0 : (count > s.capacity ? s.capacity : count);

  if (tid < kRows) q_pos_s[tid] = tid < rows ? q_pos[t0 + tid] : -1;  // -1: a row past the prompt sees nothing
  __syncthreads();
  if (tid == 0) position_range(q_pos_s, 0, rows, &block_q_min, &block_q_max);
  const int ra = 16 * warp + g, rb = ra + 8;
  const int32_t qpa = q_pos_s[ra], qpb = q_pos_s[rb];
  // The warp's own rows' range, for skipping a tile none of them sees.
  int32_t w_lo, w_hi;
  position_range(q_pos_s, 16 * warp, min(16 * warp + 16, rows), &w_lo, &w_hi);

  // Q rounded to T, in shared memory after the K/V stages (rows past the prompt zero): each tile's S = Q·Kᵀ reads
  // its A fragments there by ldmatrix, 8 per tile at d = 128, where holding them took 32 registers per lane for the
  // whole kernel and left too few for the pipeline.
  T* q_s = reinterpret_cast<T*>(smem + L::kQAt);
  for (int i = tid; i < kRows * D / 2; i += kThreads) {
    const int r = i / (D / 2), c = 2 * (i % (D / 2));
    const float* src = q + (t0 + r) * q_stride + static_cast<int64_t>(h) * D + c;
    const bool has = r < rows;
    *reinterpret_cast<uint32_t*>(q_s + r * (D + kPad) + c) =
        pack16x2(kv_from_float<T>(has ? src[0] : 0.0f), kv_from_float<T>(has ? src[1] : 0.0f));
  }
  // Lane l addresses row l % 8 of matrix l / 8 of an A fragment: rows +8 for matrices 1 and 3, columns +8 for 2, 3.
  const T* q_frag = q_s + (16 * warp + lane % 8 + 8 * ((lane / 8) % 2)) * (D + kPad) + 8 * (lane / 16);

  float o[D / 8][4];
#pragma unroll
  for (int m = 0; m < D / 8; ++m) o[m][0] = o[m][1] = o[m][2] = o[m][3] = 0.0f;
  // Logits are kept in base 2 (scaled by log2 e), so that each probability is one exp2.
  const float scale2 = s.scale * kLog2e;
  const float sink = s.sinks != nullptr ? s.sinks[h] * kLog2e : -INFINITY;  // a logit with a zero value
  float max_a = sink, max_b = sink;
  float sum_a = s.sinks != nullptr && t == 0 ? 1.0f : 0.0f, sum_b = sum_a;  // the sink counted once per row
  __syncthreads();
  const int64_t q_min = block_q_min, q_max = block_q_max;

  // Thread c < kKeys holds key c of the next tile to stage: its cache row and position, loaded a tile ahead.
  int64_t next_row = 0;
  int32_t next_pos = 0;
  bool next_valid = false;
  auto fetch_key = [&](int64_t tile) {
    const int64_t j = tile * kKeys + tid;
    next_valid = tid < kKeys && j < keys;
    next_row = next_valid ? kv_row(s.pages, j) : 0;
    next_pos = next_valid ? key_pos[next_row] : 0;
  };
  // Publishes the fetched key to `set` and says whether some query of the block may see any key of the tile (the
  // block agrees through the barrier, which also makes the set visible).
  auto stage_keys = [&](KeyTile<kKeys>& set) {
    int live = 0;
    if (tid < kKeys) {
      live = next_valid && next_pos <= q_max && (s.sliding_window <= 0 || next_pos > q_min - s.sliding_window);
      set.row[tid] = next_row;
      set.pos[tid] = next_pos;
      set.live[tid] = static_cast<unsigned char>(live);
    }
    return __syncthreads_or(live);
  };
  // Starts the copies of a staged tile's K and V rows into `stage`: a 16-bit cache's rows become the tile (rows no
  // query sees become zeros), a raw cache's bytes land in its raw stage (rows no query sees are skipped: the
  // conversion writes their zeros).
  auto load_tile = [&](const KeyTile<kKeys>& set, int stage) {
    if constexpr (!kRawCache<C>) {
      const T* __restrict__ k = static_cast<const T*>(k_cache);
      const T* __restrict__ v = static_cast<const T*>(v_cache);
      T* k_st = reinterpret_cast<T*>(smem + L::kTilesAt + stage * L::kTile);
      T* v_st = k_st + kKeys * (D + kPad);
      constexpr int kPieces = kKeys * D / 8;  // 16-byte pieces of a K (or V) tile
      static_assert(L::kPiece == 16 && kPieces % kThreads == 0, "every thread copies the same number of pieces");
#pragma unroll
      for (int u = 0; u < kPieces / kThreads; ++u) {
        const int i = tid + u * kThreads, c = i / (D / 8), col = 8 * (i % (D / 8));
        T* kd = k_st + c * (D + kPad) + col;
        T* vd = v_st + c * (D + kPad) + col;
        if (set.live[c] != 0) {
          const int64_t at = set.row[c] * kv_stride + kv_off + col;
          cp_async_16(kd, k + at);
          cp_async_16(vd, v + at);
        } else {
          *reinterpret_cast<uint4*>(kd) = make_uint4(0u, 0u, 0u, 0u);  // +0.0 in both 16-bit types
          *reinterpret_cast<uint4*>(vd) = make_uint4(0u, 0u, 0u, 0u);
        }
      }
    } else {
      const auto* __restrict__ k = static_cast<const unsigned char*>(k_cache);
      const auto* __restrict__ v = static_cast<const unsigned char*>(v_cache);
      unsigned char* k_st = smem + stage * L::kRawStage;
      unsigned char* v_st = k_st + kKeys * L::kRawRow;
      // Bytes per cache row and the head's first byte: q8_0 rows are blocks of 32 elements in 34 bytes.
      const int64_t row_bytes = std::is_same_v<C, KvQ8_0> ? kv_stride / 32 * 34 : kv_stride;
      const int64_t head_at = std::is_same_v<C, KvQ8_0> ? kv_off / 32 * 34 : kv_off;
      constexpr int kRowPieces = L::kRawRow / L::kPiece;
#pragma unroll 4
      for (int i = tid; i < kKeys * kRowPieces; i += kThreads) {
        const int c = i / kRowPieces, at_row = L::kPiece * (i % kRowPieces);
        if (set.live[c] == 0) continue;
        const int64_t at = set.row[c] * row_bytes + head_at + at_row;
        if constexpr (L::kPiece == 16) {
          cp_async_16(k_st + c * L::kRawRow + at_row, k + at);
          cp_async_16(v_st + c * L::kRawRow + at_row, v + at);
        } else {
          cp_async_4(k_st + c * L::kRawRow + at_row, k + at);
          cp_async_4(v_st + c * L::kRawRow + at_row, v + at);
        }
      }
    }
  };
  // A raw cache's tile: the landed bytes of `stage` into the fp16 tile the products read, zeros for rows no query
  // sees. fp8: 16 codes per step (exact); q8_0: a block of 32 per step, d · q in fp32 rounded to half.
  auto convert_tile = [&](const KeyTile<kKeys>& set, int stage) {
    const unsigned char* k_st = smem + stage * L::kRawStage;
    T* k_t = reinterpret_cast<T*>(smem + L::kTilesAt);
    constexpr int kStep = std::is_same_v<C, KvQ8_0> ? 32 : 16;  // elements per step
    constexpr int kSteps = kKeys * D / kStep;                     // per K (or V) tile
    for (int i = tid; i < 2 * kSteps; i += kThreads) {
      const int is_v = i >= kSteps ? 1 : 0, u = i - is_v * kSteps, c = u / (D / kStep), col = kStep * (u % (D / kStep));
      const unsigned char* raw = k_st + is_v * kKeys * L::kRawRow + c * L::kRawRow;
      uint4* dst = reinterpret_cast<uint4*>(k_t + is_v * kKeys * (D + kPad) + c * (D + kPad) + col);
      uint32_t h[kStep / 2];
      if (set.live[c] == 0) {
#pragma unroll
        for (int e = 0; e < kStep / 2; ++e) h[e] = 0u;
      } else if constexpr (std::is_same_v<C, KvFp8>) {
        const uint4 codes = *reinterpret_cast<const uint4*>(raw + col);
        const uint32_t words[4] = {codes.x, codes.y, codes.z, codes.w};
#pragma unroll
        for (int e = 0; e < 8; ++e)
          h[e] = kv_fp8x2_to_half2_bits(static_cast<uint16_t>(words[e / 2] >> (16 * (e % 2))));
      } else {
        const unsigned char* block = raw + col / 32 * 34;
        const float d = quant::fp16_to_f32(*reinterpret_cast<const uint16_t*>(block));
        const auto* pairs = reinterpret_cast<const uint16_t*>(block + 2);
#pragma unroll
        for (int e = 0; e < 16; ++e) {
          const uint16_t two = pairs[e];
          h[e] = pack16x2(kv_from_float<__half>(d * static_cast<float>(static_cast<int8_t>(two & 0xFFu))),
                          kv_from_float<__half>(d * static_cast<float>(static_cast<int8_t>(two >> 8))));
        }
      }
#pragma unroll
      for (int e = 0; e < kStep / 8; ++e) dst[e] = make_uint4(h[4 * e], h[4 * e + 1], h[4 * e + 2], h[4 * e + 3]);
    }
  };

  const int64_t tiles = (keys + kKeys - 1) / kKeys;
  int use_current = 0;
  if (tiles > 0) {
    fetch_key(0);
    use_current = stage_keys(key_sets[0]);
    fetch_key(1);
    if (use_current) load_tile(key_sets[0], 0);
  }
  cp_async_commit();
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const int stage = static_cast<int>(tile % kStages);
    int use_next = 0;
    if (tile + 1 < tiles) {
      KeyTile<kKeys>& next = key_sets[(tile + 1) % kKeySets];
      use_next = stage_keys(next);
      fetch_key(tile + 2);
      if (use_next) load_tile(next, (stage + 1) % kStages);
    }
    cp_async_commit();    // a group per tile, empty or not, so that one pending group is always the next tile's
    cp_async_wait<1>();   // this tile's copies (this thread's) have landed
    __syncthreads();      // and every thread's
    if (!use_current) {   // the whole block agrees: nothing here for any of its rows
      use_current = use_next;
      continue;
    }
    use_current = use_next;
    const KeyTile<kKeys>& keys_now = key_sets[tile % kKeySets];
    if constexpr (kRawCache<C>) {
      convert_tile(keys_now, stage);
      __syncthreads();
    }
    const int32_t* key_pos_s = keys_now.pos;
    const unsigned char* key_live = keys_now.live;
    const T* k_s = reinterpret_cast<const T*>(smem + L::kTilesAt + (kRawCache<C> ? 0 : stage * L::kTile));
    const T* v_s = k_s + kKeys * (D + kPad);

    // Whether any key of the tile is visible to some row of this warp, and whether every key is visible to all of
    // them (the tiles below the diagonal of a causal prompt: no per-score mask); a key or two per lane, then the
    // warp agrees.
    bool mine = false, whole = true;
    for (int c = lane; c < kKeys; c += 32) {
      const int64_t kp = key_pos_s[c];  // 64-bit: a warp without rows has w_hi = INT_MIN
      const bool live = key_live[c] != 0;
      mine = mine || (live && kp <= w_hi && (s.sliding_window <= 0 || kp > int64_t{w_lo} - s.sliding_window));
      whole = whole && live && kp <= w_lo && (s.sliding_window <= 0 || kp > int64_t{w_hi} - s.sliding_window);
    }
    whole = __all_sync(0xffffffffu, whole);
    if (__any_sync(0xffffffffu, mine)) {
      // S = Q·Kᵀ: slice n holds keys 8n .. 8n + 7 (B's column g is key 8n + g, its k index the head dim). One
      // ldmatrix gives the B fragments of two 16-dim steps: matrix i is dims 16kk + 8i .. 16kk + 8i + 7 of the
      // slice's 8 key rows, lane l addressing row l % 8 of matrix l / 8.
      float sc[kKeys / 8][4];
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
      const T* krow = k_s + lane % 8 * (D + kPad) + 8 * (lane / 8);
#pragma unroll
      for (int kk = 0; kk < D / 16; kk += 2) {
        uint32_t qa[4], qb[4];  // Q's A fragments for dims 16kk .. 16kk + 31
        ldmatrix_x4<false>(qa, q_frag + 16 * kk);
        ldmatrix_x4<false>(qb, q_frag + 16 * kk + 16);
#pragma unroll
        for (int n = 0; n < kKeys / 8; ++n) {
          uint32_t b[4];
          ldmatrix_x4<false>(b, krow + 8 * n * (D + kPad) + 16 * kk);
          mma_16816<T>(sc[n], qa, b[0], b[1]);
          mma_16816<T>(sc[n], qb, b[2], b[3]);
        }
      }
      // Scale and cap (in base 2), mask unless the whole tile is visible, and the rows' new maxima (the 4 lanes of
      // a row agree after two shuffles).
      if (s.softcap > 0.0f) {
#pragma unroll
        for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) sc[n][e] = soft_capped(sc[n][e] * s.scale, s.softcap) * kLog2e;
      } else {
#pragma unroll
        for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) sc[n][e] *= scale2;
      }
      if (!whole) {
#pragma unroll
        for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int c = 8 * n + 2 * t + (e & 1);
            const int64_t dist = static_cast<int64_t>(e < 2 ? qpa : qpb) - key_pos_s[c];
            const bool visible =
                key_live[c] != 0 && dist >= 0 && (s.sliding_window <= 0 || dist < s.sliding_window);
            if (!visible) sc[n][e] = -INFINITY;
          }
      }
      float m_a = max_a, m_b = max_b;
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) {
        m_a = fmaxf(m_a, fmaxf(sc[n][0], sc[n][1]));
        m_b = fmaxf(m_b, fmaxf(sc[n][2], sc[n][3]));
      }
      m_a = fmaxf(m_a, __shfl_xor_sync(0xffffffffu, m_a, 1));
      m_a = fmaxf(m_a, __shfl_xor_sync(0xffffffffu, m_a, 2));
      m_b = fmaxf(m_b, __shfl_xor_sync(0xffffffffu, m_b, 1));
      m_b = fmaxf(m_b, __shfl_xor_sync(0xffffffffu, m_b, 2));
      const float corr_a = m_a == -INFINITY ? 1.0f : exp2f(max_a - m_a);  // 0 while nothing was visible before
      const float corr_b = m_b == -INFINITY ? 1.0f : exp2f(max_b - m_b);
      max_a = m_a;
      max_b = m_b;
      // P = 2^(S - max) rounded to T, packed as A fragments: 16-key step j is slices 2j (k = 2t, 2t + 1) and
      // 2j + 1 (k = 8 + 2t, 9 + 2t). The sums count the rounded values, as P·V uses them.
      uint32_t pf[kKeys / 16][4];
      float add_a = 0.0f, add_b = 0.0f;
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) {
        T p[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float m = e < 2 ? m_a : m_b;
          p[e] = kv_from_float<T>(sc[n][e] == -INFINITY ? 0.0f : exp2f(sc[n][e] - m));
          (e < 2 ? add_a : add_b) += kv_to_float(p[e]);
        }
        pf[n / 2][2 * (n % 2)] = pack16x2(p[0], p[1]);
        pf[n / 2][2 * (n % 2) + 1] = pack16x2(p[2], p[3]);
      }
      sum_a = sum_a * corr_a + add_a;
      sum_b = sum_b * corr_b + add_b;
      // O = O · correction + P·V: output slice m holds columns 8m .. 8m + 7 (B's column g is V's column 8m + g,
      // its k index the key).
      if (corr_a != 1.0f || corr_b != 1.0f) {  // a row's max moved (mostly in the first tiles)
#pragma unroll
        for (int m = 0; m < D / 8; ++m) {
          o[m][0] *= corr_a;
          o[m][1] *= corr_a;
          o[m][2] *= corr_b;
          o[m][3] *= corr_b;
        }
      }
      // One transposing ldmatrix gives the B fragments of two output slices for a 16-key step: matrix i is keys
      // 16j + 8 (i % 2) .. + 7 (rows of V) by columns 8 (m + i / 2) .. + 7.
      const T* vrow = v_s + (8 * ((lane / 8) % 2) + lane % 8) * (D + kPad) + 8 * (lane / 16);
#pragma unroll
      for (int m = 0; m < D / 8; m += 2) {
#pragma unroll
        for (int j = 0; j < kKeys / 16; ++j) {
          uint32_t b[4];
          ldmatrix_x4<true>(b, vrow + 16 * j * (D + kPad) + 8 * m);
          mma_16816<T>(o[m], pf[j], b[0], b[1]);
          mma_16816<T>(o[m + 1], pf[j], b[2], b[3]);
        }
      }
    }
  }
  cp_async_wait<0>();  // nothing in flight at exit (the last group is empty)

  // Each row's sum over its 4 lanes, then O / sum (zeros for a row that saw nothing).
  sum_a += __shfl_xor_sync(0xffffffffu, sum_a, 1);
  sum_a += __shfl_xor_sync(0xffffffffu, sum_a, 2);
  sum_b += __shfl_xor_sync(0xffffffffu, sum_b, 1);
  sum_b += __shfl_xor_sync(0xffffffffu, sum_b, 2);
  const float inv_a = sum_a > 0.0f ? 1.0f / sum_a : 0.0f, inv_b = sum_b > 0.0f ? 1.0f / sum_b : 0.0f;
  const bool vec = reinterpret_cast<uintptr_t>(out) % 8 == 0;
  for (int half = 0; half < 2; ++half) {
    const int r = half == 0 ? ra : rb;
    if (r >= rows) continue;
    const float inv = half == 0 ? inv_a : inv_b;
    float* dst = out + (t0 + r) * q_stride + static_cast<int64_t>(h) * D + 2 * t;
#pragma unroll
    for (int m = 0; m < D / 8; ++m) {
      const float x = o[m][2 * half] * inv, y = o[m][2 * half + 1] * inv;
      if (vec) {
        *reinterpret_cast<float2*>(dst + 8 * m) = make_float2(x, y);
      } else {
        dst[8 * m] = x;
        dst[8 * m + 1] = y;
      }
    }
  }
}

template <class C, int D>
Status launch(const float* q, const int32_t* q_pos, const void* k, const void* v, const int32_t* key_pos,
              const int32_t* key_count, const AttentionShape& s, float* out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((s.tokens + kRows - 1) / kRows), static_cast<unsigned>(s.heads));
  const auto kernel = attention_prefill_mma_kernel<C, D>;
  const uint64_t shared = TileLayout<C, D>::kBytes;
  QRT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
  kernel<<<grid, kThreads, shared, stream>>>(q, q_pos, k, v, key_pos, key_count, s, out);
  return cuda_launch_status("attention_prefill_mma_kernel");
}

template <int D>
Status launch_for(const float* q, const int32_t* q_pos, const void* k, const void* v, const int32_t* key_pos,
                  const int32_t* key_count, const AttentionShape& s, float* out, cudaStream_t stream) {
  switch (s.kv_type) {
    case KvType::kF16: return launch<__half, D>(q, q_pos, k, v, key_pos, key_count, s, out, stream);
    case KvType::kBF16: return launch<__nv_bfloat16, D>(q, q_pos, k, v, key_pos, key_count, s, out, stream);
    case KvType::kFp8: return launch<KvFp8, D>(q, q_pos, k, v, key_pos, key_count, s, out, stream);
    case KvType::kQ8_0:
      if constexpr (kInstance<KvQ8_0, D>) return launch<KvQ8_0, D>(q, q_pos, k, v, key_pos, key_count, s, out, stream);
      break;
    case KvType::kF32: break;
  }
  return invalid_argument("attention_prefill_mma: no instance for this cache type and head_dim");
}

}  // namespace

bool attention_prefill_mma_applies(const AttentionShape& s, const void* k, const void* v, uint64_t shared_optin) {
  // 16-byte copies of a 16-bit or fp8 head (head_dim · 1 or 2 bytes, head offsets alike); 4-byte ones of q8_0's.
  const uintptr_t align = s.kv_type == KvType::kQ8_0 ? 4 : 16;
  const uint64_t shared = prefill_mma_shared_bytes(s.kv_type, s.head_dim);
  return shared > 0 && s.tokens >= kPrefillTcMinTokens && s.heads > 0 && s.kv_heads > 0 &&
         s.heads % s.kv_heads == 0 && s.heads <= 65535 && (s.tokens + kRows - 1) / kRows <= INT_MAX &&
         reinterpret_cast<uintptr_t>(k) % align == 0 && reinterpret_cast<uintptr_t>(v) % align == 0 &&
         shared + kStaticSharedBytes <= shared_optin;
}

Status attention_prefill_mma(const float* q, const int32_t* q_pos, const void* k, const void* v,
                             const int32_t* key_pos, const int32_t* key_count, const AttentionShape& s, float* out,
                             cudaStream_t stream) {
  if (s.tokens == 0) return ok_status();
  // The device's opt-in limit is the backend's to check (it knows the device); here everything else.
  if (!attention_prefill_mma_applies(s, k, v, UINT64_MAX))
    return invalid_argument("attention_prefill_mma: needs an f16, bf16, fp8 or q8_0 cache (16-byte aligned; q8_0: "
                            "4), head_dim 64, 96, 128 or 256 (q8_0: not 96) and at least " +
                            std::to_string(kPrefillTcMinTokens) + " rows (" +
                            std::string(kv_type_name(s.kv_type)) + ", head_dim " + std::to_string(s.head_dim) + ", " +
                            std::to_string(s.tokens) + " rows)");
  switch (s.head_dim) {
    case 64: return launch_for<64>(q, q_pos, k, v, key_pos, key_count, s, out, stream);
    case 96: return launch_for<96>(q, q_pos, k, v, key_pos, key_count, s, out, stream);
    case 128: return launch_for<128>(q, q_pos, k, v, key_pos, key_count, s, out, stream);
    default: return launch_for<256>(q, q_pos, k, v, key_pos, key_count, s, out, stream);
  }
}

}  // namespace qrt::kernels
