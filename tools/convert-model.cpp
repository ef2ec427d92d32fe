// convert-model: a model from one ecosystem's file format into another's without re-quantizing: the encoded
// blocks are copied unchanged wherever the type exists in both.
//
//   convert-model MODEL -o OUT.gguf [--requantize TYPE [--imatrix FILE]] [--force] [--quiet]
//       UQFF export (or HF checkpoint) -> GGUF
//   convert-model MODEL.gguf -o OUT_DIR [--requantize TYPE [--imatrix FILE]] [--force] [--quiet]
//       GGUF -> UQFF export directory
//
// MODEL is a UQFF export (a set of it, as run-model takes it) or a Hugging Face checkpoint; OUT.gguf gets
// llama.cpp's tensor names and metadata, the tokenizer converted from tokenizer.json (byte-level BPE or
// SentencePiece-style), and every tensor in its own GGML type (Q/K rows of llama-family models reordered for
// interleaved RoPE, UQFF's MXFP4 layout repacked into GGUF's blocks, bytes otherwise unchanged). A tensor whose type
// has no GGUF counterpart (AFQ, HQQ, FP8, F8Q8) is an error naming it, unless --requantize names a GGML type to
// quantize such tensors to (decoded first: the result carries both encodings' errors, so quantize-model from the
// checkpoint is better where one has it). The other way, a GGUF model becomes a UQFF export directory (shards
// model-<n>.uqff) with its blocks copied (MXFP4 repacked; i-quants refused or requantized), a config.json and a
// tokenizer.json.
// Outputs are written beside OUT and renamed into place; an existing OUT is replaced only with --force.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "kernels/quant/formats.hpp"
#include "loader/open_model.hpp"
#include "qrt/version.hpp"
#include "tools/convert/gguf_export.hpp"
#include "tools/convert/progress.hpp"
#include "tools/convert/uqff_from_gguf.hpp"

namespace {

int fail(const std::string& message) {
  std::string line = message;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::fprintf(stderr, "error: %s\n", line.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  CLI::App app{"convert-model: a model into another file format, its encoded blocks copied unchanged"};
  app.set_version_flag("--version", std::string("qrt ") + qrt::kVersion);
  std::string model_path, out;
  bool force = false, quiet = false;
  app.add_option("model", model_path, "UQFF export, Hugging Face checkpoint or GGUF file")->required();
  app.add_option("-o,--output", out, "a path ending in .gguf, or (from GGUF) an export directory")->required();
  app.add_flag("--force", force, "replace an existing output");
  app.add_flag("-q,--quiet", quiet, "no progress output");
  std::string requantize;
  app.add_option("--requantize", requantize,
                 "quantize tensors whose type the output lacks (to GGUF: AFQ, HQQ, FP8, ...; to UQFF: i-quants, "
                 "ternary) to this GGML type, e.g. q8_0");
  std::string imatrix_path;
  app.add_option("--imatrix", imatrix_path,
                 "importance matrix from llama-imatrix (.gguf or legacy .dat) for the requantized tensors");
  CLI11_PARSE(app, argc, argv);
  qrt::ImportanceMatrix imatrix;
  if (!imatrix_path.empty()) {
    if (requantize.empty()) return fail("--imatrix weighs requantized tensors; give --requantize TYPE with it");
    auto m = qrt::read_imatrix(imatrix_path);
    if (!m.ok()) return fail("--imatrix: " + m.status().message());
    imatrix = std::move(*m);
  }
  const qrt::ImportanceMatrix* importance = imatrix_path.empty() ? nullptr : &imatrix;

  std::error_code ec;
  if (fs::exists(out, ec) && !force) return fail(out + " exists; pass --force to replace it");
  auto source = qrt::open_model_source(model_path);
  if (!source.ok()) return fail(source.status().message());
  if (fs::path(out).extension() != ".gguf") {
    // GGUF -> a UQFF export directory, staged beside it.
    if (source->kind != qrt::SourceKind::kGguf)
      return fail(model_path +
                  ": a UQFF export is made from a GGUF model; give -o a path ending in .gguf to "
                  "convert this one");
    qrt::convert::UqffFromGgufOptions options;
    options.quiet = quiet;
    options.importance = importance;
    if (!requantize.empty()) {
      auto type = qrt::convert::gguf_type_from_name(requantize);
      if (!type.ok()) return fail("--requantize: " + type.status().message());
      if (!qrt::convert::uqff_ggml_code(qrt::quant::format_info(*type).ggml_type))
        return fail("--requantize: " + requantize +
                    " is not a type of UQFF's GGML family (q4_0 ... q8_0, q2k ... q6k: what mistral.rs reads)");
      options.requantize = *type;
    }
    const fs::path dest(out);
    const fs::path staging = dest.string() + ".qrt-staging-" + std::to_string(getpid());
    fs::create_directories(staging, ec);
    if (ec) return fail("cannot create " + staging.string() + ": " + ec.message());
    auto report = qrt::convert::write_uqff_from_gguf(*source, staging.string(), "model", options);
    if (!report.ok()) {
      fs::remove_all(staging, ec);
      return fail(report.status().message());
    }
    const fs::path old = dest.string() + ".qrt-old-" + std::to_string(getpid());
    const bool existed = fs::exists(dest, ec);
    if (existed) fs::rename(dest, old, ec);
    if (!ec) fs::rename(staging, dest, ec);
    if (ec) {
      fs::remove_all(staging, ec);
      return fail("publishing " + out + ": " + ec.message());
    }
    if (existed) fs::remove_all(old, ec);
    if (!quiet)
      for (const std::string& line : report->outputs[0].fallbacks) std::fprintf(stderr, "%s\n", line.c_str());
    if (!quiet)
      std::fprintf(stderr, "convert-model: wrote %s (%s in %zu shard(s))\n", out.c_str(),
                   qrt::convert::human_bytes(static_cast<double>(report->outputs[0].bytes)).c_str(),
                   report->outputs[0].shards.size());
    return 0;
  }
  qrt::convert::GgufExportOptions options;
  options.keep_types = true;
  options.quiet = quiet;
  options.importance = importance;
  if (!requantize.empty()) {
    auto type = qrt::convert::gguf_type_from_name(requantize);
    if (!type.ok()) return fail("--requantize: " + type.status().message());
    options.requantize = *type;
  }
  options.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string staging = out + ".qrt-staging-" + std::to_string(getpid());
  auto report = qrt::convert::write_gguf_export(*source, staging, options);
  if (report.ok()) fs::rename(staging, out, ec);
  if (!report.ok() || ec) {
    fs::remove(staging, ec);
    return fail(report.ok() ? "publishing " + out + ": " + ec.message() : report.status().message());
  }
  if (!quiet) {
    for (const std::string& line : report->requantized) std::fprintf(stderr, "requantized %s\n", line.c_str());
    for (const std::string& line : report->fallbacks) std::fprintf(stderr, "fell back: %s\n", line.c_str());
    std::fprintf(stderr, "convert-model: wrote %s (%s; %zu tensors requantized, the rest copied)\n", out.c_str(),
                 qrt::convert::human_bytes(static_cast<double>(report->bytes)).c_str(), report->requantized.size());
  }
  return 0;
}
