// SPDX-License-Identifier: Apache-2.0

#include "backends/cuda/exec/host_registration.hpp"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>

#include "backends/cuda/platform/device_memory.hpp"

namespace fusednn::cuda {
namespace {

// A page range fusednn registered, with the number of MappedHostRange objects using it.
struct Registration {
  uintptr_t end = 0;  // one past its last page
  bool read_only = false;
  int users = 0;
};

// fusednn's registrations by their first page; guarded by table_mutex().
std::map<uintptr_t, Registration>& table() {
  static std::map<uintptr_t, Registration> registrations;
  return registrations;
}
std::mutex& table_mutex() {
  static std::mutex mutex;
  return mutex;
}

uintptr_t page_bytes() {
  static const uintptr_t bytes = [] {
    const long size = sysconf(_SC_PAGESIZE);
    return size > 0 ? static_cast<uintptr_t>(size) : uintptr_t{4096};
  }();
  return bytes;
}

// The device address of host memory that is page-locked and mapped; null where it is not.
void* device_address(const void* host) {
  void* device = nullptr;
  if (cudaHostGetDevicePointer(&device, const_cast<void*>(host), 0) != cudaSuccess) {
    cudaGetLastError();  // not sticky: leave nothing for the next check
    return nullptr;
  }
  return device;
}

// Whether the caller page-locked [host, host + bytes) itself: its first and last bytes are
// page-locked host memory whose device addresses are as far apart as their host addresses.
bool locked_by_caller(const void* host, size_t bytes) {
  cudaPointerAttributes first{}, last{};
  const auto* last_byte = static_cast<const unsigned char*>(host) + (bytes - 1);
  if (cudaPointerGetAttributes(&first, host) != cudaSuccess ||
      cudaPointerGetAttributes(&last, last_byte) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  if (first.type != cudaMemoryTypeHost || last.type != cudaMemoryTypeHost) return false;
  if (first.devicePointer == nullptr || last.devicePointer == nullptr) return false;
  return static_cast<const unsigned char*>(last.devicePointer) -
             static_cast<const unsigned char*>(first.devicePointer) ==
         static_cast<std::ptrdiff_t>(bytes - 1);
}

}  // namespace

MappedHostRange::MappedHostRange(const void* host, size_t bytes, bool writable,
                                 const DeviceInfo& device) {
  if (host == nullptr || bytes == 0 || !device.host_register) return;
  const uintptr_t page = page_bytes();
  const auto address = reinterpret_cast<uintptr_t>(host);
  if (bytes > UINTPTR_MAX - page || address > UINTPTR_MAX - page - bytes) return;
  const uintptr_t first = address / page * page;
  const uintptr_t end = (address + bytes + page - 1) / page * page;

  std::lock_guard<std::mutex> lock(table_mutex());
  auto& registrations = table();
  // The registration of ours that starts last at or before `end`, and the one before it: only
  // these can overlap [first, end), since ours never overlap each other.
  auto next = registrations.lower_bound(end);
  if (next != registrations.begin()) {
    auto previous = std::prev(next);
    if (previous->second.end > first) {  // overlaps one of ours
      const bool inside = previous->first <= first && end <= previous->second.end;
      if (!inside || (writable && previous->second.read_only)) return;  // the caller stages
      if (device_address(host) == nullptr) return;
      ++previous->second.users;
      begin_ = reinterpret_cast<const void*>(previous->first);
      mapped_ = true;
      return;
    }
  }
  if (locked_by_caller(host, bytes)) {
    mapped_ = true;  // the caller's registration, used as it is and left alone
    return;
  }
  // Portable: the registration serves contexts on every device, as the table is process-wide.
  unsigned flags = cudaHostRegisterMapped | cudaHostRegisterPortable;
  const bool read_only = !writable && device.host_register_read_only;
  if (read_only) flags |= cudaHostRegisterReadOnly;
  void* start = reinterpret_cast<void*>(first);
  if (!register_host(start, end - first, flags)) return;
  if (device_address(host) == nullptr) {
    unregister_host(start);
    return;
  }
  registrations[first] = Registration{end, read_only, 1};
  begin_ = start;
  mapped_ = true;
}

MappedHostRange::~MappedHostRange() {
  if (begin_ == nullptr) return;
  std::lock_guard<std::mutex> lock(table_mutex());
  auto& registrations = table();
  const auto found = registrations.find(reinterpret_cast<uintptr_t>(begin_));
  if (found == registrations.end()) return;
  if (--found->second.users == 0) {
    unregister_host(const_cast<void*>(begin_));
    registrations.erase(found);
  }
}

void* MappedHostRange::device(const void* host) const {
  return mapped_ ? device_address(host) : nullptr;
}

}  // namespace fusednn::cuda
