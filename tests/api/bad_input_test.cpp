// SPDX-License-Identifier: Apache-2.0
// Bad input, table-driven: every case returns the documented status, the message names the
// culprit, and nothing crashes or leaks (this suite also runs under ASan/UBSan, preset "asan").
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include "api_test_support.hpp"

using namespace fusednn_test;

namespace {

struct BadInputCase {
  std::string name;
  std::function<fdnn_status(const TempDir&)> call;
  fdnn_status expected;
  std::vector<std::string> message_contains;
};

void PrintTo(const BadInputCase& c, std::ostream* out) { *out << c.name; }

// Creates from a spec, runs `then` on the model, destroys it; returns the status of `then`.
fdnn_status with_spec(const std::string& spec,
                      const std::function<fdnn_status(fdnn_model*)>& then) {
  fdnn_model* model = nullptr;
  fdnn_status status = fdnn_model_create_from_spec(spec.data(), spec.size(), nullptr, &model);
  if (status != FDNN_STATUS_OK) return status;
  status = then(model);
  fdnn_model_destroy(model);
  return status;
}

fdnn_status create_from_spec(const std::string& spec) {
  return with_spec(spec, [](fdnn_model*) { return FDNN_STATUS_OK; });
}

fdnn_status with_tiny(const std::function<fdnn_status(fdnn_model*)>& then, bool weights = true) {
  fdnn_model* model = make_tiny_model(4);
  if (weights) set_tiny_weights(model);
  const fdnn_status status = then(model);
  fdnn_model_destroy(model);
  return status;
}

// A context of the tiny model, weights loaded, for `then`; INTERNAL_ERROR if it cannot be made.
fdnn_status with_tiny_context(const std::function<fdnn_status(fdnn_context*)>& then) {
  return with_tiny([&](fdnn_model* m) {
    fdnn_context* c = nullptr;
    if (fdnn_context_create(m, &c) != FDNN_STATUS_OK) return FDNN_STATUS_INTERNAL_ERROR;
    const fdnn_status status = then(c);
    fdnn_context_destroy(c);
    return status;
  });
}

std::string tiny_safetensors(const std::string& extra_header, const std::string& extra_data,
                             const std::string& weight_dtype = "F32") {
  const std::string weight = float_bytes({1, 2, 3, 4, 5, 6});
  const std::string bias = float_bytes({0.5f, -1.0f});
  const std::string header =
      R"({"fc.weight": {"dtype": ")" + weight_dtype +
      R"(", "shape": [2, 3], "data_offsets": [0, 24]},)"
      R"( "fc.bias": {"dtype": "F32", "shape": [2], "data_offsets": [24, 32]})" +
      extra_header + "}";
  return safetensors_bytes(header, weight + bias + extra_data);
}

fdnn_status load_into_tiny(const std::string& path) {
  return with_tiny([&](fdnn_model* m) { return fdnn_model_load_weights(m, path.c_str()); }, false);
}

std::string spec_with_layers(const std::string& layers, const std::string& input = "[3]") {
  return R"({"fusednn": 1, "name": "bad", "input": {"shape": )" + input +
         R"(, "dtype": "float32"}, "layers": [)" + layers + "]}";
}

const float kInput[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

std::vector<BadInputCase> cases() {
  std::vector<BadInputCase> all;
  auto add = [&](std::string name, std::function<fdnn_status(const TempDir&)> call,
                 fdnn_status expected, std::vector<std::string> contains) {
    all.push_back({std::move(name), std::move(call), expected, std::move(contains)});
  };

  // --- Files -------------------------------------------------------------------------------
  add("MissingFile",
      [](const TempDir& dir) {
        fdnn_model* m = nullptr;
        return fdnn_model_create_from_file(dir.file("absent.json").c_str(), nullptr, &m);
      },
      FDNN_STATUS_IO_ERROR, {"absent.json"});
  add("EmptyFile",
      [](const TempDir& dir) {
        fdnn_model* m = nullptr;
        return fdnn_model_create_from_file(dir.write("empty.json", "").c_str(), nullptr, &m);
      },
      FDNN_STATUS_PARSE_ERROR, {"empty.json"});
  add("EmptyWeightsFile",
      [](const TempDir& dir) { return load_into_tiny(dir.write("empty.safetensors", "")); },
      FDNN_STATUS_PARSE_ERROR, {"empty.safetensors"});
  add("MissingWeightsFile",
      [](const TempDir& dir) { return load_into_tiny(dir.file("nowhere.safetensors")); },
      FDNN_STATUS_IO_ERROR, {"nowhere.safetensors"});
  add("TruncatedSafetensors",
      [](const TempDir& dir) {
        std::string bytes = tiny_safetensors("", "");
        bytes.resize(bytes.size() - 5);  // the last tensor's data is cut short
        return load_into_tiny(dir.write("truncated.safetensors", bytes));
      },
      FDNN_STATUS_PARSE_ERROR, {"truncated.safetensors"});
  add("SafetensorsShorterThanItsLengthField",
      [](const TempDir& dir) {
        return load_into_tiny(dir.write("tiny.safetensors", std::string("\x10\x00\x00", 3)));
      },
      FDNN_STATUS_PARSE_ERROR, {"tiny.safetensors"});
  add("HeaderLengthPastEndOfFile",
      [](const TempDir& dir) {
        std::string bytes = tiny_safetensors("", "");
        bytes[0] = '\xff';
        bytes[1] = '\xff';
        bytes[2] = '\xff';  // header length ~16 MB in a ~200-byte file
        return load_into_tiny(dir.write("long_header.safetensors", bytes));
      },
      FDNN_STATUS_PARSE_ERROR, {"long_header.safetensors", "header"});
  add("JsonSyntaxErrorGivesLineAndColumn",
      [](const TempDir& dir) {
        fdnn_model* m = nullptr;
        const std::string path =
            dir.write("syntax.json", "{\n  \"fusednn\": 1,\n  \"input\": {,\n}\n");
        return fdnn_model_create_from_file(path.c_str(), nullptr, &m);
      },
      FDNN_STATUS_PARSE_ERROR, {"syntax.json", "line 3", "column"});

  // --- Specs -------------------------------------------------------------------------------
  add("UnknownLayerType",
      [](const TempDir&) {
        return create_from_spec(spec_with_layers(R"({"type": "Lineer", "name": "fc"})"));
      },
      FDNN_STATUS_INVALID_MODEL, {"Lineer", "fc"});
  add("NegativeDimension",
      [](const TempDir&) {
        return create_from_spec(spec_with_layers(
            R"({"type": "Linear", "name": "fc", "in_features": 3, "out_features": -2})"));
      },
      FDNN_STATUS_INVALID_MODEL, {"fc", "out_features"});
  add("ZeroDimension",
      [](const TempDir&) {
        return create_from_spec(spec_with_layers(
            R"({"type": "Linear", "name": "fc", "in_features": 3, "out_features": 0})"));
      },
      FDNN_STATUS_INVALID_MODEL, {"fc", "out_features"});
  add("ZeroInputDimension",
      [](const TempDir&) {
        return create_from_spec(spec_with_layers(R"({"type": "ReLU", "name": "act"})", "[0]"));
      },
      FDNN_STATUS_INVALID_MODEL, {"input"});
  add("InconsistentLayerShapes",
      [](const TempDir&) {
        return create_from_spec(spec_with_layers(
            R"({"type": "Linear", "name": "fc1", "in_features": 3, "out_features": 5},
           {"type": "Linear", "name": "fc2", "in_features": 4, "out_features": 2})"));
      },
      FDNN_STATUS_INVALID_MODEL, {"fc2", "in_features", "fc1"});

  // --- Weights -----------------------------------------------------------------------------
  add("MissingWeightAtRun",
      [](const TempDir& dir) {
        const std::string weight = float_bytes({1, 2, 3, 4, 5, 6});
        const std::string path = dir.write(
            "no_bias.safetensors",
            safetensors_bytes(
                R"({"fc.weight": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}})",
                weight));
        return with_tiny(
            [&](fdnn_model* m) {
              if (fdnn_model_load_weights(m, path.c_str()) != FDNN_STATUS_OK)
                return FDNN_STATUS_INTERNAL_ERROR;
              float out[2];
              return fdnn_model_run(m, 1, kInput, 3, out, 2);
            },
            false);
      },
      FDNN_STATUS_INVALID_STATE, {"fc.bias"});
  add("MissingWeightAtValidate",
      [](const TempDir&) {
        return with_tiny([](fdnn_model* m) { return fdnn_model_validate(m); }, false);
      },
      FDNN_STATUS_WEIGHT_MISMATCH, {"fc.weight", "fc.bias"});
  add("ExtraWeight",
      [](const TempDir& dir) {
        return load_into_tiny(dir.write(
            "extra.safetensors",
            tiny_safetensors(
                R"(, "fc.scale": {"dtype": "F32", "shape": [1], "data_offsets": [32, 36]})",
                float_bytes({1}))));
      },
      FDNN_STATUS_WEIGHT_MISMATCH, {"fc.scale"});
  add("MisShapedWeight",
      [](const TempDir&) {
        return with_tiny(
            [](fdnn_model* m) {
              const float values[6] = {};
              const int64_t shape[] = {3, 2};
              return fdnn_model_set_weight(m, "fc.weight", FDNN_DTYPE_FLOAT32, values, shape, 2);
            },
            false);
      },
      FDNN_STATUS_WEIGHT_MISMATCH, {"fc.weight", "[3, 2]", "[2, 3]"});
  add("MisTypedWeight",
      [](const TempDir& dir) {
        return load_into_tiny(dir.write("int.safetensors", tiny_safetensors("", "", "I32")));
      },
      FDNN_STATUS_WEIGHT_MISMATCH, {"fc.weight", "I32"});
  add("UnknownDtype",
      [](const TempDir&) {
        return with_tiny(
            [](fdnn_model* m) {
              const float values[2] = {};
              const int64_t shape[] = {2};
              int32_t raw = 7;
              fdnn_dtype dtype;
              std::memcpy(&dtype, &raw, sizeof dtype);  // what a C caller passing 7 hands over
              return fdnn_model_set_weight(m, "fc.bias", dtype, values, shape, 1);
            },
            false);
      },
      FDNN_STATUS_INVALID_ARGUMENT, {"dtype 7", "fc.bias"});
  add("UnknownWeightName",
      [](const TempDir&) {
        return with_tiny(
            [](fdnn_model* m) {
              const float values[2] = {};
              const int64_t shape[] = {2};
              return fdnn_model_set_weight(m, "fc.bias_", FDNN_DTYPE_FLOAT32, values, shape, 1);
            },
            false);
      },
      FDNN_STATUS_WEIGHT_MISMATCH, {"fc.bias_"});
  add("NanWeightReportedByValidate",
      [](const TempDir&) {
        return with_tiny([](fdnn_model* m) {
          const float bias[] = {0.0f, std::numeric_limits<float>::quiet_NaN()};
          const int64_t shape[] = {2};
          if (fdnn_model_set_weight(m, "fc.bias", FDNN_DTYPE_FLOAT32, bias, shape, 1) !=
              FDNN_STATUS_OK) {
            return FDNN_STATUS_INTERNAL_ERROR;  // NaN must load
          }
          return fdnn_model_validate(m);
        });
      },
      FDNN_STATUS_NON_FINITE_WEIGHT, {"fc.bias"});
  add("InfWeightReportedByValidate",
      [](const TempDir&) {
        return with_tiny([](fdnn_model* m) {
          float weight[] = {1, 2, 3, 4, 5, 6};
          weight[4] = -std::numeric_limits<float>::infinity();
          const int64_t shape[] = {2, 3};
          if (fdnn_model_set_weight(m, "fc.weight", FDNN_DTYPE_FLOAT32, weight, shape, 2) !=
              FDNN_STATUS_OK) {
            return FDNN_STATUS_INTERNAL_ERROR;
          }
          return fdnn_model_validate(m);
        });
      },
      FDNN_STATUS_NON_FINITE_WEIGHT, {"fc.weight"});

  // --- Runs --------------------------------------------------------------------------------
  add("BatchZero",
      [](const TempDir&) {
        return with_tiny([](fdnn_model* m) {
          float out[2];
          return fdnn_model_run(m, 0, kInput, 0, out, 2);
        });
      },
      FDNN_STATUS_INVALID_ARGUMENT, {"batch"});
  add("BatchAboveMaximum",
      [](const TempDir&) {
        return with_tiny([](fdnn_model* m) {
          float out[10];
          return fdnn_model_run(m, 5, kInput, 15, out, 10);  // max_batch is 4
        });
      },
      FDNN_STATUS_INVALID_ARGUMENT, {"batch", "max_batch"});
  add("InputCountWrong",
      [](const TempDir&) {
        return with_tiny([](fdnn_model* m) {
          float out[4];
          return fdnn_model_run(m, 2, kInput, 5, out, 4);
        });
      },
      FDNN_STATUS_INVALID_ARGUMENT, {"input_count"});
  add("OutputBufferTooSmall",
      [](const TempDir&) {
        return with_tiny([](fdnn_model* m) {
          float out[4] = {7, 7, 7, 7};
          const fdnn_status status = fdnn_model_run(m, 2, kInput, 6, out, 3);
          return out[0] == 7 && out[2] == 7 ? status
                                            : FDNN_STATUS_INTERNAL_ERROR;  // nothing written
        });
      },
      FDNN_STATUS_BUFFER_TOO_SMALL, {"output_capacity"});
  add("ContextOutputBufferTooSmall",
      [](const TempDir&) {
        return with_tiny_context([](fdnn_context* c) {
          float out[1];
          const fdnn_status status = fdnn_context_run(c, 1, kInput, 3, out, 1);
          return status;
        });
      },
      FDNN_STATUS_BUFFER_TOO_SMALL, {"output_capacity"});
  add("RunBeforeWeightsAreLoaded",
      [](const TempDir&) {
        return with_tiny(
            [](fdnn_model* m) {
              float out[2];
              return fdnn_model_run(m, 1, kInput, 3, out, 2);
            },
            false);
      },
      FDNN_STATUS_INVALID_STATE, {"weights", "fc.weight"});
  add("ContextBeforeWeightsAreLoaded",
      [](const TempDir&) {
        return with_tiny(
            [](fdnn_model* m) {
              fdnn_context* c = nullptr;
              return fdnn_context_create(m, &c);
            },
            false);
      },
      FDNN_STATUS_INVALID_STATE, {"fc.weight"});
  add("DevicePointersOnACpuModel",
      [](const TempDir&) {
        return with_tiny_context([](fdnn_context* c) {
          float out[2];
          const fdnn_status status = fdnn_context_run_device(c, 1, kInput, 3, out, 2, nullptr);
          return status;
        });
      },
      FDNN_STATUS_UNSUPPORTED, {"FDNN_DEVICE_CUDA", "CPU"});
  // A device buffer not aligned to its element is refused before any backend sees it (on a GPU
  // it would fault inside a kernel); the pointers are never dereferenced.
  add("DeviceInputNotAlignedToItsFloats",
      [](const TempDir&) {
        return with_tiny_context([](fdnn_context* c) {
          alignas(16) unsigned char bytes[64] = {};
          float out[2];
          const auto* misaligned = reinterpret_cast<const float*>(bytes + 2);
          const fdnn_status status = fdnn_context_run_device(c, 1, misaligned, 3, out, 2, nullptr);
          return status;
        });
      },
      FDNN_STATUS_INVALID_ARGUMENT, {"device_input", "aligned", "4 bytes", "float32"});
  add("DeviceOutputNotAlignedToItsHalves",
      [](const TempDir&) {
        return with_tiny_context([](fdnn_context* c) {
          alignas(16) unsigned char bytes[64] = {};
          const fdnn_status status = fdnn_context_run_device_typed(
              c, 1, kInput, FDNN_DTYPE_FLOAT32, 3, bytes + 1, FDNN_DTYPE_BFLOAT16, 2, nullptr);
          return status;
        });
      },
      FDNN_STATUS_INVALID_ARGUMENT, {"device_output", "aligned", "2 bytes", "bfloat16"});
  // Device buffers that share a byte are refused before any backend sees them (the kernels
  // would read the input while writing the output); the pointers are never dereferenced. The
  // tiny model reads 3 and writes 2 elements a sample.
  add("DeviceBuffersOverlap",
      [](const TempDir&) {
        return with_tiny_context([](fdnn_context* c) {
          alignas(16) float values[8] = {};
          // The output starts on the input's last float.
          const fdnn_status status =
              fdnn_context_run_device(c, 1, values, 3, values + 2, 2, nullptr);
          return status;
        });
      },
      FDNN_STATUS_INVALID_ARGUMENT, {"device_input", "device_output", "overlap", "12 bytes"});
  add("Device16BitBuffersOverlap",
      [](const TempDir&) {
        return with_tiny_context([](fdnn_context* c) {
          alignas(16) unsigned char bytes[64] = {};
          // The input is bytes 8 to 13, the output bytes 6 to 9: its last bfloat16 is the
          // input's first (as float32 extents, the side-by-side case below would overlap too).
          const fdnn_status status = fdnn_context_run_device_typed(
              c, 1, bytes + 8, FDNN_DTYPE_BFLOAT16, 3, bytes + 6, FDNN_DTYPE_BFLOAT16, 2, nullptr);
          return status;
        });
      },
      FDNN_STATUS_INVALID_ARGUMENT,
      {"device_input", "device_output", "overlap", "6 bytes", "4 bytes"});
  // Buffers that meet but share no byte reach the backend (a CPU model then refuses the device
  // run): the check counts the bytes of each dtype, not float32's.
  add("Device16BitBuffersSideBySide",
      [](const TempDir&) {
        return with_tiny_context([](fdnn_context* c) {
          alignas(16) unsigned char bytes[64] = {};
          const fdnn_status status = fdnn_context_run_device_typed(
              c, 1, bytes, FDNN_DTYPE_FLOAT16, 3, bytes + 6, FDNN_DTYPE_FLOAT16, 2, nullptr);
          return status;
        });
      },
      FDNN_STATUS_UNSUPPORTED, {"FDNN_DEVICE_CUDA", "CPU"});
  add("CudaGraphsOptionOutOfRange",
      [](const TempDir&) {
        fdnn_model_options options;
        fdnn_model_options_init(&options, sizeof options);
        options.cuda_graphs = 2;
        fdnn_model* m = nullptr;
        const std::string spec = tiny_linear_spec();
        return fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &m);
      },
      FDNN_STATUS_INVALID_ARGUMENT, {"cuda_graphs"});
  // Enum options holding values C can pass but the API does not define; host_io is checked on
  // the CPU too, which otherwise ignores it.
  struct UnknownEnum {
    const char* name;
    const char* option;
    int32_t value;
    void (*set)(fdnn_model_options&, int32_t);
  };
  const auto set_precision = [](fdnn_model_options& o, int32_t v) {
    std::memcpy(&o.precision, &v, sizeof o.precision);
  };
  const auto set_host_io = [](fdnn_model_options& o, int32_t v) {
    std::memcpy(&o.host_io, &v, sizeof o.host_io);
  };
  const UnknownEnum unknown_enums[] = {
      {"PrecisionOptionPastBf16", "options.precision", 4, set_precision},
      {"PrecisionOptionNegative", "options.precision", -1, set_precision},
      {"PrecisionOptionHuge", "options.precision", 1 << 30, set_precision},
      {"HostIoOptionPastMapped", "options.host_io", 3, set_host_io},
      {"HostIoOptionNegative", "options.host_io", -1, set_host_io}};
  for (const UnknownEnum& unknown : unknown_enums) {
    add(unknown.name,
        [unknown](const TempDir&) {
          fdnn_model_options options;
          fdnn_model_options_init(&options, sizeof options);
          unknown.set(options, unknown.value);
          fdnn_model* m = nullptr;
          const std::string spec = tiny_linear_spec();
          const fdnn_status status =
              fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &m);
          fdnn_model_destroy(m);  // NULL unless the call wrongly succeeded
          return status;
        },
        FDNN_STATUS_INVALID_ARGUMENT, {unknown.option, std::to_string(unknown.value)});
  }
  return all;
}

class BadInput : public ::testing::TestWithParam<BadInputCase> {};

TEST_P(BadInput, ReturnsStatusNamingTheCulprit) {
  const BadInputCase& c = GetParam();
  TempDir dir;
  const fdnn_status status = c.call(dir);
  const std::string message = fdnn_last_error_message();
  EXPECT_EQ(status, c.expected) << fdnn_status_string(status) << ": " << message;
  for (const std::string& part : c.message_contains) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, BadInput, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

// NULL for every handle and pointer argument of every entry point.
struct NullCase {
  const char* name;
  std::function<fdnn_status(fdnn_model*, fdnn_context*)> call;
  const char* argument;
};

TEST(BadInput, NullHandleOrPointerForEveryEntryPoint) {
  fdnn_model* model = make_tiny_model(4);
  set_tiny_weights(model);
  fdnn_context* context = nullptr;
  ASSERT_EQ(fdnn_context_create(model, &context), FDNN_STATUS_OK);
  const std::string spec = tiny_linear_spec();
  const float weights[6] = {};
  const int64_t shape[] = {2, 3};
  float out[2];
  fdnn_shape s;
  fdnn_memory_info memory{};
  memory.struct_size = sizeof memory;
  fdnn_layer_info layer{};
  layer.struct_size = sizeof layer;
  int64_t i64;
  int32_t i32;
  fdnn_device device;
  fdnn_precision precision;
  fdnn_model* created = nullptr;
  fdnn_context* made = nullptr;

  const NullCase table[] = {
      {"cuda_device_count",
       [&](fdnn_model*, fdnn_context*) { return fdnn_cuda_device_count(nullptr); }, "count"},
      {"create_from_file/path",
       [&](fdnn_model*, fdnn_context*) {
         return fdnn_model_create_from_file(nullptr, nullptr, &created);
       },
       "path"},
      {"create_from_file/model",
       [&](fdnn_model*, fdnn_context*) {
         return fdnn_model_create_from_file("x.json", nullptr, nullptr);
       },
       "model"},
      {"create_from_memory/data",
       [&](fdnn_model*, fdnn_context*) {
         return fdnn_model_create_from_memory(nullptr, 16, nullptr, &created);
       },
       "data"},
      {"create_from_memory/model",
       [&](fdnn_model*, fdnn_context*) {
         return fdnn_model_create_from_memory(spec.data(), spec.size(), nullptr, nullptr);
       },
       "model"},
      {"create_from_spec/spec",
       [&](fdnn_model*, fdnn_context*) {
         return fdnn_model_create_from_spec(nullptr, 3, nullptr, &created);
       },
       "spec_json"},
      {"create_from_spec/model",
       [&](fdnn_model*, fdnn_context*) {
         return fdnn_model_create_from_spec(spec.data(), spec.size(), nullptr, nullptr);
       },
       "model"},
      {"load_weights/model",
       [&](fdnn_model*, fdnn_context*) {
         return fdnn_model_load_weights(nullptr, "w.safetensors");
       },
       "model"},
      {"load_weights/path",
       [&](fdnn_model* m, fdnn_context*) { return fdnn_model_load_weights(m, nullptr); }, "path"},
      {"set_weight/model",
       [&](fdnn_model*, fdnn_context*) {
         return fdnn_model_set_weight(nullptr, "fc.weight", FDNN_DTYPE_FLOAT32, weights, shape, 2);
       },
       "model"},
      {"set_weight/name",
       [&](fdnn_model* m, fdnn_context*) {
         return fdnn_model_set_weight(m, nullptr, FDNN_DTYPE_FLOAT32, weights, shape, 2);
       },
       "name"},
      {"set_weight/data",
       [&](fdnn_model* m, fdnn_context*) {
         return fdnn_model_set_weight(m, "fc.weight", FDNN_DTYPE_FLOAT32, nullptr, shape, 2);
       },
       "data"},
      {"set_weight/shape",
       [&](fdnn_model* m, fdnn_context*) {
         return fdnn_model_set_weight(m, "fc.weight", FDNN_DTYPE_FLOAT32, weights, nullptr, 2);
       },
       "shape"},
      {"validate/model", [&](fdnn_model*, fdnn_context*) { return fdnn_model_validate(nullptr); },
       "model"},
      {"input_shape/model",
       [&](fdnn_model*, fdnn_context*) { return fdnn_model_input_shape(nullptr, &s); }, "model"},
      {"input_shape/shape",
       [&](fdnn_model* m, fdnn_context*) { return fdnn_model_input_shape(m, nullptr); }, "shape"},
      {"output_shape/model",
       [&](fdnn_model*, fdnn_context*) { return fdnn_model_output_shape(nullptr, &s); }, "model"},
      {"output_shape/shape",
       [&](fdnn_model* m, fdnn_context*) { return fdnn_model_output_shape(m, nullptr); }, "shape"},
      {"max_batch/model",
       [&](fdnn_model*, fdnn_context*) { return fdnn_model_max_batch(nullptr, &i64); }, "model"},
      {"max_batch/out",
       [&](fdnn_model* m, fdnn_context*) { return fdnn_model_max_batch(m, nullptr); }, "max_batch"},
      {"device/model",
       [&](fdnn_model*, fdnn_context*) { return fdnn_model_device(nullptr, &device); }, "model"},
      {"device/out", [&](fdnn_model* m, fdnn_context*) { return fdnn_model_device(m, nullptr); },
       "device"},
      {"precision/model",
       [&](fdnn_model*, fdnn_context*) { return fdnn_model_precision(nullptr, &precision); },
       "model"},
      {"precision/out",
       [&](fdnn_model* m, fdnn_context*) { return fdnn_model_precision(m, nullptr); }, "precision"},
      {"memory_info/model",
       [&](fdnn_model*, fdnn_context*) { return fdnn_model_memory_info(nullptr, &memory); },
       "model"},
      {"memory_info/info",
       [&](fdnn_model* m, fdnn_context*) { return fdnn_model_memory_info(m, nullptr); }, "info"},
      {"layer_count/model",
       [&](fdnn_model*, fdnn_context*) { return fdnn_model_layer_count(nullptr, &i32); }, "model"},
      {"layer_count/count",
       [&](fdnn_model* m, fdnn_context*) { return fdnn_model_layer_count(m, nullptr); }, "count"},
      {"layer_info/model",
       [&](fdnn_model*, fdnn_context*) { return fdnn_model_layer_info(nullptr, 0, &layer); },
       "model"},
      {"layer_info/info",
       [&](fdnn_model* m, fdnn_context*) { return fdnn_model_layer_info(m, 0, nullptr); }, "info"},
      {"model_run/model",
       [&](fdnn_model*, fdnn_context*) { return fdnn_model_run(nullptr, 1, kInput, 3, out, 2); },
       "model"},
      {"model_run/input",
       [&](fdnn_model* m, fdnn_context*) { return fdnn_model_run(m, 1, nullptr, 3, out, 2); },
       "input"},
      {"model_run/output",
       [&](fdnn_model* m, fdnn_context*) { return fdnn_model_run(m, 1, kInput, 3, nullptr, 2); },
       "output"},
      {"context_create/model",
       [&](fdnn_model*, fdnn_context*) { return fdnn_context_create(nullptr, &made); }, "model"},
      {"context_create/context",
       [&](fdnn_model* m, fdnn_context*) { return fdnn_context_create(m, nullptr); }, "context"},
      {"context_run/context",
       [&](fdnn_model*, fdnn_context*) { return fdnn_context_run(nullptr, 1, kInput, 3, out, 2); },
       "context"},
      {"context_run/input",
       [&](fdnn_model*, fdnn_context* c) { return fdnn_context_run(c, 1, nullptr, 3, out, 2); },
       "input"},
      {"context_run/output",
       [&](fdnn_model*, fdnn_context* c) { return fdnn_context_run(c, 1, kInput, 3, nullptr, 2); },
       "output"},
      {"context_run_device/context",
       [&](fdnn_model*, fdnn_context*) {
         return fdnn_context_run_device(nullptr, 1, kInput, 3, out, 2, nullptr);
       },
       "context"},
      {"context_run_device/input",
       [&](fdnn_model*, fdnn_context* c) {
         return fdnn_context_run_device(c, 1, nullptr, 3, out, 2, nullptr);
       },
       "input"},
      {"context_run_device/output",
       [&](fdnn_model*, fdnn_context* c) {
         return fdnn_context_run_device(c, 1, kInput, 3, nullptr, 2, nullptr);
       },
       "output"},
      {"context_host_io/context",
       [&](fdnn_model*, fdnn_context*) {
         fdnn_host_io host_io = FDNN_HOST_IO_AUTO;
         return fdnn_context_host_io(nullptr, &host_io);
       },
       "context"},
      {"context_host_io/host_io",
       [&](fdnn_model*, fdnn_context* c) { return fdnn_context_host_io(c, nullptr); }, "host_io"},
      {"model_run_typed/model",
       [&](fdnn_model*, fdnn_context*) {
         return fdnn_model_run_typed(nullptr, 1, kInput, FDNN_DTYPE_FLOAT32, 3, out,
                                     FDNN_DTYPE_FLOAT32, 2);
       },
       "model"},
      {"model_run_typed/input",
       [&](fdnn_model* m, fdnn_context*) {
         return fdnn_model_run_typed(m, 1, nullptr, FDNN_DTYPE_FLOAT16, 3, out, FDNN_DTYPE_FLOAT32,
                                     2);
       },
       "input"},
      {"model_run_typed/output",
       [&](fdnn_model* m, fdnn_context*) {
         return fdnn_model_run_typed(m, 1, kInput, FDNN_DTYPE_FLOAT32, 3, nullptr,
                                     FDNN_DTYPE_BFLOAT16, 2);
       },
       "output"},
      {"context_run_typed/context",
       [&](fdnn_model*, fdnn_context*) {
         return fdnn_context_run_typed(nullptr, 1, kInput, FDNN_DTYPE_FLOAT32, 3, out,
                                       FDNN_DTYPE_FLOAT32, 2);
       },
       "context"},
      {"context_run_typed/input",
       [&](fdnn_model*, fdnn_context* c) {
         return fdnn_context_run_typed(c, 1, nullptr, FDNN_DTYPE_FLOAT16, 3, out,
                                       FDNN_DTYPE_FLOAT32, 2);
       },
       "input"},
      {"context_run_typed/output",
       [&](fdnn_model*, fdnn_context* c) {
         return fdnn_context_run_typed(c, 1, kInput, FDNN_DTYPE_FLOAT32, 3, nullptr,
                                       FDNN_DTYPE_FLOAT16, 2);
       },
       "output"},
      {"context_run_device_typed/context",
       [&](fdnn_model*, fdnn_context*) {
         return fdnn_context_run_device_typed(nullptr, 1, kInput, FDNN_DTYPE_FLOAT32, 3, out,
                                              FDNN_DTYPE_FLOAT32, 2, nullptr);
       },
       "context"},
      {"context_run_device_typed/input",
       [&](fdnn_model*, fdnn_context* c) {
         return fdnn_context_run_device_typed(c, 1, nullptr, FDNN_DTYPE_FLOAT16, 3, out,
                                              FDNN_DTYPE_FLOAT16, 2, nullptr);
       },
       "input"},
      {"context_run_device_typed/output",
       [&](fdnn_model*, fdnn_context* c) {
         return fdnn_context_run_device_typed(c, 1, kInput, FDNN_DTYPE_FLOAT32, 3, nullptr,
                                              FDNN_DTYPE_BFLOAT16, 2, nullptr);
       },
       "output"},
  };
  for (const NullCase& c : table) {
    EXPECT_EQ(c.call(model, context), FDNN_STATUS_INVALID_ARGUMENT) << c.name;
    const std::string message = fdnn_last_error_message();
    EXPECT_NE(message.find(std::string(c.argument) + " is NULL"), std::string::npos)
        << c.name << ": " << message;
    EXPECT_NE(message.find("fdnn_"), std::string::npos) << c.name << ": " << message;
  }
  EXPECT_EQ(created, nullptr);
  EXPECT_EQ(made, nullptr);
  fdnn_context_destroy(context);
  fdnn_model_destroy(model);
}

TEST(BadInput, DestroyAcceptsNull) {
  fdnn_model_destroy(nullptr);
  fdnn_context_destroy(nullptr);
  SUCCEED();  // reaching here without a crash is the check
}

}  // namespace
