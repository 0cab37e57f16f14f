// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the C API tests: small specs, temporary files, safetensors writing.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "fusednn/fusednn.h"

namespace fusednn_test {

// Linear 3 -> 2 with bias; weights set by set_tiny_weights.
inline const char* tiny_linear_spec() {
  return R"({"fusednn": 1, "name": "tiny", "input": {"shape": [3], "dtype": "float32"},
             "layers": [{"type": "Linear", "name": "fc", "in_features": 3, "out_features": 2}]})";
}

// W = [[1, 2, 3], [4, 5, 6]], b = [0.5, -1].
inline void set_tiny_weights(fdnn_model* model) {
  const float weight[] = {1, 2, 3, 4, 5, 6};
  const float bias[] = {0.5f, -1.0f};
  const int64_t weight_shape[] = {2, 3};
  const int64_t bias_shape[] = {2};
  ASSERT_EQ(fdnn_model_set_weight(model, "fc.weight", FDNN_DTYPE_FLOAT32, weight, weight_shape, 2),
            FDNN_STATUS_OK)
      << fdnn_last_error_message();
  ASSERT_EQ(fdnn_model_set_weight(model, "fc.bias", FDNN_DTYPE_FLOAT32, bias, bias_shape, 1),
            FDNN_STATUS_OK)
      << fdnn_last_error_message();
}

inline fdnn_model* make_tiny_model(int64_t max_batch = 8) {
  fdnn_model_options options;
  fdnn_model_options_init(&options, sizeof options);
  options.max_batch = max_batch;
  fdnn_model* model = nullptr;
  const std::string spec = tiny_linear_spec();
  EXPECT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  return model;
}

// The seed MLP 100-128-64-10 with ReLU, weights drawn from `seed`.
inline const char* seed_mlp_spec() {
  return R"({"fusednn": 1, "name": "seed_mlp", "input": {"shape": [100], "dtype": "float32"},
    "layers": [
      {"type": "Linear", "name": "fc1", "in_features": 100, "out_features": 128},
      {"type": "ReLU"},
      {"type": "Linear", "name": "fc2", "in_features": 128, "out_features": 64},
      {"type": "ReLU"},
      {"type": "Linear", "name": "fc3", "in_features": 64, "out_features": 10}]})";
}

inline std::vector<float> random_floats(size_t count, std::mt19937& random, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(count);
  for (float& v : values) v = normal(random);
  return values;
}

inline fdnn_model* make_seed_mlp(uint32_t seed, int64_t max_batch = 64, int32_t cpu_threads = 1) {
  fdnn_model_options options;
  fdnn_model_options_init(&options, sizeof options);
  options.max_batch = max_batch;
  options.cpu_threads = cpu_threads;
  fdnn_model* model = nullptr;
  const std::string spec = seed_mlp_spec();
  EXPECT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  std::mt19937 random(seed);
  const struct {
    const char* name;
    std::vector<int64_t> shape;
  } tensors[] = {{"fc1.weight", {128, 100}}, {"fc1.bias", {128}},      {"fc2.weight", {64, 128}},
                 {"fc2.bias", {64}},         {"fc3.weight", {10, 64}}, {"fc3.bias", {10}}};
  for (const auto& tensor : tensors) {
    size_t count = 1;
    for (int64_t extent : tensor.shape) count *= static_cast<size_t>(extent);
    const std::vector<float> values = random_floats(count, random, 0.1f);
    EXPECT_EQ(fdnn_model_set_weight(model, tensor.name, FDNN_DTYPE_FLOAT32, values.data(),
                                    tensor.shape.data(), static_cast<int32_t>(tensor.shape.size())),
              FDNN_STATUS_OK)
        << fdnn_last_error_message();
  }
  return model;
}

// A fresh directory under the system temp folder, removed when the object goes.
class TempDir {
 public:
  TempDir() {
    std::random_device device;
    path_ = std::filesystem::temp_directory_path() /
            ("fusednn_test_" + std::to_string(device()) + std::to_string(device()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream out(path_ / name, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return file(name);
  }

 private:
  std::filesystem::path path_;
};

// A safetensors file: 8-byte little-endian header length, the header JSON, then the data.
inline std::string safetensors_bytes(const std::string& header_json, const std::string& data) {
  std::string bytes(8, '\0');
  uint64_t length = header_json.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return bytes + header_json + data;
}

inline std::string float_bytes(const std::vector<float>& values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());  // the test hosts are little-endian
  return bytes;
}

}  // namespace fusednn_test
