#include "loader/open_model.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "loader/gguf.hpp"
#include "loader/hf_checkpoint.hpp"
#include "loader/ollama_store.hpp"
#include "loader/ollama_tensor_model.hpp"
#include "loader/uqff.hpp"

namespace qrt {
namespace fs = std::filesystem;
namespace {

bool has_gguf_magic(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

Result<ModelSource> open_ollama(const std::string& name, const OpenOptions& options) {
  QRT_ASSIGN_OR_RETURN(ollama::ModelName parsed, ollama::parse_model_name(name));
  QRT_ASSIGN_OR_RETURN(fs::path root, ollama::store_root());
  QRT_ASSIGN_OR_RETURN(ollama::Manifest m, ollama::open_manifest(root, parsed));
  if (options.verify_digests) QRT_TRY(ollama::verify_digests(m).with_context("Ollama model " + parsed.display()));
  if (!m.is_gguf()) return ollama::open_tensor_model(m, parsed.display());
  const ollama::Layer* layer = m.gguf_model_layer();
  auto model = open_gguf(layer->blob_path.string());
  if (!model.ok()) return model.status().with_context("Ollama model " + parsed.display());
  ModelSource src = gguf_model_source(std::move(*model));
  src.kind = SourceKind::kOllama;
  src.path = name;
  return src;
}

}  // namespace

const char* source_kind_name(SourceKind kind) {
  switch (kind) {
    case SourceKind::kUqff: return "uqff";
    case SourceKind::kGguf: return "gguf";
    case SourceKind::kOllama: return "ollama";
    case SourceKind::kHfCheckpoint: return "hf";
  }
  return "?";
}

Result<SourceKind> detect_source_kind(const std::string& path_or_name) {
  const fs::path p(path_or_name);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    if (looks_like_uqff(path_or_name)) return SourceKind::kUqff;
    if (looks_like_hf_checkpoint(path_or_name)) return SourceKind::kHfCheckpoint;
    return not_found(path_or_name + " is a directory but holds neither UQFF shards (*-0.uqff) nor a Hugging Face "
                                    "checkpoint (config.json with model.safetensors[.index.json])");
  }
  if (fs::is_regular_file(p, ec)) {
    if (p.extension() == ".uqff") return SourceKind::kUqff;
    if (has_gguf_magic(p)) return SourceKind::kGguf;
    if (p.extension() == ".safetensors")
      return invalid_argument(path_or_name + " is a lone safetensors file; pass the checkpoint or UQFF directory");
    return invalid_argument(path_or_name + " is neither a GGUF file (no GGUF magic) nor a UQFF shard (*.uqff)");
  }
  if (fs::exists(p, ec)) return invalid_argument(path_or_name + " is not a regular file or directory");
  // Not on disk: a UQFF set named inside an export directory, or an Ollama name.
  if (p.has_parent_path() && fs::is_directory(p.parent_path(), ec) && looks_like_uqff(path_or_name))
    return SourceKind::kUqff;
  if (ollama::parse_model_name(path_or_name).ok()) return SourceKind::kOllama;
  return not_found("no such file or directory, and not an Ollama model name: " + path_or_name);
}

Result<ModelSource> open_model_source(const std::string& path_or_name, const OpenOptions& options) {
  QRT_ASSIGN_OR_RETURN(SourceKind kind, detect_source_kind(path_or_name));
  switch (kind) {
    case SourceKind::kUqff: return open_uqff(path_or_name);
    case SourceKind::kHfCheckpoint: return open_hf_checkpoint(path_or_name);
    case SourceKind::kOllama: return open_ollama(path_or_name, options);
    case SourceKind::kGguf: {
      QRT_ASSIGN_OR_RETURN(GgufModel model, open_gguf(path_or_name));
      return gguf_model_source(std::move(model));
    }
  }
  return internal_error("unknown source kind");
}

}  // namespace qrt
