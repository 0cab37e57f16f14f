// SPDX-License-Identifier: Apache-2.0

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "../small_stack.hpp"
#include "graph/little_endian.hpp"
#include "graph/safetensors_file.hpp"
#include "graph_test_support.hpp"

namespace fusednn {
namespace {

using testing::expect_error;
using testing::float_bytes;
using testing::safetensors_bytes;
using testing::TempDir;

uint32_t bits_of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// Bitwise equality (tells -0 from +0); any NaN matches any NaN.
void expect_same_float(float actual, float expected, const std::string& what) {
  if (std::isnan(expected)) {
    EXPECT_TRUE(std::isnan(actual)) << what << ": " << actual;
  } else {
    EXPECT_EQ(bits_of(actual), bits_of(expected)) << what << ": " << actual << " vs " << expected;
  }
}

const NamedTensor& find(const SafetensorsContent& content, const std::string& name) {
  for (const NamedTensor& tensor : content.tensors) {
    if (tensor.name == name) return tensor;
  }
  throw std::runtime_error("no tensor " + name);
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- Conversions

// binary16 by its definition, in double: (-1)^s * 2^(e - 15) * (1 + m / 1024), subnormals
// 2^-14 * (m / 1024).
double half_by_definition(uint16_t half) {
  const int sign = half >> 15;
  const int exponent = (half >> 10) & 0x1F;
  const int mantissa = half & 0x3FF;
  double magnitude;
  if (exponent == 0x1F) {
    magnitude = mantissa ? std::numeric_limits<double>::quiet_NaN()
                         : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(mantissa / 1024.0, -14);
  } else {
    magnitude = std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
  }
  return sign ? -magnitude : magnitude;
}

TEST(GraphSafetensors, HalfToFloatMatchesTheDefinitionForAllValues) {
  for (uint32_t half = 0; half <= 0xFFFF; ++half) {
    const float converted = half_to_float(static_cast<uint16_t>(half));
    const double expected = half_by_definition(static_cast<uint16_t>(half));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(converted)) << std::hex << half;
    } else {
      ASSERT_EQ(static_cast<double>(converted), expected) << std::hex << half;
      ASSERT_EQ(std::signbit(converted), std::signbit(expected)) << std::hex << half;
    }
  }
}

TEST(GraphSafetensors, BFloat16IsTheUpperHalfOfAFloat) {
  expect_same_float(bfloat16_to_float(0x3F80), 1.0f, "one");
  expect_same_float(bfloat16_to_float(0x8000), -0.0f, "negative zero");
  expect_same_float(bfloat16_to_float(0x0001), std::ldexp(1.0f, -133), "smallest subnormal");
  expect_same_float(bfloat16_to_float(0xFF80), -kInf, "-inf");
  EXPECT_TRUE(std::isnan(bfloat16_to_float(0x7FC1)));
}

// ---- Files written by the safetensors package (tests/fixtures/formats)

TEST(GraphSafetensors, ReadsF32F16AndBF16WithSpecialValues) {
  const SafetensorsContent content = read_safetensors(testing::fixture("dtypes.safetensors"));
  ASSERT_EQ(content.tensors.size(), 5u);

  const NamedTensor& f32 = find(content, "f32");
  EXPECT_EQ(f32.dtype, "F32");
  EXPECT_EQ(f32.shape, Shape({3, 3}));
  EXPECT_EQ(f32.source, testing::fixture("dtypes.safetensors"));
  const float f32_expected[] = {0.0f,
                                -0.0f,
                                1.0f,
                                -2.5f,
                                std::numeric_limits<float>::max(),
                                std::numeric_limits<float>::denorm_min(),
                                kInf,
                                -kInf,
                                kNaN};
  ASSERT_EQ(f32.values.size(), 9u);
  for (size_t i = 0; i < 9; ++i) expect_same_float(f32.values[i], f32_expected[i], "f32");

  const NamedTensor& f16 = find(content, "f16");
  EXPECT_EQ(f16.dtype, "F16");
  EXPECT_EQ(f16.shape, Shape({13}));
  const float f16_expected[] = {0.0f,
                                -0.0f,
                                1.0f,
                                -2.5f,
                                65504.0f,
                                -65504.0f,
                                std::ldexp(1.0f, -24),  // smallest subnormal
                                -3.0f * std::ldexp(1.0f, -24),
                                std::ldexp(1.0f, -14) - std::ldexp(1.0f, -24),  // largest subnormal
                                std::ldexp(1.0f, -14),                          // smallest normal
                                kInf,
                                -kInf,
                                kNaN};
  ASSERT_EQ(f16.values.size(), 13u);
  for (size_t i = 0; i < 13; ++i) expect_same_float(f16.values[i], f16_expected[i], "f16");

  const NamedTensor& bf16 = find(content, "bf16");
  EXPECT_EQ(bf16.dtype, "BF16");
  EXPECT_EQ(bf16.shape, Shape({2, 5}));
  const float bf16_expected[] = {
      0.0f, -0.0f, 1.0f, -2.5f,       3.3895313892515355e38f, std::ldexp(1.0f, -133),
      kInf, -kInf, kNaN, 0.333984375f};
  ASSERT_EQ(bf16.values.size(), 10u);
  for (size_t i = 0; i < 10; ++i) expect_same_float(bf16.values[i], bf16_expected[i], "bf16");
}

TEST(GraphSafetensors, OtherDtypesKeepTheirNameAndNoValues) {
  const SafetensorsContent content = read_safetensors(testing::fixture("dtypes.safetensors"));
  const NamedTensor& counter = find(content, "counter");
  EXPECT_EQ(counter.dtype, "I64");
  EXPECT_EQ(counter.shape, Shape({}));
  EXPECT_TRUE(counter.values.empty());
  const NamedTensor& u8 = find(content, "u8");
  EXPECT_EQ(u8.dtype, "U8");
  EXPECT_EQ(u8.shape, Shape({3}));
  EXPECT_TRUE(u8.values.empty());
}

TEST(GraphSafetensors, ReadsMetadata) {
  const SafetensorsContent content = read_safetensors(testing::fixture("dtypes.safetensors"));
  EXPECT_EQ(content.metadata.size(), 2u);
  EXPECT_EQ(content.metadata.at("format"), "np");
  EXPECT_EQ(content.metadata.at("note"), "fusednn dtype fixtures");
}

// ---- Hand-made files

TEST(GraphSafetensors, HandMadeFileWithEmptyTensorAndNoMetadata) {
  TempDir dir;
  const std::string path =
      dir.write("ok.safetensors",
                safetensors_bytes(R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                  R"("empty":{"dtype":"F32","shape":[0,3],"data_offsets":[8,8]}})",
                                  float_bytes({1.5f, -4.0f})));
  const SafetensorsContent content = read_safetensors(path);
  EXPECT_TRUE(content.metadata.empty());
  EXPECT_EQ(find(content, "b").values, std::vector<float>({1.5f, -4.0f}));
  EXPECT_EQ(find(content, "empty").shape, Shape({0, 3}));
  EXPECT_TRUE(find(content, "empty").values.empty());
}

TEST(GraphSafetensors, MissingFileOrDirectoryIsAnIoError) {
  TempDir dir;
  expect_error([&] { read_safetensors(dir.path("absent.safetensors")); }, FDNN_STATUS_IO_ERROR,
               {"cannot open", "absent.safetensors"});
  expect_error([&] { read_safetensors(dir.path()); }, FDNN_STATUS_IO_ERROR, {"is a directory"});
}

TEST(GraphSafetensors, EmptyAndTruncatedFiles) {
  TempDir dir;
  const std::string empty = dir.write("empty.safetensors", "");
  expect_error([&] { read_safetensors(empty); }, FDNN_STATUS_PARSE_ERROR,
               {"empty.safetensors", "is empty"});
  const std::string short_file = dir.write("short.safetensors", std::string("\x10\x00\x00", 3));
  expect_error([&] { read_safetensors(short_file); }, FDNN_STATUS_PARSE_ERROR,
               {"short.safetensors", "truncated: 3 bytes"});
  // A valid file cut inside its data: the header's offsets now point past the end.
  const std::string whole = safetensors_bytes(
      R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", float_bytes({1, 2, 3, 4}));
  const std::string cut = dir.write("cut.safetensors", whole.substr(0, whole.size() - 4));
  expect_error([&] { read_safetensors(cut); }, FDNN_STATUS_PARSE_ERROR,
               {"cut.safetensors", "tensor 'w' has data_offsets [0, 16] outside the 12 bytes"});
}

TEST(GraphSafetensors, HeaderLengthPastTheEnd) {
  TempDir dir;
  const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  std::string bytes = safetensors_bytes(header, float_bytes({1.0f}));
  bytes[0] = static_cast<char>(200);  // claims a 200-byte header in a 68-byte file
  const std::string path = dir.write("long.safetensors", bytes);
  expect_error([&] { read_safetensors(path); }, FDNN_STATUS_PARSE_ERROR,
               {"long.safetensors", "header length 200 runs past the end of the file"});
  std::string huge = bytes;
  huge[7] = static_cast<char>(0x80);  // 2^63 + 200
  const std::string huge_path = dir.write("huge.safetensors", huge);
  expect_error([&] { read_safetensors(huge_path); }, FDNN_STATUS_PARSE_ERROR,
               {"runs past the end of the file"});
}

TEST(GraphSafetensors, MalformedHeaders) {
  struct Case {
    std::string header;
    std::string data;
    std::string fragment;
  };
  const std::string four = float_bytes({1.0f});
  const Case cases[] = {
      {R"({"w": )", four, "header is not valid JSON"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,1e400]}})", four,
       "header is not valid JSON"},
      {R"([1, 2])", four, "the header must be a JSON object"},
      {R"({"w": 5})", four, "header entry 'w' must be an object"},
      {R"({"w":{"shape":[1],"data_offsets":[0,4]}})", four, "tensor 'w' has no \"dtype\""},
      {R"({"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}})", four,
       "tensor 'w' has unknown dtype 'Q4'"},
      {R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", four, "tensor 'w' has no \"shape\""},
      {R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", four,
       "shape entry that is not a non-negative integer"},
      {R"({"w":{"dtype":"F32","shape":[1]}})", four, "tensor 'w' needs \"data_offsets\""},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", four,
       "data_offsets [4, 0] outside the 4 bytes"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", four,
       "data_offsets [0, 8] outside the 4 bytes"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", four + four,
       "tensor 'w' (F32, shape [2]) needs 8 bytes but its data_offsets [0, 4] span 4"},
      {R"({"w":{"dtype":"F16","shape":[1],"data_offsets":[0,4]}})", four, "needs 2 bytes"},
      {R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", four,
       "needs more bytes than the 4 of data"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       four + four + four, "tensors 'a' [0, 8) and 'b' [4, 12) overlap"},
      {R"({"__metadata__":{"k":1},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", four,
       "\"__metadata__\" entry 'k' must be a string"},
  };
  TempDir dir;
  for (const Case& c : cases) {
    const std::string path = dir.write("bad.safetensors", safetensors_bytes(c.header, c.data));
    expect_error([&] { read_safetensors(path); }, FDNN_STATUS_PARSE_ERROR,
                 {"bad.safetensors", c.fragment});
  }
}

// A shape nested 70,000 deep (140 KB of brackets): rejected by depth while parsing, on a 256 KiB
// stack, with a message that names the tensor; nothing walks the nesting recursively.
TEST(GraphSafetensors, DeeplyNestedShapeIsRejectedWithoutRecursion) {
  const size_t depth = 70000;
  const std::string header = R"({"w":{"dtype":"F32","data_offsets":[0,4],"shape":)" +
                             std::string(depth, '[') + std::string(depth, ']') + "}}";
  const std::string bytes = safetensors_bytes(header, float_bytes({1.0f}));
  testing::run_on_small_stack([&] {
    expect_error([&] { parse_safetensors(bytes, "deep.safetensors"); }, FDNN_STATUS_PARSE_ERROR,
                 {"'deep.safetensors'", "nested deeper than the 3 levels", "inside 'w'"});
  });
}

// A list one level deeper than the format is reported the same way, and a shape whose entries
// are lists is described by their types, never dumped.
TEST(GraphSafetensors, NestingAndBadShapeEntriesAreDescribedNotDumped) {
  const std::string four = float_bytes({1.0f});
  expect_error(
      [&] {
        parse_safetensors(
            safetensors_bytes(R"({"w":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}})", four),
            "n.safetensors");
      },
      FDNN_STATUS_PARSE_ERROR, {"'n.safetensors'", "nested deeper", "inside 'w'"});
  expect_error(
      [&] {
        parse_safetensors(
            safetensors_bytes(R"({"w":{"dtype":"F32","shape":[1,"2",3],"data_offsets":[0,4]}})",
                              four),
            "s.safetensors");
      },
      FDNN_STATUS_PARSE_ERROR, {"tensor 'w'", "not a non-negative integer: [1, string, 3]"});
  std::string long_shape = "[";
  for (int i = 0; i < 1000; ++i) long_shape += (i ? ",-1" : "-1");
  long_shape += "]";
  expect_error(
      [&] {
        parse_safetensors(safetensors_bytes(R"({"w":{"dtype":"F32","shape":)" + long_shape +
                                                R"(,"data_offsets":[0,4]}})",
                                            four),
                          "l.safetensors");
      },
      FDNN_STATUS_PARSE_ERROR,
      {"tensor 'w'", "[-1, -1, -1, -1, -1, -1, -1, -1, ... 1000 entries]"});
}

// Duplicate keys: nlohmann would keep the last one, so one file could hold two specs or two
// tensors of one name.
TEST(GraphSafetensors, DuplicateKeysAreRejectedNamingTheKey) {
  const std::string four = float_bytes({1.0f});
  const std::string entry = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  struct Case {
    std::string header;
    std::vector<std::string> fragments;
  };
  const Case cases[] = {
      {R"({"w":)" + entry + R"(,"w":)" + entry + "}", {"key 'w' appears twice"}},
      {R"({"__metadata__":{"fusednn.spec":"a"},"w":)" + entry +
           R"(,"__metadata__":{"fusednn.spec":"b"}})",
       {"key '__metadata__' appears twice"}},
      {R"({"__metadata__":{"k":"a","k":"b"},"w":)" + entry + "}",
       {"key 'k' appears twice", "inside '__metadata__'"}},
      {R"({"w":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})",
       {"key 'dtype' appears twice", "inside 'w'"}},
  };
  for (const Case& c : cases) {
    try {
      parse_safetensors(safetensors_bytes(c.header, four), "dup.safetensors");
      ADD_FAILURE() << "accepted: " << c.header;
    } catch (const StatusError& e) {
      EXPECT_EQ(e.status(), FDNN_STATUS_PARSE_ERROR) << e.what();
      const std::string message = e.what();
      EXPECT_NE(message.find("'dup.safetensors'"), std::string::npos) << message;
      for (const std::string& fragment : c.fragments) {
        EXPECT_NE(message.find(fragment), std::string::npos) << fragment << " in " << message;
      }
    }
  }
}

TEST(GraphSafetensors, ParsesFromMemoryWithTheGivenSourceName) {
  const SafetensorsContent content = parse_safetensors(
      safetensors_bytes(R"({"x":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})",
                        float_bytes({3.25f})),
      "<memory>");
  ASSERT_EQ(content.tensors.size(), 1u);
  EXPECT_EQ(content.tensors[0].shape, Shape({}));
  EXPECT_EQ(content.tensors[0].values, std::vector<float>({3.25f}));
  EXPECT_EQ(content.tensors[0].source, "<memory>");
}

}  // namespace
}  // namespace fusednn
