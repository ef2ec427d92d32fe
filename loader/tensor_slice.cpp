#include "loader/tensor_slice.hpp"

#include <cstring>
#include <string>

namespace qrt {
namespace {

// The bytes `runs` selects from `part`, or an error when they fall outside it.
Status check_runs(const ByteSpan& part, const quant::ByteRuns& runs, const char* part_name) {
  if (runs.count == 0) return ok_status();
  const uint64_t last_end = runs.offset + runs.stride * (runs.count - 1) + runs.length;
  if (last_end > part.size)
    return format_error(std::string("its ") + part_name + " part holds " + std::to_string(part.size) +
                        " bytes but the slice reaches byte " + std::to_string(last_end));
  return ok_status();
}

}  // namespace

Result<SlicedTensor> slice_tensor(const QuantTensor& tensor, const quant::DimRange& range) {
  auto where = [&](const Status& s) {
    return s.with_context("slicing tensor " + tensor.name + (tensor.file.empty() ? "" : " in " + tensor.file));
  };
  auto bytes = quant::slice_bytes(tensor.format, tensor.params, tensor.shape, range);
  if (!bytes.ok()) return where(bytes.status());
  const struct {
    const ByteSpan* span;
    const quant::ByteRuns* runs;
    const char* name;
  } parts[] = {{&tensor.data, &bytes->data, "data"},
               {&tensor.scales, &bytes->scales, "scales"},
               {&tensor.biases, &bytes->biases, "biases"}};
  bool contiguous = true;
  uint64_t gathered = 0;
  for (const auto& p : parts) {
    if (Status s = check_runs(*p.span, *p.runs, p.name); !s.ok()) return where(s);
    contiguous = contiguous && p.runs->contiguous();
    gathered += p.runs->total();
  }

  SlicedTensor out;
  out.tensor = tensor;
  out.tensor.shape = bytes->shape;
  ByteSpan* targets[] = {&out.tensor.data, &out.tensor.scales, &out.tensor.biases};
  if (contiguous) {
    for (int i = 0; i < 3; ++i) {
      const auto& r = *parts[i].runs;
      *targets[i] = r.count == 0 ? ByteSpan{} : ByteSpan{parts[i].span->data + r.offset, r.total()};
    }
    return out;
  }
  out.storage.resize(gathered);
  uint64_t at = 0;
  for (int i = 0; i < 3; ++i) {
    const auto& r = *parts[i].runs;
    const uint64_t begin = at;
    for (uint64_t k = 0; k < r.count; ++k, at += r.length)
      std::memcpy(out.storage.data() + at, parts[i].span->data + r.offset + k * r.stride, r.length);
    *targets[i] = r.count == 0 ? ByteSpan{} : ByteSpan{out.storage.data() + begin, r.total()};
  }
  return out;
}

}  // namespace qrt
