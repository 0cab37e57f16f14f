// SPDX-License-Identifier: Apache-2.0
// The typed runs (fdnn_model_run_typed, fdnn_context_run_typed, fdnn_context_run_device_typed)
// on a CPU model: every pair of dtypes against the float32 run, bit for bit; the special values;
// the argument checks; and the float32 calls unchanged. The reference conversions are the
// library's own header-only converters (src/common/half_float.hpp, tested exhaustively there).
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>

#include "api_test_support.hpp"
#include "common/half_float.hpp"
#include "fusednn/fusednn.hpp"

// Counts this thread's allocations, so a test can show that a warmed-up run makes none.
namespace {
thread_local long long g_allocations = 0;
}  // namespace

void* operator new(std::size_t size) {
  ++g_allocations;
  if (void* pointer = std::malloc(size == 0 ? 1 : size)) return pointer;
  throw std::bad_alloc();
}
void operator delete(void* pointer) noexcept { std::free(pointer); }
void operator delete(void* pointer, std::size_t) noexcept { std::free(pointer); }

namespace {

using namespace fusednn_test;

const fdnn_dtype kDtypes[] = {FDNN_DTYPE_FLOAT32, FDNN_DTYPE_FLOAT16, FDNN_DTYPE_BFLOAT16};

const char* name_of(fdnn_dtype dtype) {
  return dtype == FDNN_DTYPE_FLOAT32   ? "float32"
         : dtype == FDNN_DTYPE_FLOAT16 ? "float16"
                                       : "bfloat16";
}

// Values exact in float16 and bfloat16 alike (k / 32 with |k| <= 128: 8 significant bits at most),
// so the 16-bit inputs widen to exactly the float32 run's inputs.
std::vector<float> representable_inputs(size_t count, std::mt19937& random) {
  std::uniform_int_distribution<int> k(-128, 128);
  std::vector<float> values(count);
  for (float& v : values) v = static_cast<float>(k(random)) / 32.0f;
  return values;
}

// The caller's buffer for `values` in `dtype`: 4 or 2 bytes per element.
std::vector<unsigned char> encode(const std::vector<float>& values, fdnn_dtype dtype) {
  if (dtype == FDNN_DTYPE_FLOAT32) {
    std::vector<unsigned char> bytes(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
  }
  std::vector<unsigned char> bytes(values.size() * sizeof(uint16_t));
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t bits = dtype == FDNN_DTYPE_FLOAT16 ? fusednn::float_to_half(values[i])
                                                      : fusednn::float_to_bfloat16(values[i]);
    std::memcpy(bytes.data() + i * sizeof bits, &bits, sizeof bits);
  }
  return bytes;
}

size_t element_bytes(fdnn_dtype dtype) { return dtype == FDNN_DTYPE_FLOAT32 ? 4 : 2; }

// A value that is not an fdnn_dtype enumerator. C callers may pass any int (the library reads the
// argument as an integer); C++ may only load values within the enum's range (0 to 3 here), or
// UBSan stops the test, so 3 is the unknown value tried from C++. The other bindings' tests pass
// values beyond it.
fdnn_dtype dtype_from_raw(int32_t raw) {
  fdnn_dtype dtype;
  std::memcpy(&dtype, &raw, sizeof dtype);
  return dtype;
}

constexpr int64_t kBatch = 5;
constexpr size_t kInputs = kBatch * 100;
constexpr size_t kOutputs = kBatch * 10;

TEST(TypedIo, EveryDtypePairMatchesTheFloat32RunNarrowedBitForBit) {
  fdnn_model* model = make_seed_mlp(11);
  fdnn_context* context = nullptr;
  ASSERT_EQ(fdnn_context_create(model, &context), FDNN_STATUS_OK) << fdnn_last_error_message();
  std::mt19937 random(2024);
  for (int trial = 0; trial < 3; ++trial) {  // fresh data each time
    const std::vector<float> input = representable_inputs(kInputs, random);
    std::vector<float> reference(kOutputs);
    ASSERT_EQ(fdnn_model_run(model, kBatch, input.data(), input.size(), reference.data(), kOutputs),
              FDNN_STATUS_OK)
        << fdnn_last_error_message();
    for (fdnn_dtype in : kDtypes) {
      const std::vector<unsigned char> typed_input = encode(input, in);
      for (fdnn_dtype out : kDtypes) {
        const std::vector<unsigned char> expected = encode(reference, out);
        for (int through_context = 0; through_context < 2; ++through_context) {
          SCOPED_TRACE(std::string(name_of(in)) + " -> " + name_of(out) +
                       (through_context ? " (context)" : " (model)"));
          std::vector<unsigned char> output(expected.size() + 8, 0xA5);  // poisoned, with a tail
          const fdnn_status status =
              through_context ? fdnn_context_run_typed(context, kBatch, typed_input.data(), in,
                                                       kInputs, output.data(), out, kOutputs)
                              : fdnn_model_run_typed(model, kBatch, typed_input.data(), in, kInputs,
                                                     output.data(), out, kOutputs);
          ASSERT_EQ(status, FDNN_STATUS_OK) << fdnn_last_error_message();
          EXPECT_EQ(std::memcmp(output.data(), expected.data(), expected.size()), 0);
          for (size_t i = expected.size(); i < output.size(); ++i) {
            ASSERT_EQ(output[i], 0xA5) << "written past the result at byte " << i;
          }
        }
      }
    }
  }
  fdnn_context_destroy(context);
  fdnn_model_destroy(model);
}

TEST(TypedIo, NarrowingOverflowsToInfinityAndKeepsNan) {
  fdnn_model* model = make_tiny_model(4);  // y = [x0 + 2 x1 + 3 x2 + 0.5, 4 x0 + 5 x1 + 6 x2 - 1]
  set_tiny_weights(model);
  const float nan = std::nanf("");
  const float input[] = {60000.0f, 60000.0f, 60000.0f,  // 360000.5 and 899999: beyond float16
                         nan,      1.0f,     1.0f,      // NaN in, NaN out
                         1.0f,     0.0f,     0.0f};     // 1.5 and 3: exact everywhere
  const std::vector<unsigned char> half_input = encode({input, input + 9}, FDNN_DTYPE_FLOAT16);
  uint16_t half[6];
  ASSERT_EQ(fdnn_model_run_typed(model, 3, half_input.data(), FDNN_DTYPE_FLOAT16, 9, half,
                                 FDNN_DTYPE_FLOAT16, 6),
            FDNN_STATUS_OK)
      << fdnn_last_error_message();
  EXPECT_EQ(half[0], 0x7C00u);  // +inf
  EXPECT_EQ(half[1], 0x7C00u);
  EXPECT_TRUE(std::isnan(fusednn::half_to_float(half[2])));
  EXPECT_TRUE(std::isnan(fusednn::half_to_float(half[3])));
  EXPECT_EQ(fusednn::half_to_float(half[4]), 1.5f);
  EXPECT_EQ(fusednn::half_to_float(half[5]), 3.0f);

  uint16_t bf16[6];
  ASSERT_EQ(
      fdnn_model_run_typed(model, 3, input, FDNN_DTYPE_FLOAT32, 9, bf16, FDNN_DTYPE_BFLOAT16, 6),
      FDNN_STATUS_OK)
      << fdnn_last_error_message();
  EXPECT_EQ(bf16[0], fusednn::float_to_bfloat16(360000.5f));  // finite in bfloat16
  EXPECT_TRUE(std::isfinite(fusednn::bfloat16_to_float(bf16[1])));
  EXPECT_TRUE(std::isnan(fusednn::bfloat16_to_float(bf16[2])));
  EXPECT_EQ(fusednn::bfloat16_to_float(bf16[5]), 3.0f);
  fdnn_model_destroy(model);
}

TEST(TypedIo, Float32BothWaysIsTheUntypedCall) {
  fdnn_model* model = make_seed_mlp(5);
  fdnn_context* context = nullptr;
  ASSERT_EQ(fdnn_context_create(model, &context), FDNN_STATUS_OK);
  std::mt19937 random(7);
  const std::vector<float> input = random_floats(kInputs, random);  // any floats, not only exact
  std::vector<float> untyped(kOutputs), typed(kOutputs, -1.0f), context_typed(kOutputs, -1.0f);
  ASSERT_EQ(fdnn_context_run(context, kBatch, input.data(), kInputs, untyped.data(), kOutputs),
            FDNN_STATUS_OK);
  ASSERT_EQ(fdnn_model_run_typed(model, kBatch, input.data(), FDNN_DTYPE_FLOAT32, kInputs,
                                 typed.data(), FDNN_DTYPE_FLOAT32, kOutputs),
            FDNN_STATUS_OK);
  ASSERT_EQ(fdnn_context_run_typed(context, kBatch, input.data(), FDNN_DTYPE_FLOAT32, kInputs,
                                   context_typed.data(), FDNN_DTYPE_FLOAT32, kOutputs),
            FDNN_STATUS_OK);
  EXPECT_EQ(std::memcmp(untyped.data(), typed.data(), kOutputs * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(untyped.data(), context_typed.data(), kOutputs * sizeof(float)), 0);

  // An old caller's messages still count floats.
  EXPECT_EQ(fdnn_model_run(model, kBatch, input.data(), kInputs - 1, untyped.data(), kOutputs),
            FDNN_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fdnn_last_error_message()).find("floats"), std::string::npos);
  fdnn_context_destroy(context);
  fdnn_model_destroy(model);
}

TEST(TypedIo, AWarmedUpContextAllocatesNoMoreThanTheFloat32Run) {
  fdnn_model* model = make_seed_mlp(3, 64, 1);
  fdnn_context* context = nullptr;
  ASSERT_EQ(fdnn_context_create(model, &context), FDNN_STATUS_OK);
  std::mt19937 random(9);
  const std::vector<float> input = representable_inputs(kInputs, random);
  const std::vector<unsigned char> half_input = encode(input, FDNN_DTYPE_FLOAT16);
  std::vector<float> output(kOutputs);
  std::vector<uint16_t> half_output(kOutputs);
  auto run_float32 = [&] {
    return fdnn_context_run(context, kBatch, input.data(), kInputs, output.data(), kOutputs);
  };
  auto run_half = [&] {
    return fdnn_context_run_typed(context, kBatch, half_input.data(), FDNN_DTYPE_FLOAT16, kInputs,
                                  half_output.data(), FDNN_DTYPE_FLOAT16, kOutputs);
  };
  ASSERT_EQ(run_float32(), FDNN_STATUS_OK);
  long long before = g_allocations;
  ASSERT_EQ(run_half(), FDNN_STATUS_OK);  // the first typed run allocates the buffers
  EXPECT_GT(g_allocations - before, 0) << "the library's allocations are not being counted";
  before = g_allocations;
  ASSERT_EQ(run_float32(), FDNN_STATUS_OK);
  const long long float32_allocations = g_allocations - before;
  before = g_allocations;
  ASSERT_EQ(run_half(), FDNN_STATUS_OK);
  EXPECT_EQ(g_allocations - before, float32_allocations);
  // A larger batch needs no larger buffers: they were sized for max_batch.
  const std::vector<unsigned char> large(64 * 100 * 2, 0);
  std::vector<uint16_t> large_output(64 * 10);
  before = g_allocations;
  ASSERT_EQ(fdnn_context_run_typed(context, 64, large.data(), FDNN_DTYPE_BFLOAT16, 6400,
                                   large_output.data(), FDNN_DTYPE_BFLOAT16, 640),
            FDNN_STATUS_OK);
  EXPECT_EQ(g_allocations - before, float32_allocations);
  fdnn_context_destroy(context);
  fdnn_model_destroy(model);
}

struct TypedCall {
  const char* name;
  // Calls one typed entry point on the tiny model (input 3, output 2 per sample).
  std::function<fdnn_status(fdnn_model*, fdnn_context*, int64_t, const void*, fdnn_dtype, size_t,
                            void*, fdnn_dtype, size_t)>
      call;
};

std::vector<TypedCall> host_calls() {
  return {
      {"model_run_typed",
       [](fdnn_model* m, fdnn_context*, int64_t b, const void* x, fdnn_dtype xd, size_t xc, void* y,
          fdnn_dtype yd, size_t yc) { return fdnn_model_run_typed(m, b, x, xd, xc, y, yd, yc); }},
      {"context_run_typed",
       [](fdnn_model*, fdnn_context* c, int64_t b, const void* x, fdnn_dtype xd, size_t xc, void* y,
          fdnn_dtype yd, size_t yc) { return fdnn_context_run_typed(c, b, x, xd, xc, y, yd, yc); }},
      {"context_run_device_typed",  // argument checks come before the CPU model refuses it
       [](fdnn_model*, fdnn_context* c, int64_t b, const void* x, fdnn_dtype xd, size_t xc, void* y,
          fdnn_dtype yd, size_t yc) {
         return fdnn_context_run_device_typed(c, b, x, xd, xc, y, yd, yc, nullptr);
       }},
  };
}

class TypedIoBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = make_tiny_model(4);
    set_tiny_weights(model_);
    ASSERT_EQ(fdnn_context_create(model_, &context_), FDNN_STATUS_OK);
  }
  void TearDown() override {
    fdnn_context_destroy(context_);
    fdnn_model_destroy(model_);
  }
  void expect_refused(fdnn_status status, fdnn_status expected,
                      std::initializer_list<std::string> parts, const std::string& call) {
    const std::string message = fdnn_last_error_message();
    EXPECT_EQ(status, expected) << call << ": " << fdnn_status_string(status) << ": " << message;
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos)
          << call << ": '" << part << "' not in: " << message;
    }
  }
  fdnn_model* model_ = nullptr;
  fdnn_context* context_ = nullptr;
  const float input_[6] = {1, 2, 3, 4, 5, 6};
};

TEST_F(TypedIoBadInput, UnknownDtypeValuesAreRefusedByName) {
  for (const TypedCall& c : host_calls()) {
    for (int32_t raw : {3}) {
      const std::string value = std::to_string(raw);
      uint16_t out[4] = {7, 7, 7, 7};
      expect_refused(
          c.call(model_, context_, 1, input_, dtype_from_raw(raw), 3, out, FDNN_DTYPE_FLOAT16, 4),
          FDNN_STATUS_INVALID_ARGUMENT, {"input_dtype", value, c.name}, c.name);
      expect_refused(
          c.call(model_, context_, 1, input_, FDNN_DTYPE_FLOAT32, 3, out, dtype_from_raw(raw), 4),
          FDNN_STATUS_INVALID_ARGUMENT, {"output_dtype", value}, c.name);
      EXPECT_EQ(out[0], 7) << c.name << ": written on failure";
    }
  }
}

TEST_F(TypedIoBadInput, CountsAreCheckedInElements) {
  for (const TypedCall& c : host_calls()) {
    for (fdnn_dtype out_dtype : {FDNN_DTYPE_FLOAT16, FDNN_DTYPE_BFLOAT16, FDNN_DTYPE_FLOAT32}) {
      uint16_t out[8] = {7, 7, 7, 7, 7, 7, 7, 7};
      // 2 samples need 4 output elements whatever their size: 3 is too few even though 3 floats'
      // worth of bytes would hold 6 halves.
      expect_refused(c.call(model_, context_, 2, input_, FDNN_DTYPE_FLOAT32, 6, out, out_dtype, 3),
                     FDNN_STATUS_BUFFER_TOO_SMALL, {"output_capacity", "needs 4 elements"}, c.name);
      EXPECT_EQ(out[0], 7) << c.name << ": written on failure";
      expect_refused(c.call(model_, context_, 2, input_, FDNN_DTYPE_FLOAT16, 3, out, out_dtype, 4),
                     FDNN_STATUS_INVALID_ARGUMENT, {"input_count", "needs 6 elements"}, c.name);
      expect_refused(c.call(model_, context_, 0, input_, FDNN_DTYPE_FLOAT16, 0, out, out_dtype, 4),
                     FDNN_STATUS_INVALID_ARGUMENT, {"batch"}, c.name);
      expect_refused(
          c.call(model_, context_, 5, input_, FDNN_DTYPE_FLOAT16, 15, out, out_dtype, 10),
          FDNN_STATUS_INVALID_ARGUMENT, {"batch", "max_batch"}, c.name);
    }
  }
}

TEST_F(TypedIoBadInput, NullPointers) {
  uint16_t out[2];
  for (const TypedCall& c : host_calls()) {
    expect_refused(
        c.call(model_, context_, 1, nullptr, FDNN_DTYPE_FLOAT16, 3, out, FDNN_DTYPE_FLOAT16, 2),
        FDNN_STATUS_INVALID_ARGUMENT, {"input is NULL"}, c.name);
    expect_refused(
        c.call(model_, context_, 1, input_, FDNN_DTYPE_FLOAT32, 3, nullptr, FDNN_DTYPE_FLOAT16, 2),
        FDNN_STATUS_INVALID_ARGUMENT, {"output is NULL"}, c.name);
  }
  expect_refused(
      fdnn_model_run_typed(nullptr, 1, input_, FDNN_DTYPE_FLOAT32, 3, out, FDNN_DTYPE_FLOAT16, 2),
      FDNN_STATUS_INVALID_ARGUMENT, {"model is NULL"}, "model_run_typed");
  expect_refused(
      fdnn_context_run_typed(nullptr, 1, input_, FDNN_DTYPE_FLOAT32, 3, out, FDNN_DTYPE_FLOAT16, 2),
      FDNN_STATUS_INVALID_ARGUMENT, {"context is NULL"}, "context_run_typed");
  expect_refused(fdnn_context_run_device_typed(nullptr, 1, input_, FDNN_DTYPE_FLOAT32, 3, out,
                                               FDNN_DTYPE_FLOAT16, 2, nullptr),
                 FDNN_STATUS_INVALID_ARGUMENT, {"context is NULL"}, "context_run_device_typed");
}

TEST_F(TypedIoBadInput, ACpuModelRefusesDevicePointers) {
  for (fdnn_dtype in : kDtypes) {
    for (fdnn_dtype out : kDtypes) {
      uint16_t output[4] = {7, 7, 7, 7};
      expect_refused(
          fdnn_context_run_device_typed(context_, 1, input_, in, 3, output, out, 4, nullptr),
          FDNN_STATUS_UNSUPPORTED, {"FDNN_DEVICE_CUDA", "CPU"},
          std::string(name_of(in)) + " -> " + name_of(out));
      EXPECT_EQ(output[0], 7);
    }
  }
}

TEST_F(TypedIoBadInput, RunBeforeWeightsAreLoaded) {
  fdnn_model* empty = make_tiny_model(4);
  uint16_t out[2];
  expect_refused(
      fdnn_model_run_typed(empty, 1, input_, FDNN_DTYPE_FLOAT32, 3, out, FDNN_DTYPE_FLOAT16, 2),
      FDNN_STATUS_INVALID_STATE, {"fc.weight"}, "model_run_typed");
  fdnn_model_destroy(empty);
}

TEST(TypedIoCpp, WrapperRunsSixteenBitBuffers) {
  auto model = fusednn::Model::from_spec(seed_mlp_spec(), fusednn::ModelOptions().max_batch(8));
  std::mt19937 random(1);
  for (const char* name : {"fc1", "fc2", "fc3"}) {
    const fusednn::Shape w = name[2] == '1'   ? fusednn::Shape{128, 100}
                             : name[2] == '2' ? fusednn::Shape{64, 128}
                                              : fusednn::Shape{10, 64};
    model.set_weight(std::string(name) + ".weight",
                     random_floats(size_t(w[0] * w[1]), random, 0.1f), w);
    model.set_weight(std::string(name) + ".bias", random_floats(size_t(w[0]), random, 0.1f),
                     {w[0]});
  }
  const std::vector<float> input = representable_inputs(2 * 100, random);
  const std::vector<float> reference = model.run(2, input);
  for (fdnn_dtype dtype : {FDNN_DTYPE_FLOAT16, FDNN_DTYPE_BFLOAT16}) {
    const std::vector<unsigned char> bytes = encode(input, dtype);
    std::vector<uint16_t> bits(input.size());
    std::memcpy(bits.data(), bytes.data(), bytes.size());
    const std::vector<unsigned char> expected = encode(reference, dtype);
    const std::vector<uint16_t> from_model = model.run(2, bits, dtype);
    fusednn::Context context = model.create_context();
    const std::vector<uint16_t> from_context = context.run(2, bits, dtype);
    ASSERT_EQ(from_model.size(), reference.size());
    EXPECT_EQ(std::memcmp(from_model.data(), expected.data(), expected.size()), 0);
    EXPECT_EQ(from_context, from_model);
    std::vector<float> widened(reference.size());
    context.run(2, bits.data(), dtype, bits.size(), widened.data(), FDNN_DTYPE_FLOAT32,
                widened.size());
    EXPECT_EQ(widened, reference);
  }
  try {
    model.run(1, std::vector<uint16_t>(100), dtype_from_raw(3));
    FAIL() << "an unknown dtype was accepted";
  } catch (const fusednn::Error& error) {
    EXPECT_EQ(error.status(), FDNN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(error.what()).find("input_dtype"), std::string::npos);
  }
}

}  // namespace
