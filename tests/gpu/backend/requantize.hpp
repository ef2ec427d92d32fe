// Re-packing a tiny random model's matrices in a quantized format, for the CUDA model tests.
#pragma once

#include <gtest/gtest.h>

#include <list>

#include "backend_pair.hpp"
#include "kernels/cpu/quant_reference.hpp"
#include "tiny_model.hpp"

namespace qrt::test {

// Re-packs every matrix of a tiny (F32) model in `format`, matrix by matrix for stacked experts.
inline void requantize(test::TinyModel& m, quant::FormatId format, std::list<quant::QuantBuffers>& storage) {
  for (auto& [name, t] : m.tensors) {
    if (t.shape.size() < 2) continue;
    const int64_t cols = t.shape.back(), rows = t.shape[t.shape.size() - 2];
    const int64_t matrices = t.shape.size() == 3 ? t.shape[0] : 1;
    const auto* values = reinterpret_cast<const float*>(t.data.data);
    quant::QuantBuffers& all = storage.emplace_back();
    const quant::QuantParams params = default_params(format);
    for (int64_t e = 0; e < matrices; ++e) {
      auto q = cpu::quantize(format, values + e * rows * cols, rows, cols, params);
      ASSERT_TRUE(q.ok()) << name << ": " << q.status().to_string();
      all.data.insert(all.data.end(), q->data.begin(), q->data.end());
      all.scales.insert(all.scales.end(), q->scales.begin(), q->scales.end());
      all.biases.insert(all.biases.end(), q->biases.begin(), q->biases.end());
    }
    t.format = format;
    t.params = params;
    t.data = {all.data.data(), all.data.size()};
    t.scales = {all.scales.empty() ? nullptr : all.scales.data(), all.scales.size()};
    t.biases = {all.biases.empty() ? nullptr : all.biases.data(), all.biases.size()};
  }
}

}  // namespace qrt::test
