// The WarpRegisters tensor-core MLP kernel (design, napkin math and fragment bookkeeping in
// fused_mlp_tensor_core_registers.cu), as a template that fused_mlp_tensor_core_registers_*.cu
// instantiate, one file per TensorCoreMath: the instantiations take ptxas minutes each, and one
// file per precision lets a parallel build compile them side by side.
#pragma once

#include <cuda_pipeline.h>

#include "backends/cuda/epilogue.cuh"
#include "backends/cuda/tensor_core_mma.cuh"

namespace fusednn::cuda::warp_registers {

constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = kWarpsPerBlock * 32;
constexpr int kRowsPerWarp = kWarpRegisterTileRows;
constexpr int kTileGroup = 4;  // 8-column tiles multiplied without a branch between them

struct RegisterParams {
  const float* x;
  float* y;
  const uint4* image;
  int64_t rows;
  int64_t tiles;  // of kRowsPerWarp rows
  int32_t layer_count;
  int32_t input_width;
  int32_t vector_input;   // rows start on 16 (half forms) or 8 (tf32 forms) bytes
  int32_t vector_output;  // rows start on 8 bytes
  uint32_t image_chunks;  // 16-byte chunks
  int32_t tail_kind;      // RowTailKind
  float tail_eps;
  uint32_t gamma_offset;  // bytes into shared memory; 0: none (the image starts with weights)
  uint32_t beta_offset;
  TensorCoreMlpLayer layers[kFusedMlpMaxLayers];
};

__host__ __device__ constexpr int step_elements(TensorCoreMath math) { return is_half(math) ? 16 : 8; }

// The first layer's operand fragments from a warp's 16 fp32 input rows (zeros past the batch
// and past the input width).
template <TensorCoreMath kMath, int kSteps>
__device__ __forceinline__ void load_input(const RegisterParams& p, int64_t row_lo, int t,
                                           uint32_t (&act)[kSteps][4]) {
  constexpr int kColumns = is_half(kMath) ? 4 : 2;  // consecutive columns per thread and step
  const int width = p.input_width;
  const int steps = p.layers[0].k_steps;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    if (s >= steps) break;
    const int column = s * step_elements(kMath) + kColumns * t;
    float v[2][kColumns];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = row_lo + 8 * h;
#pragma unroll
      for (int c = 0; c < kColumns; ++c) v[h][c] = 0.0f;
      if (row >= p.rows) continue;
      const float* source = p.x + row * width + column;
      if (p.vector_input && column + kColumns <= width) {
        if constexpr (kColumns == 4) {
          const float4 q = __ldg(reinterpret_cast<const float4*>(source));
          v[h][0] = q.x, v[h][1] = q.y, v[h][2] = q.z, v[h][3] = q.w;
        } else {
          const float2 q = __ldg(reinterpret_cast<const float2*>(source));
          v[h][0] = q.x, v[h][1] = q.y;
        }
      } else {
#pragma unroll
        for (int c = 0; c < kColumns; ++c) {
          if (column + c < width) v[h][c] = __ldg(source + c);
        }
      }
    }
    if constexpr (is_half(kMath)) {
      act[s][0] = pack_pair<kMath>(v[0][0], v[0][1]);
      act[s][1] = pack_pair<kMath>(v[1][0], v[1][1]);
      act[s][2] = pack_pair<kMath>(v[0][2], v[0][3]);
      act[s][3] = pack_pair<kMath>(v[1][2], v[1][3]);
    } else {
      act[s][0] = __float_as_uint(v[0][0]);
      act[s][1] = __float_as_uint(v[1][0]);
      act[s][2] = __float_as_uint(v[0][1]);
      act[s][3] = __float_as_uint(v[1][1]);
    }
  }
}

// acc[n] = act x W^T for every 8-column tile n of the layer.
template <TensorCoreMath kMath, int kSteps, int kTiles>
__device__ __forceinline__ void multiply(const TensorCoreMlpLayer& layer, const uint32_t* weights,
                                         int g, int t, const uint32_t (&act)[kSteps][4],
                                         float (&acc)[kTiles][4]) {
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[n][i] = 0.0f;
  }
  const uint32_t* row = weights + g * layer.weight_stride + 2 * t;
  const int tile_words = 8 * layer.weight_stride;
#pragma unroll
  for (int k = 0; k < kSteps; ++k) {
    if (k >= layer.k_steps) break;
    uint32_t a_big[4];
    [[maybe_unused]] uint32_t a_small[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (is_half(kMath)) {
        a_big[i] = act[k][i];
      } else {
        a_big[i] = to_tf32(__uint_as_float(act[k][i]));
        if constexpr (kMath == TensorCoreMath::Tf32x3) {
          a_small[i] = tf32_remainder(__uint_as_float(act[k][i]), a_big[i]);
        }
      }
    }
    // Tiles in groups of kTileGroup with no branch inside a group, so that the group's weight
    // loads are all in flight before its first mma (a branch per tile serialised each load and
    // its mma: 12 cycles per mma per SM on an H100). Layers are padded to whole groups.
#pragma unroll
    for (int n0 = 0; n0 < kTiles; n0 += kTileGroup) {
      if (n0 >= layer.n_frags) break;
      uint2 b[kTileGroup];
#pragma unroll
      for (int j = 0; j < kTileGroup; ++j) {
        b[j] = *reinterpret_cast<const uint2*>(row + (n0 + j) * tile_words + 8 * k);
      }
#pragma unroll
      for (int j = 0; j < kTileGroup; ++j) {
        if constexpr (kMath == TensorCoreMath::Tf32x3) {
          const uint32_t b0 = to_tf32(__uint_as_float(b[j].x));
          const uint32_t b1 = to_tf32(__uint_as_float(b[j].y));
          const uint32_t s0 = tf32_remainder(__uint_as_float(b[j].x), b0);
          const uint32_t s1 = tf32_remainder(__uint_as_float(b[j].y), b1);
          // Small terms first so that they are not lost below the big product's rounding.
          mma<kMath>(acc[n0 + j], a_small, b0, b1);
          mma<kMath>(acc[n0 + j], a_big, s0, s1);
          mma<kMath>(acc[n0 + j], a_big, b0, b1);
        } else {
          // tf32 weights are rounded to tf32 in the image; half weights are stored as halves.
          mma<kMath>(acc[n0 + j], a_big, b[j].x, b[j].y);
        }
      }
    }
  }
}

// Columns col, col+1 of rows row_lo and row_lo + 8 (v: row_lo's pair, then row_lo + 8's).
__device__ __forceinline__ void store_output(const RegisterParams& p, int out, int64_t row_lo,
                                             int col, const float (&v)[4]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t row = row_lo + 8 * h;
    if (row >= p.rows) continue;
    float* destination = p.y + row * out + col;
    if (p.vector_output && col + 1 < out) {
      *reinterpret_cast<float2*>(destination) = make_float2(v[2 * h], v[2 * h + 1]);
    } else {
      if (col < out) destination[0] = v[2 * h];
      if (col + 1 < out) destination[1] = v[2 * h + 1];
    }
  }
}

// Bias and activation, then the next layer's operand fragments or, for the last layer, the
// output rows. Columns past `out` become zeros, which the next layer's last k-step reads.
template <TensorCoreMath kMath, int kSteps, int kTiles, typename Activation>
__device__ __forceinline__ void finish(const RegisterParams& p, const TensorCoreMlpLayer& layer,
                                       bool last, const float* bias, int64_t row_lo, int t,
                                       const float (&acc)[kTiles][4], uint32_t (&act)[kSteps][4],
                                       Activation activation) {
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    if (n >= layer.out_frags) break;
    const int col = n * 8 + 2 * t;
    const float2 b = *reinterpret_cast<const float2*>(bias + col);
    float v[4] = {activation(acc[n][0] + b.x), activation(acc[n][1] + b.y),
                  activation(acc[n][2] + b.x), activation(acc[n][3] + b.y)};
    if (col >= layer.out) v[0] = v[2] = 0.0f;
    if (col + 1 >= layer.out) v[1] = v[3] = 0.0f;
    if (last) {
      store_output(p, layer.out, row_lo, col, v);
    } else if constexpr (is_half(kMath)) {
      act[n / 2][(n % 2) * 2] = pack_pair<kMath>(v[0], v[1]);
      act[n / 2][(n % 2) * 2 + 1] = pack_pair<kMath>(v[2], v[3]);
    } else {
      act[n][0] = __float_as_uint(v[0]);
      act[n][1] = __float_as_uint(v[2]);
      act[n][2] = __float_as_uint(v[1]);
      act[n][3] = __float_as_uint(v[3]);
    }
  }
}

// The sum (or the max) of the values of row g (h = 0) or g + 8 (h = 1) across the 4 lanes of the
// fragment group, which together hold every column of the row.
__device__ __forceinline__ float group_sum(float value) {
  value += __shfl_xor_sync(0xffffffffu, value, 1);
  return value + __shfl_xor_sync(0xffffffffu, value, 2);
}
__device__ __forceinline__ float group_max(float value) {
  value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 1));
  return fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 2));
}

// The last layer (bias, then ReLU or nothing) followed by the folded Softmax or LayerNorm over
// each output row, with the CPU backend's formulas: exp(x - max) / sum; (x - mean) * rstd
// [* gamma + beta] with the variance around the mean and rstd = 1 / sqrt(variance + eps). An
// activation after the LayerNorm runs as an in-place pass (cuda_backend.cpp): inlining the
// general epilogue here for every value quadrupled this file's compile time.
template <int kTiles>
__device__ __forceinline__ void finish_with_row_op(const RegisterParams& p,
                                                   const TensorCoreMlpLayer& layer,
                                                   const char* smem, const float* bias,
                                                   int64_t row_lo, int t, float (&acc)[kTiles][4]) {
  const bool relu = layer.epilogue.count == 1;  // the planner folds after none or ReLU only
  const int out = layer.out;
  const bool softmax = p.tail_kind == static_cast<int32_t>(RowTailKind::Softmax);
  float first[2] = {softmax ? -INFINITY : 0.0f, softmax ? -INFINITY : 0.0f};
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    if (n >= layer.out_frags) break;
    const int col = n * 8 + 2 * t;
    const float2 b = *reinterpret_cast<const float2*>(bias + col);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc[n][i] += (i & 1) ? b.y : b.x;
      if (relu) acc[n][i] = fmaxf(acc[n][i], 0.0f);
      if (col + (i & 1) < out) {
        first[i / 2] = softmax ? fmaxf(first[i / 2], acc[n][i]) : first[i / 2] + acc[n][i];
      }
    }
  }
  float second[2] = {0.0f, 0.0f};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    first[h] = softmax ? group_max(first[h]) : group_sum(first[h]) / static_cast<float>(out);
  }
  // Softmax: exp(x - max) and its sum; LayerNorm: the squared deviations from the mean.
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    if (n >= layer.out_frags) break;
    const int col = n * 8 + 2 * t;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float centred = acc[n][i] - first[i / 2];
      if (softmax) acc[n][i] = expf(centred);
      if (col + (i & 1) < out) second[i / 2] += softmax ? acc[n][i] : centred * centred;
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    second[h] = group_sum(second[h]);
    if (!softmax) second[h] = 1.0f / sqrtf(second[h] / static_cast<float>(out) + p.tail_eps);
  }
  const float* gamma = reinterpret_cast<const float*>(smem + p.gamma_offset);
  const float* beta = reinterpret_cast<const float*>(smem + p.beta_offset);
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    if (n >= layer.out_frags) break;
    const int col = n * 8 + 2 * t;
    float v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (softmax) {
        v[i] = acc[n][i] / second[i / 2];
      } else {
        const int c = col + (i & 1);
        float y = (acc[n][i] - first[i / 2]) * second[i / 2];
        if (p.gamma_offset != 0) y = y * gamma[c];
        if (p.beta_offset != 0) y = y + beta[c];
        v[i] = y;
      }
    }
    store_output(p, out, row_lo, col, v);
  }
}

// (kThreads, 1): without the minimum, ptxas held the fp16/bf16 width-128 kernel to 128
// registers and spilled; with it, 168 and no spills (CUDA 13.0, sm_90).
template <TensorCoreMath kMath, int kWidth>
__global__ void __launch_bounds__(kThreads, 1)
    warp_register_mlp_kernel(const __grid_constant__ RegisterParams p) {
  constexpr int kSteps = kWidth / step_elements(kMath);
  constexpr int kTiles = kWidth / 8;
  extern __shared__ uint4 shared_memory[];
  for (uint32_t i = threadIdx.x; i < p.image_chunks; i += kThreads) {
    __pipeline_memcpy_async(shared_memory + i, p.image + i, 16);
  }
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();  // the only barrier: from here on each warp runs on its own

  const char* const smem = reinterpret_cast<const char*>(shared_memory);
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int64_t warps = int64_t{gridDim.x} * kWarpsPerBlock;
  for (int64_t tile = int64_t{blockIdx.x} * kWarpsPerBlock + (threadIdx.x >> 5); tile < p.tiles;
       tile += warps) {
    const int64_t row_lo = tile * kRowsPerWarp + g;
    uint32_t act[kSteps][4];
    load_input<kMath, kSteps>(p, row_lo, t, act);
    for (int l = 0; l < p.layer_count; ++l) {
      const TensorCoreMlpLayer& layer = p.layers[l];
      float acc[kTiles][4];
      multiply<kMath>(layer, reinterpret_cast<const uint32_t*>(smem + layer.weight_offset), g, t,
                      act, acc);
      const float* bias = reinterpret_cast<const float*>(smem + layer.bias_offset);
      const bool last = l + 1 == p.layer_count;
      const DeviceEpilogue& epilogue = layer.epilogue;
      const auto general = [&epilogue](float v) { return apply_epilogue(epilogue, v); };
      // The common epilogues without the general one's per-element dispatch.
      if (last && p.tail_kind != static_cast<int32_t>(RowTailKind::None)) {
        finish_with_row_op(p, layer, smem, bias, row_lo, t, acc);
      } else if (epilogue.count == 0) {
        finish<kMath>(p, layer, last, bias, row_lo, t, acc, act, [](float v) { return v; });
      } else if (epilogue.count == 1 && epilogue.kind[0] == kOpReLU) {
        finish<kMath>(p, layer, last, bias, row_lo, t, acc, act,
                      [](float v) { return v > 0.0f ? v : 0.0f; });
      } else {
        finish<kMath>(p, layer, last, bias, row_lo, t, acc, act, general);
      }
    }
  }
}

using KernelFunction = void (*)(RegisterParams);

template <TensorCoreMath kMath>
KernelFunction kernel_for_width(int width_class) {
  if (width_class <= 64) return warp_register_mlp_kernel<kMath, 64>;
  if constexpr (is_half(kMath)) {
    if (width_class > 128) return warp_register_mlp_kernel<kMath, 256>;
  }
  return warp_register_mlp_kernel<kMath, 128>;
}

extern template KernelFunction kernel_for_width<TensorCoreMath::Tf32>(int);
extern template KernelFunction kernel_for_width<TensorCoreMath::Tf32x3>(int);
extern template KernelFunction kernel_for_width<TensorCoreMath::Fp16>(int);
extern template KernelFunction kernel_for_width<TensorCoreMath::Bf16>(int);

}  // namespace fusednn::cuda::warp_registers
