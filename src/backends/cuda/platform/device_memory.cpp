// SPDX-License-Identifier: Apache-2.0

#include "backends/cuda/platform/device_memory.hpp"

#include "common/checked_math.hpp"

#ifdef FUSEDNN_FAULT_INJECTION
#include <atomic>

#include "backends/cuda/platform/allocation_faults.hpp"
#endif

namespace fusednn::cuda {
namespace {

#ifdef FUSEDNN_FAULT_INJECTION
std::atomic<int64_t> fail_at{0};
std::atomic<int64_t> attempt_count{0};
std::atomic<int64_t> injected_count{0};
std::atomic<int64_t> live_count{0};

// Counts an acquisition; true when it is the one chosen to fail.
bool inject_failure() {
  const int64_t attempt = ++attempt_count;
  const int64_t chosen = fail_at.load();
  if (chosen > 0 && attempt == chosen) {
    ++injected_count;
    return true;
  }
  return false;
}
void count_acquired() { ++live_count; }
void count_released() { --live_count; }
#else
constexpr bool inject_failure() { return false; }
constexpr void count_acquired() {}
constexpr void count_released() {}
#endif

// An acquisition `call` (its name, for the message) as a failed allocation.
[[noreturn]] void fail_injected(const char* call, int line) {
  throw_cuda_error(cudaErrorMemoryAllocation, call, __FILE__, line);
}

size_t byte_count(size_t count, size_t element_bytes, const char* what) {
  return checked_multiply(count, element_bytes, FDNN_STATUS_OUT_OF_MEMORY, "the bytes of a ", what,
                          " allocation");
}

}  // namespace

void* allocate_device(size_t count, size_t element_bytes) {
  const size_t bytes = byte_count(count, element_bytes, "device");
  if (bytes == 0) return nullptr;
  if (inject_failure()) fail_injected("cudaMalloc (failure injected by a test)", __LINE__);
  void* memory = nullptr;
  FDNN_CUDA_CHECK(cudaMalloc(&memory, bytes));
  count_acquired();
  return memory;
}

void free_device(void* memory) noexcept {
  if (memory == nullptr) return;
  cudaFree(memory);
  count_released();
}

void* allocate_pinned(size_t count, size_t element_bytes) {
  const size_t bytes = byte_count(count, element_bytes, "pinned host");
  if (bytes == 0) return nullptr;
  if (inject_failure()) fail_injected("cudaMallocHost (failure injected by a test)", __LINE__);
  void* memory = nullptr;
  FDNN_CUDA_CHECK(cudaMallocHost(&memory, bytes));
  count_acquired();
  return memory;
}

void free_pinned(void* memory) noexcept {
  if (memory == nullptr) return;
  cudaFreeHost(memory);
  count_released();
}

bool register_host(void* host, size_t bytes, unsigned flags) noexcept {
  if (host == nullptr || bytes == 0 || inject_failure()) return false;
  if (cudaHostRegister(host, bytes, flags) != cudaSuccess) {
    cudaGetLastError();  // not sticky: leave nothing for the next check
    return false;
  }
  count_acquired();
  return true;
}

void unregister_host(void* host) noexcept {
  if (host == nullptr) return;
  if (cudaHostUnregister(host) != cudaSuccess) cudaGetLastError();
  count_released();
}

cudaGraphExec_t instantiate_graph(cudaGraph_t graph) {
  if (inject_failure())
    fail_injected("cudaGraphInstantiate (failure injected by a test)", __LINE__);
  cudaGraphExec_t exec = nullptr;
#if CUDART_VERSION >= 12000
  FDNN_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
#else
  // CUDA 11 (the Jetson builds): cudaGraphInstantiate has the older signature; this is the same
  // call with no flags.
  FDNN_CUDA_CHECK(cudaGraphInstantiateWithFlags(&exec, graph, 0));
#endif
  count_acquired();
  return exec;
}

void destroy_graph_exec(cudaGraphExec_t exec) noexcept {
  if (exec == nullptr) return;
  cudaGraphExecDestroy(exec);
  count_released();
}

#ifdef FUSEDNN_FAULT_INJECTION
namespace allocation_faults {

void fail_nth(int64_t n) {
  fail_at = 0;
  attempt_count = 0;
  injected_count = 0;
  fail_at = n;
}

int64_t attempts() { return attempt_count.load(); }
int64_t injected() { return injected_count.load(); }
int64_t live() { return live_count.load(); }

}  // namespace allocation_faults
#endif

}  // namespace fusednn::cuda
