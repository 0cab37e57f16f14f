// SPDX-License-Identifier: Apache-2.0
// Division of non-negative ints by a divisor fixed at plan time: a multiply-high and a shift in
// place of the ~20 dependent instructions of a division by a runtime value. The whole-network
// kernel (conv_net.cu) spends most of a layer's fixed cost on such dependent chains at batch 1.
//
// For a divisor d >= 2, l = ceil(log2 d) and m = ceil(2^(31 + l) / d) < 2^32; for 0 <= n < 2^31,
// n / d = (n * m) >> (31 + l) exactly, since the rounding up of m adds less than n / 2^(31 + l)
// < 2^-l <= 1 / d. CCCL has the same device helper only in an internal namespace
// (cub::detail::fast_div_mod), without the default constructor a kernel's parameter block needs.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FDNN_HOST_DEVICE __host__ __device__
#else
#define FDNN_HOST_DEVICE
#endif

namespace fusednn::cuda {

struct FastDivisor {
  int32_t divisor = 1;
  uint32_t multiplier = 0;  // 0: the divisor is 1
  uint32_t shift = 0;       // l - 1

  // n / divisor for 0 <= n < 2^31.
  FDNN_HOST_DEVICE int32_t divide(int32_t n) const {
    if (multiplier == 0) return n;
    const uint32_t value = static_cast<uint32_t>(n);
#if defined(__CUDA_ARCH__)
    const uint32_t high = __umulhi(value, multiplier);
#else
    const uint32_t high = static_cast<uint32_t>((uint64_t{value} * multiplier) >> 32);
#endif
    return static_cast<int32_t>(high >> shift);
  }
};

// For 1 <= divisor < 2^31.
inline FastDivisor make_fast_divisor(int32_t divisor) {
  FastDivisor result;
  result.divisor = divisor;
  if (divisor <= 1) return result;
  uint32_t l = 0;
  while ((uint64_t{1} << l) < static_cast<uint64_t>(divisor)) ++l;
  const uint64_t numerator = uint64_t{1} << (31 + l);
  result.multiplier = static_cast<uint32_t>((numerator + divisor - 1) / divisor);
  result.shift = l - 1;
  return result;
}

}  // namespace fusednn::cuda
