// Device side of DeviceEpilogue: the formulas of common/elementwise_op.hpp's apply(), in the
// same order of operations, with CUDA's correctly rounded division and its erff / tanhf / expf
// (within 2 ulp; the library is built without --use_fast_math).
#pragma once

#include "backends/cuda/device_epilogue.hpp"

namespace fusednn::cuda {

__device__ __forceinline__ float apply_op(int kind, float parameter, float x) {
  switch (static_cast<ElementwiseKind>(kind)) {
    case ElementwiseKind::ReLU:
      return x > 0.0f ? x : 0.0f;
    case ElementwiseKind::LeakyReLU:
      return x >= 0.0f ? x : x * parameter;
    case ElementwiseKind::GeluErf:
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case ElementwiseKind::GeluTanh: {
      const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.0f + tanhf(inner));
    }
    case ElementwiseKind::SiLU:
      return x / (1.0f + expf(-x));
    case ElementwiseKind::Sigmoid:
      return 1.0f / (1.0f + expf(-x));
    case ElementwiseKind::Tanh:
      return tanhf(x);
    case ElementwiseKind::Scale:
      return x * parameter;
  }
  return x;
}

__device__ __forceinline__ float apply_epilogue(const DeviceEpilogue& epilogue, float x) {
  for (int i = 0; i < epilogue.count; ++i) x = apply_op(epilogue.kind[i], epilogue.parameter[i], x);
  return x;
}

}  // namespace fusednn::cuda
