// cuBLAS GEMMs on the CPU for the SIMT layer, queued on the handle's stream like every other op. The operands are
// widened to fp32 and every dot product accumulates in fp32 (the order differs from cuBLAS's, so results agree to
// rounding, not bits). Columns of C are spread over the worker threads.
#include <cublas_v2.h>

#include <cstring>
#include <vector>

#include "internal.hpp"

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

namespace qrt::simt {
namespace {

float load(const void* base, cudaDataType type, size_t index) {
  switch (type) {
    case CUDA_R_32F: return static_cast<const float*>(base)[index];
    case CUDA_R_64F: return static_cast<float>(static_cast<const double*>(base)[index]);
    case CUDA_R_16F: return static_cast<float>(static_cast<const __half*>(base)[index]);
    case CUDA_R_16BF: return static_cast<float>(static_cast<const __nv_bfloat16*>(base)[index]);
    case CUDA_R_8I: return static_cast<float>(static_cast<const int8_t*>(base)[index]);
    case CUDA_R_32I: return static_cast<float>(static_cast<const int32_t*>(base)[index]);
  }
  return 0.0f;
}

void store(void* base, cudaDataType type, size_t index, float v) {
  switch (type) {
    case CUDA_R_32F: static_cast<float*>(base)[index] = v; break;
    case CUDA_R_64F: static_cast<double*>(base)[index] = v; break;
    case CUDA_R_16F: static_cast<__half*>(base)[index] = __half(v); break;
    case CUDA_R_16BF: static_cast<__nv_bfloat16*>(base)[index] = __nv_bfloat16(v); break;
    default: break;
  }
}

size_t type_bytes(cudaDataType type) {
  switch (type) {
    case CUDA_R_32F: case CUDA_R_32I: return 4;
    case CUDA_R_64F: return 8;
    case CUDA_R_16F: case CUDA_R_16BF: return 2;
    case CUDA_R_8I: return 1;
  }
  return 0;
}

struct Gemm {
  cublasOperation_t ta, tb;
  int m, n, k;
  float alpha, beta;
  const void* a;
  cudaDataType at;
  int lda;
  const void* b;
  cudaDataType bt;
  int ldb;
  void* c;
  cudaDataType ct;
  int ldc;
};

// Extent in elements of a column-major operand with `cols` columns of leading dimension ld.
size_t extent(int rows, int cols, int ld) {
  return cols == 0 || rows == 0 ? 0 : static_cast<size_t>(ld) * static_cast<size_t>(cols - 1) + rows;
}

void run(const Gemm& g) {
  // op(A) row i as a contiguous fp32 vector of k, op(B) column j likewise, then dot products.
  std::vector<float> a_rows(static_cast<size_t>(g.m) * g.k);
  for (int i = 0; i < g.m; ++i)
    for (int l = 0; l < g.k; ++l) {
      const size_t idx = g.ta == CUBLAS_OP_N ? static_cast<size_t>(i) + static_cast<size_t>(l) * g.lda
                                             : static_cast<size_t>(l) + static_cast<size_t>(i) * g.lda;
      a_rows[static_cast<size_t>(i) * g.k + l] = load(g.a, g.at, idx);
    }
  parallel_for(g.n, [&](int64_t jj) {
    const int j = static_cast<int>(jj);
    std::vector<float> bcol(static_cast<size_t>(g.k));
    for (int l = 0; l < g.k; ++l) {
      const size_t idx = g.tb == CUBLAS_OP_N ? static_cast<size_t>(l) + static_cast<size_t>(j) * g.ldb
                                             : static_cast<size_t>(j) + static_cast<size_t>(l) * g.ldb;
      bcol[static_cast<size_t>(l)] = load(g.b, g.bt, idx);
    }
    for (int i = 0; i < g.m; ++i) {
      const float* ar = a_rows.data() + static_cast<size_t>(i) * g.k;
      float acc = 0.0f;
      for (int l = 0; l < g.k; ++l) acc += ar[l] * bcol[static_cast<size_t>(l)];
      const size_t ci = static_cast<size_t>(i) + static_cast<size_t>(j) * g.ldc;
      // beta == 0: C is output only (it may hold NaN from before), as cuBLAS promises.
      const float prior = g.beta == 0.0f ? 0.0f : g.beta * load(g.c, g.ct, ci);
      store(g.c, g.ct, ci, g.alpha * acc + prior);
    }
  });
}

cublasStatus_t enqueue_gemm(cublasHandle_t h, const Gemm& g) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (g.m < 0 || g.n < 0 || g.k < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const int a_rows = g.ta == CUBLAS_OP_N ? g.m : g.k, a_cols = g.ta == CUBLAS_OP_N ? g.k : g.m;
  const int b_rows = g.tb == CUBLAS_OP_N ? g.k : g.n, b_cols = g.tb == CUBLAS_OP_N ? g.n : g.k;
  if (g.lda < (a_rows > 1 ? a_rows : 1) || g.ldb < (b_rows > 1 ? b_rows : 1) || g.ldc < (g.m > 1 ? g.m : 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (type_bytes(g.at) == 0 || type_bytes(g.bt) == 0 || type_bytes(g.ct) == 0 || g.ct == CUDA_R_8I ||
      g.ct == CUDA_R_32I)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (g.m == 0 || g.n == 0) return CUBLAS_STATUS_SUCCESS;
  // Every operand must lie in device memory, as cuBLAS reads it there.
  struct Operand {
    const void* p;
    size_t bytes;
    const char* name;
  };
  const Operand ops[] = {{g.a, extent(a_rows, a_cols, g.lda) * type_bytes(g.at), "A"},
                         {g.b, extent(b_rows, b_cols, g.ldb) * type_bytes(g.bt), "B"},
                         {g.c, extent(g.m, g.n, g.ldc) * type_bytes(g.ct), "C"}};
  for (const Operand& o : ops) {
    if (o.bytes == 0) continue;
    auto a = find_allocation(o.p, o.bytes);
    if (!a || a->kind != MemoryKind::kDevice)
      fatal(std::string("cuBLAS GEMM operand ") + o.name + " (" + std::to_string(o.bytes) +
            " bytes) is not inside a device allocation");
  }
  Stream* s = resolve_stream(h->stream);
  if (s == nullptr) return CUBLAS_STATUS_EXECUTION_FAILED;
  OpSpec op;
  op.kind = OpKind::kKernel;
  op.run = [g] { run(g); };
  return enqueue(s, std::move(op)) == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // namespace
}  // namespace qrt::simt

using namespace qrt::simt;

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
  if (handle == nullptr || stream == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}
const char* cublasGetStatusString(cublasStatus_t status) { return cublasGetStatusName(status); }

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                           const float* beta, float* C, int ldc) {
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  return enqueue_gemm(handle, Gemm{transa, transb, m, n, k, *alpha, *beta, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb,
                                   C, CUDA_R_32F, ldc});
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t) {
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (computeType != CUBLAS_COMPUTE_32F && computeType != CUBLAS_COMPUTE_32F_FAST_TF32)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return enqueue_gemm(handle, Gemm{transa, transb, m, n, k, *static_cast<const float*>(alpha),
                                   *static_cast<const float*>(beta), A, Atype, lda, B, Btype, ldb, C, Ctype, ldc});
}
