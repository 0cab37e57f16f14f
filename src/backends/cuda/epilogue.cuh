// Device side of DeviceEpilogue: the formulas of common/elementwise_op.hpp's apply() (PyTorch's
// definitions), with CUDA's correctly rounded division and its erff / tanhf / expf (within 2 ulp;
// the library is built without --use_fast_math).
#pragma once

#include "backends/cuda/device_epilogue.hpp"

namespace fusednn::cuda {

__device__ __forceinline__ float apply_op(int kind, float parameter, float x) {
  switch (kind) {
    case kOpReLU:
      return x > 0.0f ? x : 0.0f;
    case kOpLeakyReLU:
      return x >= 0.0f ? x : x * parameter;
    case kOpGeluErf:
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case kOpGeluTanh: {
      const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.0f + tanhf(inner));
    }
    case kOpSiLU:
      return x / (1.0f + expf(-x));
    case kOpSigmoid:
      return 1.0f / (1.0f + expf(-x));
    case kOpTanh:
      return tanhf(x);
    case kOpScale:
      return x * parameter;
  }
  return x;
}

__device__ __forceinline__ float apply_epilogue(const DeviceEpilogue& epilogue, float x) {
  for (int i = 0; i < epilogue.count; ++i) x = apply_op(epilogue.kind[i], epilogue.parameter[i], x);
  return x;
}

}  // namespace fusednn::cuda
