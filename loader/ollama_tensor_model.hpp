// Ollama tensor-blob models (model_format "safetensors", the MLX engine's store format; spec/ollama.md §2):
// one safetensors blob per tensor (or per stacked expert group) with its quantization companions, and the HF
// JSON files as image.json layers.
#pragma once

#include "loader/model_source.hpp"
#include "loader/ollama_store.hpp"
#include "loader/safetensors.hpp"
#include "qrt/status.hpp"

namespace qrt::ollama {

// Adds every tensor of one blob to `table`: quantized mains (U32 with a `.scale` companion) as afq4/afq8/nvfp4/
// mxfp4/mxfp8 QuantTensors resolved per tensor (per-tensor metadata, then blob metadata, then shape inference,
// then validated), everything else dense. Names stay as stored.
Status add_tensor_blob(const SafetensorsFile& blob, TensorTable* table);

// The whole model: every tensor layer (deduplicated by digest), config.json and the tokenizer files.
Result<ModelSource> open_tensor_model(const Manifest& manifest, const std::string& display_name);

// Checks each layer's blob (and the config blob) against its sha256 digest and size.
Status verify_digests(const Manifest& manifest);

}  // namespace qrt::ollama
