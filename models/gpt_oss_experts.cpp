#include "models/gpt_oss_experts.hpp"

#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"

namespace qrt::names {
namespace {

constexpr std::string_view kExperts = ".mlp.experts.";

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The values of a dense tensor as floats.
Result<std::vector<float>> dense_floats(const QuantTensor& t) {
  if (t.format != quant::FormatId::kF32 && t.format != quant::FormatId::kF16 && t.format != quant::FormatId::kBF16)
    return unsupported(t.name + ": gpt-oss expert tensors are F32, F16, BF16 or MXFP4 blocks, not " +
                       std::string(quant::format_name(t.format)));
  const uint64_t want = static_cast<uint64_t>(t.numel()) * (t.format == quant::FormatId::kF32 ? 4 : 2);
  if (t.data.size != want || (want && !t.data.data))
    return format_error(t.name + ": " + std::to_string(t.data.size) + " bytes for " + shape_string(t.shape));
  std::vector<float> v(static_cast<size_t>(t.numel()));
  quant::QuantView view = t.view();
  view.rows = t.rows();
  view.cols = t.cols();
  QRT_TRY(cpu::dequantize(t.format, view, v.data()));
  return v;
}

class Builder {
 public:
  explicit Builder(CanonicalTensors* out) : out_(out) {}

  // An F32 tensor owning `values`.
  void add_f32(const std::string& name, const std::string& from, std::vector<int64_t> shape,
               const std::vector<float>& values) {
    auto bytes = std::make_shared<std::vector<uint8_t>>(values.size() * sizeof(float));
    std::memcpy(bytes->data(), values.data(), bytes->size());
    QuantTensor t;
    t.name = from;
    t.shape = std::move(shape);
    t.data = {bytes->data(), bytes->size()};
    out_->storage.push_back(std::move(bytes));
    out_->tensors[name] = std::move(t);
  }

  // MXFP4 rows [experts, rows_in, cols] -> rows r of each expert with r % 2 == parity ([experts, rows_in / 2, cols]).
  void add_mxfp4_rows(const std::string& name, const QuantTensor& t, int parity) {
    const int64_t experts = t.shape[0], rows = t.shape[1], cols = t.shape[2];
    const uint64_t data_row = static_cast<uint64_t>(cols) / 2, scale_row = static_cast<uint64_t>(cols) / 32;
    auto data = std::make_shared<std::vector<uint8_t>>();
    auto scales = std::make_shared<std::vector<uint8_t>>();
    for (int64_t e = 0; e < experts; ++e)
      for (int64_t r = parity; r < rows; r += 2) {
        const uint64_t row = static_cast<uint64_t>(e * rows + r);
        data->insert(data->end(), t.data.data + row * data_row, t.data.data + (row + 1) * data_row);
        scales->insert(scales->end(), t.scales.data + row * scale_row, t.scales.data + (row + 1) * scale_row);
      }
    QuantTensor out = t;
    out.shape = {experts, rows / 2, cols};
    out.data = {data->data(), data->size()};
    out.scales = {scales->data(), scales->size()};
    out_->storage.push_back(std::move(data));
    out_->storage.push_back(std::move(scales));
    out_->tensors[name] = std::move(out);
  }

  void add_view(const std::string& name, const QuantTensor& t) { out_->tensors[name] = t; }

 private:
  CanonicalTensors* out_;
};

Status check_mxfp4(const QuantTensor& t, int64_t experts, int64_t rows, int64_t cols) {
  if (t.shape != std::vector<int64_t>{experts, rows, cols} || cols % 32 != 0)
    return format_error(t.name + ": MXFP4 blocks of shape " + shape_string(t.shape) + ", expected [" +
                        std::to_string(experts) + ", " + std::to_string(rows) + ", " + std::to_string(cols) + "]");
  const uint64_t n = static_cast<uint64_t>(experts * rows);
  if (t.data.size != n * static_cast<uint64_t>(cols) / 2 || t.scales.size != n * static_cast<uint64_t>(cols) / 32)
    return format_error(t.name + ": block or scale bytes do not match " + shape_string(t.shape));
  return ok_status();
}

// One layer's experts from its four source tensors ("<prefix>gate_up_proj", ...).
Status layer_experts(const TensorTable& source, const std::string& prefix, int layer, Builder& b,
                     std::set<std::string>* used) {
  auto find = [&](const std::string& suffix) -> Result<const QuantTensor*> {
    auto it = source.find(prefix + suffix);
    if (it == source.end()) return not_found("gpt-oss layer " + std::to_string(layer) + ": " + prefix + suffix +
                                             " is missing");
    used->insert(it->first);
    return &it->second;
  };
  QRT_ASSIGN_OR_RETURN(const QuantTensor* gate_up, find("gate_up_proj"));
  QRT_ASSIGN_OR_RETURN(const QuantTensor* down, find("down_proj"));
  QRT_ASSIGN_OR_RETURN(const QuantTensor* gate_up_bias, find("gate_up_proj_bias"));
  QRT_ASSIGN_OR_RETURN(const QuantTensor* down_bias, find("down_proj_bias"));
  const auto canonical = [&](LayerTensor t) { return layer_tensor(layer, t); };
  const std::string gate = canonical(LayerTensor::kFfnGateExps), up = canonical(LayerTensor::kFfnUpExps);
  const std::string down_name = canonical(LayerTensor::kFfnDownExps);
  if (gate_up_bias->shape.size() != 2 || gate_up_bias->shape[1] % 2 != 0)
    return format_error(gate_up_bias->name + ": shape " + shape_string(gate_up_bias->shape) +
                        " is not [experts, 2 * intermediate]");
  const int64_t experts = gate_up_bias->shape[0], ffn = gate_up_bias->shape[1] / 2;
  if (down_bias->shape.size() != 2 || down_bias->shape[0] != experts)
    return format_error(down_bias->name + ": shape " + shape_string(down_bias->shape) + " is not [" +
                        std::to_string(experts) + ", hidden]");
  const int64_t hidden = down_bias->shape[1];

  if (gate_up->format == quant::FormatId::kMXFP4) {
    QRT_TRY(check_mxfp4(*gate_up, experts, 2 * ffn, hidden));
    QRT_TRY(check_mxfp4(*down, experts, hidden, ffn));
    b.add_mxfp4_rows(gate, *gate_up, 0);
    b.add_mxfp4_rows(up, *gate_up, 1);
    b.add_view(down_name, *down);
  } else {
    if (gate_up->shape != std::vector<int64_t>{experts, hidden, 2 * ffn})
      return format_error(gate_up->name + ": shape " + shape_string(gate_up->shape) + ", expected [" +
                          std::to_string(experts) + ", " + std::to_string(hidden) + ", " + std::to_string(2 * ffn) +
                          "] (dense gpt-oss experts are stored [experts, in, out])");
    if (down->shape != std::vector<int64_t>{experts, ffn, hidden})
      return format_error(down->name + ": shape " + shape_string(down->shape) + ", expected [" +
                          std::to_string(experts) + ", " + std::to_string(ffn) + ", " + std::to_string(hidden) + "]");
    QRT_ASSIGN_OR_RETURN(const std::vector<float> gu, dense_floats(*gate_up));
    QRT_ASSIGN_OR_RETURN(const std::vector<float> dn, dense_floats(*down));
    std::vector<float> g(gu.size() / 2), u(gu.size() / 2), d(dn.size());
    for (int64_t e = 0; e < experts; ++e)
      for (int64_t h = 0; h < hidden; ++h)
        for (int64_t f = 0; f < ffn; ++f) {
          const size_t from = static_cast<size_t>((e * hidden + h) * 2 * ffn + 2 * f);
          const size_t to = static_cast<size_t>((e * ffn + f) * hidden + h);
          g[to] = gu[from];
          u[to] = gu[from + 1];
          d[static_cast<size_t>((e * hidden + h) * ffn + f)] = dn[static_cast<size_t>((e * ffn + f) * hidden + h)];
        }
    b.add_f32(gate, gate_up->name + " (even outputs)", {experts, ffn, hidden}, g);
    b.add_f32(up, gate_up->name + " (odd outputs)", {experts, ffn, hidden}, u);
    b.add_f32(down_name, down->name + " (transposed)", {experts, hidden, ffn}, d);
  }
  QRT_ASSIGN_OR_RETURN(const std::vector<float> gub, dense_floats(*gate_up_bias));
  std::vector<float> gb(gub.size() / 2), ub(gub.size() / 2);
  for (size_t i = 0; i < gb.size(); ++i) {
    gb[i] = gub[2 * i];
    ub[i] = gub[2 * i + 1];
  }
  b.add_f32(bias_of(gate), gate_up_bias->name + " (even)", {experts, ffn}, gb);
  b.add_f32(bias_of(up), gate_up_bias->name + " (odd)", {experts, ffn}, ub);
  b.add_view(bias_of(down_name), *down_bias);
  return ok_status();
}

}  // namespace

Result<std::set<std::string>> canonical_gpt_oss_experts(const TensorTable& source, CanonicalTensors* out) {
  std::set<std::string> used;
  Builder b(out);
  for (const auto& [name, t] : source) {
    // "model.layers.N.mlp.experts.gate_up_proj": one per layer starts that layer's conversion.
    const std::string layers = "model.layers.";
    if (name.rfind(layers, 0) != 0) continue;
    const size_t dot = name.find('.', layers.size());
    if (dot == std::string::npos || name.compare(dot, kExperts.size(), kExperts) != 0) continue;
    if (name.substr(dot + kExperts.size()) != "gate_up_proj") continue;
    const std::string index = name.substr(layers.size(), dot - layers.size());
    if (index.empty() || index.size() > 6 || index.find_first_not_of("0123456789") != std::string::npos) continue;
    QRT_TRY(layer_experts(source, name.substr(0, dot) + std::string(kExperts), std::stoi(index), b, &used));
  }
  return used;
}

}  // namespace qrt::names
