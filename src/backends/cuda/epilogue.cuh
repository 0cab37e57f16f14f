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

template <int kKind>
__device__ __forceinline__ float4 apply_op4(float parameter, float4 v) {
  v.x = apply_op(kKind, parameter, v.x);
  v.y = apply_op(kKind, parameter, v.y);
  v.z = apply_op(kKind, parameter, v.z);
  v.w = apply_op(kKind, parameter, v.w);
  return v;
}

// The epilogue on four values: one dispatch per op rather than per value (the same formulas).
__device__ __forceinline__ float4 apply_epilogue4(const DeviceEpilogue& epilogue, float4 v) {
  for (int i = 0; i < epilogue.count; ++i) {
    const float p = epilogue.parameter[i];
    switch (epilogue.kind[i]) {
      case kOpReLU: v = apply_op4<kOpReLU>(p, v); break;
      case kOpLeakyReLU: v = apply_op4<kOpLeakyReLU>(p, v); break;
      case kOpGeluErf: v = apply_op4<kOpGeluErf>(p, v); break;
      case kOpGeluTanh: v = apply_op4<kOpGeluTanh>(p, v); break;
      case kOpSiLU: v = apply_op4<kOpSiLU>(p, v); break;
      case kOpSigmoid: v = apply_op4<kOpSigmoid>(p, v); break;
      case kOpTanh: v = apply_op4<kOpTanh>(p, v); break;
      case kOpScale: v = apply_op4<kOpScale>(p, v); break;
      default: break;
    }
  }
  return v;
}

}  // namespace fusednn::cuda
