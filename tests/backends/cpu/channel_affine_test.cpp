// SPDX-License-Identifier: Apache-2.0

#include "backends/cpu/channel_affine.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "cpu_test_support.hpp"

namespace fusednn::cpu::testing {
namespace {

using K = ElementwiseKind;

Expected reference_affine(const std::vector<float>& x, const std::vector<float>& scale,
                          const std::vector<float>& shift, int64_t batch, int64_t channels,
                          int64_t spatial, const Epilogue& epilogue) {
  Expected y;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t s = 0; s < spatial; ++s) {
        const int64_t i = (n * channels + c) * spatial + s;
        y.add(double(x[i]) * scale[c] + shift[c], epilogue);
      }
    }
  }
  return y;
}

// Batch 2, channels 2, spatial 3; scale = [2, -1], shift = [1, 0.5]:
//   sample 0: ch0 [1, 2, 3] -> [3, 5, 7]      ch1 [1, 2, 3] -> [-0.5, -1.5, -2.5]
//   sample 1: ch0 [-1, 0, 0.5] -> [-1, 1, 2]  ch1 [-1, 0, 0.5] -> [1.5, 0.5, 0]
// With ReLU the negatives become 0. Run out of place and in place.
TEST(CpuChannelAffine, HandComputed) {
  const std::vector<float> x = {1, 2, 3, 1, 2, 3, -1, 0, 0.5f, -1, 0, 0.5f};
  const std::vector<float> scale = {2, -1}, shift = {1, 0.5f};
  const std::vector<float> want = {3, 5, 7, 0, 0, 0, 0, 1, 2, 1.5f, 0.5f, 0};
  std::vector<float> y = poisoned(x.size());
  channel_affine_forward(x.data(), scale.data(), shift.data(), y.data(), 2, 2, 3, {{K::ReLU}});
  EXPECT_TRUE(near_values(y, want));
  std::vector<float> in_place = x;
  channel_affine_forward(in_place.data(), scale.data(), shift.data(), in_place.data(), 2, 2, 3,
                         {{K::ReLU}});
  EXPECT_TRUE(near_values(in_place, want));
}

struct AffineShape {
  int64_t channels, spatial;
};

// spatial 1 (after a Linear), odd planes, and planes around and above the 2048-element epilogue
// run.
const AffineShape kShapes[] = {{1, 1}, {7, 1}, {129, 1}, {3, 25}, {6, 784}, {5, 2047}, {2, 4099}};

TEST(CpuChannelAffine, MatchesReferenceOnRandomData) {
  Random random;
  const std::vector<Epilogue> epilogues = test_epilogues();
  int check = 0;
  for (const AffineShape& shape : kShapes) {
    for (int64_t batch : {1, 3, 32, 257}) {
      if (batch * shape.channels * shape.spatial > 4'000'000) continue;
      const Epilogue& epilogue = epilogues[check++ % epilogues.size()];
      const size_t count = static_cast<size_t>(batch * shape.channels * shape.spatial);
      const std::vector<float> x = random.uniform_vector(count, -3.0f, 3.0f);
      const std::vector<float> scale =
          random.uniform_vector(static_cast<size_t>(shape.channels), -2.0f, 2.0f);
      const std::vector<float> shift = random.uniform_vector(static_cast<size_t>(shape.channels));
      const Expected want =
          reference_affine(x, scale, shift, batch, shape.channels, shape.spatial, epilogue);
      const std::string context =
          "batch " + std::to_string(batch) + ", channels " + std::to_string(shape.channels) +
          ", spatial " + std::to_string(shape.spatial) + ", epilogue " + describe(epilogue);

      std::vector<float> y = poisoned(count);
      channel_affine_forward(x.data(), scale.data(), shift.data(), y.data(), batch, shape.channels,
                             shape.spatial, epilogue);
      EXPECT_TRUE(near_expected(y, want)) << context;

      std::vector<float> in_place = x;
      channel_affine_forward(in_place.data(), scale.data(), shift.data(), in_place.data(), batch,
                             shape.channels, shape.spatial, epilogue);
      EXPECT_TRUE(near_expected(in_place, want)) << "in place, " << context;
    }
  }
}

}  // namespace
}  // namespace fusednn::cpu::testing
