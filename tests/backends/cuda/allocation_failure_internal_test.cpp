// SPDX-License-Identifier: Apache-2.0
// Device allocation failure, injected into the CUDA backend (a build configured with
// -DFUSEDNN_FAULT_INJECTION=ON; in other builds, and without a GPU, these tests skip): for
// N = 1, 2, ... until a whole cycle succeeds, a model is created, queried, given a context and
// run on the host path, the device path and the model's own pool, with its Nth acquisition of
// device memory, pinned memory or an instantiated graph failing. Every failure must come back
// as FDNN_STATUS_OUT_OF_MEMORY with a message that says so, and leave nothing behind: the
// backend's count of live acquisitions returns to its start, and so does the device's free
// memory (cudaMemGetInfo, within kFreeSlack). A context whose run failed so runs afterwards bit
// for bit as a fresh context does.
//
// Linked against the library's objects (like the other _internal_test.cpp files): the hook is
// not exported from libfusednn.so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_support.hpp"
#include "fusednn/fusednn.h"

#ifdef FUSEDNN_FAULT_INJECTION
#include "backends/cuda/platform/allocation_faults.hpp"
#endif

namespace {

using namespace fusednn_cuda_test;

#if defined(FUSEDNN_FAULT_INJECTION) && FUSEDNN_TEST_WITH_CUDART

namespace faults = fusednn::cuda::allocation_faults;

// How far cudaMemGetInfo's free memory may sit below its start after everything is destroyed:
// the driver keeps some memory of its own that comes and goes (graph upload pools, cuBLASLt's
// handle), in 2 MiB pages. A leaked workspace or weight copy of the models here is larger; a
// smaller leak shows in the live count, which must return exactly.
constexpr size_t kFreeSlack = size_t{32} << 20;

// More acquisitions than any cycle here makes: a loop that reaches it never succeeded.
constexpr int64_t kMostAcquisitions = 200;

size_t free_device_bytes() {
  size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return free;
}

struct Case {
  std::string name;
  Net net;
  int64_t batch;
};

std::vector<Case> cases() {
  Net wide({1024});  // a lone wide Linear: cuBLASLt at this batch
  wide.linear("fc", 1024, 1024).act(R"({"type": "ReLU"})");
  return {{"seed_mlp", seed_mlp(), 33}, {"lenet5", lenet5(), 5}, {"wide_linear", wide, 64}};
}

// What one cycle did: the first call that failed (status OK when none did) and the outputs of
// the runs that finished.
struct Cycle {
  fdnn_status status = FDNN_STATUS_OK;
  std::string call;
  std::string message;
  std::vector<float> host_output, device_output, pool_output;
};

class CycleRunner {
 public:
  CycleRunner(const Case& c, uint32_t seed) : case_(c) {
    std::mt19937 random(seed);
    weights_ = draw_weights(c.net, random);
    fdnn_model* probe = create_model(c.net.spec(), FDNN_DEVICE_CPU, c.batch, 1);
    fdnn_shape in{}, out{};
    fdnn_model_input_shape(probe, &in);
    fdnn_model_output_shape(probe, &out);
    fdnn_model_destroy(probe);
    input_ = normal(static_cast<size_t>(c.batch * elements(in)), random, 0.0f, 1.0f);
    output_count_ = static_cast<size_t>(c.batch * elements(out));
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&device_input_), input_.size() * sizeof(float)),
              cudaSuccess);
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&device_output_), output_count_ * sizeof(float)),
              cudaSuccess);
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  ~CycleRunner() {
    cudaFree(device_input_);
    cudaFree(device_output_);
    cudaStreamDestroy(stream_);
  }
  CycleRunner(const CycleRunner&) = delete;
  CycleRunner& operator=(const CycleRunner&) = delete;

  // Create, query, context, host run, device run, pool run; then destroy what was created.
  Cycle run() {
    Cycle cycle;
    fdnn_model* model = nullptr;
    fdnn_context* context = nullptr;
    auto failed = [&](fdnn_status status, const char* call) {
      if (status == FDNN_STATUS_OK) return false;
      cycle.status = status;
      cycle.call = call;
      cycle.message = fdnn_last_error_message();
      return true;
    };
    do {
      fdnn_model_options options;
      fdnn_model_options_init(&options, sizeof options);
      options.max_batch = case_.batch;
      options.device = FDNN_DEVICE_CUDA;
      options.cuda_graphs = 1;
      const std::string spec = case_.net.spec();
      if (failed(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model),
                 "fdnn_model_create_from_spec")) {
        break;
      }
      set_weights(model, case_.net, weights_);
      fdnn_memory_info info{};
      info.struct_size = sizeof info;
      if (failed(fdnn_model_memory_info(model, &info), "fdnn_model_memory_info")) break;
      if (failed(fdnn_context_create(model, &context), "fdnn_context_create")) break;
      cycle.host_output.assign(output_count_, NAN);
      if (failed(fdnn_context_run(context, case_.batch, input_.data(), input_.size(),
                                  cycle.host_output.data(), output_count_),
                 "fdnn_context_run")) {
        break;
      }
      EXPECT_EQ(cudaMemcpy(device_input_, input_.data(), input_.size() * sizeof(float),
                           cudaMemcpyHostToDevice),
                cudaSuccess);
      EXPECT_EQ(cudaMemset(device_output_, 0xff, output_count_ * sizeof(float)), cudaSuccess);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      if (failed(fdnn_context_run_device(context, case_.batch, device_input_, input_.size(),
                                         device_output_, output_count_, stream_),
                 "fdnn_context_run_device")) {
        break;
      }
      EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      cycle.device_output.assign(output_count_, 0.0f);
      EXPECT_EQ(cudaMemcpy(cycle.device_output.data(), device_output_,
                           output_count_ * sizeof(float), cudaMemcpyDeviceToHost),
                cudaSuccess);
      // The pool makes a context of its own: the context above is not the pool's.
      cycle.pool_output.assign(output_count_, NAN);
      if (failed(fdnn_model_run(model, case_.batch, input_.data(), input_.size(),
                                cycle.pool_output.data(), output_count_),
                 "fdnn_model_run")) {
        break;
      }
    } while (false);
    if (context != nullptr) fdnn_context_destroy(context);
    if (model != nullptr) fdnn_model_destroy(model);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return cycle;
  }

 private:
  const Case& case_;
  std::vector<std::vector<float>> weights_;
  std::vector<float> input_;
  size_t output_count_ = 0;
  float* device_input_ = nullptr;
  float* device_output_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

TEST(AllocationFailure, EachAcquisitionFailingInTurnIsOutOfMemoryAndLeaksNothing) {
  REQUIRE_CUDA();
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    CycleRunner runner(c, 33);
    // The unfaulted cycle: the reference outputs, and every kernel loaded before the baseline.
    faults::fail_nth(0);
    const Cycle reference = runner.run();
    ASSERT_EQ(reference.status, FDNN_STATUS_OK) << reference.call << ": " << reference.message;
    const int64_t acquisitions = faults::attempts();
    ASSERT_GT(acquisitions, 3) << "a cycle acquires the weights, a context's memory and graphs";
    EXPECT_EQ(reference.pool_output, reference.host_output);  // both the host path
    const int64_t live_before = faults::live();
    const size_t free_before = free_device_bytes();

    int64_t failures = 0;
    int64_t n = 1;
    for (; n <= kMostAcquisitions; ++n) {
      SCOPED_TRACE("acquisition " + std::to_string(n) + " fails");
      faults::fail_nth(n);
      const Cycle cycle = runner.run();
      const bool injected = faults::injected() > 0;
      faults::fail_nth(0);
      EXPECT_EQ(faults::live(), live_before) << "acquisitions left behind after " << cycle.call;
      EXPECT_GE(free_device_bytes() + kFreeSlack, free_before);
      if (!injected) {
        // Fewer than n acquisitions: the whole cycle ran, as the reference did.
        EXPECT_EQ(cycle.status, FDNN_STATUS_OK) << cycle.call << ": " << cycle.message;
        EXPECT_EQ(cycle.host_output, reference.host_output);
        EXPECT_EQ(cycle.device_output, reference.device_output);
        EXPECT_EQ(cycle.pool_output, reference.pool_output);
        break;
      }
      if (cycle.status == FDNN_STATUS_OK) {
        // The library got past the failure (nothing does today): the results must still be right.
        EXPECT_EQ(cycle.host_output, reference.host_output);
        EXPECT_EQ(cycle.device_output, reference.device_output);
        EXPECT_EQ(cycle.pool_output, reference.pool_output);
        continue;
      }
      ++failures;
      EXPECT_EQ(cycle.status, FDNN_STATUS_OUT_OF_MEMORY)
          << cycle.call << " returned " << fdnn_status_string(cycle.status) << ": "
          << cycle.message;
      EXPECT_NE(cycle.message.find("failure injected by a test"), std::string::npos)
          << cycle.call << ": " << cycle.message;
    }
    EXPECT_LE(n, kMostAcquisitions) << "no cycle succeeded";
    EXPECT_EQ(n, acquisitions + 1) << "the failing cycles made a different number of acquisitions";
    EXPECT_GT(failures, 0);
    std::printf(
        "[ faults   ] %s: %lld acquisitions a cycle, each failed in turn: %lld failures "
        "reported as OUT_OF_MEMORY; free device memory %.1f MiB below its start\n",
        c.name.c_str(), static_cast<long long>(acquisitions), static_cast<long long>(failures),
        (static_cast<double>(free_before) - static_cast<double>(free_device_bytes())) / (1 << 20));
  }
}

// A run whose graph cannot be instantiated fails with OUT_OF_MEMORY; the same context then runs
// that batch (capturing again) bit for bit as a fresh context does, on both paths. The network
// runs in several launches (a LayerNorm over 512 is not folded into the Linear before it), so
// the device path captures a graph too.
TEST(AllocationFailure, AContextWhoseRunFailedRunsAsAFreshOne) {
  REQUIRE_CUDA();
  std::mt19937 random(7);
  Net net({100});
  net.linear("up", 100, 512).act(R"({"type": "GELU"})");
  net.layer_norm("norm", 512);
  net.linear("down", 512, 10);
  const auto weights = draw_weights(net, random);
  // Staged: after a first run (which makes the context's staging), the first acquisition of a
  // run at a new batch is its graph (a mapped run registers the caller's buffers first).
  fdnn_model* model =
      create_model(net.spec(), FDNN_DEVICE_CUDA, 64, 1, FDNN_PRECISION_FP32, FDNN_HOST_IO_STAGED);
  ASSERT_NE(model, nullptr);
  set_weights(model, net, weights);
  fdnn_context* used = nullptr;
  ASSERT_EQ(fdnn_context_create(model, &used), FDNN_STATUS_OK) << fdnn_last_error_message();
  const int64_t batch = 9;
  const std::vector<float> input = normal(static_cast<size_t>(batch * 100), random, 0.0f, 1.0f);
  const size_t output_count = static_cast<size_t>(batch * 10);
  {
    std::vector<float> warm(30, NAN);
    ASSERT_EQ(fdnn_context_run(used, 3, input.data(), 300, warm.data(), warm.size()),
              FDNN_STATUS_OK)
        << fdnn_last_error_message();
  }
  const int64_t live_before = faults::live();

  std::vector<float> failed_output(output_count, NAN);
  faults::fail_nth(1);
  const fdnn_status failed =
      fdnn_context_run(used, batch, input.data(), input.size(), failed_output.data(), output_count);
  const int64_t attempts = faults::attempts();
  faults::fail_nth(0);
  ASSERT_EQ(attempts, 1) << "a host-path run of a new batch instantiates one graph";
  EXPECT_EQ(failed, FDNN_STATUS_OUT_OF_MEMORY) << fdnn_last_error_message();
  EXPECT_NE(std::string(fdnn_last_error_message()).find("cudaGraphInstantiate"), std::string::npos)
      << fdnn_last_error_message();
  EXPECT_EQ(faults::live(), live_before);

  std::vector<float> after(output_count, NAN), fresh_output(output_count, NAN);
  ASSERT_EQ(fdnn_context_run(used, batch, input.data(), input.size(), after.data(), output_count),
            FDNN_STATUS_OK)
      << fdnn_last_error_message();
  fdnn_context* fresh = nullptr;
  ASSERT_EQ(fdnn_context_create(model, &fresh), FDNN_STATUS_OK) << fdnn_last_error_message();
  ASSERT_EQ(
      fdnn_context_run(fresh, batch, input.data(), input.size(), fresh_output.data(), output_count),
      FDNN_STATUS_OK)
      << fdnn_last_error_message();
  EXPECT_EQ(after, fresh_output);

  // The device path: a first run of another batch there captures and instantiates a graph too.
  DeviceBuffers buffers;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&buffers.input), input.size() * sizeof(float)));
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&buffers.output), output_count * sizeof(float)));
  CUDA_OK(cudaStreamCreateWithFlags(&buffers.stream, cudaStreamNonBlocking));
  const int64_t device_batch = 5;
  const std::vector<float> device_input(input.begin(), input.begin() + device_batch * 100);
  const size_t device_count = static_cast<size_t>(device_batch * 10);
  CUDA_OK(cudaMemcpy(buffers.input, device_input.data(), device_input.size() * sizeof(float),
                     cudaMemcpyHostToDevice));
  const int64_t live_before_device = faults::live();
  faults::fail_nth(1);
  const fdnn_status device_failed =
      fdnn_context_run_device(used, device_batch, buffers.input, device_input.size(),
                              buffers.output, device_count, buffers.stream);
  const int64_t device_attempts = faults::attempts();
  faults::fail_nth(0);
  ASSERT_EQ(device_attempts, 1) << "a first device-path run of a batch in several launches "
                                   "instantiates one graph";
  EXPECT_EQ(device_failed, FDNN_STATUS_OUT_OF_MEMORY) << fdnn_last_error_message();
  EXPECT_EQ(faults::live(), live_before_device) << "the failed device-path run kept something";
  std::vector<float> device_after, device_fresh;
  ASSERT_NO_FATAL_FAILURE(run_device(used, device_batch, device_input, device_count, buffers.input,
                                     buffers.output, buffers.stream, &device_after));
  ASSERT_NO_FATAL_FAILURE(run_device(fresh, device_batch, device_input, device_count, buffers.input,
                                     buffers.output, buffers.stream, &device_fresh));
  EXPECT_EQ(device_after, device_fresh);

  fdnn_context_destroy(fresh);
  fdnn_context_destroy(used);
  fdnn_model_destroy(model);
}

// A mapped host-path run whose registration of the caller's input (then output) fails stages that
// buffer in the context's mapped pinned staging instead: the run succeeds with the same bits,
// holds nothing afterwards, and leaves no CUDA error.
TEST(AllocationFailure, MappedRunWhoseRegistrationFailsStagesThatBuffer) {
  REQUIRE_CUDA();
  std::mt19937 random(8);
  const Net net = seed_mlp();
  const auto weights = draw_weights(net, random);
  fdnn_model* model =
      create_model(net.spec(), FDNN_DEVICE_CUDA, 64, 1, FDNN_PRECISION_FP32, FDNN_HOST_IO_MAPPED);
  ASSERT_NE(model, nullptr);
  set_weights(model, net, weights);
  fdnn_context* context = nullptr;
  ASSERT_EQ(fdnn_context_create(model, &context), FDNN_STATUS_OK) << fdnn_last_error_message();
  fdnn_host_io path = FDNN_HOST_IO_AUTO;
  ASSERT_EQ(fdnn_context_host_io(context, &path), FDNN_STATUS_OK);
  ASSERT_EQ(path, FDNN_HOST_IO_MAPPED);
  const int64_t batch = 17;
  const size_t in_count = static_cast<size_t>(batch * 100),
               out_count = static_cast<size_t>(batch * 10);
  // Page-aligned, on pages of their own: the staging's alignment, so the same kernel forms run.
  float* input = nullptr;
  float* output = nullptr;
  ASSERT_EQ(posix_memalign(reinterpret_cast<void**>(&input), 65536, 65536), 0);
  ASSERT_EQ(posix_memalign(reinterpret_cast<void**>(&output), 65536, 65536), 0);
  const std::vector<float> values = normal(in_count, random, 0.0f, 1.0f);
  std::copy(values.begin(), values.end(), input);
  std::fill(output, output + out_count, NAN);
  // The first run captures its graph; the reference.
  ASSERT_EQ(fdnn_context_run(context, batch, input, in_count, output, out_count), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  const std::vector<float> reference(output, output + out_count);
  const int64_t live_before = faults::live();
  int64_t live_after_first = -1;
  for (int64_t n : {1, 2}) {
    SCOPED_TRACE(n == 1 ? "the input's registration fails" : "the output's registration fails");
    std::fill(output, output + out_count, NAN);
    faults::fail_nth(n);
    const fdnn_status status = fdnn_context_run(context, batch, input, in_count, output, out_count);
    const int64_t injected = faults::injected();
    faults::fail_nth(0);
    EXPECT_EQ(status, FDNN_STATUS_OK) << fdnn_last_error_message();
    EXPECT_EQ(injected, 1) << "a mapped run registers its input, then its output";
    EXPECT_EQ(std::vector<float>(output, output + out_count), reference);
    // The first fallback makes the context's pinned staging, which the context keeps; nothing
    // else may stay.
    if (n == 1) {
      live_after_first = faults::live();
      EXPECT_LE(live_after_first - live_before, 1) << "a registration was left behind";
    } else {
      EXPECT_EQ(faults::live(), live_after_first) << "a registration was left behind";
    }
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
  fdnn_context_destroy(context);
  fdnn_model_destroy(model);
  std::free(input);
  std::free(output);
}

#else

TEST(AllocationFailure, NeedsAFaultInjectionBuild) {
  GTEST_SKIP() << "allocation failure injection is compiled only with -DFUSEDNN_FAULT_INJECTION=ON "
                  "(and the CUDA backend); this build has none";
}

#endif

}  // namespace
