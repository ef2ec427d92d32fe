// Importance matrices as llama.cpp's llama-imatrix writes them: for every weight matrix of a model (by its GGUF
// name, "blk.0.attn_q.weight"), the mean of the squared activations that reached each of its input columns over a
// calibration text. The low-bit quantizers weigh each column's error by it (QuantParams::importance).
//
// Two file formats, told apart by the GGUF magic:
//   GGUF (llama.cpp since mid 2025, `--output-format gguf`): per matrix `<name>.in_sum2` (F32, [experts, cols]: sums
//     of squares) and `<name>.counts` (F32, [experts, 1]: how many activations each expert's sums hold), and the
//     keys imatrix.datasets / imatrix.chunk_count / imatrix.chunk_size. The importance is in_sum2 / count; an
//     expert that never saw a token (count 0) gets ones, as llama-quantize does.
//   legacy ("imatrix.dat"): i32 entry count, then per entry: i32 name length, the name, i32 ncall, i32 nval, nval
//     f32 values that are ncall times the means; optionally i32 chunk count, i32 length and the dataset name. The
//     importance is value / ncall.
// Every count, length and value is checked; a malformed file is an error naming the file and the entry.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "qrt/status.hpp"

namespace qrt {

struct ImportanceMatrix {
  std::string path;
  std::string file_format;                            // "gguf" or "legacy"
  std::map<std::string, std::vector<float>> entries;  // GGUF tensor name -> [experts * cols] importance
  std::vector<std::string> datasets;                  // the calibration files named in the file, if any
  int64_t chunks = 0;                                 // calibration chunks it was computed on (0 when not recorded)

  // The importance of the matrix `name` ([experts,] rows, cols): nullptr when the file has no entry for it; an
  // error when the entry's length is neither cols nor experts * cols (a matrix from another model).
  Result<const std::vector<float>*> for_tensor(const std::string& name, int64_t cols, int64_t experts) const;
};

Result<ImportanceMatrix> read_imatrix(const std::string& path);

}  // namespace qrt
