// float16 / bfloat16 <-> float32 streams (see convert_dtype.hpp). A grid of a few blocks per SM
// striding over the range, one element per step: these run once per call on the model's input
// and output only, which are small next to the network's own traffic.
#include "backends/cuda/convert_dtype.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/launch.hpp"

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

}  // namespace

namespace {

void launch_conversion(void (*kernel)(ConvertParams), const char* name, const void* x, void* y,
                       int64_t count, const DeviceInfo& device, cudaStream_t stream) {
  if (count <= 0) return;
  const unsigned blocks =
      grid_for(count, kThreads, static_cast<long long>(device.sm_count) * kBlocksPerSm);
  launch_kernel(kernel, name, blocks, kThreads, 0, stream, ConvertParams{x, y, count});
}

}  // namespace

void launch_widen(const void* x, HalfFormat format, float* y, int64_t count,
                  const DeviceInfo& device, cudaStream_t stream) {
  const bool binary16 = format == HalfFormat::Binary16;
  launch_conversion(
      binary16 ? widen_kernel<HalfFormat::Binary16> : widen_kernel<HalfFormat::Bfloat16>,
      binary16 ? "widen_kernel<float16>" : "widen_kernel<bfloat16>", x, y, count, device, stream);
}

void launch_narrow(const float* x, void* y, HalfFormat format, int64_t count,
                   const DeviceInfo& device, cudaStream_t stream) {
  const bool binary16 = format == HalfFormat::Binary16;
  launch_conversion(
      binary16 ? narrow_kernel<HalfFormat::Binary16> : narrow_kernel<HalfFormat::Bfloat16>,
      binary16 ? "narrow_kernel<float16>" : "narrow_kernel<bfloat16>", x, y, count, device, stream);
}

}  // namespace fusednn::cuda
