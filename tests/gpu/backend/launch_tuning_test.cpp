// Launch tuning (CudaBackend::set_launch_tuning, QRT_CUDA_TUNE): at upload the integer-dot GEMV's rows per block, and
// the int8 tensor-core GEMM against the GEMV (2..8 rows) and against the wide GEMMs (9..64, 65 rows and more), are
// timed per weight shape and the fastest kept. Under the SIMT layer the timings are the CPU's, so which candidate wins
// says nothing; what is checked is that a legal choice is made once per shape, that the rows per block change no bit,
// that each choice routes its batches where it says (launch counts) with the path's accuracy, and that the environment
// switch is validated.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <vector>

#include "backend_pair.hpp"
#include "kernels/linear/gemm_q8_mma.hpp"
#if defined(QRT_SIMT)
#include "simt/simt.hpp"
#endif

namespace qrt {
namespace {

// The kernels linear() launches for `rows` rows on the tensor cores: per chunk of up to kMmaMaxBatch rows, x's
// quantization, its rearrangement, then a GEMM per 32 rows below kMmaTallMinBatch, one at or above it.
uint64_t tensor_core_launches(int64_t rows) {
  uint64_t launches = 0;
  for (int64_t left = rows; left > 0; left -= kernels::kMmaMaxBatch) {
    const int64_t chunk = std::min<int64_t>(left, kernels::kMmaMaxBatch);
    launches += 2u + static_cast<uint64_t>(chunk >= kernels::kMmaTallMinBatch ? 1 : (chunk + 31) / 32);
  }
  return launches;
}

class CudaLaunchTuning : public test::BackendPair {
 protected:
  void SetUp() override {
    setenv("QRT_CUDA_TUNE", "1", 1);
    BackendPair::SetUp();
    unsetenv("QRT_CUDA_TUNE");
  }
  // y = x · Wᵀ for `rows` random rows of `in` columns on both backends, the GPU's within `tolerance` of the CPU's;
  // returns the kernels the GPU launched (0 outside the SIMT layer, where nothing counts them).
  uint64_t linear_launches(const test::DualWeight& w, int64_t rows, int64_t in, int64_t out, uint64_t seed,
                           double tolerance, const std::string& what) {
    const auto x = input(rows, in, seed);
    const auto y = output(rows, out);
    EXPECT_TRUE(cpu_.linear(x.cpu, w.cpu, WeightHandle{}, y.cpu).ok()) << what;
    uint64_t launches = 0;
#if defined(QRT_SIMT)
    const simt::StreamCounters before = simt::device_counters(0);
#endif
    EXPECT_TRUE(gpu_->linear(x.gpu, w.gpu, WeightHandle{}, y.gpu).ok()) << what;
#if defined(QRT_SIMT)
    launches = (simt::device_counters(0) - before).kernel_launches;
#endif
    expect_close(y, tolerance, what);
    return launches;
  }
};

// y = x · Wᵀ on a backend of its own (an untuned one here), from host values to host values.
std::vector<float> linear_on(CudaBackend& b, const QuantTensor& t, const std::vector<float>& x, int64_t rows) {
  auto w = b.upload_weight(t);
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  const int64_t out = t.shape[0], in = t.shape[1];
  auto xb = allocate_scoped(b, x.size() * sizeof(float));
  auto yb = allocate_scoped(b, static_cast<uint64_t>(rows * out) * sizeof(float));
  EXPECT_TRUE(xb.ok() && yb.ok());
  EXPECT_TRUE(b.upload(x.data(), xb->buffer().ptr, x.size() * sizeof(float)).ok());
  EXPECT_TRUE(b.linear(xb->view<float>(rows, in), *w, WeightHandle{}, yb->view<float>(rows, out)).ok());
  std::vector<float> y(static_cast<size_t>(rows * out));
  EXPECT_TRUE(b.download(yb->buffer().ptr, y.data(), y.size() * sizeof(float)).ok());
  b.free_weight(*w);
  return y;
}

TEST_F(CudaLaunchTuning, OneChoicePerShapeAndRowsPerBlockChangeNoBits) {
  auto plain = CudaBackend::create(0);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  (*plain)->set_launch_tuning(false);
  // Two Q4_K matrices of one shape (the second reuses the first's timing), a tall Q8_0 one, and an F16 one (no
  // integer-dot kernel: nothing to tune).
  const int64_t in = 512;
  auto a = test::quantized_tensor(quant::FormatId::kQ4_K, {300, in}, test::random_normal(300 * in, 2600),
                                  test::default_params(quant::FormatId::kQ4_K));
  auto b = test::quantized_tensor(quant::FormatId::kQ4_K, {300, in}, test::random_normal(300 * in, 2601),
                                  test::default_params(quant::FormatId::kQ4_K));
  auto c = test::quantized_tensor(quant::FormatId::kQ8_0, {4100, 256}, test::random_normal(4100 * 256, 2602),
                                  test::default_params(quant::FormatId::kQ8_0));
  auto d = test::quantized_tensor(quant::FormatId::kF16, {64, in}, test::random_normal(64 * in, 2603),
                                  test::default_params(quant::FormatId::kF16));
  const auto wa = weight(a->tensor), wb = weight(b->tensor), wc = weight(c->tensor), wd = weight(d->tensor);
  for (const auto* w : {&wa, &wb, &wc}) {
    const CudaBackend::TunedLinear t = gpu_->tuned_linear(w->gpu);
    EXPECT_TRUE(t.dp4a_rows_one == 1 || t.dp4a_rows_one == 2 || t.dp4a_rows_one == 4 || t.dp4a_rows_one == 8)
        << t.dp4a_rows_one;
    EXPECT_TRUE(t.dp4a_rows_batch == 1 || t.dp4a_rows_batch == 2) << t.dp4a_rows_batch;
    const int64_t sms = gpu_->device_props().sm_count;
    EXPECT_TRUE(t.dp4a_blocks_one == 0 || t.dp4a_blocks_one == 4 * sms || t.dp4a_blocks_one == 8 * sms ||
                t.dp4a_blocks_one == 16 * sms || t.dp4a_blocks_one == 32 * sms)
        << t.dp4a_blocks_one << " blocks for one row";
  }
  const CudaBackend::TunedLinear ta = gpu_->tuned_linear(wa.gpu), tb = gpu_->tuned_linear(wb.gpu);
  EXPECT_TRUE(ta.dp4a_rows_one == tb.dp4a_rows_one && ta.dp4a_rows_batch == tb.dp4a_rows_batch &&
              ta.dp4a_blocks_one == tb.dp4a_blocks_one &&
              ta.mma_several == tb.mma_several && ta.mma_wide == tb.mma_wide && ta.mma_tall == tb.mma_tall)
      << "one timing per shape";
  const CudaBackend::TunedLinear td = gpu_->tuned_linear(wd.gpu);
  EXPECT_TRUE(td.dp4a_rows_one == 0 && td.dp4a_rows_batch == 0 && td.dp4a_blocks_one == 0 && !td.mma_several &&
              !td.mma_wide && !td.mma_tall)
      << "F16 has no integer-dot kernel";

  // Whatever rows per block were chosen, the GEMV gives an untuned backend's bits (the tensor-core GEMM is kept off
  // here, so that 3 rows take the GEMV whatever the timing said), and so does a grid of 3 looping blocks for one row
  // on the second matrix.
  for (const auto& [w, pair] : {std::pair{&a->tensor, wa}, {&b->tensor, wb}, {&c->tensor, wc}}) {
    CudaBackend::TunedLinear t = gpu_->tuned_linear(pair.gpu);
    t.mma_several = t.mma_wide = t.mma_tall = false;
    if (w == &b->tensor) t.dp4a_blocks_one = 3;
    ASSERT_TRUE(gpu_->set_tuned_linear(pair.gpu, t).ok());
    for (const int64_t rows : {int64_t{1}, int64_t{3}}) {
      const int64_t cols = w->shape[1];
      const std::vector<float> xv = test::random_normal(static_cast<size_t>(rows * cols), 2610 + rows);
      const auto x = input_values(xv, rows, cols);
      const auto y = output(rows, w->shape[0]);
      ASSERT_TRUE(cpu_.linear(x.cpu, pair.cpu, WeightHandle{}, y.cpu).ok());
      ASSERT_TRUE(gpu_->linear(x.gpu, pair.gpu, WeightHandle{}, y.gpu).ok());
      expect_close(y, kIntegerGemvTolerance, std::string(quant::format_name(w->format)) + " tuned");
      EXPECT_EQ(gpu_values(y.gpu), linear_on(**plain, *w, xv, rows))
          << quant::format_name(w->format) << " [" << w->shape[0] << "], " << rows << " rows: tuned and untuned differ";
    }
  }
}

// Each choice sends its batches where it says: 2..8 rows to the GEMV or the tensor-core GEMM, 9..64 and 65 and more (a
// prompt above kMmaMaxBatch rows in chunks) to the tensor-core GEMM or the cuBLAS path, each within its tolerance of
// the CPU; the buckets are independent; choices the weight cannot take are refused.
TEST_F(CudaLaunchTuning, TheChoicesRouteTheBatches) {
  const int64_t in = 512, out = 96;
  auto q = test::quantized_tensor(quant::FormatId::kQ4_K, {out, in}, test::random_normal(out * in, 2620),
                                  test::default_params(quant::FormatId::kQ4_K));
  const auto w = weight(q->tensor);
  // The tensor-core GEMM for 2..8, 9..64 and 65 or more rows: none, all, and two mixes.
  for (const std::array<bool, 3> buckets : {std::array{false, false, false}, std::array{true, true, true},
                                            std::array{false, true, false}, std::array{true, false, true}}) {
    CudaBackend::TunedLinear t = gpu_->tuned_linear(w.gpu);
    t.mma_several = buckets[0];
    t.mma_wide = buckets[1];
    t.mma_tall = buckets[2];
    ASSERT_TRUE(gpu_->set_tuned_linear(w.gpu, t).ok());
    for (const int64_t rows : {int64_t{5}, int64_t{20}, int64_t{100}, int64_t{300}}) {
      const bool mma = buckets[rows <= kernels::kGemvMaxBatch ? 0 : rows <= 64 ? 1 : 2];
      const std::string what = std::string(mma ? "tensor cores" : "GEMV / cuBLAS") + ", " + std::to_string(rows) +
                               " rows";
      const double tolerance = mma || rows <= kernels::kGemvMaxBatch ? kIntegerGemvTolerance : kGemmTolerance;
      const uint64_t launches = linear_launches(w, rows, in, out, 2621 + rows, tolerance, what);
      if (!kCounted) continue;
      if (mma) {
        EXPECT_EQ(launches, tensor_core_launches(rows)) << what << ": quantize x, rearrange it, the tensor-core GEMMs";
      } else if (rows <= kernels::kGemvMaxBatch) {
        EXPECT_EQ(launches, 2u) << what << ": quantize x, the GEMV";
      } else {
        EXPECT_EQ(launches, 3u) << what << ": x and W to fp16, the cuBLAS GEMM";
      }
    }
  }
  CudaBackend::TunedLinear bad;
  bad.dp4a_rows_batch = 4;
  EXPECT_FALSE(gpu_->set_tuned_linear(w.gpu, bad).ok()) << "4 rows per block at batch 8";
  CudaBackend::TunedLinear eight;
  eight.dp4a_rows_one = 8;
  EXPECT_TRUE(gpu_->set_tuned_linear(w.gpu, eight).ok()) << "8 rows per block at batch 1";
  eight.dp4a_rows_one = 16;
  EXPECT_FALSE(gpu_->set_tuned_linear(w.gpu, eight).ok()) << "16 rows per block";
  CudaBackend::TunedLinear looping;
  looping.dp4a_blocks_one = -2;
  EXPECT_FALSE(gpu_->set_tuned_linear(w.gpu, looping).ok()) << "-2 blocks";
  auto f16 = test::quantized_tensor(quant::FormatId::kF16, {out, in}, test::random_normal(out * in, 2622),
                                    test::default_params(quant::FormatId::kF16));
  const auto wf = weight(f16->tensor);
  CudaBackend::TunedLinear tensor_cores;
  tensor_cores.mma_several = true;
  EXPECT_FALSE(gpu_->set_tuned_linear(wf.gpu, tensor_cores).ok()) << "F16 has no tensor-core GEMM here";
}

// q, k and v of one x row in one launch, the tallest part's looping grid (2 blocks) over all three matrices' row
// groups: the same bits as a block per row group, in one GEMV launch after the quantization.
TEST_F(CudaLaunchTuning, ALoopingGridServesProjectionsSharingAnInput) {
  const int64_t in = 512;
  std::vector<std::unique_ptr<test::OwnedTensor>> owned;
  std::vector<test::DualWeight> w;
  for (const int64_t out : {int64_t{96}, int64_t{32}, int64_t{32}}) {
    owned.push_back(test::quantized_tensor(quant::FormatId::kQ4_K, {out, in},
                                           test::random_normal(static_cast<size_t>(out * in), 2640 + out),
                                           test::default_params(quant::FormatId::kQ4_K)));
    w.push_back(weight(owned.back()->tensor));
  }
  const auto x = input(1, in, 2645);
  std::vector<std::vector<float>> got[2];
  for (const int64_t blocks : {int64_t{0}, int64_t{2}}) {
    for (const test::DualWeight& part : w) {
      CudaBackend::TunedLinear t = gpu_->tuned_linear(part.gpu);
      t.dp4a_blocks_one = blocks;
      ASSERT_TRUE(gpu_->set_tuned_linear(part.gpu, t).ok());
    }
    const auto yq = output(1, 96), yk = output(1, 32), yv = output(1, 32);
    const std::vector<Backend::LinearPart> parts = {{w[0].gpu, {}, yq.gpu}, {w[1].gpu, {}, yk.gpu},
                                                    {w[2].gpu, {}, yv.gpu}};
#if defined(QRT_SIMT)
    const simt::StreamCounters before = simt::device_counters(0);
#endif
    ASSERT_TRUE(gpu_->linear_same_input(x.gpu, parts).ok());
#if defined(QRT_SIMT)
    EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, 2u) << "quantize x, one GEMV, " << blocks;
#endif
    for (const auto* y : {&yq, &yk, &yv}) got[blocks == 0 ? 0 : 1].push_back(gpu_values(y->gpu));
  }
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(got[0][j], got[1][j]) << "part " << j;
}

// AFQ2/3/5/6 have a tensor-core policy but no integer-dot GEMV: a backend holding only such a matrix reserves the
// quantized-x and tile buffers at its upload and times the tensor-core GEMM against the float GEMV and the cuBLAS
// path (no rows per block to choose); either choice then routes its batches, each within its tolerance of the CPU.
TEST_F(CudaLaunchTuning, TensorCoreFormatsWithoutAnIntegerDotGemvAreTunedToo) {
  const int64_t in = 512, out = 80;
  auto q = test::quantized_tensor(quant::FormatId::kAFQ5, {out, in}, test::random_normal(out * in, 2630),
                                  test::default_params(quant::FormatId::kAFQ5));
  const auto w = weight(q->tensor);
  const CudaBackend::TunedLinear tuned = gpu_->tuned_linear(w.gpu);
  EXPECT_TRUE(tuned.dp4a_rows_one == 0 && tuned.dp4a_rows_batch == 0) << "no integer-dot GEMV to split";
  for (const bool mma : {false, true}) {
    CudaBackend::TunedLinear t = tuned;
    t.mma_several = t.mma_wide = t.mma_tall = mma;
    ASSERT_TRUE(gpu_->set_tuned_linear(w.gpu, t).ok());
    for (const int64_t rows : {int64_t{6}, int64_t{40}, int64_t{90}}) {
      const std::string what = std::string(mma ? "tensor cores" : "float GEMV / cuBLAS") + ", " +
                               std::to_string(rows) + " rows";
      const uint64_t launches =
          linear_launches(w, rows, in, out, 2631 + rows, mma ? kIntegerGemvTolerance : kGemmTolerance, what);
      if (kCounted && mma) {
        EXPECT_EQ(launches, tensor_core_launches(rows))
            << what << ": quantize x, rearrange it, the tensor-core GEMMs (buffers reserved at upload)";
      }
    }
  }
}

TEST(CudaLaunchTuningSwitch, TheEnvironmentValueIsChecked) {
  QRT_REQUIRE_GPU();
  setenv("QRT_CUDA_TUNE", "yes", 1);
  auto refused = CudaBackend::create(0);
  unsetenv("QRT_CUDA_TUNE");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().to_string().find("QRT_CUDA_TUNE=yes"), std::string::npos)
      << refused.status().to_string();
}

}  // namespace
}  // namespace qrt
