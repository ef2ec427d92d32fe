// Hugging Face checkpoint directories: config.json + model.safetensors, or shards listed in
// model.safetensors.index.json. Dense F32/F16/BF16 weights, and block-wise FP8 (`weight` F8_E4M3 with a
// `weight_scale_inv` F32 [ceil(out/128), ceil(in/128)] companion).
#pragma once

#include <string>

#include "loader/model_source.hpp"
#include "qrt/status.hpp"

namespace qrt {

// True when `dir` holds config.json and model.safetensors or model.safetensors.index.json.
bool looks_like_hf_checkpoint(const std::string& dir);

Result<ModelSource> open_hf_checkpoint(const std::string& dir);

}  // namespace qrt
