// SPDX-License-Identifier: Apache-2.0
// 01_cpp_raii: the header-only C++ wrapper (fusednn/fusednn.hpp).
//
// fusednn::Model and fusednn::Context own their C handles and free them in their destructors;
// every failing call throws fusednn::Error, which carries the fdnn_status and the library's
// message. This sample builds a model from a spec held in a string, sets its weights from
// std::vectors, runs it through the model and through a context of its own, checks the output
// against values worked out by hand, and catches two errors on purpose.
//
//   fc1 = Linear(3 -> 2)  weight [[1, 2, 3], [-1, 0, 1]]  bias [0.5, -1]
//   ReLU
//   fc2 = Linear(2 -> 2)  weight [[1, 1], [2, -1]]        bias [0, 0.25]
//
//   x = [ 1,  2,  3]: fc1 = [14.5,  1] -> ReLU [14.5, 1] -> fc2 = [15.5, 28.25]
//   x = [-3,  1,  0]: fc1 = [-0.5,  2] -> ReLU [0,    2] -> fc2 = [2,    -1.75]
//   x = [-1, -1, -1]: fc1 = [-5.5, -1] -> ReLU [0,    0] -> fc2 = [0,     0.25]
//
// Exit status 0 when every check passes, 1 otherwise.
#include <fusednn/fusednn.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

const char* const kSpec = R"({
  "fusednn": 1,
  "name": "hello",
  "input": {"shape": [3]},
  "layers": [
    {"type": "Linear", "name": "fc1", "in_features": 3, "out_features": 2},
    {"type": "ReLU"},
    {"type": "Linear", "name": "fc2", "in_features": 2, "out_features": 2}
  ]
})";

const std::vector<float> kInput = {1, 2, 3, /**/ -3, 1, 0, /**/ -1, -1, -1};
const std::vector<float> kExpected = {15.5f, 28.25f, /**/ 2.0f, -1.75f, /**/ 0.0f, 0.25f};

int count_mismatches(const char* what, const std::vector<float>& output) {
  if (output.size() != kExpected.size()) {
    std::fprintf(stderr, "%s: %zu outputs, expected %zu\n", what, output.size(), kExpected.size());
    return 1;
  }
  int mismatches = 0;
  for (size_t i = 0; i < output.size(); ++i) {
    if (std::fabs(output[i] - kExpected[i]) > 1e-6f) {
      std::fprintf(stderr, "%s: output[%zu] = %g, expected %g\n", what, i, output[i], kExpected[i]);
      ++mismatches;
    }
  }
  std::printf("%s: %s\n", what, mismatches ? "MISMATCH" : "ok");
  return mismatches;
}

// Runs `call`, which must throw fusednn::Error with `expected`; returns the number of failures.
template <typename Call>
int expect_error(const char* what, fdnn_status expected, Call call) {
  try {
    call();
  } catch (const fusednn::Error& error) {
    std::printf("%s -> caught fusednn::Error\n  what(): %s\n", what, error.what());
    if (error.status() == expected) return 0;
    std::fprintf(stderr, "%s: status %s, expected %s\n", what, fdnn_status_string(error.status()),
                 fdnn_status_string(expected));
    return 1;
  }
  std::fprintf(stderr, "%s: no error was thrown\n", what);
  return 1;
}

int run_sample() {
  // Everything below is freed when it goes out of scope, on the error paths too.
  fusednn::Model model =
      fusednn::Model::from_spec(kSpec, fusednn::ModelOptions().max_batch(16).cpu_threads(1));

  int failures = 0;
  // A mistake a caller makes easily: the weight shape transposed. Nothing is stored.
  failures +=
      expect_error("set_weight(\"fc1.weight\", shape {3, 2})", FDNN_STATUS_WEIGHT_MISMATCH, [&] {
        model.set_weight("fc1.weight", {1, -1, 2, 0, 3, 1}, {3, 2});
      });

  model.set_weight("fc1.weight", {1, 2, 3, -1, 0, 1}, {2, 3});
  model.set_weight("fc1.bias", {0.5f, -1.0f}, {2});
  model.set_weight("fc2.weight", {1, 1, 2, -1}, {2, 2});
  model.set_weight("fc2.bias", {0.0f, 0.25f}, {2});
  model.validate();

  for (const fdnn_layer_info& layer : model.layers()) {
    std::printf("layer %-7s %-7s %lld parameters\n", layer.name, layer.type,
                static_cast<long long>(layer.parameter_count));
  }

  // Model::run may be called from many threads at once; a Context is one thread's own.
  failures += count_mismatches("Model::run", model.run(3, kInput));
  {
    fusednn::Context context = model.create_context();
    failures += count_mismatches("Context::run", context.run(3, kInput));
  }  // the context is destroyed here

  // The first run froze the weights: setting one now is refused.
  failures += expect_error("set_weight after the first run", FDNN_STATUS_INVALID_STATE, [&] {
    model.set_weight("fc2.bias", {1.0f, 1.0f}, {2});
  });
  return failures;
}

}  // namespace

int main() {
  std::printf("fusednn %s\n", fdnn_version_string());
  int failures = 0;
  try {
    failures = run_sample();
  } catch (const fusednn::Error& error) {
    // An unexpected failure: the status and the library's message say what went wrong.
    std::fprintf(stderr, "FAIL: %s\n", error.what());
    return 1;
  }
  if (failures) {
    std::fprintf(stderr, "FAIL: %d check(s) failed\n", failures);
    return 1;
  }
  std::printf("PASS: 01_cpp_raii\n");
  return 0;
}
