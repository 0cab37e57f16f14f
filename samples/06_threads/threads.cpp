// SPDX-License-Identifier: Apache-2.0
// 06_threads: one model, many threads.
//
// The threading rules of the C API (fusednn.h), which the C++ wrapper keeps:
//   * set or load every weight first: loading must not overlap any other call on the model;
//   * then any number of threads may call Model::run (fdnn_model_run) on the same model at once:
//     each call borrows an execution context from the model's pool;
//   * a Context (fdnn_context) is one thread's: create one per thread to skip the pool.
//
// Eight threads run the same 8 -> 16 -> 4 MLP with batches of 1 to 32 samples; half of them go
// through Model::run, the other half through a Context of their own. Every output is compared
// with a plain loop over the same weights (no fusednn involved). The weights and inputs are
// multiples of 1/8 and 1/4, so every product and sum is exact in float32 and the results must
// match to the last bit (a tolerance of 1e-5 is allowed anyway).
//
// Exit status 0 when every run of every thread matches, 1 otherwise.
#include <fusednn/fusednn.hpp>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kInputs = 8;
constexpr int kHidden = 16;
constexpr int kOutputs = 4;
constexpr int kMaxBatch = 32;
constexpr int kThreads = 8;
constexpr int kRunsPerThread = 300;

const char* const kSpec = R"({
  "fusednn": 1,
  "name": "threads_mlp",
  "input": {"shape": [8]},
  "layers": [
    {"type": "Linear", "name": "fc1", "in_features": 8, "out_features": 16},
    {"type": "ReLU"},
    {"type": "Linear", "name": "fc2", "in_features": 16, "out_features": 4}
  ]
})";

// The weights, from formulas: small multiples of 1/8 and 1/4, positive and negative.
float fc1_weight(int out, int in) { return static_cast<float>((out * 3 + in * 5) % 7 - 3) / 8; }
float fc1_bias(int out) { return static_cast<float>(out % 3 - 1) / 2; }
float fc2_weight(int out, int in) { return static_cast<float>((out + 2 * in) % 5 - 2) / 4; }
float fc2_bias(int out) { return static_cast<float>(out) / 8; }

// Input feature `feature` of sample `sample` in run `run` of thread `thread`: -4 to 4 by 1/4.
float input_value(int thread, int run, int sample, int feature) {
  return static_cast<float>((thread * 13 + run * 7 + sample * 5 + feature * 3) % 33 - 16) / 4;
}

// The network written out as loops: the independent reference.
void reference(const float* x, float* y) {
  float hidden[kHidden];
  for (int h = 0; h < kHidden; ++h) {
    float sum = fc1_bias(h);
    for (int i = 0; i < kInputs; ++i) sum += fc1_weight(h, i) * x[i];
    hidden[h] = sum > 0 ? sum : 0;
  }
  for (int o = 0; o < kOutputs; ++o) {
    float sum = fc2_bias(o);
    for (int h = 0; h < kHidden; ++h) sum += fc2_weight(o, h) * hidden[h];
    y[o] = sum;
  }
}

fusednn::Model build_model() {
  // One thread per run: the parallelism comes from the callers' threads.
  fusednn::Model model =
      fusednn::Model::from_spec(kSpec, fusednn::ModelOptions().max_batch(kMaxBatch).cpu_threads(1));
  std::vector<float> w1, b1, w2, b2;
  for (int o = 0; o < kHidden; ++o) {
    for (int i = 0; i < kInputs; ++i) w1.push_back(fc1_weight(o, i));
    b1.push_back(fc1_bias(o));
  }
  for (int o = 0; o < kOutputs; ++o) {
    for (int h = 0; h < kHidden; ++h) w2.push_back(fc2_weight(o, h));
    b2.push_back(fc2_bias(o));
  }
  // All weights are set here, before any thread starts.
  model.set_weight("fc1.weight", w1, {kHidden, kInputs});
  model.set_weight("fc1.bias", b1, {kHidden});
  model.set_weight("fc2.weight", w2, {kOutputs, kHidden});
  model.set_weight("fc2.bias", b2, {kOutputs});
  model.validate();
  return model;
}

struct ThreadResult {
  long runs = 0;
  long mismatches = 0;
  std::string error;  // a fusednn::Error caught on the thread (exceptions must not escape it)
};

void worker(fusednn::Model& model, int thread, bool own_context, ThreadResult& result) {
  try {
    // A context is created on (or handed to) the one thread that uses it.
    std::vector<fusednn::Context> context;
    if (own_context) context.push_back(model.create_context());
    std::vector<float> input;
    float want[kOutputs];
    for (int run = 0; run < kRunsPerThread; ++run) {
      const int batch = 1 + (thread * 7 + run) % kMaxBatch;
      input.resize(static_cast<size_t>(batch) * kInputs);
      for (int s = 0; s < batch; ++s)
        for (int f = 0; f < kInputs; ++f) input[s * kInputs + f] = input_value(thread, run, s, f);
      const std::vector<float> output =
          own_context ? context[0].run(batch, input) : model.run(batch, input);
      ++result.runs;
      for (int s = 0; s < batch; ++s) {
        reference(&input[s * kInputs], want);
        for (int o = 0; o < kOutputs; ++o) {
          if (std::fabs(output[s * kOutputs + o] - want[o]) > 1e-5f * (1 + std::fabs(want[o]))) {
            ++result.mismatches;
          }
        }
      }
    }
  } catch (const fusednn::Error& error) {
    result.error = error.what();
  }
}

}  // namespace

int main() {
  std::printf("fusednn %s: %d threads x %d runs, batches of 1 to %d\n", fdnn_version_string(),
              kThreads, kRunsPerThread, kMaxBatch);
  try {
    fusednn::Model model = build_model();

    std::vector<ThreadResult> results(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      const bool own_context = t % 2 == 1;
      threads.emplace_back(worker, std::ref(model), t, own_context, std::ref(results[t]));
    }
    for (std::thread& thread : threads) thread.join();

    long runs = 0, mismatches = 0, errors = 0;
    for (int t = 0; t < kThreads; ++t) {
      const ThreadResult& r = results[t];
      std::printf("thread %d (%s): %ld runs, %ld mismatches%s%s\n", t,
                  t % 2 ? "own Context" : "Model::run ", r.runs, r.mismatches,
                  r.error.empty() ? "" : ", error: ", r.error.c_str());
      runs += r.runs;
      mismatches += r.mismatches;
      errors += !r.error.empty();
    }
    if (mismatches || errors || runs != static_cast<long>(kThreads) * kRunsPerThread) {
      std::fprintf(stderr, "FAIL: %ld runs, %ld mismatching values, %ld threads with errors\n",
                   runs, mismatches, errors);
      return 1;
    }
  } catch (const fusednn::Error& error) {
    std::fprintf(stderr, "FAIL: %s\n", error.what());
    return 1;
  }
  std::printf("PASS: 06_threads\n");
  return 0;
}
