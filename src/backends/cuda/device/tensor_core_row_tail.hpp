// SPDX-License-Identifier: Apache-2.0
// A Softmax or LayerNorm over a tensor-core chain's output rows, folded into its last layer's
// epilogue (the WarpRegisters and Warpgroup forms; the device side is row_tail.cuh): a row's
// columns live in the 4 lanes of one fragment group, so the row statistics are two shuffles away.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

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

// The tail's LayerNorm constants ([count] each, where present) into a form's image at their byte
// offsets (0: the image has none).
inline void copy_row_tail_constants(std::vector<uint32_t>& image, uint32_t gamma_offset,
                                    uint32_t beta_offset, const float* gamma, const float* beta,
                                    size_t count) {
  if (gamma_offset != 0 && gamma != nullptr) {
    std::memcpy(image.data() + gamma_offset / 4, gamma, sizeof(float) * count);
  }
  if (beta_offset != 0 && beta != nullptr) {
    std::memcpy(image.data() + beta_offset / 4, beta, sizeof(float) * count);
  }
}

}  // namespace fusednn::cuda
