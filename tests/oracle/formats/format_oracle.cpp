// qrt_format_oracle: exposes qrt's format code to the numpy oracle (test_formats.py) through files.
//
//   sizes    FMT ROWS COLS GROUP SCALE_TYPE GLOBAL_SCALE
//            prints "data scales biases" part sizes in bytes; exit 3 when check_params rejects the shape/params
//   dequant  FMT ROWS COLS GROUP SCALE_TYPE GLOBAL_SCALE DATA SCALES BIASES OUT
//            parts are files ("-" for an absent part); writes OUT = [ROWS, COLS] float32
//   quant    FMT ROWS COLS GROUP SCALE_TYPE GLOBAL_SCALE IN DATA SCALES BIASES
//            IN = [ROWS, COLS] float32; writes each part that is not "-" (empty parts as empty files)
//   tables   OUT        writes float32 decodes: 16 E2M1 codes, 256 E4M3FN bytes, 256 E8M0 bytes
//   encode   KIND IN OUT   KIND = e2m1 | e4m3 | e8m0_up; IN float32 -> OUT one byte per value
// SCALE_TYPE is a safetensors dtype name (F32, F16, BF16). Exit 0 on success, 2 on a usage or I/O error.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/formats.hpp"

namespace {
using namespace qrt;
using namespace qrt::quant;

int fail(const std::string& msg, int code = 2) {
  std::fprintf(stderr, "qrt_format_oracle: %s\n", msg.c_str());
  return code;
}

bool read_file(const std::string& path, std::vector<uint8_t>* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

bool write_file(const std::string& path, const void* data, size_t n) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  return static_cast<bool>(f);
}

struct TensorArgs {
  FormatId format{};
  int64_t rows = 0, cols = 0;
  QuantParams params;
};

// argv[0..5] = FMT ROWS COLS GROUP SCALE_TYPE GLOBAL_SCALE
bool parse_tensor_args(char** argv, TensorArgs* t, std::string* err) {
  const auto id = format_from_name(argv[0]);
  if (!id) {
    *err = std::string("unknown format ") + argv[0];
    return false;
  }
  const auto st = scalar_type_from_name(argv[4]);
  if (!st) {
    *err = std::string("unknown scale type ") + argv[4];
    return false;
  }
  t->format = *id;
  t->rows = std::strtoll(argv[1], nullptr, 10);
  t->cols = std::strtoll(argv[2], nullptr, 10);
  t->params.group_size = static_cast<int32_t>(std::strtol(argv[3], nullptr, 10));
  t->params.scale_type = *st;
  t->params.global_scale = std::strtof(argv[5], nullptr);
  return true;
}

int cmd_sizes(char** argv) {
  TensorArgs t;
  std::string err;
  if (!parse_tensor_args(argv, &t, &err)) return fail(err);
  auto sizes = cpu::part_sizes(t.format, t.rows, t.cols, t.params);
  if (!sizes.ok()) return fail(sizes.status().to_string(), 3);
  std::printf("%llu %llu %llu\n", static_cast<unsigned long long>(sizes->data),
              static_cast<unsigned long long>(sizes->scales), static_cast<unsigned long long>(sizes->biases));
  return 0;
}

int cmd_dequant(char** argv) {
  TensorArgs t;
  std::string err;
  if (!parse_tensor_args(argv, &t, &err)) return fail(err);
  auto sizes = cpu::part_sizes(t.format, t.rows, t.cols, t.params);
  if (!sizes.ok()) return fail(sizes.status().to_string(), 3);
  QuantBuffers parts;
  std::vector<uint8_t>* dst[3] = {&parts.data, &parts.scales, &parts.biases};
  const uint64_t want[3] = {sizes->data, sizes->scales, sizes->biases};
  for (int i = 0; i < 3; ++i) {
    const std::string path = argv[6 + i];
    if (path != "-" && !read_file(path, dst[i])) return fail("cannot read " + path);
    if (dst[i]->size() != want[i])
      return fail("part " + std::to_string(i) + " (" + path + ") has " + std::to_string(dst[i]->size()) +
                  " bytes, the format wants " + std::to_string(want[i]));
  }
  std::vector<float> out(static_cast<size_t>(t.rows * t.cols));
  const Status s = cpu::dequantize(t.format, cpu::view_of(parts, t.rows, t.cols, t.params), out.data());
  if (!s.ok()) return fail(s.to_string(), 3);
  return write_file(argv[9], out.data(), out.size() * 4) ? 0 : fail(std::string("cannot write ") + argv[9]);
}

int cmd_quant(char** argv) {
  TensorArgs t;
  std::string err;
  if (!parse_tensor_args(argv, &t, &err)) return fail(err);
  std::vector<uint8_t> raw;
  if (!read_file(argv[6], &raw)) return fail(std::string("cannot read ") + argv[6]);
  if (t.rows <= 0 || t.cols <= 0 || raw.size() != static_cast<size_t>(t.rows * t.cols) * 4)
    return fail("input is not [rows, cols] float32");
  std::vector<float> x(raw.size() / 4);
  std::memcpy(x.data(), raw.data(), raw.size());
  auto q = cpu::quantize(t.format, x.data(), t.rows, t.cols, t.params);
  if (!q.ok()) return fail(q.status().to_string(), 3);
  const std::vector<uint8_t>* src[3] = {&q->data, &q->scales, &q->biases};
  for (int i = 0; i < 3; ++i) {
    const std::string path = argv[7 + i];
    if (path != "-" && !write_file(path, src[i]->data(), src[i]->size())) return fail("cannot write " + path);
  }
  return 0;
}

int cmd_tables(const char* out_path) {
  std::vector<float> v;
  for (uint32_t c = 0; c < 16; ++c) v.push_back(e2m1_to_f32(c));
  for (uint32_t b = 0; b < 256; ++b) v.push_back(e4m3_to_f32(b));
  for (uint32_t s = 0; s < 256; ++s) v.push_back(e8m0_to_f32(s));
  return write_file(out_path, v.data(), v.size() * 4) ? 0 : fail(std::string("cannot write ") + out_path);
}

int cmd_encode(const std::string& kind, const char* in_path, const char* out_path) {
  std::vector<uint8_t> raw;
  if (!read_file(in_path, &raw) || raw.size() % 4 != 0) return fail(std::string("cannot read floats from ") + in_path);
  std::vector<uint8_t> out(raw.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    const float x = load_f32(raw.data() + 4 * i);
    if (kind == "e2m1") out[i] = f32_to_e2m1(x);
    else if (kind == "e4m3") out[i] = f32_to_e4m3(x);
    else if (kind == "e8m0_up") out[i] = e8m0_round_up(x);
    else return fail("unknown encoding " + kind);
  }
  return write_file(out_path, out.data(), out.size()) ? 0 : fail(std::string("cannot write ") + out_path);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "sizes" && argc == 8) return cmd_sizes(argv + 2);
  if (cmd == "dequant" && argc == 12) return cmd_dequant(argv + 2);
  if (cmd == "quant" && argc == 12) return cmd_quant(argv + 2);
  if (cmd == "tables" && argc == 3) return cmd_tables(argv[2]);
  if (cmd == "encode" && argc == 5) return cmd_encode(argv[2], argv[3], argv[4]);
  return fail("usage: see the comment at the top of tests/oracle/formats/format_oracle.cpp");
}
