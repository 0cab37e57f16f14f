// SPDX-License-Identifier: Apache-2.0
// Linear through cuBLASLt (see linear_cublaslt.hpp for the layout identity and the life cycle).
//
// Napkin math, a wide layer such as 768 -> 3072 + GELU(tanh):
//   a few dozen rows: the multiply-adds take less time than reading the weights once, so the
//     layer is bound by reading W, which is why the heuristic's split-K algorithms (spreading k
//     over more SMs) matter there.
//   thousands of rows: arithmetic-bound; writing y is small next to the arithmetic, and the fused
//     epilogue saves the read + write pass over y that an unfused bias + GELU would cost.
#include "backends/cuda/linear/linear_cublaslt.hpp"

#include <sstream>
#include <string>

#include "backends/cuda/linear/cublas_check.hpp"
#include "backends/cuda/linear/cublaslt_library.hpp"
#include "backends/cuda/platform/cuda_check.hpp"
#include "common/error.hpp"

namespace fusednn::cuda {
namespace {

// The largest power of two, up to the 256 cuBLASLt assumes by default, dividing the address.
uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 4 && address % alignment != 0) alignment /= 2;
  return alignment;
}

cublasLtEpilogue_t epilogue_for(CublasLtActivation activation, bool has_bias) {
  switch (activation) {
    case CublasLtActivation::ReLU:
      return has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case CublasLtActivation::GeluTanh:
      return has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    case CublasLtActivation::None: break;
  }
  return has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

// The loaded library; the backend creates no cuBLASLt object unless cublaslt_library() succeeded.
const CublasLtLibrary& lt() {
  const CublasLtLibrary* library = cublaslt_library(nullptr);
  if (library == nullptr) {
    std::string reason;
    cublaslt_library(&reason);
    fail(FDNN_STATUS_UNSUPPORTED, reason);
  }
  return *library;
}

// Owns a heuristic preference descriptor for the length of one choice.
class Preference {
 public:
  explicit Preference(cublasStatus_t* status) { *status = lt().preference_create(&pref_); }
  ~Preference() {
    if (pref_ != nullptr) lt().preference_destroy(pref_);
  }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  cublasLtMatmulPreference_t get() const { return pref_; }

 private:
  cublasLtMatmulPreference_t pref_ = nullptr;
};

}  // namespace

CublasLtActivation cublaslt_activation(const Epilogue& epilogue) {
  if (epilogue.empty()) return CublasLtActivation::None;
  switch (epilogue.front().kind) {
    case ElementwiseKind::ReLU:
      // cuBLASLt's ReLU epilogue turns NaN into 0 (PyTorch keeps it): the backend's epilogue
      // applies the ReLU after the product instead.
      return CublasLtActivation::None;
    case ElementwiseKind::GeluTanh:
      return kCublasLtFusesGeluTanh ? CublasLtActivation::GeluTanh : CublasLtActivation::None;
    default: return CublasLtActivation::None;
  }
}

size_t recommended_cublaslt_workspace_bytes(const DeviceInfo& device) {
  return device.major >= 9 ? size_t{32} << 20 : size_t{4} << 20;
}

// cublasLtCreate reads a limit of the current context through the driver API: on a thread where
// nothing has made the device's context current yet, that read fails inside cuBLASLt (which
// goes on, but compute-sanitizer reports the error). cudaFree(nullptr) makes it current first.
CublasLtHandle::CublasLtHandle() {
  FDNN_CUDA_CHECK(cudaFree(nullptr));
  FDNN_CUBLAS_CHECK(lt().create(&handle_));
}

CublasLtHandle::~CublasLtHandle() {
  if (handle_ != nullptr) lt().destroy(handle_);
}

CublasLtLinear::CublasLtLinear(cublasLtHandle_t handle, int32_t in, int32_t out,
                               CublasLtActivation activation, const void* weight, const float* bias,
                               size_t workspace_bytes, cublasComputeType_t compute,
                               cudaDataType_t operands, const void* half_bias)
    : handle_(handle),
      in_(in),
      out_(out),
      activation_(activation),
      epilogue_(epilogue_for(activation, bias != nullptr)),
      operands_(operands),
      weight_(weight),
      bias_(bias),
      workspace_bytes_(workspace_bytes) {
  if (in < 1 || out < 1 || weight == nullptr) {
    fail(FDNN_STATUS_INTERNAL_ERROR, "cuBLASLt Linear ", in, " -> ", out, " without weights");
  }
  // The product's descriptor: transposes, the epilogue and the bias pointer (the heuristic reads
  // its alignment, so it is set before any choice).
  auto describe = [&](cublasLtMatmulDescOpaque_t* matmul, const void* bias_pointer) {
    FDNN_CUBLAS_CHECK(lt().matmul_desc_init(matmul, compute, CUDA_R_32F));
    const int32_t transpose_a = CUBLAS_OP_T;
    const int32_t transpose_b = CUBLAS_OP_N;
    FDNN_CUBLAS_CHECK(lt().matmul_desc_set_attribute(matmul, CUBLASLT_MATMUL_DESC_TRANSA,
                                                     &transpose_a, sizeof transpose_a));
    FDNN_CUBLAS_CHECK(lt().matmul_desc_set_attribute(matmul, CUBLASLT_MATMUL_DESC_TRANSB,
                                                     &transpose_b, sizeof transpose_b));
    const uint32_t epilogue = epilogue_;
    FDNN_CUBLAS_CHECK(lt().matmul_desc_set_attribute(matmul, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                     &epilogue, sizeof epilogue));
    if (bias_pointer != nullptr) {
      FDNN_CUBLAS_CHECK(lt().matmul_desc_set_attribute(matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &bias_pointer, sizeof bias_pointer));
    }
  };
  describe(&matmul_, bias);  // the bias's type defaults to D's, fp32
  if (operands_ != CUDA_R_32F) {
    // A 16-bit D would make the bias 16-bit too by default: declared fp32, the sum is rounded
    // once, as the fp32 y narrowed after is.
    describe(&half_output_matmul_, bias);
    if (bias != nullptr && half_bias != nullptr) {
      describe(&half_bias_matmul_, half_bias);  // the bias's type defaults to D's
      has_half_bias_ = true;
    }
    if (bias != nullptr) {
      const int32_t bias_type = CUDA_R_32F;
      const cublasStatus_t status = lt().matmul_desc_set_attribute(
          &half_output_matmul_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type);
      if (status != CUBLAS_STATUS_SUCCESS) {
        half_output_refusal_ =
            "cuBLASLt refuses an fp32 bias with a 16-bit y "
            "(cublasLtMatmulDescSetAttribute BIAS_DATA_TYPE: " +
            cublas_status_text(status) + ")";
      }
    }
  } else {
    half_output_refusal_ = "fp32 operands: cuBLASLt writes a 16-bit y only from 16-bit operands";
  }
  FDNN_CUBLAS_CHECK(lt().matrix_layout_init(&weight_layout_, operands_, static_cast<uint64_t>(in),
                                            static_cast<uint64_t>(out), in));
}

const char* CublasLtLinear::epilogue_name() const {
  switch (epilogue_) {
    case CUBLASLT_EPILOGUE_DEFAULT: return "DEFAULT";
    case CUBLASLT_EPILOGUE_BIAS: return "BIAS";
    case CUBLASLT_EPILOGUE_RELU: return "RELU";
    case CUBLASLT_EPILOGUE_RELU_BIAS: return "RELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU: return "GELU";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "GELU_BIAS";
    default: return "(another epilogue)";
  }
}

const CublasLtLinear::Choice& CublasLtLinear::choose(int64_t rows, const void* x, const void* y,
                                                     cudaDataType_t output) const {
  const Key key{rows, alignment_of(x), alignment_of(y), static_cast<int32_t>(output)};
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = choices_.find(key);
  if (found != choices_.end()) return *found->second;
  auto choice = std::make_unique<Choice>();
  choice->output = output;
  decide(rows, std::get<1>(key), std::get<2>(key), *choice);
  return *choices_.emplace(key, std::move(choice)).first->second;
}

void CublasLtLinear::decide(int64_t rows, uint32_t x_alignment, uint32_t y_alignment,
                            Choice& choice) const {
  const bool half_output = choice.output != CUDA_R_32F;
  std::ostringstream what;
  what << "Linear " << in_ << " -> " << out_ << (operands_ == CUDA_R_32F ? "" : " (16-bit W and x)")
       << " with the " << epilogue_name() << " epilogue for " << rows << " rows (x aligned to "
       << x_alignment << " bytes, " << (half_output ? "16-bit " : "") << "y to " << y_alignment
       << ")";
  // A 16-bit y that cuBLASLt cannot write is written in fp32 and narrowed after; an fp32 one
  // runs on the tiled GEMM.
  auto refuse = [&](const std::string& why) {
    choice.usable = false;
    choice.reason = what.str() + ": " + why +
                    (half_output ? "; writing fp32 and narrowing it after instead"
                                 : "; running the tiled GEMM (linear.cu) instead");
  };
  if (refused_for_testing_.load()) return refuse("cuBLASLt refused for testing");
  if (half_output && choice.output != operands_) {
    return refuse("y's 16-bit type is not the operands'");
  }
  if (half_output && !half_output_refusal_.empty() && !has_half_bias_) {
    return refuse(half_output_refusal_);
  }

  cublasStatus_t status = lt().matrix_layout_init(
      &choice.x_layout, operands_, static_cast<uint64_t>(in_), static_cast<uint64_t>(rows), in_);
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = lt().matrix_layout_init(&choice.y_layout, choice.output, static_cast<uint64_t>(out_),
                                     static_cast<uint64_t>(rows), out_);
  }
  if (status != CUBLAS_STATUS_SUCCESS) {
    return refuse("cublasLtMatrixLayoutInit: " + cublas_status_text(status));
  }
  Preference preference(&status);
  if (status != CUBLAS_STATUS_SUCCESS) {
    return refuse("cublasLtMatmulPreferenceCreate: " + cublas_status_text(status));
  }
  const uint64_t max_workspace = workspace_bytes_;
  const uint32_t weight_alignment = alignment_of(weight_);
  const struct {
    cublasLtMatmulPreferenceAttributes_t attribute;
    const void* value;
    size_t size;
  } settings[] = {
      {CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace, sizeof max_workspace},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &weight_alignment, sizeof weight_alignment},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &x_alignment, sizeof x_alignment},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &y_alignment, sizeof y_alignment},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &y_alignment, sizeof y_alignment},
  };
  for (const auto& setting : settings) {
    status = lt().preference_set_attribute(preference.get(), setting.attribute, setting.value,
                                           setting.size);
    if (status != CUBLAS_STATUS_SUCCESS) {
      return refuse("cublasLtMatmulPreferenceSetAttribute: " + cublas_status_text(status));
    }
  }

  // The heuristic's algorithm for one descriptor, into choice; else why there is none.
  auto* weight_layout = const_cast<cublasLtMatrixLayoutOpaque_t*>(&weight_layout_);
  auto ask = [&](const cublasLtMatmulDescOpaque_t& descriptor) -> std::string {
    auto* matmul = const_cast<cublasLtMatmulDescOpaque_t*>(&descriptor);
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    status =
        lt().algo_get_heuristic(handle_, matmul, weight_layout, &choice.x_layout, &choice.y_layout,
                                &choice.y_layout, preference.get(), 1, &result, &returned);
    if (status != CUBLAS_STATUS_SUCCESS) {
      return "cublasLtMatmulAlgoGetHeuristic: " + cublas_status_text(status);
    }
    if (returned < 1) {
      return "cublasLtMatmulAlgoGetHeuristic found no algorithm within " +
             std::to_string(workspace_bytes_) + " bytes of workspace";
    }
    if (result.state != CUBLAS_STATUS_SUCCESS) {
      return "cublasLtMatmulAlgoGetHeuristic's algorithm is unusable: " +
             cublas_status_text(result.state);
    }
    if (result.workspaceSize > workspace_bytes_) {
      return "the algorithm needs " + std::to_string(result.workspaceSize) +
             " bytes of workspace, more than the " + std::to_string(workspace_bytes_) + " allowed";
    }
    choice.algo = result.algo;
    choice.algorithm_workspace_bytes = result.workspaceSize;
    choice.usable = true;
    return "";
  };
  if (!half_output) {
    const std::string why = ask(matmul_);
    if (!why.empty()) refuse(why);
    return;
  }
  // A 16-bit y: the fp32 bias first (one rounding), else the 16-bit copy of the bias.
  std::string why = half_output_refusal_;
  if (why.empty()) why = ask(half_output_matmul_);
  if (why.empty()) return;
  if (has_half_bias_) {
    const std::string half_bias_why = ask(half_bias_matmul_);
    if (half_bias_why.empty()) {
      choice.bias_16_bit = true;
      return;
    }
    why += "; with the 16-bit copy of the bias: " + half_bias_why;
  }
  refuse(why);
}

void CublasLtLinear::run(const Choice& choice, const void* x, void* y, void* workspace,
                         cudaStream_t stream) const {
  if (!choice.usable) {
    fail(FDNN_STATUS_INTERNAL_ERROR, "cuBLASLt run without an algorithm: ", choice.reason);
  }
  const float alpha = 1.0f;
  const float beta = 0.0f;  // C is not read; it names y only because cuBLASLt wants a C
  auto* matmul =
      const_cast<cublasLtMatmulDescOpaque_t*>(choice.output == CUDA_R_32F ? &matmul_
                                              : choice.bias_16_bit        ? &half_bias_matmul_
                                                                          : &half_output_matmul_);
  auto* weight_layout = const_cast<cublasLtMatrixLayoutOpaque_t*>(&weight_layout_);
  auto* x_layout = const_cast<cublasLtMatrixLayoutOpaque_t*>(&choice.x_layout);
  auto* y_layout = const_cast<cublasLtMatrixLayoutOpaque_t*>(&choice.y_layout);
  FDNN_CUBLAS_CHECK(lt().matmul(handle_, matmul, &alpha, weight_, weight_layout, x, x_layout, &beta,
                                y, y_layout, y, y_layout, &choice.algo, workspace, workspace_bytes_,
                                stream));
  matmuls_queued_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace fusednn::cuda
