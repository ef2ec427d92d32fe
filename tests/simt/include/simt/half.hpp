// __half and __nv_bfloat16 for the SIMT layer: 16-bit storage with CUDA's conversions (round to nearest even, NaN
// kept) and the handful of arithmetic operators kernels use. Arithmetic goes through float, as the GPU's half
// units round every result to half.
#pragma once

#include <cstdint>
#include <cstring>

namespace qrt::simt::detail {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return bits_f32(sign | 0x7F800000u | (mant << 13));
  if (exp != 0) return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_f32(sign);
  uint32_t e = 113;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return bits_f32(sign | (e << 23) | ((mant & 0x3FFu) << 13));
}

inline uint16_t float_to_half_bits(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));  // NaN, quiet
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to infinity (or is)
  if (abs < 0x33000001u) return static_cast<uint16_t>(sign);             // below half the smallest subnormal
  const int exp = static_cast<int>(abs >> 23);
  uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
  int shift = 13;                // normal: drop 13 mantissa bits
  int half_exp = exp - 112;      // rebias 127 -> 15
  if (half_exp <= 0) {           // subnormal half
    shift = 14 - half_exp;
    half_exp = 0;
  } else {
    mant &= 0x7FFFFFu;
  }
  uint32_t rounded = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (rounded & 1u))) ++rounded;
  return static_cast<uint16_t>(sign | ((static_cast<uint32_t>(half_exp) << 10) + rounded));
}

inline float bf16_bits_to_float(uint16_t b) { return bits_f32(static_cast<uint32_t>(b) << 16); }

inline uint16_t float_to_bf16_bits(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN, quiet
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace qrt::simt::detail

struct __half {
  unsigned short __x;
  __half() = default;
  __half(float f) : __x(qrt::simt::detail::float_to_half_bits(f)) {}  // NOLINT: CUDA converts implicitly
  operator float() const { return qrt::simt::detail::half_bits_to_float(__x); }
};
using half = __half;

struct __half2 {
  __half x, y;
};
using half2 = __half2;

struct __nv_bfloat16 {
  unsigned short __x;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) : __x(qrt::simt::detail::float_to_bf16_bits(f)) {}  // NOLINT
  operator float() const { return qrt::simt::detail::bf16_bits_to_float(__x); }
};
using nv_bfloat16 = __nv_bfloat16;

struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};

inline float __half2float(__half h) { return qrt::simt::detail::half_bits_to_float(h.__x); }
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline __half __ushort_as_half(unsigned short u) {
  __half h;
  h.__x = u;
  return h;
}
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half2 __floats2half2_rn(float a, float b) { return __half2{__half(a), __half(b)}; }

inline float __bfloat162float(__nv_bfloat16 b) { return qrt::simt::detail::bf16_bits_to_float(b.__x); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) {
  __nv_bfloat16 b;
  b.__x = u;
  return b;
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }

inline __half __hadd(__half a, __half b) { return __half(float(a) + float(b)); }
inline __half __hmul(__half a, __half b) { return __half(float(a) * float(b)); }
inline __half __hfma(__half a, __half b, __half c) { return __half(float(a) * float(b) + float(c)); }
