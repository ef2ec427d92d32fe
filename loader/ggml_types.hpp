// GGML tensor type ids as GGUF stores them (spec/ggml.md §2.1): the file format's own table, used by the GGUF
// reader to size and validate every tensor, including types qrt has no format for yet, and to name types in
// errors. Which of them qrt can compute with is decided by the format list (format_from_ggml_type), not here.
#pragma once

#include <cstdint>
#include <string_view>

namespace qrt {

struct GgmlTypeInfo {
  int id;
  std::string_view name;
  int block_elems;  // elements per block; 0 = a removed type that no valid file contains
  int type_size;    // bytes per block
};

inline constexpr GgmlTypeInfo kGgmlTypes[] = {
    {0, "F32", 1, 4},          {1, "F16", 1, 2},          {2, "Q4_0", 32, 18},      {3, "Q4_1", 32, 20},
    {4, "Q4_2", 0, 0},         {5, "Q4_3", 0, 0},         {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},       {9, "Q8_1", 32, 36},       {10, "Q2_K", 256, 84},    {11, "Q3_K", 256, 110},
    {12, "Q4_K", 256, 144},    {13, "Q5_K", 256, 176},    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},
    {16, "IQ2_XXS", 256, 66},  {17, "IQ2_XS", 256, 74},   {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},    {21, "IQ3_S", 256, 110},   {22, "IQ2_S", 256, 82},   {23, "IQ4_XS", 256, 136},
    {24, "I8", 1, 1},          {25, "I16", 1, 2},         {26, "I32", 1, 4},        {27, "I64", 1, 8},
    {28, "F64", 1, 8},         {29, "IQ1_M", 256, 56},    {30, "BF16", 1, 2},       {31, "Q4_0_4_4", 0, 0},
    {32, "Q4_0_4_8", 0, 0},    {33, "Q4_0_8_8", 0, 0},    {34, "TQ1_0", 256, 54},   {35, "TQ2_0", 256, 66},
    {36, "IQ4_NL_4_4", 0, 0},  {37, "IQ4_NL_4_8", 0, 0},  {38, "IQ4_NL_8_8", 0, 0}, {39, "MXFP4", 32, 17},
    {40, "NVFP4", 64, 36},     {41, "Q1_0", 128, 18},     {42, "Q2_0", 64, 18},
};

inline constexpr int kGgmlTypeCount = static_cast<int>(sizeof(kGgmlTypes) / sizeof(kGgmlTypes[0]));

// The table row for a type id, or nullptr for ids outside [0, kGgmlTypeCount).
constexpr const GgmlTypeInfo* ggml_type_info(int64_t id) {
  return id >= 0 && id < kGgmlTypeCount ? &kGgmlTypes[id] : nullptr;
}

}  // namespace qrt
