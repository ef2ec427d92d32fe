// qrt_quant_oracle: qrt's quantized formats exposed through files, so Python oracles (gguf-py, numpy models) can
// check them. Works over the whole format list; the dequant/quantize commands handle formats whose tensor is a
// single data part (every GGML block format and the dense formats).
//
//   list                                     one line per format: name ggml_type block_elems block_bytes
//                                            has_quantizer (0/1), whitespace-separated
//   dequant  FORMAT ROWS COLS IN.bin OUT.f32 IN.bin = the packed tensor; writes OUT = [ROWS, COLS] float32
//   quantize FORMAT ROWS COLS IN.f32 OUT.bin [IMPORTANCE.f32]
//                                            IN = [ROWS, COLS] float32; writes the packed tensor; IMPORTANCE =
//                                            [COLS] float32 column weights (QuantParams::importance)
//
// Exit status: 0 success, 2 usage or I/O error, 3 qrt rejected the request (shape, format without a quantizer,
// non-finite input); the reason goes to stderr.
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/formats.hpp"

namespace {
using namespace qrt;
using namespace qrt::quant;

constexpr int kUsageError = 2;
constexpr int kRejected = 3;

int fail(const std::string& msg, int code) {
  std::fprintf(stderr, "qrt_quant_oracle: %s\n", msg.c_str());
  return code;
}

bool read_file(const std::string& path, std::vector<uint8_t>* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return !f.bad();
}

bool write_file(const std::string& path, const void* data, size_t n) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  return static_cast<bool>(f);
}

bool parse_positive(std::string_view s, int64_t* v) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && end == s.data() + s.size() && *v > 0;
}

// FORMAT ROWS COLS, checked against the format's shape rules; on success *sizes holds the part sizes.
int parse_tensor(char** argv, FormatId* id, int64_t* rows, int64_t* cols, PartSizes* sizes) {
  const auto found = format_from_name(argv[0]);
  if (!found) return fail(std::string("unknown format '") + argv[0] + "' (see: qrt_quant_oracle list)", kUsageError);
  *id = *found;
  if (!parse_positive(argv[1], rows) || !parse_positive(argv[2], cols))
    return fail(std::string("ROWS and COLS must be positive integers, got '") + argv[1] + "' '" + argv[2] + "'",
                kUsageError);
  auto s = cpu::part_sizes(*id, *rows, *cols, QuantParams{});
  if (!s.ok()) return fail(s.status().to_string(), kRejected);
  if (s->scales != 0 || s->biases != 0)
    return fail(std::string(format_name(*id)) + " keeps scales or biases in separate parts; this tool handles " +
                    "single-part formats only",
                kRejected);
  *sizes = *s;
  return 0;
}

int cmd_list() {
  for (FormatId id : kAllFormats) {
    const FormatInfo info = format_info(id);
    std::printf("%.*s %d %d %d %d\n", static_cast<int>(info.name.size()), info.name.data(), info.ggml_type,
                info.block_elems, info.block_bytes, info.has_quantizer ? 1 : 0);
  }
  return 0;
}

int cmd_dequant(char** argv) {
  FormatId id{};
  int64_t rows = 0, cols = 0;
  PartSizes sizes;
  if (int rc = parse_tensor(argv, &id, &rows, &cols, &sizes); rc != 0) return rc;
  std::vector<uint8_t> data;
  if (!read_file(argv[3], &data)) return fail(std::string("cannot read ") + argv[3], kUsageError);
  if (data.size() != sizes.data)
    return fail(std::string(argv[3]) + ": " + std::to_string(data.size()) + " bytes, but a " +
                    std::string(format_name(id)) + " tensor [" + std::to_string(rows) + ", " + std::to_string(cols) +
                    "] has " + std::to_string(sizes.data),
                kUsageError);
  QuantView v;
  v.data = data.data();
  v.rows = rows;
  v.cols = cols;
  std::vector<float> out(static_cast<size_t>(rows * cols));
  const Status s = cpu::dequantize(id, v, out.data());
  if (!s.ok()) return fail(s.to_string(), kRejected);
  if (!write_file(argv[4], out.data(), out.size() * sizeof(float)))
    return fail(std::string("cannot write ") + argv[4], kUsageError);
  return 0;
}

int cmd_quantize(char** argv, const char* importance_path) {
  FormatId id{};
  int64_t rows = 0, cols = 0;
  PartSizes sizes;
  if (int rc = parse_tensor(argv, &id, &rows, &cols, &sizes); rc != 0) return rc;
  std::vector<uint8_t> raw;
  if (!read_file(argv[3], &raw)) return fail(std::string("cannot read ") + argv[3], kUsageError);
  if (raw.size() / sizeof(float) != static_cast<uint64_t>(rows * cols) || raw.size() % sizeof(float) != 0)
    return fail(std::string(argv[3]) + ": " + std::to_string(raw.size()) + " bytes, expected [" +
                    std::to_string(rows) + ", " + std::to_string(cols) + "] float32",
                kUsageError);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  std::memcpy(x.data(), raw.data(), raw.size());
  QuantParams params;
  std::vector<float> importance;
  if (importance_path != nullptr) {
    std::vector<uint8_t> w;
    if (!read_file(importance_path, &w)) return fail(std::string("cannot read ") + importance_path, kUsageError);
    if (w.size() != static_cast<uint64_t>(cols) * sizeof(float))
      return fail(std::string(importance_path) + ": " + std::to_string(w.size()) + " bytes, expected [" +
                      std::to_string(cols) + "] float32",
                  kUsageError);
    importance.resize(static_cast<size_t>(cols));
    std::memcpy(importance.data(), w.data(), w.size());
    params.importance = importance.data();
  }
  auto q = cpu::quantize(id, x.data(), rows, cols, params);
  if (!q.ok()) return fail(q.status().to_string(), kRejected);
  if (!q->scales.empty() || !q->biases.empty() || q->data.size() != sizes.data)
    return fail(std::string(format_name(id)) + ": quantizer output does not match its single-part size", kRejected);
  if (!write_file(argv[4], q->data.data(), q->data.size()))
    return fail(std::string("cannot write ") + argv[4], kUsageError);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view cmd = argc > 1 ? argv[1] : "";
  if (cmd == "list" && argc == 2) return cmd_list();
  if (cmd == "dequant" && argc == 7) return cmd_dequant(argv + 2);
  if (cmd == "quantize" && (argc == 7 || argc == 8)) return cmd_quantize(argv + 2, argc == 8 ? argv[7] : nullptr);
  return fail(
      "usage: qrt_quant_oracle list | dequant FORMAT ROWS COLS IN.bin OUT.f32 | "
      "quantize FORMAT ROWS COLS IN.f32 OUT.bin [IMPORTANCE.f32]",
      kUsageError);
}
