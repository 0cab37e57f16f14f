// SPDX-License-Identifier: Apache-2.0
// Shared pieces of the CPU kernel tests: seeded random data, NaN-poisoned outputs, a comparison
// relative to the reference's largest magnitude, and a double-precision reference for epilogues.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu/gemm.hpp"
#include "common/elementwise_op.hpp"

namespace fusednn::cpu::testing {

// The tolerance every randomized check uses: |got - want| <= kRelativeTolerance * max |want|.
inline constexpr double kRelativeTolerance = 1e-5;

// Random numbers seeded from the running test's name, so that a failure reproduces when that test
// is run alone; FUSEDNN_TEST_SEED=<n> mixes another seed in. Every check draws fresh data.
class Random {
 public:
  Random() {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "";
    uint64_t seed = std::hash<std::string>{}(name);
    if (const char* extra = std::getenv("FUSEDNN_TEST_SEED"))
      seed ^= std::strtoull(extra, nullptr, 10);
    engine_.seed(static_cast<std::mt19937_64::result_type>(seed));
  }

  float uniform(float low, float high) {
    return std::uniform_real_distribution<float>(low, high)(engine_);
  }
  std::vector<float> uniform_vector(size_t count, float low = -1.0f, float high = 1.0f) {
    std::vector<float> values(count);
    for (float& v : values) v = uniform(low, high);
    return values;
  }

 private:
  std::mt19937_64 engine_;
};

inline float quiet_nan() { return std::numeric_limits<float>::quiet_NaN(); }

// An output buffer filled with NaN: an element the kernel forgets to write fails the comparison.
inline std::vector<float> poisoned(size_t count) { return std::vector<float>(count, quiet_nan()); }

// got[i] against want[i] for every i: |got[i] - want[i]| <= tolerance * max |want| + slack.
// NaN anywhere fails.
inline ::testing::AssertionResult near_reference(const std::vector<float>& got,
                                                 const std::vector<double>& want,
                                                 double tolerance = kRelativeTolerance,
                                                 double slack = 0.0) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  }
  double scale = 0.0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  const double limit = tolerance * scale + slack;
  size_t failures = 0;
  std::ostringstream message;
  for (size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(error <= limit)) {
      if (failures < 5) {
        message << "\n  [" << i << "] got " << got[i] << ", want " << want[i] << " (error " << error
                << " > " << limit << ")";
      }
      ++failures;
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << failures << " of " << got.size() << " elements off (max |want| " << scale << ", slack "
         << slack << ")" << message.str();
}

// Exact values, for the hand-computed tests (their expectations are written as floats).
inline ::testing::AssertionResult near_values(const std::vector<float>& got,
                                              const std::vector<float>& want,
                                              double tolerance = kRelativeTolerance) {
  return near_reference(got, std::vector<double>(want.begin(), want.end()), tolerance);
}

// The activations written out again in double from their definitions (not from apply()).
inline double reference_apply(const ElementwiseOp& op, double x) {
  const double parameter = op.parameter;
  const double pi = 3.14159265358979323846;
  switch (op.kind) {
    case ElementwiseKind::ReLU: return x > 0.0 ? x : 0.0;
    case ElementwiseKind::LeakyReLU: return x >= 0.0 ? x : parameter * x;
    case ElementwiseKind::GeluErf: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case ElementwiseKind::GeluTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
    case ElementwiseKind::SiLU: return x / (1.0 + std::exp(-x));
    case ElementwiseKind::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case ElementwiseKind::Tanh: return std::tanh(x);
    case ElementwiseKind::Scale: return x * parameter;
  }
  ADD_FAILURE() << "unknown ElementwiseKind";
  return x;
}

inline double reference_apply(const Epilogue& epilogue, double x) {
  for (const ElementwiseOp& op : epilogue) x = reference_apply(op, x);
  return x;
}

// Expected outputs of a kernel that ends in an epilogue. exact: the value before the epilogue
// (computed in double by the test) through reference_apply in double. plain: the same value
// rounded to float through apply() in float, the best any float kernel built on apply() can do.
// Where apply()'s float formula loses digits (GELU's 1 + tanh(...) near -1 cancels, so
// GELU(-4) has few correct bits relative to itself), the kernel may be off by as much as that
// baseline: near_expected allows twice the plain pipeline's worst error on top of the relative
// tolerance (flash-attention's rule). Elsewhere the baseline error is about one float rounding.
class Expected {
 public:
  void add(double before_epilogue, const Epilogue& epilogue) {
    const double exact = reference_apply(epilogue, before_epilogue);
    const double plain = apply(epilogue, static_cast<float>(before_epilogue));
    exact_.push_back(exact);
    // A NaN or infinity in the baseline would make the slack meaningless; the exact values
    // stay strict.
    if (std::isfinite(plain) && std::isfinite(exact)) {
      baseline_error_ = std::max(baseline_error_, std::fabs(plain - exact));
    }
  }
  const std::vector<double>& exact() const { return exact_; }
  double baseline_error() const { return baseline_error_; }

 private:
  std::vector<double> exact_;
  double baseline_error_ = 0.0;
};

inline ::testing::AssertionResult near_expected(const std::vector<float>& got,
                                                const Expected& expected,
                                                double tolerance = kRelativeTolerance) {
  return near_reference(got, expected.exact(), tolerance, 2.0 * expected.baseline_error());
}

// Epilogues the randomized tests cycle through: none, each kind alone, and chains.
inline std::vector<Epilogue> test_epilogues() {
  using K = ElementwiseKind;
  return {
      {},
      {{K::ReLU}},
      {{K::LeakyReLU, 0.1f}},
      {{K::GeluErf}},
      {{K::GeluTanh}},
      {{K::SiLU}},
      {{K::Sigmoid}},
      {{K::Tanh}},
      {{K::Scale, -2.5f}},
      {{K::Scale, 0.5f}, {K::GeluErf}, {K::LeakyReLU, 0.25f}},
  };
}

inline std::string describe(const Epilogue& epilogue) {
  static const char* const names[] = {"ReLU", "LeakyReLU", "GeluErf", "GeluTanh",
                                      "SiLU", "Sigmoid",   "Tanh",    "Scale"};
  std::string text = "[";
  for (const ElementwiseOp& op : epilogue) {
    if (text.size() > 1) text += ", ";
    text += names[static_cast<int>(op.kind)];
  }
  return text + "]";
}

// Runs a test body once per instruction set of the matrix-multiply core (Linear and Conv2d):
// the parameter is forced for the test and the previous choice restored after it; an instruction
// set this CPU lacks is skipped.
class GemmIsaTest : public ::testing::TestWithParam<GemmIsa> {
 protected:
  void SetUp() override {
    previous_ = gemm_isa();
    if (!force_gemm_isa(GetParam())) {
      GTEST_SKIP() << gemm_isa_name(GetParam()) << " is not supported by this CPU";
    }
  }
  void TearDown() override { force_gemm_isa(previous_); }

 private:
  GemmIsa previous_ = GemmIsa::Baseline;
};

inline std::string isa_test_name(const ::testing::TestParamInfo<GemmIsa>& info) {
  switch (info.param) {
    case GemmIsa::Baseline: return "Baseline";
    case GemmIsa::Avx2Fma: return "Avx2Fma";
    case GemmIsa::Neon: return "Neon";
  }
  return "Unknown";
}

// Every instruction set of the matrix-multiply core; the tests skip those this CPU lacks.
inline const GemmIsa kEveryGemmIsa[] = {GemmIsa::Baseline, GemmIsa::Avx2Fma, GemmIsa::Neon};

}  // namespace fusednn::cpu::testing

namespace fusednn::cpu {
// Names the parameter in test listings (CTest shows it).
inline void PrintTo(GemmIsa isa, std::ostream* os) { *os << gemm_isa_name(isa); }
}  // namespace fusednn::cpu
