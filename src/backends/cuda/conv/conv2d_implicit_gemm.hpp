// SPDX-License-Identifier: Apache-2.0
// Conv2d as an implicit GEMM on tensor cores, for the convolutions the fused conv + pool kernel
// cannot hold on chip (large feature maps, many channels) and for every unfused convolution of a
// reduced-precision model. Per group, the convolution is the product
//   y[pixel][oc] = sum over k of patch[pixel][k] * W[oc][k],   k = (channel, kh, kw),
// with pixel running over batch x out_height x out_width. The patch matrix is never built: each
// block gathers its tile of it from x while the tensor cores consume the previous one, and the
// bias and activation are applied to the accumulators before the only write of y.
//
// The host builds an image (build_conv_gemm_image): a table giving, for each k, its offset in a
// sample's input and its (row, column) step inside the window, then W in the operands' format,
// each row padded with zeros to a whole number of the kernel's K stages. fp32 models run 3xTF32
// split products (each operand split in two tf32 parts, each k-step's products summed apart and
// added with rounding FADDs, which keeps the error well inside the 1e-5 contract);
// tf32, fp16 and bf16 run in that type.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/conv/conv2d.hpp"
#include "backends/cuda/mlp/fused_mlp_tensor_core.hpp"
#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

struct ConvGemmPlan {
  bool usable = false;
  TensorCoreMath math = TensorCoreMath::Tf32x3;
  int32_t k = 0;          // group_in x kernel_h x kernel_w
  int32_t padded_k = 0;   // k rounded up to a whole K stage
  int32_t row_words = 0;  // 32-bit words per W row in the image (padded_k, or padded_k / 2)
  // A 1 x 1 convolution over 1 x 1 images with k a multiple of 4 (a Linear layer): the kernel
  // copies x's rows whole where x is on 16 bytes, instead of gathering through the table.
  bool dense_rows = false;
  const uint32_t* image = nullptr;  // device copy of build_conv_gemm_image's result
};

// K elements one stage of the kernel covers: 16 tf32 values or 32 16-bit values (16 words).
constexpr int kConvGemmStageWords = 16;
// The table's row step for k past the filter: no window row reaches it, since planned inputs
// and paddings are under 16384 rows.
constexpr int32_t kConvGemmNowhere = 0x7fff;

// Whether the kernel takes `geometry` (the Conv2dArgs' window, channels and sizes; its pointers
// and batch are ignored) in `math` on `device`: compute capability 8.0 or newer, offsets within
// a sample that fit 32 bits, input heights and paddings under 16384. Fills `plan` (not its image)
// when it does.
bool plan_conv_gemm(const Conv2dArgs& geometry, TensorCoreMath math, const DeviceInfo& device,
                    ConvGemmPlan* plan);

// The image the kernel reads, in 32-bit words: padded_k table entries of two words
// {offset of (channel, kh x dilation, kw x dilation) in a group's input, (kh x dilation) << 16 |
// kw x dilation} (past k: a row step of kConvGemmNowhere, which leaves every input), then
// out_channels rows of row_words words (fp32 bits for 3xTF32, rounded to tf32 for tf32, two
// 16-bit values per word, the lower k in the low half, for fp16 and bf16; zeros past k).
// `weight` is PyTorch's [out_channels][in_channels / groups][kernel_h][kernel_w].
std::vector<uint32_t> build_conv_gemm_image(const ConvGemmPlan& plan, const Conv2dArgs& geometry,
                                            const float* weight);

// Sets the shared-memory limit of the kernels `plan` may launch (once per process is enough; the
// backend calls it at load). False where the device cannot give it.
bool prepare_conv2d_implicit_gemm(const ConvGemmPlan& plan, const DeviceInfo& device);

// y = epilogue(conv(x) + bias) for args.batch samples; args.weight is unused (the plan's image
// holds W).
void launch_conv2d_implicit_gemm(const ConvGemmPlan& plan, const Conv2dArgs& args,
                                 cudaStream_t stream);

}  // namespace fusednn::cuda
