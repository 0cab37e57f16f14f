// SPDX-License-Identifier: Apache-2.0
// Single-precision exp, tanh, erf, sigmoid and x * sigmoid(x) written for loops that the compiler
// vectorises: each is straight-line float and 32-bit integer arithmetic (range reduction, a
// polynomial, selects between ranges), with no branches, no table lookups and no calls.
//
// Accuracy over every float input, against the double-precision std:: function (sigmoid and silu:
// their double formulas), in ulp of the exact result (tests/backends/cpu/float_math_test.cpp):
//   exp 0.98, tanh 1.07, erf 1.32 (the bound: 2); sigmoid 2.40 (bound 2.5), silu 3.39 (bound 3.5),
// subnormal results included. sigmoid and silu divide e^-|x| or x e^-|x| by 1 + e^-|x|, which adds
// a rounding or two to exp's.
// Special values follow IEEE arithmetic and PyTorch: NaN in gives NaN out, with the same bits
// whether a function runs inlined in a vector loop or on its own; tanh(+-inf) = +-1,
// erf(+-inf) = +-1, exp(-inf) = 0, exp(x) = inf past FLT_MAX and rounds into the subnormals below
// FLT_MIN; sigmoid(-inf) = 0 and sigmoid never overflows on the way; silu(-inf) = -inf * 0 = NaN
// (as x * sigmoid(x) in PyTorch); odd functions keep the sign of zero.
//
// The polynomial coefficients were fitted for this file (minimax, Remez exchange in 40-digit
// arithmetic, then rounded to float); the fit's own error is stated beside each polynomial and is
// far below the rounding error of evaluating it in float.
//
// The accuracy above is that of every product and sum rounded on its own, as x86-64 code without
// FMA computes it. Where the baseline has FMA (AArch64) GCC and Clang may fuse some of them; the
// results then differ by rounding, and the test checks the bounds there too. On x86-64 the CPU
// kernels' AVX2 code is compiled without FMA for this reason (src/backends/cpu/epilogue.cpp).
#pragma once

#include <cstdint>
#include <cstring>

#include "common/always_inline.hpp"

namespace fusednn::float_math {
namespace detail {

FUSEDNN_ALWAYS_INLINE uint32_t bits_of(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

FUSEDNN_ALWAYS_INLINE float float_from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

constexpr uint32_t kSignBit = 0x80000000u;

}  // namespace detail

// condition ? if_true : if_false with both operands evaluated, written with masks. A conditional
// expression on floats may stay a branch, and the loop around it then does not vectorise: GCC
// does not evaluate a float operation that might trap (x * parameter in one arm) unconditionally,
// and its jump threading duplicates the code after a clamp written with ?: when it can fold a
// constant into one path.
FUSEDNN_ALWAYS_INLINE float select(bool condition, float if_true, float if_false) {
  const uint32_t mask = 0u - static_cast<uint32_t>(condition);
  return detail::float_from_bits((detail::bits_of(if_true) & mask) |
                                 (detail::bits_of(if_false) & ~mask));
}

namespace detail {

// exp(x) as mantissa * scale_low * scale_high: mantissa = exp(r) in [0.70, 1.42] and the scales
// are powers of two whose product is 2^n, x = n ln 2 + r. Two scales because 2^n alone leaves the
// float exponent range at both ends (n runs from -159 to 130); halved, each is a normal float,
// mantissa * scale_low is exact and the one rounding happens in the last product, so results
// that overflow become inf and results in the subnormal range are rounded once, correctly.
// Below x = -110 (exp(x) * |x| < 2^-150, under half the smallest subnormal: exp, sigmoid and
// x * sigmoid(x) are all zero there) scale_high is 0, so x = -inf gives exp 0 and -inf * 0 = NaN
// where the formula has that product.
struct ExpParts {
  float mantissa, scale_low, scale_high;
};

// x ln 2 split: kLn2High has 9 significant bits, so n * kLn2High is exact for |n| < 2^15 and
// x - n * kLn2High is exact too (both are multiples of the smaller one's ulp and the difference is
// below ln 2). kLn2Low = ln 2 - kLn2High rounded to float.
constexpr float kLog2e = 0x1.715476p+0f;
constexpr float kLn2High = 0x1.63p-1f;
constexpr float kLn2Low = -0x1.bd0106p-13f;
// Adding 1.5 * 2^23 rounds a float of magnitude below 2^22 to an integer (to nearest even), which
// then sits in the low mantissa bits: bits_of(y + kRoundingShift) = bits_of(kRoundingShift) + n.
constexpr float kRoundingShift = 0x1.8p+23f;
constexpr float kExpLowest = -110.0f;
constexpr float kExpHighest = 90.0f;

FUSEDNN_ALWAYS_INLINE ExpParts exp_parts(float x) {
  // Comparisons are false for NaN, which therefore goes through unclamped and poisons mantissa.
  const float clamped = select(x > kExpHighest, kExpHighest, select(x < kExpLowest, kExpLowest, x));
  const float shifted = clamped * kLog2e + kRoundingShift;
  const float n = shifted - kRoundingShift;
  const float r = (clamped - n * kLn2High) - n * kLn2Low;  // |r| <= ln 2 / 2 + 2^-16

  // exp(r) = 1 + r + r^2 (c2 + c3 r + ... + c6 r^4); relative error of the fit 2^-28.3 on
  // |r| <= 0.3466. The 1 + (r + ...) order keeps the rounding of the small terms small.
  const float r2 = r * r;
  float p = 0x1.6a243ap-10f;
  p = p * r + 0x1.1239e0p-7f;
  p = p * r + 0x1.5558f2p-5f;
  p = p * r + 0x1.555492p-3f;
  p = p * r + 0x1.fffffcp-2f;
  const float mantissa = 1.0f + (r + r2 * p);

  // n + 256 in [97, 386]; unsigned arithmetic (well defined for any bits a NaN leaves here).
  const uint32_t biased_n = bits_of(shifted) - (bits_of(kRoundingShift) - 256u);
  const uint32_t biased_half = biased_n >> 1;  // floor(n / 2) + 128
  // Float exponent fields: floor(n / 2) + 127 and n - floor(n / 2) + 127.
  const float scale_low = float_from_bits((biased_half - 1u) << 23);
  const float scale_high = float_from_bits((biased_n - biased_half - 1u) << 23);
  return {mantissa, scale_low, select(x < kExpLowest, 0.0f, scale_high)};
}

}  // namespace detail

// e^x.
FUSEDNN_ALWAYS_INLINE float exp(float x) {
  const detail::ExpParts e = detail::exp_parts(x);
  return e.mantissa * e.scale_low * e.scale_high;
}

// Hyperbolic tangent. |x| < 0.75: x + x^3 P(x^2), the fit's relative error 2^-29.2. Beyond:
// 1 - 2 / (e^(2|x|) + 1), whose subtracted term is at most 1 - tanh(0.75) = 0.365 there, so its
// relative error costs under 2 ulp of the result; e^(2|x|) = inf gives exactly 1.
FUSEDNN_ALWAYS_INLINE float tanh(float x) {
  const uint32_t sign = detail::bits_of(x) & detail::kSignBit;
  const float a = detail::float_from_bits(detail::bits_of(x) ^ sign);

  const float a2 = a * a;
  float p = 0x1.c753cap-10f;
  p = p * a2 - 0x1.f5d36ep-8f;
  p = p * a2 + 0x1.5f785ap-6f;
  p = p * a2 - 0x1.b97d3cp-5f;
  p = p * a2 + 0x1.110db8p-3f;
  p = p * a2 - 0x1.55554ap-2f;
  const float near_zero = a + a * (a2 * p);

  const float far = 1.0f - 2.0f / (exp(2.0f * a) + 1.0f);
  const float magnitude = select(a < 0.75f, near_zero, far);
  return detail::float_from_bits(detail::bits_of(magnitude) | sign);
}

// Error function. |x| < 1: x + x Q(x^2), the fit's relative error 2^-29.6. From 1 on:
// 1 - e^(-x^2) G(x), G a polynomial in x - 2.5 fitted to e^(x^2) erfc(x) on [1, 4] with absolute
// error in erfc of 2^-28.6; |x| is clamped to 4, where 1 - erfc rounds to 1 (from 3.92 on).
FUSEDNN_ALWAYS_INLINE float erf(float x) {
  const uint32_t sign = detail::bits_of(x) & detail::kSignBit;
  const float a = detail::float_from_bits(detail::bits_of(x) ^ sign);

  const float a2 = a * a;
  float q = 0x1.496a32p-14f;
  q = q * a2 - 0x1.a3f7p-11f;
  q = q * a2 + 0x1.5405b2p-8f;
  q = q * a2 - 0x1.b7f90ep-6f;
  q = q * a2 + 0x1.ce2cf8p-4f;
  q = q * a2 - 0x1.81273ep-2f;
  q = q * a2 + 0x1.06eba8p-3f;  // 2 / sqrt(pi) - 1
  const float near_zero = a + a * q;

  const float c = select(a > 4.0f, 4.0f, a);  // NaN stays NaN
  const float t = c - 2.5f;
  float g = 0x1.c0227ep-14f;
  g = g * t + 0x1.d7fef0p-13f;
  g = g * t + 0x1.1cdbc8p-11f;
  g = g * t - 0x1.5a9db2p-11f;
  g = g * t + 0x1.2dcb26p-9f;
  g = g * t - 0x1.0a7a4cp-7f;
  g = g * t + 0x1.983382p-6f;
  g = g * t - 0x1.30816ep-4f;
  g = g * t + 0x1.afbbe6p-3f;
  const float far = 1.0f - exp(-(c * c)) * g;

  // NaN takes the polynomial branch: far mixes a NaN of each sign (-(c * c) flips it), and which
  // one a product keeps depends on the order the compiler gives its operands, which differs
  // between scalar and vector code; near_zero is the input's NaN alone.
  const float magnitude = select(!(a >= 1.0f), near_zero, far);
  return detail::float_from_bits(detail::bits_of(magnitude) | sign);
}

// The logistic function 1 / (1 + e^-x), evaluated as 1 / (1 + e^-|x|) for x >= 0 and as
// e^-|x| / (1 + e^-|x|) for x < 0, so that nothing overflows; the last scaling by a power of two
// comes after the division, so that results down in the subnormal range are rounded once.
FUSEDNN_ALWAYS_INLINE float sigmoid(float x) {
  const float minus_a = detail::float_from_bits(detail::bits_of(x) | detail::kSignBit);
  const detail::ExpParts e = detail::exp_parts(minus_a);
  const float denominator = 1.0f + e.mantissa * e.scale_low * e.scale_high;
  const bool negative = x < 0.0f;
  const float numerator = select(negative, e.mantissa * e.scale_low, 1.0f);
  return numerator / denominator * select(negative, e.scale_high, 1.0f);
}

// x * sigmoid(x) (SiLU): x / (1 + e^-x) for x >= 0 and x e^x / (1 + e^x) for x < 0, with the
// product x e^x formed before the last scaling by a power of two (x * scale_low is exact, below
// FLT_MAX for every x), so that tiny results keep their precision. silu(-inf) = -inf * 0 = NaN,
// as PyTorch's x * sigmoid(x) gives.
FUSEDNN_ALWAYS_INLINE float silu(float x) {
  const float minus_a = detail::float_from_bits(detail::bits_of(x) | detail::kSignBit);
  const detail::ExpParts e = detail::exp_parts(minus_a);
  const float denominator = 1.0f + e.mantissa * e.scale_low * e.scale_high;
  const bool negative = x < 0.0f;
  const float numerator = select(negative, x * e.scale_low * e.mantissa, x);
  return numerator / denominator * select(negative, e.scale_high, 1.0f);
}

}  // namespace fusednn::float_math
