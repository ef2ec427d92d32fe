#include "kernels/cpu/ops.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <vector>

namespace qrt::cpu {

void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = out + r * dim;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + static_cast<double>(eps));
    for (int64_t i = 0; i < dim; ++i) yr[i] = static_cast<float>(xr[i] * inv_rms * weight[i]);
  }
}

void rope(float* x, int64_t tokens, int heads, int head_dim, int rot_dim, const int32_t* positions,
          const float* inv_freq, float attn_factor, bool interleaved) {
  const int half = rot_dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const double angle = static_cast<double>(positions[t]) * static_cast<double>(inv_freq[i]);
        const double c = std::cos(angle) * attn_factor;
        const double s = std::sin(angle) * attn_factor;
        // The two elements of pair i: adjacent in the interleaved layout, half a rotation apart otherwise.
        const int a = interleaved ? 2 * i : i;
        const int b = interleaved ? 2 * i + 1 : i + half;
        const double x0 = v[a];
        const double x1 = v[b];
        v[a] = static_cast<float>(x0 * c - x1 * s);
        v[b] = static_cast<float>(x1 * c + x0 * s);
      }
    }
  }
}

void attention(const float* q, const int32_t* q_pos, int64_t tokens, const float* k, const float* v,
               const int32_t* key_pos, int64_t keys, const AttentionShape& shape, float* out) {
  const int hd = shape.head_dim;
  const int group = shape.heads / shape.kv_heads;
  const int64_t q_stride = static_cast<int64_t>(shape.heads) * hd;
  const int64_t kv_stride = static_cast<int64_t>(shape.kv_heads) * hd;
  std::vector<double> scores(static_cast<size_t>(keys));
  std::vector<double> acc(static_cast<size_t>(hd));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int h = 0; h < shape.heads; ++h) {
      const float* qh = q + t * q_stride + static_cast<int64_t>(h) * hd;
      const int64_t kv_off = static_cast<int64_t>(h / group) * hd;
      double max_score = -INFINITY;
      for (int64_t j = 0; j < keys; ++j) {
        const int64_t dist = static_cast<int64_t>(q_pos[t]) - key_pos[j];
        const bool visible = dist >= 0 && (shape.sliding_window <= 0 || dist < shape.sliding_window);
        if (!visible) {
          scores[static_cast<size_t>(j)] = -INFINITY;
          continue;
        }
        const float* kj = k + j * kv_stride + kv_off;
        double dot = 0.0;
        for (int d = 0; d < hd; ++d) dot += static_cast<double>(qh[d]) * kj[d];
        double score = dot * shape.scale;
        if (shape.softcap > 0.0f) score = shape.softcap * std::tanh(score / shape.softcap);
        scores[static_cast<size_t>(j)] = score;
        max_score = std::max(max_score, scores[static_cast<size_t>(j)]);
      }
      float* oh = out + t * q_stride + static_cast<int64_t>(h) * hd;
      if (max_score == -INFINITY) {
        std::fill(oh, oh + hd, 0.0f);
        continue;
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      double denom = 0.0;
      if (shape.sinks != nullptr) {
        // The sink: one more logit in the softmax, with a value of zero.
        const double sink = shape.sinks[h];
        max_score = std::max(max_score, sink);
        denom = std::exp(sink - max_score);
      }
      for (int64_t j = 0; j < keys; ++j) {
        if (scores[static_cast<size_t>(j)] == -INFINITY) continue;
        const double p = std::exp(scores[static_cast<size_t>(j)] - max_score);
        denom += p;
        const float* vj = v + j * kv_stride + kv_off;
        for (int d = 0; d < hd; ++d) acc[static_cast<size_t>(d)] += p * vj[d];
      }
      for (int d = 0; d < hd; ++d) oh[d] = static_cast<float>(acc[static_cast<size_t>(d)] / denom);
    }
  }
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  double max_v = x[0];
  for (int64_t i = 1; i < n; ++i) max_v = std::max(max_v, static_cast<double>(x[i]));
  std::vector<double> e(static_cast<size_t>(n));
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    e[static_cast<size_t>(i)] = std::exp(static_cast<double>(x[i]) - max_v);
    sum += e[static_cast<size_t>(i)];
  }
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(e[static_cast<size_t>(i)] / sum);
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(0.5 * g * (1.0 + std::tanh(k * (g + 0.044715 * g * g * g))) * up[i]);
  }
}

void swiglu_clamped_mul(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = std::min(static_cast<double>(gate[i]), static_cast<double>(limit));
    const double u = std::clamp(static_cast<double>(up[i]), -static_cast<double>(limit), static_cast<double>(limit));
    out[i] = static_cast<float>(g / (1.0 + std::exp(-alpha * g)) * (u + 1.0));
  }
}

void add_indexed_rows(float* y, const float* table, const int32_t* ids, int64_t tokens, int top_k, int64_t dim) {
  for (int64_t r = 0; r < tokens * top_k; ++r)
    for (int64_t i = 0; i < dim; ++i) y[r * dim + i] += table[int64_t{ids[r]} * dim + i];
}

void scale(const float* x, float s, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * s;
}

void softcap(const float* x, float cap, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(cap * std::tanh(static_cast<double>(x[i]) / cap));
}

void add(const float* a, const float* b, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void moe_route(const float* logits, int64_t tokens, int experts, int top_k, bool renormalize, int32_t* ids,
               float* weights) {
  std::vector<double> probs(static_cast<size_t>(experts));
  std::vector<int> order(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* lt = logits + t * experts;
    double max_v = lt[0];
    for (int e = 1; e < experts; ++e) max_v = std::max(max_v, static_cast<double>(lt[e]));
    double sum = 0.0;
    for (int e = 0; e < experts; ++e) {
      probs[static_cast<size_t>(e)] = std::exp(static_cast<double>(lt[e]) - max_v);
      sum += probs[static_cast<size_t>(e)];
    }
    for (double& p : probs) p /= sum;
    std::iota(order.begin(), order.end(), 0);
    // Stable sort keeps the lower expert id first among equal probabilities.
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return probs[static_cast<size_t>(a)] > probs[static_cast<size_t>(b)]; });
    double selected_sum = 0.0;
    for (int s = 0; s < top_k; ++s) selected_sum += probs[static_cast<size_t>(order[static_cast<size_t>(s)])];
    for (int s = 0; s < top_k; ++s) {
      const int e = order[static_cast<size_t>(s)];
      ids[t * top_k + s] = e;
      const double w = probs[static_cast<size_t>(e)];
      weights[t * top_k + s] = static_cast<float>(renormalize ? w / selected_sum : w);
    }
  }
}

void moe_combine(const float* y, const float* weights, int64_t tokens, int top_k, int64_t dim, float* out) {
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < dim; ++i) {
      double acc = 0.0;
      for (int s = 0; s < top_k; ++s)
        acc += static_cast<double>(weights[t * top_k + s]) * y[(t * top_k + s) * dim + i];
      out[t * dim + i] = static_cast<float>(acc);
    }
  }
}

void moe_route_grouped(const float* logits, int64_t tokens, int experts, int top_k, const MoeRouting& routing,
                       int32_t* ids, float* weights) {
  const size_t count = static_cast<size_t>(experts);
  std::vector<double> score(count), choice(count);
  const int groups = std::max(routing.groups, 1), per_group = experts / groups;
  std::vector<double> group_score(static_cast<size_t>(groups));
  std::vector<char> allowed(count), taken(count);
  // (v, i) beats (best, best_i): larger, or equal and lower index; NaN never beats anything.
  auto better = [](double v, int i, double best, int best_i) { return v > best || (v == best && i < best_i); };
  for (int64_t t = 0; t < tokens; ++t) {
    const float* lt = logits + t * experts;
    if (routing.sigmoid) {
      for (size_t e = 0; e < count; ++e) score[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(lt[e])));
    } else {
      double max_v = lt[0];
      for (size_t e = 1; e < count; ++e) max_v = std::max(max_v, static_cast<double>(lt[e]));
      double sum = 0.0;
      for (size_t e = 0; e < count; ++e) sum += std::exp(static_cast<double>(lt[e]) - max_v);
      for (size_t e = 0; e < count; ++e) score[e] = std::exp(static_cast<double>(lt[e]) - max_v) / sum;
    }
    for (size_t e = 0; e < count; ++e)
      choice[e] = score[e] + (routing.choice_bias ? static_cast<double>(routing.choice_bias[e]) : 0.0);
    // The groups that take part: the groups_used best by their best choice score (or the sum of the two best).
    std::fill(allowed.begin(), allowed.end(), groups <= 1);
    if (groups > 1) {
      for (int g = 0; g < groups; ++g) {
        double first = -INFINITY, second = -INFINITY;
        for (int e = g * per_group; e < (g + 1) * per_group; ++e) {
          const double c = choice[static_cast<size_t>(e)];
          if (c > first) {
            second = first;
            first = c;
          } else if (c > second) {
            second = c;
          }
        }
        group_score[static_cast<size_t>(g)] = routing.group_top2 ? first + second : first;
      }
      std::vector<char> group_taken(static_cast<size_t>(groups), 0);
      for (int k = 0; k < routing.groups_used; ++k) {
        int best = -1;
        for (int g = 0; g < groups; ++g) {
          const size_t gi = static_cast<size_t>(g);
          if (!group_taken[gi] && (best < 0 || better(group_score[gi], g, group_score[static_cast<size_t>(best)], best)))
            best = g;
        }
        group_taken[static_cast<size_t>(best)] = 1;
        for (int e = best * per_group; e < (best + 1) * per_group; ++e) allowed[static_cast<size_t>(e)] = 1;
      }
    }
    std::fill(taken.begin(), taken.end(), 0);
    double selected_sum = 0.0;
    int chosen = 0;
    for (int s = 0; s < top_k; ++s) {
      int best = -1;
      for (int e = 0; e < experts; ++e) {
        const size_t i = static_cast<size_t>(e);
        if (!allowed[i] || taken[i] || std::isnan(choice[i])) continue;
        if (best < 0 || better(choice[i], e, choice[static_cast<size_t>(best)], best)) best = e;
      }
      ids[t * top_k + s] = best;
      if (best < 0) continue;
      taken[static_cast<size_t>(best)] = 1;
      selected_sum += score[static_cast<size_t>(best)];
      ++chosen;
    }
    for (int s = 0; s < top_k; ++s) {
      const int e = ids[t * top_k + s];
      double w = e < 0 ? std::nan("") : score[static_cast<size_t>(e)];
      if (routing.renormalize && chosen > 0) w /= selected_sum;
      weights[t * top_k + s] = static_cast<float>(w * routing.scale);
    }
  }
}

void concat_cols(const float* a, int64_t a_cols, const float* b, int64_t b_cols, int64_t rows, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(a + r * a_cols, a_cols, out + r * (a_cols + b_cols));
    std::copy_n(b + r * b_cols, b_cols, out + r * (a_cols + b_cols) + a_cols);
  }
}

}  // namespace qrt::cpu
