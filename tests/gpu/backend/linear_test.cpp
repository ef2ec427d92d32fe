// linear and linear_experts on the CUDA backend against the CPU backend, for every format (the decode-only ones from
// random blocks): batches 1, 3 and 8 take the fused GEMV, 33 the fp16 dequantize + cuBLAS path (also forced through
// many small tiles). The GEMV accumulates in fp32 against the CPU's double: relative L2 <= 1e-5, or 5e-5 where it
// quantizes x to two int8 limbs (gemv_tolerance); the GEMM rounds its inputs to fp16 (kGemmTolerance). Also the
// backend's memory and weight bookkeeping, its errors, and two backends living in one process.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>

#include "backend_pair.hpp"
#include "kernels/linear/gemv_batch.hpp"

#if defined(QRT_SIMT)
#include "simt/simt.hpp"
#endif

namespace qrt {
namespace {

using test::BackendPair;

class CudaLinear : public BackendPair, public testing::WithParamInterface<quant::FormatId> {};

TEST_P(CudaLinear, EveryBatchPathMatchesCpu) {
  const quant::FormatId format = GetParam();
  const int64_t out = 75, in = 512;  // out not a multiple of the 4 rows a GEMV block covers
  const auto values = test::random_normal(static_cast<size_t>(out * in), 2000);
  auto w = test::quantized_tensor(format, {out, in}, values, test::default_params(format));
  const auto weight_pair = weight(w->tensor);
  ASSERT_TRUE(weight_pair.gpu.valid());
  const auto bias = f32_weight({out}, 2001, 0.5f);
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{33}}) {
    for (bool with_bias : {false, true}) {
      const auto x = input(n, in, 2100 + n);
      const auto y = output(n, out);
      const WeightHandle cb = with_bias ? bias.cpu : WeightHandle{}, gb = with_bias ? bias.gpu : WeightHandle{};
      ASSERT_TRUE(cpu_.linear(x.cpu, weight_pair.cpu, cb, y.cpu).ok());
      Status s = gpu_->linear(x.gpu, weight_pair.gpu, gb, y.gpu);
      ASSERT_TRUE(s.ok()) << s.to_string();
      expect_close(y, n > kernels::kGemvMaxBatch ? kGemmTolerance : gemv_tolerance(format, in),
                   std::string(quant::format_name(format)) + " batch " + std::to_string(n) + (with_bias ? " + bias" : ""));
    }
  }
  // The GEMM path in tiles of 7 rows of W (the last one partial), reusing one scratch buffer.
  gpu_->set_gemm_tile_bytes(7 * in * 2);  // 7 rows of fp16
  const auto x = input(40, in, 2200);
  const auto y = output(40, out);
  ASSERT_TRUE(cpu_.linear(x.cpu, weight_pair.cpu, bias.cpu, y.cpu).ok());
  ASSERT_TRUE(gpu_->linear(x.gpu, weight_pair.gpu, bias.gpu, y.gpu).ok());
  expect_close(y, kGemmTolerance, std::string(quant::format_name(format)) + " in 7-row tiles");
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaLinear, testing::ValuesIn(quant::kAllFormats), test::format_test_name);

// set_half_weights (QRT_CUDA_HALF_WEIGHTS=1): batches above the GEMV's read an fp16 copy of W made at upload, in one
// GEMM, and give what the tiled path gives; the copy costs 2 bytes per weight, nothing for an F16 weight, which
// cuBLAS reads as it is with or without the setting.
class CudaHalfWeights : public BackendPair, public testing::WithParamInterface<quant::FormatId> {};

TEST_P(CudaHalfWeights, MatchTheTiledPathAndTheCpu) {
  const quant::FormatId format = GetParam();
  const int64_t out = 75, in = 512;
  auto w = test::quantized_tensor(format, {out, in}, test::random_normal(static_cast<size_t>(out * in), 2700),
                                  test::default_params(format));
  const auto tiled = weight(w->tensor);
  ASSERT_TRUE(tiled.gpu.valid());
  const uint64_t free_before = gpu_->memory_available()->free_bytes;
  gpu_->set_half_weights(true);
  const auto half = weight(w->tensor);
  gpu_->set_half_weights(false);
  ASSERT_TRUE(half.gpu.valid());
#if defined(QRT_SIMT)  // a device counts free memory in pages; the SIMT layer by the byte
  const uint64_t used = free_before - gpu_->memory_available()->free_bytes;
  const uint64_t packed = w->tensor.bytes(), copy = static_cast<uint64_t>(out * in) * 2;
  if (format == quant::FormatId::kF16) {
    EXPECT_LT(used, packed + 4096) << "an F16 weight is its own fp16 copy";
  } else {
    EXPECT_GE(used, packed + copy) << "the packed bytes and the fp16 copy";
  }
#else
  (void)free_before;
#endif
  for (int64_t n : {int64_t{9}, int64_t{40}}) {
    const auto x = input(n, in, 2710 + n);
    const auto y = output(n, out), y_tiled = output(n, out);
    ASSERT_TRUE(cpu_.linear(x.cpu, tiled.cpu, WeightHandle{}, y.cpu).ok());
    const Status s = gpu_->linear(x.gpu, half.gpu, WeightHandle{}, y.gpu);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_TRUE(gpu_->linear(x.gpu, tiled.gpu, WeightHandle{}, y_tiled.gpu).ok());
    const std::string what = std::string(quant::format_name(format)) + ", " + std::to_string(n) + " rows";
#if defined(QRT_SIMT)
    // The copy spares the per-call dequantization kernel; an F16 weight never has one.
    const simt::StreamCounters before = simt::device_counters(0);
    ASSERT_TRUE(gpu_->linear(x.gpu, half.gpu, WeightHandle{}, y.gpu).ok());
    const simt::StreamCounters mid = simt::device_counters(0);
    ASSERT_TRUE(gpu_->linear(x.gpu, tiled.gpu, WeightHandle{}, y_tiled.gpu).ok());
    const uint64_t from_copy = (mid - before).kernel_launches;
    const uint64_t from_tiles = (simt::device_counters(0) - mid).kernel_launches;
    if (format == quant::FormatId::kF16) {
      EXPECT_EQ(from_copy, from_tiles) << what << ": multiplied as it is either way";
    } else {
      EXPECT_LT(from_copy, from_tiles) << what;
    }
#endif
    expect_close(y, kGemmTolerance, what + " from the fp16 copy");
    const auto a = gpu_values(y.gpu), b = gpu_values(y_tiled.gpu);
    EXPECT_LT(test::relative_l2(a.data(), b.data(), a.size()), 1e-6) << what << ": the fp16 copy against the tiles";
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaHalfWeights,
                         testing::Values(quant::FormatId::kF16, quant::FormatId::kBF16, quant::FormatId::kQ8_0,
                                         quant::FormatId::kQ4_K, quant::FormatId::kAFQ4, quant::FormatId::kMXFP4,
                                         quant::FormatId::kIQ4_XS, quant::FormatId::kFP8),
                         test::format_test_name);

// The fused dequantize + wmma prefill GEMM (set_fused_gemm; QRT_CUDA_GEMM=fused) in every format: W rows in two
// tiles of 64 (the second partial), one, two and three token tiles (the last partial), with a bias; one kernel
// launch plus the bias. It rounds W and x to fp16 as the cuBLAS path does (kGemmTolerance).
class CudaFusedGemm : public BackendPair, public testing::WithParamInterface<quant::FormatId> {};

TEST_P(CudaFusedGemm, MatchesCpuInEveryTile) {
  const quant::FormatId format = GetParam();
  const int64_t out = 75, in = 512;
  auto w = test::quantized_tensor(format, {out, in}, test::random_normal(static_cast<size_t>(out * in), 2600),
                                  test::default_params(format));
  const auto pair = weight(w->tensor);
  ASSERT_TRUE(pair.gpu.valid());
  const auto bias = f32_weight({out}, 2601, 0.5f);
  gpu_->set_fused_gemm(true);
  for (int64_t n : {int64_t{9}, int64_t{64}, int64_t{130}}) {
    const auto x = input(n, in, 2610 + n);
    const auto y = output(n, out);
    ASSERT_TRUE(cpu_.linear(x.cpu, pair.cpu, bias.cpu, y.cpu).ok());
#if defined(QRT_SIMT)
    const simt::StreamCounters before = simt::device_counters(0);
#endif
    const Status s = gpu_->linear(x.gpu, pair.gpu, bias.gpu, y.gpu);
    ASSERT_TRUE(s.ok()) << s.to_string();
#if defined(QRT_SIMT)
    EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, 2u) << "the fused GEMM and the bias";
#endif
    expect_close(y, kGemmTolerance, std::string(quant::format_name(format)) + " fused GEMM, " + std::to_string(n) +
                                        " tokens");
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaFusedGemm, testing::ValuesIn(quant::kAllFormats), test::format_test_name);

// Where the fused kernel's column steps do not fit (rows of 544: 32-column blocks, but not whole steps of 64), the
// backend keeps the cuBLAS path; QRT_CUDA_GEMM names the choice and other values are refused.
using CudaFusedGemmChoice = BackendPair;

TEST_F(CudaFusedGemmChoice, FallsBackWhereItsStepsDoNotFitAndTheEnvironmentChooses) {
  const int64_t out = 40, in = 544, n = 20;
  auto w = test::quantized_tensor(quant::FormatId::kQ8_0, {out, in},
                                  test::random_normal(static_cast<size_t>(out * in), 2620),
                                  test::default_params(quant::FormatId::kQ8_0));
  const auto pair = weight(w->tensor);
  gpu_->set_fused_gemm(true);
  const auto x = input(n, in, 2621);
  const auto y = output(n, out);
  ASSERT_TRUE(cpu_.linear(x.cpu, pair.cpu, WeightHandle{}, y.cpu).ok());
  ASSERT_TRUE(gpu_->linear(x.gpu, pair.gpu, WeightHandle{}, y.gpu).ok());
  expect_close(y, kGemmTolerance, "Q8_0 [40, 544] through cuBLAS");

  for (const char* value : {"fused", "cublas"}) {
    setenv("QRT_CUDA_GEMM", value, 1);
    auto backend = CudaBackend::create(0);
    unsetenv("QRT_CUDA_GEMM");
    EXPECT_TRUE(backend.ok()) << value << ": " << backend.status().to_string();
  }
  setenv("QRT_CUDA_GEMM", "marlin", 1);
  auto refused = CudaBackend::create(0);
  unsetenv("QRT_CUDA_GEMM");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().to_string().find("QRT_CUDA_GEMM=marlin"), std::string::npos)
      << refused.status().to_string();
}

// Projections sharing an input (q, k and v; gate and up) quantize it for the integer-dot GEMV once; an op that may
// have written the input in between (here an add into it) makes the next projection quantize it again.
using CudaLinearSharedInput = BackendPair;

TEST_F(CudaLinearSharedInput, QuantizedOnceAndAgainAfterAWrite) {
  const int64_t in = 512;
  auto make = [&](quant::FormatId f, int64_t out, uint64_t seed) {
    auto w = test::quantized_tensor(f, {out, in}, test::random_normal(static_cast<size_t>(out * in), seed),
                                    test::default_params(f));
    return weight(w->tensor);
  };
  const auto wq = make(quant::FormatId::kQ8_0, 40, 2400), wk = make(quant::FormatId::kQ4_K, 24, 2401);
  const auto x = input(2, in, 2402), bump = input(2, in, 2403);
  const auto yq = output(2, 40), yk = output(2, 24);
  auto run = [&](const test::DualWeight& w, const test::Dual<float>& y) {
    ASSERT_TRUE(cpu_.linear(x.cpu, w.cpu, WeightHandle{}, y.cpu).ok());
    ASSERT_TRUE(gpu_->linear(x.gpu, w.gpu, WeightHandle{}, y.gpu).ok());
  };
#if defined(QRT_SIMT)
  const simt::StreamCounters start = simt::device_counters(0);
#endif
  run(wq, yq);
  run(wk, yk);
#if defined(QRT_SIMT)
  EXPECT_EQ((simt::device_counters(0) - start).kernel_launches, 3u) << "quantize x, then one GEMV per projection";
#endif
  expect_close(yq, kIntegerGemvTolerance, "q from the shared input");
  expect_close(yk, kIntegerGemvTolerance, "k from the shared input");
  ASSERT_TRUE(cpu_.add(x.cpu, bump.cpu, x.cpu).ok());
  ASSERT_TRUE(gpu_->add(x.gpu, bump.gpu, x.gpu).ok());
  run(wk, yk);
  expect_close(yk, kIntegerGemvTolerance, "k after the input changed");
}

// linear_same_input (a layer's q/k/v and gate/up): parts of one format are one GEMV launch (the integer-dot kernel
// after the input's quantization, or the dense kernel for F32/F16/BF16), each part bit for bit its own linear() and
// close to the CPU, biases added per part; a tall part (two rows per block) and short ones share the grid. Parts
// of different formats (Q4_K_M's q6_k v projection) are the separate launches, with the same values.
TEST_F(CudaLinearSharedInput, PartsOfOneFormatAreOneLaunch) {
  using quant::FormatId;
  const int64_t in = 256;
  struct Case {
    std::vector<FormatId> formats;
    std::vector<int64_t> outs;
    bool one_launch;
    float second_global_scale = 0.0f;  // NVFP4: part 1's tensor scale where nonzero
  };
  const Case cases[] = {{{FormatId::kQ4_K, FormatId::kQ4_K, FormatId::kQ4_K}, {4100, 24, 40}, true},
                        {{FormatId::kQ8_0, FormatId::kQ8_0}, {72, 72}, true},
                        {{FormatId::kQ4_0, FormatId::kQ4_0, FormatId::kQ4_0}, {256, 128, 128}, true},
                        {{FormatId::kAFQ4, FormatId::kAFQ4, FormatId::kAFQ4}, {64, 32, 32}, true},
                        {{FormatId::kQ4_K, FormatId::kQ4_K, FormatId::kQ6_K}, {64, 32, 32}, false},
                        {{FormatId::kF32, FormatId::kF32, FormatId::kF32}, {4100, 24, 40}, true},
                        {{FormatId::kBF16, FormatId::kBF16}, {72, 72}, true},
                        {{FormatId::kF16, FormatId::kF16, FormatId::kF16}, {64, 32, 32}, true},
                        {{FormatId::kBF16, FormatId::kF16}, {64, 32}, false},
                        {{FormatId::kNVFP4, FormatId::kNVFP4, FormatId::kNVFP4}, {64, 32, 32}, true},
                        // A launch has one tensor scale: parts that differ in it go one by one.
                        {{FormatId::kNVFP4, FormatId::kNVFP4, FormatId::kNVFP4}, {64, 32, 32}, false, 1.25f}};
  uint64_t seed = 2450;
  for (const Case& c : cases) {
    for (int64_t rows : {int64_t{1}, int64_t{7}}) {
      const std::string what = std::string(quant::format_name(c.formats.back())) + " parts, " +
                               std::to_string(c.outs.size()) + " of them, rows " + std::to_string(rows);
      std::vector<test::DualWeight> weights, biases;
      std::vector<test::Dual<float>> ys, separate;
      for (size_t j = 0; j < c.formats.size(); ++j) {
        const int64_t out = c.outs[j];
        quant::QuantParams params = test::default_params(c.formats[j]);
        if (j == 1 && c.second_global_scale != 0.0f) params.global_scale = c.second_global_scale;
        auto w = test::quantized_tensor(c.formats[j], {out, in},
                                        test::random_normal(static_cast<size_t>(out * in), ++seed), params);
        weights.push_back(weight(w->tensor));
        biases.push_back(f32_weight({out}, ++seed, 0.5f));
        ys.push_back(output(rows, out));
        separate.push_back(output(rows, out));
      }
      const auto x = input(rows, in, ++seed);
      std::vector<Backend::LinearPart> cpu_parts, gpu_parts;
      for (size_t j = 0; j < weights.size(); ++j) {
        // Every part but the second has a bias.
        cpu_parts.push_back({weights[j].cpu, j == 1 ? WeightHandle{} : biases[j].cpu, ys[j].cpu});
        gpu_parts.push_back({weights[j].gpu, j == 1 ? WeightHandle{} : biases[j].gpu, ys[j].gpu});
      }
      ASSERT_TRUE(cpu_.linear_same_input(x.cpu, cpu_parts).ok()) << what;
#if defined(QRT_SIMT)
      const simt::StreamCounters start = simt::device_counters(0);
#endif
      const Status s = gpu_->linear_same_input(x.gpu, gpu_parts);
      ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
#if defined(QRT_SIMT)
      const bool dense = c.formats[0] == FormatId::kF32 || c.formats[0] == FormatId::kF16 ||
                         c.formats[0] == FormatId::kBF16;
      const uint64_t quantize = dense ? 0 : 1, gemvs = c.one_launch ? 1 : weights.size();
      const uint64_t bias_adds = weights.size() - 1;
      EXPECT_EQ((simt::device_counters(0) - start).kernel_launches, quantize + gemvs + bias_adds)
          << what << ": " << quantize << " quantize, " << gemvs << " GEMV launch(es), a bias add per biased part";
#endif
      for (size_t j = 0; j < weights.size(); ++j) {
        expect_close(ys[j], kIntegerGemvTolerance, what + ", part " + std::to_string(j));
        ASSERT_TRUE(gpu_->linear(x.gpu, weights[j].gpu, j == 1 ? WeightHandle{} : biases[j].gpu, separate[j].gpu)
                        .ok());
        EXPECT_EQ(gpu_values(ys[j].gpu), gpu_values(separate[j].gpu)) << what << ", part " << j << " alone";
      }
    }
  }
}

// rms_norm and silu_mul write the quantized copy of their output as they write it: the projections that read it
// run without a quantize kernel, and give bit for bit what a separate quantization of the same values gives.
TEST_F(CudaLinearSharedInput, NormAndSiluMulQuantizeTheirOutputForTheNextGemv) {
  const int64_t hidden = 256, ffn = 512, rows = 3;
  auto make = [&](quant::FormatId f, int64_t out, int64_t in, uint64_t seed) {
    auto w = test::quantized_tensor(f, {out, in}, test::random_normal(static_cast<size_t>(out * in), seed),
                                    test::default_params(f));
    return weight(w->tensor);
  };
  const auto wq = make(quant::FormatId::kQ4_K, 48, hidden, 2600);
  const auto wgate = make(quant::FormatId::kQ8_0, ffn, hidden, 2601);
  const auto wdown = make(quant::FormatId::kQ6_K, hidden, ffn, 2602);
  const auto norm_w = f32_weight({hidden}, 2603, 0.3f, 1.0f);
  const auto h = input(rows, hidden, 2604), up = input(rows, ffn, 2605);
  const auto xn = output(rows, hidden), yq = output(rows, 48), gate = output(rows, ffn), act = output(rows, ffn),
             down = output(rows, hidden);
  // Each step on both backends; `kernels` counts the CUDA launches of the step under SIMT.
  auto both = [&](auto&& op, uint64_t kernels, const char* what) {
#if defined(QRT_SIMT)
    const simt::StreamCounters start = simt::device_counters(0);
#endif
    op(static_cast<Backend&>(cpu_), true);
    op(static_cast<Backend&>(*gpu_), false);
#if defined(QRT_SIMT)
    EXPECT_EQ((simt::device_counters(0) - start).kernel_launches, kernels) << what;
#else
    (void)kernels;
    (void)what;
#endif
  };
  const auto pick = [](const test::Dual<float>& d, bool cpu) { return cpu ? d.cpu : d.gpu; };
  const auto pickw = [](const test::DualWeight& w, bool cpu) { return cpu ? w.cpu : w.gpu; };
  both([&](Backend& b, bool c) { ASSERT_TRUE(b.rms_norm(pick(h, c), pickw(norm_w, c), 1e-5f, pick(xn, c)).ok()); }, 1,
       "rms_norm");
  both([&](Backend& b, bool c) { ASSERT_TRUE(b.linear(pick(xn, c), pickw(wq, c), {}, pick(yq, c)).ok()); }, 1,
       "q from the norm's quantized output: the GEMV alone");
  both([&](Backend& b, bool c) { ASSERT_TRUE(b.linear(pick(xn, c), pickw(wgate, c), {}, pick(gate, c)).ok()); }, 1,
       "gate from the same output");
  both([&](Backend& b, bool c) { ASSERT_TRUE(b.silu_mul(pick(gate, c), pick(up, c), pick(act, c)).ok()); }, 1,
       "silu_mul");
  both([&](Backend& b, bool c) { ASSERT_TRUE(b.linear(pick(act, c), pickw(wdown, c), {}, pick(down, c)).ok()); }, 1,
       "down from silu_mul's quantized output");
  expect_close(yq, kIntegerGemvTolerance, "q");
  expect_close(gate, kIntegerGemvTolerance, "gate");
  expect_close(down, kIntegerGemvTolerance, "down");

  // The same values quantized by the standalone kernel (copied elsewhere through the host, so nothing is reused).
  for (const auto& [source, w, y, cols] : {std::tuple{&xn, &wq, &yq, hidden}, std::tuple{&act, &wdown, &down, ffn}}) {
    const auto copy = input_values(gpu_values(source->gpu), rows, cols);
    const auto again = output(rows, y->gpu.cols);
    ASSERT_TRUE(gpu_->linear(copy.gpu, w->gpu, {}, again.gpu).ok());
    const auto fused = gpu_values(y->gpu), separate = gpu_values(again.gpu);
    EXPECT_EQ(std::memcmp(fused.data(), separate.data(), fused.size() * sizeof(float)), 0)
        << "fused and separate quantization differ";
  }
}

// The split decode attention's merge writes its output quantized as well when head_dim is a multiple of 32: the
// output projection after it runs without a quantize kernel and gives bit for bit what a separate quantization
// gives. With head_dim 48 a warp's outputs straddle activation blocks, so the projection quantizes by itself.
TEST_F(CudaLinearSharedInput, SplitAttentionQuantizesItsOutputForTheOutputProjection) {
  for (const int head_dim : {64, 48}) {
    const int heads = 4, kv_heads = 2;
    const int64_t capacity = 64, keys = 21, q_dim = int64_t{heads} * head_dim, kv_dim = int64_t{kv_heads} * head_dim;
    const std::string what = "head_dim " + std::to_string(head_dim);
    const auto kc = input(capacity, kv_dim, 2800 + head_dim), vc = input(capacity, kv_dim, 2900 + head_dim);
    std::vector<int32_t> pos(static_cast<size_t>(capacity));
    for (int64_t j = 0; j < capacity; ++j) pos[static_cast<size_t>(j)] = static_cast<int32_t>(j);
    const auto positions = input_values(pos, capacity, 1);
    const auto q = input(1, q_dim, 3000 + head_dim);
    const auto q_pos = input_values(std::vector<int32_t>{static_cast<int32_t>(keys - 1)}, 1, 1);
    const auto key_count = input_values(std::vector<int32_t>{static_cast<int32_t>(keys)}, 1, 1);
    const AttentionParams p{heads, kv_heads, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim)), 0};
    auto workspace = allocate_scoped(*gpu_, gpu_->attention_workspace_bytes(1, p, capacity));
    ASSERT_TRUE(workspace.ok());
    auto wo_tensor = test::quantized_tensor(quant::FormatId::kQ8_0, {40, q_dim},
                                            test::random_normal(static_cast<size_t>(40 * q_dim), 3100 + head_dim),
                                            test::default_params(quant::FormatId::kQ8_0));
    const auto wo = weight(wo_tensor->tensor);
    const auto attn = output(1, q_dim), proj = output(1, 40);
    ASSERT_TRUE(cpu_.attention(q.cpu, q_pos.cpu, KvLayerView{kc.cpu, vc.cpu, positions.cpu, {}}, key_count.cpu, p,
                               attn.cpu)
                    .ok());
    ASSERT_TRUE(cpu_.linear(attn.cpu, wo.cpu, {}, proj.cpu).ok());
    ASSERT_TRUE(gpu_->attention(q.gpu, q_pos.gpu, KvLayerView{kc.gpu, vc.gpu, positions.gpu, workspace->buffer()},
                                key_count.gpu, p, attn.gpu)
                    .ok());
#if defined(QRT_SIMT)
    const simt::StreamCounters start = simt::device_counters(0);
#endif
    ASSERT_TRUE(gpu_->linear(attn.gpu, wo.gpu, {}, proj.gpu).ok());
#if defined(QRT_SIMT)
    EXPECT_EQ((simt::device_counters(0) - start).kernel_launches, head_dim % 32 == 0 ? 1u : 2u)
        << what << ": the GEMV alone after a quantizing merge, else quantize + GEMV";
#endif
    expect_close(attn, 1e-5, "attention, " + what);
    expect_close(proj, kIntegerGemvTolerance, "output projection, " + what);
    const auto copy = input_values(gpu_values(attn.gpu), 1, q_dim);
    const auto again = output(1, 40);
    ASSERT_TRUE(gpu_->linear(copy.gpu, wo.gpu, {}, again.gpu).ok());
    EXPECT_EQ(gpu_values(proj.gpu), gpu_values(again.gpu)) << what << ": fused and separate quantization differ";
  }
}

// A captured op is recorded, not run: the quantized copy a captured rms_norm would write does not exist until the
// graph is launched, so a projection issued right after the capture quantizes its input itself.
TEST_F(CudaLinearSharedInput, ACapturedProducerIsNotTakenAsRun) {
  const int64_t in = 256, out = 40;
  auto w = test::quantized_tensor(quant::FormatId::kQ8_0, {out, in},
                                  test::random_normal(static_cast<size_t>(out * in), 2700),
                                  test::default_params(quant::FormatId::kQ8_0));
  const auto wq = weight(w->tensor);
  const auto norm_w = f32_weight({in}, 2701, 0.3f, 1.0f);
  const auto h = input(2, in, 2702), other = input(2, in, 2703);
  const auto xn = output(2, in), y = output(2, out), y_other = output(2, out);
  ASSERT_TRUE(cpu_.rms_norm(h.cpu, norm_w.cpu, 1e-5f, xn.cpu).ok());
  ASSERT_TRUE(cpu_.linear(xn.cpu, wq.cpu, {}, y.cpu).ok());
  ASSERT_TRUE(gpu_->rms_norm(h.gpu, norm_w.gpu, 1e-5f, xn.gpu).ok());  // xn and its quantized copy
  ASSERT_TRUE(gpu_->linear(other.gpu, wq.gpu, {}, y_other.gpu).ok());  // the buffer now holds `other`
  auto graph = gpu_->capture([&] { return gpu_->rms_norm(h.gpu, norm_w.gpu, 1e-5f, xn.gpu); });
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  ASSERT_TRUE(gpu_->linear(xn.gpu, wq.gpu, {}, y.gpu).ok());
  expect_close(y, kIntegerGemvTolerance, "projection of xn after a capture that was not launched");
}

// QRT_CUDA_GEMV=float: the backend keeps x in fp32 for the integer formats too (float GEMV, within 1e-5); values
// other than float and integer are refused by name.
class CudaFloatGemv : public BackendPair {
 protected:
  void SetUp() override {
    setenv("QRT_CUDA_GEMV", "float", 1);
    BackendPair::SetUp();
    unsetenv("QRT_CUDA_GEMV");
  }
};

TEST_F(CudaFloatGemv, TheEnvironmentChoosesTheFloatGemv) {
  const int64_t in = 512, out = 40;
  auto w = test::quantized_tensor(quant::FormatId::kQ4_K, {out, in},
                                  test::random_normal(static_cast<size_t>(out * in), 2500),
                                  test::default_params(quant::FormatId::kQ4_K));
  const auto pair = weight(w->tensor);
  const auto x = input(3, in, 2501);
  const auto y = output(3, out);
  ASSERT_TRUE(cpu_.linear(x.cpu, pair.cpu, WeightHandle{}, y.cpu).ok());
  ASSERT_TRUE(gpu_->linear(x.gpu, pair.gpu, WeightHandle{}, y.gpu).ok());
  expect_close(y, 1e-5, "Q4_K through the float GEMV");

  setenv("QRT_CUDA_GEMV", "int4", 1);
  auto refused = CudaBackend::create(0);
  unsetenv("QRT_CUDA_GEMV");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().to_string().find("QRT_CUDA_GEMV=int4"), std::string::npos)
      << refused.status().to_string();
}

class CudaLinearExperts : public BackendPair, public testing::WithParamInterface<quant::FormatId> {};
using CudaBackendGroupedExperts = BackendPair;

// Stacked experts, each quantized on its own (HQQ groups across a whole matrix, so a stack is not one big matrix):
// only the selected experts are read, at e * part_sizes(out, in) in each part.
TEST_P(CudaLinearExperts, SharedAndPerSlotInputsMatchCpu) {
  const quant::FormatId format = GetParam();
  const int64_t experts = 5, out = 36, in = 256, tokens = 6, top_k = 3;
  const bool dp4a = expert_dp4a_applies(format, out, in);
  const auto values = test::random_normal(static_cast<size_t>(experts * out * in), 2300);
  auto w = test::quantized_tensor(format, {experts, out, in}, values, test::default_params(format));
  const auto weight_pair = weight(w->tensor);
  ASSERT_TRUE(weight_pair.gpu.valid());
  // Every expert but 3 is used; expert 4, the last, is used so the offsets reach the end of each part.
  const auto ids = input_values(std::vector<int32_t>{4, 0, 1, 1, 2, 4, 0, 4, 2, 2, 1, 0, 4, 1, 0, 0, 2, 1}, tokens,
                                top_k);
  const auto x_shared = input(tokens, in, 2301);
  const auto x_slots = input(tokens * top_k, in, 2302);
  for (const auto* x : {&x_shared, &x_slots}) {
    const auto y = output(tokens * top_k, out);
    ASSERT_TRUE(cpu_.linear_experts(x->cpu, weight_pair.cpu, ids.cpu, y.cpu).ok());
    Status s = gpu_->linear_experts(x->gpu, weight_pair.gpu, ids.gpu, y.gpu);
    ASSERT_TRUE(s.ok()) << s.to_string();
    // The integer-dot kernels take the stack where the format has one and each expert's bytes start 16-byte aligned
    // (the batch grouped by expert, x quantized in the decode buffer for the shared input's 6 rows and in scratch
    // memory for the 18 per-slot rows); the other formats go through the float kernels, also grouped.
    expect_close(y, dp4a ? kIntegerGemvTolerance : 1e-5,
                 std::string(quant::format_name(format)) + (x == &x_shared ? " shared input" : " per-slot input"));
    // Token by token through the per-slot kernel of the same kind: the same bits as the grouped batch, row for row.
    const std::vector<float> batch = gpu_values(y.gpu);
    const int64_t x_rows = x == &x_shared ? 1 : top_k;
    for (int64_t t = 0; t < tokens; ++t) {
      const auto y_t = output(top_k, out);
#if defined(QRT_SIMT)
      const simt::StreamCounters before = simt::device_counters(0);
#endif
      ASSERT_TRUE(gpu_->linear_experts(x->gpu.row_range(t * x_rows, x_rows), weight_pair.gpu, ids.gpu.row_range(t, 1),
                                       y_t.gpu)
                      .ok());
#if defined(QRT_SIMT)
      EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, dp4a ? 2u : 1u)
          << "one token: " << (dp4a ? "quantize x, then the integer-dot expert kernel" : "the per-slot kernel");
#endif
      const std::vector<float> row = gpu_values(y_t.gpu);
      EXPECT_TRUE(std::equal(row.begin(), row.end(), batch.begin() + t * top_k * out))
          << quant::format_name(format) << " token " << t << ": the batch differs from the token alone";
    }
  }
}

// One token's experts on the integer-dot kernel: gate and up (the same x) quantize it once; an id outside the stack
// gives that slot's rows NaN and every other slot the CPU's values; the float GEMV switch turns the kernel off.
TEST_F(CudaBackendGroupedExperts, OneTokenOnTheIntegerDotKernel) {
  // 37 rows: blocks of 16, 8, 4 and 2 rows (512 and 2048 columns give rows of 8 to 64 items: 8, 16, 32 or 64
  // threads each, the first two parts of a warp) end part-way through a block.
  const int64_t experts = 6, out = 37, top_k = 4;
  for (const auto& [format, in] : {std::pair{quant::FormatId::kQ4_K, int64_t{512}}, {quant::FormatId::kQ4_K, 2048},
                                   {quant::FormatId::kQ8_0, 512}, {quant::FormatId::kQ8_0, 2048},
                                   {quant::FormatId::kAFQ4, 2048}}) {
    const std::string name = std::string(quant::format_name(format)) + " [" + std::to_string(in) + "]";
    const auto values = test::random_normal(static_cast<size_t>(experts * out * in), 2320);
    auto w = test::quantized_tensor(format, {experts, out, in}, values, test::default_params(format));
    const auto weight_pair = weight(w->tensor);
    ASSERT_TRUE(expert_dp4a_applies(format, out, in)) << name;
    const auto ids = input_values(std::vector<int32_t>{5, 0, 3, 2}, 1, top_k);
    const auto x = input(1, in, 2321);
    const auto gate = output(top_k, out), up = output(top_k, out);
    ASSERT_TRUE(cpu_.linear_experts(x.cpu, weight_pair.cpu, ids.cpu, gate.cpu).ok());
#if defined(QRT_SIMT)
    const simt::StreamCounters before = simt::device_counters(0);
#endif
    ASSERT_TRUE(gpu_->linear_experts(x.gpu, weight_pair.gpu, ids.gpu, gate.gpu).ok());
    ASSERT_TRUE(gpu_->linear_experts(x.gpu, weight_pair.gpu, ids.gpu, up.gpu).ok());
#if defined(QRT_SIMT)
    EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, 3u) << name << ": x quantized once for both";
#endif
    expect_close(gate, kIntegerGemvTolerance, name + " experts of one token");
    EXPECT_EQ(gpu_values(gate.gpu), gpu_values(up.gpu)) << name;

    const auto bad_ids = input_values(std::vector<int32_t>{5, 6, 3, -1}, 1, top_k);
    const auto y_bad = output(top_k, out);
    ASSERT_TRUE(gpu_->linear_experts(x.gpu, weight_pair.gpu, bad_ids.gpu, y_bad.gpu).ok());
    const std::vector<float> got = gpu_values(y_bad.gpu), good = gpu_values(gate.gpu);
    for (int64_t slot = 0; slot < top_k; ++slot)
      for (int64_t r = 0; r < out; ++r) {
        const size_t at = static_cast<size_t>(slot * out + r);
        if (slot == 1 || slot == 3) {
          EXPECT_TRUE(std::isnan(got[at])) << name << " slot " << slot << " row " << r << " (bad id)";
        } else {
          EXPECT_EQ(got[at], good[at]) << name << " slot " << slot << " row " << r;
        }
      }
  }
  // The float GEMV switch applies here too: the per-slot float kernel, one launch.
  const int64_t in = 512;
  gpu_->set_integer_gemv(false);
  const auto values = test::random_normal(static_cast<size_t>(experts * out * in), 2322);
  auto w = test::quantized_tensor(quant::FormatId::kQ4_K, {experts, out, in}, values,
                                  test::default_params(quant::FormatId::kQ4_K));
  const auto weight_pair = weight(w->tensor);
  const auto ids = input_values(std::vector<int32_t>{1, 2, 3, 4}, 1, top_k);
  const auto x = input(1, in, 2323);
  const auto y = output(top_k, out);
  ASSERT_TRUE(cpu_.linear_experts(x.cpu, weight_pair.cpu, ids.cpu, y.cpu).ok());
#if defined(QRT_SIMT)
  const simt::StreamCounters before = simt::device_counters(0);
#endif
  ASSERT_TRUE(gpu_->linear_experts(x.gpu, weight_pair.gpu, ids.gpu, y.gpu).ok());
#if defined(QRT_SIMT)
  EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, 1u) << "the float per-slot kernel";
#endif
  expect_close(y, 1e-5, "Q4_K experts through the float kernel");
}

// Gate and up of one token in one launch (linear_experts_same_input): each stack's values are its own linear_experts
// call's, bit for bit; x is quantized once; a bad id gives that slot NaN in both stacks. Stacks that differ in format
// take the separate calls (a launch each).
TEST_F(CudaBackendGroupedExperts, GateAndUpOfOneTokenShareALaunch) {
  using quant::FormatId;
  const int64_t experts = 6, out = 37, top_k = 4;
  for (const auto& [gate_format, up_format, in] :
       {std::tuple{FormatId::kQ4_K, FormatId::kQ4_K, int64_t{512}}, {FormatId::kQ4_K, FormatId::kQ4_K, 2048},
        {FormatId::kQ8_0, FormatId::kQ8_0, 512}, {FormatId::kAFQ4, FormatId::kAFQ4, 2048},
        {FormatId::kQ4_K, FormatId::kQ8_0, 512}}) {
    const std::string name = std::string(quant::format_name(gate_format)) + " and " +
                             std::string(quant::format_name(up_format)) + " [" + std::to_string(in) + "]";
    const size_t n = static_cast<size_t>(experts * out * in);
    auto wg = test::quantized_tensor(gate_format, {experts, out, in}, test::random_normal(n, 2340),
                                     test::default_params(gate_format));
    auto wu = test::quantized_tensor(up_format, {experts, out, in}, test::random_normal(n, 2341),
                                     test::default_params(up_format));
    const auto gate_w = weight(wg->tensor), up_w = weight(wu->tensor);
    const auto ids = input_values(std::vector<int32_t>{4, 1, 5, 0}, 1, top_k);
    const auto x = input(1, in, 2342);
    const auto gate = output(top_k, out), up = output(top_k, out), gate_alone = output(top_k, out),
               up_alone = output(top_k, out);
    ASSERT_TRUE(cpu_.linear_experts(x.cpu, gate_w.cpu, ids.cpu, gate.cpu).ok());
    ASSERT_TRUE(cpu_.linear_experts(x.cpu, up_w.cpu, ids.cpu, up.cpu).ok());
    const Backend::ExpertPart parts[] = {{gate_w.gpu, gate.gpu}, {up_w.gpu, up.gpu}};
#if defined(QRT_SIMT)
    const simt::StreamCounters before = simt::device_counters(0);
#endif
    const Status s = gpu_->linear_experts_same_input(x.gpu, parts, ids.gpu);
    ASSERT_TRUE(s.ok()) << s.to_string();
#if defined(QRT_SIMT)
    EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, gate_format == up_format ? 2u : 3u)
        << name << ": quantize x, then one launch (a launch per stack when the formats differ)";
#endif
    ASSERT_TRUE(gpu_->linear_experts(x.gpu, gate_w.gpu, ids.gpu, gate_alone.gpu).ok());
    ASSERT_TRUE(gpu_->linear_experts(x.gpu, up_w.gpu, ids.gpu, up_alone.gpu).ok());
    expect_close(gate, kIntegerGemvTolerance, name + " gate");
    expect_close(up, kIntegerGemvTolerance, name + " up");
    EXPECT_EQ(gpu_values(gate.gpu), gpu_values(gate_alone.gpu)) << name << ": gate differs from its own call";
    EXPECT_EQ(gpu_values(up.gpu), gpu_values(up_alone.gpu)) << name << ": up differs from its own call";

    const auto bad_ids = input_values(std::vector<int32_t>{4, -1, 5, 6}, 1, top_k);
    ASSERT_TRUE(gpu_->linear_experts_same_input(x.gpu, parts, bad_ids.gpu).ok());
    for (const auto* y : {&gate, &up}) {
      const std::vector<float> got = gpu_values(y->gpu);
      for (int64_t slot = 0; slot < top_k; ++slot)
        for (int64_t r = 0; r < out; ++r)
          EXPECT_EQ(std::isnan(got[static_cast<size_t>(slot * out + r)]), slot == 1 || slot == 3)
              << name << (y == &gate ? " gate" : " up") << " slot " << slot << " row " << r;
    }
  }
  // The kernel's entry refuses stacks of different shapes, naming them (the backend takes the separate calls then).
  quant::QuantView a = integer_gemv_probe(256), b = integer_gemv_probe(256);
  b.rows = 2;
  const auto sizes = cpu::part_sizes(FormatId::kQ4_K, 1, 256, test::default_params(FormatId::kQ4_K));
  ASSERT_TRUE(sizes.ok());
  const auto ids = input_values(std::vector<int32_t>{0}, 1, 1);
  float y[2] = {};
  const kernels::GemvPart stacks[] = {{a, y}, {b, y}};
  const kernels::ExpertGemvShape shape{1, 1, 1, true};
  const Status refused = kernels::expert_gemv_dp4a_stacks(FormatId::kQ4_K, stacks, *sizes, ids.gpu.data, shape,
                                                          {reinterpret_cast<const int8_t*>(a.data),
                                                           reinterpret_cast<const float*>(a.data)},
                                                          nullptr);
  EXPECT_NE(refused.to_string().find("stacks of one launch differ in shape or group parameters ([2, 256] after [1, "
                                     "256])"),
            std::string::npos)
      << refused.to_string();
}

// A decode batch of 8 tokens on the grouped integer-dot kernel: experts chosen by 1 to 8 slots (passes of 1, 2, 4
// and 8 rows, the odd counts repeating a slot that is not stored), rows of 8, 16, 32 and 64 items (as many threads
// each); gate and up (the same x, which fits the decode buffer) quantize it once. Every token's rows are the
// bits it gets alone on the per-slot kernel.
TEST_F(CudaBackendGroupedExperts, ABatchOnTheIntegerDotKernel) {
  const int64_t experts = 8, out = 37, tokens = 8, top_k = 4;
  // Expert e is chosen by kChosen[e] tokens; dealing the list out token by token keeps each token's four distinct.
  const int kChosen[experts] = {1, 2, 3, 4, 5, 8, 7, 2};
  std::vector<int32_t> deck;
  for (const int e : {5, 6, 4, 3, 2, 1, 7, 0}) deck.insert(deck.end(), kChosen[e], e);
  std::vector<int32_t> picks(static_cast<size_t>(tokens * top_k));
  for (size_t j = 0; j < deck.size(); ++j) picks[(j % tokens) * top_k + j / tokens] = deck[j];
  const auto ids = input_values(picks, tokens, top_k);
  for (const auto& [format, in] : {std::pair{quant::FormatId::kQ4_K, int64_t{512}}, {quant::FormatId::kQ4_K, 2048},
                                   {quant::FormatId::kQ6_K, 4096}, {quant::FormatId::kQ8_0, 512},
                                   {quant::FormatId::kAFQ4, 2048}}) {
    const std::string name = std::string(quant::format_name(format)) + " [" + std::to_string(in) + "]";
    const auto values = test::random_normal(static_cast<size_t>(experts * out * in), 2330);
    auto w = test::quantized_tensor(format, {experts, out, in}, values, test::default_params(format));
    const auto weight_pair = weight(w->tensor);
    ASSERT_TRUE(expert_dp4a_applies(format, out, in)) << name;
    const auto x = input(tokens, in, 2331);
    const auto gate = output(tokens * top_k, out), up = output(tokens * top_k, out);
    ASSERT_TRUE(cpu_.linear_experts(x.cpu, weight_pair.cpu, ids.cpu, gate.cpu).ok());
#if defined(QRT_SIMT)
    const simt::StreamCounters before = simt::device_counters(0);
#endif
    ASSERT_TRUE(gpu_->linear_experts(x.gpu, weight_pair.gpu, ids.gpu, gate.gpu).ok());
    ASSERT_TRUE(gpu_->linear_experts(x.gpu, weight_pair.gpu, ids.gpu, up.gpu).ok());
#if defined(QRT_SIMT)
    EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, 5u)
        << name << ": x quantized once, then per projection the slot lists and the grouped kernel";
#endif
    expect_close(gate, kIntegerGemvTolerance, name + " experts of 8 tokens");
    const std::vector<float> batch = gpu_values(gate.gpu);
    EXPECT_EQ(batch, gpu_values(up.gpu)) << name;
    for (int64_t t = 0; t < tokens; ++t) {
      const auto y_t = output(top_k, out);
      ASSERT_TRUE(gpu_->linear_experts(x.gpu.row_range(t, 1), weight_pair.gpu, ids.gpu.row_range(t, 1), y_t.gpu).ok());
      const std::vector<float> alone = gpu_values(y_t.gpu);
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), batch.begin() + t * top_k * out))
          << name << " token " << t << ": the batch differs from the token alone";
    }
  }
}

// The grouped paths (integer dot products, then with the float GEMV switch the float kernel) with many experts, most
// of them unused, an expert taking more slots than one pass holds (8), and an id outside the stack: that slot's row
// is NaN (the device cannot report it), every other row is the CPU's.
TEST_F(CudaBackendGroupedExperts, ManyExpertsLongListsAndABadId) {
  const int64_t experts = 300, out = 20, in = 64, tokens = 12, top_k = 2;
  const auto values = test::random_normal(static_cast<size_t>(experts * out * in), 2310);
  auto w = test::quantized_tensor(quant::FormatId::kQ8_0, {experts, out, in}, values,
                                  test::default_params(quant::FormatId::kQ8_0));
  const auto weight_pair = weight(w->tensor);
  std::vector<int32_t> picks;
  for (int64_t t = 0; t < tokens; ++t) {
    picks.push_back(299);                               // every token: 12 slots of one expert
    picks.push_back(static_cast<int32_t>(t * 23 % 300));  // spread over the stack
  }
  const auto ids = input_values(picks, tokens, top_k);
  const auto x = input(tokens, in, 2311);
  const auto y = output(tokens * top_k, out);
  ASSERT_TRUE(cpu_.linear_experts(x.cpu, weight_pair.cpu, ids.cpu, y.cpu).ok());
  picks[5] = 300;  // token 2, slot 1: outside the stack (the CPU backend refuses it; compare the other rows)
  const auto bad_ids = input_values(picks, tokens, top_k);
  for (const bool integer : {true, false}) {
    const std::string name = integer ? "integer-dot" : "float";
    gpu_->set_integer_gemv(integer);
#if defined(QRT_SIMT)
    const simt::StreamCounters before = simt::device_counters(0);
#endif
    ASSERT_TRUE(gpu_->linear_experts(x.gpu, weight_pair.gpu, ids.gpu, y.gpu).ok());
#if defined(QRT_SIMT)
    // The 12 tokens' x is wider than the decode buffer: the integer path quantizes it into scratch memory.
    EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, integer ? 3u : 2u)
        << name << ": group" << (integer ? ", quantize x" : "") << ", then multiply";
#endif
    expect_close(y, integer ? kIntegerGemvTolerance : 1e-5, "grouped Q8_0 experts, 300 in the stack, " + name);

    const auto y_bad = output(tokens * top_k, out);
    ASSERT_TRUE(gpu_->linear_experts(x.gpu, weight_pair.gpu, bad_ids.gpu, y_bad.gpu).ok());
    expect_bad_slot_only(gpu_values(y_bad.gpu), cpu_values(y.cpu), tokens * top_k, out, 5, 1e-3f, name);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaLinearExperts, testing::ValuesIn(quant::kAllFormats), test::format_test_name);

using CudaBackendBasics = BackendPair;

TEST_F(CudaBackendBasics, UploadDownloadRoundTripAndViewChecks) {
  const auto values = test::random_normal(3000, 2400);
  auto buf = allocate_scoped(*gpu_, values.size() * 4);
  ASSERT_TRUE(buf.ok());
  float* d = static_cast<float*>(buf->buffer().ptr);
  ASSERT_TRUE(gpu_->upload(values.data(), d, values.size() * 4).ok());
  std::vector<float> back(values.size());
  ASSERT_TRUE(gpu_->download(d, back.data(), back.size() * 4).ok());
  EXPECT_EQ(back, values);
  // A partial upload into the middle, then the whole buffer again.
  const std::vector<float> patch = {1.5f, -2.5f, 3.5f};
  ASSERT_TRUE(gpu_->upload(patch.data(), d + 1000, 12).ok());
  ASSERT_TRUE(gpu_->download(d, back.data(), back.size() * 4).ok());
  EXPECT_EQ(back[1000], 1.5f);
  EXPECT_EQ(back[1002], 3.5f);
  EXPECT_EQ(back[999], values[999]);
  // An upload larger than one staging slot (1 MiB) is chunked.
  const auto big = test::random_normal((3u << 20) / 4 + 5, 2401);
  auto big_buf = allocate_scoped(*gpu_, big.size() * 4);
  ASSERT_TRUE(big_buf.ok());
  ASSERT_TRUE(gpu_->upload(big.data(), big_buf->buffer().ptr, big.size() * 4).ok());
  std::vector<float> big_back(big.size());
  ASSERT_TRUE(gpu_->download(big_buf->buffer().ptr, big_back.data(), big_back.size() * 4).ok());
  EXPECT_EQ(big_back, big);

  // Ranges outside allocations are errors, never device faults.
  EXPECT_EQ(gpu_->upload(values.data(), d + 1, values.size() * 4).code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(gpu_->download(d + 2999, back.data(), 8).code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(gpu_->download(values.data(), back.data(), 4).code(), ErrorCode::kOutOfRange);
  const auto x = input(2, 32, 2402);
  const auto w = f32_weight({8, 32}, 2403);
  auto y = output(2, 8);
  EXPECT_EQ(gpu_->linear(F32View{x.gpu.data + 40, 2, 32}, w.gpu, WeightHandle{}, y.gpu).code(),
            ErrorCode::kOutOfRange);
  EXPECT_EQ(gpu_->linear(x.gpu, w.gpu, w.gpu, y.gpu).code(), ErrorCode::kInvalidArgument);  // a matrix as bias
  EXPECT_EQ(gpu_->linear(x.gpu, w.gpu, WeightHandle{}, F32View{x.gpu.data, 2, 8}).code(),
            ErrorCode::kInvalidArgument);  // y overlaps x
  EXPECT_EQ(gpu_->linear(x.gpu, WeightHandle{77}, WeightHandle{}, y.gpu).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(gpu_->rms_norm(x.gpu, w.gpu, 1e-5f, x.gpu).code(), ErrorCode::kInvalidArgument);  // 2-D norm weight
  // A freed weight handle is refused.
  gpu_->free_weight(w.gpu);
  EXPECT_EQ(gpu_->linear(x.gpu, w.gpu, WeightHandle{}, y.gpu).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(gpu_->weight_info(w.gpu).status().code(), ErrorCode::kInvalidArgument);
}

TEST_F(CudaBackendBasics, UploadWeightChecksPartsAndReportsLoadStats) {
  const auto values = test::random_normal(4 * 64, 2500);
  auto t = test::quantized_tensor(quant::FormatId::kQ8_0, {4, 64}, values, {});
  t->tensor.data.size -= 1;
  auto bad = gpu_->upload_weight(t->tensor);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kFormatError);
  EXPECT_NE(bad.status().message().find("needs 272 bytes of data, found 271"), std::string::npos)
      << bad.status().message();
  t->tensor.data.size += 1;
  t->tensor.shape = {4, 2, 4, 8};
  EXPECT_EQ(gpu_->upload_weight(t->tensor).status().code(), ErrorCode::kInvalidArgument);
  t->tensor.shape = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_FALSE(gpu_->upload_weight(t->tensor).ok());
  t->tensor.shape = {4, 64};
  const WeightLoadStats before = gpu_->load_stats();
  auto good = gpu_->upload_weight(t->tensor);
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  EXPECT_EQ(gpu_->load_stats().bytes - before.bytes, t->tensor.bytes());
  EXPECT_EQ(gpu_->load_stats().tensors, before.tensors + 1);
  EXPECT_GT(gpu_->load_stats().seconds, before.seconds);
  auto info = gpu_->weight_info(*good);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->format, quant::FormatId::kQ8_0);
  EXPECT_EQ(info->shape, (std::vector<int64_t>{4, 64}));
  const size_t live = gpu_->live_weights();
  gpu_->free_weight(*good);
  EXPECT_EQ(gpu_->live_weights(), live - 1);
}

// A weight larger than the staging ring (4 x 16 MiB) goes through every slot several times; its bytes arrive intact.
TEST_F(CudaBackendBasics, LargeWeightThroughTheStagingRing) {
  const int64_t out = 4096 + 3, in = 5000;  // ~82 MB of f32
  std::vector<float> values(static_cast<size_t>(out * in));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(static_cast<int64_t>(i % 1000003) - 500000);
  QuantTensor t;
  t.name = "big";
  t.shape = {out, in};
  t.data = {reinterpret_cast<const uint8_t*>(values.data()), values.size() * 4};
  auto w = gpu_->upload_weight(t);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  // Embedding rows decode the f32 table exactly: check rows at the start, the slot boundaries and the end.
  const std::vector<int32_t> rows = {0, 838, 839, 1677, 3355, static_cast<int32_t>(out - 1)};
  const auto ids = input_values(rows, static_cast<int64_t>(rows.size()), 1);
  const auto outv = output(static_cast<int64_t>(rows.size()), in);
  ASSERT_TRUE(gpu_->embed(*w, ids.gpu, outv.gpu).ok());
  const auto got = gpu_values(outv.gpu);
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t c = 0; c < in; c += 499)
      ASSERT_EQ(got[r * in + static_cast<size_t>(c)], values[static_cast<size_t>(rows[r] * in + c)]) << r << " " << c;
  std::printf("[ load     ] %.1f MB in %.3f s: %.2f GB/s\n", gpu_->load_stats().bytes / 1e6, gpu_->load_stats().seconds,
              gpu_->load_stats().gb_per_s());
}

// No process-wide state: two backends on the same device keep their own allocations, weights and streams.
TEST_F(CudaBackendBasics, TwoBackendsInOneProcess) {
  auto other = CudaBackend::create(0);
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  CudaBackend& b2 = **other;
  const auto values = test::random_normal(16 * 64, 2600);
  QuantTensor t;
  t.name = "w";
  t.shape = {16, 64};
  t.data = {reinterpret_cast<const uint8_t*>(values.data()), values.size() * 4};
  auto w1 = gpu_->upload_weight(t);
  auto w2 = b2.upload_weight(t);
  ASSERT_TRUE(w1.ok() && w2.ok());
  const auto xv = test::random_normal(2 * 64, 2601);
  std::vector<float> y1(32), y2(32);
  {
    auto x1 = allocate_scoped(*gpu_, 512), o1 = allocate_scoped(*gpu_, 128);
    auto x2 = allocate_scoped(b2, 512), o2 = allocate_scoped(b2, 128);
    ASSERT_TRUE(x1.ok() && o1.ok() && x2.ok() && o2.ok());
    ASSERT_TRUE(gpu_->upload(xv.data(), x1->buffer().ptr, 512).ok());
    ASSERT_TRUE(b2.upload(xv.data(), x2->buffer().ptr, 512).ok());
    // Memory of one backend is foreign to the other.
    EXPECT_EQ(b2.linear(x1->view<float>(2, 64), *w2, WeightHandle{}, o2->view<float>(2, 16)).code(),
              ErrorCode::kOutOfRange);
    ASSERT_TRUE(gpu_->linear(x1->view<float>(2, 64), *w1, WeightHandle{}, o1->view<float>(2, 16)).ok());
    ASSERT_TRUE(b2.linear(x2->view<float>(2, 64), *w2, WeightHandle{}, o2->view<float>(2, 16)).ok());
    ASSERT_TRUE(gpu_->download(o1->buffer().ptr, y1.data(), 128).ok());
    ASSERT_TRUE(b2.download(o2->buffer().ptr, y2.data(), 128).ok());
  }
  EXPECT_EQ(y1, y2);
  EXPECT_EQ(b2.live_allocations(), 0u);
  other->reset();  // destroying one backend leaves the other working
  const auto x = input(2, 64, 2602);
  auto y = output(2, 16);
  EXPECT_TRUE(gpu_->linear(x.gpu, *w1, WeightHandle{}, y.gpu).ok());
  EXPECT_TRUE(gpu_->synchronize().ok());
}

}  // namespace
}  // namespace qrt
