// An Epilogue as kernels take it: a fixed-size, trivially copyable list of at most
// kMaxEpilogueOps operations, passed by value inside each kernel's parameter struct. Longer
// chains are split: the producing kernel applies the first kMaxEpilogueOps and in-place
// elementwise passes apply the rest (split_epilogue).
#pragma once

#include <cstdint>
#include <vector>

#include "common/elementwise_op.hpp"

namespace fusednn::cuda {

constexpr int kMaxEpilogueOps = 4;

struct DeviceEpilogue {
  int32_t count = 0;
  int32_t kind[kMaxEpilogueOps] = {};  // ElementwiseKind values
  float parameter[kMaxEpilogueOps] = {};
};

// The epilogue in pieces of at most kMaxEpilogueOps, in order; one empty piece for an empty
// epilogue, so that result.front() is always what the producing kernel applies.
inline std::vector<DeviceEpilogue> split_epilogue(const Epilogue& epilogue) {
  std::vector<DeviceEpilogue> pieces(1);
  for (const ElementwiseOp& op : epilogue) {
    if (pieces.back().count == kMaxEpilogueOps) pieces.emplace_back();
    DeviceEpilogue& piece = pieces.back();
    piece.kind[piece.count] = static_cast<int32_t>(op.kind);
    piece.parameter[piece.count] = op.parameter;
    ++piece.count;
  }
  return pieces;
}

}  // namespace fusednn::cuda
