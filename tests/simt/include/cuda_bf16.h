// SIMT layer: __half and __nv_bfloat16 (simt/half.hpp).
#pragma once

#include "cuda_runtime.h"
