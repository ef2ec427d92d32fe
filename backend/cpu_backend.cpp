#include "backend/cpu_backend.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/ops.hpp"
#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/common.hpp"
#include "kernels/quant/formats.hpp"
#include "backend/op_checks.hpp"
#include "backend/comm/communicator.hpp"

namespace qrt {
namespace {

// Decodes row `row` of a packed matrix into out[0 .. v.cols).
void decode_row(quant::FormatId format, const quant::QuantView& v, int64_t row, float* out) {
  quant::dispatch_format(format, [&](auto tag) {
    using T = typename decltype(tag)::Traits;
    const int be = quant::block_elems_for(T::block_elems, v.params);
    for (int64_t b = 0; b < v.cols / be; ++b) T::decode_block(v, row, b, out + b * be);
  });
}

// Row `slot` of a cache array = the float row, rounded to the array's type (round to nearest even).
void store_kv_row(const KvView& cache, int64_t slot, const float* row) {
  const int64_t n = cache.cols;
  switch (cache.type) {
    case KvType::kF32:
      std::memcpy(cache.as<float>() + slot * n, row, static_cast<size_t>(n) * sizeof(float));
      return;
    case KvType::kF16:
      for (int64_t i = 0; i < n; ++i) cache.as<uint16_t>()[slot * n + i] = quant::f32_to_fp16(row[i]);
      return;
    case KvType::kBF16:
      for (int64_t i = 0; i < n; ++i) cache.as<uint16_t>()[slot * n + i] = quant::f32_to_bf16(row[i]);
      return;
    case KvType::kFp8:
      for (int64_t i = 0; i < n; ++i) cache.as<uint8_t>()[slot * n + i] = quant::f32_to_e4m3(row[i]);
      return;
    case KvType::kQ8_0: {
      uint8_t* out = cache.as<uint8_t>() + slot * kv_row_bytes(KvType::kQ8_0, n);
      for (int64_t b = 0; b < n / kKvQ8Block; ++b)
        quant::quantize_q8_0_block(row + b * kKvQ8Block, out + b * kKvQ8BlockBytes);
      return;
    }
  }
}

// Rows [first, first + rows) of a cache as floats.
void load_kv_rows(const KvView& cache, int64_t first, int64_t rows, float* out) {
  if (cache.type == KvType::kF32) {
    std::copy_n(cache.as<const float>() + first * cache.cols, rows * cache.cols, out);
    return;
  }
  if (cache.type == KvType::kFp8) {
    const uint8_t* in = cache.as<const uint8_t>() + first * cache.cols;
    for (int64_t i = 0; i < rows * cache.cols; ++i) out[i] = quant::e4m3_to_f32(in[i]);
    return;
  }
  if (cache.type == KvType::kQ8_0) {
    // Rows are whole blocks, so rows [first, first + rows) are consecutive blocks.
    const uint8_t* in = cache.as<const uint8_t>() + first * kv_row_bytes(KvType::kQ8_0, cache.cols);
    for (int64_t b = 0; b < rows * cache.cols / kKvQ8Block; ++b)
      quant::decode_q8_0_block(in + b * kKvQ8BlockBytes, out + b * kKvQ8Block);
    return;
  }
  const uint16_t* in = cache.as<const uint16_t>() + first * cache.cols;
  const int64_t n = rows * cache.cols;
  if (cache.type == KvType::kF16) {
    for (int64_t i = 0; i < n; ++i) out[i] = quant::fp16_to_f32(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = quant::bf16_to_f32(in[i]);
  }
}

}  // namespace

// A weight as uploaded: the packed parts copied unchanged, plus f32 values for 1-D tensors.
struct CpuBackend::Weight {
  quant::FormatId format = quant::FormatId::kF32;
  std::vector<int64_t> shape;
  quant::QuantParams params;
  std::vector<uint8_t> data, scales, biases;
  quant::PartSizes matrix_parts;  // part sizes of one [shape[-2], shape[-1]] matrix (one expert when stacked)
  std::vector<float> values;      // decoded, 1-D tensors only

  int64_t cols() const { return shape.back(); }
  int64_t rows() const {
    int64_t n = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) n *= shape[i];
    return n;
  }
  // The 2-D view of all rows, or of one expert's [out, in] matrix of a stacked tensor.
  quant::QuantView view() const {
    quant::QuantView v;
    v.data = data.data();
    v.scales = scales.empty() ? nullptr : scales.data();
    v.biases = biases.empty() ? nullptr : biases.data();
    v.rows = rows();
    v.cols = cols();
    v.params = params;
    return v;
  }
  quant::QuantView expert_view(int64_t e) const {
    quant::QuantView v = view();
    v.data += e * matrix_parts.data;
    if (v.scales) v.scales += e * matrix_parts.scales;
    if (v.biases) v.biases += e * matrix_parts.biases;
    v.rows = shape[shape.size() - 2];
    return v;
  }
};

CpuBackend::CpuBackend() = default;
CpuBackend::CpuBackend(Communicator* comm) : comm_(comm) {}

CpuBackend::~CpuBackend() {
  for (auto& [start, bytes] : allocations_) ::operator delete(reinterpret_cast<void*>(start), std::align_val_t(64));
}

size_t CpuBackend::live_weights() const {
  size_t n = 0;
  for (const auto& w : weights_) n += w != nullptr;
  return n;
}

Result<DeviceBuffer> CpuBackend::allocate(uint64_t bytes) {
  if (bytes == 0) return DeviceBuffer{};
  void* p = ::operator new(bytes, std::align_val_t(64), std::nothrow);
  if (p == nullptr) return out_of_range("cpu backend: cannot allocate " + std::to_string(bytes) + " bytes");
  allocations_[reinterpret_cast<uintptr_t>(p)] = bytes;
  allocated_bytes_ += bytes;
  allocated_peak_ = std::max(allocated_peak_, allocated_bytes_);
  return DeviceBuffer{p, bytes};
}

void CpuBackend::deallocate(DeviceBuffer buffer) {
  if (buffer.ptr == nullptr) return;
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(buffer.ptr));
  if (it == allocations_.end()) return;  // not ours or already freed: never free foreign memory
  ::operator delete(buffer.ptr, std::align_val_t(64));
  allocated_bytes_ -= it->second;
  allocations_.erase(it);
}

Result<MemoryAvailable> CpuBackend::memory_available() const {
  std::ifstream f("/proc/meminfo");
  std::string line;
  MemoryAvailable m;
  bool have_free = false, have_total = false;
  // Lines such as "MemAvailable:   12345678 kB".
  while (std::getline(f, line)) {
    auto value = [&](std::string_view key, uint64_t* out) {
      if (line.rfind(key, 0) != 0) return false;
      *out = std::strtoull(line.c_str() + key.size(), nullptr, 10) * 1024;
      return true;
    };
    have_free = value("MemAvailable:", &m.free_bytes) || have_free;
    have_total = value("MemTotal:", &m.total_bytes) || have_total;
  }
  if (!have_free || !have_total) return unsupported("cpu backend: /proc/meminfo gives no MemAvailable and MemTotal");
  return m;
}

MemoryStats CpuBackend::memory_stats() const {
  MemoryStats m;
  for (const auto& w : weights_)
    if (w != nullptr) m.weight_bytes += w->data.size() + w->scales.size() + w->biases.size() + w->values.size() * 4;
  m.activation_bytes = allocated_bytes_;
  m.activation_peak_bytes = allocated_peak_;
  return m;
}

Status CpuBackend::check_range(const void* p, uint64_t bytes, const char* op, const char* what) const {
  if (bytes == 0) return ok_status();
  const auto start = reinterpret_cast<uintptr_t>(p);
  auto it = allocations_.upper_bound(start);
  if (p != nullptr && it != allocations_.begin()) {
    --it;
    if (start >= it->first && start - it->first <= it->second && bytes <= it->second - (start - it->first))
      return ok_status();
  }
  return out_of_range(std::string(op) + ": " + what + " (" + std::to_string(bytes) +
                      " bytes) is not inside a device allocation");
}

template <class T>
Status CpuBackend::check_view(const DeviceView<T>& v, const char* op, const char* what) const {
  QRT_TRY(op_checks::check_non_negative(v, op, what));
  return check_range(v.data, static_cast<uint64_t>(v.numel()) * sizeof(T), op, what);
}

Status CpuBackend::upload(const void* host, void* device, uint64_t bytes) {
  QRT_TRY(check_range(device, bytes, "upload", "destination"));
  if (bytes) std::memcpy(device, host, bytes);
  return ok_status();
}

Status CpuBackend::download(const void* device, void* host, uint64_t bytes) {
  QRT_TRY(check_range(device, bytes, "download", "source"));
  if (bytes) std::memcpy(host, device, bytes);
  return ok_status();
}

Result<WeightHandle> CpuBackend::upload_weight(const QuantTensor& t) {
  const std::string where = "uploading " + t.name + (t.file.empty() ? "" : " from " + t.file);
  QRT_ASSIGN_OR_RETURN(const quant::PartSizes matrix_parts, op_checks::weight_matrix_parts(t));
  auto w = std::make_unique<Weight>();
  w->format = t.format;
  w->shape = t.shape;
  w->params = t.params;
  w->matrix_parts = matrix_parts;
  w->data.assign(t.data.data, t.data.data + t.data.size);
  if (t.scales.size) w->scales.assign(t.scales.data, t.scales.data + t.scales.size);
  if (t.biases.size) w->biases.assign(t.biases.data, t.biases.data + t.biases.size);
  if (t.shape.size() == 1) {
    w->values.resize(static_cast<size_t>(t.shape[0]));
    Status s = cpu::dequantize(t.format, w->view(), w->values.data());
    if (!s.ok()) return s.with_context(where);
  }
  weights_.push_back(std::move(w));
  return WeightHandle{static_cast<uint32_t>(weights_.size())};
}

Result<const CpuBackend::Weight*> CpuBackend::find_weight(WeightHandle h, const char* op, const char* role) const {
  if (!h.valid() || h.id > weights_.size() || weights_[h.id - 1] == nullptr)
    return invalid_argument(std::string(op) + ": " + role + " is not a live weight handle (" + std::to_string(h.id) +
                            ")");
  return weights_[h.id - 1].get();
}

Result<WeightInfo> CpuBackend::weight_info(WeightHandle h) const {
  QRT_ASSIGN_OR_RETURN(const Weight* w, find_weight(h, "weight_info", "weight"));
  return WeightInfo{w->format, w->shape};
}

void CpuBackend::free_weight(WeightHandle h) {
  if (h.valid() && h.id <= weights_.size()) weights_[h.id - 1].reset();
}

Status CpuBackend::embed(WeightHandle table, ConstI32View tokens, F32View out) {
  const char* op = "embed";
  QRT_ASSIGN_OR_RETURN(const Weight* w, find_weight(table, op, "table"));
  QRT_TRY(check_view(tokens, op, "tokens"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_TRY(op_checks::embed(WeightInfo{w->format, w->shape}, tokens, out));
  const quant::QuantView v = w->view();
  for (int64_t t = 0; t < tokens.rows; ++t) {
    const int32_t id = tokens.data[t];
    if (id < 0 || id >= v.rows)
      return out_of_range("embed: token id " + std::to_string(id) + " outside the vocabulary of " +
                          std::to_string(v.rows));
    decode_row(w->format, v, id, out.data + t * out.cols);
  }
  return ok_status();
}

Status CpuBackend::rms_norm(ConstF32View x, WeightHandle weight, float eps, F32View out) {
  const char* op = "rms_norm";
  QRT_ASSIGN_OR_RETURN(const Weight* w, find_weight(weight, op, "weight"));
  QRT_TRY(check_view(x, op, "x"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_TRY(op_checks::rms_norm(x, WeightInfo{w->format, w->shape}, out));
  cpu::rms_norm(x.data, w->values.data(), x.rows, x.cols, eps, out.data);
  return ok_status();
}

Status CpuBackend::linear(ConstF32View x, WeightHandle weight, WeightHandle bias, F32View y) {
  const char* op = "linear";
  QRT_ASSIGN_OR_RETURN(const Weight* w, find_weight(weight, op, "weight"));
  const Weight* b = nullptr;
  if (bias.valid()) {
    QRT_ASSIGN_OR_RETURN(b, find_weight(bias, op, "bias"));
  }
  const WeightInfo bias_info = b ? WeightInfo{b->format, b->shape} : WeightInfo{};
  QRT_TRY(check_view(x, op, "x"));
  QRT_TRY(check_view(y, op, "y"));
  QRT_TRY(op_checks::linear(x, WeightInfo{w->format, w->shape}, b ? &bias_info : nullptr, y));
  QRT_TRY(cpu::matmul(w->format, w->view(), x.data, x.rows, y.data));
  if (b != nullptr)
    for (int64_t i = 0; i < y.rows; ++i) cpu::add(y.data + i * y.cols, b->values.data(), y.cols, y.data + i * y.cols);
  return ok_status();
}

Status CpuBackend::rope(F32View x, int heads, ConstI32View positions, const RopeParams& p) {
  const char* op = "rope";
  QRT_TRY(check_view(x, op, "x"));
  QRT_TRY(check_view(positions, op, "positions"));
  QRT_TRY(check_view(p.inv_freq, op, "inv_freq"));
  QRT_TRY(op_checks::rope(x, heads, positions, p));
  cpu::rope(x.data, x.rows, heads, p.head_dim, p.rot_dim, positions.data, p.inv_freq.data, p.attn_factor,
            p.layout == RopeLayout::kInterleaved);
  return ok_status();
}

Status CpuBackend::kv_write(const KvLayerView& cache, ConstI32View slots, ConstI32View positions, ConstF32View k,
                            ConstF32View v) {
  const char* op = "kv_write";
  QRT_TRY(check_view(k, op, "k"));
  QRT_TRY(check_view(v, op, "v"));
  QRT_TRY(check_view(slots, op, "slots"));
  QRT_TRY(check_view(positions, op, "positions"));
  QRT_TRY(check_view(cache.k.byte_view(), op, "cache k"));
  QRT_TRY(check_view(cache.v.byte_view(), op, "cache v"));
  QRT_TRY(check_view(cache.positions, op, "cache positions"));
  QRT_TRY(op_checks::kv_write(cache, slots, positions, k, v));
  QRT_TRY(op_checks::kv_slots(cache, slots.data, slots.rows));
  for (int64_t i = 0; i < k.rows; ++i) {
    const int64_t slot = slots.data[i];
    store_kv_row(cache.k, slot, k.data + i * k.cols);
    if (cache.v.data != cache.k.data) store_kv_row(cache.v, slot, v.data + i * v.cols);  // else the values are k
    cache.positions.data[slot] = positions.data[i];
  }
  return ok_status();
}

Status CpuBackend::attention(ConstF32View q, ConstI32View q_positions, const KvLayerView& cache, ConstI32View keys,
                             const AttentionParams& p, F32View out) {
  const char* op = "attention";
  QRT_TRY(check_view(q, op, "q"));
  QRT_TRY(check_view(q_positions, op, "q_positions"));
  QRT_TRY(check_view(keys, op, "keys"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_TRY(check_view(cache.k.byte_view(), op, "cache k"));
  QRT_TRY(check_view(cache.v.byte_view(), op, "cache v"));
  QRT_TRY(check_view(cache.positions, op, "cache positions"));
  if (cache.paged()) QRT_TRY(check_view(cache.block_table, op, "block table"));
  QRT_TRY(op_checks::attention(q, q_positions, cache, keys, p, out));
  QRT_TRY(op_checks::key_count(cache, keys.data[0]));
  cpu::AttentionShape shape{p.heads, p.kv_heads, p.head_dim, p.scale, p.sliding_window, p.softcap, p.sinks};
  const int64_t n = keys.data[0];
  if (cache.paged()) {
    // The sequence's slots gathered block by block into one contiguous cache (key_count checked the table).
    const int64_t cols = cache.k.cols, b = cache.block_size;
    std::vector<float> k(static_cast<size_t>(n * cols)), v(static_cast<size_t>(n * cols));
    std::vector<int32_t> positions(static_cast<size_t>(n));
    for (int64_t j0 = 0; j0 < n; j0 += b) {
      const int64_t row = int64_t{cache.block_table.data[j0 / b]} * b, rows = std::min(b, n - j0);
      load_kv_rows(cache.k, row, rows, k.data() + j0 * cols);
      load_kv_rows(cache.v, row, rows, v.data() + j0 * cols);
      std::copy_n(cache.positions.data + row, rows, positions.data() + j0);
    }
    cpu::attention(q.data, q_positions.data, q.rows, k.data(), v.data(), positions.data(), n, shape, out.data);
    return ok_status();
  }
  if (cache.k.type == KvType::kF32) {
    cpu::attention(q.data, q_positions.data, q.rows, cache.k.as<float>(), cache.v.as<float>(), cache.positions.data,
                   n, shape, out.data);
    return ok_status();
  }
  // A 16-bit cache is widened to float for the reference attention (exact: every f16 and bf16 is a float).
  std::vector<float> k(static_cast<size_t>(n * cache.k.cols)), v(static_cast<size_t>(n * cache.v.cols));
  load_kv_rows(cache.k, 0, n, k.data());
  load_kv_rows(cache.v, 0, n, v.data());
  cpu::attention(q.data, q_positions.data, q.rows, k.data(), v.data(), cache.positions.data, n, shape, out.data);
  return ok_status();
}

Status CpuBackend::silu_mul(ConstF32View gate, ConstF32View up, F32View out) {
  const char* op = "silu_mul";
  QRT_TRY(check_view(gate, op, "gate"));
  QRT_TRY(check_view(up, op, "up"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_TRY(op_checks::same_shape3(op, "gate", gate, "up", up, out));
  cpu::silu_mul(gate.data, up.data, gate.numel(), out.data);
  return ok_status();
}

Status CpuBackend::gelu_tanh_mul(ConstF32View gate, ConstF32View up, F32View out) {
  const char* op = "gelu_tanh_mul";
  QRT_TRY(check_view(gate, op, "gate"));
  QRT_TRY(check_view(up, op, "up"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_TRY(op_checks::same_shape3(op, "gate", gate, "up", up, out));
  cpu::gelu_tanh_mul(gate.data, up.data, gate.numel(), out.data);
  return ok_status();
}

Status CpuBackend::swiglu_clamped_mul(ConstF32View gate, ConstF32View up, float alpha, float limit, F32View out) {
  const char* op = "swiglu_clamped_mul";
  QRT_TRY(check_view(gate, op, "gate"));
  QRT_TRY(check_view(up, op, "up"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_TRY(op_checks::same_shape3(op, "gate", gate, "up", up, out));
  cpu::swiglu_clamped_mul(gate.data, up.data, gate.numel(), alpha, limit, out.data);
  return ok_status();
}

Status CpuBackend::add_indexed_rows(F32View y, ConstF32View table, ConstI32View ids) {
  const char* op = "add_indexed_rows";
  QRT_TRY(check_view(y, op, "y"));
  QRT_TRY(check_view(table, op, "table"));
  QRT_TRY(check_view(ids, op, "ids"));
  QRT_TRY(op_checks::add_indexed_rows(y, table, ids));
  for (int64_t i = 0; i < ids.numel(); ++i)
    if (ids.data[i] < 0 || ids.data[i] >= table.rows)
      return out_of_range("add_indexed_rows: id " + std::to_string(ids.data[i]) + " outside the table's " +
                          std::to_string(table.rows) + " rows");
  cpu::add_indexed_rows(y.data, table.data, ids.data, ids.rows, static_cast<int>(ids.cols), y.cols);
  return ok_status();
}

Status CpuBackend::scale(ConstF32View x, float s, F32View out) {
  const char* op = "scale";
  QRT_TRY(check_view(x, op, "x"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_TRY(op_checks::elementwise(op, x, out));
  cpu::scale(x.data, s, x.numel(), out.data);
  return ok_status();
}

Status CpuBackend::softcap(ConstF32View x, float cap, F32View out) {
  const char* op = "softcap";
  QRT_TRY(check_view(x, op, "x"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_TRY(op_checks::softcap(x, cap, out));
  cpu::softcap(x.data, cap, x.numel(), out.data);
  return ok_status();
}

Status CpuBackend::add(ConstF32View a, ConstF32View b, F32View out) {
  const char* op = "add";
  QRT_TRY(check_view(a, op, "a"));
  QRT_TRY(check_view(b, op, "b"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_TRY(op_checks::same_shape3(op, "a", a, "b", b, out));
  cpu::add(a.data, b.data, a.numel(), out.data);
  return ok_status();
}

Status CpuBackend::gather_rows(ConstF32View x, ConstI32View rows, F32View out) {
  const char* op = "gather_rows";
  QRT_TRY(check_view(x, op, "x"));
  QRT_TRY(check_view(rows, op, "rows"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_TRY(op_checks::gather_rows(x, rows, out));
  for (int64_t i = 0; i < rows.rows; ++i) {
    const int32_t r = rows.data[i];
    if (r < 0 || r >= x.rows)
      return out_of_range("gather_rows: row " + std::to_string(r) + " outside x " + op_checks::view_string(x));
  }
  for (int64_t i = 0; i < rows.rows; ++i) std::copy_n(x.data + rows.data[i] * x.cols, x.cols, out.data + i * x.cols);
  return ok_status();
}

Status CpuBackend::moe_route(ConstF32View logits, bool renormalize, I32View ids, F32View weights) {
  const char* op = "moe_route";
  QRT_TRY(check_view(logits, op, "logits"));
  QRT_TRY(check_view(ids, op, "ids"));
  QRT_TRY(check_view(weights, op, "weights"));
  QRT_TRY(op_checks::moe_route(logits, ids, weights));
  cpu::moe_route(logits.data, logits.rows, static_cast<int>(logits.cols), static_cast<int>(ids.cols), renormalize,
                 ids.data, weights.data);
  return ok_status();
}

Status CpuBackend::moe_route_grouped(ConstF32View logits, const MoeRouting& routing, I32View ids, F32View weights) {
  const char* op = "moe_route_grouped";
  QRT_TRY(check_view(logits, op, "logits"));
  QRT_TRY(check_view(ids, op, "ids"));
  QRT_TRY(check_view(weights, op, "weights"));
  QRT_TRY(op_checks::moe_route_grouped(logits, routing, ids, weights));
  if (routing.choice_bias != nullptr)
    QRT_TRY(check_range(routing.choice_bias, static_cast<uint64_t>(logits.cols) * sizeof(float), op, "choice bias"));
  cpu::moe_route_grouped(logits.data, logits.rows, static_cast<int>(logits.cols), static_cast<int>(ids.cols), routing,
                         ids.data, weights.data);
  return ok_status();
}

Status CpuBackend::concat_cols(ConstF32View a, ConstF32View b, F32View out) {
  const char* op = "concat_cols";
  QRT_TRY(check_view(a, op, "a"));
  QRT_TRY(check_view(b, op, "b"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_TRY(op_checks::concat_cols(a, b, out));
  cpu::concat_cols(a.data, a.cols, b.data, b.cols, a.rows, out.data);
  return ok_status();
}

Status CpuBackend::linear_experts(ConstF32View x, WeightHandle weight, ConstI32View ids, F32View y) {
  const char* op = "linear_experts";
  QRT_ASSIGN_OR_RETURN(const Weight* w, find_weight(weight, op, "weight"));
  QRT_TRY(check_view(x, op, "x"));
  QRT_TRY(check_view(ids, op, "ids"));
  QRT_TRY(check_view(y, op, "y"));
  QRT_TRY(op_checks::linear_experts(x, WeightInfo{w->format, w->shape}, ids, y));
  const int64_t experts = w->shape[0], out_dim = w->shape[1], in_dim = w->shape[2];
  const int64_t tokens = ids.rows, top_k = ids.cols;
  const bool shared_input = x.rows == tokens;
  for (int64_t i = 0; i < ids.numel(); ++i)
    if (ids.data[i] < 0 || ids.data[i] >= experts)
      return out_of_range("linear_experts: expert id " + std::to_string(ids.data[i]) + " outside [0, " +
                          std::to_string(experts) + ")");
  // Gather the rows routed to each expert, multiply by that expert's matrix only, scatter the results back.
  std::vector<int64_t> slots;
  std::vector<float> xs, ys;
  for (int64_t e = 0; e < experts; ++e) {
    slots.clear();
    for (int64_t i = 0; i < tokens * top_k; ++i)
      if (ids.data[i] == e) slots.push_back(i);
    if (slots.empty()) continue;
    const int64_t m = static_cast<int64_t>(slots.size());
    xs.resize(static_cast<size_t>(m * in_dim));
    ys.resize(static_cast<size_t>(m * out_dim));
    for (int64_t r = 0; r < m; ++r) {
      const int64_t src = shared_input ? slots[static_cast<size_t>(r)] / top_k : slots[static_cast<size_t>(r)];
      std::memcpy(xs.data() + r * in_dim, x.data + src * in_dim, static_cast<size_t>(in_dim) * sizeof(float));
    }
    QRT_TRY(cpu::matmul(w->format, w->expert_view(e), xs.data(), m, ys.data()));
    for (int64_t r = 0; r < m; ++r)
      std::memcpy(y.data + slots[static_cast<size_t>(r)] * out_dim, ys.data() + r * out_dim,
                  static_cast<size_t>(out_dim) * sizeof(float));
  }
  return ok_status();
}

Status CpuBackend::moe_combine(ConstF32View y, ConstF32View weights, F32View out) {
  const char* op = "moe_combine";
  const int64_t tokens = weights.rows, top_k = weights.cols;
  QRT_TRY(check_view(y, op, "y"));
  QRT_TRY(check_view(weights, op, "weights"));
  QRT_TRY(check_view(out, op, "out"));
  QRT_TRY(op_checks::moe_combine(y, weights, out));
  cpu::moe_combine(y.data, weights.data, tokens, static_cast<int>(top_k), y.cols, out.data);
  return ok_status();
}

// Row by row through the CPU sampler, so this op is the reference the device sampler is tested against.
Status CpuBackend::sample(ConstF32View logits, const SampleStep& step, I32View ids) {
  const char* op = "sample";
  QRT_TRY(op_checks::sample(logits, step, ids));
  QRT_TRY(check_view(logits, op, "logits"));
  QRT_TRY(check_view(ids, op, "ids"));
  const size_t vocab = static_cast<size_t>(logits.cols);
  std::vector<float> row(vocab);  // [vocab] the penalized copy of one row
  SampleScratch scratch;
  for (int64_t r = 0; r < logits.rows; ++r) {
    const float* src = logits.data + r * logits.cols;
    row.assign(src, src + vocab);
    if (!step.penalty_offsets.empty()) {
      const auto first = step.penalties.begin() + step.penalty_offsets[static_cast<size_t>(r)];
      const auto last = step.penalties.begin() + step.penalty_offsets[static_cast<size_t>(r) + 1];
      apply_penalty_counts(row, std::span<const PenaltyCount>(first, last), step.params);
    }
    ids.data[r] = sample_with_uniform(row, step.params, step.u01[static_cast<size_t>(r)], scratch);
  }
  return ok_status();
}

// ---- tensor parallelism ---------------------------------------------------------------------------------------

Status CpuBackend::all_reduce_sum(F32View x) {
  const char* op = "all_reduce_sum";
  QRT_TRY(check_view(x, op, "x"));
  if (comm_ == nullptr) return ok_status();
  if (comm_->kind() == "nccl")
    return invalid_argument("cpu backend: all_reduce_sum needs a host-memory communicator, not nccl");
  return comm_->all_reduce_sum(x.data, static_cast<size_t>(x.numel()));
}

int CpuBackend::tp_rank() const { return comm_ ? comm_->rank() : 0; }
int CpuBackend::tp_world_size() const { return comm_ ? comm_->world() : 1; }

}  // namespace qrt
