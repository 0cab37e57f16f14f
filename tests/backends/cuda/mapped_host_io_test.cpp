// SPDX-License-Identifier: Apache-2.0
// The mapped host path (fdnn_host_io, docs/jetson.md) forced on a discrete GPU, as an integrated
// GPU takes it by default: the kernels read and write the caller's host buffers in place. For
// a fused MLP, LeNet-5, cuBLASLt Linears and 16-bit inputs and outputs, at batches 1, 2, 33, 129
// and a large one, a mapped run gives the staged host path's bits and stays within the precision
// contract of the CPU backend; outputs are poisoned before every run. Also: the path each option
// reports (and why, in fdnn_model_explain), read-only and misaligned inputs, buffers the caller
// page-locked itself (left registered), buffers the library registered (released after the
// run), and threads whose buffers share pages. Skips without a GPU.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "cuda_test_support.hpp"

namespace {

using namespace fusednn_cuda_test;

#if FUSEDNN_TEST_WITH_CUDART

// Host memory on pages of its own, from mmap: page-aligned like the context's staging (so a
// mapped run picks the staged run's kernel forms), and never sharing a page with another
// buffer, so one buffer's registration cannot decide another's.
class PageBuffer {
 public:
  explicit PageBuffer(size_t bytes) {
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    bytes_ = (std::max<size_t>(bytes, 1) + page - 1) / page * page;
    void* memory =
        mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data_ = memory == MAP_FAILED ? nullptr : static_cast<unsigned char*>(memory);
  }
  ~PageBuffer() {
    if (data_ != nullptr) munmap(data_, bytes_);
  }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  unsigned char* data() const { return data_; }
  float* floats() const { return reinterpret_cast<float*>(data_); }
  bool make_read_only() { return mprotect(data_, bytes_, PROT_READ) == 0; }

 private:
  unsigned char* data_ = nullptr;
  size_t bytes_ = 0;
};

std::vector<int64_t> mapped_batches() { return with_large({1, 2, 33, 129}, 4097); }

bool integrated_gpu() {
  int device = 0, integrated = 0;
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetAttribute(&integrated, cudaDevAttrIntegrated, device), cudaSuccess);
  return integrated != 0;
}

fdnn_host_io reported_host_io(const fdnn_context* context) {
  fdnn_host_io host_io = FDNN_HOST_IO_AUTO;
  EXPECT_EQ(fdnn_context_host_io(context, &host_io), FDNN_STATUS_OK) << fdnn_last_error_message();
  return host_io;
}

// One network on the CPU (the reference) and on the GPU staged and mapped, same weights.
struct ThreeModels {
  fdnn_model* cpu = nullptr;
  fdnn_model* staged = nullptr;
  fdnn_model* mapped = nullptr;
  fdnn_context* staged_context = nullptr;
  fdnn_context* mapped_context = nullptr;
  size_t in_per_sample = 0, out_per_sample = 0;
  ~ThreeModels() {
    fdnn_context_destroy(staged_context);
    fdnn_context_destroy(mapped_context);
    fdnn_model_destroy(cpu);
    fdnn_model_destroy(staged);
    fdnn_model_destroy(mapped);
  }
};

void make_models(const Net& net, int64_t max_batch, fdnn_precision precision, std::mt19937& random,
                 ThreeModels* m) {
  const auto weights = draw_weights(net, random);
  const std::string spec = net.spec();
  m->cpu = create_model(spec, FDNN_DEVICE_CPU, max_batch, 1);
  m->staged = create_model(spec, FDNN_DEVICE_CUDA, max_batch, 1, precision, FDNN_HOST_IO_STAGED);
  m->mapped = create_model(spec, FDNN_DEVICE_CUDA, max_batch, 1, precision, FDNN_HOST_IO_MAPPED);
  ASSERT_TRUE(m->cpu != nullptr && m->staged != nullptr && m->mapped != nullptr);
  set_weights(m->cpu, net, weights);
  set_weights(m->staged, net, weights);
  set_weights(m->mapped, net, weights);
  ASSERT_EQ(fdnn_context_create(m->staged, &m->staged_context), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  ASSERT_EQ(fdnn_context_create(m->mapped, &m->mapped_context), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  fdnn_shape in{}, out{};
  ASSERT_EQ(fdnn_model_input_shape(m->cpu, &in), FDNN_STATUS_OK);
  ASSERT_EQ(fdnn_model_output_shape(m->cpu, &out), FDNN_STATUS_OK);
  m->in_per_sample = static_cast<size_t>(elements(in));
  m->out_per_sample = static_cast<size_t>(elements(out));
}

// Float32 runs: at every batch, the mapped context (on page buffers the library registers), the
// mapped model's pool (on vectors), the staged context and the CPU. `path` is what the mapped
// context must report.
void expect_mapped_matches_staged(const Net& net, const std::vector<int64_t>& batches,
                                  uint32_t seed, const std::string& what, fdnn_host_io path,
                                  fdnn_precision precision = FDNN_PRECISION_FP32,
                                  double tolerance = kTolerance) {
  SCOPED_TRACE(what);
  std::mt19937 random(seed);
  const int64_t max_batch = *std::max_element(batches.begin(), batches.end());
  ThreeModels m;
  ASSERT_NO_FATAL_FAILURE(make_models(net, max_batch, precision, random, &m));
  EXPECT_EQ(reported_host_io(m.mapped_context), path);
  EXPECT_EQ(reported_host_io(m.staged_context), FDNN_HOST_IO_STAGED);
  PageBuffer input_pages(sizeof(float) * max_batch * m.in_per_sample);
  PageBuffer output_pages(sizeof(float) * max_batch * m.out_per_sample);
  ASSERT_TRUE(input_pages.data() != nullptr && output_pages.data() != nullptr);

  for (const int64_t batch : batches) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const size_t in_count = static_cast<size_t>(batch) * m.in_per_sample;
    const size_t out_count = static_cast<size_t>(batch) * m.out_per_sample;
    const std::vector<float> input = normal(in_count, random, 0.0f, 1.0f);
    std::vector<float> expected(out_count, NAN), staged(out_count, NAN), pooled(out_count, NAN);
    ASSERT_EQ(fdnn_model_run(m.cpu, batch, input.data(), in_count, expected.data(), out_count),
              FDNN_STATUS_OK)
        << fdnn_last_error_message();
    ASSERT_EQ(
        fdnn_context_run(m.staged_context, batch, input.data(), in_count, staged.data(), out_count),
        FDNN_STATUS_OK)
        << fdnn_last_error_message();
    std::memcpy(input_pages.floats(), input.data(), in_count * sizeof(float));
    std::fill(output_pages.floats(), output_pages.floats() + out_count, NAN);
    ASSERT_EQ(fdnn_context_run(m.mapped_context, batch, input_pages.floats(), in_count,
                               output_pages.floats(), out_count),
              FDNN_STATUS_OK)
        << fdnn_last_error_message();
    const std::vector<float> mapped(output_pages.floats(), output_pages.floats() + out_count);
    EXPECT_EQ(std::memcmp(mapped.data(), staged.data(), out_count * sizeof(float)), 0)
        << "the mapped run differs from the staged run; relative difference "
        << relative_error(mapped, staged);
    EXPECT_LE(relative_error(mapped, expected), tolerance) << "mapped context against the CPU";
    ASSERT_EQ(fdnn_model_run(m.mapped, batch, input.data(), in_count, pooled.data(), out_count),
              FDNN_STATUS_OK)
        << fdnn_last_error_message();
    EXPECT_LE(relative_error(pooled, expected), tolerance) << "mapped model's pool";
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(MappedHostIo, FusedMlpMatchesStagedBitForBit) {
  REQUIRE_CUDA();
  expect_mapped_matches_staged(seed_mlp(), mapped_batches(), 3100, "seed MLP", FDNN_HOST_IO_MAPPED);
}

TEST(MappedHostIo, LeNet5MatchesStagedBitForBit) {
  REQUIRE_CUDA();
  expect_mapped_matches_staged(lenet5(), mapped_batches(), 3101, "LeNet-5", FDNN_HOST_IO_MAPPED);
}

// A lone wide fp32 Linear runs on cuBLASLt, which reads the model input and writes the output:
// the forced option falls back to staged copies for that model, reports it, and says why.
TEST(MappedHostIo, CublasLtReadingTheInputFallsBackToStagedAndSaysWhy) {
  REQUIRE_CUDA();
  Net wide({1024});
  wide.linear("fc", 1024, 1024).act(R"({"type": "ReLU"})");
  expect_mapped_matches_staged(wide, mapped_batches(), 3102, "1024 -> 1024 on cuBLASLt",
                               FDNN_HOST_IO_STAGED);
  std::mt19937 random(3103);
  ThreeModels m;
  ASSERT_NO_FATAL_FAILURE(make_models(wide, 64, FDNN_PRECISION_FP32, random, &m));
  const std::string text = explain_text(m.mapped, 64);
  EXPECT_NE(text.find("host I/O staged: options.host_io is FDNN_HOST_IO_MAPPED, but"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cuBLASLt"), std::string::npos) << text;
}

// With 16-bit operands a leading cuBLASLt Linear reads the narrowed copy of the input, not the
// input: such a model does run mapped (on GPUs with tensor cores for that precision).
TEST(MappedHostIo, Bf16CublasLtLinearNotTouchingTheIoRunsMapped) {
  REQUIRE_CUDA();
  Net leading({300});
  leading.linear("wide", 300, 520).act(R"({"type": "ReLU"})").linear("fc", 520, 10);
  int device = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  expect_mapped_matches_staged(leading, mapped_batches(), 3104, "300 -> 520 | 10, bf16",
                               major >= 8 ? FDNN_HOST_IO_MAPPED : FDNN_HOST_IO_STAGED,
                               FDNN_PRECISION_BF16, 1e-2);
}

// The Warpgroup MLP form (fp16 and bf16 chains from 512 rows on compute capability 9.0) reads
// the input by bulk copies, which are not relied on to reach host memory: a mapped context runs
// those batches staged, and the explanation at such a batch says so; the others run mapped.
TEST(MappedHostIo, BatchesReadByBulkCopiesRunStagedAndSaySo) {
  REQUIRE_CUDA();
  Net chain({64});
  chain.linear("fc1", 64, 64).act(R"({"type": "ReLU"})").linear("fc2", 64, 10);
  const std::vector<int64_t> batches = {1, 33, 129, 600, 1000};
  expect_mapped_matches_staged(chain, batches, 3108, "64-64-10, bf16", FDNN_HOST_IO_MAPPED,
                               FDNN_PRECISION_BF16, 1e-2);
  std::mt19937 random(3109);
  ThreeModels m;
  ASSERT_NO_FATAL_FAILURE(make_models(chain, 1000, FDNN_PRECISION_BF16, random, &m));
  for (const int64_t batch : batches) {
    const std::string text = explain_text(m.mapped, batch);
    // The form that runs at this batch (its line), not the reason's mention of the form.
    const size_t form = text.find("form: ");
    const std::string form_line =
        form == std::string::npos ? "" : text.substr(form, text.find('\n', form) - form);
    const bool bulk_copies = form_line.find("Warpgroup") != std::string::npos;
    const std::string staged = "(staged at batch " + std::to_string(batch);
    EXPECT_EQ(text.find(staged) != std::string::npos, bulk_copies) << text;
  }
}

// Random float16 or bfloat16 bit patterns of magnitude 2^-5 to 2^3: normal, finite values.
std::vector<uint16_t> sixteen_bit_values(fdnn_dtype dtype, size_t count, std::mt19937& random) {
  const bool half = dtype == FDNN_DTYPE_FLOAT16;
  const uint32_t bias = half ? 15 : 127, mantissa_bits = half ? 10 : 7;
  std::uniform_int_distribution<uint32_t> sign(0, 1), exponent(bias - 5, bias + 2),
      mantissa(0, (1u << mantissa_bits) - 1);
  std::vector<uint16_t> bits(count);
  for (uint16_t& b : bits) {
    b = static_cast<uint16_t>(sign(random) << 15 | exponent(random) << mantissa_bits |
                              mantissa(random));
  }
  return bits;
}

float bfloat16_value(uint16_t bits) {
  const uint32_t word = uint32_t{bits} << 16;
  float value;
  std::memcpy(&value, &word, sizeof value);
  return value;
}

// 16-bit caller dtypes on the mapped path, a bfloat16 and a float32 output for each input: the
// same bits as the staged typed run, and within `bound` (the model's precision) of the CPU's
// typed run, plus one bfloat16 step (2^-8 of the largest output) where both round to bfloat16.
void expect_sixteen_bit_mapped_matches_staged(const Net& net, fdnn_precision precision,
                                              fdnn_dtype in_dtype, uint32_t seed,
                                              const std::string& what, double bound) {
  SCOPED_TRACE(what);
  std::mt19937 random(seed);
  const std::vector<int64_t> batches = mapped_batches();
  const int64_t max_batch = *std::max_element(batches.begin(), batches.end());
  ThreeModels m;
  ASSERT_NO_FATAL_FAILURE(make_models(net, max_batch, precision, random, &m));
  EXPECT_EQ(reported_host_io(m.mapped_context), FDNN_HOST_IO_MAPPED);
  PageBuffer input_pages(2 * max_batch * m.in_per_sample);
  PageBuffer output_pages(4 * max_batch * m.out_per_sample);
  for (const int64_t batch : batches) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const size_t in_count = static_cast<size_t>(batch) * m.in_per_sample;
    const size_t out_count = static_cast<size_t>(batch) * m.out_per_sample;
    const std::vector<uint16_t> input = sixteen_bit_values(in_dtype, in_count, random);
    std::memcpy(input_pages.data(), input.data(), 2 * in_count);
    for (const fdnn_dtype out_dtype : {FDNN_DTYPE_BFLOAT16, FDNN_DTYPE_FLOAT32}) {
      SCOPED_TRACE(out_dtype == FDNN_DTYPE_BFLOAT16 ? "bfloat16 output" : "float32 output");
      const size_t out_bytes = (out_dtype == FDNN_DTYPE_BFLOAT16 ? 2 : 4) * out_count;
      std::vector<unsigned char> expected(out_bytes, 0xff), staged(out_bytes, 0xff);
      ASSERT_EQ(fdnn_model_run_typed(m.cpu, batch, input.data(), in_dtype, in_count,
                                     expected.data(), out_dtype, out_count),
                FDNN_STATUS_OK)
          << fdnn_last_error_message();
      ASSERT_EQ(fdnn_context_run_typed(m.staged_context, batch, input.data(), in_dtype, in_count,
                                       staged.data(), out_dtype, out_count),
                FDNN_STATUS_OK)
          << fdnn_last_error_message();
      std::memset(output_pages.data(), 0xff, out_bytes);  // NaN in either dtype
      ASSERT_EQ(fdnn_context_run_typed(m.mapped_context, batch, input_pages.data(), in_dtype,
                                       in_count, output_pages.data(), out_dtype, out_count),
                FDNN_STATUS_OK)
          << fdnn_last_error_message();
      EXPECT_EQ(std::memcmp(output_pages.data(), staged.data(), out_bytes), 0)
          << "the mapped typed run differs from the staged one";
      std::vector<float> got(out_count), want(out_count);
      for (size_t i = 0; i < out_count; ++i) {
        if (out_dtype == FDNN_DTYPE_BFLOAT16) {
          uint16_t g, w;
          std::memcpy(&g, output_pages.data() + 2 * i, 2);
          std::memcpy(&w, expected.data() + 2 * i, 2);
          got[i] = bfloat16_value(g);
          want[i] = bfloat16_value(w);
        } else {
          std::memcpy(&got[i], output_pages.data() + 4 * i, 4);
          std::memcpy(&want[i], expected.data() + 4 * i, 4);
        }
      }
      EXPECT_LE(relative_error(got, want),
                bound + (out_dtype == FDNN_DTYPE_BFLOAT16 ? 1.0 / 256 : 0.0));
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// A float16 input widened on the device from the caller's registered buffer (the fp32 seed MLP's
// kernels read float32).
TEST(MappedHostIo, SixteenBitIoMatchesStagedBitForBit) {
  REQUIRE_CUDA();
  expect_sixteen_bit_mapped_matches_staged(seed_mlp(), FDNN_PRECISION_FP32, FDNN_DTYPE_FLOAT16,
                                           3105, "seed MLP, float16 input", kTolerance);
}

// A bf16 chain whose tensor-core kernel reads and writes 16-bit buffers itself (on the caller's
// registered pages, below the Warpgroup form's batches), and a bf16 model whose cuBLASLt Linear
// would read a bfloat16 input itself (the mapped path stages that input as float32 instead).
TEST(MappedHostIo, SixteenBitIoReadByTheKernelsMatchesStagedBitForBit) {
  REQUIRE_CUDA();
  Net chain({64});
  chain.linear("fc1", 64, 64).act(R"({"type": "ReLU"})").linear("fc2", 64, 10);
  expect_sixteen_bit_mapped_matches_staged(chain, FDNN_PRECISION_BF16, FDNN_DTYPE_BFLOAT16, 3110,
                                           "64-64-10, bf16, bfloat16 input", 1e-2);
  Net leading({300});
  leading.linear("wide", 300, 520).act(R"({"type": "ReLU"})").linear("fc", 520, 10);
  expect_sixteen_bit_mapped_matches_staged(leading, FDNN_PRECISION_BF16, FDNN_DTYPE_BFLOAT16, 3111,
                                           "300 -> 520 | 10, bf16, bfloat16 input", 1e-2);
}

TEST(MappedHostIo, ReportedPathFollowsTheOptionAndTheDevice) {
  REQUIRE_CUDA();
  const Net net = seed_mlp();
  std::mt19937 random(3106);
  const auto weights = draw_weights(net, random);
  const bool integrated = integrated_gpu();
  const struct {
    fdnn_host_io option;
    fdnn_host_io expected;
    const char* explained;
  } cases[] = {
      {FDNN_HOST_IO_AUTO, integrated ? FDNN_HOST_IO_MAPPED : FDNN_HOST_IO_STAGED,
       integrated ? "host I/O mapped: an integrated GPU" : "host I/O staged: a discrete GPU"},
      {FDNN_HOST_IO_STAGED, FDNN_HOST_IO_STAGED,
       "host I/O staged: options.host_io is FDNN_HOST_IO_STAGED"},
      {FDNN_HOST_IO_MAPPED, FDNN_HOST_IO_MAPPED,
       "host I/O mapped: options.host_io is FDNN_HOST_IO_MAPPED"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE("host_io " + std::to_string(c.option));
    fdnn_model* model =
        create_model(net.spec(), FDNN_DEVICE_CUDA, 8, 1, FDNN_PRECISION_FP32, c.option);
    ASSERT_NE(model, nullptr);
    set_weights(model, net, weights);
    fdnn_context* context = nullptr;
    ASSERT_EQ(fdnn_context_create(model, &context), FDNN_STATUS_OK) << fdnn_last_error_message();
    EXPECT_EQ(reported_host_io(context), c.expected);
    const std::string text = explain_text(model, 1);
    EXPECT_NE(text.find(c.explained), std::string::npos) << text;
    fdnn_context_destroy(context);
    fdnn_model_destroy(model);
  }
}

// A model, a context of it forced mapped and the staged result for one input, for the tests of
// particular caller buffers below.
class MappedBuffers : public ::testing::Test {
 protected:
  static constexpr int64_t kBatch = 33;
  void SetUp() override {
    int32_t gpus = 0;
    ASSERT_EQ(fdnn_cuda_device_count(&gpus), FDNN_STATUS_OK);
    if (gpus == 0) GTEST_SKIP() << "no CUDA device: fdnn_cuda_device_count() is 0";
    std::mt19937 random(3107);
    ASSERT_NO_FATAL_FAILURE(make_models(seed_mlp(), kBatch, FDNN_PRECISION_FP32, random, &m_));
    in_count_ = static_cast<size_t>(kBatch) * m_.in_per_sample;
    out_count_ = static_cast<size_t>(kBatch) * m_.out_per_sample;
    input_ = normal(in_count_, random, 0.0f, 1.0f);
    staged_.assign(out_count_, NAN);
    ASSERT_EQ(fdnn_context_run(m_.staged_context, kBatch, input_.data(), in_count_, staged_.data(),
                               out_count_),
              FDNN_STATUS_OK)
        << fdnn_last_error_message();
    expected_.assign(out_count_, NAN);
    ASSERT_EQ(
        fdnn_model_run(m_.cpu, kBatch, input_.data(), in_count_, expected_.data(), out_count_),
        FDNN_STATUS_OK)
        << fdnn_last_error_message();
  }

  // Runs the mapped context on these buffers (the input copied in first, the output poisoned)
  // and checks the result; bit_exact: against the staged run's bits, else within kTolerance of
  // the CPU (buffers of another alignment may take other kernel forms).
  void expect_run(const float* input, float* output, bool bit_exact, fdnn_context* context) {
    std::fill(output, output + out_count_, NAN);
    ASSERT_EQ(fdnn_context_run(context, kBatch, input, in_count_, output, out_count_),
              FDNN_STATUS_OK)
        << fdnn_last_error_message();
    const std::vector<float> got(output, output + out_count_);
    if (bit_exact) {
      EXPECT_EQ(std::memcmp(got.data(), staged_.data(), out_count_ * sizeof(float)), 0);
    }
    EXPECT_LE(relative_error(got, expected_), kTolerance);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "a CUDA error was left behind";
  }
  void expect_run(const float* input, float* output, bool bit_exact = true) {
    expect_run(input, output, bit_exact, m_.mapped_context);
  }

  static cudaMemoryType memory_type(const void* host) {
    cudaPointerAttributes attributes{};
    EXPECT_EQ(cudaPointerGetAttributes(&attributes, host), cudaSuccess);
    return attributes.type;
  }

  ThreeModels m_;
  size_t in_count_ = 0, out_count_ = 0;
  std::vector<float> input_, staged_, expected_;
};

// Buffers the library registered for a run are released afterwards.
TEST_F(MappedBuffers, RegistrationsAreReleasedAfterTheRun) {
  PageBuffer input(in_count_ * sizeof(float)), output(out_count_ * sizeof(float));
  std::memcpy(input.floats(), input_.data(), in_count_ * sizeof(float));
  for (int round = 0; round < 3; ++round) {
    ASSERT_NO_FATAL_FAILURE(expect_run(input.floats(), output.floats()));
    EXPECT_EQ(memory_type(input.data()), cudaMemoryTypeUnregistered);
    EXPECT_EQ(memory_type(output.data()), cudaMemoryTypeUnregistered);
  }
}

// A read-only input (its pages PROT_READ): registered read-only where the device supports it,
// staged otherwise; either way the run is right and leaves no CUDA error.
TEST_F(MappedBuffers, ReadOnlyInputWorks) {
  PageBuffer input(in_count_ * sizeof(float)), output(out_count_ * sizeof(float));
  std::memcpy(input.floats(), input_.data(), in_count_ * sizeof(float));
  ASSERT_TRUE(input.make_read_only());
  ASSERT_NO_FATAL_FAILURE(expect_run(input.floats(), output.floats()));
  ASSERT_NO_FATAL_FAILURE(expect_run(input.floats(), output.floats()));
  EXPECT_EQ(memory_type(input.data()), cudaMemoryTypeUnregistered);
}

// Buffers the caller page-locked (cudaHostAlloc, or cudaHostRegister) are used as they are and
// stay registered afterwards.
TEST_F(MappedBuffers, CallerRegisteredBuffersStayRegistered) {
  float* input = nullptr;
  float* output = nullptr;
  CUDA_OK(cudaHostAlloc(reinterpret_cast<void**>(&input), in_count_ * sizeof(float),
                        cudaHostAllocMapped));
  CUDA_OK(cudaHostAlloc(reinterpret_cast<void**>(&output), out_count_ * sizeof(float),
                        cudaHostAllocMapped));
  std::memcpy(input, input_.data(), in_count_ * sizeof(float));
  ASSERT_NO_FATAL_FAILURE(expect_run(input, output));
  ASSERT_NO_FATAL_FAILURE(expect_run(input, output));
  EXPECT_EQ(memory_type(input), cudaMemoryTypeHost);
  EXPECT_EQ(memory_type(output), cudaMemoryTypeHost);
  CUDA_OK(cudaFreeHost(input));
  CUDA_OK(cudaFreeHost(output));

  PageBuffer registered_input(in_count_ * sizeof(float)), registered_output(out_count_ * 4);
  std::memcpy(registered_input.floats(), input_.data(), in_count_ * sizeof(float));
  CUDA_OK(
      cudaHostRegister(registered_input.data(), in_count_ * sizeof(float), cudaHostRegisterMapped));
  CUDA_OK(cudaHostRegister(registered_output.data(), out_count_ * sizeof(float),
                           cudaHostRegisterMapped));
  ASSERT_NO_FATAL_FAILURE(expect_run(registered_input.floats(), registered_output.floats()));
  // Still registered: unregistering succeeds once.
  EXPECT_EQ(cudaHostUnregister(registered_input.data()), cudaSuccess);
  EXPECT_EQ(cudaHostUnregister(registered_output.data()), cudaSuccess);
}

// Input and output in one page, next to each other, and each 4 bytes past a 16-byte boundary
// (another alignment class than the staging's: compared with the CPU only).
TEST_F(MappedBuffers, NeighbouringAndMisalignedBuffers) {
  PageBuffer page((in_count_ + out_count_ + 8) * sizeof(float));
  float* input = page.floats() + 1;
  float* output = input + in_count_ + 2;
  std::memcpy(input, input_.data(), in_count_ * sizeof(float));
  ASSERT_NO_FATAL_FAILURE(expect_run(input, output, false));
  ASSERT_NO_FATAL_FAILURE(expect_run(input, output, false));
  EXPECT_EQ(memory_type(page.data()), cudaMemoryTypeUnregistered);
}

// Threads with contexts of their own whose buffers all share pages: registrations are shared and
// released by their last user, and every run is right.
TEST_F(MappedBuffers, ThreadsWhoseBuffersSharePages) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 25;
  const size_t stride = in_count_ + out_count_ + 4;
  PageBuffer shared(kThreads * stride * sizeof(float));
  std::vector<fdnn_context*> contexts(kThreads, nullptr);
  for (fdnn_context*& context : contexts) {
    ASSERT_EQ(fdnn_context_create(m_.mapped, &context), FDNN_STATUS_OK)
        << fdnn_last_error_message();
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      float* input = shared.floats() + t * stride;
      float* output = input + in_count_;
      std::memcpy(input, input_.data(), in_count_ * sizeof(float));
      for (int round = 0; round < kRounds; ++round) {
        std::fill(output, output + out_count_, NAN);
        ASSERT_EQ(fdnn_context_run(contexts[t], kBatch, input, in_count_, output, out_count_),
                  FDNN_STATUS_OK)
            << fdnn_last_error_message();
        const std::vector<float> got(output, output + out_count_);
        EXPECT_LE(relative_error(got, expected_), kTolerance) << "thread " << t;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (fdnn_context* context : contexts) fdnn_context_destroy(context);
  EXPECT_EQ(memory_type(shared.data()), cudaMemoryTypeUnregistered);
}

#else

TEST(MappedHostIo, NeedsTheCudaRuntime) {
  GTEST_SKIP() << "this build has no CUDA backend: the mapped host path needs a GPU";
}

#endif

}  // namespace
