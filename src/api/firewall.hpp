// SPDX-License-Identifier: Apache-2.0
// Every extern "C" entry point runs its body through guarded(): exceptions become a status and
// the calling thread's message, prefixed with the entry point's name.
#pragma once

#include <new>
#include <string>

#include "common/error.hpp"

namespace fusednn {

// Records message as this thread's last error and returns status. Never throws.
fdnn_status record_error(fdnn_status status, const char* function, const char* message) noexcept;

template <typename Body>
fdnn_status guarded(const char* function, Body&& body) noexcept {
  try {
    body();
    return FDNN_STATUS_OK;
  } catch (const StatusError& error) {
    return record_error(error.status(), function, error.what());
  } catch (const std::bad_alloc&) {
    return record_error(FDNN_STATUS_OUT_OF_MEMORY, function, "out of host memory");
  } catch (const std::exception& error) {
    return record_error(FDNN_STATUS_INTERNAL_ERROR, function, error.what());
  } catch (...) {
    return record_error(FDNN_STATUS_INTERNAL_ERROR, function, "unknown exception");
  }
}

// This thread's last message; "" before any failure.
const char* last_error_message() noexcept;

// Throws INVALID_ARGUMENT "<what> is NULL" for a null pointer.
template <typename T>
T* require_non_null(T* pointer, const char* what) {
  if (pointer == nullptr) fail(FDNN_STATUS_INVALID_ARGUMENT, what, " is NULL");
  return pointer;
}

}  // namespace fusednn
