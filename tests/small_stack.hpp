// SPDX-License-Identifier: Apache-2.0
// Runs a function on a thread whose stack is small, so that a test fails (the process crashes)
// where code recurses once per level of nesting in its input.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <exception>
#include <functional>
#include <stdexcept>

namespace fusednn::testing {

// 256 KiB: far below the usual 8 MiB main stack and 1-8 MiB thread stacks.
constexpr size_t kSmallStackBytes = size_t{256} << 10;

// Calls `body` on a new thread with a `stack_bytes` stack and waits for it; an exception it
// throws is rethrown here.
inline void run_on_small_stack(const std::function<void()>& body,
                               size_t stack_bytes = kSmallStackBytes) {
  struct Task {
    const std::function<void()>* body;
    std::exception_ptr error;
  } task{&body, nullptr};
  pthread_attr_t attributes;
  if (pthread_attr_init(&attributes) != 0) throw std::runtime_error("pthread_attr_init failed");
  if (pthread_attr_setstacksize(&attributes, stack_bytes) != 0) {
    pthread_attr_destroy(&attributes);
    throw std::runtime_error("pthread_attr_setstacksize failed");
  }
  pthread_t thread;
  const int created = pthread_create(
      &thread, &attributes,
      [](void* argument) -> void* {
        auto* t = static_cast<Task*>(argument);
        try {
          (*t->body)();
        } catch (...) {
          t->error = std::current_exception();
        }
        return nullptr;
      },
      &task);
  pthread_attr_destroy(&attributes);
  if (created != 0) throw std::runtime_error("pthread_create failed");
  pthread_join(thread, nullptr);
  if (task.error) std::rethrow_exception(task.error);
}

}  // namespace fusednn::testing
