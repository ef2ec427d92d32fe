// SIMT layer: the CUB algorithms qrt uses.
#pragma once

#include "cub/device/device_radix_sort.cuh"
