// SPDX-License-Identifier: Apache-2.0

#include "graph/json_structure_check.hpp"

#include <utility>

#include "common/error.hpp"

namespace fusednn {

using nlohmann::json;

JsonStructureCheck::JsonStructureCheck(std::string message_prefix, fdnn_status status,
                                       int max_depth)
    : message_prefix_(std::move(message_prefix)), status_(status), max_depth_(max_depth) {}

std::string JsonStructureCheck::location() const {
  if (open_.empty() || !open_.front().is_object || open_.front().current_key.empty()) return "";
  return " (inside '" + open_.front().current_key + "')";
}

bool JsonStructureCheck::operator()(int depth, json::parse_event_t event, json& parsed) {
  switch (event) {
    case json::parse_event_t::object_start:
    case json::parse_event_t::array_start:
      // depth counts the containers already open around this one.
      if (max_depth_ > 0 && depth >= max_depth_) {
        fail(status_, message_prefix_, "JSON nested deeper than the ", max_depth_,
             " levels this format has", location());
      }
      open_.emplace_back();
      open_.back().is_object = event == json::parse_event_t::object_start;
      break;
    case json::parse_event_t::object_end:
    case json::parse_event_t::array_end:
      if (!open_.empty()) open_.pop_back();
      break;
    case json::parse_event_t::key: {
      if (open_.empty()) break;
      std::string key = parsed.get<std::string>();
      if (!open_.back().keys.insert(key).second) {
        const std::string where = open_.size() == 1 ? std::string() : location();
        fail(status_, message_prefix_, "key '", key, "' appears twice in the same object", where);
      }
      open_.back().current_key = std::move(key);
      break;
    }
    case json::parse_event_t::value: break;
  }
  return true;
}

}  // namespace fusednn
