// Runs ggml's own quantizer (ggml_quantize_chunk, what llama-quantize calls) on float32 rows from a file, to record
// reference bytes for quantizers gguf-py lacks (make_vectors.py). Built against a ggml checkout, never by the
// project's build.
//   ggml_quantize_driver GGML_TYPE ROWS COLS IN.f32 OUT.bin
#include <stdio.h>
#include <stdlib.h>

#include "ggml.h"

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s GGML_TYPE ROWS COLS IN.f32 OUT.bin\n", argv[0]);
    return 2;
  }
  const enum ggml_type type = (enum ggml_type)atoi(argv[1]);
  const long rows = atol(argv[2]), cols = atol(argv[3]);
  float* x = malloc(sizeof(float) * (size_t)(rows * cols));
  FILE* in = fopen(argv[4], "rb");
  if (in == NULL || fread(x, sizeof(float), (size_t)(rows * cols), in) != (size_t)(rows * cols)) return 2;
  fclose(in);
  const size_t bytes = ggml_row_size(type, cols) * (size_t)rows;
  void* out = malloc(bytes);
  ggml_quantize_init(type);
  if (ggml_quantize_chunk(type, x, out, 0, rows, cols, NULL) != bytes) return 3;
  FILE* o = fopen(argv[5], "wb");
  if (o == NULL || fwrite(out, 1, bytes, o) != bytes) return 2;
  fclose(o);
  return 0;
}
