// SPDX-License-Identifier: Apache-2.0

#include "api/firewall.hpp"

namespace fusednn {
namespace {
thread_local std::string t_last_error;
}  // namespace

fdnn_status record_error(fdnn_status status, const char* function, const char* message) noexcept {
  try {
    t_last_error.assign(function).append(": ").append(message);
  } catch (...) {
    t_last_error.clear();  // no memory for the message; the status still tells the story
  }
  return status;
}

const char* last_error_message() noexcept { return t_last_error.c_str(); }

}  // namespace fusednn
