// SPDX-License-Identifier: Apache-2.0
// Device side of DeviceEpilogue: the formulas of common/elementwise_op.hpp's apply() (PyTorch's
// definitions), with CUDA's correctly rounded division and its erff / expf (within 2 ulp; the
// library is built without --use_fast_math). Tanh and GELU(tanh) go through exp2_fast below
// (tanhf in the WarpRegisters kernels: apply_op's kLibmTanh).
#pragma once

#include "backends/cuda/device/device_epilogue.hpp"
#include "backends/cuda/device/relu.cuh"

namespace fusednn::cuda {

// 2^x and 1/x on the special-function unit (relative errors ~2^-22 and 1 ulp): one instruction
// each. With tanhf (~17 instructions each) Tanh is a large share of LeNet-5 conv1's instructions.
__device__ __forceinline__ float exp2_fast(float x) {
  float result;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(result) : "f"(x));
  return result;
}

__device__ __forceinline__ float reciprocal_fast(float x) {
  float result;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(result) : "f"(x));
  return result;
}

// tanh x = 1 - 2 / (e^2x + 1) from |x| = 0.25 on, and its odd Taylor polynomial to x^9 below
// (truncation under 1e-8 relative there), where the exponential form cancels: its absolute error
// of ~2e-7 would break fp32's normwise 1e-5 when every output of a Tanh is small (pre-activations
// of ~1e-3, in host emulation). Relative error under 2e-6 everywhere
// (TanhOnTheSpecialFunctionUnit); -0 stays -0, +-1 at the ends, NaN for NaN. 13 instructions
// against tanhf's ~17, two of them on the special-function unit.
__device__ __forceinline__ float tanh_fast(float x) {
  constexpr float kTwoOverLn2 = 2.8853900817779268f;  // 2 log2(e)
  const float exponential = fmaf(-2.0f, reciprocal_fast(exp2_fast(kTwoOverLn2 * x) + 1.0f), 1.0f);
  const float x2 = x * x;
  float p = fmaf(x2, 62.0f / 2835.0f, -17.0f / 315.0f);
  p = fmaf(x2, p, 2.0f / 15.0f);
  p = fmaf(x2, p, -1.0f / 3.0f);
  const float polynomial = x * fmaf(x2, p, 1.0f);  // x (1 + ...), not x + ...: keeps -0
  return fabsf(x) < 0.25f ? polynomial : exponential;
}

// GELU(tanh): 0.5 x (1 + tanh u) = x / (1 + e^-2u), which keeps the relative precision where
// tanh u nears -1 (the 1 + tanh form cancels there).
__device__ __forceinline__ float gelu_tanh_fast(float x) {
  constexpr float kMinusTwoOverLn2 = -2.8853900817779268f;
  const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
  return x * reciprocal_fast(exp2_fast(kMinusTwoOverLn2 * inner) + 1.0f);
}

// kLibmTanh: Tanh and GELU(tanh) through tanhf rather than tanh_fast, for the WarpRegisters
// kernels: tanh_fast in their general epilogue makes the whole kernel slower, even for chains
// that never run that code.
template <bool kLibmTanh = false>
__device__ __forceinline__ float apply_op(int kind, float parameter, float x) {
  switch (kind) {
    case kOpReLU: return relu_keeping_nan(x);
    case kOpLeakyReLU: return x >= 0.0f ? x : x * parameter;
    case kOpGeluErf: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case kOpGeluTanh:
      if constexpr (kLibmTanh) {
        const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
        return 0.5f * x * (1.0f + tanhf(inner));
      } else {
        return gelu_tanh_fast(x);
      }
    case kOpSiLU: return x / (1.0f + expf(-x));
    case kOpSigmoid: return 1.0f / (1.0f + expf(-x));
    case kOpTanh:
      if constexpr (kLibmTanh) {
        return tanhf(x);
      } else {
        return tanh_fast(x);
      }
    case kOpScale: return x * parameter;
  }
  return x;
}

template <bool kLibmTanh = false>
__device__ __forceinline__ float apply_epilogue(const DeviceEpilogue& epilogue, float x) {
  for (int i = 0; i < epilogue.count; ++i) {
    x = apply_op<kLibmTanh>(epilogue.kind[i], epilogue.parameter[i], x);
  }
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
