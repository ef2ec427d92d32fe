// Data type tags shared by cuBLAS and NCCL calls, for the SIMT layer.
#pragma once

enum cudaDataType {
  CUDA_R_16F = 2,
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_8I = 3,
  CUDA_R_32I = 10,
  CUDA_R_16BF = 14,
};
typedef cudaDataType cudaDataType_t;
