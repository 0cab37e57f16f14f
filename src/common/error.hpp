// SPDX-License-Identifier: Apache-2.0
// The one exception type inside the library (not the public C++ wrapper's fusednn::Error, which
// users see; this one never leaves libfusednn). The C API firewall (src/api) turns it into a status
// and the calling thread's message; nothing else crosses the boundary.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "fusednn/fusednn.h"

namespace fusednn {

class StatusError : public std::runtime_error {
 public:
  StatusError(fdnn_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  fdnn_status status() const noexcept { return status_; }

 private:
  fdnn_status status_;
};

// Builds a message from any streamable parts: fail(FDNN_STATUS_IO_ERROR, "cannot open '", p, "'").
template <typename... Parts>
[[noreturn]] void fail(fdnn_status status, Parts&&... parts) {
  std::ostringstream message;
  (message << ... << std::forward<Parts>(parts));
  throw StatusError(status, message.str());
}

}  // namespace fusednn
