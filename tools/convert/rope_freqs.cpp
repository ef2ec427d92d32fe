#include "tools/convert/rope_freqs.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace qrt::convert {
namespace {

double wavelength(const RopeConfig& r, int rot, int pair) {
  return 2.0 * std::numbers::pi * std::pow(static_cast<double>(r.theta), 2.0 * pair / rot);
}

}  // namespace

std::vector<float> llama3_rope_divisors(const RopeConfig& r, int head_dim) {
  const int rot = r.rot_dim > 0 ? r.rot_dim : head_dim;
  const double ctx = r.original_context, low = r.low_freq_factor, high = r.high_freq_factor;
  std::vector<float> divisors;
  for (int i = 0; i < rot / 2; ++i) {
    const double w = wavelength(r, rot, i);
    double d = 1.0;
    if (w > ctx / low) {
      d = r.factor;
    } else if (w >= ctx / high) {
      const double smooth = (ctx / w - low) / (high - low);
      d = 1.0 / ((1.0 - smooth) / r.factor + smooth);
    }
    divisors.push_back(static_cast<float>(d));
  }
  return divisors;
}

Status llama3_rope_from_divisors(const std::vector<float>& divisors, int head_dim, RopeConfig* rope) {
  const int rot = rope->rot_dim > 0 ? rope->rot_dim : head_dim;
  if (static_cast<int>(divisors.size()) != rot / 2)
    return invalid_argument("rope_freqs has " + std::to_string(divisors.size()) + " values for " +
                            std::to_string(rot / 2) + " rotary pairs");
  for (float d : divisors)
    if (!(d >= 1.0f) || !std::isfinite(d))
      return unsupported("rope_freqs holds " + std::to_string(d) +
                         ": not a Llama 3 divisor (finite, at least 1); convert-model cannot express it in "
                         "config.json");
  const float factor = *std::max_element(divisors.begin(), divisors.end());
  if (factor == 1.0f) return ok_status();  // no scaling
  RopeConfig r = *rope;
  r.scaling = RopeScaling::kLlama3;
  r.factor = factor;
  r.low_freq_factor = 1.0f;
  r.high_freq_factor = 4.0f;
  // The original context: from a pair in the blended band (1 / d = (1 - s) / factor + s with s linear in ctx / w),
  // else any value between the bounds the kept and the interpolated pairs set.
  double ctx = 0.0, above = 0.0, below = INFINITY;
  for (int i = 0; i < rot / 2; ++i) {
    const double d = divisors[static_cast<size_t>(i)], w = wavelength(r, rot, i);
    if (d > 1.0 && d < factor && ctx == 0.0) {
      const double smooth = (1.0 / d - 1.0 / factor) / (1.0 - 1.0 / factor);
      ctx = w * (r.low_freq_factor + smooth * (r.high_freq_factor - r.low_freq_factor));
    }
    if (d == 1.0) above = std::max(above, w * r.high_freq_factor);  // w < ctx / high
    if (d == factor) below = std::min(below, w * r.low_freq_factor);  // w > ctx / low
  }
  if (ctx == 0.0) ctx = std::isfinite(below) ? std::sqrt(std::max(above, 1.0) * below) : above * 2.0;
  r.original_context = static_cast<int>(std::lround(ctx));
  const std::vector<float> again = llama3_rope_divisors(r, head_dim);
  for (size_t i = 0; i < again.size(); ++i)
    if (std::fabs(again[i] - divisors[i]) > 1e-5 * divisors[i])
      return unsupported("rope_freqs[" + std::to_string(i) + "] = " + std::to_string(divisors[i]) +
                         " does not follow Llama 3's rule (the closest parameters give " + std::to_string(again[i]) +
                         "); convert-model cannot express it in config.json");
  *rope = r;
  return ok_status();
}

}  // namespace qrt::convert
