// SPDX-License-Identifier: Apache-2.0

#include "graph/spec_parser.hpp"

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "graph/json_structure_check.hpp"

namespace fusednn {
namespace {

using nlohmann::json;

constexpr int64_t kFormatVersion = 1;
// Bounds that keep every size computation well inside int64_t.
constexpr int64_t kMaxExtent = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxElements = int64_t{1} << 40;
// The name "inputs" uses for the model's input; no layer may take it.
constexpr const char* kInputName = "input";

// ---------------------------------------------------------------------------------------------
// Message helpers

// A JSON value as a message shows it: `string "100"`, `3.5`, `array [1,2]`, cut to about 40 bytes.
// Nested containers are summarized rather than dumped (dump() recurses once per nesting level).
std::string describe(const json& value) {
  if (value.is_structured()) {
    for (const json& item : value) {
      if (item.is_structured()) {
        return std::string(value.type_name()) + " of " + std::to_string(value.size()) +
               (value.size() == 1 ? " entry" : " entries");
      }
    }
  }
  std::string text = value.dump();
  if (text.size() > 40) {
    size_t cut = 37;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // UTF-8
    text = text.substr(0, cut) + "...";
  }
  if (value.is_string() || value.is_structured()) {
    return std::string(value.type_name()) + " " + text;
  }
  return text;
}

std::string join(const std::vector<std::string>& items, size_t limit = 64) {
  std::string text;
  for (size_t i = 0; i < items.size() && i < limit; ++i) {
    if (i) text += ", ";
    text += items[i];
  }
  if (items.size() > limit) text += ", ... (" + std::to_string(items.size() - limit) + " more)";
  return text;
}

// Element count, or -1 when it exceeds kMaxElements (checked before each multiplication).
int64_t bounded_element_count(const Shape& shape) {
  int64_t count = 1;
  for (int64_t extent : shape) {
    if (extent != 0 && count > kMaxElements / extent) return -1;
    count *= extent;
  }
  return count;
}

// 1-based line and column (in bytes) of the byte at `index`.
std::pair<size_t, size_t> line_and_column(const std::string& text, size_t index) {
  index = std::min(index, text.size());
  size_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < index; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return {line, index - line_start + 1};
}

// nlohmann's description of a parse error without its own prefix and position:
// "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error ..." ->
// "syntax error ...".
std::string parse_error_detail(const std::string& what) {
  const size_t at = what.find("parse error");
  if (at == std::string::npos) return what;
  const size_t colon = what.find(": ", at);
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

// ---------------------------------------------------------------------------------------------
// Layer types

class LayerBuilder;
using BuildFunction = void (*)(LayerBuilder&);

struct LayerType {
  const char* spelling;
  LayerKind kind;
  bool variadic;  // takes 2 or more inputs (Add, Concat); every other type takes exactly 1
  std::vector<std::string> attribute_keys;
  BuildFunction build;
};

const std::vector<LayerType>& layer_types();

const LayerType* find_layer_type(const std::string& spelling) {
  for (const LayerType& type : layer_types()) {
    if (spelling == type.spelling) return &type;
  }
  return nullptr;
}

std::vector<std::string> layer_type_spellings() {
  std::vector<std::string> names;
  for (const LayerType& type : layer_types()) names.push_back(type.spelling);
  return names;
}

const std::vector<std::string>& common_layer_keys() {
  static const std::vector<std::string> keys{"type", "name", "inputs", "weights"};
  return keys;
}

// ---------------------------------------------------------------------------------------------
// One layer under construction: the type's build function reads attributes through it, checks the
// (already resolved) inputs, and sets the output shape and weight slots. Every error names the
// layer.

class LayerBuilder {
 public:
  LayerBuilder(const std::string& source, const json& object, const LayerType& type, int index,
               Layer& layer, const Graph& graph)
      : source_(source), object_(object), type_(type), layer_(layer), graph_(graph) {
    context_ =
        "layer '" + layer.name + "' (" + layer.type_name + ", #" + std::to_string(index) + ")";
  }

  template <typename... Parts>
  [[noreturn]] void error(Parts&&... parts) const {
    fail(FDNN_STATUS_INVALID_MODEL, source_, ": ", context_, ": ", std::forward<Parts>(parts)...);
  }

  LayerAttributes& attributes() { return layer_.attributes; }

  void reject_unknown_keys() const {
    for (const auto& item : object_.items()) {
      if (is_common_key(item.key()) || is_attribute_key(item.key())) continue;
      std::string valid =
          type_.attribute_keys.empty()
              ? std::string(type_.spelling) + " takes no attributes"
              : std::string(type_.spelling) + " takes: " + join(type_.attribute_keys);
      error("unknown key '", item.key(), "' (", valid,
            "; every layer takes: ", join(common_layer_keys()), ")");
    }
  }

  // ---- Attribute readers. `fallback` absent means the key is required.

  // The value of an attribute key, or nullptr when the spec leaves it out.
  const json* find(const std::string& key) const {
    if (!is_attribute_key(key)) {
      fail(FDNN_STATUS_INTERNAL_ERROR, "spec parser reads '", key, "', which ", type_.spelling,
           " does not list as an attribute");
    }
    const auto found = object_.find(key);
    return found == object_.end() ? nullptr : &*found;
  }

  const json& required(const std::string& key) const {
    const json* value = find(key);
    if (!value) error("missing required key '", key, "'");
    return *value;
  }

  int64_t integer(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
    const json* value = fallback ? find(key) : &required(key);
    if (!value) return *fallback;
    return integer_value(key, *value);
  }

  // A size (feature count, channel count): a positive integer.
  int64_t extent(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
    const json* value = fallback ? find(key) : &required(key);
    if (!value) return *fallback;
    return bounded_integer(key, *value, 1);
  }

  // An int or [height, width], each at least `minimum`.
  std::array<int64_t, 2> pair(const std::string& key, int64_t minimum,
                              std::optional<std::array<int64_t, 2>> fallback = std::nullopt) const {
    const json* value = fallback ? find(key) : &required(key);
    if (!value) return *fallback;
    return pair_value(key, *value, minimum);
  }

  std::array<int64_t, 2> pair_value(const std::string& key, const json& value,
                                    int64_t minimum) const {
    if (value.is_number_integer()) {
      const int64_t both = bounded_integer(key, value, minimum);
      return {both, both};
    }
    if (value.is_array() && value.size() == 2 && value[0].is_number_integer() &&
        value[1].is_number_integer()) {
      return {bounded_integer(key, value[0], minimum), bounded_integer(key, value[1], minimum)};
    }
    error("'", key, "' must be an integer or a list [height, width] of integers, got ",
          describe(value));
  }

  bool flag(const std::string& key, bool fallback) const {
    const json* value = find(key);
    if (!value) return fallback;
    if (!value->is_boolean()) error("'", key, "' must be true or false, got ", describe(*value));
    return value->get<bool>();
  }

  float real(const std::string& key, std::optional<float> fallback = std::nullopt) const {
    const json* value = fallback ? find(key) : &required(key);
    if (!value) return *fallback;
    if (!value->is_number()) error("'", key, "' must be a number, got ", describe(*value));
    const double number = value->get<double>();
    if (!std::isfinite(number) || std::fabs(number) > FLT_MAX) {
      error("'", key, "' is ", describe(*value), ", outside the float32 range");
    }
    return static_cast<float>(number);
  }

  std::string text(const std::string& key, const std::string& fallback) const {
    const json* value = find(key);
    if (!value) return fallback;
    if (!value->is_string()) error("'", key, "' must be a string, got ", describe(*value));
    return value->get<std::string>();
  }

  int64_t integer_value(const std::string& key, const json& value) const {
    if (!value.is_number_integer()) {
      error("'", key, "' must be an integer, got ", describe(value));
    }
    if (value.is_number_unsigned() &&
        value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      error("'", key, "' is too large: ", describe(value));
    }
    return value.get<int64_t>();
  }

  int64_t bounded_integer(const std::string& key, const json& value, int64_t minimum) const {
    const int64_t number = integer_value(key, value);
    if (number < minimum) {
      error("'", key, "' must be ", minimum == 1 ? "a positive integer" : "a non-negative integer",
            ", got ", number);
    }
    if (number > kMaxExtent) error("'", key, "' is ", number, ", more than ", kMaxExtent);
    return number;
  }

  // ---- Inputs

  size_t input_count() const { return layer_.inputs.size(); }
  const Shape& input_shape(size_t k = 0) const { return graph_.shape_of(layer_.inputs.at(k)); }

  // "input 'fc1'" or "the model input".
  std::string input_name(size_t k) const {
    const int producer = layer_.inputs.at(k);
    return producer == kGraphInput ? "the model input"
                                   : "input '" + graph_.layers.at(producer).name + "'";
  }

  // "its input 'fc1' produces [64]" or "the model input is [64]".
  std::string input_phrase(size_t k = 0) const {
    const int producer = layer_.inputs.at(k);
    if (producer == kGraphInput) return "the model input is " + to_string(input_shape(k));
    return "its input '" + graph_.layers.at(producer).name + "' produces " +
           to_string(input_shape(k));
  }

  // The single input, required to be a per-sample [C, H, W] image.
  const Shape& image_input() const {
    const Shape& x = input_shape();
    if (x.size() != 3) {
      error(type_.spelling, " expects a per-sample [C, H, W] input, but ", input_phrase());
    }
    return x;
  }

  // ---- Results

  void set_output(Shape shape) {
    for (int64_t extent : shape) {
      if (extent < 1) error("output shape ", to_string(shape), " has an empty dimension");
      if (extent > kMaxExtent) error("output shape ", to_string(shape), " is too large");
    }
    if (bounded_element_count(shape) < 0) {
      error("output shape ", to_string(shape), " has more than ", kMaxElements, " elements");
    }
    layer_.output_shape = std::move(shape);
  }

  void add_weight(const std::string& role, Shape shape) {
    if (bounded_element_count(shape) < 0) {
      error("weight '", role, "' of shape ", to_string(shape), " has more than ", kMaxElements,
            " elements");
    }
    layer_.weights.push_back(WeightSlot{role, layer_.name + "." + role, std::move(shape)});
  }

 private:
  bool is_attribute_key(const std::string& key) const {
    return std::find(type_.attribute_keys.begin(), type_.attribute_keys.end(), key) !=
           type_.attribute_keys.end();
  }
  static bool is_common_key(const std::string& key) {
    const auto& keys = common_layer_keys();
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  }

  const std::string& source_;
  const json& object_;
  const LayerType& type_;
  Layer& layer_;
  const Graph& graph_;
  std::string context_;
};

// ---------------------------------------------------------------------------------------------
// Build functions, one per layer type: read attributes, check the inputs, infer the output shape
// (PyTorch's formulas), declare the weights (PyTorch's state_dict shapes).

// floor((in + 2 * padding - dilation * (kernel - 1) - 1) / stride) + 1, checked to be positive.
int64_t window_output(const LayerBuilder& b, const char* axis, int64_t in, int64_t kernel,
                      int64_t stride, int64_t padding, int64_t dilation) {
  const int64_t span = in + 2 * padding - dilation * (kernel - 1) - 1;
  // Floor division, also for a negative span.
  const int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  if (out <= 0) {
    b.error("output ", axis, " would be ", out, " = floor((", in, " + 2*", padding, " - ", dilation,
            "*(", kernel, " - 1) - 1) / ", stride, ") + 1 for input ", axis, " ", in,
            "; the window does not fit (", b.input_phrase(), ")");
  }
  return out;
}

void build_linear(LayerBuilder& b) {
  LayerAttributes& a = b.attributes();
  a.in_features = b.extent("in_features");
  a.out_features = b.extent("out_features");
  a.has_bias = b.flag("bias", true);
  const Shape& x = b.input_shape();
  if (x.back() != a.in_features) {
    b.error("in_features is ", a.in_features, " but ", b.input_phrase());
  }
  Shape y = x;
  y.back() = a.out_features;
  b.set_output(std::move(y));
  b.add_weight("weight", {a.out_features, a.in_features});
  if (a.has_bias) b.add_weight("bias", {a.out_features});
}

void build_conv2d(LayerBuilder& b) {
  LayerAttributes& a = b.attributes();
  a.in_channels = b.extent("in_channels");
  a.out_channels = b.extent("out_channels");
  a.kernel_size = b.pair("kernel_size", 1);
  a.stride = b.pair("stride", 1, {{1, 1}});
  a.dilation = b.pair("dilation", 1, {{1, 1}});
  a.groups = b.extent("groups", 1);
  a.has_bias = b.flag("bias", true);
  const json* padding = b.find("padding");
  if (padding && padding->is_string()) {
    const std::string mode = padding->get<std::string>();
    if (mode == "valid") {
      a.padding = {0, 0};
    } else if (mode == "same") {
      if (a.stride[0] != 1 || a.stride[1] != 1) {
        b.error("padding \"same\" needs stride 1 (as in PyTorch), but stride is [", a.stride[0],
                ", ", a.stride[1], "]");
      }
      for (int i = 0; i < 2; ++i) {
        const int64_t total = a.dilation[i] * (a.kernel_size[i] - 1);
        if (total % 2 != 0) {
          b.error("padding \"same\" with kernel_size ", a.kernel_size[i], " and dilation ",
                  a.dilation[i], " pads unevenly, which fusednn does not support; pad explicitly");
        }
        a.padding[i] = total / 2;
      }
    } else {
      b.error("'padding' must be an integer, [height, width], \"valid\" or \"same\", got ",
              describe(*padding));
    }
  } else if (padding) {
    a.padding = b.pair_value("padding", *padding, 0);
  }

  const Shape& x = b.image_input();
  if (x[0] != a.in_channels) b.error("in_channels is ", a.in_channels, " but ", b.input_phrase());
  if (a.in_channels % a.groups != 0) {
    b.error("in_channels (", a.in_channels, ") is not divisible by groups (", a.groups, ")");
  }
  if (a.out_channels % a.groups != 0) {
    b.error("out_channels (", a.out_channels, ") is not divisible by groups (", a.groups, ")");
  }
  const int64_t height =
      window_output(b, "height", x[1], a.kernel_size[0], a.stride[0], a.padding[0], a.dilation[0]);
  const int64_t width =
      window_output(b, "width", x[2], a.kernel_size[1], a.stride[1], a.padding[1], a.dilation[1]);
  b.set_output({a.out_channels, height, width});
  b.add_weight("weight",
               {a.out_channels, a.in_channels / a.groups, a.kernel_size[0], a.kernel_size[1]});
  if (a.has_bias) b.add_weight("bias", {a.out_channels});
}

void build_pool2d(LayerBuilder& b, bool is_max) {
  LayerAttributes& a = b.attributes();
  a.kernel_size = b.pair("kernel_size", 1);
  const json* stride = b.find("stride");
  a.stride = (!stride || stride->is_null()) ? a.kernel_size : b.pair_value("stride", *stride, 1);
  a.padding = b.pair("padding", 0, {{0, 0}});
  if (is_max) {
    const std::array<int64_t, 2> dilation = b.pair("dilation", 1, {{1, 1}});
    if (dilation[0] != 1 || dilation[1] != 1) {
      b.error("dilation [", dilation[0], ", ", dilation[1],
              "] is not supported; MaxPool2d supports only dilation 1");
    }
  } else {
    a.count_include_pad = b.flag("count_include_pad", true);
  }
  if (b.flag("ceil_mode", false)) {
    b.error(
        "ceil_mode true is not supported; export the layer with ceil_mode false (or pad the "
        "input so that floor and ceil agree)");
  }
  for (int i = 0; i < 2; ++i) {
    if (a.padding[i] * 2 > a.kernel_size[i]) {
      b.error("padding ", a.padding[i], " is more than half of kernel_size ", a.kernel_size[i],
              " (PyTorch rejects this too)");
    }
  }
  const Shape& x = b.image_input();
  const int64_t height =
      window_output(b, "height", x[1], a.kernel_size[0], a.stride[0], a.padding[0], 1);
  const int64_t width =
      window_output(b, "width", x[2], a.kernel_size[1], a.stride[1], a.padding[1], 1);
  b.set_output({x[0], height, width});
}

void build_maxpool2d(LayerBuilder& b) { build_pool2d(b, true); }
void build_avgpool2d(LayerBuilder& b) { build_pool2d(b, false); }

void build_flatten(LayerBuilder& b) {
  const Shape& x = b.input_shape();
  // PyTorch dims: the batch is dim 0, so a per-sample rank r is a full rank r + 1.
  const int64_t full_rank = static_cast<int64_t>(x.size()) + 1;
  auto normalize = [&](const char* key, int64_t fallback) {
    const int64_t dim = b.integer(key, fallback);
    if (dim < -full_rank || dim >= full_rank) {
      b.error("'", key, "' is ", dim, ", out of range [", -full_rank, ", ", full_rank - 1, "] for ",
              b.input_phrase(), " (PyTorch dims: the batch is dim 0)");
    }
    const int64_t normalized = dim < 0 ? dim + full_rank : dim;
    if (normalized == 0) {
      b.error("'", key, "' is ", dim,
              ", which is the batch dimension (dim 0); fusednn keeps the "
              "batch separate, so Flatten must start at dim 1 or later");
    }
    return normalized;
  };
  const int64_t start = normalize("start_dim", 1);
  const int64_t end = normalize("end_dim", -1);
  if (start > end) {
    b.error("start_dim (", start, ") comes after end_dim (", end, ") for ", b.input_phrase());
  }
  // Per-sample axes [start - 1, end - 1] merge into one.
  Shape y(x.begin(), x.begin() + (start - 1));
  int64_t merged = 1;
  for (int64_t i = start - 1; i <= end - 1; ++i) merged *= x[i];
  y.push_back(merged);
  y.insert(y.end(), x.begin() + end, x.end());
  b.set_output(std::move(y));
}

void build_pointwise(LayerBuilder& b) { b.set_output(b.input_shape()); }

void build_leaky_relu(LayerBuilder& b) {
  b.attributes().negative_slope = b.real("negative_slope", 0.01f);
  b.set_output(b.input_shape());
}

void build_gelu(LayerBuilder& b) {
  const std::string approximate = b.text("approximate", "none");
  if (approximate != "none" && approximate != "tanh") {
    b.error("'approximate' must be \"none\" or \"tanh\", got \"", approximate, "\"");
  }
  b.attributes().gelu_tanh = approximate == "tanh";
  b.set_output(b.input_shape());
}

void build_scale(LayerBuilder& b) {
  b.attributes().alpha = b.real("alpha");
  b.set_output(b.input_shape());
}

void build_layer_norm(LayerBuilder& b) {
  LayerAttributes& a = b.attributes();
  const json& normalized = b.required("normalized_shape");
  a.normalized_shape.clear();
  if (normalized.is_array() && !normalized.empty()) {
    for (const json& extent : normalized) {
      a.normalized_shape.push_back(b.bounded_integer("normalized_shape", extent, 1));
    }
  } else if (normalized.is_number_integer()) {
    a.normalized_shape.push_back(b.bounded_integer("normalized_shape", normalized, 1));
  } else {
    b.error("'normalized_shape' must be a positive integer or a non-empty list of them, got ",
            describe(normalized));
  }
  a.eps = b.real("eps", 1e-5f);
  if (a.eps < 0.0f) b.error("'eps' must not be negative, got ", a.eps);
  a.elementwise_affine = b.flag("elementwise_affine", true);
  a.has_bias = a.elementwise_affine && b.flag("bias", true);

  const Shape& x = b.input_shape();
  const Shape& ns = a.normalized_shape;
  if (ns.size() > x.size() || !std::equal(ns.begin(), ns.end(), x.end() - ns.size())) {
    b.error("normalized_shape ", to_string(ns),
            " is not the trailing dims of its input: ", b.input_phrase());
  }
  b.set_output(x);
  if (a.elementwise_affine) b.add_weight("weight", ns);
  if (a.has_bias) b.add_weight("bias", ns);
}

void build_batch_norm(LayerBuilder& b, bool is_2d) {
  LayerAttributes& a = b.attributes();
  a.num_features = b.extent("num_features");
  a.eps = b.real("eps", 1e-5f);
  if (a.eps < 0.0f) b.error("'eps' must not be negative, got ", a.eps);
  // momentum only matters in training; it is checked for type and otherwise ignored.
  const json* momentum = b.find("momentum");
  if (momentum && !momentum->is_null()) b.real("momentum");
  a.elementwise_affine = b.flag("affine", true);
  a.has_bias = a.elementwise_affine;
  if (!b.flag("track_running_stats", true)) {
    b.error(
        "track_running_stats false is not supported: such a layer normalizes with the "
        "statistics of each batch even at inference");
  }
  const Shape& x = b.input_shape();
  if (is_2d && x.size() != 3) {
    b.error("BatchNorm2d expects a per-sample [C, H, W] input, but ", b.input_phrase());
  }
  if (!is_2d && x.size() != 1 && x.size() != 2) {
    b.error("BatchNorm1d expects a per-sample [C] or [C, L] input, but ", b.input_phrase());
  }
  if (x[0] != a.num_features) {
    b.error("num_features is ", a.num_features, " but ", b.input_phrase(),
            " (channels are dim 0 of the per-sample shape)");
  }
  b.set_output(x);
  const Shape channels{a.num_features};
  if (a.elementwise_affine) {
    b.add_weight("weight", channels);
    b.add_weight("bias", channels);
  }
  b.add_weight("running_mean", channels);
  b.add_weight("running_var", channels);
}

void build_batch_norm1d(LayerBuilder& b) { build_batch_norm(b, false); }
void build_batch_norm2d(LayerBuilder& b) { build_batch_norm(b, true); }

void build_softmax(LayerBuilder& b) {
  const Shape& x = b.input_shape();
  const int64_t last = static_cast<int64_t>(x.size());  // the last dim, counting the batch as 0
  const int64_t dim = b.integer("dim", -1);
  if (dim != -1 && dim != last) {
    b.error("Softmax over dim ", dim, " is not supported; only the last dim is (-1, or ", last,
            " with the batch as dim 0), and ", b.input_phrase());
  }
  b.set_output(x);
}

void build_add(LayerBuilder& b) {
  const Shape& first = b.input_shape(0);
  for (size_t k = 1; k < b.input_count(); ++k) {
    if (b.input_shape(k) != first) {
      b.error(b.input_name(k), " produces ", to_string(b.input_shape(k)), " but ", b.input_name(0),
              " produces ", to_string(first), "; Add needs identical shapes (no broadcasting)");
    }
  }
  b.set_output(first);
}

void build_concat(LayerBuilder& b) {
  const Shape& first = b.input_shape(0);
  const int64_t full_rank = static_cast<int64_t>(first.size()) + 1;
  const int64_t dim = b.integer("dim", 1);
  if (dim < -full_rank || dim >= full_rank) {
    b.error("'dim' is ", dim, ", out of range [", -full_rank, ", ", full_rank - 1, "] for ",
            b.input_name(0), " of shape ", to_string(first), " (PyTorch dims: the batch is dim 0)");
  }
  const int64_t normalized = dim < 0 ? dim + full_rank : dim;
  if (normalized == 0) {
    b.error("'dim' is ", dim,
            ", which is the batch dimension (dim 0); Concat joins per-sample "
            "dims 1 or later");
  }
  LayerAttributes& a = b.attributes();
  a.axis = normalized - 1;
  Shape y = first;
  for (size_t k = 1; k < b.input_count(); ++k) {
    const Shape& x = b.input_shape(k);
    bool matches = x.size() == first.size();
    for (size_t i = 0; matches && i < x.size(); ++i) {
      matches = static_cast<int64_t>(i) == a.axis || x[i] == first[i];
    }
    if (!matches) {
      b.error(b.input_name(k), " produces ", to_string(x), " but ", b.input_name(0), " produces ",
              to_string(first), "; Concat along dim ", normalized, " needs every other dim equal");
    }
    y[a.axis] += x[a.axis];
  }
  b.set_output(std::move(y));
}

const std::vector<LayerType>& layer_types() {
  static const std::vector<LayerType> types{
      {"Linear", LayerKind::Linear, false, {"in_features", "out_features", "bias"}, build_linear},
      {"Conv2d",
       LayerKind::Conv2d,
       false,
       {"in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups",
        "bias"},
       build_conv2d},
      {"MaxPool2d",
       LayerKind::MaxPool2d,
       false,
       {"kernel_size", "stride", "padding", "dilation", "ceil_mode"},
       build_maxpool2d},
      {"AvgPool2d",
       LayerKind::AvgPool2d,
       false,
       {"kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"},
       build_avgpool2d},
      {"Flatten", LayerKind::Flatten, false, {"start_dim", "end_dim"}, build_flatten},
      {"ReLU", LayerKind::ReLU, false, {}, build_pointwise},
      {"LeakyReLU", LayerKind::LeakyReLU, false, {"negative_slope"}, build_leaky_relu},
      {"GELU", LayerKind::GELU, false, {"approximate"}, build_gelu},
      {"SiLU", LayerKind::SiLU, false, {}, build_pointwise},
      {"Sigmoid", LayerKind::Sigmoid, false, {}, build_pointwise},
      {"Tanh", LayerKind::Tanh, false, {}, build_pointwise},
      {"Scale", LayerKind::Scale, false, {"alpha"}, build_scale},
      {"LayerNorm",
       LayerKind::LayerNorm,
       false,
       {"normalized_shape", "eps", "elementwise_affine", "bias"},
       build_layer_norm},
      {"BatchNorm1d",
       LayerKind::BatchNorm,
       false,
       {"num_features", "eps", "momentum", "affine", "track_running_stats"},
       build_batch_norm1d},
      {"BatchNorm2d",
       LayerKind::BatchNorm,
       false,
       {"num_features", "eps", "momentum", "affine", "track_running_stats"},
       build_batch_norm2d},
      {"Softmax", LayerKind::Softmax, false, {"dim"}, build_softmax},
      {"Add", LayerKind::Add, true, {}, build_add},
      {"Concat", LayerKind::Concat, true, {"dim"}, build_concat},
  };
  return types;
}

// ---------------------------------------------------------------------------------------------
// The whole spec

class SpecReader {
 public:
  explicit SpecReader(const std::string& source) : source_(source) {}

  Graph read(const json& root) {
    if (!root.is_object()) error("a model spec must be a JSON object, got ", describe(root));
    static const std::vector<std::string> top_keys{"fusednn", "name", "input", "layers", "output"};
    for (const auto& item : root.items()) {
      if (std::find(top_keys.begin(), top_keys.end(), item.key()) == top_keys.end()) {
        error("unknown top-level key '", item.key(), "' (valid keys: ", join(top_keys), ")");
      }
    }
    read_version(root);
    Graph graph;
    if (const auto name = root.find("name"); name != root.end()) {
      if (!name->is_string()) error("'name' must be a string, got ", describe(*name));
      graph.name = name->get<std::string>();
    }
    graph.input_shape = read_input(root);
    read_layers(root, graph);
    graph.output = read_output(root, graph);
    return graph;
  }

 private:
  template <typename... Parts>
  [[noreturn]] void error(Parts&&... parts) const {
    fail(FDNN_STATUS_INVALID_MODEL, source_, ": ", std::forward<Parts>(parts)...);
  }

  void read_version(const json& root) const {
    const auto version = root.find("fusednn");
    if (version == root.end()) {
      error("missing key 'fusednn' (the format version; this library reads version ",
            kFormatVersion, ")");
    }
    if (!version->is_number_integer() || version->get<int64_t>() != kFormatVersion) {
      error("'fusednn' is ", describe(*version), ", but this library reads format version ",
            kFormatVersion);
    }
  }

  Shape read_input(const json& root) const {
    const auto input = root.find("input");
    if (input == root.end())
      error("missing key 'input' ({\"shape\": [...], \"dtype\": \"float32\"})");
    if (!input->is_object()) error("'input' must be an object, got ", describe(*input));
    for (const auto& item : input->items()) {
      if (item.key() != "shape" && item.key() != "dtype") {
        error("unknown key 'input.", item.key(), "' (valid keys: shape, dtype)");
      }
    }
    if (const auto dtype = input->find("dtype"); dtype != input->end()) {
      if (!dtype->is_string() || dtype->get<std::string>() != "float32") {
        error("'input.dtype' is ", describe(*dtype), "; only \"float32\" is supported");
      }
    }
    const auto shape = input->find("shape");
    if (shape == input->end()) error("missing key 'input.shape' (the per-sample shape)");
    if (!shape->is_array() || shape->empty()) {
      error(
          "'input.shape' must be a non-empty list of positive integers (the per-sample shape, "
          "without the batch), got ",
          describe(*shape));
    }
    if (shape->size() > FDNN_MAX_RANK) {
      error("'input.shape' has ", shape->size(), " dims; at most ", FDNN_MAX_RANK,
            " are supported");
    }
    Shape result;
    for (const json& extent : *shape) {
      // An unsigned value past INT64_MAX reads back negative, so the range test covers it.
      if (!extent.is_number_integer() || extent.get<int64_t>() < 1 ||
          extent.get<int64_t>() > kMaxExtent) {
        error("'input.shape' must hold integers from 1 to ", kMaxExtent, ", got ", describe(extent),
              " in ", describe(*shape));
      }
      result.push_back(extent.get<int64_t>());
    }
    if (bounded_element_count(result) < 0) {
      error("'input.shape' ", to_string(result), " has more than ", kMaxElements, " elements");
    }
    return result;
  }

  // The name of each layer (given or defaulted) and its type, checked before any layer is built
  // so that an input naming a later layer can be told apart from an unknown name.
  struct LayerHeader {
    std::string name;
    std::string type_name;
    const LayerType* type;
  };

  std::vector<LayerHeader> read_headers(const json& layers) const {
    std::vector<LayerHeader> headers;
    std::map<std::string, size_t> index_of;
    for (size_t i = 0; i < layers.size(); ++i) {
      const json& object = layers[i];
      if (!object.is_object())
        error("layer #", i, " must be a JSON object, got ", describe(object));
      const auto name = object.find("name");
      std::string where = "layer #" + std::to_string(i);
      if (name != object.end()) {
        if (!name->is_string() || name->get<std::string>().empty()) {
          error(where, ": 'name' must be a non-empty string, got ", describe(*name));
        }
        where = "layer '" + name->get<std::string>() + "' (#" + std::to_string(i) + ")";
      }
      const auto type = object.find("type");
      if (type == object.end()) error(where, ": missing required key 'type'");
      if (!type->is_string()) error(where, ": 'type' must be a string, got ", describe(*type));
      const std::string type_name = type->get<std::string>();
      const LayerType* layer_type = find_layer_type(type_name);
      if (!layer_type) {
        error(where, ": unknown type '", type_name,
              "'; valid types: ", join(layer_type_spellings()));
      }
      std::string layer_name;
      if (name != object.end()) {
        layer_name = name->get<std::string>();
      } else {
        layer_name = type_name + "_" + std::to_string(i);
        std::transform(layer_name.begin(), layer_name.end(), layer_name.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      }
      where = "layer '" + layer_name + "' (" + type_name + ", #" + std::to_string(i) + ")";
      if (layer_name == kInputName) {
        error(where, ": the name '", kInputName, "' is reserved for the model input");
      }
      if (const auto earlier = index_of.find(layer_name); earlier != index_of.end()) {
        error(where, ": the name '", layer_name, "' is already used by layer #", earlier->second,
              " (", headers[earlier->second].type_name, ")",
              name == object.end() ? " (it is this layer's default name; give it a \"name\")" : "");
      }
      index_of.emplace(layer_name, i);
      headers.push_back({layer_name, type_name, layer_type});
    }
    return headers;
  }

  void read_layers(const json& root, Graph& graph) const {
    const auto layers = root.find("layers");
    if (layers == root.end()) error("missing key 'layers'");
    if (!layers->is_array() || layers->empty()) {
      error("'layers' must be a non-empty list of layer objects, got ", describe(*layers));
    }
    const std::vector<LayerHeader> headers = read_headers(*layers);
    std::map<std::string, int> index_of;
    for (size_t i = 0; i < headers.size(); ++i) index_of.emplace(headers[i].name, int(i));

    std::map<std::string, std::string> tensor_owner;  // tensor name -> "layer 'fc1' weight"
    for (size_t i = 0; i < headers.size(); ++i) {
      const json& object = (*layers)[i];
      const LayerType& type = *headers[i].type;
      Layer layer;
      layer.name = headers[i].name;
      layer.type_name = headers[i].type_name;
      layer.kind = type.kind;
      LayerBuilder builder(source_, object, type, int(i), layer, graph);
      builder.reject_unknown_keys();
      layer.inputs = read_inputs(builder, object, type, int(i), index_of);
      type.build(builder);
      apply_weight_names(builder, object, layer);
      for (const WeightSlot& slot : layer.weights) {
        const std::string owner = "layer '" + layer.name + "' " + slot.role;
        const auto [found, inserted] = tensor_owner.emplace(slot.tensor_name, owner);
        if (!inserted) {
          builder.error("tensor name '", slot.tensor_name, "' (its ", slot.role,
                        ") is already used by ", found->second,
                        "; every tensor needs its own name");
        }
      }
      graph.layers.push_back(std::move(layer));
    }
  }

  std::vector<int> read_inputs(const LayerBuilder& b, const json& object, const LayerType& type,
                               int index, const std::map<std::string, int>& index_of) const {
    std::vector<int> inputs;
    const auto listed = object.find("inputs");
    if (listed == object.end()) {
      inputs.push_back(index == 0 ? kGraphInput : index - 1);
    } else {
      if (!listed->is_array() || listed->empty()) {
        b.error("'inputs' must be a non-empty list of layer names (or \"", kInputName,
                "\" for the model input), got ", describe(*listed));
      }
      for (const json& entry : *listed) {
        if (!entry.is_string()) {
          b.error("'inputs' must hold layer names (strings), got ", describe(entry));
        }
        const std::string name = entry.get<std::string>();
        if (name == kInputName) {
          inputs.push_back(kGraphInput);
          continue;
        }
        const auto found = index_of.find(name);
        if (found == index_of.end()) {
          b.error("unknown input '", name, "': no layer has that name (use \"", kInputName,
                  "\" for the model input)");
        }
        if (found->second == index) b.error("input '", name, "' is the layer itself");
        if (found->second > index) {
          b.error("input '", name, "' is layer #", found->second,
                  ", which comes later; a layer may only read earlier layers (list layers in "
                  "topological order)");
        }
        inputs.push_back(found->second);
      }
    }
    if (type.variadic && inputs.size() < 2) {
      b.error(type.spelling, " needs 2 or more inputs, got ", inputs.size(),
              "; list them in \"inputs\"");
    }
    if (!type.variadic && inputs.size() != 1) {
      b.error(type.spelling, " takes exactly 1 input, got ", inputs.size());
    }
    return inputs;
  }

  // "weights": {"weight": "custom.name"} replaces the default "<layer>.<role>" names.
  void apply_weight_names(const LayerBuilder& b, const json& object, Layer& layer) const {
    const auto names = object.find("weights");
    if (names == object.end()) return;
    if (!names->is_object()) {
      b.error("'weights' must be an object mapping a weight role to a tensor name, got ",
              describe(*names));
    }
    for (const auto& item : names->items()) {
      auto slot = std::find_if(layer.weights.begin(), layer.weights.end(),
                               [&](const WeightSlot& s) { return s.role == item.key(); });
      if (slot == layer.weights.end()) {
        std::vector<std::string> roles;
        for (const WeightSlot& s : layer.weights) roles.push_back(s.role);
        if (roles.empty())
          b.error("'weights' names '", item.key(), "', but this layer has no weights");
        b.error("'weights' names '", item.key(), "', but this layer's weights are: ", join(roles));
      }
      if (!item.value().is_string() || item.value().get<std::string>().empty()) {
        b.error("'weights.", item.key(), "' must be a non-empty tensor name, got ",
                describe(item.value()));
      }
      slot->tensor_name = item.value().get<std::string>();
    }
  }

  int read_output(const json& root, const Graph& graph) const {
    const auto output = root.find("output");
    if (output == root.end()) return static_cast<int>(graph.layers.size()) - 1;
    if (!output->is_string()) error("'output' must be a layer name, got ", describe(*output));
    const std::string name = output->get<std::string>();
    for (size_t i = 0; i < graph.layers.size(); ++i) {
      if (graph.layers[i].name == name) return static_cast<int>(i);
    }
    error("'output' names '", name, "', but no layer has that name");
  }

  const std::string& source_;
};

}  // namespace

Graph parse_model_spec(const std::string& json_text, const std::string& source) {
  json root;
  try {
    JsonStructureCheck check(source + ": ", FDNN_STATUS_INVALID_MODEL);
    root = json::parse(json_text, std::ref(check));
  } catch (const json::parse_error& e) {
    // e.byte counts the bytes read, the offending one included.
    const auto [line, column] = line_and_column(json_text, e.byte == 0 ? 0 : e.byte - 1);
    fail(FDNN_STATUS_PARSE_ERROR, source, ": JSON syntax error at line ", line, ", column ", column,
         ": ", parse_error_detail(e.what()));
  } catch (const json::exception& e) {
    // A number too large for a double ("1e400") is reported without a position.
    fail(FDNN_STATUS_PARSE_ERROR, source, ": JSON error: ", e.what());
  }
  return SpecReader(source).read(root);
}

}  // namespace fusednn
