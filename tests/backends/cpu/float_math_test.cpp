// SPDX-License-Identifier: Apache-2.0
// common/float_math.hpp against the double-precision std:: functions, and the CPU epilogue against
// apply() on both instruction sets.
//
// The accuracy sweep evaluates every 61st float bit pattern from a random start (70 million inputs
// per function, more than 2^26, over all exponents and signs) plus the special values and the
// neighbourhoods of every threshold in the implementation. FUSEDNN_FLOAT_MATH_EXHAUSTIVE=1 makes it
// every one of the 2^32 bit patterns (minutes: the double-precision reference is the cost).
// The maxima measured exhaustively (x86-64, GCC 12; the AVX2 epilogue gives the same bits, see
// EpilogueIsaTest below): exp 0.982 ulp (at x = -81.39), tanh 1.066 (0.7626), erf 1.319 (0.9968),
// sigmoid 2.402 (-4.157), silu 3.394 (-3.211); 9 minutes on two cores.
#include "common/float_math.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/epilogue.hpp"
#include "cpu_test_support.hpp"

namespace fusednn::cpu::testing {
namespace {

float float_from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

uint32_t bits_of(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

std::string hex(float x) {
  std::ostringstream text;
  text << std::hexfloat << x << " (" << std::defaultfloat << x << ")";
  return text.str();
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kMax = std::numeric_limits<float>::max();
constexpr float kDenormMin = std::numeric_limits<float>::denorm_min();

// |got - exact| in units of the last place of a float next to `exact`: 2^(e - 23) for exact in
// [2^e, 2^(e+1)), 2^-149 in the subnormal range. An infinity counts as 2^128, the value one binade
// past FLT_MAX, so overflowing to inf where the exact value rounds to FLT_MAX costs about an ulp
// and an exact value beyond the float range is matched by inf. NaN matches only NaN.
double ulp_error(float got, double exact) {
  if (std::isnan(got) || std::isnan(exact)) {
    return std::isnan(got) && std::isnan(exact) ? 0.0 : std::numeric_limits<double>::infinity();
  }
  const double limit = std::ldexp(1.0, 128);
  const double g = std::isinf(got) ? std::copysign(limit, got) : got;
  const double e = std::clamp(exact, -limit, limit);
  const int exponent = e == 0.0 ? -126 : std::max(std::ilogb(e), -126);
  return std::fabs(g - e) / std::ldexp(1.0, exponent - 23);
}

double reference_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double reference_silu(double x) { return x / (1.0 + std::exp(-x)); }
double reference_exp(double x) { return std::exp(x); }
double reference_tanh(double x) { return std::tanh(x); }
double reference_erf(double x) { return std::erf(x); }

// The function inlined into a loop, as the kernels run it (the loop vectorises), and called one
// value at a time, out of line.
template <float (*kFunction)(float)>
void evaluate_range(const float* x, float* y, size_t count) {
  for (size_t i = 0; i < count; ++i) y[i] = kFunction(x[i]);
}

template <float (*kFunction)(float)>
__attribute__((noinline)) float evaluate_one(float x) {
  return kFunction(x);
}

struct MathFunction {
  const char* name;
  void (*range)(const float*, float*, size_t);
  float (*one)(float);
  double (*reference)(double);
  double max_ulp;       // the bound float_math.hpp states
  uint32_t thresholds;  // how many of `points` below are this function's own thresholds
  float points[8];      // where the implementation switches formulas, clamps or saturates
};

// Names the parameter in test listings (CTest shows it).
void PrintTo(const MathFunction& f, std::ostream* os) { *os << f.name; }

template <float (*kFunction)(float)>
MathFunction make(const char* name, double (*reference)(double), double max_ulp,
                  std::initializer_list<float> points) {
  MathFunction f{name,
                 evaluate_range<kFunction>,
                 evaluate_one<kFunction>,
                 reference,
                 max_ulp,
                 static_cast<uint32_t>(points.size()),
                 {}};
  std::copy(points.begin(), points.end(), f.points);
  return f;
}

std::vector<MathFunction> math_functions() {
  namespace fm = float_math;
  return {
      // Overflow (88.72), FLT_MIN (-87.34), the last subnormal (-103.97), the clamps (-110, 90).
      make<fm::exp>("exp", reference_exp, 2.0, {88.7228f, -87.3365f, -103.972f, -110.0f, 90.0f}),
      // The switch of formulas (0.75), tanh rounding to 1 (9.01), e^(2|x|) overflowing (44.4).
      make<fm::tanh>("tanh", reference_tanh, 2.0, {0.75f, 9.0109f, 44.36f}),
      // The switch (1), erf rounding to 1 (3.92), the clamp (4).
      make<fm::erf>("erf", reference_erf, 2.0, {1.0f, 3.9192f, 4.0f}),
      make<fm::sigmoid>("sigmoid", reference_sigmoid, 2.5, {-87.3365f, -103.972f, -110.0f, 16.6f}),
      make<fm::silu>("silu", reference_silu, 3.5, {-82.9f, -108.7f, -110.0f, 17.3f}),
  };
}

struct SweepResult {
  double max_error = 0.0;
  float worst_input = 0.0f;
  float worst_output = 0.0f;
  uint64_t inputs = 0;
  uint64_t scalar_mismatches = 0;
  float first_mismatch = 0.0f;

  void merge(const SweepResult& other) {
    if (other.max_error > max_error) {
      max_error = other.max_error;
      worst_input = other.worst_input;
      worst_output = other.worst_output;
    }
    if (scalar_mismatches == 0) first_mismatch = other.first_mismatch;
    inputs += other.inputs;
    scalar_mismatches += other.scalar_mismatches;
  }
};

void check_batch(const MathFunction& f, const std::vector<float>& x, SweepResult& result) {
  std::vector<float> y(x.size());
  f.range(x.data(), y.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double error = ulp_error(y[i], f.reference(x[i]));
    if (error > result.max_error || std::isnan(error)) {
      result.max_error = error;
      result.worst_input = x[i];
      result.worst_output = y[i];
    }
    if (bits_of(f.one(x[i])) != bits_of(y[i])) {
      if (result.scalar_mismatches++ == 0) result.first_mismatch = x[i];
    }
  }
  result.inputs += x.size();
}

// Bit patterns start, start + stride, ... below 2^32, split over the threads.
SweepResult sweep(const MathFunction& f, uint64_t start, uint64_t stride) {
  const uint64_t count = ((uint64_t{1} << 32) - start + stride - 1) / stride;
  const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<SweepResult> results(threads);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const uint64_t begin = count * t / threads, end = count * (t + 1) / threads;
      std::vector<float> x;
      x.reserve(4096);
      for (uint64_t k = begin; k < end; ++k) {
        x.push_back(float_from_bits(static_cast<uint32_t>(start + k * stride)));
        if (x.size() == 4096 || k + 1 == end) {
          check_batch(f, x, results[t]);
          x.clear();
        }
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  SweepResult total;
  for (const SweepResult& r : results) total.merge(r);
  return total;
}

// The special values, and 256 floats on each side of each threshold, both signs.
std::vector<float> special_inputs(const MathFunction& f) {
  std::vector<float> x = {0.0f,
                          -0.0f,
                          kInf,
                          -kInf,
                          kMax,
                          -kMax,
                          kDenormMin,
                          -kDenormMin,
                          std::numeric_limits<float>::min(),
                          -std::numeric_limits<float>::min(),
                          float_from_bits(0x7fc00000u),
                          float_from_bits(0xffc00000u),
                          float_from_bits(0x7f800001u),
                          float_from_bits(0xffffffffu)};
  for (uint32_t i = 0; i < f.thresholds; ++i) {
    for (float point : {f.points[i], -f.points[i]}) {
      const uint32_t center = bits_of(point);
      for (uint32_t d = 0; d < 256; ++d) {
        x.push_back(float_from_bits(center + d));
        x.push_back(float_from_bits(center - d));
      }
    }
  }
  return x;
}

class FloatMathAccuracy : public ::testing::TestWithParam<MathFunction> {};

// Max error against the double-precision function, and the inlined (vectorised) and scalar
// evaluations bit for bit the same, NaNs included (sign and payload).
TEST_P(FloatMathAccuracy, WithinBoundOverFloatInputs) {
  const MathFunction& f = GetParam();
  const char* exhaustive = std::getenv("FUSEDNN_FLOAT_MATH_EXHAUSTIVE");
  const bool every_input = exhaustive && std::string(exhaustive) == "1";
  const uint64_t stride = every_input ? 1 : 61;
  Random random;
  const uint64_t start = every_input ? 0 : static_cast<uint64_t>(random.uniform(0.0f, 60.99f));

  SweepResult result = sweep(f, start, stride);
  SweepResult specials;
  check_batch(f, special_inputs(f), specials);
  result.merge(specials);

  std::cout << "[ measured ] " << f.name << ": max " << result.max_error
            << " ulp at x = " << hex(result.worst_input) << " over " << result.inputs << " inputs"
            << (every_input ? " (every float)" : "") << "\n";
  RecordProperty("max_ulp", std::to_string(result.max_error));
  EXPECT_LE(result.max_error, f.max_ulp)
      << f.name << "(" << hex(result.worst_input) << ") = " << hex(result.worst_output)
      << ", double reference " << f.reference(result.worst_input);
  EXPECT_EQ(result.scalar_mismatches, 0u)
      << "first at x = " << hex(result.first_mismatch) << ": " << hex(f.one(result.first_mismatch));
  if (!every_input) {
    EXPECT_GE(result.inputs, uint64_t{1} << 26);
  }
}

std::string function_name(const ::testing::TestParamInfo<MathFunction>& param_info) {
  return param_info.param.name;
}

INSTANTIATE_TEST_SUITE_P(FloatMath, FloatMathAccuracy, ::testing::ValuesIn(math_functions()),
                         function_name);

// Exact results, signs of zero included: same() compares bit patterns (any NaN matches NaN).
::testing::AssertionResult same(float got, float want) {
  if (bits_of(got) == bits_of(want) || (std::isnan(got) && std::isnan(want))) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "got " << hex(got) << ", want " << hex(want);
}

TEST(FloatMath, SpecialValues) {
  namespace fm = float_math;
  const float nan = quiet_nan();
  const float nans[] = {nan, -nan, float_from_bits(0x7f800001u), float_from_bits(0xffbfffffu)};
  for (float x : nans) {
    EXPECT_TRUE(std::isnan(fm::exp(x)));
    EXPECT_TRUE(std::isnan(fm::tanh(x)));
    EXPECT_TRUE(std::isnan(fm::erf(x)));
    EXPECT_TRUE(std::isnan(fm::sigmoid(x)));
    EXPECT_TRUE(std::isnan(fm::silu(x)));
  }

  EXPECT_TRUE(same(fm::exp(0.0f), 1.0f));
  EXPECT_TRUE(same(fm::exp(-0.0f), 1.0f));
  EXPECT_TRUE(same(fm::exp(kDenormMin), 1.0f));
  EXPECT_TRUE(same(fm::exp(kInf), kInf));
  EXPECT_TRUE(same(fm::exp(kMax), kInf));
  EXPECT_TRUE(same(fm::exp(89.0f), kInf));  // e^89 = 4.49e38 > FLT_MAX
  EXPECT_TRUE(std::isfinite(fm::exp(88.5f)));
  EXPECT_TRUE(same(fm::exp(-kInf), 0.0f));
  EXPECT_TRUE(same(fm::exp(-kMax), 0.0f));
  EXPECT_TRUE(same(fm::exp(-104.0f), 0.0f));  // e^-104 = 6.8e-46 < 2^-150
  // e^-103 = 1.32 * 2^-149 rounds to the smallest subnormal; e^-100 = 3.72e-44 = 26.55 * 2^-149.
  EXPECT_TRUE(same(fm::exp(-103.0f), kDenormMin));
  EXPECT_TRUE(same(fm::exp(-100.0f), 27 * kDenormMin));
  EXPECT_LT(fm::exp(-88.0f), std::numeric_limits<float>::min());  // 6.05e-39, subnormal
  EXPECT_GT(fm::exp(-88.0f), 0.0f);

  for (float sign : {1.0f, -1.0f}) {
    EXPECT_TRUE(same(fm::tanh(sign * 0.0f), sign * 0.0f));
    EXPECT_TRUE(same(fm::tanh(sign * kDenormMin), sign * kDenormMin));
    EXPECT_TRUE(same(fm::tanh(sign * 1e-30f), sign * 1e-30f));
    EXPECT_TRUE(same(fm::tanh(sign * 10.0f), sign * 1.0f));
    EXPECT_TRUE(same(fm::tanh(sign * 50.0f), sign * 1.0f));  // e^100 overflows to inf
    EXPECT_TRUE(same(fm::tanh(sign * kMax), sign * 1.0f));
    EXPECT_TRUE(same(fm::tanh(sign * kInf), sign * 1.0f));

    EXPECT_TRUE(same(fm::erf(sign * 0.0f), sign * 0.0f));
    EXPECT_TRUE(same(fm::erf(sign * kDenormMin), sign * kDenormMin));  // 1.128 * 2^-149
    EXPECT_TRUE(same(fm::erf(sign * 4.0f), sign * 1.0f));
    EXPECT_TRUE(same(fm::erf(sign * 100.0f), sign * 1.0f));
    EXPECT_TRUE(same(fm::erf(sign * kMax), sign * 1.0f));
    EXPECT_TRUE(same(fm::erf(sign * kInf), sign * 1.0f));

    EXPECT_TRUE(same(fm::sigmoid(sign * 0.0f), 0.5f));
    EXPECT_TRUE(same(fm::silu(sign * 0.0f), sign * 0.0f));
  }

  EXPECT_TRUE(same(fm::sigmoid(kInf), 1.0f));
  EXPECT_TRUE(same(fm::sigmoid(kMax), 1.0f));
  EXPECT_TRUE(same(fm::sigmoid(20.0f), 1.0f));
  EXPECT_TRUE(same(fm::sigmoid(-kInf), 0.0f));
  EXPECT_TRUE(same(fm::sigmoid(-kMax), 0.0f));
  EXPECT_TRUE(same(fm::sigmoid(-120.0f), 0.0f));
  // No overflow on the way: sigmoid(-100) = 3.72e-44, a subnormal, not 1 / (1 + inf) = 0.
  EXPECT_TRUE(same(fm::sigmoid(-100.0f), 27 * kDenormMin));

  EXPECT_TRUE(same(fm::silu(kInf), kInf));
  EXPECT_TRUE(same(fm::silu(kMax), kMax));
  EXPECT_TRUE(same(fm::silu(-kMax), -0.0f));
  EXPECT_TRUE(same(fm::silu(-120.0f), -0.0f));
  EXPECT_TRUE(std::isnan(fm::silu(-kInf)));  // -inf * sigmoid(-inf) = -inf * 0, as in PyTorch
  // silu(-100) = -100 e^-100 / (1 + e^-100) = -3.72e-42 = -2654.73 * 2^-149.
  EXPECT_TRUE(same(fm::silu(-100.0f), -2655 * kDenormMin));
}

// The formulas PyTorch defines the activations with, through apply(): GELU's erf and tanh forms,
// SiLU = x * sigmoid(x), at points whose values are known to many digits.
TEST(FloatMath, ActivationsFollowTheirDefinitions) {
  using K = ElementwiseKind;
  for (float x : {-6.0f, -3.0f, -1.5f, -0.3f, 0.1f, 0.7f, 2.0f, 5.0f}) {
    const double xd = x;
    const double gelu_erf = 0.5 * xd * (1.0 + std::erf(xd / std::sqrt(2.0)));
    const double inner = std::sqrt(2.0 / 3.14159265358979323846) * (xd + 0.044715 * xd * xd * xd);
    const double gelu_tanh = 0.5 * xd * (1.0 + std::tanh(inner));
    const double silu = xd * (1.0 / (1.0 + std::exp(-xd)));
    // 1 + erf(x / sqrt 2) cancels for negative x, in PyTorch's float formula as here: allow
    // 4 ulp of 1 times |x| / 2 on top of the relative tolerance.
    const double slack = 4.0 * 0x1p-24 * std::fabs(xd);
    EXPECT_NEAR(apply(ElementwiseOp{K::GeluErf}, x), gelu_erf, 1e-6 * std::fabs(gelu_erf) + slack)
        << x;
    EXPECT_NEAR(apply(ElementwiseOp{K::GeluTanh}, x), gelu_tanh,
                1e-6 * std::fabs(gelu_tanh) + slack)
        << x;
    EXPECT_NEAR(apply(ElementwiseOp{K::SiLU}, x), silu, 1e-6 * std::fabs(silu)) << x;
  }
}

// apply_epilogue is apply() bit for bit for every kind, on every instruction set this CPU has (the
// elementwise tests see only the one chosen), over a dense sweep of float bit patterns.
class EpilogueIsaTest : public GemmIsaTest {};

__attribute__((noinline)) float apply_one(const ElementwiseOp& op, float x) { return apply(op, x); }

TEST_P(EpilogueIsaTest, BitIdenticalToApply) {
  using K = ElementwiseKind;
  std::vector<float> x;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4093) {
    x.push_back(float_from_bits(static_cast<uint32_t>(bits)));
  }
  const ElementwiseOp ops[] = {{K::ReLU}, {K::LeakyReLU, 0.1f}, {K::GeluErf}, {K::GeluTanh},
                               {K::SiLU}, {K::Sigmoid},         {K::Tanh},    {K::Scale, -2.5f}};
  // Counts that leave every remainder of the vector loops.
  for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{13}, static_cast<int64_t>(x.size())}) {
    for (const ElementwiseOp& op : ops) {
      std::vector<float> y(x.begin(), x.begin() + count);
      apply_epilogue({op}, y.data(), count);
      size_t mismatches = 0;
      for (int64_t i = 0; i < count; ++i) {
        const float want = apply_one(op, x[i]);
        mismatches += bits_of(y[i]) != bits_of(want);  // NaNs too: sign and payload
      }
      EXPECT_EQ(mismatches, 0u) << describe({op}) << ", count " << count;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CpuEpilogue, EpilogueIsaTest, ::testing::ValuesIn(kEveryGemmIsa),
                         isa_test_name);

}  // namespace
}  // namespace fusednn::cpu::testing
