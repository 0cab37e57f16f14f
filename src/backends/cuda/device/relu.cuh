// SPDX-License-Identifier: Apache-2.0
// ReLU as PyTorch has it: max(x, 0) with NaN kept (torch.relu(nan) is nan). fmaxf and PTX's
// plain max.f32 return the other operand for a NaN, which turns a NaN into 0. On sm_80 and later
// max.NaN.f32 propagates NaN in the one instruction fmaxf costs; before, two compares and a select.
#pragma once

__device__ __forceinline__ float relu_keeping_nan(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float y;
  asm("max.NaN.f32 %0, %1, 0f00000000;" : "=f"(y) : "f"(x));
  return y;
#else
  return (x > 0.0f) | (x != x) ? x : 0.0f;
#endif
}
