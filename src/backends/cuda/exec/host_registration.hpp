// SPDX-License-Identifier: Apache-2.0
// A caller's host buffer made addressable by the device for one mapped host-path run
// (cuda_context.hpp): page-locked and mapped with cudaHostRegister for the lifetime of the
// object, or used as it is where it is page-locked already (cudaHostAlloc'd or registered by
// the caller, which it stays).
//
// Registrations are page-granular and process-wide, while buffers are not: two small buffers
// may share a page, and contexts on other threads may run on neighbouring buffers at once.
// fusednn's own registrations are therefore kept in one table with a count of their users: a
// range inside one of them (registered writable where the run writes) shares it, and the last
// user unregisters it; a range that overlaps one of them only partly is not mapped, and the run
// stages that buffer instead. Failures are never errors here: device() is null and the caller
// stages.
#pragma once

#include <cstddef>

#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

class MappedHostRange {
 public:
  MappedHostRange() = default;
  // Maps [host, host + bytes) for the current device. writable: the device writes into it (an
  // input may instead be registered read-only, where the device supports that).
  MappedHostRange(const void* host, size_t bytes, bool writable, const DeviceInfo& device);
  ~MappedHostRange();
  MappedHostRange(const MappedHostRange&) = delete;
  MappedHostRange& operator=(const MappedHostRange&) = delete;

  // The device's address of `host` (inside the range), or null where the range is not mapped.
  void* device(const void* host) const;
  bool mapped() const { return mapped_; }

 private:
  const void* begin_ = nullptr;  // the table entry this range holds a use of; null when none
  bool mapped_ = false;
};

}  // namespace fusednn::cuda
