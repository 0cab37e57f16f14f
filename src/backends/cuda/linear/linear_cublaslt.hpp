// SPDX-License-Identifier: Apache-2.0
// Linear through cuBLASLt with a fused epilogue: y[rows][out] = act(x[rows][in] * W^T + bias),
// W as PyTorch stores it ([out][in], row-major). The backend runs here the Linear steps the fused
// MLP kernel does not take: a lone layer wider than kFusedMlpMaxWidth, or one whose input is too
// wide for any of its tiles. cuBLASLt's heuristic picks the tile shape for this device and shape.
//
// Exact fp32 by default: CUBLAS_COMPUTE_32F with an fp32 scale, so results agree with the CPU
// backend to 1e-5 relative (the NVIDIA_TF32_OVERRIDE environment variable is the user's to leave
// unset). A tf32 model asks for the tf32 compute type on the same fp32 data. fp16 and bf16 models
// give W and x in that 16-bit type (the backend keeps a 16-bit copy of W and narrows x first):
// cuBLASLt then reads half the bytes and runs its native 16-bit kernels, accumulating in fp32 and
// writing y, with the bias and activation, in fp32; or, where y is the caller's 16-bit model
// output of the operands' type, in that type: the fp32 sum plus the fp32 bias, through the
// activation, rounded once to nearest even as it is stored (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE
// asks for the fp32 bias, which cuBLASLt documents for fp8 products only). Where cuBLASLt has no
// algorithm for that, a 16-bit copy of the bias (its documented type for a 16-bit D), when the
// backend gives one, is added instead; failing both, the choice says why and the backend writes
// fp32 and narrows after.
//
// Row-major data through a column-major library: a row-major [r][c] matrix is the column-major
// c x r matrix with leading dimension c. With m = out, n = rows, k = in, cuBLASLt computes
//   D (out x rows, ld out) = op(A) * B + bias,  op(A) = A^T,
//   A = W read as (in x out, ld in),  B = x read as (in x rows, ld in),  D = y,
// and the bias (one value per row of D, i.e. per output feature) is broadcast over the rows of y.
//
// Query, then run: the matmul descriptors and W's layout are built at load; the first call for
// a row count (pointer alignment and y's type) asks cublasLtMatmulAlgoGetHeuristic for an
// algorithm within the context's workspace and caches the answer behind a mutex (contexts run on
// several threads at once); run() then only queues cublasLtMatmul, which allocates nothing and
// never synchronises, so it is captured into CUDA graphs like a kernel launch. When the heuristic
// offers nothing, the choice says why and the backend runs the tiled GEMM (linear.cu) instead.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "backends/cuda/platform/device_info.hpp"
#include "common/elementwise_op.hpp"

namespace fusednn::cuda {

// The activation cuBLASLt applies after the bias, in its epilogue.
enum class CublasLtActivation { None, ReLU, GeluTanh };

// cuBLASLt's GELU epilogues compute the tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x +
// 0.044715 x^3))): PyTorch's _addmm_activation relies on it for GELU(approximate="tanh") on CUDA
// (pytorch/pytorch#104061). So they stand in for GeluTanh only; GeluErf runs as an in-place
// elementwise pass after a BIAS epilogue. The cuBLASLt internal test measures the epilogue against
// the CPU formula; should its tanh be less accurate than the 1e-5 the tests hold, set this to
// false and GeluTanh runs as a pass too.
constexpr bool kCublasLtFusesGeluTanh = true;

// The activation cuBLASLt can fuse from the front of `epilogue` (None when the first op is
// anything else); the ops after it, or all of them for None, run as elementwise passes.
CublasLtActivation cublaslt_activation(const Epilogue& epilogue);
// 1 when cublaslt_activation() fuses the first op, else 0.
inline size_t cublaslt_fused_ops(CublasLtActivation activation) {
  return activation == CublasLtActivation::None ? 0 : 1;
}

// The cuBLASLt workspace each execution context sets aside when its plan has cuBLASLt steps:
// NVIDIA's recommended size (cuBLAS documentation, cublasSetWorkspace): 32 MiB on Hopper and newer
// (compute capability 9.0+), whose kernels use it for split-K and stream-K partial sums, and
// 4 MiB on earlier GPUs. An algorithm needing more is simply not offered by the heuristic.
size_t recommended_cublaslt_workspace_bytes(const DeviceInfo& device);

// The cuBLASLt library handle of one backend, created with the model's device current and
// destroyed with it current. One handle is shared by every context: cublasLtMatmul takes the
// stream and workspace per call and the handle holds no per-call state.
class CublasLtHandle {
 public:
  CublasLtHandle();  // throws FDNN_STATUS_DEVICE_ERROR (or OUT_OF_MEMORY) when cuBLASLt fails
  ~CublasLtHandle();
  CublasLtHandle(const CublasLtHandle&) = delete;
  CublasLtHandle& operator=(const CublasLtHandle&) = delete;
  cublasLtHandle_t get() const { return handle_; }

 private:
  cublasLtHandle_t handle_ = nullptr;
};

// One Linear step on cuBLASLt: its descriptors (built at load) and the algorithms chosen so far.
class CublasLtLinear {
 public:
  // What calls with one row count, pointer alignment and y type run: a cuBLASLt algorithm, or
  // the reason there is none (the caller then runs the tiled GEMM, or for a 16-bit y writes fp32
  // and narrows it after). Immutable once made.
  struct Choice {
    bool usable = false;
    std::string reason;                  // why cuBLASLt is not used; empty when usable
    cudaDataType_t output = CUDA_R_32F;  // y's type: CUDA_R_32F, or the operands' 16-bit type
    bool bias_16_bit = false;  // a 16-bit y with the 16-bit copy of the bias, not the fp32 one
    cublasLtMatrixLayoutOpaque_t x_layout{};
    cublasLtMatrixLayoutOpaque_t y_layout{};
    cublasLtMatmulAlgo_t algo{};
    size_t algorithm_workspace_bytes = 0;  // what the algorithm uses, at most the context's
  };

  // weight: [out][in] on the device, in the operands' type; bias: [out] fp32, or null; both must
  // outlive this object. workspace_bytes: the workspace every run() is given. Throws
  // FDNN_STATUS_DEVICE_ERROR when cuBLASLt refuses the descriptors.
  // compute: CUBLAS_COMPUTE_32F (exact fp32, the default) or, for a reduced model precision on
  // fp32 operands, CUBLAS_COMPUTE_32F_FAST_TF32 / _FAST_16F / _FAST_16BF (tensor-core products
  // in that format, fp32 accumulation).
  // operands: the type of W and x, CUDA_R_32F, or CUDA_R_16F / CUDA_R_16BF (with
  // CUBLAS_COMPUTE_32F: fp32 accumulation). The bias is fp32 either way, and y too unless a
  // choice is made for a 16-bit y (choose()'s `output`). half_bias: the bias in the operands'
  // 16-bit type, on 16 bytes, or null; used only for a 16-bit y where cuBLASLt takes no fp32
  // bias with it; must outlive this object.
  CublasLtLinear(cublasLtHandle_t handle, int32_t in, int32_t out, CublasLtActivation activation,
                 const void* weight, const float* bias, size_t workspace_bytes,
                 cublasComputeType_t compute = CUBLAS_COMPUTE_32F,
                 cudaDataType_t operands = CUDA_R_32F, const void* half_bias = nullptr);
  CublasLtLinear(const CublasLtLinear&) = delete;
  CublasLtLinear& operator=(const CublasLtLinear&) = delete;

  // The choice for y[rows] = f(x[rows]) at these addresses (only their alignment matters), y of
  // type `output` (CUDA_R_32F, or the operands' own 16-bit type; any other is a choice refused
  // with its reason): made on the first call for a row count, alignment and output type, then
  // cached. Thread-safe; never throws for a missing algorithm (that is a choice with a reason).
  const Choice& choose(int64_t rows, const void* x, const void* y,
                       cudaDataType_t output = CUDA_R_32F) const;

  // Queues the product on `stream`; `choice` must be usable and made for these rows, alignments
  // and y's type (choice.output), x in the operands' type, `workspace` must hold
  // workspace_bytes. Allocates nothing, never waits. Throws FDNN_STATUS_DEVICE_ERROR naming
  // cublasLtMatmul when cuBLASLt refuses the call.
  void run(const Choice& choice, const void* x, void* y, void* workspace,
           cudaStream_t stream) const;

  int32_t in() const { return in_; }
  int32_t out() const { return out_; }
  CublasLtActivation activation() const { return activation_; }
  cudaDataType_t operands() const { return operands_; }
  cublasLtEpilogue_t epilogue() const { return epilogue_; }
  size_t workspace_bytes() const { return workspace_bytes_; }
  // "GELU_BIAS" etc., for messages and tests.
  const char* epilogue_name() const;

  // For tests: later choices (for row counts not chosen yet) refuse cuBLASLt, so the backend's
  // fallback runs; and how many matmuls run() has queued.
  void refuse_for_testing() { refused_for_testing_.store(true); }
  int64_t matmuls_queued() const { return matmuls_queued_.load(std::memory_order_relaxed); }

 private:
  // rows, x alignment, y alignment, y's type
  using Key = std::tuple<int64_t, uint32_t, uint32_t, int32_t>;
  void decide(int64_t rows, uint32_t x_alignment, uint32_t y_alignment, Choice& choice) const;

  cublasLtHandle_t handle_;
  int32_t in_;
  int32_t out_;
  CublasLtActivation activation_;
  cublasLtEpilogue_t epilogue_;
  cudaDataType_t operands_;
  const void* weight_;
  const float* bias_;
  size_t workspace_bytes_;
  // Written at construction only; cuBLASLt takes descriptors through non-const pointers but only
  // reads them in cublasLtMatmul and cublasLtMatmulAlgoGetHeuristic.
  cublasLtMatmulDescOpaque_t matmul_{};
  // The same product for a 16-bit y (16-bit operands only), its bias declared fp32; where
  // cuBLASLt refused that declaration, half_output_refusal_ says so and only the 16-bit bias is
  // tried. half_bias_matmul_: with the 16-bit copy of the bias (has_half_bias_).
  cublasLtMatmulDescOpaque_t half_output_matmul_{};
  std::string half_output_refusal_;
  cublasLtMatmulDescOpaque_t half_bias_matmul_{};
  bool has_half_bias_ = false;
  cublasLtMatrixLayoutOpaque_t weight_layout_{};

  std::atomic<bool> refused_for_testing_{false};
  mutable std::atomic<int64_t> matmuls_queued_{0};
  mutable std::mutex mutex_;  // guards choices_; a Choice, once inserted, never moves or changes
  mutable std::map<Key, std::unique_ptr<Choice>> choices_;
};

}  // namespace fusednn::cuda
