// quantize-model: a Hugging Face checkpoint (config.json + safetensors) quantized into a UQFF export directory that
// mistral.rs and qrt load (spec/uqff.md), as `mistralrs quantize` writes it.
//
//   quantize-model CHECKPOINT_DIR -o OUT --type q4k [--type afq4 ...] [--override REGEX=TYPE ...]
//                  [--imatrix FILE] [--no-promote] [--threads N] [--force] [--quiet]
//
// OUT is a directory (one shard set per type, each named after its type: q4k-0.uqff, afq4-0.uqff, ...) or, for one
// type, a path ending in .uqff whose stem names the shards (out/model-q4k.uqff -> out/model-q4k-0.uqff ...), or a
// path ending in .gguf: one GGUF file for llama.cpp (one GGML type; byte-level BPE tokenizers; gguf_export.hpp). The
// tracked modules (attention and MLP projections, expert stacks, lm_head) are quantized with qrt's reference
// quantizers; lm_head gets a promoted type (q4k -> q6k, afq4 -> afq6, ...) unless --no-promote or an override names
// it; --override gives every module whose weight name the regex matches its own type. Nothing is left half
// written: the export is made in a staging directory beside OUT and moved into place when complete; an existing
// OUT is replaced only with --force; the free space is checked first. --imatrix takes llama-imatrix's output
// (GGUF or the legacy .dat, loader/imatrix.hpp): the GGML types' quantizers weigh each column's error by it, and
// the types llama-quantize makes only with one (iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s) need it. Bad input ends with
// one "error: ..." line on stderr and exit status 1.
#include <sys/statvfs.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "loader/hf_checkpoint.hpp"
#include "loader/imatrix.hpp"
#include "qrt/version.hpp"
#include "tools/convert/gguf_export.hpp"
#include "tools/convert/progress.hpp"
#include "tools/convert/uqff_export.hpp"
#include "tools/convert/uqff_layers.hpp"

namespace {

namespace fs = std::filesystem;
using qrt::Status;

int fail(const std::string& message) {
  std::string line = message;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::fprintf(stderr, "error: %s\n", line.c_str());
  return 1;
}

// Free bytes for an unprivileged writer on the file system holding `p` (or its nearest existing parent).
Status check_free_space(const fs::path& p, uint64_t bytes) {
  fs::path at = fs::absolute(p);
  std::error_code ec;
  while (!at.empty() && !fs::exists(at, ec)) at = at.parent_path();
  struct statvfs s {};
  if (statvfs(at.c_str(), &s) != 0) return qrt::ok_status();  // cannot tell: let the writes report a full disk
  const uint64_t free_bytes = static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
  if (free_bytes < bytes)
    return qrt::io_error("the export needs about " + qrt::convert::human_bytes(static_cast<double>(bytes)) + " but " +
                         at.string() + " has " + qrt::convert::human_bytes(static_cast<double>(free_bytes)) + " free");
  return qrt::ok_status();
}

// The source: a Hugging Face checkpoint directory, or why not.
qrt::Result<qrt::ModelSource> open_checkpoint(const std::string& dir) {
  if (!qrt::looks_like_hf_checkpoint(dir))
    return qrt::invalid_argument(dir + " is not a Hugging Face checkpoint directory (config.json and "
                                 "model.safetensors or model.safetensors.index.json)");
  return qrt::open_hf_checkpoint(dir);
}

// --override REGEX=TYPE arguments, each type read by `type_of` (the output's own type names).
qrt::Result<std::vector<std::pair<std::string, qrt::quant::FormatId>>> parse_overrides(
    const std::vector<std::string>& args, qrt::Result<qrt::quant::FormatId> (*type_of)(std::string_view)) {
  std::vector<std::pair<std::string, qrt::quant::FormatId>> out;
  for (const std::string& arg : args) {
    const size_t eq = arg.rfind('=');
    if (eq == std::string::npos || eq == 0) return qrt::invalid_argument("--override " + arg + ": expected REGEX=TYPE");
    auto f = type_of(arg.substr(eq + 1));
    if (!f.ok()) return f.status().with_context("--override " + arg);
    out.emplace_back(arg.substr(0, eq), *f);
  }
  return out;
}

// Files of a finished staging directory moved into `dest` (which exists): each rename replaces its target; shards
// of the same stems left from an older export are removed.
Status move_files_into(const fs::path& staging, const fs::path& dest, const std::vector<std::string>& stems) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dest, ec)) {
    const std::string name = e.path().filename().string();
    for (const std::string& stem : stems)
      if (name.rfind(stem + "-", 0) == 0 && e.path().extension() == ".uqff" && !fs::exists(staging / name))
        fs::remove(e.path(), ec);
  }
  for (const fs::directory_entry& e : fs::directory_iterator(staging, ec)) {
    fs::rename(e.path(), dest / e.path().filename(), ec);
    if (ec) return qrt::io_error("moving " + e.path().string() + " into " + dest.string() + ": " + ec.message());
  }
  fs::remove_all(staging, ec);
  return qrt::ok_status();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"quantize-model: a Hugging Face checkpoint quantized into a UQFF export (mistral.rs, qrt)"};
  app.set_version_flag("--version", std::string("qrt ") + qrt::kVersion);
  std::string source_dir, out;
  std::vector<std::string> type_names, override_args;
  bool force = false, quiet = false, no_promote = false;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("checkpoint", source_dir, "Hugging Face checkpoint directory (config.json + safetensors)")->required();
  app.add_option("-o,--output", out, "export directory, or (one type) a path ending in .uqff naming the shards")
      ->required();
  app.add_option("--type", type_names,
                 "quantization type (repeatable): q4_0 q4_1 q5_0 q5_1 q8_0 q8_1 q2k q3k q4k q5k q6k q8k afq2 afq3 "
                 "afq4 afq6 afq8 hqq4 hqq8 fp8 f8q8 mxfp4; for a .gguf output also iq1_s iq1_m iq2_xxs iq2_xs "
                 "iq2_s iq3_xxs iq3_s iq4_nl iq4_xs tq1_0 tq2_0")
      ->required();
  app.add_option("--override", override_args, "REGEX=TYPE: modules whose weight name matches get TYPE (repeatable)");
  std::string imatrix_path;
  app.add_option("--imatrix", imatrix_path, "importance matrix from llama-imatrix (.gguf or legacy .dat)");
  app.add_flag("--no-promote", no_promote, "quantize lm_head like the other modules (default: a promoted type)");
  app.add_option("--threads", threads, "quantizing threads")->check(CLI::Range(1, 1024));
  app.add_flag("--force", force, "replace an existing export");
  app.add_flag("-q,--quiet", quiet, "no progress output");
  CLI11_PARSE(app, argc, argv);
  qrt::ImportanceMatrix imatrix;
  if (!imatrix_path.empty()) {
    auto m = qrt::read_imatrix(imatrix_path);
    if (!m.ok()) return fail("--imatrix: " + m.status().message());
    imatrix = std::move(*m);
    if (!quiet)
      std::fprintf(stderr, "quantize-model: importance matrix %s: %zu entries (%s)%s%s\n", imatrix_path.c_str(),
                   imatrix.entries.size(), imatrix.file_format.c_str(), imatrix.datasets.empty() ? "" : ", from ",
                   imatrix.datasets.empty() ? "" : imatrix.datasets.front().c_str());
  }
  const qrt::ImportanceMatrix* importance = imatrix_path.empty() ? nullptr : &imatrix;

  if (fs::path(out).extension() == ".gguf") {
    // One GGUF file: written beside its destination and renamed into place.
    qrt::convert::GgufExportOptions g;
    if (type_names.size() != 1) return fail("-o " + out + ": a GGUF file holds one type; give one --type");
    auto type = qrt::convert::gguf_type_from_name(type_names[0]);
    if (!type.ok()) return fail("--type: " + type.status().message());
    g.type = *type;
    auto overrides = parse_overrides(override_args, qrt::convert::gguf_type_from_name);
    if (!overrides.ok()) return fail(overrides.status().message());
    g.overrides = std::move(*overrides);
    g.promote_output = !no_promote;
    g.importance = importance;
    g.threads = threads;
    g.quiet = quiet;
    std::error_code ec;
    if (fs::exists(out, ec) && !force) return fail(out + " exists; pass --force to replace it");
    auto source = open_checkpoint(source_dir);
    if (!source.ok()) return fail(source.status().message());
    const std::string staging = out + ".qrt-staging-" + std::to_string(getpid());
    g.check_space = [&](uint64_t bytes) { return check_free_space(fs::path(staging), bytes); };
    auto report = qrt::convert::write_gguf_export(*source, staging, g);
    if (report.ok()) fs::rename(staging, out, ec);
    if (!report.ok() || ec) {
      fs::remove(staging, ec);
      return fail(report.ok() ? "publishing " + out + ": " + ec.message() : report.status().message());
    }
    if (!quiet) {
      std::fprintf(stderr, "quantize-model: wrote %s (%s)%s\n", out.c_str(),
                   qrt::convert::human_bytes(static_cast<double>(report->bytes)).c_str(),
                   report->fallbacks.empty() ? "" : ", fallbacks:");
      for (const std::string& f : report->fallbacks) std::fprintf(stderr, "  %s\n", f.c_str());
    }
    return 0;
  }

  qrt::convert::UqffExportOptions options;
  for (const std::string& name : type_names) {
    auto f = qrt::convert::uqff_type_from_name(name);
    if (!f.ok()) return fail("--type: " + f.status().message());
    options.types.push_back(*f);
  }
  auto overrides = parse_overrides(override_args, qrt::convert::uqff_type_from_name);
  if (!overrides.ok()) return fail(overrides.status().message());
  options.overrides = std::move(*overrides);
  options.promote_output = !no_promote;
  options.importance = importance;
  options.threads = threads;
  options.quiet = quiet;

  // Where the export goes: a directory, or shards named by a .uqff path inside its directory.
  fs::path dest = fs::path(out);
  const bool file_mode = dest.extension() == ".uqff";
  if (file_mode) {
    if (options.types.size() != 1)
      return fail("-o " + out + ": a .uqff path names one output; give a directory for several types");
    options.stem = dest.stem().string();
    dest = dest.parent_path().empty() ? fs::path(".") : dest.parent_path();
  }
  std::error_code ec;
  const bool exists = fs::exists(dest, ec);
  if (exists && !fs::is_directory(dest, ec)) return fail(dest.string() + " exists and is not a directory");
  if (exists && !force) {
    // A directory export replaces the whole directory; a .uqff path only its own files.
    bool clash = !file_mode && !fs::is_empty(dest, ec);
    if (file_mode)
      for (const char* f : {"residual.safetensors", "config.json"}) clash = clash || fs::exists(dest / f, ec);
    if (file_mode) clash = clash || fs::exists(dest / (options.stem + "-0.uqff"), ec);
    if (clash) return fail(dest.string() + " already holds an export; pass --force to replace it");
  }

  auto source = open_checkpoint(source_dir);
  if (!source.ok()) return fail(source.status().message());

  const fs::path staging = (file_mode ? dest : (dest.parent_path().empty() ? fs::path(".") : dest.parent_path())) /
                           (".qrt-staging-" + std::to_string(getpid()));
  fs::create_directories(staging, ec);
  if (ec) return fail("cannot create " + staging.string() + ": " + ec.message());
  options.check_space = [&](uint64_t bytes) { return check_free_space(staging, bytes); };
  auto report = qrt::convert::write_uqff_export(*source, staging.string(), options);
  if (!report.ok()) {
    fs::remove_all(staging, ec);
    return fail(report.status().message());
  }
  Status published = qrt::ok_status();
  if (file_mode) {
    published = move_files_into(staging, dest, {options.stem});
  } else {
    const fs::path old = dest.string() + ".qrt-old-" + std::to_string(getpid());
    if (exists) fs::rename(dest, old, ec);
    if (!ec) fs::rename(staging, dest, ec);
    if (ec) published = qrt::io_error("publishing " + dest.string() + ": " + ec.message());
    if (exists) fs::remove_all(old, ec);
  }
  if (!published.ok()) {
    fs::remove_all(staging, ec);
    return fail(published.message());
  }
  if (!quiet) {
    for (const auto& o : report->outputs) {
      std::fprintf(stderr, "quantize-model: %s: %zu shard(s), %s", o.quant.c_str(), o.shards.size(),
                   qrt::convert::human_bytes(static_cast<double>(o.bytes)).c_str());
      std::fprintf(stderr, o.fallbacks.empty() ? "\n" : ", %zu fallback(s):\n", o.fallbacks.size());
      for (const std::string& f : o.fallbacks) std::fprintf(stderr, "  %s\n", f.c_str());
    }
    std::fprintf(stderr, "quantize-model: wrote %s (residual tensors %s)\n", dest.string().c_str(),
                 qrt::convert::human_bytes(static_cast<double>(report->residual_bytes)).c_str());
  }
  return 0;
}
