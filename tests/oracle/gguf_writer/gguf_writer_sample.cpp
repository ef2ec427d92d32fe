// qrt_gguf_writer_sample OUT.gguf [ALIGNMENT]: a GGUF written by qrt's GgufWriter with metadata of every type and
// tensors in several GGML types (values from a fixed formula), for test_gguf_writer.py to read with gguf-py.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/formats.hpp"
#include "tools/convert/gguf_writer.hpp"

using namespace qrt;

// Tensor values: sin(i * 0.37 + tensor) scaled, so every test can recompute them.
std::vector<float> values(int64_t n, int tensor) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(0.37f * static_cast<float>(i) + tensor) * 2.0f;
  return v;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  convert::GgufWriter w;
  if (argc > 2) w.set_alignment(static_cast<uint32_t>(std::atoi(argv[2])));
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "qrt writer sample: ünïcode ✓");
  w.set_u8("test.u8", 200);
  w.set_i8("test.i8", -100);
  w.set_u16("test.u16", 60000);
  w.set_i16("test.i16", -30000);
  w.set_u32("test.u32", 4000000000u);
  w.set_i32("test.i32", -2000000000);
  w.set_u64("test.u64", 18000000000000000000ull);
  w.set_i64("test.i64", -9000000000000000000ll);
  w.set_f32("test.f32", 0.1f);
  w.set_f64("test.f64", 0.1);
  w.set_bool("test.bool", true);
  w.set_strings("test.strings", {"a", "", "ünï", "<s>"});
  w.set_i32s("test.i32s", {1, -2, 3});
  w.set_f32s("test.f32s", {0.5f, -1.25f});
  w.set_u32("test.replaced", 1);
  w.set_u32("test.replaced", 2);  // the second value in the first place
  struct T {
    const char* name;
    quant::FormatId format;
    std::vector<int64_t> shape;
  };
  std::vector<quant::QuantBuffers> kept;
  const T tensors[] = {{"f32", quant::FormatId::kF32, {3, 5}},     {"f16", quant::FormatId::kF16, {2, 4}},
                       {"bf16", quant::FormatId::kBF16, {2, 8}},   {"q8_0", quant::FormatId::kQ8_0, {2, 64}},
                       {"q4_k", quant::FormatId::kQ4_K, {3, 256}}, {"vector", quant::FormatId::kF32, {7}}};
  kept.reserve(std::size(tensors));
  int index = 0;
  for (const T& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    const int64_t cols = t.shape.back();
    auto q = cpu::quantize(t.format, values(n, index).data(), n / cols, cols, {});
    if (!q.ok()) {
      std::fprintf(stderr, "%s\n", q.status().to_string().c_str());
      return 1;
    }
    kept.push_back(std::move(*q));
    w.add_tensor(t.name, quant::format_info(t.format).ggml_type, t.shape,
                 {kept.back().data.data(), kept.back().data.size()});
    ++index;
  }
  const Status s = w.write(argv[1]);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}
