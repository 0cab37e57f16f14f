// SPDX-License-Identifier: Apache-2.0
// float16 / bfloat16 <-> float32 streams (see convert_dtype.hpp). A grid of a few blocks per SM
// striding over the range, one element per step, or 8 where narrowing between 16-byte-aligned
// buffers. They run once per call on the model's input and output, and in fp16 and bf16 models
// on the input of each cuBLASLt Linear (cuda_backend.cpp).
#include "backends/cuda/elementwise/convert_dtype.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/platform/launch.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 4;

struct ConvertParams {
  const void* x;
  void* y;
  int64_t count;
};

template <HalfFormat kFormat>
__global__ void __launch_bounds__(kThreads) widen_kernel(ConvertParams p) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.count;
       i += stride) {
    float value;
    if constexpr (kFormat == HalfFormat::Binary16) {
      value = __half2float(static_cast<const __half*>(p.x)[i]);
    } else {
      value = __bfloat162float(static_cast<const __nv_bfloat16*>(p.x)[i]);
    }
    static_cast<float*>(p.y)[i] = value;
  }
}

template <HalfFormat kFormat>
__global__ void __launch_bounds__(kThreads) narrow_kernel(ConvertParams p) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.count;
       i += stride) {
    const float value = static_cast<const float*>(p.x)[i];
    if constexpr (kFormat == HalfFormat::Binary16) {
      static_cast<__half*>(p.y)[i] = __float2half_rn(value);
    } else {
      static_cast<__nv_bfloat16*>(p.y)[i] = __float2bfloat16_rn(value);
    }
  }
}

// Two values as one 32-bit word of the 16-bit format, a in the low half (the first in memory);
// each rounded to nearest even, as narrow_kernel rounds them.
template <HalfFormat kFormat>
__device__ __forceinline__ uint32_t narrow_pair(float a, float b) {
  if constexpr (kFormat == HalfFormat::Binary16) {
    const __half2 pair = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&pair);
  } else {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&pair);
  }
}

// narrow_kernel for x and y on 16 bytes: 8 values per step, two 16-byte loads and one 16-byte
// store, then the last count % 8 one by one. Four times the bytes in flight per thread: the
// scalar form, one 4-byte load at a time, stays far below the copy's rate on long inputs (the
// 16-bit cuBLASLt path narrows 3.1 M values per call at batch 4096 of a 768-wide layer).
template <HalfFormat kFormat>
__global__ void __launch_bounds__(kThreads) narrow_vector_kernel(ConvertParams p) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t groups = p.count / 8;
  const auto* x = static_cast<const float4*>(p.x);
  auto* y = static_cast<uint4*>(p.y);
  for (int64_t g = first; g < groups; g += stride) {
    const float4 a = x[2 * g];
    const float4 b = x[2 * g + 1];
    y[g] = make_uint4(narrow_pair<kFormat>(a.x, a.y), narrow_pair<kFormat>(a.z, a.w),
                      narrow_pair<kFormat>(b.x, b.y), narrow_pair<kFormat>(b.z, b.w));
  }
  for (int64_t i = groups * 8 + first; i < p.count; i += stride) {
    const float value = static_cast<const float*>(p.x)[i];
    if constexpr (kFormat == HalfFormat::Binary16) {
      static_cast<__half*>(p.y)[i] = __float2half_rn(value);
    } else {
      static_cast<__nv_bfloat16*>(p.y)[i] = __float2bfloat16_rn(value);
    }
  }
}

}  // namespace

namespace {

// values_per_thread: what one thread converts per step, for sizing the grid.
void launch_conversion(void (*kernel)(ConvertParams), const char* name, const void* x, void* y,
                       int64_t count, int values_per_thread, const DeviceInfo& device,
                       cudaStream_t stream) {
  if (count <= 0) return;
  const unsigned blocks = grid_for((count + values_per_thread - 1) / values_per_thread, kThreads,
                                   static_cast<long long>(device.sm_count) * kBlocksPerSm);
  launch_kernel(kernel, name, blocks, kThreads, 0, stream, ConvertParams{x, y, count});
}

}  // namespace

void launch_widen(const void* x, HalfFormat format, float* y, int64_t count,
                  const DeviceInfo& device, cudaStream_t stream) {
  const bool binary16 = format == HalfFormat::Binary16;
  launch_conversion(
      binary16 ? widen_kernel<HalfFormat::Binary16> : widen_kernel<HalfFormat::Bfloat16>,
      binary16 ? "widen_kernel<float16>" : "widen_kernel<bfloat16>", x, y, count, 1, device,
      stream);
}

void launch_narrow(const float* x, void* y, HalfFormat format, int64_t count,
                   const DeviceInfo& device, cudaStream_t stream) {
  const bool binary16 = format == HalfFormat::Binary16;
  // 16-byte alignment of both sides, which is what a captured graph's alignment class tracks
  // (cuda_context.cpp), so a graph never replays the vector form on narrower buffers.
  if (reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0) {
    launch_conversion(binary16 ? narrow_vector_kernel<HalfFormat::Binary16>
                               : narrow_vector_kernel<HalfFormat::Bfloat16>,
                      binary16 ? "narrow_vector_kernel<float16>" : "narrow_vector_kernel<bfloat16>",
                      x, y, count, 8, device, stream);
    return;
  }
  launch_conversion(
      binary16 ? narrow_kernel<HalfFormat::Binary16> : narrow_kernel<HalfFormat::Bfloat16>,
      binary16 ? "narrow_kernel<float16>" : "narrow_kernel<bfloat16>", x, y, count, 1, device,
      stream);
}

}  // namespace fusednn::cuda
