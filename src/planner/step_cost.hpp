// SPDX-License-Identifier: Apache-2.0
// The work a run of plan steps does, from their sizes alone: FLOPs per sample and the bytes a
// range of steps run as one kernel reads and writes. Nominal figures for explaining a plan
// (fdnn_model_explain), not measurements.
//
// FLOPs: a multiply-add counts 2 (Linear 2 x rows x in x out, Conv2d 2 x output elements x
// in/groups x kh x kw); each epilogue op 1 per output element; pooling 1 per window element
// read; ChannelAffine 2, LayerNorm 5 and Softmax 4 per element; Add 1 per element per input past
// the first; Concat and Copy none.
// Bytes: float32 throughout; activations per sample are the range's inputs (each value read by
// a step of the range but made outside it, counted once) plus its last step's output; weights are
// the range's constants, read once per run whatever the batch.
#pragma once

#include <cstdint>

#include "planner/plan.hpp"

namespace fusednn {

double step_flops_per_sample(const Plan& plan, const Step& step);

struct RangeTraffic {
  int64_t activation_bytes_per_sample = 0;
  int64_t weight_bytes = 0;
};

// Steps [first_step, last_step] run as one kernel.
RangeTraffic range_traffic(const Plan& plan, int first_step, int last_step);

}  // namespace fusednn
