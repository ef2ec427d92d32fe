// Runs ggml's own quantizer (ggml_quantize_chunk, what llama-quantize calls) on float32 rows from a file, to record
// reference bytes for quantizers gguf-py lacks (make_vectors.py). Built against a ggml checkout, never by the
// project's build. IMATRIX.f32, when given, holds COLS float32 importance weights (what llama-quantize passes per
// column from an imatrix file).
//   ggml_quantize_driver GGML_TYPE ROWS COLS IN.f32 OUT.bin [IMATRIX.f32]
#include <stdio.h>
#include <stdlib.h>

#include "ggml.h"

static int read_floats(const char* path, float* dst, size_t n) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return 0;
  const size_t got = fread(dst, sizeof(float), n, f);
  fclose(f);
  return got == n;
}

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    fprintf(stderr, "usage: %s GGML_TYPE ROWS COLS IN.f32 OUT.bin [IMATRIX.f32]\n", argv[0]);
    return 2;
  }
  const enum ggml_type type = (enum ggml_type)atoi(argv[1]);
  const long rows = atol(argv[2]), cols = atol(argv[3]);
  float* x = malloc(sizeof(float) * (size_t)(rows * cols));
  if (!read_floats(argv[4], x, (size_t)(rows * cols))) return 2;
  float* importance = NULL;
  if (argc == 7) {
    importance = malloc(sizeof(float) * (size_t)cols);
    if (!read_floats(argv[6], importance, (size_t)cols)) return 2;
  }
  const size_t bytes = ggml_row_size(type, cols) * (size_t)rows;
  void* out = malloc(bytes);
  ggml_quantize_init(type);
  if (ggml_quantize_chunk(type, x, out, 0, rows, cols, importance) != bytes) return 3;
  FILE* o = fopen(argv[5], "wb");
  if (o == NULL || fwrite(out, 1, bytes, o) != bytes) return 2;
  fclose(o);
  return 0;
}
