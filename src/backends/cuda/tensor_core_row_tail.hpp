// A Softmax or LayerNorm over a tensor-core chain's output rows, folded into its last layer's
// epilogue (the WarpRegisters and Warpgroup forms; the device side is row_tail.cuh): a row's
// columns live in the 4 lanes of one fragment group, so the row statistics are two shuffles away.
#pragma once

#include <cstdint>

namespace fusednn::cuda {

enum class RowTailKind : int32_t { None = 0, Softmax = 1, LayerNorm = 2 };

// The chain's last layer may have no activation or ReLU; an activation after the LayerNorm is
// the caller's to run.
struct TensorCoreRowTail {
  RowTailKind kind = RowTailKind::None;
  float eps = 0.0f;    // LayerNorm
  bool gamma = false;  // LayerNorm's scale [out] present
  bool beta = false;   // LayerNorm's shift [out] present
};

}  // namespace fusednn::cuda
