// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the graph-stage tests: error expectations, temporary directories, fixtures.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>

#include "common/error.hpp"

namespace fusednn::testing {

// Runs `call`, expects a fusednn::StatusError with `status` whose message contains every fragment.
inline void expect_error(const std::function<void()>& call, fdnn_status status,
                         std::initializer_list<std::string> fragments) {
  try {
    call();
  } catch (const StatusError& e) {
    EXPECT_EQ(e.status(), status) << "message: " << e.what();
    const std::string message = e.what();
    for (const std::string& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "message lacks \"" << fragment << "\"; message: " << message;
    }
    return;
  }
  ADD_FAILURE() << "expected an error with status " << status << ", but the call succeeded";
}

inline std::string fixture(const std::string& name) {
  return std::string(FUSEDNN_TEST_FIXTURES_DIR) + "/formats/" + name;
}

// A fresh directory under the system temp directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = std::filesystem::temp_directory_path() /
            ("fusednn_graph_test_" + std::to_string(stamp) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string path(const std::string& name = "") const {
    return name.empty() ? path_.string() : (path_ / name).string();
  }
  // Writes `bytes` to `name` inside the directory and returns the full path.
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string file = path(name);
    std::ofstream out(file, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return file;
  }

 private:
  std::filesystem::path path_;
};

// A safetensors file from a header text and data bytes: the 8-byte little-endian header length,
// the header, the data.
inline std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string bytes;
  uint64_t length = header.size();
  for (int i = 0; i < 8; ++i, length >>= 8) bytes.push_back(static_cast<char>(length & 0xFF));
  return bytes + header + data;
}

// The little-endian bytes of float32 values.
inline std::string float_bytes(std::initializer_list<float> values) {
  std::string bytes;
  for (float value : values) {
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    for (int i = 0; i < 4; ++i, bits >>= 8) bytes.push_back(static_cast<char>(bits & 0xFF));
  }
  return bytes;
}

// The tiny_mlp fixtures' weights (see make_format_fixtures.py): tensor number t, flat index i
// holds (i + 1) / 8 + t, negated for odd i.
inline float tiny_mlp_value(int tensor_number, size_t index) {
  const float magnitude = static_cast<float>(index + 1) / 8.0f + static_cast<float>(tensor_number);
  return index % 2 == 1 ? -magnitude : magnitude;
}

}  // namespace fusednn::testing
