// SPDX-License-Identifier: Apache-2.0
// Sums of several values at once across a warp's 32 lanes, for dot products whose k is split over
// the lanes (the small-batch MLP forms: each lane holds its share of V sums).
#pragma once

namespace fusednn::cuda {

// Sums each of the V values over the warp's 32 lanes. At each step a lane keeps the half of its
// values that its lane bit selects and adds the partner's copy of that half, so V values take
// V - 1 + (5 - log2 V) shuffles instead of 5 V. Returns the total of value (lane >> (5 - log2 V))
// (every 32 / V consecutive lanes hold the same one).
template <int V>
__device__ __forceinline__ float warp_sum_many(float (&v)[V], int lane) {
  static_assert(V == 1 || V == 2 || V == 4 || V == 8 || V == 16, "V: a power of two up to 16");
  int held = V;
#pragma unroll
  for (int distance = 16; distance >= 1; distance >>= 1) {
    if (held > 1) {
      const bool upper = (lane & distance) != 0;
#pragma unroll
      for (int i = 0; i < V / 2; ++i) {
        if (i < held / 2) {
          const float send = upper ? v[i] : v[i + held / 2];
          const float keep = upper ? v[i + held / 2] : v[i];
          v[i] = keep + __shfl_xor_sync(0xffffffffu, send, distance);
        }
      }
      held /= 2;
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], distance);
    }
  }
  return v[0];
}

}  // namespace fusednn::cuda
