// SPDX-License-Identifier: Apache-2.0

#include "graph/safetensors_file.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/error.hpp"
#include "graph/file_contents.hpp"
#include "graph/json_structure_check.hpp"
#include "graph/little_endian.hpp"

namespace fusednn {
namespace {

using nlohmann::json;

constexpr size_t kHeaderLengthBytes = 8;
constexpr const char* kMetadataKey = "__metadata__";
// The header object, a tensor's object, its lists: nothing in the format nests deeper.
constexpr int kHeaderDepth = 3;
// How many entries of a list a message shows.
constexpr size_t kListEntriesShown = 8;

// The dtype spellings of the safetensors format and their element sizes.
struct DtypeSize {
  const char* name;
  uint64_t bytes;
};
constexpr DtypeSize kDtypeSizes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
    {"U16", 2},  {"I16", 2}, {"F16", 2}, {"BF16", 2},    {"U32", 4},     {"I32", 4},
    {"F32", 4},  {"U64", 8}, {"I64", 8}, {"F64", 8},     {"C64", 8},
};

uint64_t dtype_size(const std::string& dtype) {
  for (const DtypeSize& entry : kDtypeSizes) {
    if (dtype == entry.name) return entry.bytes;
  }
  return 0;
}

std::vector<float> to_float(const std::string& dtype, const unsigned char* data, size_t count) {
  std::vector<float> values(count);
  if (dtype == "F32") {
    for (size_t i = 0; i < count; ++i) values[i] = load_le_float32(data + 4 * i);
  } else if (dtype == "F16") {
    for (size_t i = 0; i < count; ++i) values[i] = half_to_float(load_le_u16(data + 2 * i));
  } else if (dtype == "BF16") {
    for (size_t i = 0; i < count; ++i) values[i] = bfloat16_to_float(load_le_u16(data + 2 * i));
  } else {
    values.clear();
  }
  return values;
}

// A list as a message shows it, "[3, 4]", one level only (a nested entry by its type name) and
// cut after kListEntriesShown entries, so that no input makes it recurse or grow without bound.
std::string describe_list(const json& list) {
  std::string text = "[";
  size_t shown = 0;
  for (const json& item : list) {
    if (shown) text += ", ";
    if (shown == kListEntriesShown) {
      text += "... " + std::to_string(list.size()) + " entries";
      break;
    }
    text += item.is_structured() || item.is_string() ? item.type_name() : item.dump();
    ++shown;
  }
  return text + "]";
}

struct Entry {
  NamedTensor tensor;
  uint64_t begin = 0;
  uint64_t end = 0;
};

class HeaderReader {
 public:
  HeaderReader(const std::string& source, uint64_t data_size)
      : source_(source), data_size_(data_size) {}

  template <typename... Parts>
  [[noreturn]] void error(Parts&&... parts) const {
    fail(FDNN_STATUS_PARSE_ERROR, "'", source_, "': ", std::forward<Parts>(parts)...);
  }

  Entry read_entry(const std::string& name, const json& value) const {
    if (!value.is_object()) {
      error("header entry '", name, "' must be an object, got ", value.type_name());
    }
    Entry entry;
    entry.tensor.name = name;
    entry.tensor.source = source_;

    const auto dtype = value.find("dtype");
    if (dtype == value.end() || !dtype->is_string()) {
      error("tensor '", name, "' has no \"dtype\" string");
    }
    entry.tensor.dtype = dtype->get<std::string>();
    const uint64_t element_bytes = dtype_size(entry.tensor.dtype);
    if (element_bytes == 0)
      error("tensor '", name, "' has unknown dtype '", entry.tensor.dtype, "'");

    const auto shape = value.find("shape");
    if (shape == value.end() || !shape->is_array()) {
      error("tensor '", name, "' has no \"shape\" list");
    }
    // The byte count, with a flag instead of an overflow; a zero extent anywhere makes it zero.
    uint64_t bytes = element_bytes;
    bool too_many = false;
    bool empty = false;
    for (const json& extent : *shape) {
      if (!extent.is_number_unsigned() ||
          extent.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        error("tensor '", name,
              "' has a shape entry that is not a non-negative integer: ", describe_list(*shape));
      }
      const uint64_t n = extent.get<uint64_t>();
      entry.tensor.shape.push_back(static_cast<int64_t>(n));
      if (n == 0) empty = true;
      if (n != 0 && bytes > std::numeric_limits<uint64_t>::max() / n) too_many = true;
      if (!too_many) bytes *= n;
    }
    if (empty) {
      bytes = 0;
      too_many = false;
    }

    const auto offsets = value.find("data_offsets");
    if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
        !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
      error("tensor '", name, "' needs \"data_offsets\": [begin, end] of non-negative integers");
    }
    entry.begin = (*offsets)[0].get<uint64_t>();
    entry.end = (*offsets)[1].get<uint64_t>();
    if (entry.begin > entry.end || entry.end > data_size_) {
      error("tensor '", name, "' has data_offsets [", entry.begin, ", ", entry.end,
            "] outside the ", data_size_, " bytes of data");
    }
    if (too_many) {
      error("tensor '", name, "' of shape ", describe_list(*shape), " needs more bytes than the ",
            data_size_, " of data the file holds");
    }
    if (entry.end - entry.begin != bytes) {
      error("tensor '", name, "' (", entry.tensor.dtype, ", shape ", describe_list(*shape),
            ") needs ", bytes, " bytes but its data_offsets [", entry.begin, ", ", entry.end,
            "] span ", entry.end - entry.begin);
    }
    return entry;
  }

  std::map<std::string, std::string> read_metadata(const json& value) const {
    std::map<std::string, std::string> metadata;
    if (value.is_null()) return metadata;
    if (!value.is_object()) error("\"", kMetadataKey, "\" must be an object of strings");
    for (const auto& item : value.items()) {
      if (!item.value().is_string()) {
        error("\"", kMetadataKey, "\" entry '", item.key(), "' must be a string, got ",
              item.value().type_name());
      }
      metadata.emplace(item.key(), item.value().get<std::string>());
    }
    return metadata;
  }

 private:
  const std::string& source_;
  uint64_t data_size_;
};

}  // namespace

SafetensorsContent parse_safetensors(const std::string& bytes, const std::string& source) {
  if (bytes.empty()) {
    fail(FDNN_STATUS_PARSE_ERROR, "'", source,
         "' is empty; a safetensors file starts with an 8-byte header length");
  }
  if (bytes.size() < kHeaderLengthBytes) {
    fail(FDNN_STATUS_PARSE_ERROR, "'", source, "' is truncated: ", bytes.size(),
         " bytes, fewer than the 8-byte header length a safetensors file starts with");
  }
  const auto* file = reinterpret_cast<const unsigned char*>(bytes.data());
  const uint64_t header_length = load_le_u64(file);
  const uint64_t after_length = bytes.size() - kHeaderLengthBytes;
  if (header_length > after_length) {
    fail(FDNN_STATUS_PARSE_ERROR, "'", source, "': the header length ", header_length,
         " runs past the end of the file (", after_length,
         " bytes follow it); the file is truncated or not safetensors");
  }
  const auto header_begin = bytes.begin() + kHeaderLengthBytes;
  const auto header_end = header_begin + static_cast<std::ptrdiff_t>(header_length);
  json header;
  try {
    JsonStructureCheck check("'" + source + "': ", FDNN_STATUS_PARSE_ERROR, kHeaderDepth);
    header = json::parse(header_begin, header_end, std::ref(check));
  } catch (const json::exception& e) {  // syntax, or a number too large for a double
    fail(FDNN_STATUS_PARSE_ERROR, "'", source, "': the ", header_length,
         "-byte header is not valid JSON: ", e.what());
  }
  const uint64_t data_size = after_length - header_length;
  const HeaderReader reader(source, data_size);
  if (!header.is_object()) reader.error("the header must be a JSON object");

  SafetensorsContent content;
  std::vector<Entry> entries;
  for (const auto& item : header.items()) {
    if (item.key() == kMetadataKey) {
      content.metadata = reader.read_metadata(item.value());
    } else {
      entries.push_back(reader.read_entry(item.key(), item.value()));
    }
  }

  // No two tensors may share bytes.
  std::vector<const Entry*> by_offset;
  for (const Entry& entry : entries) {
    if (entry.begin != entry.end) by_offset.push_back(&entry);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end) {
      reader.error("tensors '", by_offset[i - 1]->tensor.name, "' [", by_offset[i - 1]->begin, ", ",
                   by_offset[i - 1]->end, ") and '", by_offset[i]->tensor.name, "' [",
                   by_offset[i]->begin, ", ", by_offset[i]->end, ") overlap");
    }
  }

  const unsigned char* data = file + kHeaderLengthBytes + header_length;
  content.tensors.reserve(entries.size());
  for (Entry& entry : entries) {
    const auto count =
        static_cast<size_t>((entry.end - entry.begin) / dtype_size(entry.tensor.dtype));
    entry.tensor.values = to_float(entry.tensor.dtype, data + entry.begin, count);
    content.tensors.push_back(std::move(entry.tensor));
  }
  return content;
}

SafetensorsContent read_safetensors(const std::string& path, uint64_t max_bytes,
                                    const std::string& limit) {
  return parse_safetensors(read_file_contents(path, max_bytes, limit), path);
}

}  // namespace fusednn
