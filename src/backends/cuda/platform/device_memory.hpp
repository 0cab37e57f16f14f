// SPDX-License-Identifier: Apache-2.0
// Owners for everything the CUDA backend allocates: device and pinned memory, streams, events
// and graphs. Each acquires in its constructor (throwing through FDNN_CUDA_CHECK) and releases in
// its destructor, so an exception anywhere during a load or context creation leaks nothing.
// Destructors ignore errors: a release that fails (a dead context) has nothing left to free.
// Device and pinned memory, host registrations and graph instantiations go through the functions
// below (device_memory.cpp), the one place where a test build can make an acquisition fail
// (allocation_faults.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "backends/cuda/platform/cuda_check.hpp"

namespace fusednn::cuda {

// Makes `device` current for a scope and restores the previous device after it.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    FDNN_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) {
      FDNN_CUDA_CHECK(cudaSetDevice(device));
      changed_ = true;
    }
  }
  ~DeviceScope() {
    if (changed_) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

// count elements of element_bytes each; throws OUT_OF_MEMORY when the product overflows or the
// allocation fails. Null for 0 bytes.
void* allocate_device(size_t count, size_t element_bytes);
void free_device(void* memory) noexcept;
void* allocate_pinned(size_t count, size_t element_bytes);
void free_pinned(void* memory) noexcept;
// Page-locks [host, host + bytes) with cudaHostRegister and `flags`; false (the CUDA error
// cleared, nothing held) where it cannot be: a registration that fails is not an error to the
// callers, which fall back to staging (host_registration.hpp). Never throws.
bool register_host(void* host, size_t bytes, unsigned flags) noexcept;
void unregister_host(void* host) noexcept;
// The executable graph of `graph`; throws as FDNN_CUDA_CHECK does.
cudaGraphExec_t instantiate_graph(cudaGraph_t graph);
void destroy_graph_exec(cudaGraphExec_t exec) noexcept;

template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(size_t count)
      : data_(static_cast<T*>(allocate_device(count, sizeof(T)))), count_(count) {}
  ~DeviceArray() {
    if (data_) free_device(data_);
  }
  DeviceArray(DeviceArray&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* data() const { return data_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

// Page-locked host memory: the host path's staging, so copies are true asynchronous DMA.
template <typename T>
class PinnedArray {
 public:
  PinnedArray() = default;
  explicit PinnedArray(size_t count)
      : data_(static_cast<T*>(allocate_pinned(count, sizeof(T)))), count_(count) {}
  ~PinnedArray() {
    if (data_) free_pinned(data_);
  }
  PinnedArray(PinnedArray&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  PinnedArray& operator=(PinnedArray&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;

  T* data() const { return data_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

// A stream that does not synchronise with the legacy default stream.
class Stream {
 public:
  Stream() { FDNN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~Stream() {
    if (stream_) cudaStreamDestroy(stream_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// An event used only for ordering, not timing.
class Event {
 public:
  Event() { FDNN_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  ~Event() {
    if (event_) cudaEventDestroy(event_);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

class Graph {
 public:
  Graph() = default;
  explicit Graph(cudaGraph_t graph) : graph_(graph) {}
  ~Graph() {
    if (graph_) cudaGraphDestroy(graph_);
  }
  Graph(Graph&& other) noexcept : graph_(std::exchange(other.graph_, nullptr)) {}
  Graph& operator=(Graph&& other) noexcept {
    std::swap(graph_, other.graph_);
    return *this;
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  cudaGraph_t get() const { return graph_; }

 private:
  cudaGraph_t graph_ = nullptr;
};

class GraphExec {
 public:
  GraphExec() = default;
  // Instantiates `graph` (instantiate_graph).
  explicit GraphExec(cudaGraph_t graph) : exec_(instantiate_graph(graph)) {}
  ~GraphExec() {
    if (exec_) destroy_graph_exec(exec_);
  }
  GraphExec(GraphExec&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}
  GraphExec& operator=(GraphExec&& other) noexcept {
    std::swap(exec_, other.exec_);
    return *this;
  }
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  cudaGraphExec_t get() const { return exec_; }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace fusednn::cuda
