// Bit-level helpers shared by every format decoder, on the host and on the device.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define QRT_HD __host__ __device__ __forceinline__
#else
#define QRT_HD inline
#endif

namespace qrt::quant {

// Little-endian loads from byte pointers that may be unaligned (GGML blocks are 18, 34, ... bytes long).
QRT_HD uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
QRT_HD uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
QRT_HD float bits_to_f32(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}
QRT_HD uint32_t f32_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
QRT_HD float load_f32(const uint8_t* p) { return bits_to_f32(load_u32(p)); }
// a · b + c rounded twice, on the device as on the host. The device compiler would otherwise contract it into one
// FMA, which keeps a · b's rounding error where the host's sum is exactly 0 (AFQ's q · scale cancelling its bias) and
// can pick a different product to fuse in two instantiations of one kernel.
QRT_HD float mul_then_add(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(__fmul_rn(a, b), c);
#else
  const float product = a * b;
  return product + c;
#endif
}

// IEEE binary16 -> float32, exact (every half is representable), subnormals and NaN payloads included.
QRT_HD float fp16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal: normalise the mantissa.
    uint32_t e = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((mant & 0x3FFu) << 13);
  }
  return bits_to_f32(bits);
}
QRT_HD float load_f16(const uint8_t* p) { return fp16_to_f32(load_u16(p)); }

// bfloat16 is the upper half of a float32.
QRT_HD float bf16_to_f32(uint16_t b) { return bits_to_f32(static_cast<uint32_t>(b) << 16); }
QRT_HD float load_bf16(const uint8_t* p) { return bf16_to_f32(load_u16(p)); }

// float32 -> binary16 with round-to-nearest-even, as numpy's astype(float16) does (quantizers need the same bits).
QRT_HD uint16_t f32_to_fp16(float f) {
  const uint32_t x = f32_to_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0));
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 65520: infinity
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): shift the full mantissa into place and round half to even.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14 + (113 - e) - 1 ... aligns to the 2^-24 unit
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15, keep 23-bit mantissa
  const uint32_t rem = r & 0x1FFFu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

// float32 -> bfloat16 with round-to-nearest-even (NaN kept quiet).
QRT_HD uint16_t f32_to_bf16(float f) {
  const uint32_t x = f32_to_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace qrt::quant
