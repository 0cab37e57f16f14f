// SPDX-License-Identifier: Apache-2.0
// The structural checks every JSON text from a file goes through while nlohmann parses it (the
// parser's callback, so nothing is built past the first problem): no object repeats a key, and,
// where a format has a fixed depth, no container opens deeper than it. nlohmann's parser and
// destructor are iterative, so a deeply nested text costs no stack; the depth limit keeps such a
// text from reaching the code that walks the result.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fusednn/fusednn.h"

namespace fusednn {

class JsonStructureCheck {
 public:
  // Failures throw StatusError(status, "<message_prefix><what>"). max_depth 0 leaves the depth
  // unchecked; otherwise a container may open inside at most max_depth - 1 others.
  JsonStructureCheck(std::string message_prefix, fdnn_status status, int max_depth = 0);

  // nlohmann's parser callback (json::parse(text, std::ref(check))).
  bool operator()(int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed);

 private:
  struct OpenContainer {
    bool is_object = false;
    std::set<std::string> keys;
    std::string current_key;
  };

  // " (inside 'fc1.weight')": the key of the top-level object the parser is in, if any.
  std::string location() const;

  std::string message_prefix_;
  fdnn_status status_;
  int max_depth_;
  std::vector<OpenContainer> open_;
};

}  // namespace fusednn
