// Decodes raw GGML blocks with qrt's CPU reference, for the gguf-py comparison in test_iquants.py.
//   qrt_iquant_decode <format name> <blocks.bin> <out.f32>
// blocks.bin holds whole blocks back to back; out.f32 receives block_elems float32 values per block.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"

namespace {

int fail(const std::string& msg) {
  std::fprintf(stderr, "qrt_iquant_decode: %s\n", msg.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace qrt::quant;
  if (argc != 4) return fail("usage: qrt_iquant_decode <format> <blocks.bin> <out.f32>");
  const auto id = format_from_name(argv[1]);
  if (!id) return fail(std::string("unknown format '") + argv[1] + "'");
  const FormatInfo info = format_info(*id);
  if (info.family != Family::kGgml || info.block_elems <= 0 || info.block_bytes <= 0)
    return fail(std::string(info.name) + " is not a fixed-size GGML block format");

  std::ifstream in(argv[2], std::ios::binary);
  if (!in) return fail(std::string("cannot open ") + argv[2]);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.empty() || bytes.size() % static_cast<size_t>(info.block_bytes) != 0)
    return fail(std::string(argv[2]) + ": " + std::to_string(bytes.size()) + " bytes is not a positive multiple of " +
                std::string(info.name) + "'s block size " + std::to_string(info.block_bytes));

  // One block per row: rows = number of blocks, cols = block_elems.
  QuantView v;
  v.data = bytes.data();
  v.rows = static_cast<int64_t>(bytes.size() / static_cast<size_t>(info.block_bytes));
  v.cols = info.block_elems;
  std::vector<float> out(static_cast<size_t>(v.rows * v.cols));
  const qrt::Status s = qrt::cpu::dequantize(*id, v, out.data());
  if (!s.ok()) return fail(s.to_string());

  std::ofstream o(argv[3], std::ios::binary);
  o.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size() * sizeof(float)));
  if (!o) return fail(std::string("cannot write ") + argv[3]);
  return 0;
}
