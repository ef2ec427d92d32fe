#include "models/rope.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace qrt {
namespace {

// YaRN's correction range (Peng et al.; Hugging Face `find_correction_range` with truncation): the pair indices
// whose wavelength spans between beta_fast and beta_slow rotations over the original context.
double yarn_correction_dim(double rotations, int dim, double base, double context) {
  return dim * std::log(context / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
}

}  // namespace

Result<RopeTable> make_rope_table(const RopeConfig& rope, int head_dim, const std::vector<float>* freq_factors,
                                  int64_t context) {
  RopeTable table;
  table.layout = rope.layout;
  table.head_dim = head_dim;
  table.rot_dim = rope.rot_dim == 0 ? head_dim : rope.rot_dim;
  table.attn_factor = rope.attn_factor;
  const int rot = table.rot_dim;
  if (head_dim <= 0 || rot <= 0 || rot % 2 != 0 || rot > head_dim)
    return invalid_argument("rope: rotary dims " + std::to_string(rot) + " must be even and within head_dim " +
                            std::to_string(head_dim));
  if (!(rope.theta > 0.0f)) return invalid_argument("rope: theta must be positive, found " + std::to_string(rope.theta));
  if (!(rope.attn_factor > 0.0f))
    return invalid_argument("rope: attn_factor must be positive, found " + std::to_string(rope.attn_factor));
  if (rope.scaling != RopeScaling::kNone && rope.scaling != RopeScaling::kLongRope && !(rope.factor > 0.0f))
    return invalid_argument("rope: scaling factor must be positive, found " + std::to_string(rope.factor));

  const int half = rot / 2;
  const double base = rope.theta;
  const double factor = rope.factor;
  std::vector<double> inv(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) inv[static_cast<size_t>(i)] = 1.0 / std::pow(base, 2.0 * i / rot);

  switch (rope.scaling) {
    case RopeScaling::kNone:
      break;
    case RopeScaling::kLinear:
      for (double& f : inv) f /= factor;
      break;
    case RopeScaling::kLlama3: {
      // Llama 3.1: long wavelengths are interpolated by `factor`, short ones kept, the band between blended.
      if (rope.original_context <= 0 || !(rope.high_freq_factor > rope.low_freq_factor) ||
          !(rope.low_freq_factor > 0.0f))
        return invalid_argument("rope: llama3 scaling needs original_context > 0 and high_freq_factor (" +
                                std::to_string(rope.high_freq_factor) + ") > low_freq_factor (" +
                                std::to_string(rope.low_freq_factor) + ") > 0");
      const double ctx = rope.original_context;
      const double low_wavelen = ctx / rope.low_freq_factor;
      const double high_wavelen = ctx / rope.high_freq_factor;
      for (double& f : inv) {
        const double wavelen = 2.0 * std::numbers::pi / f;
        if (wavelen > low_wavelen) {
          f /= factor;
        } else if (wavelen >= high_wavelen) {
          const double smooth =
              (ctx / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor);
          f = (1.0 - smooth) * f / factor + smooth * f;
        }
      }
      break;
    }
    case RopeScaling::kYarn: {
      if (rope.original_context <= 0)
        return invalid_argument("rope: yarn scaling needs original_context > 0");
      double low = yarn_correction_dim(rope.yarn_beta_fast, rot, base, rope.original_context);
      double high = yarn_correction_dim(rope.yarn_beta_slow, rot, base, rope.original_context);
      if (rope.yarn_truncate) {  // Hugging Face's default (and llama.cpp's only behaviour); gpt-oss keeps fractions
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(rot - 1));
      if (low == high) high += 0.001;  // avoid a zero-width ramp
      for (int i = 0; i < half; ++i) {
        const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
        const double extrapolation_weight = 1.0 - ramp;
        double& f = inv[static_cast<size_t>(i)];
        f = (f / factor) * (1.0 - extrapolation_weight) + f * extrapolation_weight;
      }
      break;
    }
    case RopeScaling::kLongRope: {
      // Phi-3: each pair's frequency divided by its factor, the long set beyond the original context.
      const bool long_context = context > rope.original_context;
      const std::vector<float>& factors = long_context ? rope.long_factor : rope.short_factor;
      if (rope.original_context <= 0 || static_cast<int>(factors.size()) != half)
        return invalid_argument("rope: LongRoPE needs original_context > 0 and " + std::to_string(half) + " " +
                                (long_context ? "long" : "short") + " factors, found " +
                                std::to_string(factors.size()));
      for (int i = 0; i < half; ++i) {
        const float f = factors[static_cast<size_t>(i)];
        if (!(f > 0.0f) || !std::isfinite(f))
          return invalid_argument("rope: LongRoPE factor " + std::to_string(i) + " = " + std::to_string(f) +
                                  " is not positive and finite");
        inv[static_cast<size_t>(i)] /= f;
      }
      break;
    }
  }

  if (freq_factors != nullptr) {
    if (static_cast<int>(freq_factors->size()) != half)
      return invalid_argument("rope: rope_freqs has " + std::to_string(freq_factors->size()) +
                              " factors, expected rot_dim / 2 = " + std::to_string(half));
    for (int i = 0; i < half; ++i) {
      const float ff = (*freq_factors)[static_cast<size_t>(i)];
      if (!(ff > 0.0f) || !std::isfinite(ff))
        return invalid_argument("rope: rope_freqs[" + std::to_string(i) + "] = " + std::to_string(ff) +
                                " is not a positive finite factor");
      inv[static_cast<size_t>(i)] /= ff;
    }
  }
  table.inv_freq.assign(inv.begin(), inv.end());
  return table;
}

}  // namespace qrt
