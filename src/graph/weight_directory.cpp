// SPDX-License-Identifier: Apache-2.0

#include "graph/weight_directory.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "common/error.hpp"
#include "graph/file_contents.hpp"
#include "graph/little_endian.hpp"

namespace fusednn {
namespace {

namespace fs = std::filesystem;

// The bytes of weights a directory may still bring, and what sets the limit (for messages).
struct WeightBudget {
  uint64_t left = 0;  // meaningful only when limited
  bool limited = false;
  uint64_t max_bytes = 0;
  std::string limit;
};

[[noreturn]] void fail_over_budget(const WeightBudget& budget, const std::string& path,
                                   const std::string& what) {
  fail(FDNN_STATUS_OUT_OF_MEMORY, "'", path, "' ", what, ", more than the ", budget.left,
       " bytes of weights left of ", budget.max_bytes, " for this directory",
       budget.limit.empty() ? std::string() : ": " + budget.limit);
}

std::vector<float> parse_bin(const std::string& bytes, const std::string& path) {
  if (bytes.size() % 4 != 0) {
    fail(FDNN_STATUS_PARSE_ERROR, "'", path, "' holds ", bytes.size(),
         " bytes, not a whole number of float32 values (4 bytes each)");
  }
  std::vector<float> values(bytes.size() / 4);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  for (size_t i = 0; i < values.size(); ++i) values[i] = load_le_float32(p + 4 * i);
  return values;
}

bool is_separator(char c) { return c == ' ' || c == '\t' || c == '\r' || c == ','; }

// Numbers separated by whitespace or commas, as numpy.savetxt writes them (one row per line);
// blank lines and '#' comments are skipped. Parsing ignores the locale.
// The values may take at most budget.left bytes as float32 (checked before each one is stored).
std::vector<float> parse_txt(const std::string& text, const std::string& path,
                             const WeightBudget& budget) {
  std::vector<float> values;
  size_t line = 1;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      ++i;
    } else if (is_separator(c)) {
      ++i;
    } else if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else {
      size_t end = i;
      while (end < text.size() && text[end] != '\n' && !is_separator(text[end])) ++end;
      const std::string token = text.substr(i, end - i);
      // from_chars takes no leading '+', which "%+e" formats write.
      const char* first = token.data() + (token[0] == '+' ? 1 : 0);
      const char* last = token.data() + token.size();
      float value = 0.0f;
      const auto [stop, status] = std::from_chars(first, last, value);
      if (status == std::errc::result_out_of_range) {
        fail(FDNN_STATUS_PARSE_ERROR, "'", path, "' line ", line, ": '", token,
             "' is outside the float32 range");
      }
      if (status != std::errc() || stop != last || first == last) {
        fail(FDNN_STATUS_PARSE_ERROR, "'", path, "' line ", line, ": cannot read '", token,
             "' as a number");
      }
      if (budget.limited && (values.size() + 1) * sizeof(float) > budget.left) {
        fail_over_budget(budget, path,
                         "holds more than " + std::to_string(values.size()) +
                             " float32 values (line " + std::to_string(line) + ")");
      }
      values.push_back(value);
      i = end;
    }
  }
  return values;
}

}  // namespace

std::vector<NamedTensor> read_weight_directory(const std::string& directory,
                                               const WeightStore& expected, uint64_t max_bytes,
                                               const std::string& limit) {
  std::error_code error;
  const fs::file_status status = fs::status(directory, error);
  if (!fs::exists(status)) {
    fail(FDNN_STATUS_IO_ERROR, "weight directory '", directory, "' does not exist");
  }
  if (!fs::is_directory(status)) {
    fail(FDNN_STATUS_IO_ERROR, "'", directory, "' is not a directory");
  }

  // tensor name -> file, in name order so that messages do not depend on the listing order.
  std::map<std::string, fs::path> files;
  fs::directory_iterator entry(directory, error);
  for (; !error && entry != fs::directory_iterator(); entry.increment(error)) {
    const fs::path& path = entry->path();
    const std::string extension = path.extension().string();
    std::error_code type_error;  // an unreadable or dangling entry is skipped, not fatal
    if ((extension != ".bin" && extension != ".txt") || !entry->is_regular_file(type_error)) {
      continue;
    }
    const auto [found, inserted] = files.emplace(path.stem().string(), path);
    if (!inserted) {
      fail(FDNN_STATUS_WEIGHT_MISMATCH, "weight directory '", directory, "' holds both '",
           found->second.filename().string(), "' and '", path.filename().string(), "' for tensor '",
           found->first, "'; keep one");
    }
  }
  if (error) {
    fail(FDNN_STATUS_IO_ERROR, "cannot list weight directory '", directory, "': ", error.message());
  }

  const std::vector<std::string>& declared_names = expected.declared_names();
  const std::set<std::string> declared(declared_names.begin(), declared_names.end());
  WeightBudget budget;
  budget.limited = max_bytes != 0;
  budget.left = max_bytes;
  budget.max_bytes = max_bytes;
  budget.limit = limit;
  std::vector<NamedTensor> tensors;
  for (const auto& [name, path] : files) {
    const std::string file = path.string();
    const bool binary = path.extension() == ".bin";
    // A .bin file's bytes are its values: it must fit what is left. A .txt file is read whole
    // before it is parsed, so its text may take at most the whole limit, and its values what is
    // left (checked while parsing). read_file_contents takes 0 for "no limit": with nothing left,
    // a non-empty .bin file is refused by its size (and read only up to 1 byte, which parse_bin
    // refuses, if it changed in between).
    uint64_t read_limit = 0;
    std::string read_limit_text;
    if (budget.limited && binary && budget.left == 0) {
      std::error_code size_error;
      const uintmax_t size = fs::file_size(path, size_error);
      if (!size_error && size > 0) {
        fail_over_budget(budget, file, "holds " + std::to_string(size) + " bytes");
      }
    }
    if (budget.limited) {
      read_limit = binary ? std::max<uint64_t>(budget.left, 1) : max_bytes;
      read_limit_text = binary ? "the bytes of weights left of " + std::to_string(max_bytes) +
                                     " for this directory"
                               : "the most bytes a weight file's text may take";
      if (!limit.empty()) read_limit_text += ": " + limit;
    }
    const std::string bytes = read_file_contents(file, read_limit, read_limit_text);
    NamedTensor tensor;
    tensor.name = name;
    tensor.dtype = "F32";
    tensor.source = file;
    tensor.values = binary ? parse_bin(bytes, file) : parse_txt(bytes, file, budget);
    const uint64_t value_bytes = tensor.values.size() * sizeof(float);
    if (budget.limited) {
      if (value_bytes > budget.left) {
        fail_over_budget(budget, file,
                         "holds " + std::to_string(value_bytes) + " bytes of weights");
      }
      budget.left -= value_bytes;
    }
    const auto count = static_cast<int64_t>(tensor.values.size());
    if (declared.count(name)) {
      const Shape& shape = expected.expected_shape(name);
      if (count != element_count(shape)) {
        fail(FDNN_STATUS_WEIGHT_MISMATCH, "'", file, "' holds ", count,
             " float32 values, but the spec expects tensor '", name, "' to be ", to_string(shape),
             " (", element_count(shape), " values)");
      }
      tensor.shape = shape;
    } else {
      tensor.shape = {count};
    }
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

}  // namespace fusednn
