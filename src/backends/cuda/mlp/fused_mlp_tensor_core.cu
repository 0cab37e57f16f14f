// SPDX-License-Identifier: Apache-2.0
// The fused MLP on tensor cores, SharedTiles form, and the entry points that pick a form (see
// fused_mlp_tensor_core.hpp).
//
// Napkin math, seed MLP 100-128-64-10 at batch 262144: 11.3 GFLOP and 115 MB of fp32 input and
// output. bf16 mma.sync at about half the dense peak does the arithmetic in about the time the
// input stream takes, so with the next tile's input in flight during each tile the kernel is
// bounded by the input stream. Tf32x3 triples the mma work at the lower tf32 rate, which still
// beats the fp32 FMA pipes.
//
// Fragment layouts (PTX ISA, mma.m16n8k8 tf32 and mma.m16n8k16 f16/bf16; g = lane / 4,
// t = lane % 4): one k-step is 8 32-bit words of a row in both cases (8 tf32 or 16 halves), and
// A's registers are the words (row g, t), (row g+8, t), (row g, t+4), (row g+8, t+4); B's are
// (column g, t) and (column g, t+4) of W stored [out][in]; C's are (row g, columns 2t, 2t+1)
// and (row g+8, the same). Row strides of 4 mod 8 words make those loads conflict-free.
#include "backends/cuda/mlp/fused_mlp_tensor_core.hpp"
#include "backends/cuda/mlp/fused_mlp_tensor_core_registers.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cuda/device/epilogue.cuh"
#include "backends/cuda/mlp/tensor_core_mma.cuh"
#include "backends/cuda/platform/launch.hpp"
#include "common/error.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxFragsPerPass = 8;  // 8-column tiles one warp accumulates at once (64 floats)

struct KernelParams {
  const float* x;
  float* y;
  const uint4* image;
  int64_t rows;
  int32_t tile_rows;
  int32_t layer_count;
  int32_t input_width;
  int32_t vector_input;   // 1: rows start on 16 bytes (16-byte copies), 0: 4-byte copies
  uint32_t image_chunks;  // 16-byte chunks
  uint32_t staging_offset[2];
  int32_t staging_stride;
  uint32_t odd_offset;
  uint32_t even_offset;
  TensorCoreMlpLayer layers[kFusedMlpMaxLayers];
};

// A fragment of 16 rows for one k-step, as `kMath` wants it. For Tf32x3 `small` receives the
// remainders. Sources are fp32 words (staging, or any activation in the tf32 forms) or packed
// halves (activations in the half forms).
template <TensorCoreMath kMath, bool kFromStaging>
__device__ __forceinline__ void load_a(const uint32_t* base, int stride, int k_step, int width,
                                       int g, int t, uint32_t (&big)[4], uint32_t (&small)[4]) {
  const uint32_t* row0 = base + g * stride;
  const uint32_t* row8 = row0 + 8 * stride;
  if constexpr (is_half(kMath)) {
    if constexpr (kFromStaging) {
      // fp32 pairs (k = 2t, 2t+1 and 2t+8, 2t+9 of this step) converted to packed halves.
      const int k = k_step * 16 + 2 * t;
      const float* f0 = reinterpret_cast<const float*>(row0);
      const float* f8 = reinterpret_cast<const float*>(row8);
      float v[8];
      if ((k_step + 1) * 16 <= width) {
        const float2 p0 = *reinterpret_cast<const float2*>(f0 + k);
        const float2 p1 = *reinterpret_cast<const float2*>(f8 + k);
        const float2 p2 = *reinterpret_cast<const float2*>(f0 + k + 8);
        const float2 p3 = *reinterpret_cast<const float2*>(f8 + k + 8);
        v[0] = p0.x, v[1] = p0.y, v[2] = p1.x, v[3] = p1.y;
        v[4] = p2.x, v[5] = p2.y, v[6] = p3.x, v[7] = p3.y;
      } else {  // the step that crosses the input width: columns past it are zeros
        const int ks[8] = {k, k + 1, k, k + 1, k + 8, k + 9, k + 8, k + 9};
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float* row = (i & 2) ? f8 : f0;
          v[i] = ks[i] < width ? row[ks[i]] : 0.0f;
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) big[i] = pack_pair<kMath>(v[2 * i], v[2 * i + 1]);
    } else {
      const int w = k_step * 8 + t;
      big[0] = row0[w];
      big[1] = row8[w];
      big[2] = row0[w + 4];
      big[3] = row8[w + 4];
    }
  } else {
    const int w = k_step * 8 + t;
    float v[4];
    if (!kFromStaging || (k_step + 1) * 8 <= width) {
      v[0] = __uint_as_float(row0[w]);
      v[1] = __uint_as_float(row8[w]);
      v[2] = __uint_as_float(row0[w + 4]);
      v[3] = __uint_as_float(row8[w + 4]);
    } else {
      v[0] = w < width ? __uint_as_float(row0[w]) : 0.0f;
      v[1] = w < width ? __uint_as_float(row8[w]) : 0.0f;
      v[2] = w + 4 < width ? __uint_as_float(row0[w + 4]) : 0.0f;
      v[3] = w + 4 < width ? __uint_as_float(row8[w + 4]) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      big[i] = to_tf32(v[i]);
      if constexpr (kMath == TensorCoreMath::Tf32x3) {
        small[i] = tf32_remainder(v[i], big[i]);
      }
    }
  }
}

template <TensorCoreMath kMath, bool kFromStaging>
__device__ __forceinline__ void run_layer(const KernelParams& p, int l, char* smem,
                                          uint32_t* staging, const uint32_t* input,
                                          int input_stride, int64_t row0, int valid_rows) {
  const TensorCoreMlpLayer& layer = p.layers[l];
  const bool last = l + 1 == p.layer_count;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int warps_m = p.tile_rows / 32;
  const int warps_n = kWarps / warps_m;
  const int wm = warp % warps_m, wn = warp / warps_m;

  const uint32_t* weights = reinterpret_cast<const uint32_t*>(smem + layer.weight_offset);
  const float* bias = reinterpret_cast<const float*>(smem + layer.bias_offset);
  uint32_t* next = nullptr;
  int next_stride = 0;
  if (!last) {
    const TensorCoreMlpLayer& following = p.layers[l + 1];
    // The next layer's input: the odd buffer, the even buffer, or this tile's staging buffer.
    next = reinterpret_cast<uint32_t*>(
        smem + (following.input_buffer == 1 ? p.odd_offset : p.even_offset));
    if (following.input_buffer == 2 && p.even_offset == 0) next = staging;
    next_stride = following.input_stride;
  }
  const uint32_t* a_base = input + (wm * 32) * input_stride;

  const int per_warp = (layer.n_frags + warps_n - 1) / warps_n;
  const int frag_begin = wn * per_warp;
  const int frag_end = min(layer.n_frags, frag_begin + per_warp);
  for (int f0 = frag_begin; f0 < frag_end; f0 += kMaxFragsPerPass) {
    const int count = min(kMaxFragsPerPass, frag_end - f0);
    float acc[2][kMaxFragsPerPass][4];
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int j = 0; j < kMaxFragsPerPass; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[m][j][i] = 0.0f;

    for (int k_step = 0; k_step < layer.k_steps; ++k_step) {
      uint32_t a_big[2][4], a_small[2][4];
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        load_a<kMath, kFromStaging>(a_base + m * 16 * input_stride, input_stride, k_step, layer.in,
                                    g, t, a_big[m], a_small[m]);
      }
#pragma unroll
      for (int j = 0; j < kMaxFragsPerPass; ++j) {
        if (j < count) {
          const uint32_t* w = weights + ((f0 + j) * 8 + g) * layer.weight_stride + k_step * 8 + t;
          uint32_t b0 = w[0], b1 = w[4];
          if constexpr (is_half(kMath)) {
            mma<kMath>(acc[0][j], a_big[0], b0, b1);
            mma<kMath>(acc[1][j], a_big[1], b0, b1);
          } else {
            const float w0 = __uint_as_float(b0), w1 = __uint_as_float(b1);
            b0 = to_tf32(w0);
            b1 = to_tf32(w1);
            if constexpr (kMath == TensorCoreMath::Tf32x3) {
              // Small terms first so that they are not lost below the big product's rounding.
              const uint32_t s0 = tf32_remainder(w0, b0);
              const uint32_t s1 = tf32_remainder(w1, b1);
              mma<kMath>(acc[0][j], a_small[0], b0, b1);
              mma<kMath>(acc[1][j], a_small[1], b0, b1);
              mma<kMath>(acc[0][j], a_big[0], s0, s1);
              mma<kMath>(acc[1][j], a_big[1], s0, s1);
            }
            mma<kMath>(acc[0][j], a_big[0], b0, b1);
            mma<kMath>(acc[1][j], a_big[1], b0, b1);
          }
        }
      }
    }

    // Bias and epilogue; the last layer writes y, the others the next layer's input (zeros in
    // the padding columns, which the next layer's k-steps read).
#pragma unroll
    for (int j = 0; j < kMaxFragsPerPass; ++j) {
      if (j < count) {
        const int col = (f0 + j) * 8 + 2 * t;
        const float2 b = *reinterpret_cast<const float2*>(bias + col);
#pragma unroll
        for (int m = 0; m < 2; ++m) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int r = wm * 32 + m * 16 + g + half * 8;
            float v0 = apply_epilogue(layer.epilogue, acc[m][j][2 * half] + b.x);
            float v1 = apply_epilogue(layer.epilogue, acc[m][j][2 * half + 1] + b.y);
            if (col >= layer.out) v0 = 0.0f;
            if (col + 1 >= layer.out) v1 = 0.0f;
            if (last) {
              if (r < valid_rows) {
                float* out_row = p.y + (row0 + r) * layer.out;
                if (col < layer.out) out_row[col] = v0;
                if (col + 1 < layer.out) out_row[col + 1] = v1;
              }
            } else if constexpr (is_half(kMath)) {
              next[r * next_stride + (col >> 1)] = pack_pair<kMath>(v0, v1);
            } else {
              *reinterpret_cast<float2*>(next + r * next_stride + col) = make_float2(v0, v1);
            }
          }
        }
      }
    }
  }
}

template <TensorCoreMath kMath>
__global__ void __launch_bounds__(kThreads)
    tensor_core_mlp_kernel(const __grid_constant__ KernelParams p) {
  extern __shared__ uint4 shared_memory[];
  char* const smem = reinterpret_cast<char*>(shared_memory);
  const int tid = threadIdx.x;
  const int64_t tiles = (p.rows + p.tile_rows - 1) / p.tile_rows;

  // The weights, once per block.
  for (uint32_t i = tid; i < p.image_chunks; i += kThreads) {
    __pipeline_memcpy_async(shared_memory + i, p.image + i, 16);
  }
  __pipeline_commit();

  // A tile's input rows into a staging buffer; rows past the batch are zero-filled.
  auto issue_input = [&](int64_t tile, int buffer) {
    const int64_t first = tile * p.tile_rows;
    float* staging = reinterpret_cast<float*>(smem + p.staging_offset[buffer]);
    const int width = p.input_width;
    if (p.vector_input) {
      const int chunks = width / 4;
      for (int i = tid; i < p.tile_rows * chunks; i += kThreads) {
        const int r = i / chunks;
        const int c = i - r * chunks;
        const bool valid = first + r < p.rows;
        const float* source = valid ? p.x + (first + r) * width + 4 * c : p.x;
        __pipeline_memcpy_async(staging + r * p.staging_stride + 4 * c, source, 16, valid ? 0 : 16);
      }
    } else {
      for (int i = tid; i < p.tile_rows * width; i += kThreads) {
        const int r = i / width;
        const int c = i - r * width;
        const bool valid = first + r < p.rows;
        const float* source = valid ? p.x + (first + r) * width + c : p.x;
        __pipeline_memcpy_async(staging + r * p.staging_stride + c, source, 4, valid ? 0 : 4);
      }
    }
  };

  int64_t tile = blockIdx.x;
  if (tile < tiles) issue_input(tile, 0);
  __pipeline_commit();
  int buffer = 0;
  for (; tile < tiles; tile += gridDim.x) {
    const int64_t upcoming = tile + gridDim.x;
    if (upcoming < tiles) issue_input(upcoming, buffer ^ 1);
    __pipeline_commit();
    __pipeline_wait_prior(1);  // the weights and this tile's input have landed
    __syncthreads();

    const int64_t row0 = tile * p.tile_rows;
    const int valid_rows = static_cast<int>(min(static_cast<int64_t>(p.tile_rows), p.rows - row0));
    uint32_t* const staging = reinterpret_cast<uint32_t*>(smem + p.staging_offset[buffer]);
    run_layer<kMath, true>(p, 0, smem, staging, staging, p.staging_stride, row0, valid_rows);
    __syncthreads();
    for (int l = 1; l < p.layer_count; ++l) {
      const TensorCoreMlpLayer& layer = p.layers[l];
      const uint32_t* input =
          layer.input_buffer == 1 ? reinterpret_cast<const uint32_t*>(smem + p.odd_offset)
          : p.even_offset == 0    ? staging
                                  : reinterpret_cast<const uint32_t*>(smem + p.even_offset);
      run_layer<kMath, false>(p, l, smem, staging, input, layer.input_stride, row0, valid_rows);
      __syncthreads();
    }
    buffer ^= 1;
  }
  __pipeline_wait_prior(0);  // leave no copy in flight (a block with no tile still issued one)
}

using KernelFunction = void (*)(KernelParams);

KernelFunction kernel_for(TensorCoreMath math) {
  switch (math) {
    case TensorCoreMath::Tf32: return tensor_core_mlp_kernel<TensorCoreMath::Tf32>;
    case TensorCoreMath::Tf32x3: return tensor_core_mlp_kernel<TensorCoreMath::Tf32x3>;
    case TensorCoreMath::Fp16: return tensor_core_mlp_kernel<TensorCoreMath::Fp16>;
    case TensorCoreMath::Bf16: break;
  }
  return tensor_core_mlp_kernel<TensorCoreMath::Bf16>;
}

int round_up(int value, int multiple) { return (value + multiple - 1) / multiple * multiple; }

// The smallest stride >= words with stride % modulus == remainder.
int skewed_stride(int words, int modulus, int remainder) {
  int stride = words;
  while (stride % modulus != remainder) ++stride;
  return stride;
}

}  // namespace

const char* tensor_core_math_name(TensorCoreMath math) {
  switch (math) {
    case TensorCoreMath::Tf32: return "tf32";
    case TensorCoreMath::Tf32x3: return "3xtf32";
    case TensorCoreMath::Fp16: return "fp16";
    case TensorCoreMath::Bf16: return "bf16";
  }
  return "?";
}

namespace {

bool plan_shared_tile_mlp(const std::vector<FusedMlpLayerDesc>& layers, TensorCoreMath math,
                          const DeviceInfo& device, TensorCoreMlpPlan* plan) {
  if (device.major < 8) return false;
  if (layers.empty() || layers.size() > static_cast<size_t>(kFusedMlpMaxLayers)) return false;
  const bool half = is_half(math);
  const int k_step_elements = half ? 16 : 8;
  TensorCoreMlpPlan result;
  result.math = math;
  result.form = TensorCoreForm::SharedTiles;
  result.layer_count = static_cast<int32_t>(layers.size());
  uint32_t offset = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    const FusedMlpLayerDesc& desc = layers[l];
    if (desc.in < 1 || desc.out < 1 || desc.out > kFusedMlpMaxWidth) return false;
    if (l > 0 && desc.in != layers[l - 1].out) return false;
    if (l == 0 && desc.in > 1024) return false;  // the staged input tile must stay small
    if (l > 0 && desc.in > kFusedMlpMaxWidth) return false;
    const bool last = l + 1 == layers.size();
    TensorCoreMlpLayer& layer = result.layers[l];
    layer.in = desc.in;
    layer.out = desc.out;
    layer.epilogue = desc.epilogue;
    layer.k_steps = (desc.in + k_step_elements - 1) / k_step_elements;
    // Every column the next layer's k-steps read is written (zeros past out).
    const int padded_out = round_up(desc.out, last ? 8 : k_step_elements);
    layer.n_frags = padded_out / 8;
    layer.weight_stride = layer.k_steps * 8 + 4;
    layer.input_stride = l == 0 ? 0 : layer.k_steps * 8 + 4;
    layer.input_buffer = l == 0 ? 0 : (l % 2 == 1 ? 1 : 2);
    layer.weight_offset = offset;
    offset += static_cast<uint32_t>(padded_out * layer.weight_stride * 4);
    layer.bias_offset = offset;
    offset += static_cast<uint32_t>(round_up(padded_out * 4, 16));
  }
  result.image_bytes = offset;
  // Staged fp32 rows: 16-byte aligned; conflict-free 4-byte loads (tf32 forms) need a stride of
  // 4 mod 8 words, 8-byte loads (half forms) 8 mod 16.
  result.staging_stride = half ? skewed_stride(round_up(layers[0].in, 4), 16, 8)
                               : skewed_stride(round_up(layers[0].in, 4), 8, 4);
  int odd_stride = 0, even_stride = 0;
  for (int l = 1; l < result.layer_count; ++l) {
    int& stride = (l % 2 == 1) ? odd_stride : even_stride;
    stride = std::max(stride, static_cast<int>(result.layers[l].input_stride));
  }
  const bool even_in_staging = even_stride <= result.staging_stride;
  for (int tile_rows : {128, 64, 32}) {
    const size_t staging = size_t{4} * tile_rows * result.staging_stride;
    const size_t odd = size_t{4} * tile_rows * odd_stride;
    const size_t even = even_in_staging ? 0 : size_t{4} * tile_rows * even_stride;
    const size_t total = result.image_bytes + 2 * staging + odd + even;
    if (total > device.shared_per_block_optin) continue;
    result.tile_rows = tile_rows;
    result.staging_offset[0] = result.image_bytes;
    result.staging_offset[1] = static_cast<uint32_t>(result.image_bytes + staging);
    result.odd_offset = static_cast<uint32_t>(result.image_bytes + 2 * staging);
    result.even_offset = even_in_staging ? 0 : static_cast<uint32_t>(result.odd_offset + odd);
    result.shared_bytes = total;
    break;
  }
  if (result.tile_rows == 0) return false;

  const KernelFunction kernel = kernel_for(math);
  FDNN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(device.shared_per_block_optin)));
  int blocks = 0;
  FDNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads,
                                                                result.shared_bytes));
  if (blocks < 1) return false;
  result.blocks_per_sm = blocks;
  *plan = result;
  return true;
}

std::vector<uint32_t> build_shared_tile_mlp_image(const TensorCoreMlpPlan& plan,
                                                  const std::vector<const float*>& weights,
                                                  const std::vector<const float*>& biases) {
  std::vector<uint32_t> image(plan.image_bytes / 4, 0u);
  const bool half = is_half(plan.math);
  for (int l = 0; l < plan.layer_count; ++l) {
    const TensorCoreMlpLayer& layer = plan.layers[l];
    uint32_t* rows = image.data() + layer.weight_offset / 4;
    for (int n = 0; n < layer.out; ++n) {
      const float* source = weights[l] + static_cast<size_t>(n) * layer.in;
      uint32_t* row = rows + static_cast<size_t>(n) * layer.weight_stride;
      for (int k = 0; k < layer.in; ++k) {
        if (half) {
          const uint32_t bits = tensor_core_half_bits(source[k], plan.math);
          row[k / 2] |= (k % 2 == 0) ? bits : (bits << 16);
        } else {
          std::memcpy(&row[k], &source[k], sizeof(float));
        }
      }
    }
    if (biases[l] != nullptr) {
      std::memcpy(image.data() + layer.bias_offset / 4, biases[l], sizeof(float) * layer.out);
    }
  }
  return image;
}

void launch_shared_tile_mlp(const TensorCoreMlpPlan& plan, const float* x, float* y, int64_t rows,
                            const DeviceInfo& device, cudaStream_t stream) {
  if (rows <= 0) return;
  KernelParams p{};
  p.x = x;
  p.y = y;
  p.image = static_cast<const uint4*>(plan.image);
  p.rows = rows;
  p.tile_rows = plan.tile_rows;
  p.layer_count = plan.layer_count;
  p.input_width = plan.layers[0].in;
  p.vector_input = (plan.layers[0].in % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0) ? 1 : 0;
  p.image_chunks = plan.image_bytes / 16;
  p.staging_offset[0] = plan.staging_offset[0];
  p.staging_offset[1] = plan.staging_offset[1];
  p.staging_stride = plan.staging_stride;
  p.odd_offset = plan.odd_offset;
  p.even_offset = plan.even_offset;
  for (int l = 0; l < plan.layer_count; ++l) p.layers[l] = plan.layers[l];
  const int64_t tiles = (rows + plan.tile_rows - 1) / plan.tile_rows;
  const int64_t resident = int64_t{device.sm_count} * plan.blocks_per_sm;
  const unsigned grid = static_cast<unsigned>(std::min(tiles, resident));
  launch_kernel(kernel_for(plan.math), "tensor_core_mlp_kernel", dim3(grid), dim3(kThreads),
                plan.shared_bytes, stream, p);
}

}  // namespace

uint16_t tensor_core_half_bits(float value, TensorCoreMath math) {
  uint16_t bits;
  if (math == TensorCoreMath::Fp16) {
    const __half h = __float2half_rn(value);
    std::memcpy(&bits, &h, sizeof bits);
  } else {
    const __nv_bfloat16 h = __float2bfloat16_rn(value);
    std::memcpy(&bits, &h, sizeof bits);
  }
  return bits;
}

bool plan_tensor_core_mlp(const std::vector<FusedMlpLayerDesc>& layers, TensorCoreMath math,
                          const DeviceInfo& device, TensorCoreMlpPlan* plan,
                          const TensorCoreRowTail& tail) {
  const bool shared_only = device.overrides.shared_tile_tensor_cores_only;
  if (!shared_only && plan_warp_register_mlp(layers, math, device, tail, plan)) {
    if (is_half(math)) {
      plan_warpgroup_mlp(layers, math, device, tail, &plan->warpgroup);
      plan->warpgroup_image_offset = (plan->image_bytes + 15u) / 16u * 16u;
    }
    return true;
  }
  if (tail.kind != RowTailKind::None) return false;
  return plan_shared_tile_mlp(layers, math, device, plan);
}

std::vector<uint32_t> build_tensor_core_mlp_image(const TensorCoreMlpPlan& plan,
                                                  const std::vector<const float*>& weights,
                                                  const std::vector<const float*>& biases,
                                                  const float* gamma, const float* beta) {
  if (plan.form != TensorCoreForm::WarpRegisters) {
    return build_shared_tile_mlp_image(plan, weights, biases);
  }
  std::vector<uint32_t> image = build_warp_register_mlp_image(plan, weights, biases, gamma, beta);
  if (plan.warpgroup.layer_count > 0) {
    image.resize(plan.warpgroup_image_offset / 4, 0u);
    const std::vector<uint32_t> second =
        build_warpgroup_mlp_image(plan.warpgroup, weights, biases, gamma, beta);
    image.insert(image.end(), second.begin(), second.end());
  }
  return image;
}

TensorCoreLaunchForm tensor_core_mlp_launch_form(const TensorCoreMlpPlan& plan, const void* x,
                                                 int64_t rows) {
  if (plan.form != TensorCoreForm::WarpRegisters) return TensorCoreLaunchForm::SharedTiles;
  return warpgroup_mlp_takes(plan.warpgroup, x, rows) ? TensorCoreLaunchForm::Warpgroup
                                                      : TensorCoreLaunchForm::WarpRegisters;
}

bool tensor_core_mlp_takes_16_bit_io(const TensorCoreMlpPlan& plan) {
  return plan.tile_rows > 0 && plan.form == TensorCoreForm::WarpRegisters && is_half(plan.math);
}

bool tensor_core_mlp_writes(const TensorCoreMlpPlan& plan, ElementType output, int64_t rows) {
  if (output == ElementType::Float32) return true;
  if (!tensor_core_mlp_takes_16_bit_io(plan)) return false;
  const bool warpgroup_possible = plan.warpgroup.layer_count > 0 && rows >= plan.warpgroup.min_rows;
  return !warpgroup_possible || warpgroup_mlp_writes(plan.warpgroup, output);
}

void launch_tensor_core_mlp(const TensorCoreMlpPlan& plan, TypedInput x, TypedOutput y,
                            int64_t rows, const DeviceInfo& device, cudaStream_t stream) {
  switch (tensor_core_mlp_launch_form(plan, x.data, rows)) {
    case TensorCoreLaunchForm::Warpgroup:
      launch_warpgroup_mlp(plan.warpgroup,
                           static_cast<const char*>(plan.image) + plan.warpgroup_image_offset, x, y,
                           rows, device, stream);
      break;
    case TensorCoreLaunchForm::WarpRegisters:
      launch_warp_register_mlp(plan, x, y, rows, device, stream);
      break;
    case TensorCoreLaunchForm::SharedTiles:
      if (x.type != ElementType::Float32 || y.type != ElementType::Float32) {
        fail(FDNN_STATUS_INTERNAL_ERROR,
             "the SharedTiles tensor-core MLP reads and writes float32 "
             "only; the backend must widen and narrow around it");
      }
      launch_shared_tile_mlp(plan, static_cast<const float*>(x.data), static_cast<float*>(y.data),
                             rows, device, stream);
      break;
  }
}

}  // namespace fusednn::cuda
