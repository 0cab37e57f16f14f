// SPDX-License-Identifier: Apache-2.0
// NaN and infinities as PyTorch has them, on the CPU backend through the public API: every
// activation, pooling, LayerNorm, Softmax and a Linear-ReLU chain, on inputs holding NaN, +Inf
// and -Inf next to ordinary values.
//
// Two references, each independent of the library:
// - always: PyTorch's documented formulas evaluated here in double (torch.relu keeps NaN, max
//   pooling propagates it, softmax is exp(x - max) / sum, ...). The output must be NaN exactly
//   where the reference is, the same infinity where it is infinite, and within 1e-5 elsewhere.
// - when tests/fixtures/nan_inf/nan_inf.safetensors exists: PyTorch's own outputs, written by
//   tests/fixtures/nan_inf/make_nan_inf_fixtures.py from the same cases ("<case>.input" and
//   "<case>.output"), compared the same way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "fusednn/fusednn.h"
#include "graph/safetensors_file.hpp"

namespace {

constexpr double kTolerance = 1e-5;
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
const float kNaNf = std::numeric_limits<float>::quiet_NaN();

const std::string kFixture =
    std::string(FUSEDNN_TEST_FIXTURES_DIR) + "/nan_inf/nan_inf.safetensors";

// 16 values: the three specials, signed zeros, ordinary and large magnitudes.
const std::vector<float> kSpecials = {kNaNf, kInf,  -kInf,  0.0f,   -0.0f,  1.0f,    -1.0f, 2.5f,
                                      -3.5f, 30.0f, -30.0f, 1e-30f, 100.0f, -100.0f, 0.5f,  -0.5f};

// Four rows of 8: one with a NaN, one with +Inf, one with -Inf, one finite.
std::vector<float> rows_of_specials() {
  std::vector<float> x(32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 5) % 13) / 4.0f - 1.5f;
  x[3] = kNaNf;
  x[8 + 5] = kInf;
  x[16 + 1] = -kInf;
  return x;
}

// The deterministic weights the fixture script uses too: nonzero, mixed signs.
std::vector<float> weights(size_t count, size_t salt) {
  std::vector<float> w(count);
  for (size_t i = 0; i < count; ++i) {
    w[i] = (static_cast<float>((i * 7 + salt * 3) % 11) - 5.5f) / 8.0f;
  }
  return w;
}

double relu(double x) { return std::isnan(x) ? x : (x > 0 ? x : 0.0); }

struct Case {
  std::string name;
  std::string layers;                // the spec's layer list
  std::vector<int64_t> input_shape;  // per sample
  int64_t batch = 1;
  std::vector<float> input;                                   // batch x input shape
  std::map<std::string, std::vector<int64_t>> weight_shapes;  // name -> shape (weights(.., i))
  std::function<std::vector<double>(const std::vector<float>&)> reference;
};

std::vector<double> map_each(const std::vector<float>& x, double (*f)(double)) {
  std::vector<double> y;
  for (float v : x) y.push_back(f(v));
  return y;
}

// Max or average pooling of a 4 x 4 plane (one channel), no padding unless said.
std::vector<double> pool(const std::vector<float>& x, int kernel, int stride, int padding,
                         bool max) {
  const int size = 4;
  const int out = (size + 2 * padding - kernel) / stride + 1;
  std::vector<double> y;
  for (int oh = 0; oh < out; ++oh) {
    for (int ow = 0; ow < out; ++ow) {
      double acc = max ? -INFINITY : 0.0;
      for (int kh = 0; kh < kernel; ++kh) {
        for (int kw = 0; kw < kernel; ++kw) {
          const int ih = oh * stride - padding + kh, iw = ow * stride - padding + kw;
          if (ih < 0 || iw < 0 || ih >= size || iw >= size) continue;
          const double v = x[ih * size + iw];
          if (max) {
            if (std::isnan(v) || v > acc) acc = std::isnan(acc) ? acc : v;
          } else {
            acc += v;
          }
        }
      }
      y.push_back(max ? acc : acc / (kernel * kernel));
    }
  }
  return y;
}

// Per row of `row`: LayerNorm without affine (biased variance, eps 1e-5) or Softmax.
std::vector<double> per_row(const std::vector<float>& x, size_t row, bool softmax) {
  std::vector<double> y;
  for (size_t r = 0; r < x.size() / row; ++r) {
    const float* v = x.data() + r * row;
    if (softmax) {
      double m = -INFINITY;
      for (size_t i = 0; i < row; ++i) m = std::isnan(v[i]) || v[i] > m ? v[i] : m;
      double sum = 0;
      for (size_t i = 0; i < row; ++i) sum += std::exp(v[i] - m);
      for (size_t i = 0; i < row; ++i) y.push_back(std::exp(v[i] - m) / sum);
    } else {
      double mean = 0, variance = 0;
      for (size_t i = 0; i < row; ++i) mean += v[i];
      mean /= row;
      for (size_t i = 0; i < row; ++i) variance += (v[i] - mean) * (v[i] - mean);
      variance /= row;
      for (size_t i = 0; i < row; ++i) y.push_back((v[i] - mean) / std::sqrt(variance + 1e-5));
    }
  }
  return y;
}

std::vector<Case> cases() {
  std::vector<Case> all;
  auto activation = [&](const std::string& name, const std::string& layer, double (*f)(double)) {
    Case c;
    c.name = name;
    c.layers = layer;
    c.input_shape = {16};
    c.input = kSpecials;
    c.reference = [f](const std::vector<float>& x) { return map_each(x, f); };
    all.push_back(c);
  };
  activation("relu", R"({"type": "ReLU"})", relu);
  activation("leaky_relu", R"({"type": "LeakyReLU", "negative_slope": 0.125})",
             [](double x) { return x >= 0 ? x : x * 0.125; });
  activation("gelu", R"({"type": "GELU"})",
             [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); });
  activation("gelu_tanh", R"({"type": "GELU", "approximate": "tanh"})", [](double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  });
  activation("silu", R"({"type": "SiLU"})", [](double x) { return x / (1 + std::exp(-x)); });
  activation("sigmoid", R"({"type": "Sigmoid"})", [](double x) { return 1 / (1 + std::exp(-x)); });
  activation("tanh", R"({"type": "Tanh"})", [](double x) { return std::tanh(x); });

  auto pooling = [&](const std::string& name, const std::string& layer, int kernel, int stride,
                     int padding, bool max) {
    Case c;
    c.name = name;
    c.layers = layer;
    c.input_shape = {1, 4, 4};
    c.input = kSpecials;
    c.reference = [=](const std::vector<float>& x) {
      return pool(x, kernel, stride, padding, max);
    };
    all.push_back(c);
  };
  pooling("max_pool", R"({"type": "MaxPool2d", "kernel_size": 2})", 2, 2, 0, true);
  pooling("max_pool_padded",
          R"({"type": "MaxPool2d", "kernel_size": 3, "stride": 1, "padding": 1})", 3, 1, 1, true);
  pooling("avg_pool", R"({"type": "AvgPool2d", "kernel_size": 2})", 2, 2, 0, false);

  for (const bool softmax : {false, true}) {
    Case c;
    c.name = softmax ? "softmax" : "layer_norm";
    c.layers = softmax ? R"({"type": "Softmax", "dim": -1})"
                       : R"({"type": "LayerNorm", "normalized_shape": [8],)"
                         R"( "elementwise_affine": false})";
    c.input_shape = {8};
    c.batch = 4;
    c.input = rows_of_specials();
    c.reference = [softmax](const std::vector<float>& x) { return per_row(x, 8, softmax); };
    all.push_back(c);
  }

  // Linear 8 -> 6, ReLU, Linear 6 -> 3: a NaN or an infinity in a sample reaches every output of
  // that sample (where ReLU turned NaN into 0, the second layer gave finite, input-blind values).
  Case mlp;
  mlp.name = "mlp_relu";
  mlp.layers = R"({"type": "Linear", "name": "fc1", "in_features": 8, "out_features": 6},)"
               R"( {"type": "ReLU"},)"
               R"( {"type": "Linear", "name": "fc2", "in_features": 6, "out_features": 3})";
  mlp.input_shape = {8};
  mlp.batch = 4;
  mlp.input = rows_of_specials();
  mlp.weight_shapes = {
      {"fc1.weight", {6, 8}}, {"fc1.bias", {6}}, {"fc2.weight", {3, 6}}, {"fc2.bias", {3}}};
  mlp.reference = [](const std::vector<float>& x) {
    const std::vector<float> w1 = weights(48, 0), b1 = weights(6, 1), w2 = weights(18, 2),
                             b2 = weights(3, 3);
    std::vector<double> y;
    for (size_t s = 0; s < 4; ++s) {
      double hidden[6];
      for (int o = 0; o < 6; ++o) {
        double sum = b1[o];
        for (int i = 0; i < 8; ++i) sum += double(w1[o * 8 + i]) * x[s * 8 + i];
        hidden[o] = relu(sum);
      }
      for (int o = 0; o < 3; ++o) {
        double sum = b2[o];
        for (int i = 0; i < 6; ++i) sum += double(w2[o * 6 + i]) * hidden[i];
        y.push_back(sum);
      }
    }
    return y;
  };
  all.push_back(mlp);
  return all;
}

// The weights' salts follow the order of weight_shapes' names (fc1.bias, fc1.weight, ...) in
// the fixture script too: salt = the tensor's index in declaration order, given here.
size_t salt_of(const std::string& name) {
  static const std::map<std::string, size_t> salts = {
      {"fc1.weight", 0}, {"fc1.bias", 1}, {"fc2.weight", 2}, {"fc2.bias", 3}};
  return salts.at(name);
}

std::vector<float> run_on_cpu(const Case& c) {
  std::string shape;
  for (size_t i = 0; i < c.input_shape.size(); ++i) {
    shape += (i ? ", " : "") + std::to_string(c.input_shape[i]);
  }
  const std::string spec = R"({"fusednn": 1, "name": ")" + c.name + R"(", "input": {"shape": [)" +
                           shape + R"(]}, "layers": [)" + c.layers + "]}";
  fdnn_model_options options;
  fdnn_model_options_init(&options, sizeof options);
  options.max_batch = c.batch;
  options.cpu_threads = 1;
  fdnn_model* model = nullptr;
  EXPECT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  if (model == nullptr) return {};
  for (const auto& [name, tensor_shape] : c.weight_shapes) {
    int64_t count = 1;
    for (int64_t extent : tensor_shape) count *= extent;
    const std::vector<float> values = weights(static_cast<size_t>(count), salt_of(name));
    EXPECT_EQ(fdnn_model_set_weight(model, name.c_str(), FDNN_DTYPE_FLOAT32, values.data(),
                                    tensor_shape.data(), static_cast<int32_t>(tensor_shape.size())),
              FDNN_STATUS_OK)
        << fdnn_last_error_message();
  }
  fdnn_shape output_shape;
  fdnn_model_output_shape(model, &output_shape);
  size_t per_sample = 1;
  for (int32_t i = 0; i < output_shape.rank; ++i) per_sample *= output_shape.dims[i];
  std::vector<float> output(per_sample * c.batch, 12345.0f);  // poisoned
  EXPECT_EQ(
      fdnn_model_run(model, c.batch, c.input.data(), c.input.size(), output.data(), output.size()),
      FDNN_STATUS_OK)
      << fdnn_last_error_message();
  fdnn_model_destroy(model);
  return output;
}

// NaN exactly where expected is NaN, the same infinity, and within kTolerance relative to
// max(1, |expected|) elsewhere.
template <typename Expected>
void expect_same_specials(const std::vector<float>& got, const std::vector<Expected>& expected,
                          const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = static_cast<double>(expected[i]);
    const double g = got[i];
    if (std::isnan(e)) {
      EXPECT_TRUE(std::isnan(g)) << what << " [" << i << "]: " << g << ", expected NaN";
    } else if (std::isinf(e)) {
      EXPECT_EQ(g, e) << what << " [" << i << "]";
    } else {
      EXPECT_TRUE(std::isfinite(g)) << what << " [" << i << "]: " << g << ", expected " << e;
      EXPECT_LE(std::fabs(g - e), kTolerance * std::max(1.0, std::fabs(e)))
          << what << " [" << i << "]: " << g << ", expected " << e;
    }
  }
}

TEST(NanInf, CpuMatchesPyTorchFormulas) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    expect_same_specials(run_on_cpu(c), c.reference(c.input), c.name + " vs formula");
  }
}

// The case inputs hold each special where the test means them to (a case that lost its NaN
// would pass without checking anything).
TEST(NanInf, EveryCaseFeedsNanAndBothInfinities) {
  for (const Case& c : cases()) {
    EXPECT_TRUE(std::any_of(c.input.begin(), c.input.end(), [](float v) { return std::isnan(v); }))
        << c.name;
    EXPECT_NE(std::find(c.input.begin(), c.input.end(), kInf), c.input.end()) << c.name;
    EXPECT_NE(std::find(c.input.begin(), c.input.end(), -kInf), c.input.end()) << c.name;
  }
}

TEST(NanInf, CpuMatchesPyTorchFixture) {
  if (!std::filesystem::exists(kFixture)) {
    GTEST_SKIP() << kFixture << " is absent: run tests/fixtures/nan_inf/make_nan_inf_fixtures.py "
                 << "(needs torch) to compare with PyTorch's own outputs";
  }
  std::map<std::string, fusednn::NamedTensor> fixture;
  for (auto& tensor : fusednn::read_safetensors(kFixture).tensors) fixture[tensor.name] = tensor;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(fixture.count(c.name + ".input") && fixture.count(c.name + ".output"))
        << "the fixture has no case " << c.name << "; regenerate it";
    // The fixture was made from the same input (NaN compared as NaN).
    expect_same_specials(fixture.at(c.name + ".input").values, c.input, c.name + " input");
    std::vector<float> expected = fixture.at(c.name + ".output").values;
    if (c.name == "gelu") {
      // PyTorch's CPU kernel gives NaN for GELU(+inf), where the function's value (and
      // PyTorch's own formula x * Phi(x)) is +inf; fusednn gives +inf. The one divergence,
      // checked here so that any other stays a failure.
      for (size_t i = 0; i < expected.size(); ++i) {
        if (c.input[i] == kInf && std::isnan(expected[i])) expected[i] = kInf;
      }
    }
    expect_same_specials(run_on_cpu(c), expected, c.name + " vs PyTorch");
  }
}

}  // namespace
