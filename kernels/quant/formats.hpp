// Everything about formats in one include: the list, every family's traits, and the one dispatch switch that
// turns a runtime FormatId into a compile-time traits type.
#pragma once

#include <optional>

#include "kernels/quant/afq.hpp"
#include "kernels/quant/dense.hpp"
#include "kernels/quant/format_list.hpp"
#include "kernels/quant/fp8.hpp"
#include "kernels/quant/ggml_legacy.hpp"
#include "kernels/quant/ggml_kquants.hpp"
#include "kernels/quant/ggml_iquants.hpp"
#include "kernels/quant/ggml_nl.hpp"
#include "kernels/quant/ggml_ternary.hpp"
#include "kernels/quant/hqq.hpp"
#include "kernels/quant/mx.hpp"

namespace qrt::quant {

template <FormatId Id>
struct FormatTag {
  static constexpr FormatId id = Id;
  using Traits = FormatTraits<Id>;
};

// The only switch over formats in qrt: calls fn(FormatTag<id>{}) so that the callee sees the traits as a type.
//   dispatch_format(id, [&](auto tag) { using T = typename decltype(tag)::Traits; ... });
template <class Fn>
decltype(auto) dispatch_format(FormatId id, Fn&& fn) {
  switch (id) {
#define QRT_X(name, str)  \
  case FormatId::k##name: \
    return fn(FormatTag<FormatId::k##name>{});
    QRT_FORMAT_LIST(QRT_X)
#undef QRT_X
  }
  // Unreachable for a valid enum value; callers get the first format rather than undefined behaviour.
  return fn(FormatTag<kAllFormats[0]>{});
}

// Runtime facts about a format, read from its traits.
struct FormatInfo {
  FormatId id;
  std::string_view name;
  Family family;
  int ggml_type;
  int block_elems;  // 0 = group_size
  int block_bytes;
  double bits_per_weight;
  bool has_quantizer;
};

inline FormatInfo format_info(FormatId id) {
  return dispatch_format(id, [&](auto tag) {
    using T = typename decltype(tag)::Traits;
    return FormatInfo{id, format_name(id), T::family, T::ggml_type, T::block_elems, T::block_bytes,
                      T::bits_per_weight, T::has_quantizer};
  });
}

// Elements per decode_block call for a tensor with these params.
QRT_HD int block_elems_for(int traits_block_elems, const QuantParams& p) {
  return traits_block_elems != 0 ? traits_block_elems : p.group_size;
}

inline std::optional<FormatId> format_from_name(std::string_view name) {
  for (FormatId id : kAllFormats)
    if (format_name(id) == name) return id;
  return std::nullopt;
}

inline std::optional<FormatId> format_from_ggml_type(int ggml_type) {
  for (FormatId id : kAllFormats)
    if (format_info(id).ggml_type == ggml_type) return id;
  return std::nullopt;
}

}  // namespace qrt::quant
