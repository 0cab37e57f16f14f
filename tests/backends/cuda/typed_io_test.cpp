// SPDX-License-Identifier: Apache-2.0
// The typed runs on a CUDA model: fdnn_context_run_device_typed (read and written in 16 bits by
// the kernels that can, else widened into the context's device_input and narrowed from its
// device_output, on the caller's stream) and the host path (converted into and out of the pinned
// staging), with graphs on and off. The reference is the same context's float32 run on the same
// (exactly widened) input, narrowed on the host by the library's own converters
// (src/common/half_float.hpp): the GPU rounds to nearest even as they do, so the bits must agree
// exactly. Skips without a GPU.
#include <cctype>
#include <cstring>
#include <iostream>

#include "common/half_float.hpp"
#include "cuda_test_support.hpp"

namespace {

using namespace fusednn_cuda_test;

const fdnn_dtype kDtypes[] = {FDNN_DTYPE_FLOAT32, FDNN_DTYPE_FLOAT16, FDNN_DTYPE_BFLOAT16};

const char* name_of(fdnn_dtype dtype) {
  return dtype == FDNN_DTYPE_FLOAT32   ? "float32"
         : dtype == FDNN_DTYPE_FLOAT16 ? "float16"
                                       : "bfloat16";
}

size_t bytes_of(fdnn_dtype dtype) { return dtype == FDNN_DTYPE_FLOAT32 ? 4 : 2; }

// Values exact in float16 and bfloat16 alike: k / 32 with |k| <= 128.
std::vector<float> exact_inputs(size_t count, std::mt19937& random) {
  std::uniform_int_distribution<int> k(-128, 128);
  std::vector<float> values(count);
  for (float& v : values) v = static_cast<float>(k(random)) / 32.0f;
  return values;
}

std::vector<unsigned char> encode(const std::vector<float>& values, fdnn_dtype dtype) {
  std::vector<unsigned char> bytes(values.size() * bytes_of(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == FDNN_DTYPE_FLOAT32) {
      std::memcpy(bytes.data() + 4 * i, &values[i], 4);
    } else {
      const uint16_t bits = dtype == FDNN_DTYPE_FLOAT16 ? fusednn::float_to_half(values[i])
                                                        : fusednn::float_to_bfloat16(values[i]);
      std::memcpy(bytes.data() + 2 * i, &bits, 2);
    }
  }
  return bytes;
}

// A fused MLP chain (few launches, re-pointable graphs) and one with a lone wide Linear on
// cuBLASLt reading the model input (graphs kept per pair of buffers when a float32 side is the
// caller's).
std::vector<std::pair<std::string, Net>> nets() {
  Net mlp({100});
  mlp.linear("fc1", 100, 128).act(R"({"type": "ReLU"})");
  mlp.linear("fc2", 128, 10);
  Net wide({300});
  wide.linear("fc1", 300, 512).act(R"({"type": "ReLU"})");
  wide.linear("fc2", 512, 10);
  return {{"mlp", mlp}, {"wide", wide}};
}

struct CudaModel {
  fdnn_model* model = nullptr;
  fdnn_context* context = nullptr;
  size_t in_per_sample = 0, out_per_sample = 0;
  ~CudaModel() {
    fdnn_context_destroy(context);
    fdnn_model_destroy(model);
  }
};

void make(const Net& net, int32_t graphs, int64_t max_batch, std::mt19937& random, CudaModel* s) {
  s->model = create_model(net.spec(), FDNN_DEVICE_CUDA, max_batch, graphs);
  ASSERT_NE(s->model, nullptr);
  set_weights(s->model, net, draw_weights(net, random));
  ASSERT_EQ(fdnn_context_create(s->model, &s->context), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  fdnn_shape in, out;
  ASSERT_EQ(fdnn_model_input_shape(s->model, &in), FDNN_STATUS_OK);
  ASSERT_EQ(fdnn_model_output_shape(s->model, &out), FDNN_STATUS_OK);
  s->in_per_sample = static_cast<size_t>(elements(in));
  s->out_per_sample = static_cast<size_t>(elements(out));
}

TEST(CudaTypedIo, HostPathEveryDtypePairMatchesTheFloat32RunNarrowed) {
  REQUIRE_CUDA();
  for (const auto& [what, net] : nets()) {
    for (int32_t graphs : {1, 0}) {
      SCOPED_TRACE(what + (graphs ? " graphs on" : " graphs off"));
      std::mt19937 random(17);
      CudaModel s;
      ASSERT_NO_FATAL_FAILURE(make(net, graphs, 64, random, &s));
      for (int64_t batch : {int64_t{1}, int64_t{33}}) {
        const std::vector<float> input = exact_inputs(batch * s.in_per_sample, random);
        std::vector<float> reference(batch * s.out_per_sample, NAN);
        ASSERT_EQ(fdnn_context_run(s.context, batch, input.data(), input.size(), reference.data(),
                                   reference.size()),
                  FDNN_STATUS_OK)
            << fdnn_last_error_message();
        for (fdnn_dtype in : kDtypes) {
          const std::vector<unsigned char> typed_input = encode(input, in);
          for (fdnn_dtype out : kDtypes) {
            SCOPED_TRACE(std::string(name_of(in)) + " -> " + name_of(out));
            const std::vector<unsigned char> expected = encode(reference, out);
            std::vector<unsigned char> got(expected.size(), 0xA5);
            ASSERT_EQ(fdnn_context_run_typed(s.context, batch, typed_input.data(), in, input.size(),
                                             got.data(), out, reference.size()),
                      FDNN_STATUS_OK)
                << fdnn_last_error_message();
            EXPECT_EQ(got, expected);
            std::vector<unsigned char> pooled(expected.size(), 0xA5);
            ASSERT_EQ(fdnn_model_run_typed(s.model, batch, typed_input.data(), in, input.size(),
                                           pooled.data(), out, reference.size()),
                      FDNN_STATUS_OK)
                << fdnn_last_error_message();
            EXPECT_EQ(pooled, expected);
          }
        }
      }
    }
  }
}

#if FUSEDNN_TEST_WITH_CUDART
// Device buffers that hold any dtype, `offset_bytes` past a 256-byte boundary.
struct TypedBuffers {
  std::vector<void*> allocations;
  ~TypedBuffers() {
    for (void* p : allocations) cudaFree(p);
  }
  unsigned char* make(size_t bytes, size_t offset_bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes + offset_bytes) != cudaSuccess) return nullptr;
    allocations.push_back(p);
    return static_cast<unsigned char*>(p) + offset_bytes;
  }
};

// Sets of caller buffers (one 2 bytes past an alignment boundary: fine for 16-bit elements,
// refused for float32),
// each round giving each set another pair of dtypes, queued back to back on two streams before
// one wait: graphs must be found by dtype as well as batch, re-pointed (or kept per pair of
// buffers) and never mistake the context's memory for the caller's.
TEST(CudaTypedIo, DevicePathRotatingBuffersAndDtypes) {
  REQUIRE_CUDA();
  const std::pair<fdnn_dtype, fdnn_dtype> pairs[] = {
      {FDNN_DTYPE_FLOAT16, FDNN_DTYPE_FLOAT16},  {FDNN_DTYPE_BFLOAT16, FDNN_DTYPE_BFLOAT16},
      {FDNN_DTYPE_FLOAT16, FDNN_DTYPE_FLOAT32},  {FDNN_DTYPE_FLOAT32, FDNN_DTYPE_BFLOAT16},
      {FDNN_DTYPE_BFLOAT16, FDNN_DTYPE_FLOAT16}, {FDNN_DTYPE_FLOAT32, FDNN_DTYPE_FLOAT32}};
  constexpr int kPairs = 6;
  for (const auto& [what, net] : nets()) {
    for (int32_t graphs : {1, 0}) {
      SCOPED_TRACE(what + (graphs ? " graphs on" : " graphs off"));
      std::mt19937 random(29);
      CudaModel s;
      ASSERT_NO_FATAL_FAILURE(make(net, graphs, 33, random, &s));
      const int64_t batch = 33;
      const size_t in_count = batch * s.in_per_sample;
      const size_t out_count = batch * s.out_per_sample;
      constexpr int kSets = 4;
      TypedBuffers memory;
      std::vector<unsigned char*> device_in, device_out;
      std::vector<std::vector<float>> inputs, references;
      float* scratch_in = reinterpret_cast<float*>(memory.make(in_count * 4, 0));
      float* scratch_out = reinterpret_cast<float*>(memory.make(out_count * 4, 0));
      ASSERT_TRUE(scratch_in && scratch_out);
      for (int k = 0; k < kSets; ++k) {
        const size_t offset = k == kSets - 1 ? 2 : 0;  // the last set: 2-byte aligned only
        device_in.push_back(memory.make(in_count * 4, offset));
        device_out.push_back(memory.make(out_count * 4, offset));
        ASSERT_TRUE(device_in.back() && device_out.back());
        inputs.push_back(exact_inputs(in_count, random));
        // The float32 device run of the same context is the reference.
        std::vector<float> reference;
        ASSERT_NO_FATAL_FAILURE(run_device(s.context, batch, inputs.back(), out_count, scratch_in,
                                           scratch_out, nullptr, &reference));
        references.push_back(reference);
      }
      cudaStream_t streams[2] = {};
      for (cudaStream_t& stream : streams) {
        CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      }
      for (int round = 0; round < 3 * kPairs / 2; ++round) {
        for (int k = 0; k < kSets; ++k) {
          const auto [in, out] = pairs[(round + k) % kPairs];
          const std::vector<unsigned char> bytes = encode(inputs[k], in);
          ASSERT_NO_FATAL_FAILURE(upload(device_in[k], bytes.data(), bytes.size()));
          CUDA_OK(cudaMemset(device_out[k], 0xFF, out_count * 4));  // NaN in every dtype
        }
        CUDA_OK(cudaDeviceSynchronize());  // the legacy stream's memsets, as upload() says
        // The 2-byte aligned set cannot hold float32: a float32 side there is refused, naming
        // the buffer, before anything is queued (its output keeps the poison).
        auto refused = [&](int k, fdnn_dtype in, fdnn_dtype out) {
          return k == kSets - 1 && (in == FDNN_DTYPE_FLOAT32 || out == FDNN_DTYPE_FLOAT32);
        };
        for (int k = 0; k < kSets; ++k) {
          const auto [in, out] = pairs[(round + k) % kPairs];
          const fdnn_status status = fdnn_context_run_device_typed(
              s.context, batch, device_in[k], in, in_count, device_out[k], out, out_count,
              streams[(round + k) % 2]);
          if (refused(k, in, out)) {
            ASSERT_EQ(status, FDNN_STATUS_INVALID_ARGUMENT);
            const std::string message = fdnn_last_error_message();
            EXPECT_NE(message.find(in == FDNN_DTYPE_FLOAT32 ? "device_input" : "device_output"),
                      std::string::npos)
                << message;
            EXPECT_NE(message.find("aligned"), std::string::npos) << message;
          } else {
            ASSERT_EQ(status, FDNN_STATUS_OK) << fdnn_last_error_message();
          }
        }
        CUDA_OK(cudaDeviceSynchronize());
        for (int k = 0; k < kSets; ++k) {
          const auto [in, out] = pairs[(round + k) % kPairs];
          SCOPED_TRACE("round " + std::to_string(round) + " set " + std::to_string(k) + ": " +
                       name_of(in) + " -> " + name_of(out));
          std::vector<unsigned char> expected = encode(references[k], out);
          if (refused(k, in, out)) expected.assign(out_count * bytes_of(out), 0xFF);
          std::vector<unsigned char> got(expected.size());
          CUDA_OK(cudaMemcpy(got.data(), device_out[k], got.size(), cudaMemcpyDeviceToHost));
          EXPECT_EQ(got, expected);
        }
      }
      // Destroyed before the context, which must then not touch them.
      for (cudaStream_t stream : streams) cudaStreamDestroy(stream);
    }
  }
}

// The NULL stream (the context's own, waited for) and a batch of one on a one-launch plan, whose
// float32 device path skips graphs but whose converted one has enough launches to use them.
TEST(CudaTypedIo, DevicePathOwnStreamAndOneLaunchPlan) {
  REQUIRE_CUDA();
  Net tiny({8});
  tiny.linear("fc", 8, 4);
  std::mt19937 random(5);
  CudaModel s;
  ASSERT_NO_FATAL_FAILURE(make(tiny, 1, 4, random, &s));
  TypedBuffers memory;
  float* in32 = reinterpret_cast<float*>(memory.make(8 * 4, 0));
  float* out32 = reinterpret_cast<float*>(memory.make(4 * 4, 0));
  unsigned char* in16 = memory.make(8 * 2, 0);
  unsigned char* out16 = memory.make(4 * 2, 0);
  ASSERT_TRUE(in32 && out32 && in16 && out16);
  for (int repeat = 0; repeat < 3; ++repeat) {
    const std::vector<float> input = exact_inputs(8, random);
    std::vector<float> reference;
    ASSERT_NO_FATAL_FAILURE(run_device(s.context, 1, input, 4, in32, out32, nullptr, &reference));
    for (fdnn_dtype dtype : {FDNN_DTYPE_FLOAT16, FDNN_DTYPE_BFLOAT16}) {
      const std::vector<unsigned char> bytes = encode(input, dtype);
      ASSERT_NO_FATAL_FAILURE(upload(in16, bytes.data(), bytes.size()));
      ASSERT_EQ(
          fdnn_context_run_device_typed(s.context, 1, in16, dtype, 8, out16, dtype, 4, nullptr),
          FDNN_STATUS_OK)
          << fdnn_last_error_message();
      std::vector<unsigned char> got(8);
      CUDA_OK(cudaMemcpy(got.data(), out16, got.size(), cudaMemcpyDeviceToHost));
      EXPECT_EQ(got, encode(reference, dtype)) << name_of(dtype);
    }
  }
}

// Device buffers that share a byte are refused, naming both, with nothing queued (the kernels
// read the input while they write the output, in 16 bits without the context's buffers between);
// buffers side by side in one allocation run as separate ones do.
TEST(CudaTypedIo, DevicePathRefusesOverlappingBuffers) {
  REQUIRE_CUDA();
  Net tiny({8});
  tiny.linear("fc", 8, 4);
  std::mt19937 random(7);
  CudaModel s;
  ASSERT_NO_FATAL_FAILURE(make(tiny, 1, 4, random, &s));
  TypedBuffers memory;
  float* in32 = reinterpret_cast<float*>(memory.make(8 * 4, 0));
  float* out32 = reinterpret_cast<float*>(memory.make(4 * 4, 0));
  unsigned char* shared = memory.make(256, 0);
  ASSERT_TRUE(in32 && out32 && shared);
  const std::vector<float> input = exact_inputs(8, random);
  std::vector<float> reference;
  ASSERT_NO_FATAL_FAILURE(run_device(s.context, 1, input, 4, in32, out32, nullptr, &reference));
  for (fdnn_dtype dtype : {FDNN_DTYPE_BFLOAT16, FDNN_DTYPE_FLOAT16}) {
    SCOPED_TRACE(name_of(dtype));
    const std::vector<unsigned char> bytes = encode(input, dtype);  // 16 bytes
    for (const size_t output_at : {size_t{0}, size_t{8}, size_t{14}}) {
      SCOPED_TRACE("output " + std::to_string(output_at) + " bytes into the input");
      ASSERT_NO_FATAL_FAILURE(upload(shared, bytes.data(), bytes.size()));
      ASSERT_EQ(fdnn_context_run_device_typed(s.context, 1, shared, dtype, 8, shared + output_at,
                                              dtype, 4, nullptr),
                FDNN_STATUS_INVALID_ARGUMENT);
      const std::string message = fdnn_last_error_message();
      for (const char* part : {"device_input", "device_output", "overlap"}) {
        EXPECT_NE(message.find(part), std::string::npos) << message;
      }
      std::vector<unsigned char> after(bytes.size());
      CUDA_OK(cudaMemcpy(after.data(), shared, after.size(), cudaMemcpyDeviceToHost));
      EXPECT_EQ(after, bytes);  // nothing ran
    }
    ASSERT_NO_FATAL_FAILURE(upload(shared, bytes.data(), bytes.size()));
    ASSERT_EQ(fdnn_context_run_device_typed(s.context, 1, shared, dtype, 8, shared + 16, dtype, 4,
                                            nullptr),
              FDNN_STATUS_OK)
        << fdnn_last_error_message();
    std::vector<unsigned char> got(8);
    CUDA_OK(cudaMemcpy(got.data(), shared + 16, got.size(), cudaMemcpyDeviceToHost));
    EXPECT_EQ(got, encode(reference, dtype));
  }
}

// ------------------------------------------------------------------------------------------
// 16-bit inputs and outputs read and written by the kernels themselves (no conversion pass):
// the tensor-core MLP forms (WarpRegisters at every width class, staged and unstaged, and its
// Warpgroup companion from 512 rows on compute capability 9.0), with folded row ops, odd widths
// and the general epilogue; and cuBLASLt with 16-bit operands, reading the input as its operand
// and writing the output as its D (in the operands' type). The reference is the float32 device
// run of the same context on the input widened on the host, with buffers of the same 16-byte
// alignment class (which picks the Warpgroup form or not), narrowed on the host to nearest even:
// the bits must agree exactly (but see Io16Case::cublaslt_writes).

// A model, the precision it is made in, and whether the explanation must say at every batch
// that the input is read (reads) and the output written (writes) in 16 bits by the kernels;
// misaligned: buffers one element off 16 bytes also run the form the float32 reference runs
// (not where the context's own buffers stand in, or cuBLASLt picks its algorithm by the
// output's alignment); max_batch: the largest batch to run; warpgroup: whether the aligned
// runs from 512 rows take the Warpgroup form on compute capability 9.0 (no other device has it).
enum class Expect { No, Yes, Either };

struct Io16Case {
  std::string name;
  Net net;
  fdnn_precision precision;
  bool reads;
  bool writes;
  bool misaligned;
  int64_t max_batch;
  Expect warpgroup;
  // cuBLASLt writes an output of the model's own type as its D: its algorithm for that D may
  // differ from the float32 reference's, summing in another order, so the bits may differ by
  // the rounding of the fp32 sums. Those runs must stay within one unit in the last place of
  // the largest output (relative to it), and print how many elements differ.
  bool cublaslt_writes = false;
};

std::vector<Io16Case> io16_cases() {
  const int64_t all = INT64_MAX;
  std::vector<Io16Case> cases;
  cases.push_back(
      {"seed MLP bf16", seed_mlp(), FDNN_PRECISION_BF16, true, true, true, all, Expect::Yes});
  Net uniform({32});  // the 64-wide MLP: the Warpgroup form's uniform chain
  uniform.linear("fc1", 32, 64).act(R"({"type": "ReLU"})");
  for (int l = 2; l <= 4; ++l) {
    uniform.linear("fc" + std::to_string(l), 64, 64).act(R"({"type": "ReLU"})");
  }
  uniform.linear("fc5", 64, 16);
  cases.push_back(
      {"64-wide MLP fp16", uniform, FDNN_PRECISION_FP16, true, true, true, all, Expect::Yes});
  Net odd({37});  // odd widths: scalar loads and stores, no Warpgroup form; GELU's epilogue
  odd.linear("fc1", 37, 48).act(R"({"type": "GELU", "approximate": "none"})");
  odd.linear("fc2", 48, 7);
  cases.push_back({"odd widths fp16", odd, FDNN_PRECISION_FP16, true, true, true, all, Expect::No});
  Net wide({200});  // width class 256: input rows read from global memory, not staged
  wide.linear("fc1", 200, 256).act(R"({"type": "SiLU"})");
  wide.linear("fc2", 256, 24);
  cases.push_back({"width 256 bf16", wide, FDNN_PRECISION_BF16, true, true, true, all, Expect::No});
  Net softmax({64});  // a folded Softmax after the last layer
  softmax.linear("fc1", 64, 128).act(R"({"type": "ReLU"})");
  softmax.linear("fc2", 128, 32).layer(R"({"type": "Softmax", "dim": -1})");
  cases.push_back(
      {"folded Softmax bf16", softmax, FDNN_PRECISION_BF16, true, true, true, all, Expect::Yes});
  Net tail({48});  // a folded LayerNorm, then GELU in place on the output: narrowed after
  tail.linear("fc1", 48, 96).act(R"({"type": "ReLU"})");
  tail.linear("fc2", 96, 64).layer_norm("ln", 64).act(R"({"type": "GELU"})");
  cases.push_back({"folded LayerNorm + GELU pass fp16", tail, FDNN_PRECISION_FP16, true, false,
                   true, all, Expect::Either});
  // A lone wide Linear on cuBLASLt with 16-bit operands: a bfloat16 input is its operand as it
  // is (a float16 one is widened, then narrowed into the staging); the output is narrowed after.
  Net lone({320});
  lone.linear("fc", 320, 600).act(R"({"type": "ReLU"})");
  cases.push_back({"wide Linear bf16 (cuBLASLt)", lone, FDNN_PRECISION_BF16, true, false, false,
                   4097, Expect::No});
  // Lone wide Linear layers whose cuBLASLt epilogue is the last thing done to the output: a
  // model output of the operands' type on 256 bytes is cuBLASLt's D (bias and activation applied
  // in fp32, rounded once as it is stored); the other 16-bit type is narrowed after. Not
  // misaligned: a 16-bit output off 256 bytes is narrowed from the context's float32 buffer on
  // 256 bytes, whose cuBLASLt algorithm may differ from the float32 reference's off it.
  for (const fdnn_precision precision : {FDNN_PRECISION_BF16, FDNN_PRECISION_FP16}) {
    const std::string type = precision == FDNN_PRECISION_BF16 ? " bf16" : " fp16";
    Net gelu({768});
    gelu.linear("fc", 768, 3072).act(R"({"type": "GELU", "approximate": "tanh"})");
    cases.push_back({"768-3072 GELU(tanh)" + type + " (cuBLASLt)", gelu, precision, true, true,
                     false, 4097, Expect::No, true});
    Net square({1024});
    square.linear("fc", 1024, 1024);
    cases.push_back({"1024-1024 bias" + type + " (cuBLASLt)", square, precision, true, true, false,
                     4097, Expect::No, true});
    // ReLU runs as the backend's NaN-keeping pass after cuBLASLt: the output is narrowed after.
    Net odd_relu({1000});
    odd_relu.linear("fc", 1000, 1003).act(R"({"type": "ReLU"})");
    cases.push_back({"1000-1003 ReLU" + type + " (cuBLASLt)", odd_relu, precision, true, false,
                     false, 4097, Expect::No});
    // A fused chain on tensor cores reads the 16-bit input, cuBLASLt writes the 16-bit output.
    Net chain({64});
    chain.linear("fc1", 64, 128).act(R"({"type": "ReLU"})");
    chain.linear("fc2", 128, 96).act(R"({"type": "ReLU"})");
    chain.linear("wide", 96, 3072).act(R"({"type": "GELU", "approximate": "tanh"})");
    cases.push_back({"fused chain then 96-3072 GELU(tanh)" + type, chain, precision, true, true,
                     false, 4097, Expect::Yes, true});
  }
  // fp32 and tf32 models: their kernels (the FMA forms, the tf32 tensor-core forms from some
  // thousand rows) read and write float32, and the context converts.
  cases.push_back(
      {"seed MLP fp32", seed_mlp(), FDNN_PRECISION_FP32, false, false, false, all, Expect::No});
  cases.push_back(
      {"seed MLP tf32", seed_mlp(), FDNN_PRECISION_TF32, false, false, false, all, Expect::No});
  return cases;
}

// Values of `dtype` (drawn from a normal distribution and rounded to it), as float32.
std::vector<float> representable_inputs(size_t count, fdnn_dtype dtype, std::mt19937& random) {
  std::vector<float> values = normal(count, random, 0.0f, 1.0f);
  for (float& v : values) {
    if (dtype == FDNN_DTYPE_FLOAT16) v = fusednn::half_to_float(fusednn::float_to_half(v));
    if (dtype == FDNN_DTYPE_BFLOAT16) {
      v = fusednn::bfloat16_to_float(fusednn::float_to_bfloat16(v));
    }
  }
  return values;
}

// The nodes of one run of `batch` samples captured on a stream of the test's (the poison and
// input left as they are: nothing runs).
size_t captured_nodes(fdnn_context* context, int64_t batch, void* input, fdnn_dtype input_dtype,
                      size_t in_per_sample, void* output, fdnn_dtype output_dtype,
                      size_t out_per_sample) {
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const fdnn_status status =
      fdnn_context_run_device_typed(context, batch, input, input_dtype, batch * in_per_sample,
                                    output, output_dtype, batch * out_per_sample, stream);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_EQ(status, FDNN_STATUS_OK) << fdnn_last_error_message();
  size_t nodes = 0;
  if (graph != nullptr) {
    EXPECT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
    cudaGraphDestroy(graph);
  }
  cudaStreamDestroy(stream);
  return nodes;
}

// A caller buffer of exactly `bytes` (elements times their dtype's size) inside an allocation of
// its own: `lead` bytes of poison before it (0xFF: NaN in every dtype) and `tail` bytes after.
// An input has no tail: it ends where its allocation does, so a read past its end (which a value
// check cannot see when the kernel drops what it read) is an access outside any allocation,
// flagged by compute-sanitizer's memcheck (tools/gpu_checks.sh runs this test under it); a read
// before its start takes NaN poison, which corrupts the results if used. An output has a poisoned
// tail: a write on either side shows in the guards, checked after the run with or without the
// sanitizer.
class GuardedBuffer {
 public:
  GuardedBuffer() = default;
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  ~GuardedBuffer() {
    if (base_ != nullptr) cudaFree(base_);
  }
  // False where the device refuses the memory.
  bool allocate(size_t lead, size_t bytes, size_t tail) {
    lead_ = lead, bytes_ = bytes, tail_ = tail;
    void* p = nullptr;
    if (cudaMalloc(&p, lead + bytes + tail) != cudaSuccess) return false;
    base_ = static_cast<unsigned char*>(p);
    return cudaMemset(base_, 0xFF, lead + bytes + tail) == cudaSuccess;
  }
  unsigned char* data() const { return base_ + lead_; }
  // The buffer's bytes, into *bytes; false (the test failed, naming the byte) where a guard
  // byte is no longer poison or the copy failed.
  bool read_checking_guards(std::vector<unsigned char>* bytes) const {
    std::vector<unsigned char> all(lead_ + bytes_ + tail_);
    if (cudaMemcpy(all.data(), base_, all.size(), cudaMemcpyDeviceToHost) != cudaSuccess) {
      ADD_FAILURE() << "the copy back failed";
      return false;
    }
    for (size_t i = 0; i < all.size(); ++i) {
      const bool guard = i < lead_ || i >= lead_ + bytes_;
      if (guard && all[i] != 0xFF) {
        ADD_FAILURE() << (i < lead_ ? "byte " + std::to_string(lead_ - i) + " before"
                                    : "byte " + std::to_string(i - lead_ - bytes_) + " past")
                      << " the buffer was written";
        return false;
      }
    }
    bytes->assign(all.begin() + static_cast<std::ptrdiff_t>(lead_),
                  all.begin() + static_cast<std::ptrdiff_t>(lead_ + bytes_));
    return true;
  }

 private:
  unsigned char* base_ = nullptr;
  size_t lead_ = 0, bytes_ = 0, tail_ = 0;
};

bool compute_capability_90() {
  int major = 0, minor = 0;
  EXPECT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0), cudaSuccess);
  return major == 9 && minor == 0;
}

// One model of io16_cases() a test, so that each sanitizer shard of one stays short.
class CudaTypedIoKernels : public ::testing::TestWithParam<size_t> {};

// The checks of one case. On the tests' selection (tensor cores from the first row,
// cuda_test_support.hpp) the case's reads, writes and Warpgroup expectations hold at every batch;
// on the library's default (`default_selection`), below one tile per SM the chain runs on the
// fp32 FMA kernels, which read and write 16 bits themselves where no row kernel or pass follows:
// there the explanation decides what is expected, and the node count and bits check it.
void check_16_bit_kernels(const Io16Case& c, bool default_selection) {
  const std::pair<fdnn_dtype, fdnn_dtype> pairs[] = {{FDNN_DTYPE_BFLOAT16, FDNN_DTYPE_BFLOAT16},
                                                     {FDNN_DTYPE_FLOAT16, FDNN_DTYPE_FLOAT16},
                                                     {FDNN_DTYPE_BFLOAT16, FDNN_DTYPE_FLOAT32},
                                                     {FDNN_DTYPE_FLOAT32, FDNN_DTYPE_FLOAT16},
                                                     {FDNN_DTYPE_FLOAT16, FDNN_DTYPE_BFLOAT16}};
  // 513: the Warpgroup form's least rows and more, its last 64-row tile one row (a full tile's
  // copy before it, the last tile's 8-byte rest for the seed MLP's 100 columns).
  const std::vector<int64_t> batches =
      quick() ? std::vector<int64_t>{1, 33, 513}
              : std::vector<int64_t>{1, 2, 31, 33, 129, 513, 4097, 20001};
  const bool warpgroup_device = compute_capability_90();
  const int64_t max_batch = std::min(batches.back(), c.max_batch);
  std::mt19937 random(41);
  CudaModel s;
  s.model = create_model(c.net.spec(), FDNN_DEVICE_CUDA, max_batch, 1, c.precision);
  ASSERT_NE(s.model, nullptr) << fdnn_last_error_message();
  set_weights(s.model, c.net, draw_weights(c.net, random));
  ASSERT_EQ(fdnn_context_create(s.model, &s.context), FDNN_STATUS_OK) << fdnn_last_error_message();
  fdnn_shape in_shape, out_shape;
  ASSERT_EQ(fdnn_model_input_shape(s.model, &in_shape), FDNN_STATUS_OK);
  ASSERT_EQ(fdnn_model_output_shape(s.model, &out_shape), FDNN_STATUS_OK);
  const auto in_per_sample = static_cast<size_t>(elements(in_shape));
  const auto out_per_sample = static_cast<size_t>(elements(out_shape));
  // Buffers on 256 bytes (cudaMalloc's alignment and more) lie 256 bytes into their allocation.
  constexpr size_t kGuard = 256;
  for (const int64_t batch : batches) {
    if (batch > max_batch) continue;
    const std::string explanation = explain_text(s.model, batch);
    // Both 16-bit types, or (cuBLASLt's operand, the Warpgroup form's output) the model's own.
    const bool reads = contains(explanation, "model input itself");
    const bool writes = contains(explanation, "model output itself");
    const std::string own = c.precision == FDNN_PRECISION_FP16 ? "float16" : "bfloat16";
    const bool tensor_cores = contains(explanation, "on tensor cores,");
    if (!default_selection || tensor_cores) {
      EXPECT_EQ(reads, c.reads) << "batch " << batch << ":\n" << explanation;
      EXPECT_EQ(writes, c.writes) << "batch " << batch << ":\n" << explanation;
    }
    if (reads) {
      EXPECT_TRUE(contains(explanation, "reads a float16 or bfloat16 model input") ||
                  contains(explanation, "reads a " + own + " model input"))
          << explanation;
    }
    if (writes) {
      EXPECT_TRUE(contains(explanation, "writes a float16 or bfloat16 model output") ||
                  contains(explanation, "writes a " + own + " model output"))
          << explanation;
    }
    EXPECT_NE(reads, contains(explanation, "model input is widened to float32 first"));
    EXPECT_NE(writes, contains(explanation, "a float16 or bfloat16 model output is narrowed"));
    // The form the aligned runs (and their float32 reference) take: the bit comparison of the
    // Warpgroup form's 16-bit I/O rests on it.
    const Expect warpgroup = warpgroup_device ? c.warpgroup : Expect::No;
    if (batch >= 512 && warpgroup != Expect::Either && (!default_selection || tensor_cores)) {
      EXPECT_EQ(contains(explanation, "tensor cores, Warpgroup (wgmma)"), warpgroup == Expect::Yes)
          << "batch " << batch << ":\n"
          << explanation;
    }
    // What really runs: the run captured into a graph of the test's (the context launches
    // straight into a capturing caller stream) has as many nodes as the float32 run's, less
    // one for each conversion pass the kernels spare, more for each the context adds. (Where
    // cuBLASLt writes the 16-bit output, its algorithm for that D is taken to launch as many
    // kernels as the one for a float32 D.)
    if (batch == 33 || batch >= 512) {
      const fdnn_dtype own_dtype =
          c.precision == FDNN_PRECISION_FP16 ? FDNN_DTYPE_FLOAT16 : FDNN_DTYPE_BFLOAT16;
      const size_t in_count = batch * in_per_sample, out_count = batch * out_per_sample;
      GuardedBuffer in32, out32, in16, out16;
      ASSERT_TRUE(
          in32.allocate(kGuard, in_count * 4, 0) && out32.allocate(kGuard, out_count * 4, 0) &&
          in16.allocate(kGuard, in_count * 2, 0) && out16.allocate(kGuard, out_count * 2, 0));
      const size_t float_nodes =
          captured_nodes(s.context, batch, in32.data(), FDNN_DTYPE_FLOAT32, in_per_sample,
                         out32.data(), FDNN_DTYPE_FLOAT32, out_per_sample);
      const size_t half_nodes =
          captured_nodes(s.context, batch, in16.data(), own_dtype, in_per_sample, out16.data(),
                         own_dtype, out_per_sample);
      // cuBLASLt's 16-bit operand: the float32 run narrows x into the staging, this one not.
      const bool spares_staging = reads && contains(c.name, "cuBLASLt");
      EXPECT_EQ(half_nodes + (spares_staging ? 1 : 0),
                float_nodes + (reads ? 0 : 1) + (writes ? 0 : 1))
          << "batch " << batch << ": " << half_nodes << " nodes with " << name_of(own_dtype)
          << " I/O, " << float_nodes << " with float32";
      ASSERT_FALSE(::testing::Test::HasFatalFailure());
    }
    for (const auto& [in, out] : pairs) {
      // 0: on 256 bytes; 1: one element off 16 bytes; 2 (cuBLASLt): the input 16 bytes past
      // 256, where cuBLASLt does not take it and the context widens it. 0 and 2 share graphs'
      // alignment class: a graph of the one must not be re-pointed for the other. Every run has
      // buffers of its own, at other addresses than the run's before: graphs are re-pointed.
      for (int placement = 0; placement < 3; ++placement) {
        const bool misaligned = placement == 1;
        if (misaligned && !c.misaligned) continue;
        if (placement == 2 && !contains(c.name, "cuBLASLt")) continue;
        const size_t shift = placement == 2 ? 16 : 0;
        SCOPED_TRACE("batch " + std::to_string(batch) + ", " + name_of(in) + " -> " + name_of(out) +
                     (misaligned ? ", one element off 16 bytes" : "") +
                     (shift ? ", input 16 bytes past 256" : ""));
        auto lead = [&](fdnn_dtype dtype) { return kGuard + (misaligned ? bytes_of(dtype) : 0); };
        const size_t in_count = batch * in_per_sample, out_count = batch * out_per_sample;
        const std::vector<float> input = representable_inputs(in_count, in, random);
        // The reference: float32 buffers of the same alignment class.
        GuardedBuffer in32, out32;
        ASSERT_TRUE(in32.allocate(lead(FDNN_DTYPE_FLOAT32) + shift, in_count * 4, 0) &&
                    out32.allocate(lead(FDNN_DTYPE_FLOAT32), out_count * 4, kGuard));
        std::vector<float> reference;
        ASSERT_NO_FATAL_FAILURE(
            run_device(s.context, batch, input, out_count, reinterpret_cast<float*>(in32.data()),
                       reinterpret_cast<float*>(out32.data()), nullptr, &reference));
        const std::vector<unsigned char> expected = encode(reference, out);

        GuardedBuffer device_in, device_out;
        ASSERT_TRUE(device_in.allocate(lead(in) + shift, in_count * bytes_of(in), 0) &&
                    device_out.allocate(lead(out), out_count * bytes_of(out), kGuard));
        const std::vector<unsigned char> bytes = encode(input, in);
        ASSERT_NO_FATAL_FAILURE(upload(device_in.data(), bytes.data(), bytes.size()));
        ASSERT_EQ(fdnn_context_run_device_typed(s.context, batch, device_in.data(), in, in_count,
                                                device_out.data(), out, out_count, nullptr),
                  FDNN_STATUS_OK)
            << fdnn_last_error_message();
        std::vector<unsigned char> got;
        ASSERT_TRUE(device_out.read_checking_guards(&got));
        const fdnn_dtype own_dtype =
            c.precision == FDNN_PRECISION_FP16 ? FDNN_DTYPE_FLOAT16 : FDNN_DTYPE_BFLOAT16;
        if (got != expected && c.cublaslt_writes && out == own_dtype) {
          std::vector<float> widened(out_count);
          size_t differing = 0;
          for (size_t i = 0; i < out_count; ++i) {
            uint16_t bits = 0;
            std::memcpy(&bits, got.data() + 2 * i, 2);
            widened[i] = out == FDNN_DTYPE_FLOAT16 ? fusednn::half_to_float(bits)
                                                   : fusednn::bfloat16_to_float(bits);
            differing += std::memcmp(got.data() + 2 * i, expected.data() + 2 * i, 2) != 0 ? 1 : 0;
          }
          // One unit in the last place, relative: 2^-10 for float16, 2^-7 for bfloat16.
          const double ulp = out == FDNN_DTYPE_FLOAT16 ? 1.0 / 1024 : 1.0 / 128;
          const double error = relative_error(widened, reference);
          std::cout << "[ cuBLASLt ] " << c.name << ", batch " << batch << ": " << differing
                    << " of " << out_count << " elements differ from the float32 run narrowed; "
                    << "relative error against it " << error << "\n";
          EXPECT_LE(error, ulp);
          continue;
        }
        if (got != expected) {
          size_t first = 0;
          while (got[first] == expected[first]) ++first;
          FAIL() << "first differing byte " << first << " of " << got.size() << " (element "
                 << first / bytes_of(out) << ")";
        }
      }
    }
  }
}

// The forms it expects are those of the rule that takes fp16/bf16 to tensor cores from the first
// row, which it sets itself so that FUSEDNN_CUDA_TEST_DEFAULT_SELECTION=1 leaves it as written.
TEST_P(CudaTypedIoKernels, ReadAndWrite16BitBuffersBitForBit) {
  REQUIRE_CUDA();
  ScopedOverride rule("small_batch_tensor_cores", "1");
  check_16_bit_kernels(io16_cases().at(GetParam()), false);
}

TEST_P(CudaTypedIoKernels, ReadAndWrite16BitBuffersBitForBitOnTheDefaultSelection) {
  REQUIRE_CUDA();
  ScopedOverride rule("small_batch_tensor_cores", "auto");
  check_16_bit_kernels(io16_cases().at(GetParam()), true);
}

// Test names from the models' (letters and digits; anything else an underscore).
std::string test_name(const ::testing::TestParamInfo<size_t>& info) {
  std::string name = io16_cases().at(info.param).name;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Models, CudaTypedIoKernels,
                         ::testing::Range<size_t>(0, io16_cases().size()), test_name);
#endif

TEST(CudaTypedIo, UnknownDtypeOnACudaModel) {
  REQUIRE_CUDA();
  Net tiny({8});
  tiny.linear("fc", 8, 4);
  std::mt19937 random(3);
  CudaModel s;
  ASSERT_NO_FATAL_FAILURE(make(tiny, 1, 4, random, &s));
  const int32_t raw = 3;  // within the enum's range: C++ may load it (see tests/api)
  fdnn_dtype unknown;
  std::memcpy(&unknown, &raw, sizeof unknown);
  float in[8] = {}, out[4] = {};
  EXPECT_EQ(fdnn_context_run_device_typed(s.context, 1, in, unknown, 8, out, FDNN_DTYPE_FLOAT32, 4,
                                          nullptr),
            FDNN_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fdnn_last_error_message()).find("input_dtype"), std::string::npos);
}

}  // namespace
