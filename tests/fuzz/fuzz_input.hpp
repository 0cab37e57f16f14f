// SPDX-License-Identifier: Apache-2.0
// Reads a fuzzer's bytes as a stream of small fields (a selector byte, an integer, a run of
// bytes); past the end every read gives zeros or nothing, so any input decodes to something.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace fusednn_fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return position_ >= size_; }
  size_t remaining() const { return size_ - position_; }

  uint8_t byte() { return empty() ? 0 : data_[position_++]; }

  uint16_t u16() { return static_cast<uint16_t>(byte() | (byte() << 8)); }

  uint64_t u64() {
    uint64_t value = 0;
    for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(byte()) << (8 * i);
    return value;
  }

  // Up to `count` bytes (fewer at the end of the input).
  std::string bytes(size_t count) {
    const size_t taken = count < remaining() ? count : remaining();
    std::string out(reinterpret_cast<const char*>(data_ + position_), taken);
    position_ += taken;
    return out;
  }

  std::string rest() { return bytes(remaining()); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t position_ = 0;
};

}  // namespace fusednn_fuzz
