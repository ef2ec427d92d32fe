// Launch tuning (CudaBackend::set_launch_tuning, QRT_CUDA_TUNE): the integer-dot GEMV's rows per block are timed
// per weight shape at upload and the fastest is kept. Under the SIMT layer the timings are the CPU's, so which
// candidate wins says nothing; what is checked is that a choice is made once per shape among the legal ones, that
// the outputs are the bits of an untuned backend whatever it is, and that the environment switch is validated.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "backend_pair.hpp"
#if defined(QRT_SIMT)
#include "simt/simt.hpp"
#endif

namespace qrt {
namespace {

class CudaLaunchTuning : public test::BackendPair {
 protected:
  void SetUp() override {
    setenv("QRT_CUDA_TUNE", "1", 1);
    BackendPair::SetUp();
    unsetenv("QRT_CUDA_TUNE");
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

TEST_F(CudaLaunchTuning, OneChoicePerShapeAndTheSameBitsAsUntuned) {
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
    const auto [one, several] = gpu_->tuned_dp4a_rows(w->gpu);
    EXPECT_TRUE(one == 1 || one == 2 || one == 4) << one;
    EXPECT_TRUE(several == 1 || several == 2) << several;
  }
  EXPECT_EQ(gpu_->tuned_dp4a_rows(wa.gpu), gpu_->tuned_dp4a_rows(wb.gpu)) << "one timing per shape";
  EXPECT_EQ(gpu_->tuned_dp4a_rows(wd.gpu), (std::pair<int, int>{0, 0})) << "F16 has no integer-dot kernel";

  for (const auto& [w, pair] : {std::pair{&a->tensor, wa}, {&b->tensor, wb}, {&c->tensor, wc}}) {
    for (const int64_t rows : {int64_t{1}, int64_t{3}}) {
      const int64_t cols = w->shape[1];
      const std::vector<float> xv = test::random_normal(static_cast<size_t>(rows * cols), 2610 + rows);
      const auto x = input_values(xv, rows, cols);
      const auto y = output(rows, w->shape[0]);
      ASSERT_TRUE(cpu_.linear(x.cpu, pair.cpu, WeightHandle{}, y.cpu).ok());
#if defined(QRT_SIMT)
      const simt::StreamCounters before = simt::device_counters(0);
#endif
      ASSERT_TRUE(gpu_->linear(x.gpu, pair.gpu, WeightHandle{}, y.gpu).ok());
#if defined(QRT_SIMT)
      EXPECT_EQ((simt::device_counters(0) - before).kernel_launches, 2u) << "quantize x, then the GEMV: no timing";
#endif
      expect_close(y, kIntegerGemvTolerance, std::string(quant::format_name(w->format)) + " tuned");
      EXPECT_EQ(gpu_values(y.gpu), linear_on(**plain, *w, xv, rows))
          << quant::format_name(w->format) << " [" << w->shape[0] << "], " << rows << " rows: tuned and untuned differ";
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
