// KV caches of every element type (f32, f16, bf16, fp8, q8_0) on the CUDA backend against the CPU backend: the
// stored bits after kv_write and rope_kv_write, known encodings of rounding ties and out-of-range values, and
// attention (the split decode kernel and the per-head kernel) over the same bits on both backends.
#include <cmath>
#include <cstring>
#include <limits>

#include "backend_pair.hpp"
#include "kernels/quant/common.hpp"
#include "kernels/quant/mx.hpp"

#if defined(QRT_SIMT)
#include "simt/simt.hpp"
#endif

namespace qrt {
namespace {

using test::Dual;

class CudaKvTypes : public test::BackendPair {
 protected:
  // One K or V array of `type` on both backends: [capacity, kv_dim] elements.
  struct DualKv {
    KvView cpu, gpu;
  };
  DualKv kv_array(KvType type, int64_t capacity, int64_t kv_dim) {
    const int64_t row_bytes = kv_row_bytes(type, kv_dim);
    const Dual<uint8_t> bytes = alloc<uint8_t>(capacity, row_bytes);
    // Unwritten GPU slots hold 0xFF bytes (NaN in every type), the CPU's zeros.
    std::fill(bytes.cpu.data, bytes.cpu.data + bytes.cpu.numel(), uint8_t{0});
    const std::vector<uint8_t> ff(static_cast<size_t>(bytes.gpu.numel()), 0xFF);
    EXPECT_TRUE(gpu_->upload(ff.data(), bytes.gpu.data, ff.size()).ok());
    return {KvView{bytes.cpu.data, capacity, kv_dim, type}, KvView{bytes.gpu.data, capacity, kv_dim, type}};
  }
  // The same bits on both backends: `values` rounded to `type` on the host.
  DualKv kv_values(KvType type, const std::vector<float>& values, int64_t capacity, int64_t kv_dim) {
    const std::vector<uint8_t> bits = test::kv_type_bits(type, values, static_cast<size_t>(capacity * kv_dim));
    const Dual<uint8_t> d = input_values(bits, capacity, kv_row_bytes(type, kv_dim));
    return {KvView{d.cpu.data, capacity, kv_dim, type}, KvView{d.gpu.data, capacity, kv_dim, type}};
  }
  std::vector<uint8_t> cpu_bytes(const KvView& v) {
    const auto* p = static_cast<const uint8_t*>(v.data);
    return std::vector<uint8_t>(p, p + v.bytes());
  }
  std::vector<uint8_t> gpu_bytes(const KvView& v) {
    std::vector<uint8_t> out(v.bytes());
    EXPECT_TRUE(gpu_->download(v.data, out.data(), out.size()).ok());
    return out;
  }
  static uint16_t element16(const std::vector<uint8_t>& bytes, int64_t i) {
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    return h;
  }
};

constexpr KvType kAllTypes[] = {KvType::kF32, KvType::kF16, KvType::kBF16, KvType::kFp8, KvType::kQ8_0};

// kv_write rounds each element to nearest even on the GPU exactly as the CPU backend does; a few values with known
// encodings pin the rounding independently of both (ties, subnormals, the f16 range).
TEST_F(CudaKvTypes, KvWriteStoresTheCpuBitsAndKnownEncodings) {
  const int64_t capacity = 5, kv_dim = 96;
  // Row 0: special values, the rest random (normal, times 3).
  std::vector<float> k = test::random_normal(static_cast<size_t>(3 * kv_dim), 11, 3.0f);
  const float specials[] = {
      1.0f + 0x1p-11f,      // f16 tie between 1 and 1 + 2^-10: to even, 1.0 (0x3C00)
      1.0f + 3 * 0x1p-11f,  // f16 tie: to even, 1 + 2^-9 (0x3C02)
      70000.0f,             // past f16's 65504: +inf (0x7C00); bf16 0x4789 (69888); fp8 saturates to 448 (0x7E)
      -1e-6f,               // an f16 subnormal: -17 * 2^-24 (0x8011); below fp8's 2^-10: -0 (0x80)
      1.0f + 0x1p-8f,       // bf16 tie between 1 and 1 + 2^-7: to even, 1.0 (0x3F80)
      1.0f + 3 * 0x1p-8f,   // bf16 tie: to even, 1 + 2^-6 (0x3F82)
  };
  std::copy(std::begin(specials), std::end(specials), k.begin());
  // Q8_0 block 1 of row 0: amax 127 makes d = 1, so 2.5, -2.5 and 0.5 are ties, rounded away from zero.
  const float q8_ties[] = {127.0f, 2.5f, -2.5f, 0.5f};
  std::copy(std::begin(q8_ties), std::end(q8_ties), k.begin() + 32);
  const std::vector<float> v = test::random_normal(static_cast<size_t>(3 * kv_dim), 12);
  const auto kin = input_values(k, 3, kv_dim), vin = input_values(v, 3, kv_dim);
  const auto slots = input_values(std::vector<int32_t>{4, 0, 2}, 3, 1);
  const auto positions = input_values(std::vector<int32_t>{40, 10, 30}, 3, 1);
  for (KvType type : kAllTypes) {
    const std::string what(kv_type_name(type));
    const DualKv kc = kv_array(type, capacity, kv_dim), vc = kv_array(type, capacity, kv_dim);
    const auto cache_pos = input_values(std::vector<int32_t>(capacity, -1), capacity, 1);
    const KvLayerView cpu_cache{kc.cpu, vc.cpu, cache_pos.cpu, {}}, gpu_cache{kc.gpu, vc.gpu, cache_pos.gpu, {}};
    ASSERT_TRUE(cpu_.kv_write(cpu_cache, slots.cpu, positions.cpu, kin.cpu, vin.cpu).ok()) << what;
    const Status s = gpu_->kv_write(gpu_cache, slots.gpu, positions.gpu, kin.gpu, vin.gpu);
    ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
    const auto gk = gpu_bytes(kc.gpu), gv = gpu_bytes(vc.gpu), ck = cpu_bytes(kc.cpu), cv = cpu_bytes(vc.cpu);
    const size_t row = static_cast<size_t>(kv_row_bytes(type, kv_dim));
    for (int64_t slot : {0, 2, 4}) {
      const size_t at = static_cast<size_t>(slot) * row;
      EXPECT_TRUE(std::equal(gk.begin() + at, gk.begin() + at + row, ck.begin() + at)) << what << " k slot " << slot;
      EXPECT_TRUE(std::equal(gv.begin() + at, gv.begin() + at + row, cv.begin() + at)) << what << " v slot " << slot;
    }
    EXPECT_EQ(gpu_values(cache_pos.gpu), (std::vector<int32_t>{10, -1, 30, -1, 40})) << what;
    const int64_t first = 4 * kv_dim;  // row 0 of k went to slot 4
    if (type == KvType::kF16) {
      const uint16_t want[] = {0x3C00, 0x3C02, 0x7C00, 0x8011};
      for (int i = 0; i < 4; ++i) EXPECT_EQ(element16(gk, first + i), want[i]) << "f16 special " << i;
    } else if (type == KvType::kBF16) {
      EXPECT_EQ(element16(gk, first + 2), 0x4789) << "bf16 of 70000";
      EXPECT_EQ(element16(gk, first + 4), 0x3F80) << "bf16 tie to even (down)";
      EXPECT_EQ(element16(gk, first + 5), 0x3F82) << "bf16 tie to even (up)";
    } else if (type == KvType::kFp8) {
      EXPECT_EQ(gk[static_cast<size_t>(first)], 0x38) << "fp8 of 1 + 2^-11: 1.0";
      EXPECT_EQ(gk[static_cast<size_t>(first + 2)], 0x7E) << "fp8 of 70000: saturated at 448";
      EXPECT_EQ(gk[static_cast<size_t>(first + 3)], 0x80) << "fp8 of -1e-6: -0";
    } else if (type == KvType::kQ8_0) {
      // Block 0 of the row in slot 4: amax 70000, d = 70000 / 127 = 551.18, stored as the f16 551.0 (0x604E);
      // codes round(x / d): 70000 -> 127, 1.0 -> 0, -1e-6 -> 0.
      const size_t at = 4 * row;
      EXPECT_EQ(gk[at] | gk[at + 1] << 8, 0x604E) << "q8_0 scale";
      EXPECT_EQ(gk[at + 2 + 2], 127) << "q8_0 code of 70000";
      EXPECT_EQ(gk[at + 2 + 0], 0) << "q8_0 code of 1.0";
      EXPECT_EQ(gk[at + 2 + 3], 0) << "q8_0 code of -1e-6";
      const size_t at1 = at + 34;  // block 1
      EXPECT_EQ(gk[at1] | gk[at1 + 1] << 8, 0x3C00) << "q8_0 scale 1.0";
      EXPECT_EQ(gk[at1 + 2 + 0], 127);
      EXPECT_EQ(gk[at1 + 2 + 1], 3) << "q8_0 tie 2.5 -> 3";
      EXPECT_EQ(gk[at1 + 2 + 2], 0xFD) << "q8_0 tie -2.5 -> -3";
      EXPECT_EQ(gk[at1 + 2 + 3], 1) << "q8_0 tie 0.5 -> 1";
    }
  }
}

// rope_kv_write into a 16-bit, fp8 or q8_0 cache: one kernel (q8_0: three, rope, rope and the block writer), bit for
// bit the CUDA backend's rope + rope + kv_write, and the CPU backend's fused op up to the rare element whose fp32
// rope differs by an ulp across a rounding boundary.
TEST_F(CudaKvTypes, RopeKvWriteRoundsTheRotatedKeys) {
  const int heads = 8, kv_heads = 2, hd = 64;
  const int64_t tokens = 3, capacity = 3, q_dim = heads * hd, kv_dim = kv_heads * hd;  // every slot written
  std::vector<float> inv(hd / 2);
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / hd));
  const auto inv_freq = input_values(inv, hd / 2, 1);
  const RopeParams cp{RopeLayout::kHalfSplit, hd, hd, 1.0f, inv_freq.cpu};
  const RopeParams gp{RopeLayout::kHalfSplit, hd, hd, 1.0f, inv_freq.gpu};
  const auto positions = input_values(std::vector<int32_t>{7, 300, 12345}, tokens, 1);
  const auto slots = input_values(std::vector<int32_t>{1, 2, 0}, tokens, 1);
  for (KvType type : {KvType::kF16, KvType::kBF16, KvType::kFp8, KvType::kQ8_0}) {
    const std::string what(kv_type_name(type));
    const auto q = input(tokens, q_dim, 60), k = input(tokens, kv_dim, 61), v = input(tokens, kv_dim, 62);
    const auto q2 = input_values(gpu_values(q.gpu), tokens, q_dim);
    const auto k2 = input_values(gpu_values(k.gpu), tokens, kv_dim);
    const DualKv kc = kv_array(type, capacity, kv_dim), vc = kv_array(type, capacity, kv_dim);
    const DualKv kc2 = kv_array(type, capacity, kv_dim), vc2 = kv_array(type, capacity, kv_dim);
    const auto cache_pos = input_values(std::vector<int32_t>(capacity, 0), capacity, 1);
    const auto cache_pos2 = input_values(std::vector<int32_t>(capacity, 0), capacity, 1);
    const KvLayerView cpu_cache{kc.cpu, vc.cpu, cache_pos.cpu, {}}, gpu_cache{kc.gpu, vc.gpu, cache_pos.gpu, {}};
    ASSERT_TRUE(cpu_.rope_kv_write(q.cpu, k.cpu, v.cpu, heads, kv_heads, positions.cpu, cp, cpu_cache, slots.cpu).ok());
#if defined(QRT_SIMT)
    const simt::StreamCounters start = simt::device_counters(0);
#endif
    const Status s = gpu_->rope_kv_write(q.gpu, k.gpu, v.gpu, heads, kv_heads, positions.gpu, gp, gpu_cache, slots.gpu);
    ASSERT_TRUE(s.ok()) << s.to_string();
#if defined(QRT_SIMT)
    EXPECT_EQ((simt::device_counters(0) - start).kernel_launches, type == KvType::kQ8_0 ? 3u : 1u) << what;
#endif
    expect_close(q, 1e-5, what + ": q");
    expect_close(k, 1e-5, what + ": k (fp32 in the activations)");
    // The cache against the CPU's, decoded: equal but for a flipped last bit here and there.
    auto decode = [&](const std::vector<uint8_t>& bytes) {
      std::vector<float> out(static_cast<size_t>(capacity * kv_dim));
      if (type == KvType::kQ8_0) {
        for (size_t b = 0; b < out.size() / kKvQ8Block; ++b)
          quant::decode_q8_0_block(bytes.data() + b * kKvQ8BlockBytes, out.data() + b * kKvQ8Block);
        return out;
      }
      for (size_t i = 0; i < out.size(); ++i) {
        if (type == KvType::kFp8) {
          out[i] = quant::e4m3_to_f32(bytes[i]);
          continue;
        }
        const uint16_t h = element16(bytes, static_cast<int64_t>(i));
        out[i] = type == KvType::kF16 ? quant::fp16_to_f32(h) : quant::bf16_to_f32(h);
      }
      return out;
    };
    const auto gk = decode(gpu_bytes(kc.gpu)), ck = decode(cpu_bytes(kc.cpu));
    // A flipped last bit is 2^-11 of an f16, 2^-8 of a bf16 and 2^-4 of an fp8 element; a q8_0 code one step of
    // 1/127 of its block's largest element.
    const double flip_bound = type == KvType::kFp8 || type == KvType::kQ8_0 ? 2e-2 : 1e-4;
    EXPECT_LE(test::relative_l2(gk.data(), ck.data(), gk.size()), flip_bound) << what << ": cache k";
    EXPECT_EQ(gpu_bytes(vc.gpu), cpu_bytes(vc.cpu)) << what << ": cache v (rounded from the same floats)";
    // The unfused CUDA ops write the same bits.
    const KvLayerView gpu_cache2{kc2.gpu, vc2.gpu, cache_pos2.gpu, {}};
    ASSERT_TRUE(gpu_->rope(q2.gpu, heads, positions.gpu, gp).ok());
    ASSERT_TRUE(gpu_->rope(k2.gpu, kv_heads, positions.gpu, gp).ok());
    ASSERT_TRUE(gpu_->kv_write(gpu_cache2, slots.gpu, positions.gpu, k2.gpu, v.gpu).ok());
    EXPECT_EQ(gpu_bytes(kc.gpu), gpu_bytes(kc2.gpu)) << what << ": fused cache k differs from rope + kv_write";
    EXPECT_EQ(gpu_bytes(vc.gpu), gpu_bytes(vc2.gpu)) << what;
    EXPECT_EQ(gpu_values(cache_pos.gpu), gpu_values(cache_pos2.gpu)) << what;
  }
}

// Attention over the same 16-bit bits on both backends (the CPU widens them to float): the split decode kernel
// (with a workspace) and the per-head kernel (without), at lengths 1, 31, 32, 33 and 4097, GQA groups of 1, 4 and
// 8, a sliding window, prompt rows, and invisible slots that hold NaN.
TEST_F(CudaKvTypes, AttentionOverEveryCacheTypeMatchesCpu) {
  struct Case {
    int heads, kv_heads, head_dim, window;
    int64_t tokens, keys, capacity;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Case& c : {Case{8, 8, 64, 0, 1, 1, 8}, Case{32, 8, 128, 0, 1, 31, 64}, Case{32, 8, 128, 0, 1, 32, 32},
                        Case{32, 8, 128, 0, 1, 33, 300}, Case{32, 4, 128, 0, 1, 4097, 4097},
                        Case{16, 2, 64, 7, 1, 300, 512}, Case{8, 1, 64, 0, 5, 40, 48}}) {
    for (KvType type : kAllTypes) {
      const std::string what = std::string(kv_type_name(type)) + " heads " + std::to_string(c.heads) + "/" +
                               std::to_string(c.kv_heads) + " hd " + std::to_string(c.head_dim) + " window " +
                               std::to_string(c.window) + " tokens " + std::to_string(c.tokens) + " keys " +
                               std::to_string(c.keys);
      const int64_t kv_dim = int64_t{c.kv_heads} * c.head_dim, q_dim = int64_t{c.heads} * c.head_dim;
      std::vector<float> k = test::random_normal(static_cast<size_t>(c.capacity * kv_dim), 170 + c.keys);
      std::vector<float> v = test::random_normal(static_cast<size_t>(c.capacity * kv_dim), 180 + c.keys);
      std::vector<int32_t> pos(static_cast<size_t>(c.capacity));
      for (int64_t j = 0; j < c.capacity; ++j) {
        const bool future = j % 7 == 5;  // a later token's slot, not written yet: invisible, NaN
        pos[static_cast<size_t>(j)] = static_cast<int32_t>(future ? 100000 + j : j);
        if (future || j >= c.keys)
          for (int64_t d = 0; d < kv_dim; ++d)
            k[static_cast<size_t>(j * kv_dim + d)] = v[static_cast<size_t>(j * kv_dim + d)] = nan;
      }
      const DualKv kc = kv_values(type, k, c.capacity, kv_dim), vc = kv_values(type, v, c.capacity, kv_dim);
      const auto positions = input_values(pos, c.capacity, 1);
      std::vector<int32_t> qp;
      for (int64_t t = 0; t < c.tokens; ++t) qp.push_back(static_cast<int32_t>(c.keys - 1 - t * 3));
      const auto q_pos = input_values(qp, c.tokens, 1);
      const auto q = input(c.tokens, q_dim, 190 + c.keys);
      const auto key_count = input_values(std::vector<int32_t>{static_cast<int32_t>(c.keys)}, 1, 1);
      const AttentionParams p{c.heads, c.kv_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                              c.window};
      const auto want = output(c.tokens, q_dim);
      ASSERT_TRUE(cpu_.attention(q.cpu, q_pos.cpu, KvLayerView{kc.cpu, vc.cpu, positions.cpu, {}}, key_count.cpu, p,
                                 want.cpu)
                      .ok());
      const uint64_t bytes = gpu_->attention_workspace_bytes(c.tokens, p, c.capacity);
      ASSERT_GT(bytes, 0u) << what;
      auto workspace = allocate_scoped(*gpu_, bytes);
      ASSERT_TRUE(workspace.ok());
      for (bool split : {true, false}) {
        const auto out = output(c.tokens, q_dim);
        std::copy(want.cpu.data, want.cpu.data + want.cpu.numel(), out.cpu.data);
        const KvLayerView cache{kc.gpu, vc.gpu, positions.gpu, split ? workspace->buffer() : DeviceBuffer{}};
#if defined(QRT_SIMT)
        const simt::StreamCounters before = simt::device_counters(0);
#endif
        const Status s = gpu_->attention(q.gpu, q_pos.gpu, cache, key_count.gpu, p, out.gpu);
        ASSERT_TRUE(s.ok()) << s.to_string();
#if defined(QRT_SIMT)
        EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, split ? 2u : 1u) << what;
#endif
        expect_close(out, 1e-5, (split ? "split attention " : "attention ") + what);
      }
    }
  }
}

// A prompt over a 16-bit cache runs on the tensor cores (attention_prefill_tc.hpp): one kernel, against the CPU
// over the same bits. Q and the probabilities are rounded to the cache's type there (2^-11 relative for f16, 2^-8
// for bf16), hence the bounds (measured under SIMT: 1.6-2.7e-4 for f16, 1.4-2.1e-3 for bf16). Prompts of 16..200
// rows (query tiles of 64: whole, partial, several), GQA groups of 1, 4 and 8, head dims 64, 96, 128 and 256, a
// sliding window, keys cached before the prompt, and slots no query sees holding NaN; a head dim that is not a
// multiple of 16 takes the per-head kernel instead; attention sinks, and a soft cap; key tiles every query of a warp
// sees whole (the register kernel's unmasked path: 150 rows, with and without the cap). Both tensor-core kernels: S,
// P and O in registers (head dims 64, 96, 128 and 256, the default) and in shared memory (every head dim). fp8 and
// q8_0 caches take the register kernel too, their tiles converted to fp16 in shared memory.
TEST_F(CudaKvTypes, PromptAttentionOnTensorCoresMatchesCpu) {
  struct Case {
    int heads, kv_heads, head_dim, window;
    int64_t cached, tokens;
    bool tensor_cores;
    float softcap = 0.0f;
    bool sinks = false;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Case& c : {Case{8, 8, 64, 0, 0, 16, true}, Case{32, 8, 128, 0, 40, 33, true},
                        Case{16, 2, 64, 0, 0, 64, true}, Case{8, 1, 128, 0, 100, 65, true},
                        Case{4, 2, 256, 0, 3, 80, true}, Case{8, 2, 64, 24, 30, 200, true},
                        Case{4, 2, 72, 0, 10, 20, false}, Case{8, 2, 64, 16, 20, 90, true, 0.0f, true},
                        Case{4, 4, 128, 0, 0, 70, true, 2.0f, false}, Case{8, 2, 128, 0, 0, 150, true},
                        Case{8, 2, 96, 0, 10, 100, true}}) {
    for (const auto& [type, registers] : {std::pair{KvType::kF16, true}, {KvType::kBF16, true},
                                          {KvType::kF16, false}, {KvType::kBF16, false}, {KvType::kFp8, true},
                                          {KvType::kQ8_0, true}}) {
      if (!kv_row_fits(type, int64_t{c.kv_heads} * c.head_dim)) continue;  // q8_0 rows are blocks of 32
      gpu_->set_prefill_attention_registers(registers);
      const std::string what = std::string(registers ? "registers " : "shared ") + std::string(kv_type_name(type)) +
                               (c.sinks ? " sinks" : "") + (c.softcap > 0.0f ? " softcap" : "") + " heads " +
                               std::to_string(c.heads) + "/" +
                               std::to_string(c.kv_heads) + " hd " + std::to_string(c.head_dim) + " window " +
                               std::to_string(c.window) + " cached " + std::to_string(c.cached) + " tokens " +
                               std::to_string(c.tokens);
      const int64_t kv_dim = int64_t{c.kv_heads} * c.head_dim, q_dim = int64_t{c.heads} * c.head_dim;
      const int64_t keys = c.cached + c.tokens, capacity = keys + 70;  // a whole unused tile past the keys
      std::vector<float> k = test::random_normal(static_cast<size_t>(capacity * kv_dim), 270 + keys);
      std::vector<float> v = test::random_normal(static_cast<size_t>(capacity * kv_dim), 280 + keys);
      std::vector<int32_t> pos(static_cast<size_t>(capacity));
      for (int64_t j = 0; j < capacity; ++j) {
        // Slot j holds position j, except every 11th cached slot, which belongs to a later token: invisible, NaN.
        const bool future = j < c.cached && j % 11 == 4;
        pos[static_cast<size_t>(j)] = static_cast<int32_t>(future ? 100000 + j : j);
        if (future || j >= keys)
          for (int64_t e = 0; e < kv_dim; ++e)
            k[static_cast<size_t>(j * kv_dim + e)] = v[static_cast<size_t>(j * kv_dim + e)] = nan;
      }
      const DualKv kc = kv_values(type, k, capacity, kv_dim), vc = kv_values(type, v, capacity, kv_dim);
      const auto positions = input_values(pos, capacity, 1);
      const auto q = input(c.tokens, q_dim, 290 + keys);
      const auto key_count = input_values(std::vector<int32_t>{static_cast<int32_t>(keys)}, 1, 1);
      // gpt-oss's sinks (one logit per head, N(0, 1)) and Gemma 2's soft cap (2: most scores are capped hard).
      const auto sinks = input(1, c.heads, 300 + keys);
      AttentionParams p{c.heads, c.kv_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.window,
                        c.softcap};
      AttentionParams p_gpu = p;
      if (c.sinks) {
        p.sinks = sinks.cpu.data;
        p_gpu.sinks = sinks.gpu.data;
      }
      const auto out = output(c.tokens, q_dim);
      const ConstI32View cpu_q_pos = positions.cpu.row_range(c.cached, c.tokens);
      const ConstI32View gpu_q_pos = positions.gpu.row_range(c.cached, c.tokens);
      ASSERT_TRUE(
          cpu_.attention(q.cpu, cpu_q_pos, KvLayerView{kc.cpu, vc.cpu, positions.cpu, {}}, key_count.cpu, p, out.cpu)
              .ok());
#if defined(QRT_SIMT)
      const simt::StreamCounters before = simt::device_counters(0);
#endif
      const Status s =
          gpu_->attention(q.gpu, gpu_q_pos, KvLayerView{kc.gpu, vc.gpu, positions.gpu, {}}, key_count.gpu, p_gpu,
                          out.gpu);
      ASSERT_TRUE(s.ok()) << s.to_string();
#if defined(QRT_SIMT)
      EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, 1u) << what;
#endif
      // fp8 (head dims 64, 96, 128, 256) and q8_0 (not 96) take the register kernel over fp16 tiles of their values:
      // fp8's exact, q8_0's rounded once more; other head dims the per-head kernel in fp32.
      const bool raw = type == KvType::kFp8 || type == KvType::kQ8_0;
      const bool registers_take = c.head_dim == 64 || c.head_dim == 128 || c.head_dim == 256 ||
                                  (c.head_dim == 96 && type != KvType::kQ8_0);
      const bool fp32 = !c.tensor_cores || (raw && !registers_take);
      const double bound = fp32 ? 1e-5 : type == KvType::kBF16 ? 8e-3 : type == KvType::kQ8_0 ? 2e-3 : 1e-3;
      expect_close(out, bound, "prompt attention " + what);
    }
  }
}

// The cache's K and V must have one type; a mismatch is refused by both backends before any kernel runs.
TEST_F(CudaKvTypes, MixedKeyAndValueTypesAreRefused) {
  const int64_t capacity = 4, kv_dim = 32;
  const DualKv k16 = kv_array(KvType::kF16, capacity, kv_dim), v32 = kv_array(KvType::kF32, capacity, kv_dim);
  const auto positions = input_values(std::vector<int32_t>(capacity, 0), capacity, 1);
  const auto rows = input(1, kv_dim, 5);
  const auto slot = input_values(std::vector<int32_t>{0}, 1, 1);
  for (Backend* b : {static_cast<Backend*>(&cpu_), static_cast<Backend*>(gpu_.get())}) {
    const bool cpu = b == &cpu_;
    const KvLayerView cache{cpu ? k16.cpu : k16.gpu, cpu ? v32.cpu : v32.gpu, cpu ? positions.cpu : positions.gpu, {}};
    const Status s = b->kv_write(cache, cpu ? slot.cpu : slot.gpu, cpu ? slot.cpu : slot.gpu, cpu ? rows.cpu : rows.gpu,
                                 cpu ? rows.cpu : rows.gpu);
    EXPECT_FALSE(s.ok()) << b->name();
    EXPECT_NE(s.message().find("differ in type"), std::string::npos) << s.to_string();
  }
}

}  // namespace
}  // namespace qrt
