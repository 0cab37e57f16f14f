// SPDX-License-Identifier: Apache-2.0
// An Epilogue as kernels take it: a fixed-size, trivially copyable list of at most
// kMaxEpilogueOps operations, passed by value inside each kernel's parameter struct. Longer
// chains are split: the producing kernel applies the first kMaxEpilogueOps and in-place
// elementwise passes apply the rest (cuda_backend.cpp's split_epilogue).
//
// Kernels see only this header, not common/elementwise_op.hpp (host code the CUDA compiler need
// not parse); the op codes below equal ElementwiseKind's values, which cuda_backend.cpp checks
// at compile time.
#pragma once

#include <cstdint>

namespace fusednn::cuda {

constexpr int kMaxEpilogueOps = 4;

enum DeviceOp : int32_t {
  kOpReLU = 0,
  kOpLeakyReLU = 1,
  kOpGeluErf = 2,
  kOpGeluTanh = 3,
  kOpSiLU = 4,
  kOpSigmoid = 5,
  kOpTanh = 6,
  kOpScale = 7,
};

struct DeviceEpilogue {
  int32_t count = 0;
  int32_t kind[kMaxEpilogueOps] = {};  // DeviceOp values
  float parameter[kMaxEpilogueOps] = {};
};

}  // namespace fusednn::cuda
