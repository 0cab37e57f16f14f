// SPDX-License-Identifier: Apache-2.0
// The runtime alone, on the CPU backend: a context's lifetime against its model's, a context's
// workspace reused across batch sizes, contexts run from several threads at once, and the
// model's context pool. Expected outputs come from a reference forward pass written here in
// double precision, or, where bits must match, from a single-threaded run of the same plan.
#include "runtime/loaded_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/half_float.hpp"
#include "graph/spec_parser.hpp"

namespace fusednn {
namespace {

// A Linear + ReLU + Linear network: in -> hidden -> out, weights as PyTorch stores them.
struct SmallMlp {
  int64_t in = 0, hidden = 0, out = 0;
  std::vector<float> w1, b1, w2, b2;

  std::string spec() const {
    return R"({"fusednn": 1, "name": "runtime_test", "input": {"shape": [)" + std::to_string(in) +
           R"(]}, "layers": [
        {"type": "Linear", "name": "fc1", "in_features": )" +
           std::to_string(in) + R"(, "out_features": )" + std::to_string(hidden) + R"(},
        {"type": "ReLU", "name": "act"},
        {"type": "Linear", "name": "fc2", "in_features": )" +
           std::to_string(hidden) + R"(, "out_features": )" + std::to_string(out) +
           R"(}], "output": "fc2"})";
  }

  std::vector<NamedTensor> tensors() const {
    auto tensor = [](const std::string& name, Shape shape, const std::vector<float>& values) {
      NamedTensor t;
      t.name = name;
      t.dtype = "F32";
      t.shape = std::move(shape);
      t.values = values;
      t.source = "runtime_test";
      return t;
    };
    return {tensor("fc1.weight", {hidden, in}, w1), tensor("fc1.bias", {hidden}, b1),
            tensor("fc2.weight", {out, hidden}, w2), tensor("fc2.bias", {out}, b2)};
  }

  // The reference: the same network in double precision, one sample after another.
  std::vector<double> reference(const std::vector<float>& x, int64_t batch) const {
    std::vector<double> y(static_cast<size_t>(batch * out));
    std::vector<double> h(static_cast<size_t>(hidden));
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t j = 0; j < hidden; ++j) {
        double sum = b1[j];
        for (int64_t k = 0; k < in; ++k) sum += double(w1[j * in + k]) * x[n * in + k];
        h[j] = sum > 0.0 ? sum : 0.0;
      }
      for (int64_t o = 0; o < out; ++o) {
        double sum = b2[o];
        for (int64_t j = 0; j < hidden; ++j) sum += double(w2[o * hidden + j]) * h[j];
        y[n * out + o] = sum;
      }
    }
    return y;
  }
};

// Weights and inputs on a grid of quarters, small enough that every product and sum is exact in
// float: the runtime's result must then equal the double reference exactly.
SmallMlp exact_mlp() {
  SmallMlp m;
  m.in = 3;
  m.hidden = 4;
  m.out = 2;
  m.w1 = {1, -2, 0.5f, 0.25f, 1, -1, -0.5f, 0, 2, 1.5f, 1, 1};
  m.b1 = {0.5f, -1, 0, 0.25f};
  m.w2 = {1, 2, -1, 0.5f, -0.25f, 1, 1, -2};
  m.b2 = {0, 1};
  return m;
}

// A wider network with random weights, where only bit-for-bit comparisons between runs apply.
SmallMlp random_mlp(uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  SmallMlp m;
  m.in = 48;
  m.hidden = 96;
  m.out = 10;
  auto fill = [&](size_t count) {
    std::vector<float> values(count);
    for (float& v : values) v = uniform(random);
    return values;
  };
  m.w1 = fill(static_cast<size_t>(m.hidden * m.in));
  m.b1 = fill(static_cast<size_t>(m.hidden));
  m.w2 = fill(static_cast<size_t>(m.out * m.hidden));
  m.b2 = fill(static_cast<size_t>(m.out));
  return m;
}

std::vector<float> quarter_inputs(int64_t count, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> quarters(-8, 8);
  std::vector<float> x(static_cast<size_t>(count));
  for (float& v : x) v = static_cast<float>(quarters(random)) / 4.0f;
  return x;
}

std::vector<float> random_inputs(int64_t count, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(count));
  for (float& v : x) v = uniform(random);
  return x;
}

std::unique_ptr<LoadedModel> make_model(const SmallMlp& mlp, int64_t max_batch) {
  ResolvedOptions options;
  options.max_batch = max_batch;
  options.device = FDNN_DEVICE_CPU;
  options.cpu_threads = 1;
  auto model =
      std::make_unique<LoadedModel>(parse_model_spec(mlp.spec(), "runtime_test.json"), options);
  model->accept_weights(mlp.tensors());
  return model;
}

// An output buffer of `capacity` floats, every one a NaN, so that whatever a run leaves
// unwritten shows.
std::vector<float> poisoned(size_t capacity) {
  return std::vector<float>(capacity, std::numeric_limits<float>::quiet_NaN());
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ---- Context lifetime ---------------------------------------------------------------------------

TEST(RuntimeContext, OutlivesItsModel) {
  const SmallMlp mlp = exact_mlp();
  auto model = make_model(mlp, 4);
  auto context = std::make_unique<RunContext>(model->prepare());
  model.reset();  // the context keeps the plan and the backend's weights alive

  const std::vector<float> x = quarter_inputs(3 * mlp.in, 1);
  std::vector<float> y = poisoned(static_cast<size_t>(3 * mlp.out));
  context->run(3, x.data(), x.size(), y.data(), y.size());
  const std::vector<double> expected = mlp.reference(x, 3);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(double(y[i]), expected[i]) << "output " << i;
}

TEST(RuntimeContext, ContextsOfOneModelShareItsPreparedPlan) {
  const SmallMlp mlp = exact_mlp();
  auto model = make_model(mlp, 2);
  const std::shared_ptr<const PreparedModel> first = model->prepare();
  const std::shared_ptr<const PreparedModel> second = model->prepare();
  EXPECT_EQ(first.get(), second.get());
  EXPECT_EQ(first->max_batch, 2);
  EXPECT_EQ(first->plan->steps.size(), 2u);
  // Once prepared, the weights are frozen.
  try {
    model->set_weight("fc2.bias", FDNN_DTYPE_FLOAT32, mlp.b2.data(), {2});
    ADD_FAILURE() << "set_weight succeeded on a prepared model";
  } catch (const StatusError& error) {
    EXPECT_EQ(error.status(), FDNN_STATUS_INVALID_STATE);
    EXPECT_NE(std::string(error.what()).find("frozen"), std::string::npos) << error.what();
  }
}

TEST(RuntimeContext, CannotBePreparedBeforeTheWeightsAreLoaded) {
  const SmallMlp mlp = exact_mlp();
  ResolvedOptions options;
  options.max_batch = 2;
  LoadedModel model(parse_model_spec(mlp.spec(), "runtime_test.json"), options);
  try {
    model.prepare();
    ADD_FAILURE() << "prepare() succeeded without weights";
  } catch (const StatusError& error) {
    EXPECT_EQ(error.status(), FDNN_STATUS_INVALID_STATE);
    EXPECT_NE(std::string(error.what()).find("fc1.weight"), std::string::npos) << error.what();
  }
}

// ---- Workspace reuse across batch sizes ---------------------------------------------------------

// One context runs batches of every size in a shuffled order: each result equals the reference
// and leaves the rest of the buffer untouched, so nothing a larger batch left in the workspace
// reaches a smaller one.
TEST(RuntimeContext, ReusesItsWorkspaceAcrossBatchSizes) {
  const SmallMlp mlp = exact_mlp();
  constexpr int64_t kMaxBatch = 8;
  auto model = make_model(mlp, kMaxBatch);
  RunContext context(model->prepare());
  uint32_t seed = 10;
  for (int64_t batch : {8, 1, 5, 8, 2, 1, 7, 3}) {
    const std::vector<float> x = quarter_inputs(batch * mlp.in, seed++);
    std::vector<float> y = poisoned(static_cast<size_t>(kMaxBatch * mlp.out));
    context.run(batch, x.data(), x.size(), y.data(), y.size());
    const std::vector<double> expected = mlp.reference(x, batch);
    for (int64_t i = 0; i < batch * mlp.out; ++i) {
      EXPECT_EQ(double(y[i]), expected[i]) << "batch " << batch << ", output " << i;
    }
    for (size_t i = static_cast<size_t>(batch * mlp.out); i < y.size(); ++i) {
      EXPECT_TRUE(std::isnan(y[i])) << "batch " << batch << " wrote past its output, at " << i;
    }
  }
}

// The same with random weights, bit for bit: a context that has run other batches gives what a
// fresh context gives.
TEST(RuntimeContext, AUsedContextGivesTheBitsOfAFreshOne) {
  const SmallMlp mlp = random_mlp(7);
  constexpr int64_t kMaxBatch = 16;
  auto model = make_model(mlp, kMaxBatch);
  RunContext used(model->prepare());
  uint32_t seed = 100;
  for (int64_t batch : {16, 3, 1, 9, 16, 4}) {
    const std::vector<float> x = random_inputs(batch * mlp.in, seed++);
    std::vector<float> from_used = poisoned(static_cast<size_t>(batch * mlp.out));
    std::vector<float> from_fresh = poisoned(static_cast<size_t>(batch * mlp.out));
    used.run(batch, x.data(), x.size(), from_used.data(), from_used.size());
    RunContext fresh(model->prepare());
    fresh.run(batch, x.data(), x.size(), from_fresh.data(), from_fresh.size());
    EXPECT_TRUE(same_bits(from_used, from_fresh)) << "batch " << batch;
    const std::vector<double> expected = mlp.reference(x, batch);
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_NEAR(from_used[i], expected[i], 1e-5 * (1.0 + std::fabs(expected[i])));
    }
  }
}

// Typed runs convert in buffers the context sizes for max_batch on first use and keeps: a float16
// output is the float32 output rounded, at every batch size in turn.
TEST(RuntimeContext, TypedRunsReuseTheirConversionBuffersAcrossBatchSizes) {
  const SmallMlp mlp = random_mlp(8);
  constexpr int64_t kMaxBatch = 6;
  auto model = make_model(mlp, kMaxBatch);
  RunContext context(model->prepare());
  uint32_t seed = 200;
  for (int64_t batch : {2, 6, 1, 4}) {
    const std::vector<float> x = random_inputs(batch * mlp.in, seed++);
    std::vector<float> y(static_cast<size_t>(batch * mlp.out));
    context.run(batch, x.data(), x.size(), y.data(), y.size());
    std::vector<uint16_t> halves(static_cast<size_t>(kMaxBatch * mlp.out), 0xFFFF);
    TypedRun run;
    run.batch = batch;
    run.input = x.data();
    run.input_dtype = FDNN_DTYPE_FLOAT32;
    run.input_count = x.size();
    run.output = halves.data();
    run.output_dtype = FDNN_DTYPE_FLOAT16;
    run.output_capacity = halves.size();
    context.run_typed(run);
    for (size_t i = 0; i < y.size(); ++i) {
      EXPECT_EQ(halves[i], float_to_half(y[i])) << "batch " << batch << ", output " << i;
    }
    for (size_t i = y.size(); i < halves.size(); ++i) EXPECT_EQ(halves[i], 0xFFFF);
  }
}

// ---- Concurrency --------------------------------------------------------------------------------

struct Job {
  int64_t batch;
  std::vector<float> input;
  std::vector<float> expected;  // from one context on one thread
};

std::vector<Job> jobs_for(const SmallMlp& mlp, LoadedModel& model) {
  std::vector<Job> jobs;
  RunContext single(model.prepare());
  uint32_t seed = 300;
  for (int64_t batch : {1, 32, 5, 17, 2, 32, 9}) {
    Job job{batch, random_inputs(batch * mlp.in, seed++), {}};
    job.expected.resize(static_cast<size_t>(batch * mlp.out));
    single.run(batch, job.input.data(), job.input.size(), job.expected.data(), job.expected.size());
    jobs.push_back(std::move(job));
  }
  return jobs;
}

constexpr int kThreads = 4;
constexpr int kRounds = 5;

// Runs every job kRounds times on each of kThreads threads, each thread in its own order
// (job j of round r is jobs[(j * stride + t) % size]); a thread runs through the runner that
// make_runner(t) gives it. Expects every output bit for bit equal to the job's expected one.
template <typename MakeRunner>
void expect_same_bits_on_every_thread(const std::vector<Job>& jobs, size_t stride,
                                      MakeRunner make_runner) {
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto run = make_runner(t);
      for (int round = 0; round < kRounds; ++round) {
        for (size_t j = 0; j < jobs.size(); ++j) {
          const Job& job = jobs[(j * stride + static_cast<size_t>(t)) % jobs.size()];
          std::vector<float> y = poisoned(job.expected.size());
          run(job, y);
          if (!same_bits(y, job.expected)) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST(RuntimeConcurrency, ContextsOnSeveralThreadsGiveTheBitsOfASingleThreadedRun) {
  const SmallMlp mlp = random_mlp(9);
  auto model = make_model(mlp, 32);
  const std::vector<Job> jobs = jobs_for(mlp, *model);
  // Each thread its own context.
  expect_same_bits_on_every_thread(jobs, 1, [&](int) {
    return [context = std::make_shared<RunContext>(model->prepare())](const Job& job,
                                                                      std::vector<float>& y) {
      context->run(job.batch, job.input.data(), job.input.size(), y.data(), y.size());
    };
  });
}

// LoadedModel::run borrows a context from the model's pool (making one when all are busy) and
// returns it: runs from several threads at once match the single-threaded bits.
TEST(RuntimeConcurrency, ThePooledRunsOfOneModelFromSeveralThreadsMatch) {
  const SmallMlp mlp = random_mlp(10);
  auto model = make_model(mlp, 32);
  const std::vector<Job> jobs = jobs_for(mlp, *model);
  expect_same_bits_on_every_thread(jobs, 3, [&](int) {
    return [&](const Job& job, std::vector<float>& y) {
      model->run(job.batch, job.input.data(), job.input.size(), y.data(), y.size());
    };
  });
}

// A run that fails its argument checks still gives its context back, untouched: the next runs
// succeed and give the same bits.
TEST(RuntimeConcurrency, AFailedPooledRunLeavesThePoolUsable) {
  const SmallMlp mlp = random_mlp(11);
  auto model = make_model(mlp, 32);
  const std::vector<Job> jobs = jobs_for(mlp, *model);
  const Job& job = jobs[1];
  std::vector<float> y = poisoned(job.expected.size());
  for (int attempt = 0; attempt < 3; ++attempt) {
    try {
      model->run(33, job.input.data(), job.input.size(), y.data(), y.size());
      ADD_FAILURE() << "a batch over max_batch ran";
    } catch (const StatusError& error) {
      EXPECT_EQ(error.status(), FDNN_STATUS_INVALID_ARGUMENT);
      EXPECT_NE(std::string(error.what()).find("max_batch"), std::string::npos) << error.what();
    }
    try {
      model->run(job.batch, job.input.data(), job.input.size(), y.data(), y.size() - 1);
      ADD_FAILURE() << "a run into too small a buffer ran";
    } catch (const StatusError& error) {
      EXPECT_EQ(error.status(), FDNN_STATUS_BUFFER_TOO_SMALL);
    }
    for (float value : y) EXPECT_TRUE(std::isnan(value)) << "a failed run wrote its output";
    model->run(job.batch, job.input.data(), job.input.size(), y.data(), y.size());
    EXPECT_TRUE(same_bits(y, job.expected)) << "attempt " << attempt;
    y = poisoned(job.expected.size());
  }
}

}  // namespace
}  // namespace fusednn
