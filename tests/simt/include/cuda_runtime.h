// The SIMT layer's CUDA runtime header: qrt's .cu files and CUDA host code compile against this instead of the
// toolkit's when built for the gpu-sim tests (docs/simt.md).
#pragma once

#include "simt/device.hpp"
#include "simt/half.hpp"
#include "simt/launch.hpp"
#include "simt/runtime_api.hpp"
#include "simt/types.hpp"
