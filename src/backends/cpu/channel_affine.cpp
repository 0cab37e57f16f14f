// SPDX-License-Identifier: Apache-2.0
// y = x * scale[c] + shift[c], then the epilogue over runs of whole channels of about kChunk
// floats (one pass per op while the run is still in L1).
#include "backends/cpu/channel_affine.hpp"

#include "backends/cpu/epilogue.hpp"

namespace fusednn::cpu {
namespace {

constexpr int64_t kChunk = 2048;

}  // namespace

void channel_affine_forward(const float* x, const float* scale, const float* shift, float* y,
                            int64_t batch, int64_t channels, int64_t spatial,
                            const Epilogue& epilogue) {
  const int64_t sample = channels * spatial;
  for (int64_t n = 0; n < batch; ++n) {
    const float* x_sample = x + n * sample;
    float* y_sample = y + n * sample;
    int64_t pending = 0;  // start of the run the epilogue has not seen yet
    for (int64_t c = 0; c < channels; ++c) {
      const float channel_scale = scale[c];
      const float channel_shift = shift[c];
      const float* x_channel = x_sample + c * spatial;
      float* y_channel = y_sample + c * spatial;
      for (int64_t i = 0; i < spatial; ++i)
        y_channel[i] = x_channel[i] * channel_scale + channel_shift;
      const int64_t done = (c + 1) * spatial;
      if (done - pending >= kChunk || c + 1 == channels) {
        apply_epilogue(epilogue, y_sample + pending, done - pending);
        pending = done;
      }
    }
  }
}

}  // namespace fusednn::cpu
