// SPDX-License-Identifier: Apache-2.0
// The numeric precision of a backend's matrix work: what a caller may ask for
// (fdnn_model_options::precision) and what a backend actually runs in. The values are those of
// the C enum fdnn_precision (src/runtime/resolved_options.cpp converts and checks that they agree).
#pragma once

#include <cstdint>

namespace fusednn {

enum class Precision : int32_t {
  FP32 = 0,  // IEEE binary32 throughout: exact, the default
  TF32 = 1,  // fp32 storage, tensor-core products with a 10-bit mantissa, fp32 accumulation
  FP16 = 2,  // binary16 weights and tensor-core products, fp32 accumulation
  BF16 = 3,  // bfloat16 weights and tensor-core products, fp32 accumulation
};

// "fp32", "tf32", "fp16" or "bf16", for messages.
constexpr const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::FP32: return "fp32";
    case Precision::TF32: return "tf32";
    case Precision::FP16: return "fp16";
    case Precision::BF16: return "bf16";
  }
  return "unknown";
}

}  // namespace fusednn
